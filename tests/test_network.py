"""The batched functional forward f(Theta, X)."""

import pytest
import torch
from torch import nn
from torch.func import jacrev

from sklearn_quinn._core import network
from sklearn_quinn._core.network import FunctionalModel, LinearSkipMLP, build_mlp

from .test_user_modules import Flat


class TwoHeads(nn.Module):
    """Not a Sequential: must take the generic vmap path."""

    def __init__(self):
        super().__init__()
        self.body = nn.Linear(3, 8)
        self.head = nn.Linear(8, 2)
        self.register_buffer("offset", torch.tensor([1.0, -1.0], dtype=torch.float64))

    def forward(self, x):
        return self.head(torch.tanh(self.body(x))) + self.offset


def _inputs(n=7, d=3):
    return torch.randn(n, d, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


def _assert_forward_and_vjp_match(model, reference, theta, X):
    """``model.forward_and_vjp`` against ``reference``'s forward and autograd
    through it, for a random cotangent, which the pullback leaves as it was."""
    cotangent = torch.randn(*reference(theta, X).shape, dtype=torch.float64)
    cotangent_before = cotangent.clone()
    outputs, vjp = model.forward_and_vjp(theta, X)
    rows = theta.clone().requires_grad_(True)
    (expected,) = torch.autograd.grad((reference(rows, X) * cotangent).sum(), rows)
    torch.testing.assert_close(outputs, reference(theta, X))
    torch.testing.assert_close(vjp(cotangent), expected)
    assert torch.equal(cotangent, cotangent_before)


@pytest.mark.parametrize("activation", ["identity", "logistic", "tanh", "relu"])
def test_fast_path_matches_module_forward(activation):
    torch.manual_seed(0)
    module = build_mlp(3, 2, (5, 4), activation).double()
    model = FunctionalModel(module)
    X = _inputs()
    assert model._plan is not None
    torch.testing.assert_close(model.single(model.flatten(), X), module(X))


def test_fast_path_matches_generic_path_for_every_row():
    torch.manual_seed(0)
    model = FunctionalModel(build_mlp(3, 2, (6,), "relu").double())
    generic = FunctionalModel(model.module)
    generic._plan = None
    theta = torch.randn(5, model.n_params, dtype=torch.float64)
    X = _inputs()
    out = model(theta, X)
    assert out.shape == (5, 7, 2)
    torch.testing.assert_close(out, generic(theta, X))


def test_theta_layout_follows_named_parameters():
    torch.manual_seed(0)
    module = build_mlp(3, 1, (4,), "tanh").double()
    model = FunctionalModel(module)
    torch.testing.assert_close(model.flatten(), nn.utils.parameters_to_vector(module.parameters()))
    for (name, param), view in zip(module.named_parameters(), model.unflatten(model.flatten()).items()):
        assert view[0] == name
        torch.testing.assert_close(view[1], param.detach())


@pytest.mark.parametrize("activation", ["identity", "logistic", "tanh", "relu"])
@pytest.mark.parametrize("hidden", [(), (5,), (4, 3)])
def test_mlp_jacobian_matches_autograd(activation, hidden):
    torch.manual_seed(0)
    model = FunctionalModel(build_mlp(3, 2, hidden, activation).double())
    theta = model.flatten() + 0.1
    X = _inputs()
    expected = jacrev(lambda t: model.single(t, X))(theta)  # (N, O, K), the whole-batch Jacobian
    torch.testing.assert_close(model.jacobian(theta, X), expected)
    generic = FunctionalModel(model.module)
    generic._plan = None
    torch.testing.assert_close(generic.jacobian(theta, X), expected)


def test_bias_free_mlp_jacobian():
    torch.manual_seed(0)
    module = nn.Sequential(nn.Linear(3, 4, bias=False), nn.Tanh(), nn.Linear(4, 2, bias=False)).double()
    model = FunctionalModel(module)
    X = _inputs()
    expected = jacrev(lambda t: model.single(t, X))(model.flatten())
    torch.testing.assert_close(model.jacobian(model.flatten(), X), expected)


def test_generic_module_with_buffers():
    torch.manual_seed(0)
    module = TwoHeads().double()
    model = FunctionalModel(module)
    assert model._plan is None
    X = _inputs()
    theta = model.flatten().repeat(3, 1)
    out = model(theta, X)
    assert out.shape == (3, 7, 2)
    torch.testing.assert_close(out[1], module(X))


def test_a_modules_dropout_is_off_in_its_functional_calls_and_its_mode_kept():
    """vmap refuses a dropout layer's random masks: the functional calls run the module in eval mode,
    the network's function, and leave each submodule's own mode as it was (training, for skorch)."""
    torch.manual_seed(0)
    module = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Dropout(0.5), nn.Linear(8, 2)).double()
    module.train()
    module[3].eval()  # a mode of its own, to be kept
    model = FunctionalModel(module)
    theta, X = model.flatten(), torch.randn(5, 3, dtype=torch.float64)
    outputs = model(theta.expand(2, -1), X)
    torch.testing.assert_close(outputs[0], outputs[1])
    torch.testing.assert_close(model.jacobian(theta, X), model.jacobian(theta, X))
    with torch.no_grad():
        expected = module.eval()(X)
    module.train()
    module[3].eval()
    torch.testing.assert_close(outputs[0], expected)
    model(theta[None], X)
    assert [submodule.training for submodule in module] == [True, True, True, False]


