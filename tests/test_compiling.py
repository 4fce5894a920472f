"""When compiling pays (the cost model) and ``compiled_or_eager``'s fallback, with ``torch.compile``
replaced by stand-ins that record what they are asked."""

import warnings

import pytest

from sklearn_quinn._core import compiling
from sklearn_quinn._core.compiling import compile_pays, compiled_or_eager, compiled_savings, saved_seconds


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


@pytest.mark.parametrize("dynamic", [None, True])
def test_a_compiled_function_serves_every_call(monkeypatch, dynamic):
    """``torch.compile`` is asked once, with ``dynamic`` as given; every call, arguments and keywords,
    goes through the compiled function, and nothing warns."""
    compiler = RecordingCompiler()
    monkeypatch.setattr(compiling.torch, "compile", compiler)
    function = compiled_or_eager(add, dynamic=dynamic)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert function(1, b=2) == ("compiled", 3)
        assert function(4) == ("compiled", 4)
    assert compiler.keywords == [dict(dynamic=dynamic)] and compiler.calls == 2


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
