"""Methods of this package's estimators reached through a scikit-learn ``Pipeline``.

A ``Pipeline`` passes ``predict``'s keywords (``return_std``) on to its last
step, but has no ``sample_y`` or ``predict_uncertainty``; the plots and the
evaluation reach them on the last step, with ``X`` transformed by the steps
before it, as the ``Pipeline``'s own ``predict`` does.
"""

from sklearn.pipeline import Pipeline


def _through(estimator, method):
    """The last step of a ``Pipeline`` that lacks ``method`` where that step has it, else None."""
    if isinstance(estimator, Pipeline) and not hasattr(estimator, method) and hasattr(estimator[-1], method):
        return estimator[-1]
    return None


def has_method(estimator, method):
    """Whether ``estimator``, or the last step of a ``Pipeline``, has ``method``."""
    return hasattr(estimator, method) or _through(estimator, method) is not None


def call_method(estimator, method, X, *args, **kwargs):
    """``estimator.method(X, ...)``, or the last step's on ``X`` transformed by the steps before it."""
    last = _through(estimator, method)
    if last is None:
        return getattr(estimator, method)(X, *args, **kwargs)
    return getattr(last, method)(estimator[:-1].transform(X), *args, **kwargs)