def test_a_sequential_running_one_activation_twice_is_its_own_function():
    """One activation object at two places of an nn.Sequential: named_children lists it once, the fast
    path's plan has both places."""
    torch.manual_seed(0)
    tanh = nn.Tanh()
    module = nn.Sequential(nn.Linear(3, 8), tanh, nn.Linear(8, 8), tanh, nn.Linear(8, 2)).double()
    model, X = FunctionalModel(module), _inputs()
    assert model.fast_path
    cotangent = torch.randn(7, 2, dtype=torch.float64)
    outputs, vjp = model.forward_and_vjp(model.flatten()[None], X)
    expected = torch.autograd.grad((module(X) * cotangent).sum(), list(module.parameters()))
    torch.testing.assert_close(outputs[0], module(X))
    torch.testing.assert_close(vjp(cotangent[None])[0], torch.cat([g.flatten() for g in expected]))


def test_a_layer_registered_twice_is_refused():
    """One nn.Linear at two places of an nn.Sequential: torch.func's functional_call leaves such a module
    holding batched tensors, so it is refused with the way out, before any training."""
    linear = nn.Linear(8, 8)
    module = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), linear, nn.Tanh(), linear, nn.Linear(8, 1))
    with pytest.raises(ValueError, match="layer as both '2' and '4'.*call it twice in forward"):
        FunctionalModel(module)


def test_single_linear_and_bias_free_layers():
    torch.manual_seed(0)
    for module in (nn.Linear(3, 2), nn.Sequential(nn.Linear(3, 4, bias=False), nn.ReLU(), nn.Linear(4, 1))):
        module = module.double()
        model = FunctionalModel(module)
        assert model._plan is not None
        X = _inputs()
        expected = module(X)
        torch.testing.assert_close(model.single(model.flatten(), X), expected.reshape(7, -1))


def test_one_dimensional_module_output_gets_an_output_axis():
    model = FunctionalModel(Flat().double())
    assert model(model.flatten()[None], _inputs()).shape == (1, 7, 1)


def test_empty_hidden_layers_build_a_linear_model():
    module = build_mlp(3, 2, (), "relu")
    assert isinstance(module, nn.Sequential) and len(module) == 1
    assert isinstance(module[0], nn.Linear)


@pytest.mark.parametrize("fast_path", [True, False])
@pytest.mark.parametrize("activation", ["identity", "logistic", "tanh", "relu"])
def test_forward_and_vjp_matches_autograd(fast_path, activation):
    torch.manual_seed(0)
    model = FunctionalModel(build_mlp(3, 2, (5, 4), activation).double())
    if not fast_path:
        model._plan = None
    theta = model.flatten() + 0.1 * torch.randn(3, model.n_params, dtype=torch.float64)
    _assert_forward_and_vjp_match(model, model, theta, _inputs())


