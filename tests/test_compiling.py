"""When compiling pays (the cost model), ``compiled_or_eager``'s fallback, with ``torch.compile``
replaced by stand-ins that record what they are asked, and the loop that compiles as one
``torch.while_loop``."""

import warnings

import pytest
import torch

from sklearn_quinn._core import compiling
from sklearn_quinn._core.compiling import compile_pays, compiled_or_eager, compiled_savings, repeat, row, saved_seconds


# ------------------------------------------------------------------- the cost model
def test_the_saving_is_a_fixed_time_a_call_plus_a_time_an_activation():
    """2.9e-4 s a call and 8.5e-10 s an activation (the measured model): 1,000 calls over 1e9
    activations save 0.29 + 0.85 s; ``compiled_savings`` counts ``n_gradients`` calls of
    ``activations`` each."""
    assert saved_seconds(1000, 1e9) == pytest.approx(0.29 + 0.85, rel=1e-12)
    assert saved_seconds(0, 0) == 0
    assert compiled_savings(1000, 1e6) == pytest.approx(saved_seconds(1000, 1e9), rel=1e-12)


def test_compiling_pays_only_where_it_saves_more_than_it_costs(monkeypatch):
    """A saving equal to the compilation's cost does not pay (nothing is gained for the wait);
    one more gradient does. A compilation costs 30 s (an HMC or NUTS step on a CPU)."""
    assert compiling.COMPILE_SECONDS == 30.0
    monkeypatch.setattr(compiling, "COMPILE_SECONDS", compiled_savings(100, 1000))
    assert not compile_pays(100, 1000)
    assert compile_pays(101, 1000)


# ------------------------------------------------------------------- compiled_or_eager
class RecordingCompiler:
    """A stand-in for ``torch.compile``: records its keywords, and its compiled function runs the
    original and marks the result as compiled, or raises ``error`` at every call (counting them)."""

    def __init__(self, error=None):
        self.keywords, self.calls, self.error = [], 0, error

    def __call__(self, function, **keywords):
        self.keywords.append(keywords)

        def compiled(*args, **kwargs):
            self.calls += 1
            if self.error is not None:
                raise self.error
            return ("compiled", function(*args, **kwargs))

        return compiled


def add(a, b=0):
    return a + b


@pytest.mark.parametrize("dynamic", [False, True])
def test_a_compiled_function_serves_every_call(monkeypatch, dynamic):
    """``torch.compile`` is asked once, with ``dynamic`` as given and for the whole graph (with static
    shapes, checking only the tensors' guards at a call); every call, arguments and keywords, goes
    through the compiled function, and nothing warns."""
    compiler = RecordingCompiler()
    monkeypatch.setattr(compiling.torch, "compile", compiler)
    function = compiled_or_eager(add, dynamic=dynamic)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert function(1, b=2) == ("compiled", 3)
        assert function(4) == ("compiled", 4)
    options = {"size_asserts": False}
    if not dynamic:  # static shapes: the tensors' guards alone
        options["guard_filter_fn"] = torch.compiler.keep_tensor_guards_unsafe
    assert compiler.keywords == [dict(dynamic=dynamic, fullgraph=True, options=options)]
    assert compiler.calls == 2


def test_a_failed_compilation_warns_once_and_is_not_tried_again(monkeypatch):
    """The first call's failure warns (naming the error's first line and the function) and runs the
    function eagerly; later calls run eagerly without trying the compiled function again or warning."""
    compiler = RecordingCompiler(RuntimeError("no C++ compiler\nmore detail"))
    monkeypatch.setattr(compiling.torch, "compile", compiler)
    function = compiled_or_eager(add)
    with pytest.warns(UserWarning, match=r"^torch.compile failed \(RuntimeError: no C\+\+ compiler\); running add"):
        assert function(1, b=2) == 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert function(5, b=1) == 6
    assert compiler.calls == 1


def test_an_error_of_the_function_itself_is_raised_by_the_eager_call(monkeypatch):
    monkeypatch.setattr(compiling.torch, "compile", RecordingCompiler())
    function = compiled_or_eager(add)
    with pytest.warns(UserWarning, match="TypeError"), pytest.raises(TypeError):
        function(1, "a")


# ------------------------------------------------------------------- repeat and row
def _add_the_step(step, total, steps_taken):
    """A loop body: adds its step's row of STEPS to ``total`` and counts the steps taken (new tensors)."""
    return total + row(STEPS, step), steps_taken + 1


STEPS = torch.arange(10.0)


@pytest.mark.parametrize("traced", [False, True], ids=["eager", "while_loop"])
@pytest.mark.parametrize("until, total, n_taken", [(None, 28.0, 8), (lambda total, taken: total > 5, 6.0, 4)],
                         ids=["all-steps", "until"])
def test_repeat_runs_the_body_a_step_at_a_time_until_asked_to_stop(monkeypatch, traced, until, total, n_taken):
    """``repeat`` over 8 of STEPS' 10 rows: their sum 0 + ... + 7 in 8 steps; with ``until`` (the total
    past 5), it stops after the step that took it there (0 + 1 + 2 + 3, 4 steps). Traced, as under
    ``torch.compile``, the loop is a ``torch.while_loop`` (run here eagerly: what the compiler
    captures), its step a 0-d tensor that ``row`` indexes by, and its steps a tensor too."""
    monkeypatch.setattr(compiling.torch.compiler, "is_compiling", lambda: traced)
    n_steps = torch.tensor(8) if traced else 8
    carried = (torch.zeros(()), torch.zeros((), dtype=torch.int64))
    got_total, got_taken = repeat(_add_the_step, carried, n_steps, until)
    assert float(got_total) == total and int(got_taken) == n_taken


def test_row_reads_a_step_given_as_an_int_or_a_tensor():
    matrix = torch.arange(12.0).reshape(4, 3)
    torch.testing.assert_close(row(matrix, 2), matrix[2], rtol=0, atol=0)
    torch.testing.assert_close(row(matrix, torch.tensor(2)), matrix[2], rtol=0, atol=0)


class Doubler:
    def double(self, x, *, times=2):
        return times * x


def test_each_compiled_function_gets_a_code_object_of_its_own(monkeypatch):
    """torch.compile keeps its graphs and recompilation counts per code object: two functions
    compiled from one (a closure every fit builds anew, a bound method of a new object) are
    handed over with code objects of their own, each computing what the original does, with
    its defaults, keyword defaults and bound object."""
    handed = []
    monkeypatch.setattr(compiling.torch, "compile", lambda function, **keywords: handed.append(function) or function)
    first, second = compiled_or_eager(add), compiled_or_eager(add)
    assert first(1, b=2) == second(1, b=2) == 3 and first(4) == 4
    method = compiled_or_eager(Doubler().double)
    assert method(3) == 6 and method(3, times=3) == 9
    codes = [add.__code__, Doubler.double.__code__, *(getattr(f, "__func__", f).__code__ for f in handed)]
    assert len({id(code) for code in codes}) == 5
