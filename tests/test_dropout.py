"""MC dropout: the masks by hand, the linear model's closed form, the MAP at rate 0, and the estimators."""

import copy
import math
import pickle

import numpy as np
import pytest
import torch
from sklearn.base import clone
from torch import nn

from sklearn_quinn import MCDropoutClassifier, MCDropoutRegressor, SWAGRegressor
from sklearn_quinn._core.evidence import ParameterGroups
from sklearn_quinn._core.likelihoods import GaussianLikelihood
from sklearn_quinn._core.network import FunctionalModel, build_mlp
from sklearn_quinn._core.rng import prediction_generator
from sklearn_quinn._map import NegativeLogPosterior
from sklearn_quinn.dropout._engine import DropoutPosterior, InputDropout, bernoulli_entropy, linear_input_blocks

from .exact import BayesianLinearRegression


def small(**params):
    return MCDropoutRegressor(**{**dict(hidden_layer_sizes=(8,), max_epochs=40, random_state=0), **params})


class ScaledTanhNet(nn.Module):
    """A custom module (the generic vmap path) whose first parameter is not a Linear's."""

    def __init__(self, n_features=2, n_outputs=1):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1))
        self.hidden = nn.Linear(n_features, 5)
        self.out = nn.Linear(5, n_outputs)

    def forward(self, X):
        return self.out(torch.tanh(self.hidden(X))) * self.scale


class NoLinear(nn.Module):
    def __init__(self, n_features=3):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n_features, 1))

    def forward(self, X):
        return X @ self.weight


def test_blocks_follow_the_flat_weight_order():
    """scale (1), hidden.weight (5 x 2) at 1, hidden.bias (5), out.weight (1 x 5) at 16."""
    assert linear_input_blocks(ScaledTanhNet()) == [(1, 5, 2), (16, 1, 5)]


def test_linear_skip_path_is_not_dropped():
    """In a LinearSkipMLP (names mlp.0.weight (4 x 3) at 0, mlp.0.bias, mlp.2.weight
    (1 x 4) at 16, mlp.2.bias, linear.weight (1 x 3) at 21) only the MLP's
    layers are masked; in training mode the linear path's output is its own."""
    module = build_mlp(3, 1, (4,), "relu", linear_skip=True).double()
    assert linear_input_blocks(module) == [(0, 4, 3), (16, 1, 4)]
    wrapped = InputDropout(module, 0.5).train()
    X = torch.randn(50, 3, dtype=torch.float64)
    with torch.no_grad():
        nn.init.zeros_(module.mlp[2].weight)
        nn.init.zeros_(module.mlp[2].bias)
        torch.testing.assert_close(wrapped(X), module.linear(X))


def test_draws_mask_input_columns_by_hand():
    """Each draw is theta with the columns of each weight matrix either zeroed or
    scaled by 1 / (1 - p), the same Bernoulli(1 - p) draws as a generator with the same seed."""
    module = ScaledTanhNet().double()
    theta = FunctionalModel(module).flatten()
    rate, n = 0.3, 6
    draws = DropoutPosterior(theta, linear_input_blocks(module), rate).sample(n, torch.Generator().manual_seed(3))
    generator = torch.Generator().manual_seed(3)
    keep = torch.full((n, 1, 2), 0.7, dtype=torch.float64)
    hidden_mask = torch.bernoulli(keep, generator=generator) / 0.7
    out_mask = torch.bernoulli(torch.full((n, 1, 5), 0.7, dtype=torch.float64), generator=generator) / 0.7
    torch.testing.assert_close(draws[:, 1:11].view(n, 5, 2), theta[1:11].view(5, 2) * hidden_mask)
    torch.testing.assert_close(draws[:, 16:21].view(n, 1, 5), theta[16:21].view(1, 5) * out_mask)
    for unmasked in (slice(0, 1), slice(11, 16), slice(21, 22)):  # scale and biases
        torch.testing.assert_close(draws[:, unmasked], theta[unmasked].expand(n, -1))