@pytest.mark.parametrize("per_row_inputs", [False, True], ids=["shared X", "X per row"])
def test_forward_and_vjp_with_per_row_inputs_and_bias_free_layers(per_row_inputs):
    """The fast path's other layouts: inputs (S, N, D), one set per weight row,
    and layers without bias (their gradient blocks are the only ones written)."""
    torch.manual_seed(1)
    module = nn.Sequential(nn.Linear(3, 5, bias=False), nn.Tanh(), nn.Linear(5, 2)).double()
    model = FunctionalModel(module)
    assert model._plan is not None
    theta = model.flatten() + 0.1 * torch.randn(4, model.n_params, dtype=torch.float64)
    X = torch.randn(4, 7, 3, dtype=torch.float64) if per_row_inputs else _inputs()
    generic = FunctionalModel(module)
    generic._plan = None
    _assert_forward_and_vjp_match(model, generic, theta, X)


def _in_place_passes():
    return nn.Sequential(nn.Tanh(), nn.Linear(3, 5), nn.ReLU(), nn.Sigmoid(), nn.Linear(5, 1))


def _sigmoid_head():
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2), nn.Sigmoid())


#: Fast-path modules whose passes have traps, and the name of each one's output bias.
FAST_PATH_TRAPS = {
    # An activation first (on the caller's X), two in a row (the first's output is the second's input, which
    # the first's backward pass reads), and one output unit (its backward product an outer product).
    "in-place passes": (_in_place_passes, "4.bias"),
    # The last step an activation: its backward pass is the pullback's first, on the caller's cotangent, and
    # no bias is the output bias, since the last one is added before it.
    "a sigmoid head": (_sigmoid_head, None),
    # The same inside a linear skip: the activation's backward pass reads its own outputs, not them plus the
    # skip's (which the Jacobian and the gradient had read).
    "a sigmoid head in a linear skip": (lambda: LinearSkipMLP(_sigmoid_head(), 3, 2), None),
}


@pytest.mark.parametrize("per_row_inputs", [False, True], ids=["shared X", "X per row"])
@pytest.mark.parametrize("trap", FAST_PATH_TRAPS)
def test_the_fast_path_leaves_the_callers_tensors_and_matches_autograd(trap, per_row_inputs):
    """The fast path runs activations in place on a layer's product and their backward passes in
    place on a cotangent it made: through modules that set traps for both, its outputs, its
    vector-Jacobian product and its per-example Jacobian equal autograd's through the module, and
    the caller's X and cotangent are left as they were."""
    build, output_bias = FAST_PATH_TRAPS[trap]
    torch.manual_seed(3)
    module = build().double()
    model = FunctionalModel(module)
    assert model.fast_path and model.output_bias == output_bias
    generic = FunctionalModel(module)
    generic._plan = None
    theta = model.flatten() + 0.1 * torch.randn(4, model.n_params, dtype=torch.float64)
    X = torch.randn(4, 7, 3, dtype=torch.float64) if per_row_inputs else _inputs()
    X_before = X.clone()
    _assert_forward_and_vjp_match(model, generic, theta, X)
    assert torch.equal(X, X_before)
    if not per_row_inputs:
        torch.testing.assert_close(model.jacobian(theta[0], X), jacrev(lambda t: generic.single(t, X))(theta[0]))


def test_linear_skip_mlp_adds_a_linear_map_of_the_inputs():
    torch.manual_seed(0)
    module = build_mlp(3, 2, (5,), "relu", linear_skip=True).double()
    X = _inputs()
    expected = module.mlp(X) + X @ module.linear.weight.T
    torch.testing.assert_close(module(X), expected)
    assert [name for name, _ in module.named_parameters()][-1] == "linear.weight"
    assert module.linear.bias is None
    assert isinstance(build_mlp(3, 2, (), "relu", linear_skip=True), nn.Sequential)


