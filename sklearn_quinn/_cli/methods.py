"""The registry of methods the command line knows: one line per family.

Each entry names the family's regressor and classifier and the settings of
``compare --quick``: the package's defaults with a smaller budget (fewer
epochs, chains, draws and particles; Bayes by backprop's own), for a first
look at a table bigger than a few hundred rows. ``compare`` without it, and
the UCI benchmark, use the package's defaults unchanged.
"""

from typing import NamedTuple

from ..dropout import MCDropoutClassifier, MCDropoutRegressor
from ..ensemble import DeepEnsembleClassifier, DeepEnsembleRegressor, RMSClassifier, RMSRegressor
from ..laplace import LaplaceClassifier, LaplaceRegressor
from ..mcmc import MCMCClassifier, MCMCRegressor
from ..smc import SMCClassifier, SMCRegressor
from ..swag import SWAGClassifier, SWAGRegressor
from ..variational import BBBClassifier, BBBRegressor


class Method(NamedTuple):
    """A family as the command line sees it."""

    label: str
    regressor: type
    classifier: type
    quick: dict  # compare --quick's settings (a smaller budget than the package's defaults)


METHODS = {
    "laplace": Method("Laplace", LaplaceRegressor, LaplaceClassifier, {"max_epochs": 300}),
    "mcmc": Method("MCMC (HMC)", MCMCRegressor, MCMCClassifier,
                   {"max_epochs": 300, "n_burnin": 200, "n_samples": 200, "n_leapfrog": 10}),
    "de": Method("Deep ensemble", DeepEnsembleRegressor, DeepEnsembleClassifier, {"max_epochs": 300}),
    "rms": Method("RMS", RMSRegressor, RMSClassifier, {"max_epochs": 300}),
    "swag": Method("SWAG", SWAGRegressor, SWAGClassifier, {"max_epochs": 300, "swag_epochs": 50}),
    # Its own defaults: 300 epochs give a regressor on 200 rows 75 steps of warm-up before the
    # ELBO's learned prior, which then collapses the network onto a linear model (docs/variational.rst).
    "bbb": Method("BBB", BBBRegressor, BBBClassifier, {}),
    "dropout": Method("MC dropout", MCDropoutRegressor, MCDropoutClassifier, {"max_epochs": 300}),
    "smc": Method("SMC", SMCRegressor, SMCClassifier, {"n_particles": 100, "n_leapfrog": 10}),
}


def check_methods(names):
    """``names``, or a ValueError naming the unknown ones and the known ones."""
    unknown = [name for name in names if name not in METHODS]
    if unknown:
        raise ValueError(f"unknown method {', '.join(map(repr, unknown))}; expected some of {', '.join(METHODS)}")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:  # one row and one plot a method: a second fit would overwrite the first's
        raise ValueError(f"method {', '.join(map(repr, repeated))} listed more than once")
    return list(names)


def make_estimator(name, classification, *, quick, max_epochs=None, random_state=0, n_rows=None, **params):
    """A fresh estimator of method ``name``.

    Parameters
    ----------
    name : str
        Key of ``METHODS``.
    classification : bool
        The classifier of the family, else its regressor.
    quick : bool
        Start from the method's quick settings (``compare --quick``), else
        from the package's defaults (``compare``, the benchmarks).
    max_epochs : int, default=None
        Overrides the training epochs (the MAP, the members, BBB's ELBO), for
        smoke runs; None keeps the settings. SMC trains no network and
        ignores it.
    random_state : int, default=0
    n_rows : int, default=None
        The training rows, where known: on a table big enough that the
        defaults' ``max_epochs='auto'`` trains fewer epochs than the quick
        settings, ``quick`` keeps the defaults' epochs and members
        (:func:`within_the_defaults_budget`).
    **params
        Further estimator parameters (``hidden_layer_sizes``, ...).
    """
    method = METHODS[name]
    estimator = method.classifier() if classification else method.regressor()
    settings = dict(method.quick) if quick else {}
    if quick and n_rows is not None:
        settings = within_the_defaults_budget(estimator, settings, n_rows)
    if max_epochs is not None and "max_epochs" in estimator.get_params():
        settings["max_epochs"] = max_epochs
    return estimator.set_params(**settings, random_state=random_state, **params)


def within_the_defaults_budget(estimator, settings, n_rows):
    """``settings`` (``compare --quick``'s) for ``estimator`` on ``n_rows`` rows, at most the
    defaults' budget: where ``max_epochs='auto'`` trains at most the quick epochs there (a big
    table, whose training it caps at a number of steps), the defaults' epochs; where it trains
    more but fewer than its full count, the quick epochs and the defaults' members, the fewer
    that ``n_estimators='auto'`` takes on such a table. A fixed ``max_epochs`` of 300 on a
    million rows would otherwise train 7 times the defaults' steps, and RMS's 20 members 30 times."""
    settings = dict(settings)
    params = estimator.get_params()
    if params.get("max_epochs") != "auto" or "max_epochs" not in settings:
        return settings
    if params.get("n_estimators") == "auto":
        settings["n_estimators"] = estimator._n_members(n_rows)
    if estimator._n_epochs(n_rows) <= settings["max_epochs"]:
        del settings["max_epochs"]
    return settings