def test_input_dropout_trains_with_masks_and_leaves_no_hook():
    """Train mode: a ones-weight layer on ones sums the kept inputs over (1 - p), a
    Binomial(1000, 0.7) count; within 4 of its stds (14.5). Eval mode: the module itself."""
    layer = nn.Linear(1000, 1, bias=False)
    nn.init.ones_(layer.weight)
    wrapped = InputDropout(nn.Sequential(layer), 0.3)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        kept = float(wrapped.train()(torch.ones(1, 1000)).detach()) * 0.7
    assert abs(kept - 700) < 4 * np.sqrt(1000 * 0.7 * 0.3)
    assert not layer._forward_pre_hooks
    assert float(wrapped.eval()(torch.ones(1, 1000)).detach()) == 1000


def test_concrete_masks_drop_with_the_learned_rate():
    """A relaxed mask is past one half exactly when its Bernoulli counterpart
    drops: P(logit p + Logistic noise > 0) = p. Over 200 000 inputs the fraction
    is within 4 binomial stds of p = 0.3, and so is the fraction of relaxed
    masks strictly between 0.05 and 0.95 of its exact value at temperature 0.1,
    P(0.1 logit 0.05 < logit p + L < 0.1 logit 0.95) = 0.123."""
    layer = nn.Linear(1000, 1, bias=False)
    wrapped = InputDropout(nn.Sequential(layer), None)
    with torch.no_grad():
        wrapped.rate_logits.fill_(np.log(0.3 / 0.7))
    with torch.random.fork_rng():
        torch.manual_seed(0)
        (scaled,) = wrapped._drop_input(0, layer, (torch.ones(200, 1000),))
    dropped = 1 - scaled.detach().numpy() * 0.7
    assert abs((dropped > 0.5).mean() - 0.3) < 4 * np.sqrt(0.3 * 0.7 / dropped.size)
    edge = 0.1 * np.log(0.95 / 0.05)
    between = 1 / (1 + np.exp(np.log(0.3 / 0.7) - edge)) - 1 / (1 + np.exp(np.log(0.3 / 0.7) + edge))
    fraction = ((dropped > 0.05) & (dropped < 0.95)).mean()
    assert abs(fraction - between) < 4 * np.sqrt(between * (1 - between) / dropped.size)


def test_divergence_is_gal_hron_kendall_kl():
    """ScaledTanhNet (scale, hidden 5 x 2, its bias, out 1 x 5, its bias) with
    per-tensor precisions 1..5 and rates 0.2, 0.4: 0.5 sum delta ||theta||^2,
    each dropped matrix over 1 - p, minus 2 H(0.2) + 5 H(0.4); the gradient
    reaches the rates. At a fixed rate 0 it is the MAP's Gaussian penalty."""
    module = ScaledTanhNet().double()
    criterion = NegativeLogPosterior(10, torch.arange(1.0, 6.0, dtype=torch.float64),
                                     GaussianLikelihood(torch.ones(1, dtype=torch.float64)),
                                     ParameterGroups.of(FunctionalModel(module)))
    wrapped = InputDropout(module, None)
    with torch.no_grad():
        wrapped.rate_logits.copy_(torch.logit(torch.tensor([0.2, 0.4], dtype=torch.float64)))
    squares = [float(p.detach().square().sum()) for p in module.parameters()]
    quadratic = 1 * squares[0] + 2 * squares[1] / 0.8 + 3 * squares[2] + 4 * squares[3] / 0.6 + 5 * squares[4]
    entropy = (2 * bernoulli_entropy(torch.tensor(0.2, dtype=torch.float64))
               + 5 * bernoulli_entropy(torch.tensor(0.4, dtype=torch.float64)))
    divergence = criterion.divergence(wrapped)
    np.testing.assert_allclose(float(divergence), 0.5 * quadratic - float(entropy), rtol=0, atol=1e-12)
    divergence.backward()
    assert torch.isfinite(wrapped.rate_logits.grad).all() and (wrapped.rate_logits.grad != 0).all()
    copied = copy.deepcopy(wrapped)  # positions, not tensor ids, find the matrices of a copy
    assert criterion.divergence(copied).item() == pytest.approx(divergence.item(), rel=1e-12)
    fixed = 0.5 * (squares[0] + 2 * squares[1] / 0.7 + 3 * squares[2] + 4 * squares[3] / 0.7 + 5 * squares[4])
    fixed -= 7 * float(bernoulli_entropy(torch.tensor(0.3, dtype=torch.float64)))
    assert criterion.divergence(InputDropout(module, 0.3)).item() == pytest.approx(fixed, rel=1e-12)
    assert criterion.divergence(InputDropout(module, 0.0)).item() == pytest.approx(
        0.5 * criterion.penalty(module.parameters()).item(), rel=1e-12)


