"""The skorch training loop of the package (``_map.train_net``): what its history records, and its batch hooks."""

import math
import threading
import types
import warnings

import numpy as np
import pytest
import torch
from sklearn.exceptions import ConvergenceWarning
from skorch.callbacks import Callback, Checkpoint, EarlyStopping, LoadInitState, TrainEndCheckpoint, WandbLogger
from skorch.dataset import Dataset
from torch import nn

from sklearn_quinn import DeepEnsembleRegressor, LaplaceClassifier, LaplaceRegressor
from sklearn_quinn._core.evidence import ParameterGroups
from sklearn_quinn._core.likelihoods import CategoricalLikelihood, HeteroscedasticGaussianLikelihood
from sklearn_quinn._core.network import FunctionalModel, build_mlp
from sklearn_quinn._map import (
    EvidenceMaximisation,
    FlatPosteriorLoss,
    NegativeLogPosterior,
    PosteriorNet,
    TensorBatches,
    batch_slices,
    evidence_epochs,
    fit_map,
    gaussian_likelihood,
    polish,
    train_net,
    warn_unless_below_zero_weights,
)

from .exact import BayesianLinearRegression

NOISE, PRIOR_STD = 0.3, 2.0


class BatchLosses(Callback):
    """Keeps the loss and the rows of every training batch, through skorch's batch hook."""

    def on_train_begin(self, net, **kwargs):
        self.losses_, self.rows_ = [], []

    def on_batch_end(self, net, batch=None, training=False, loss=None, **kwargs):
        self.losses_.append(loss.item())
        self.rows_.append(len(batch[0]))


class GradientCalls(Callback):
    """Counts skorch's gradient hook."""

    def on_train_begin(self, net, **kwargs):
        self.calls_ = 0

    def on_grad_computed(self, net, named_parameters, **kwargs):
        self.calls_ += 1


def train(callbacks=None, batch_size=16, max_epochs=3, lr=0.01, lr_schedule="cosine", finish=True):
    rng = np.random.RandomState(0)
    X = rng.randn(50, 3)
    Y = X @ rng.randn(3, 1) + 0.1 * rng.randn(50, 1)
    torch.manual_seed(0)
    module = build_mlp(3, 1, (8,), "relu").double()
    likelihood = gaussian_likelihood(Y, None, torch.float64, "cpu")
    net = fit_map(module, X, Y, prior_precision=1.0, likelihood=likelihood, lr=lr, lr_schedule=lr_schedule,
                  max_epochs=max_epochs, batch_size=batch_size, optimizer=torch.optim.Adam,
                  callbacks=callbacks, device="cpu", seed=0, verbose=0, finish=finish)
    return net, module


def test_history_records_each_epoch_without_per_batch_entries():
    net, _ = train()
    assert len(net.history) == 3
    assert net.history[:, "epoch"] == [1, 2, 3]
    assert all(np.isfinite(net.history[:, "train_loss"])) and all(d >= 0 for d in net.history[:, "dur"])
    assert net.history[-1, "batches"] == []


def test_history_marks_the_lowest_training_loss_so_far_as_skorch_does():
    """``train_loss_best``, which skorch's scoring records and its callbacks (``EarlyStopping``,
    ``PrintLog``'s highlight) read: True where an epoch's loss is below every earlier one. A constant
    learning rate of 0.3 makes some epochs' losses rise, so that both values occur."""
    net, _ = train(max_epochs=30, lr=0.3, lr_schedule="constant", finish=False)
    losses = net.history[:, "train_loss"]
    expected = [loss < min(losses[:epoch], default=np.inf) for epoch, loss in enumerate(losses)]
    assert net.history[:, "train_loss_best"] == expected
    assert True in expected and False in expected


@pytest.mark.parametrize("estimator", [LaplaceRegressor, LaplaceClassifier])
def test_a_training_that_ends_worse_than_zero_weights_warns(estimator):
    """At lr=300 Adam throws the weights into the thousands, and the trained network fits its training
    rows worse than itself with every weight at zero, which no mode of a posterior under a zero-mean
    prior can: the fit says so (it had said nothing, with a regressor's training RMSE 90 times the
    targets' spread on diabetes at lr=30). At the default rate it does not."""
    rng = np.random.RandomState(0)
    X = rng.randn(400, 3)
    y = X[:, 0] + np.sin(X[:, 1]) + 0.3 * rng.randn(400)
    X, y = X[:200], (y[:200] > 0).astype(int) if estimator is LaplaceClassifier else y[:200]
    message = "worse than the same network with every weight at zero"
    with pytest.warns(ConvergenceWarning, match=message):
        estimator(lr=300.0, max_epochs=100, random_state=0).fit(X, y)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        estimator(max_epochs=100, random_state=0).fit(X, y)
    assert not [warning for warning in caught if message in str(warning.message)]


