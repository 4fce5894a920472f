"""``evaluate``: the two-round scaffold of predictive summaries, then metrics.

Round one computes the predictive summaries the requested metrics need, each
once: ``mean``, ``std``, ``variance``, ``covariance``, ``samples`` (draws of
y) for a regressor, ``proba`` for a classifier. A summary derived from
another reuses it (the variance is the diagonal of an already computed
covariance, the std its square root). Round two applies the metrics to the
summaries. A metric is a built-in name or a callable ``(y_true, summaries)``
reading what it needs from the lazy ``summaries`` mapping.
"""

from collections.abc import Mapping

import numpy as np
from sklearn.base import is_classifier

from . import metrics as M
from ._pipelines import call_method, final_step, has_method
from ._validation import check_count

#: Built-in metrics: name -> (summaries needed, function of y_true and the summaries).
REGRESSION_METRICS = {
    "rmse": (("mean",), lambda y, s: M.root_mean_squared_error(y, s["mean"])),
    "nll": (("mean", "std"), lambda y, s: M.gaussian_nll(y, s["mean"], s["std"])),
    "crps": (("mean", "std"), lambda y, s: M.crps_gaussian(y, s["mean"], s["std"])),
    "crps_samples": (("samples",), lambda y, s: M.crps_samples(y, s["samples"])),
    "chi_squared": (("mean", "std"), lambda y, s: M.chi_squared(y, s["mean"], s["std"])),
    "chi_squared_error": (("mean", "std"), lambda y, s: M.chi_squared_error(y, s["mean"], s["std"])),
    "coverage": (("mean", "std"), lambda y, s: M.interval_coverage(y, s["mean"], s["std"], s.level)),
    "interval_width": (("mean", "std"), lambda y, s: M.interval_width(y, s["mean"], s["std"], s.level)),
    "quantile_calibration_error": (
        ("mean", "std"),
        lambda y, s: M.quantile_calibration_error(y, s["mean"], s["std"]),
    ),
}
CLASSIFICATION_METRICS = {
    "nll": (("proba",), lambda y, s: M.categorical_nll(y, s["proba"], s.labels)),
    "accuracy": (("proba",), lambda y, s: M.accuracy(y, s["proba"], s.labels)),
    "brier": (("proba",), lambda y, s: M.brier_score(y, s["proba"], s.labels)),
    "ece": (("proba",), lambda y, s: M.expected_calibration_error(y, s["proba"], labels=s.labels)),
    "mce": (("proba",), lambda y, s: M.maximum_calibration_error(y, s["proba"], labels=s.labels)),
}
# Round one computes the most informative summaries first, so the rest derive from them.
_SUMMARY_ORDER = ("covariance", "samples", "proba", "variance", "std", "mean")
DEFAULT_REGRESSION = ("rmse", "nll", "crps", "chi_squared", "coverage", "interval_width",
                      "quantile_calibration_error")
DEFAULT_CLASSIFICATION = ("accuracy", "nll", "brier", "ece", "mce")


class PredictiveSummaries(Mapping):
    """Predictive summaries of an estimator on ``X``, computed on first access and kept.

    Keys: ``mean``, ``std``, ``variance``, ``covariance``, ``samples`` for a
    regressor; ``proba`` for a classifier. ``calls`` counts the estimator calls
    made, by method, so the reuse can be checked.
    """

    def __init__(self, estimator, X, *, level=0.95, n_draws=200, random_state=0):
        self.estimator, self.X = estimator, X
        self.level, self.n_draws, self.random_state = level, n_draws, random_state
        self.labels = getattr(estimator, "classes_", None)
        self.calls = {}
        self._values = {}

    def _call(self, summary, method, **kwargs):
        """``method(X, **kwargs)`` of the estimator for ``summary``; a ValueError naming both where the
        estimator has no such method, or its method no such keyword (another library's regressor)."""
        needs = f"the {summary!r} summary needs {method}({', '.join(['X', *(f'{k}=...' for k in kwargs)])})"
        if not has_method(self.estimator, method):
            raise ValueError(f"{needs}, which {type(final_step(self.estimator)).__name__} does not have.")
        self.calls[method] = self.calls.get(method, 0) + 1
        try:
            return call_method(self.estimator, method, self.X, **kwargs)
        except TypeError as error:  # only the refusal of a keyword passed here, not a bug inside the method
            if "unexpected keyword argument" not in str(error) or not any(f"'{key}'" in str(error) for key in kwargs):
                raise
            raise ValueError(f"{needs}: {error}") from error

    def _compute(self, key):
        values = self._values
        if key == "proba":
            values["proba"] = self._call(key, "predict_proba")
        elif key == "samples":
            values["samples"] = self._call(key, "sample_y", n_samples=self.n_draws, random_state=self.random_state)
        elif key == "covariance":
            values["mean"], values["covariance"] = self._call(key, "predict", return_cov=True)
        elif key == "variance":
            if "covariance" in values:
                cov = values["covariance"]
                values["variance"] = np.diagonal(cov).T if cov.ndim == 3 else np.diagonal(cov).copy()
            else:
                values["variance"] = self["std"] ** 2
        elif key == "std":
            if "covariance" in values or "variance" in values:
                values["std"] = np.sqrt(self["variance"])
            else:
                values["mean"], values["std"] = self._call(key, "predict", return_std=True)
        elif key == "mean":
            values["mean"] = self._call(key, "predict")
        else:
            raise KeyError(key)

    def __getitem__(self, key):
        if key not in self._values:
            self._compute(key)
        return self._values[key]

    def __iter__(self):
        return iter(self._values)

    def __len__(self):
        return len(self._values)