class BufferAndParametrizedWeights(nn.Module):
    """Three linear layers: one with a weight held in a buffer, one weight-normalised
    (its weight computed from two parameters), one plain."""

    def __init__(self, n_features=2, n_outputs=1):
        super().__init__()
        self.frozen = nn.Linear(n_features, 3)
        weight = self.frozen.weight.detach().clone()
        del self.frozen.weight
        self.frozen.register_buffer("weight", weight)
        self.normalised = torch.nn.utils.parametrizations.weight_norm(nn.Linear(3, 3))
        self.plain = nn.Linear(3, n_outputs)

    def forward(self, X):
        return self.plain(torch.tanh(self.normalised(torch.tanh(self.frozen(X)))))


@pytest.mark.parametrize("rate", [0.2, "auto"])
def test_only_weights_that_are_parameters_are_dropped(wave_data, rate):
    """A weight in a buffer, or computed by a parametrization, is no block of
    theta: only the plain layer's matrix is masked and gets a rate, in
    training (the fit runs) and in the posterior's draws."""
    X, y = wave_data
    reg = small(module=BufferAndParametrizedWeights, dropout_rate=rate, n_samples=5, max_epochs=5).fit(X, y)
    plain_start = sum(p.numel() for p in list(reg.net_.module_.module.parameters())[:-2])
    assert reg.posterior_.blocks == [(plain_start, 1, 3)]
    assert reg.dropout_rates_.shape == (1,)
    assert np.isfinite(reg.predict(X)).all()


def test_learned_rates_fall_as_data_accumulate():
    """The variational rates (Gal, Hron and Kendall 2017): the entropy's pull
    towards one half weighs 1 / N against the likelihood, so on 2000 rows of
    the same function the learned rates are below those on 40 rows, after as
    many full-batch steps; a fixed rate is reported as given."""
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, size=(2000, 2))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.randn(2000)
    params = dict(hidden_layer_sizes=(16,), max_epochs=30, random_state=0)
    few = MCDropoutRegressor(**params, batch_size=40).fit(X[:40], y[:40]).dropout_rates_
    many = MCDropoutRegressor(**params, batch_size=2000).fit(X, y).dropout_rates_  # the same 30 steps
    assert few.shape == many.shape == (2,)
    assert (many < few).all(), (few, many)
    fixed = MCDropoutRegressor(**params, dropout_rate=0.25).fit(X[:40], y[:40])
    np.testing.assert_array_equal(fixed.dropout_rates_, [0.25, 0.25])


