"""This package's estimators reached through a scikit-learn ``Pipeline``.

A ``Pipeline`` passes ``predict``'s keywords (``return_std``) on to its last
step, but has no ``sample_y`` or ``predict_uncertainty``; the plots and the
evaluation reach them on the last step, with ``X`` transformed by the steps
before it, as the ``Pipeline``'s own ``predict`` does.
"""

from sklearn.pipeline import Pipeline


def final_step(estimator):
    """A (nested) ``Pipeline``'s last step, or ``estimator`` itself: the fitted model a legend names,
    whose evidence a search reads and whose chains a trace plot draws."""
    return final_step(estimator[-1]) if isinstance(estimator, Pipeline) else estimator


def final_inputs(estimator, X):
    """``X`` as a (nested) ``Pipeline``'s last step reads it, transformed by the steps before it;
    ``X`` itself for an estimator (or None)."""
    if X is None or not isinstance(estimator, Pipeline):
        return X
    return final_inputs(estimator[-1], estimator[:-1].transform(X))


def _passes_on(estimator, method):
    """Whether ``estimator`` is a ``Pipeline`` without ``method`` of its own, whose last step should take it."""
    return isinstance(estimator, Pipeline) and not hasattr(estimator, method)


def has_method(estimator, method):
    """Whether ``estimator``, or the last step of a (nested) ``Pipeline``, has ``method``."""
    if _passes_on(estimator, method):
        return has_method(estimator[-1], method)
    return hasattr(estimator, method)


def call_method(estimator, method, X, *args, **kwargs):
    """``estimator.method(X, ...)``, or the (nested) last step's on ``X`` transformed by the steps before it."""
    if _passes_on(estimator, method):
        return call_method(estimator[-1], method, estimator[:-1].transform(X), *args, **kwargs)
    return getattr(estimator, method)(X, *args, **kwargs)