def evaluate(estimator, X, y, metrics=None, *, summaries=(), level=0.95, n_draws=200, random_state=0):
    """Evaluate a fitted estimator's predictive distribution on ``(X, y)``.

    Parameters
    ----------
    estimator : fitted regressor with ``predict(X, return_std=True)`` or classifier
        with ``predict_proba``.
    X, y : array-like
    metrics : str, list of str or dict, default=None
        Built-in names (regression: 'rmse', 'nll', 'crps', 'crps_samples',
        'chi_squared', 'chi_squared_error', 'coverage', 'interval_width',
        'quantile_calibration_error'; classification: 'accuracy', 'nll',
        'brier', 'ece', 'mce'), or a dict ``{name: metric}`` whose values are
        built-in names or callables ``(y_true, summaries) -> float``. None
        gives the default set for the estimator's kind.
    summaries : str or iterable of str, default=()
        Summaries for round one beyond those the built-in metrics need, for
        callables (e.g. ``('covariance',)``); anything else a callable reads is
        computed on first access.
    level : float, default=0.95
        Level of the central intervals for 'coverage' and 'interval_width'.
    n_draws : int, default=200
        Draws of y for sample-based metrics.
    random_state : int, default=0
        Seeds ``sample_y``.

    Returns
    -------
    dict
        Metric name -> float.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_quinn import LaplaceRegressor
    >>> from sklearn_quinn.evaluation import evaluate
    >>> rng = np.random.RandomState(0)
    >>> X = rng.uniform(-2, 2, size=(60, 1))
    >>> y = np.sin(2 * X[:, 0]) + 0.1 * rng.randn(60)
    >>> reg = LaplaceRegressor(hidden_layer_sizes=(16,), max_epochs=100, random_state=0).fit(X, y)
    >>> sorted(evaluate(reg, X, y, metrics=["rmse", "nll", "coverage"]))
    ['coverage', 'nll', 'rmse']
    """
    classifier = is_classifier(estimator)
    builtin = CLASSIFICATION_METRICS if classifier else REGRESSION_METRICS
    if metrics is None:
        metrics = DEFAULT_CLASSIFICATION if classifier else DEFAULT_REGRESSION
    if isinstance(metrics, str):  # one name, not its characters
        metrics = [metrics]
    if isinstance(summaries, str):
        summaries = [summaries]
    named = metrics.items() if isinstance(metrics, Mapping) else ((name, name) for name in metrics)
    needed, functions = set(summaries), {}
    for name, metric in named:
        if callable(metric):
            functions[name] = metric
        elif metric in builtin:
            needs, functions[name] = builtin[metric]
            needed.update(needs)
        else:
            kind = "classification" if classifier else "regression"
            raise ValueError(f"Unknown {kind} metric {metric!r}; expected one of {sorted(builtin)} or a callable.")
    unknown = needed.difference(_SUMMARY_ORDER)
    if unknown:
        raise ValueError(f"Unknown summaries {sorted(unknown)}; expected some of {list(_SUMMARY_ORDER)}.")

    if "samples" in needed:
        check_count(n_draws, "n_draws")
    values = PredictiveSummaries(estimator, X, level=level, n_draws=n_draws, random_state=random_state)
    for key in _SUMMARY_ORDER:  # round one
        if key in needed:
            values[key]
    y = np.asarray(y)
    return {name: float(function(y, values)) for name, function in functions.items()}  # round two