def test_rate_zero_is_the_map_network(wave_data):
    """dropout_rate=0: the same MAP as the package's MAP training (SWAG's net), predictions
    the net's output to rounding, std the noise alone."""
    X, y = wave_data
    reg = small(dropout_rate=0.0, normalize_X=False, normalize_y=False).fit(X, y)
    swag = SWAGRegressor(hidden_layer_sizes=(8,), max_epochs=40, swag_epochs=2, normalize_X=False, normalize_y=False,
                         random_state=0).fit(X, y)
    torch.testing.assert_close(reg.posterior_.theta, FunctionalModel(swag.net_.module_).flatten())
    mean, std = reg.predict(X, return_std=True)
    np.testing.assert_allclose(mean, reg.net_.predict(X)[:, 0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(std, reg.noise_std_, rtol=1e-12)


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_evidence_prior_is_the_map_network_s(wave_data, task):
    """prior_learning='evidence' (the classifier's default): the prior's precisions are the
    Laplace evidence's of the MAP network (the same estimator at dropout_rate=0), and the dropout
    training runs under them, held fixed: an evidence update of the prior during it would read the
    curvature at weights that minimise the masks' average loss, not at a mode of the loss the
    evidence is of. The regressor's noise is learned during the dropout training (more updates),
    at the weights that predict. 'joint' (the regressor's default) updates the prior there."""
    X, y = wave_data
    if task == "regression":
        estimator = small()
    else:
        y = (y > np.median(y)).astype(int)
        estimator = MCDropoutClassifier(hidden_layer_sizes=(8,), max_epochs=40, random_state=0)
    map_network = clone(estimator).set_params(dropout_rate=0.0).fit(X, y)
    dropout = clone(estimator).set_params(prior_learning="evidence").fit(X, y)
    assert dropout.prior_precisions_ == map_network.prior_precisions_
    torch.testing.assert_close(dropout.net_.criterion_.prior_precision, map_network.net_.criterion_.prior_precision,
                               rtol=0, atol=0)
    n_map_updates = len(map_network.evidence_history_)
    assert n_map_updates > 0 and dropout.evidence_history_[:n_map_updates] == map_network.evidence_history_
    n_noise_updates = len(dropout.evidence_history_) - n_map_updates  # the classifier has no noise
    assert n_noise_updates > 0 if task == "regression" else n_noise_updates == 0
    assert (dropout.dropout_rates_ > 0).all()
    assert not torch.equal(dropout.posterior_.theta, map_network.posterior_.theta)  # trained behind the masks
    if task == "regression":
        joint = clone(estimator).fit(X, y)
        assert joint.prior_learning == "joint" and len(joint.evidence_history_) > 0
        assert joint.prior_precisions_ != map_network.prior_precisions_


def test_classifier_rate_zero_is_the_map_softmax():
    X, y = np.random.RandomState(0).randn(60, 3), np.repeat([0, 1, 2], 20)
    clf = MCDropoutClassifier(hidden_layer_sizes=(8,), max_epochs=30, dropout_rate=0.0, random_state=0).fit(X, y)
    logits = clf.net_.module_(clf._validated_inputs(X))  # the backbone, trained without dropout layers
    np.testing.assert_allclose(clf.predict_proba(X), torch.softmax(logits, -1).detach().numpy(), rtol=1e-10)


def test_linear_model_mean_and_variance_match_the_closed_form(linear_data):
    """For f(x) = b + sum_j W_j x_j z_j / (1 - p): E f = b + W x and
    Var f = p / (1 - p) sum_j W_j^2 x_j^2. The predicted mean is within 4 Monte
    Carlo standard errors (epistemic std / sqrt(S)) of the unmasked prediction,
    and the draws' variance within 4 standard errors of the closed form."""
    X, y = linear_data
    rate, n_draws = 0.2, 4000
    reg = MCDropoutRegressor(hidden_layer_sizes=(), dropout_rate=rate, n_samples=n_draws, normalize_X=False,
                             normalize_y=False, max_epochs=100, random_state=0).fit(X, y)
    mean, std = reg.predict(X, return_std=True)
    epistemic = np.sqrt(std**2 - reg.noise_std_**2)
    unmasked = reg.net_.predict(X)[:, 0]
    assert (np.abs(mean - unmasked) < 4 * epistemic / np.sqrt(n_draws)).all()

    weight = reg.posterior_.theta[:3].numpy()
    closed_form = rate / (1 - rate) * (X**2) @ weight**2
    draws = reg.posterior_.sample(n_draws, torch.Generator().manual_seed(1)).numpy()
    outputs = X @ draws[:, :3].T + draws[:, 3]  # (N, S)
    squares = (outputs - outputs.mean(1, keepdims=True)) ** 2
    standard_error = squares.std(1) / np.sqrt(n_draws)
    assert (np.abs(squares.mean(1) - closed_form) < 4 * standard_error).all()
    np.testing.assert_allclose(epistemic**2, closed_form, rtol=0.15)  # the estimator's own 4000 draws


def test_variance_grows_with_the_rate(linear_data):
    """Same weights, rates 0 < 0.1 < 0.3 < 0.5: the draws' predictive variance
    grows (its closed form p / (1 - p) sum W^2 x^2 does); and a fit at 0.3 has a
    wider mean epistemic std than a fit at 0.05."""
    X, y = linear_data
    reg = MCDropoutRegressor(hidden_layer_sizes=(), normalize_X=False, normalize_y=False, max_epochs=60,
                             random_state=0).fit(X, y)
    theta, blocks = reg.posterior_.theta, reg.posterior_.blocks
    variances = []
    for rate in (0.0, 0.1, 0.3, 0.5):
        draws = DropoutPosterior(theta, blocks, rate).sample(2000, torch.Generator().manual_seed(0)).numpy()
        variances.append((X @ draws[:, :3].T).var(1).mean())
    assert variances[0] < 1e-25 and np.all(np.diff(variances) > 0)  # 0 up to rounding

    def epistemic(rate):
        fitted = MCDropoutRegressor(hidden_layer_sizes=(16,), dropout_rate=rate, max_epochs=60,
                                    random_state=0).fit(X, y)
        mean, std = fitted.predict(X, return_std=True)
        return np.sqrt(np.maximum(std**2 - fitted.noise_std_**2, 0)).mean()

    assert epistemic(0.3) > epistemic(0.05)


def linear_module():
    """The one-layer module the two tests below fit, seeded."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return nn.Linear(3, 1, dtype=torch.float64)


def at_rate_1e4(reg, X, y):
    """Set ``reg``'s masks to a rate of 1e-4, as the learned rates fall to on UCI concrete, and give
    the linear module's exact posterior at its learned precisions and noise, and the masks'
    variance of the outputs at ``X``."""
    reg.posterior_ = DropoutPosterior(reg.posterior_.theta, reg.posterior_.blocks, 1e-4)
    posterior = BayesianLinearRegression.at_precisions(X, y, reg.noise_std_, reg.prior_precisions_)
    draws = reg.posterior_.sample(reg.n_samples, prediction_generator(reg._sample_seed)).numpy()
    return posterior, (posterior.design(X) @ draws.T).var(1, ddof=1)


def test_learned_rates_carry_the_map_posterior_beyond_the_masks_spread(linear_data):
    """At learned rates each mask's outputs spread by what the masks' variance at a row falls short
    of the Laplace posterior's there, exactly ``x^T (H + A)^-1 x`` for a linear module at the
    learned precisions ``A`` and noise (as the deep ensemble's members do). On 40 rows the learned
    rates spread the masks beyond the posterior's mean over the training rows (``mask_std_`` is 0);
    at a rate fallen to 1e-4, as the learned rates do on UCI concrete, the masks leave nearly all of
    the posterior's variance, and the predictive variance and ``sample_y`` add it. A fixed rate, the
    user's posterior, gets none."""
    X, y = linear_data
    params = dict(module=linear_module(), normalize_X=False, normalize_y=False, random_state=0)
    reg = MCDropoutRegressor(**params).fit(X, y)
    assert reg._local_posterior is not None and reg.mask_std_ == 0
    fixed = MCDropoutRegressor(**params, dropout_rate=1e-4).fit(X, y)
    assert fixed._local_posterior is None and fixed._draw_local_variance is None and fixed.mask_std_ is None

    posterior, masks = at_rate_1e4(reg, X, y)
    design = posterior.design(X)
    laplace = np.einsum("nk,kl,nl->n", design, posterior.covariance, design)
    assert np.mean(laplace > masks) > 0.9
    parts = reg.predict_uncertainty(X)
    np.testing.assert_allclose(parts.epistemic_std**2, np.maximum(masks, laplace), rtol=1e-6)
    np.testing.assert_allclose(parts.std**2, np.maximum(masks, laplace) + reg.noise_std_**2, rtol=1e-6)
    samples = reg.sample_y(X[:2], 20000, random_state=0)
    np.testing.assert_allclose(samples.std(1), parts.std[:2], rtol=0.03)


def test_past_the_kronecker_factors_the_masks_carry_the_training_rows_mean_shortfall(linear_data, monkeypatch):
    """Where the structure a Laplace fit would choose is the diagonal (patched), no posterior is
    kept at each row, and each mask's outputs spread by what the masks' mean variance over the
    training rows falls short of the Laplace posterior's, ``noise**2 gamma / N`` with ``gamma`` the
    exact well-determined parameters ``tr(H (H + A)^-1)`` (``mask_std_``), at every row."""
    from sklearn_quinn import _local_posterior

    X, y = linear_data
    monkeypatch.setattr(_local_posterior, "choose_model_structure", lambda model, theta: ("diag", "patched"))
    reg = MCDropoutRegressor(module=linear_module(), normalize_X=False, normalize_y=False, random_state=0).fit(X, y)
    assert reg._local_posterior is None
    posterior, masks = at_rate_1e4(reg, X, y)
    reg._draw_local_variance = reg._local_variance(X, y[:, None], torch.tensor([reg.noise_std_]))
    well_determined = posterior.well_determined()
    local = float(reg._draw_local_variance)
    assert local == pytest.approx(reg.noise_std_**2 * well_determined / len(X) - masks.mean(), rel=1e-6)
    assert local > 0.9 * reg.noise_std_**2 * well_determined / len(X)
    np.testing.assert_allclose(reg.predict_uncertainty(X).epistemic_std**2, masks + local, rtol=1e-9)


def test_custom_module_masks_its_linear_layers(wave_data):
    """A custom module: the draws through the vmap path equal the module run on
    each masked weight vector; at rate 0 the net's output."""
    X, y = wave_data
    reg = small(module=ScaledTanhNet, dropout_rate=0.2, n_samples=5, normalize_X=False, normalize_y=False).fit(X, y)
    assert reg.posterior_.blocks == [(1, 5, 2), (16, 1, 5)]
    draws = reg.posterior_.sample(5, reg._generator(reg._sample_seed))
    module = reg.net_.module_.module
    expected = torch.stack([torch.func.functional_call(module, reg._model.unflatten(row), (torch.as_tensor(X),))
                            for row in draws])[..., 0]
    np.testing.assert_allclose(reg.predict(X), expected.mean(0).detach().numpy(), rtol=1e-10)
    zero = small(module=ScaledTanhNet, dropout_rate=0.0, normalize_X=False, normalize_y=False).fit(X, y)
    np.testing.assert_allclose(zero.predict(X), zero.net_.predict(X)[:, 0], rtol=1e-12, atol=1e-12)


def test_same_draws_at_every_call_and_seed(wave_data):
    X, y = wave_data
    reg = small().fit(X, y)
    first = reg.predict(X, return_std=True)
    np.testing.assert_array_equal(first, reg.predict(X, return_std=True))
    np.testing.assert_array_equal(first, small().fit(X, y).predict(X, return_std=True))


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(dropout_rate=1.0), "dropout_rate"),
        (dict(dropout_rate=-0.1), "dropout_rate"),
        (dict(dropout_rate="0.1"), "dropout_rate"),
        (dict(n_samples=0), "n_samples"),
        (dict(module=NoLinear()), "nn.Linear"),
        (dict(prior_learning="marglik"), "prior_learning"),
    ],
    ids=["rate_one", "rate_negative", "rate_string", "no_samples", "module_without_linear", "prior_learning"],
)
def test_bad_parameters_fail_at_fit(linear_data, params, match):
    X, y = linear_data
    with pytest.raises(ValueError, match=match):
        small(**params).fit(X, y)


