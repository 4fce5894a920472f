"""ArviZ's InferenceData from the draws of the sampling families (MCMC chains, SMC particles).

ArviZ (Kumar et al. 2019, "ArviZ a unified library for exploratory analysis
of Bayesian models in Python") is an optional dependency, imported when
:meth:`InferenceDataMixin.to_inference_data` is called.
"""

import numpy as np
import torch
from sklearn.utils.validation import check_is_fitted


def _arviz():
    try:
        import arviz
    except ImportError:
        raise ImportError(
            "to_inference_data needs ArviZ: pip install 'sklearn_quinn[arviz]' (or arviz)."
        ) from None
    return arviz


class InferenceDataMixin:
    """``to_inference_data()`` for a family that keeps draws in chains.

    The family gives the shape of its draws, ``_chain_shape() -> (n_chains,
    n_draws)`` (its kept rows are ``posterior_.samples`` in chain-major order),
    and its per-draw statistics, ``_sample_stats() -> (dict, attrs)``: arrays of
    shape ``(n_chains, n_draws)``, and attributes of the ``sample_stats`` group.
    The task base gives ``_draws_log_likelihood(outputs, y) -> (S, N)``.
    """

    def to_inference_data(self, X=None, y=None):
        """The draws as an ArviZ ``InferenceData``: every ArviZ diagnostic and plot applies.

        Groups:

        - ``posterior``: one variable per parameter tensor of the network,
          named as in ``module.named_parameters()`` and shaped
          ``(chain, draw, *tensor shape)``, in the network's units (the
          standardised inputs when ``normalize_X=True``, the standardised
          target when ``normalize_y=True``); ``noise_std``
          (regressors with a sampled or fixed homoscedastic noise), in the
          units of y, with dimension ``target``; ``prior_precision`` (when
          the precisions are sampled), with dimension ``group`` named by the
          keys of ``prior_precisions_``.
        - ``sample_stats``: the sampler's per-draw statistics (see the
          estimator's own documentation).
        - With ``X`` and ``y``: ``log_likelihood``, the log density of each
          row's ``y`` under each draw (variable ``y``, dimensions ``(chain,
          draw, y_dim_0)``, in the units of y; each draw with its own noise),
          for ``arviz.loo`` and ``arviz.waic``; and ``observed_data``.

        Requires ArviZ (``pip install 'sklearn_quinn[arviz]'``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), default=None
            Rows to score, usually the training rows.
        y : array-like of shape (n_samples,) or (n_samples, n_targets), default=None
            Their targets (class labels for a classifier).

        Returns
        -------
        inference_data : arviz.InferenceData

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_quinn import MCMCRegressor
        >>> rng = np.random.RandomState(0)
        >>> X = rng.randn(40, 2)
        >>> y = X @ [1.0, -0.5] + 0.3 * rng.randn(40)
        >>> model = MCMCRegressor(hidden_layer_sizes=(4,), n_chains=2, n_burnin=50, n_samples=50,
        ...                       max_epochs=50, random_state=0).fit(X, y)
        >>> idata = model.to_inference_data(X, y)
        >>> idata.log_likelihood["y"].shape
        (2, 50, 40)
        """
        check_is_fitted(self)
        if (X is None) != (y is None):
            raise ValueError("to_inference_data scores rows given both X and y; got only one of them.")
        arviz = _arviz()
        n_chains, n_draws = self._chain_shape()

        def per_draw(rows):
            return np.asarray(rows).reshape(n_chains, n_draws, *np.shape(rows)[1:])

        theta = self.posterior_.samples.reshape(n_chains, n_draws, -1)
        posterior = {name: self._to_numpy(values) for name, values in self._model.unflatten(theta).items()}
        dims, coords = {}, {}
        if getattr(self, "_draw_noise", None) is not None:
            posterior["noise_std"] = per_draw(self._to_numpy(self._draw_noise) * self._y_scale)
            dims["noise_std"] = ["target"]
        if getattr(self, "prior_precision_samples_", None) is not None:
            posterior["prior_precision"] = per_draw(self.prior_precision_samples_)
            dims["prior_precision"] = ["group"]
            coords["group"] = list(self.prior_precisions_)
        sample_stats, attrs = self._sample_stats()
        scored = {}
        if X is not None:
            X = self._validated_inputs(X)
            with torch.no_grad():
                outputs = self._model(self.posterior_.samples, X)
                log_likelihood = self._draws_log_likelihood(outputs, y)
            scored = {"log_likelihood": {"y": per_draw(self._to_numpy(log_likelihood))},
                      "observed_data": {"y": np.asarray(y)}}
        return arviz.from_dict(
            posterior=posterior,
            sample_stats=sample_stats,
            **scored,
            dims=dims,
            coords=coords,
            attrs={"inference_library": "sklearn_quinn", "estimator": type(self).__name__},
            sample_stats_attrs=attrs,
        )