def zero_weights_check_warns(module, Y, X=None):
    """Whether :func:`warn_unless_below_zero_weights` warns for ``module`` on rows ``X`` (default
    ``Y``'s count of zeros, 2 columns) and targets ``Y`` under a unit Gaussian noise."""
    X = np.zeros((len(Y), 2)) if X is None else X
    criterion = NegativeLogPosterior(len(Y), 1.0, gaussian_likelihood(Y, 1.0, torch.float64, "cpu"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warn_unless_below_zero_weights(types.SimpleNamespace(module_=module, criterion_=criterion), X, Y, 0.01)
    return any("every weight at zero" in str(warning.message) for warning in caught)


@pytest.mark.parametrize("excess, warns", [(0.5, False), (2.0, True)])
def test_the_zero_weights_check_warns_past_its_rounding_tolerance(excess, warns):
    """A linear module with zero weights and an output bias ``b`` on centred targets misfits by ``b^2 / 2``
    a row more than the zero network: half the tolerance ``sqrt(eps) (1 + |misfit at zero|)`` passes,
    twice it warns."""
    Y = np.random.RandomState(0).randn(50, 1)
    Y -= Y.mean()
    at_zero = 0.5 * np.mean(Y**2) + 0.5 * np.log(2 * np.pi)
    module = nn.Linear(2, 1).double()
    with torch.no_grad():
        module.weight.zero_()
        module.bias.fill_(np.sqrt(2 * excess * np.sqrt(np.finfo(float).eps) * (1 + at_zero)))
    assert zero_weights_check_warns(module, Y) == warns


def test_the_zero_weights_check_warns_of_a_nan_fit_and_skips_what_it_cannot_judge():
    """A trained misfit of NaN warns; a module whose zero weights give no finite misfit (a weight norm
    divides by them) and targets equal on every row (the zero network is their mode, and a trained
    network's tiny residuals cost more at a noise with nothing to learn from) are not judged: a healthy
    weight-normed fit and a constant target's had warned."""
    Y = np.random.RandomState(0).randn(50, 1)
    nan_module = nn.Linear(2, 1).double()
    with torch.no_grad():
        nan_module.bias.fill_(float("nan"))
    assert zero_weights_check_warns(nan_module, Y)
    normed = nn.utils.parametrizations.weight_norm(nn.Linear(2, 1).double())
    assert not zero_weights_check_warns(normed, Y, X=np.random.RandomState(1).randn(50, 2))
    far_off = nn.Linear(2, 1).double()
    with torch.no_grad():
        far_off.bias.fill_(100.0)
    assert not zero_weights_check_warns(far_off, np.zeros((50, 1)))


def test_the_zero_weights_check_tolerance_grows_with_the_size_of_a_negative_misfit():
    """Under a noise of 0.01 the zero network's misfit of targets near 0 is negative (the log of the
    noise dominates), and the tolerance is ``sqrt(eps) (1 + |misfit at zero|)``: an output bias that
    costs half of it passes, twice it warns. Read as ``1 + misfit``, the tolerance would be below
    zero, and a tie with the zero network warn."""
    rng = np.random.RandomState(0)
    Y = 1e-3 * rng.randn(50, 1)
    Y -= Y.mean()
    noise = 0.01
    at_zero = 0.5 * np.mean(Y**2) / noise**2 + np.log(noise) + 0.5 * np.log(2 * np.pi)
    assert at_zero < -1
    criterion = NegativeLogPosterior(50, 1.0, gaussian_likelihood(Y, noise, torch.float64, "cpu"))
    for excess, warns in [(0.5, False), (2.0, True)]:
        module = nn.Linear(2, 1).double()
        with torch.no_grad():
            module.weight.zero_()
            # A bias b adds b**2 / (2 noise**2) a row to the misfit of centred targets.
            module.bias.fill_(noise * np.sqrt(2 * excess * np.sqrt(np.finfo(float).eps) * (1 + abs(at_zero))))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            warn_unless_below_zero_weights(types.SimpleNamespace(module_=module, criterion_=criterion),
                                           np.zeros((50, 2)), Y, lr=0.01)
        assert any("every weight at zero" in str(warning.message) for warning in caught) == warns


def test_a_learned_noise_starts_at_the_targets_std_and_a_fixed_one_as_given():
    """``gaussian_likelihood``: a learned noise (``noise_std=None``) starts at the std of the targets
    (ddof 0, here 2.0 for -2 and 2), at least 1e-3 (constant targets), one per output and leading
    index; a fixed one is the given std, not trained."""
    Y = np.array([[-2.0, 1.0], [2.0, 1.0]])
    learned = gaussian_likelihood(Y, None, torch.float64, "cpu", leading_shape=(3,))
    torch.testing.assert_close(learned.log_noise_std.exp(), torch.full((3, 2), np.std(Y), dtype=torch.float64))
    assert learned.log_noise_std.requires_grad
    constant = gaussian_likelihood(np.ones((4, 1)), None, torch.float64, "cpu")
    torch.testing.assert_close(constant.log_noise_std.exp(), torch.full((1,), 1e-3, dtype=torch.float64))
    fixed = gaussian_likelihood(Y, np.array([0.5, 0.25]), torch.float64, "cpu")
    torch.testing.assert_close(fixed.log_noise_std.exp(), torch.tensor([0.5, 0.25], dtype=torch.float64))
    assert not fixed.log_noise_std.requires_grad


def test_batch_hooks_reach_callbacks_and_the_epoch_loss_is_the_row_weighted_mean():
    """A callback with a batch hook gets every batch (50 rows in batches of 16: 16, 16, 16, 2)
    and skorch's per-batch history; the epoch's loss weights each batch by its rows, as skorch's
    own scoring does; the arithmetic of the training is the same as without the hook."""
    hook = BatchLosses()
    net, module = train(callbacks=[("losses", hook)], max_epochs=1)
    assert hook.rows_ == [16, 16, 16, 2]
    assert [batch["train_batch_size"] for batch in net.history[-1, "batches"]] == hook.rows_
    assert net.history[-1, "train_loss"] == pytest.approx(np.average(hook.losses_, weights=hook.rows_), rel=1e-12)
    _, without_hook = train(max_epochs=1)
    for with_hook, plain in zip(module.parameters(), without_hook.parameters()):
        torch.testing.assert_close(with_hook, plain, rtol=0, atol=0)


def test_a_gradient_hook_acts_on_every_step():
    """A callback's ``on_grad_computed`` runs at every step (3 epochs of 4 batches): training goes
    through skorch's own step then, as skorch's gradient clipping needs."""
    counter = GradientCalls()
    train(callbacks=[("counter", counter)])
    assert counter.calls_ == 12


def test_the_lean_step_goes_through_infer_and_get_loss():
    """Without batch hooks the step skips skorch's ``train_step`` but not the
    net's ``infer`` and ``get_loss``: a subclass's overrides act on every step
    (2 epochs of 4 batches)."""
    calls = []

    class Recording(PosteriorNet):
        def infer(self, x, **fit_params):
            calls.append("infer")
            return super().infer(x, **fit_params)

        def get_loss(self, y_pred, y_true, X=None, training=False):
            calls.append(("get_loss", training))
            return super().get_loss(y_pred, y_true, X=X, training=training)

    rng = np.random.RandomState(0)
    X, Y = rng.randn(50, 3), rng.randn(50, 1)
    module = build_mlp(3, 1, (8,), "relu").double()
    criterion = NegativeLogPosterior(50, 1.0, gaussian_likelihood(Y, 1.0, torch.float64, "cpu"))
    net = Recording(module=module, criterion=criterion, optimizer=torch.optim.SGD, lr=0.01, max_epochs=2,
                    train_split=None, iterator_train=TensorBatches, batch_size=16, verbose=0).fit(X, Y)
    assert not net._hooks_within_epochs  # the lean path, not skorch's train_step
    assert calls == ["infer", ("get_loss", True)] * 8


def test_the_training_is_adam_over_seeded_shuffled_minibatches_under_a_cosine_schedule():
    """Without the polish, fit_map's training is exactly plain Adam on the negative log posterior
    per point (the Gaussian misfit averaged over the batch plus ``delta ||theta||^2 / (2 N)``),
    over the rows in a fresh permutation each epoch from one generator seeded with ``seed``, in batches
    of 16 (50 rows: 16, 16, 16, 2), at the rate ``lr (1 + cos(pi e / E)) / 2`` in epoch ``e`` of
    ``E``; each epoch's recorded loss is the row-weighted mean of its steps' losses before their
    updates. A hand-written torch loop doing the same steps gives the same weights to rounding."""
    rng = np.random.RandomState(0)
    X = rng.randn(50, 3)
    Y = X @ rng.randn(3, 1) + 0.3 * rng.randn(50, 1)
    noise, precision, lr, epochs, seed = 0.5, 0.7, 0.05, 4, 3
    torch.manual_seed(0)
    module = nn.Linear(3, 1).double()
    reference = [p.detach().clone().requires_grad_() for p in module.parameters()]
    net = fit_map(module, X, Y, prior_precision=precision, likelihood=gaussian_likelihood(Y, noise, torch.float64,
                  "cpu"), lr=lr, lr_schedule="cosine", max_epochs=epochs, batch_size=16, optimizer=torch.optim.Adam,
                  callbacks=None, device="cpu", seed=seed, verbose=0, finish=False)

    X_t, Y_t = torch.as_tensor(X), torch.as_tensor(Y)
    optimizer = torch.optim.Adam(reference, lr=lr)
    generator = torch.Generator().manual_seed(seed)
    epoch_losses = []
    for epoch in range(epochs):
        for group in optimizer.param_groups:
            group["lr"] = lr * (1 + math.cos(math.pi * epoch / epochs)) / 2
        order = torch.randperm(50, generator=generator)
        total = 0.0
        for rows in (order[0:16], order[16:32], order[32:48], order[48:50]):
            weight, bias = reference
            residual = Y_t[rows] - (X_t[rows] @ weight.T + bias)
            misfit = (0.5 * (residual / noise) ** 2 + math.log(noise) + 0.5 * math.log(2 * math.pi)).mean()
            loss = misfit + 0.5 * precision * sum(p.square().sum() for p in reference) / 50
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += float(loss.detach()) * len(rows)
        epoch_losses.append(total / 50)

    for trained, expected in zip(module.parameters(), reference):
        torch.testing.assert_close(trained.detach(), expected.detach(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(net.history[:, "train_loss"], epoch_losses, rtol=1e-12)


def test_an_epochs_loss_under_lbfgs_is_its_closures_first_at_the_starting_weights():
    """L-BFGS calls the step's closure many times, at the points of its line search; the step's loss,
    as skorch records it, is the first call's, at the weights the step started from: for one epoch of
    one full batch, the negative log posterior per point of the initial weights, by hand."""
    rng = np.random.RandomState(0)
    X = rng.randn(30, 2)
    Y = X @ rng.randn(2, 1) + 0.3 * rng.randn(30, 1)
    noise, precision = 0.5, 2.0
    torch.manual_seed(0)
    module = nn.Linear(2, 1).double()
    weight, bias = module.weight.detach().numpy().copy(), module.bias.detach().numpy().copy()
    misfit = np.mean(0.5 * ((Y - X @ weight.T - bias) / noise) ** 2) + np.log(noise) + 0.5 * np.log(2 * np.pi)
    expected = misfit + 0.5 * precision * (np.sum(weight**2) + np.sum(bias**2)) / 30
    net = fit_map(module, X, Y, prior_precision=precision, likelihood=gaussian_likelihood(Y, noise, torch.float64,
                  "cpu"), lr=1.0, lr_schedule="constant", max_epochs=1, batch_size=30, optimizer=torch.optim.LBFGS,
                  callbacks=None, device="cpu", seed=0, verbose=0, finish=False)
    assert not np.allclose(module.weight.detach().numpy(), weight)  # the step moved the weights
    assert net.history[-1, "train_loss"] == pytest.approx(expected, rel=1e-12)


def test_an_epoch_that_ties_the_lowest_loss_is_not_the_best():
    """skorch marks an epoch best only where its loss is strictly below every earlier one: at a
    learning rate of 0 on one full batch of equal rows (whose order rounds no sum otherwise) every
    epoch's loss is the first's, to the bit, and only the first is best."""
    X, Y = np.ones((20, 2)), np.full((20, 1), 3.0)
    torch.manual_seed(0)
    net = fit_map(nn.Linear(2, 1).double(), X, Y, prior_precision=1.0, likelihood=gaussian_likelihood(
                  Y, 1.0, torch.float64, "cpu"), lr=0.0, lr_schedule="constant", max_epochs=3, batch_size=20,
                  optimizer=torch.optim.SGD, callbacks=None, device="cpu", seed=0, verbose=0, finish=False)
    losses = net.history[:, "train_loss"]
    assert losses[0] == losses[1] == losses[2]
    assert net.history[:, "train_loss_best"] == [True, False, False]


@pytest.mark.parametrize("batch_size", [40, 16])
def test_training_ends_at_the_exact_map_of_a_linear_model(linear_data, batch_size, device):
    """Twenty epochs of Adam stop far from the mode; the full-batch L-BFGS polish
    that ends the training (after full batches or minibatches) reaches the
    closed-form posterior mean of a linear model to 1e-6."""
    X, y = linear_data
    Y = y[:, None]
    exact = BayesianLinearRegression(X, y, NOISE, PRIOR_STD)

    def trained_map(finish):
        torch.manual_seed(0)
        module = nn.Linear(X.shape[1], 1).to(device, torch.float64)
        fit_map(module, X, Y, prior_precision=PRIOR_STD**-2, likelihood=gaussian_likelihood(Y, NOISE, torch.float64,
                device), lr=0.01, lr_schedule="cosine", max_epochs=20, batch_size=batch_size,
                optimizer=torch.optim.Adam, callbacks=None, device=device, seed=0, verbose=0, finish=finish)
        return torch.cat([module.weight.detach().flatten(), module.bias.detach()]).cpu().numpy()

    assert np.abs(trained_map(finish=False) / exact.mean - 1).max() > 1e-2
    np.testing.assert_allclose(trained_map(finish=True), exact.mean, rtol=1e-6, atol=0)


@pytest.mark.parametrize("task", ["gaussian, a precision per group, trained noise", "categorical, one precision"])
def test_the_polishs_flat_loss_is_the_criterions_with_its_gradients(task):
    """The polish's hand-differentiated loss of the flat weights (:class:`FlatPosteriorLoss`) is the
    criterion's, and its gradients autograd's, the likelihood's trained noise's included."""
    rng = np.random.RandomState(0)
    X = torch.as_tensor(rng.randn(40, 3))
    torch.manual_seed(0)
    if task.startswith("gaussian"):
        module = build_mlp(3, 2, (8,), "tanh", linear_skip=True).double()
        Y = torch.as_tensor(rng.randn(40, 2))
        groups = ParameterGroups.of(FunctionalModel(module))
        precision = torch.as_tensor(rng.uniform(0.5, 3.0, len(groups.names)))
        criterion = NegativeLogPosterior(50, precision, gaussian_likelihood(Y, None, torch.float64, "cpu"), groups)
        criterion.likelihood.log_noise_std.data += 0.3  # away from the targets' std
    else:
        module = build_mlp(3, 4, (8,), "relu").double()
        Y = torch.as_tensor(rng.randint(4, size=(40, 1)), dtype=torch.float64)
        criterion = NegativeLogPosterior(50, 1.7, CategoricalLikelihood())
    assert_flat_loss_is_the_criterions(module, criterion, X, Y, n_variables=2 if task.startswith("gaussian") else 1)


def assert_flat_loss_is_the_criterions(module, criterion, X, Y, n_variables):
    """``FlatPosteriorLoss.of(module, criterion, X, Y)`` gives the criterion's loss (to 1e-13) and
    autograd's gradients (to 1e-12): of the module's weights, in one tensor, and of the
    likelihood's trained parameters (``n_variables`` in all)."""
    loss = criterion(module(X), Y, module)
    loss.backward()
    expected = [p.grad.clone() for p in [*module.parameters(), *criterion.parameters()] if p.requires_grad]
    flat = FlatPosteriorLoss.of(module, criterion, X, Y)
    for variable in flat.variables:
        variable.grad = None
    assert torch.allclose(flat.loss_and_gradients(), loss.detach(), rtol=1e-13, atol=0)
    n_tensors = len(list(module.parameters()))
    gradients = [torch.cat([g.flatten() for g in expected[:n_tensors]]), *expected[n_tensors:]]
    assert len(flat.variables) == len(gradients) == n_variables
    for variable, gradient in zip(flat.variables, gradients):
        torch.testing.assert_close(variable.grad.reshape(gradient.shape), gradient, rtol=1e-12, atol=1e-14)


def test_the_polish_of_a_module_off_the_fast_path_goes_through_autograd(linear_data):
    """A module that FunctionalModel runs through torch.func keeps the autograd closure: the
    polish still ends at the closed-form MAP of a linear model."""

    class Affine(nn.Module):  # a module of its own: no hand-written backward pass
        def __init__(self, n_features):
            super().__init__()
            self.linear = nn.Linear(n_features, 1)

        def forward(self, X):
            return self.linear(X)

    X, y = linear_data
    Y = y[:, None]
    module = Affine(X.shape[1]).double()
    criterion = NegativeLogPosterior(len(X), PRIOR_STD**-2, gaussian_likelihood(Y, NOISE, torch.float64, "cpu"))
    assert FlatPosteriorLoss.of(module, criterion, X, Y) is None
    polish(module, criterion, X, Y)
    theta = torch.cat([module.linear.weight.detach().flatten(), module.linear.bias.detach()]).numpy()
    np.testing.assert_allclose(theta, BayesianLinearRegression(X, y, NOISE, PRIOR_STD).mean, rtol=1e-6, atol=0)


def test_the_polish_trains_no_frozen_weight():
    """A frozen weight (here a bias) takes the autograd closure, which trains only the others."""
    rng = np.random.RandomState(0)
    X, Y = torch.as_tensor(rng.randn(30, 2)), torch.as_tensor(rng.randn(30, 1))
    module = nn.Linear(2, 1).double()
    module.bias.requires_grad_(False)
    bias = module.bias.detach().clone()
    criterion = NegativeLogPosterior(30, 1.0, gaussian_likelihood(Y, 1.0, torch.float64, "cpu"))
    assert FlatPosteriorLoss.of(module, criterion, X, Y) is None
    weight = module.weight.detach().clone()
    polish(module, criterion, X, Y)
    assert torch.equal(module.bias, bias) and not torch.equal(module.weight, weight)


def test_the_polish_runs_the_module_in_eval_mode():
    """A user's dropout (or batch norm) would make the polished loss random (or rewrite the running
    statistics at every line-search point): the polish minimises the eval-mode loss that the
    curvature, the evidence and the predictions read, and leaves the module's modes as they were."""

    class Recorded(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Dropout(0.5), nn.Linear(8, 1))
            self.modes = []

        def forward(self, X):
            self.modes.append(self.body[2].training)
            return self.body(X)

    rng = np.random.RandomState(0)
    X, Y = torch.as_tensor(rng.randn(30, 2)), torch.as_tensor(rng.randn(30, 1))
    module = Recorded().double().train()
    criterion = NegativeLogPosterior(30, 1.0, gaussian_likelihood(Y, 1.0, torch.float64, "cpu"))
    polish(module, criterion, X, Y)
    assert module.modes and not any(module.modes)
    assert module.training and module.body[2].training


@pytest.mark.parametrize("n_rows, max_batches, sizes", [
    (50, None, [16, 16, 16, 2]),
    (50, 2, [16, 16]),
    (50, 4, [16, 16, 16, 2]),
    (50, 9, [16, 16, 16, 2]),  # more than an epoch has: the whole epoch
    (49, None, [16, 16, 17]),  # one row over joins the last batch
    (1, None, [1]),
])
def test_tensor_batches_take_at_most_max_batches_an_epoch(n_rows, max_batches, sizes):
    """Rows in batches of 16: an epoch is its first ``max_batches`` batches, no row twice, in a
    fresh order every epoch; a last batch of one row joins the one before it."""
    dataset = Dataset(np.arange(float(n_rows))[:, None], np.zeros((n_rows, 1)))
    batches = TensorBatches(dataset, 16, shuffle=True, generator=torch.Generator().manual_seed(0),
                            max_batches=max_batches)
    first, second = ([X_batch[:, 0] for X_batch, _ in batches] for _ in range(2))
    assert len(batches) == len(sizes) and [len(rows) for rows in first] == sizes
    rows = torch.cat(first)
    assert len(set(rows.tolist())) == len(rows)
    assert n_rows == 1 or not torch.equal(rows, torch.cat(second))


@pytest.mark.parametrize("n_rows", [1, 2, 5])
def test_batches_of_one_row_stay_one_row_each(n_rows):
    """A last batch of one row joins the one before it, unless every batch is one row, as asked: then
    each row is its own batch."""
    assert batch_slices(n_rows, 1) == [slice(row, row + 1) for row in range(n_rows)]
    dataset = Dataset(np.arange(float(n_rows))[:, None], np.zeros((n_rows, 1)))
    assert [len(X_batch) for X_batch, _ in TensorBatches(dataset, 1)] == [1] * n_rows


def test_a_batch_norm_module_trains_whatever_rows_are_left_over():
    """201 rows in batches of 200 left a batch of one row, on which a user's batch-norm layer
    cannot train ("Expected more than 1 value per channel")."""
    from sklearn_quinn import LaplaceRegressor

    X = np.random.RandomState(0).randn(201, 3)
    module = nn.Sequential(nn.Linear(3, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 1)).double()
    reg = LaplaceRegressor(module=module, batch_size=200, max_epochs=3, random_state=0).fit(X, X[:, 0])
    assert np.isfinite(reg.predict(X, return_std=True)[1]).all()


class WarmUpWeights(Callback):
    """Keeps the heteroscedastic likelihood's warm-up weight ``beta`` of every epoch."""

    def __init__(self, likelihood):
        self.likelihood = likelihood

    def on_train_begin(self, net, **kwargs):
        self.betas_ = []

    def on_epoch_end(self, net, **kwargs):
        self.betas_.append(self.likelihood.beta)


@pytest.mark.parametrize("max_epochs, betas", [(6, [1.0, 2 / 3, 1 / 3, 0.0, 0.0, 0.0]), (1, [1.0])])
def test_the_mean_first_warm_up_falls_linearly_over_half_the_epochs_and_ends_at_zero(max_epochs, betas):
    """The heteroscedastic likelihood's warm-up weight is ``1 - (e - 1) / (E / 2)`` in epoch ``e`` of
    ``E``, never below 0: 1 in the first epoch, 0 from epoch ``E / 2 + 1`` on; whatever the epochs, the
    training leaves it at 0, the likelihood itself, for the polish and the posterior (one epoch ran
    at 1)."""
    rng = np.random.RandomState(0)
    X, Y = rng.randn(20, 1), rng.randn(20, 1)
    likelihood = HeteroscedasticGaussianLikelihood.for_targets(Y)
    recorder = WarmUpWeights(likelihood)
    torch.manual_seed(0)
    train_net(nn.Linear(1, 2).double(), NegativeLogPosterior(20, 1.0, likelihood), X, Y, lr=0.01,
              lr_schedule="constant", max_epochs=max_epochs, optimizer=torch.optim.Adam,
              callbacks=[("warm_up_weights", recorder)], device="cpu", verbose=0, batch_size=20)
    np.testing.assert_allclose(recorder.betas_, betas, rtol=1e-15, atol=0)
    assert likelihood.beta == 0.0


@pytest.fixture
def ctrl_c_raises():
    """SIGINT raises KeyboardInterrupt, as in an interactive Python: a process started in the
    background of a shell (a CI job) inherits SIGINT ignored, and the test's own SIGINTs with it."""
    import signal

    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


@pytest.mark.parametrize("estimator", ["LaplaceRegressor", "DeepEnsembleRegressor"])
def test_an_interrupt_during_training_ends_the_fit(estimator, monkeypatch, ctrl_c_raises):
    """skorch's partial_fit catches Ctrl-C and returns the network trained so far; the estimator went on
    to its posterior from two epochs of thirty, without a word."""
    import os
    import signal

    import sklearn_quinn
    from sklearn_quinn._map import PosteriorNet

    epoch = PosteriorNet.run_single_epoch

    def interrupted_at_epoch_three(net, *args, **kwargs):
        if len(net.history) == 3:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, amid an epoch's steps
        return epoch(net, *args, **kwargs)

    monkeypatch.setattr(PosteriorNet, "run_single_epoch", interrupted_at_epoch_three)
    X = np.random.RandomState(0).randn(30, 2)
    model = getattr(sklearn_quinn, estimator)(hidden_layer_sizes=(4,), max_epochs=30)
    with pytest.raises(KeyboardInterrupt):
        model.fit(X, X[:, 0])


def test_ctrl_c_while_a_callback_runs_ends_the_fit(ctrl_c_raises):
    """A SIGINT is Ctrl-C wherever it lands, a callback's epoch hook (the evidence's updates run
    there) included: the fit took one there for a callback's stop and returned."""
    import os
    import signal

    from skorch.callbacks import Callback

    from sklearn_quinn import LaplaceRegressor

    class CtrlCAtEpochTwo(Callback):
        def on_epoch_end(self, net, **kwargs):
            if len(net.history) == 2:
                os.kill(os.getpid(), signal.SIGINT)

    X = np.random.RandomState(0).randn(30, 2)
    handler = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        LaplaceRegressor(hidden_layer_sizes=(4,), max_epochs=30, callbacks=[CtrlCAtEpochTwo()]).fit(X, X[:, 0])
    assert signal.getsignal(signal.SIGINT) is handler


@pytest.mark.parametrize("handler", ["takes note", "ignores"])
def test_a_sigint_that_raised_nothing_leaves_a_callbacks_stop_a_stop(handler):
    """A handler of the user's that only takes note of a SIGINT, or SIGINT ignored (what a job in a
    shell's background inherits): the training goes on after it, and EarlyStopping's later stop
    is a stop, the fit finishing (it was taken for Ctrl-C and raised)."""
    import os
    import signal

    from skorch.callbacks import Callback, EarlyStopping

    from sklearn_quinn import LaplaceRegressor

    noted = []

    class SigintAtEpochTwo(Callback):
        def on_epoch_end(self, net, **kwargs):
            if len(net.history) == 2:
                os.kill(os.getpid(), signal.SIGINT)

    before = signal.signal(signal.SIGINT, (lambda signum, frame: noted.append(signum)) if handler == "takes note"
                           else signal.SIG_IGN)
    try:
        X = np.random.RandomState(0).randn(30, 2)
        stop = EarlyStopping(monitor="train_loss", patience=3, threshold=0.5)
        model = LaplaceRegressor(hidden_layer_sizes=(4,), max_epochs=100, callbacks=[SigintAtEpochTwo(), stop])
        model.fit(X, X[:, 0])
    finally:
        signal.signal(signal.SIGINT, before)
    assert len(model.net_.history) < 100 and len(noted) == (handler == "takes note")


def test_a_callback_that_stops_the_training_is_no_interrupt():
    """skorch's EarlyStopping stops a training by raising a KeyboardInterrupt from its epoch hook,
    which the fit took for Ctrl-C and raised again; the estimator now goes on from where it
    stopped."""
    from skorch.callbacks import EarlyStopping

    from sklearn_quinn import LaplaceRegressor

    X = np.random.RandomState(0).randn(30, 2)
    stop = EarlyStopping(monitor="train_loss", patience=3, threshold=0.5)
    model = LaplaceRegressor(hidden_layer_sizes=(4,), max_epochs=100, callbacks=[stop]).fit(X, X[:, 0])
    assert len(model.net_.history) < 100 and np.isfinite(model.predict(X, return_std=True)[1]).all()


class CountEpochs(Callback):
    def __init__(self):
        self.epochs = 0

    def on_epoch_end(self, net, **kwargs):
        self.epochs += 1


class Log(Callback):
    """A callback holding what no deep copy takes (a writer's lock) and a list the user reads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.losses = []

    def on_epoch_end(self, net, **kwargs):
        with self.lock:
            self.losses.append(net.history[-1, "train_loss"])


def test_each_training_takes_a_copy_of_the_callbacks_and_the_users_stay_as_they_were():
    # scikit-learn's fit leaves its parameters as they were; the user's callback was driven in place, and
    # its state carried from one fit, or one member's training, to the next.
    rng = np.random.RandomState(0)
    X = rng.randn(40, 2)
    counter, listed, log = CountEpochs(), CountEpochs(), Log()
    regressor = LaplaceRegressor(hidden_layer_sizes=(4,), max_epochs=7,
                                 callbacks=[counter, ["listed", listed], ("log", log)], random_state=0)
    regressor.fit(X, X[:, 0])
    assert counter.epochs == listed.epochs == 0
    assert len(log.losses) == 7  # what a callback holds stays the user's
    assert dict(regressor.net_.callbacks_)["CountEpochs"].epochs == 7
    DeepEnsembleRegressor(hidden_layer_sizes=(4,), max_epochs=7, n_estimators=2, prior_std=1.0, noise_std=1.0,
                          callbacks=[counter], random_state=0).fit(X, X[:, 0])  # the MAP's and the members' trainings
    assert counter.epochs == 0


@pytest.mark.parametrize("callback, message", [
    (EarlyStopping(), "EarlyStopping monitors 'valid_loss'"),
    (("stop", EarlyStopping(monitor="valid_acc")), "EarlyStopping monitors 'valid_acc'"),
    (["stop", EarlyStopping()], "EarlyStopping monitors 'valid_loss'"),
    (EarlyStopping, "EarlyStopping monitors 'valid_loss'"),  # a class: skorch makes it, with every default
    (Checkpoint(), "skorch's Checkpoint reads"),
    (Checkpoint(monitor=None), "skorch's Checkpoint reads"),
    (Checkpoint, "skorch's Checkpoint reads"),
    (TrainEndCheckpoint(), "skorch's TrainEndCheckpoint reads"),
    (LoadInitState(Checkpoint(monitor=None)), "skorch's LoadInitState reads"),
    (WandbLogger(object()), r"WandbLogger\(save_model=True\)"),
])
def test_a_callback_the_trainings_cannot_run_is_refused_before_them(callback, message):
    # No rows are held out, and no epoch's batches recorded: these ended the fit deep in skorch with a
    # KeyError (a validation score) or an IndexError (a checkpoint's file name).
    regressor = LaplaceRegressor(max_epochs=5, callbacks=[callback])
    with pytest.raises(ValueError, match=f"callbacks: {message}"):
        regressor.fit(np.zeros((10, 2)), np.arange(10.0))
    assert not hasattr(regressor, "net_")


@pytest.mark.parametrize("max_epochs, epochs", [
    (1, {1}),
    (5, {1, 2, 3, 4}),
    (20, set(range(2, 17))),
    (100, set(range(10, 81, 5))),
])
def test_the_evidence_updates_after_the_second_to_sixteenth_twentieths_of_the_epochs(max_epochs, epochs):
    """After epochs ``floor(k E / 20)`` for ``k`` from 2 to 16, none before epoch 1: a training of one or
    a few epochs updates after its first (none at epoch 0, which never ends), and none updates in the
    last fifth of the epochs."""
    assert evidence_epochs(max_epochs) == epochs


def scale_climber(log_evidence):
    """An :class:`EvidenceMaximisation` whose converged state at the precisions ``2**s`` (one group,
    base 1) has the log evidence ``log_evidence(s)``, and the scales ``s`` it converged at."""
    climber = object.__new__(EvidenceMaximisation)
    climber.visited = []

    def converged_state(net, precision=None):
        step = math.log2(float(precision[0]))
        climber.visited.append(step)
        return {"record": {"log_evidence": log_evidence(step)}, "step": step}

    climber._converged_state = converged_state
    climber._restore = lambda net, state: None
    return climber


def test_the_scale_climb_stops_six_steps_of_two_from_the_base():
    """An evidence that rises without end along the stronger prior: the climb takes six steps of a
    factor of two, and stops at 64 times the base (no step past it, nor a parabola beyond its end)."""
    climber = scale_climber(lambda step: step)
    state = climber._climb_scale(None, np.ones(1), np.ones(1, dtype=bool))
    assert state["step"] == 6 and max(climber.visited) == 6