def test_pickle_round_trip(wave_data):
    X, y = wave_data
    reg = small().fit(X, y)
    loaded = pickle.loads(pickle.dumps(reg))
    np.testing.assert_array_equal(reg.predict(X, return_std=True), loaded.predict(X, return_std=True))
    np.testing.assert_array_equal(reg.sample_y(X, 3), loaded.sample_y(X, 3))
    labels = (y > np.median(y)).astype(int)
    clf = MCDropoutClassifier(hidden_layer_sizes=(8,), max_epochs=30, random_state=0).fit(X, labels)
    np.testing.assert_array_equal(clf.predict_proba(X), pickle.loads(pickle.dumps(clf)).predict_proba(X))


def test_bernoulli_entropy_closed_form():
    """``H(p) = -p log p - (1 - p) log(1 - p)``: log 2 at one half, 0.5004024 at 0.2 (and at
    0.8, by symmetry), zero at 0."""
    rates = torch.tensor([0.0, 0.2, 0.5, 0.8], dtype=torch.float64)
    expected = torch.tensor([0.0, 0.5004024235381879, math.log(2), 0.5004024235381879], dtype=torch.float64)
    torch.testing.assert_close(bernoulli_entropy(rates), expected, rtol=1e-12, atol=1e-15)


def test_the_masks_shortfall_is_from_their_mean_variance_over_the_training_rows(linear_data, monkeypatch):
    """Past the Kronecker factors (patched) each mask carries what the masks' variance, averaged
    over the training rows, falls short of ``noise**2 gamma / N``: at a rate of 1e-3 about six of
    2000 draws drop a column, and the masks' variance differs from row to row (0.0015 on average,
    0.0052 at most, against 0.0079), so their mean, not their largest or their sum, is what is
    taken off (written out from the draws)."""
    from sklearn_quinn import _local_posterior

    X, y = linear_data
    monkeypatch.setattr(_local_posterior, "choose_model_structure", lambda model, theta: ("diag", "patched"))
    reg = MCDropoutRegressor(module=linear_module(), normalize_X=False, normalize_y=False, random_state=0).fit(X, y)
    reg.posterior_ = DropoutPosterior(reg.posterior_.theta, reg.posterior_.blocks, 1e-3)
    reg.n_samples = 2000
    posterior = BayesianLinearRegression.at_precisions(X, y, reg.noise_std_, reg.prior_precisions_)
    draws = reg.posterior_.sample(reg.n_samples, prediction_generator(reg._sample_seed)).numpy()
    masks = (posterior.design(X) @ draws.T).var(1, ddof=1)
    assert np.ptp(masks) > 0.5 * masks.mean() > 0
    target = reg.noise_std_**2 * posterior.well_determined() / len(X)
    assert target > masks.max()  # a shortfall either way: the mean and the largest differ
    local = float(reg._local_variance(X, y[:, None], torch.tensor([reg.noise_std_])))
    assert local == pytest.approx(target - masks.mean(), rel=1e-6)