@pytest.mark.parametrize("per_row_inputs", [False, True], ids=["shared X", "X per row"])
@pytest.mark.parametrize("hidden", [(5,), (4, 3)])
def test_linear_skip_fast_path_matches_autograd(hidden, per_row_inputs):
    """Forward, per-example Jacobian and vector-Jacobian product of the skip
    network's fast path against autograd through the module itself."""
    torch.manual_seed(2)
    model = FunctionalModel(build_mlp(3, 2, hidden, "tanh", linear_skip=True).double())
    generic = FunctionalModel(model.module)
    generic._plan = None
    assert model._plan is not None
    theta = model.flatten() + 0.1 * torch.randn(4, model.n_params, dtype=torch.float64)
    X = torch.randn(4, 7, 3, dtype=torch.float64) if per_row_inputs else _inputs()
    torch.testing.assert_close(model(theta, X), generic(theta, X))
    _assert_forward_and_vjp_match(model, generic, theta, X)
    if not per_row_inputs:
        jacobian = jacrev(lambda t: generic.single(t, X))(theta[0])
        torch.testing.assert_close(model.jacobian(theta[0], X), jacobian)


@pytest.mark.parametrize("likelihood", ["gaussian", "categorical"])
def test_row_blocks_give_the_unblocked_values_and_gradients(monkeypatch, likelihood):
    """Blocks of 2 weight rows (a block budget of 2 rows x 7 points x 8 units of float64)
    against one pass over all 5 rows, for the state likelihoods' values,
    gradients and the residual sums of squares."""
    from sklearn_quinn._core.likelihoods import CategoricalStateLikelihood, GaussianStateLikelihood

    X = _inputs()
    generator = torch.Generator().manual_seed(1)
    if likelihood == "gaussian":
        model = FunctionalModel(build_mlp(3, 1, (8,)).double())
        density = GaussianStateLikelihood(model, X, torch.randn(7, 1, generator=generator, dtype=torch.float64))
        n_columns = model.n_params + 1  # the log noise std last
    else:
        model = FunctionalModel(build_mlp(3, 3, (8,)).double())
        density = CategoricalStateLikelihood(model, X, torch.tensor([0, 1, 2, 0, 1, 2, 0]))
        n_columns = model.n_params
    rows = 0.5 * torch.randn(5, n_columns, generator=generator, dtype=torch.float64)
    whole = (density(rows), *density.value_and_grad(rows))
    calls = []
    monkeypatch.setattr(network, "CPU_BLOCK_BYTES", 2 * 7 * 8 * 8)
    monkeypatch.setattr(model, "_batched_mlp", lambda theta, *args, **kwargs: calls.append(len(theta))
                        or FunctionalModel._batched_mlp(model, theta, *args, **kwargs))
    for got, expected in zip((density(rows), *density.value_and_grad(rows)), whole):
        torch.testing.assert_close(got, expected)
    assert calls == [2, 2, 1] * 2
    if likelihood == "gaussian":
        theta = rows[:, : model.n_params]
        expected = (density.Y - model(theta, X)).square().sum((-1, -2))
        torch.testing.assert_close(density.sum_of_squares(theta), expected)


