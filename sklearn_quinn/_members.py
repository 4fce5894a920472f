"""Networks trained from their own initial weights under the MAP's learned prior and noise.

MultiSWAG's members and MCMC's chain starts are such networks: each descends
into its own basin of the posterior, as a deep ensemble's members do, and the
family then explores around each (Wilson & Izmailov 2020, "Bayesian deep
learning and a probabilistic perspective of generalization").
"""

import torch

from ._core.network import FunctionalModel
from .ensemble._engine import finish_members, train_members


class MemberTrainingMixin:
    """``_train_members`` for a family that starts from the evidence MAP and adds members beside it."""

    def _train_members(self, X, Y, targets, prior, noise_std, seeds, desc):
        """The weights ``(J, K)`` of ``J = len(seeds)`` networks, each trained from its own initial
        weights (``seeds[:, 0]``; its minibatch order from ``seeds[:, 1]``) by the MAP's training
        (:func:`~sklearn_quinn.ensemble._engine.train_members`) on the MAP's ``targets``, under its
        learned ``prior`` and noise ``noise_std`` held fixed: shared, not fitted per network, for
        the ensembles' reason (a noise each member fits itself shrinks as it over-fits). A
        regressor's networks then end at their modes, as the MAP's training does
        (``_members_end_at_modes``): Adam's minibatch steps can stop short of them, far short on
        targets far from unit scale (``normalize_y=False``)."""
        n_members = len(seeds)
        if n_members == 0:
            return torch.empty(0, self._model.n_params, dtype=self._dtype, device=self._device)
        initial, module = self._initial_weights(X.shape[1], self._n_outputs(Y), seeds[:, 0])
        model, X, targets = FunctionalModel(module), X.astype(self.dtype), targets.astype(self.dtype)
        members = dict(subsets=torch.arange(len(X)).repeat(n_members, 1), anchors=torch.zeros_like(initial),
                       perturbations=None)
        likelihood = self._likelihood(Y, leading_shape=(n_members, 1), noise_std=noise_std)
        theta = train_members(
            model,
            initial,
            X,
            targets,
            **members,
            likelihood=likelihood,
            prior_precision=prior.precision,
            seeds=seeds[:, 1],
            batch_size=self._batch_size(len(X)),
            lr=self.lr,
            lr_schedule=self.lr_schedule,
            max_epochs=self._n_epochs(len(X)),
            optimizer=self.optimizer,
            callbacks=self._callbacks(),
            device=self._device,
            verbose=self.verbose,
            desc=desc,
        ).theta
        if not self._members_end_at_modes:
            return theta
        return finish_members(model, theta, X, targets, **members, likelihood=likelihood,
                              prior_precision=prior.precision)