def test_a_fixed_rate_is_held_fixed_in_training_not_learned(wave_data):
    """dropout_rate=0.3 trains behind masks of rate 0.3 (a buffer), not behind learned Concrete
    rates that the posterior then ignores."""
    X, y = wave_data
    reg = small(dropout_rate=0.3, max_epochs=5).fit(X, y)
    dropout = reg.net_.module_
    assert dropout.rate == 0.3 and "rate_logits" not in dict(dropout.named_parameters())
    np.testing.assert_array_equal(dropout.rates.numpy(), np.full(len(reg.dropout_rates_), 0.3))
    np.testing.assert_array_equal(reg.dropout_rates_, 0.3)


def test_at_rate_zero_either_prior_learning_is_the_one_map_training(wave_data):
    """At dropout_rate=0 there is no dropout training to hold a prior fixed for: 'evidence' is the
    MAP training with its learned prior, as 'joint' is, not a second training under the first's."""
    X, y = wave_data
    y = (y > np.median(y)).astype(int)
    clf = MCDropoutClassifier(hidden_layer_sizes=(8,), max_epochs=20, dropout_rate=0.0, random_state=0)
    evidence = clone(clf).set_params(prior_learning="evidence").fit(X, y)
    joint = clone(clf).set_params(prior_learning="joint").fit(X, y)
    torch.testing.assert_close(evidence.posterior_.theta, joint.posterior_.theta, rtol=0, atol=0)
    assert evidence.evidence_history_ == joint.evidence_history_


