"""ArviZ's InferenceData from the draws of the sampling families (MCMC chains, SMC particles).

ArviZ (Kumar et al. 2019, "ArviZ a unified library for exploratory analysis
of Bayesian models in Python") is an optional dependency, imported when
:meth:`InferenceDataMixin.to_inference_data` is called.
"""

import numpy as np
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
    """

    def to_inference_data(self):
        """The draws as an ArviZ ``InferenceData``: every ArviZ diagnostic and plot applies.

        Groups:

        - ``posterior``: one variable per parameter tensor of the network,
          named as in ``module.named_parameters()`` and shaped
          ``(chain, draw, *tensor shape)``, in the network's units (the
          standardised target when ``normalize_y=True``); ``noise_std``
          (regressors with a sampled or fixed homoscedastic noise), in the
          units of y, with dimension ``target``; ``prior_precision`` (when
          the precisions are sampled), with dimension ``group`` named by the
          keys of ``prior_precisions_``.
        - ``sample_stats``: the sampler's per-draw statistics (see the
          estimator's own documentation).

        Requires ArviZ (``pip install 'sklearn_quinn[arviz]'``).

        Returns
        -------
        inference_data : arviz.InferenceData
        """
        check_is_fitted(self)
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
        return arviz.from_dict(
            posterior=posterior,
            sample_stats=sample_stats,
            dims=dims,
            coords=coords,
            attrs={"inference_library": "sklearn_quinn", "estimator": type(self).__name__},
            sample_stats_attrs=attrs,
        )