def test_row_blocks_hold_a_budget_of_bytes(monkeypatch):
    """A block of float32 rows holds twice the rows of a float64 block: the cache holds bytes.
    The float32 surrogate's gradient (HMC's kicks) goes in those blocks, and the likelihood counts them."""
    from sklearn_quinn._core.likelihoods import GaussianStateLikelihood

    monkeypatch.setattr(network, "CPU_BLOCK_BYTES", 2 * 7 * 8 * 8)
    blocks = []  # the rows and dtype of every block the network is evaluated on
    batched_mlp = FunctionalModel._batched_mlp
    monkeypatch.setattr(FunctionalModel, "_batched_mlp", lambda self, theta, *args, **kwargs: blocks.append(
        (len(theta), theta.dtype)) or batched_mlp(self, theta, *args, **kwargs))
    model = FunctionalModel(build_mlp(3, 1, (8,)).double())
    generator = torch.Generator().manual_seed(0)
    density = GaussianStateLikelihood(model, _inputs(), torch.randn(7, 1, generator=generator, dtype=torch.float64))
    rows = 0.5 * torch.randn(5, model.n_params + 1, generator=generator, dtype=torch.float64)
    density.value_and_grad(rows)
    assert blocks == [(2, torch.float64), (2, torch.float64), (1, torch.float64)]
    assert density.n_gradient_blocks == 3
    blocks.clear()
    density.set_surrogate_dtype(torch.float32)
    density.surrogate.value_and_grad(rows)
    assert blocks == [(4, torch.float32), (1, torch.float32)]
    assert (density.n_gradient_rows, density.n_gradient_blocks) == (10, 5)


@pytest.mark.parametrize("tile_points, point_tiles", [(3, (3, 3, 3, 2)), (11, (11,))],
                         ids=["points in tiles", "every point in one tile"])
@pytest.mark.parametrize("module", [build_mlp(3, 2, (8,)).double(), TwoHeads()], ids=["mlp", "generic"])
@pytest.mark.parametrize("shared_inputs", [True, False])
def test_outputs_without_gradients_go_in_tiles_of_rows_and_points(module, shared_inputs, tile_points, point_tiles,
                                                                  monkeypatch):
    """Predictions of many rows on many points: on a CPU they go in tiles of rows and points whose
    activations stay under the budget (2 rows a tile here), even where every point fits one tile,
    and the outputs are the same; with gradients, in one pass."""
    model = FunctionalModel(module)
    generator = torch.Generator().manual_seed(0)
    theta = torch.randn(5, model.n_params, generator=generator, dtype=torch.float64)
    X = _inputs(n=11) if shared_inputs else torch.randn(5, 11, 3, generator=generator, dtype=torch.float64)
    whole = model(theta, X)
    calls = []
    monkeypatch.setattr(network, "CPU_INFERENCE_TILE_POINTS", tile_points)
    monkeypatch.setattr(network, "CPU_INFERENCE_TILE_ELEMENTS", 2 * tile_points * model.max_width)
    monkeypatch.setattr(model, "_outputs", lambda theta, X: calls.append((len(theta), X.shape[-2]))
                        or FunctionalModel._outputs(model, theta, X))
    with torch.no_grad():
        torch.testing.assert_close(model(theta, X), whole.detach())
    assert calls == [(rows, points) for rows in (2, 2, 1) for points in point_tiles]
    model(theta, X)
    assert calls[-1] == (5, 11)


def test_outputs_off_a_cpu_go_in_blocks_of_points_with_every_row():
    """On a GPU every weight row goes at once, the points in blocks of at most
    INFERENCE_BLOCK_ELEMENTS activations."""
    model = FunctionalModel(build_mlp(3, 2, (8,)).double())
    assert model.inference_tile(4, 10**9, torch.device("cuda")) == (4, network.INFERENCE_BLOCK_ELEMENTS // (4 * 8))
    points = network.CPU_INFERENCE_TILE_POINTS
    assert model.inference_tile(4, 10**9, torch.device("cpu")) == (
        network.CPU_INFERENCE_TILE_ELEMENTS // (points * 8), points)


def test_a_linear_subclass_with_its_own_forward_is_evaluated_by_it():
    class Doubled(nn.Linear):
        def forward(self, inputs):
            return nn.functional.linear(inputs, 2 * self.weight, self.bias)

    torch.manual_seed(0)
    for module in (Doubled(3, 2).double(), nn.Sequential(Doubled(3, 4), nn.Tanh(), nn.Linear(4, 2)).double()):
        model = FunctionalModel(module)
        X = torch.randn(5, 3, dtype=torch.float64)
        torch.testing.assert_close(model.single(model.flatten(), X), module(X).detach())
