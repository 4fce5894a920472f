"""Shared machinery of the classifiers: labels, the categorical likelihood, predict_proba."""

import numpy as np
import torch
from sklearn.base import ClassifierMixin
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import column_or_1d, validate_data

from ._core.likelihoods import CategoricalLikelihood
from ._core.link_approximations import PREDICTIVES, predictive_probabilities
from ._core.pushforward import GaussianPredictive
from ._core.rng import prediction_generator
from .base import VALIDATION, BaseBayesianNetwork, dense_rows

#: Logit draws of the 'mc_bridge' predictive.
MC_BRIDGE_SAMPLES = 1000


class BaseBayesianClassifier(ClassifierMixin, BaseBayesianNetwork):
    """Base class of the classifiers: softmax over the network's logits.

    A family fits ``posterior_`` and may override :meth:`_outputs` (the
    distribution of the logits at ``X``: a Gaussian from a linear pushforward,
    or draws). :meth:`predict_proba` turns it into class probabilities with
    ``predictive``: for a Gaussian, one of the analytic predictives or
    ``'mc_bridge'``; for draws, the softmax averaged over them (``predictive=
    None``) or, with ``moment_match=True``, a predictive applied to the
    Gaussian fitted to the draws' logits.
    """

    #: Whether networks trained beside the MAP end at their modes: not a classifier's. Its mode on
    #: nearly separable classes is more confident than where Adam stops, and there its ensemble
    #: members' test NLL rose, on iris, or stayed (docs: ensembles).
    _members_end_at_modes = False

    def _validate_training_data(self, X, y):
        """Validated ``X`` and the class indices as one float column ``(N, 1)``; sets ``classes_``."""
        X, y = validate_data(self, X, y, **VALIDATION)
        X = dense_rows(X)
        check_classification_targets(y)
        classes, index = np.unique(y, return_inverse=True)
        if len(classes) < 2:  # refused before classes_ is set: a refit on bad data leaves the earlier fit whole
            raise ValueError(
                f"{type(self).__name__} needs samples of at least 2 classes in the data, "
                f"but the data contain only one class: {classes[0]!r}."
            )
        self.classes_ = classes
        return X, index.reshape(-1, 1).astype(np.float64)

    def _n_outputs(self, Y):
        return len(self.classes_)

    def _outputs_meaning(self, n_outputs):
        """What a user's module's output columns must be (for its error message)."""
        return f"one logit per class in classes_ ({n_outputs}; a binary problem takes two, not one)"

    def _likelihood(self, Y, leading_shape=(), noise_std=None):
        return CategoricalLikelihood()

    def _keep_noise(self, noise_std):
        """A categorical likelihood has no noise to keep."""

    def _draws_log_likelihood(self, outputs, y):
        """``log p(y_n | draw s)``, ``(S, N)``, for draws' logits ``(S, N, C)`` and class labels ``y``."""
        y = column_or_1d(y)
        if len(y) != outputs.shape[1]:
            raise ValueError(f"y has {len(y)} labels; expected {outputs.shape[1]}, one per row of X.")
        known = np.isin(y, self.classes_)
        if not known.all():
            raise ValueError(f"y holds labels not seen in fit: {np.unique(y[~known]).tolist()!r}.")
        Y = self._tensor(np.searchsorted(self.classes_, y).reshape(-1, 1).astype(np.float64))
        return self._likelihood(Y).log_prob(outputs, Y.expand(len(outputs), -1, -1))

    def _log_y_scale_total(self, n_rows):
        """Class labels need no change of units: densities are the network's."""
        return 0.0

    def _check_parameters(self):
        super()._check_parameters()
        self._check_predictive()

    def _check_predictive(self):
        """Fail where ``predictive`` needs a Gaussian over the logits that the family lacks (the
        family says whether it has one in ``_gaussian_logits``), or ``moment_match`` fits one for
        no predictive to use: at fit, and again at predict, after any ``set_params``."""
        if self._gaussian_logits:
            return
        moment_match = getattr(self, "moment_match", False)
        if self.predictive is not None and not moment_match:
            raise ValueError(
                f"predictive={self.predictive!r} needs a Gaussian over the logits, and "
                f"{type(self).__name__} predicts from weight draws. Set moment_match=True to fit a "
                "Gaussian to the draws' logits, or predictive=None to average the softmax over the draws."
            )
        if self.predictive is None and moment_match:
            raise ValueError(
                "moment_match=True fits a Gaussian to the draws' logits for a predictive to apply to, and "
                "predictive=None averages the softmax over the draws instead. Choose a predictive (e.g. "
                "'mc_bridge') or set moment_match=False."
            )

    # -------------------------------------------------------------- predict
    #: Whether the family's :meth:`_outputs` is a Gaussian over the logits
    #: (a linear pushforward), to which every ``predictive`` applies.
    _gaussian_logits = False

    def _log_probabilities(self, logits):
        """The log class probabilities ``(N, C)`` from a distribution of the logits, computed in logs:
        a probability that underflows keeps its finite log. Draws of the logits average their softmax,
        unless ``moment_match`` fits them a Gaussian for ``predictive``."""
        if not isinstance(logits, GaussianPredictive) and not getattr(self, "moment_match", False):
            return logits.log_average(torch.log_softmax(logits.samples, dim=-1))
        return self._gaussian_log_probabilities(logits.mean, logits.output_covariance())

    def _gaussian_log_probabilities(self, mean, covariance):
        """``predictive``'s log probabilities of the Gaussian ``N(mean, covariance)`` over the logits
        (``mc_bridge`` with the same draws at every call)."""
        return predictive_probabilities(
            self.predictive, mean, covariance, generator=prediction_generator(self._sample_seed),
            n_samples=MC_BRIDGE_SAMPLES, log=True,
        )

    def _summarise(self, logits, noise_std=None):
        """Class probabilities (float64, rows summing to one) from a distribution of the logits."""
        return np.exp(self._log_proba_array(self._log_probabilities(logits)))

    def _summarise_gaussian(self, mean, covariance, noise_std=None):
        """Class probabilities from the logits' mean ``(N, C)`` and covariance ``(N, C, C)``."""
        return np.exp(self._log_proba_array(self._gaussian_log_probabilities(mean, covariance)))

    def predict_proba(self, X):
        """Predictive class probabilities.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Columns in the order of ``classes_``; rows sum to one.
        """
        return np.exp(self.predict_log_proba(X))

    def _log_proba_array(self, log_probabilities):
        """The float64 array ``predict_log_proba`` returns: rows renormalised, in logs, to probabilities
        summing to one."""
        log_probabilities = log_probabilities.double()
        return self._to_numpy(log_probabilities - torch.logsumexp(log_probabilities, dim=1, keepdim=True))

    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`, computed in logs: finite where a probability
        underflows to zero.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes)
        """
        def predict_rows(rows):
            with torch.no_grad():
                return self._log_proba_array(self._log_probabilities(self._outputs(rows)))

        X = self._validated_inputs(X)
        self._check_predictive()
        return self._by_row_blocks(predict_rows, X)

    def predict(self, X):
        """The most probable class under the predictive.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        y : ndarray of shape (n_samples,)
        """
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]


#: Constraint of ``predictive`` for families with a Gaussian over the logits.
GAUSSIAN_PREDICTIVES = [StrOptions(set(PREDICTIVES))]
#: Constraint of ``predictive`` for families with weight draws (None: average the softmax).
SAMPLE_PREDICTIVES = [None, StrOptions(set(PREDICTIVES))]