def test_evidence_prior_learning_trains_its_map_network_at_the_prior_std_scale(wave_data):
    """prior_learning='evidence' takes the prior of the MAP network trained at prior_std_scale
    (the same estimator at dropout_rate=0), not at the evidence's own scale 1."""
    X, y = wave_data
    scaled = small(prior_learning="evidence", prior_std_scale=2.0, max_epochs=20)
    map_network = clone(scaled).set_params(dropout_rate=0.0).fit(X, y)
    unscaled_map = clone(scaled).set_params(dropout_rate=0.0, prior_std_scale=1.0).fit(X, y)
    dropout = scaled.fit(X, y)
    assert dropout.prior_precisions_ == map_network.prior_precisions_
    assert dropout.prior_precisions_ != unscaled_map.prior_precisions_


def test_documented_defaults_and_parameters_are_kept():
    """The docstrings' defaults: the classifier learns its prior from the MAP network's evidence
    ('evidence'), the regressor jointly; 100 draws; learned rates. Parameters are stored as given."""
    for estimator, prior_learning in [(MCDropoutRegressor(), "joint"), (MCDropoutClassifier(), "evidence")]:
        params = estimator.get_params()
        assert params["prior_learning"] == prior_learning
        assert params["n_samples"] == 100 and params["dropout_rate"] == "auto"
    assert MCDropoutClassifier().get_params()["moment_match"] is False
    given = MCDropoutClassifier(moment_match=True, predictive="mean_field_1", n_samples=7).get_params()
    assert (given["moment_match"], given["predictive"], given["n_samples"]) == (True, "mean_field_1", 7)
