"""scikit-learn's estimator checks for every estimator, with fast settings.

One configuration per estimator, and for some a second that takes another path
through fit and predict (a heteroscedastic or a last-layer Laplace, a
classifier's moment-matched predictive, SMC's other prior and heteroscedastic
likelihood), which runs every check but those of how X is read (the class's
validation, before any path begins, which its first configuration checks); the
other options (the other samplers, structures and covariance types, every
family's heteroscedastic likelihood) are tested in the families' own tests and
tests/test_heteroscedastic.py. The evidence-driven training is checked here
through the Gaussian regressors, the Laplace classifier and MC dropout's joint
prior learning (the classifiers share the MAP training and its evidence); the
other classifiers and the heteroscedastic Laplace train under a fixed prior
(``FIXED_PRIOR``), since a classifier's evidence searches the prior's scale
with several full-batch polishes a fit and these checks run about fifty fits
each (the heteroscedastic fit still runs its evidence updates, for the means'
variances).
"""

import numpy as np
import pytest
from sklearn.base import clone, is_classifier
from sklearn.utils.estimator_checks import (  # the ids parametrize_with_checks gives
    _get_check_estimator_ids,
    estimator_checks_generator,
    parametrize_with_checks,
)

from sklearn_quinn import (
    BBBClassifier,
    BBBRegressor,
    DeepEnsembleClassifier,
    DeepEnsembleRegressor,
    LaplaceClassifier,
    LaplaceRegressor,
    MCDropoutClassifier,
    MCDropoutRegressor,
    MCMCClassifier,
    MCMCRegressor,
    RMSClassifier,
    RMSRegressor,
    SMCClassifier,
    SMCRegressor,
    SWAGClassifier,
    SWAGRegressor,
)
from sklearn_quinn.model_selection import EvidenceSearch

FAST = dict(hidden_layer_sizes=(16,), lr=0.01, max_epochs=60, random_state=0)
FIXED_PRIOR = dict(FAST, prior_std=1.0)
FAST_LINEAR = dict(FAST, hidden_layer_sizes=())
# 40 particles: with 20 and one move a stage the default regressor's fit of scikit-learn's regression check
# scored R^2 0.49 once the input columns' precisions were sampled about their layer's mean (0.81 before; 0.81
# with 40).
SMC_FAST = dict(hidden_layer_sizes=(8,), n_particles=40, n_mcmc_steps=1, n_leapfrog=5, random_state=0)

ESTIMATORS = [
    LaplaceRegressor(**FAST),
    MCMCRegressor(**FAST, n_samples=20, n_burnin=20, n_leapfrog=3, n_chains=2),
    DeepEnsembleRegressor(**FAST, n_estimators=2),
    RMSRegressor(**FAST, n_estimators=2, data_fraction=0.8),
    SWAGRegressor(**FAST, swag_epochs=10, max_rank=4, n_samples=20),
    BBBRegressor(**FAST, n_samples=20),
    MCDropoutRegressor(**FAST, n_samples=20),
    LaplaceClassifier(**FAST, prior_precision="marglik"),
    DeepEnsembleClassifier(**FIXED_PRIOR, n_estimators=3),
    RMSClassifier(**FIXED_PRIOR, n_estimators=3, predictive="mean_field_2", moment_match=True),
    SWAGClassifier(**FIXED_PRIOR, swag_epochs=10, max_rank=4, n_samples=20),
    BBBClassifier(**FIXED_PRIOR, n_samples=20),
    MCDropoutClassifier(**FIXED_PRIOR, n_samples=20),
    MCMCClassifier(**FIXED_PRIOR, n_samples=20, n_burnin=20, n_leapfrog=3, n_chains=2),
    SMCRegressor(**SMC_FAST),
    SMCClassifier(**SMC_FAST),
    # A linear inner model: the checks are of the search, whose every fit fits each candidate.
    EvidenceSearch(LaplaceRegressor(**FAST_LINEAR), {"prior_std": [0.5, 1.0]}),
]

# Second configurations of a class above, each taking another path through fit and predict.
OTHER_PATHS = [
    LaplaceRegressor(**FIXED_PRIOR, likelihood="heteroscedastic"),
    LaplaceRegressor(**FAST, subset_of_weights="last_layer", prior_precision="marglik"),
    LaplaceClassifier(**FAST, hessian_structure="diag", predictive="laplace_bridge", prior_std=1.0, cov_scale=1.0),
    MCDropoutClassifier(**FAST, dropout_rate=0.3, prior_learning="joint", predictive="mean_field_1", moment_match=True),
    SMCRegressor(**SMC_FAST, prior="logistic", prior_std=1.0, noise_std=0.5),
    SMCRegressor(**SMC_FAST, likelihood="heteroscedastic"),
    SMCClassifier(**SMC_FAST, prior="logistic", prior_std=1.0, predictive="mean_field_1", moment_match=True),
    EvidenceSearch(SMCClassifier(**SMC_FAST), {"hidden_layer_sizes": [(2,), (4,)]}),
]

# The checks of how X is read (its container, dtype, memory layout, invalid values, number
# of rows and columns): every configuration of a class reads it through the same validation
# before its path begins, so its first configuration runs them for all.
INPUT_CHECKS = {
    "check_classifier_data_not_an_array", "check_regressor_data_not_an_array", "check_estimators_nan_inf",
    "check_dtype_object", "check_estimators_dtypes", "check_regressors_int", "check_f_contiguous_array_estimator",
    "check_readonly_memmap_input", "check_positive_only_tag_during_fit", "check_n_features_in",
    "check_n_features_in_after_fitting", "check_fit2d_predict1d", "check_fit2d_1feature", "check_fit2d_1sample",
    "check_fit_score_takes_y",
}


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


@pytest.mark.parametrize(
    "estimator, check",
    [(estimator, check) for path in OTHER_PATHS for estimator, check in estimator_checks_generator(path, mark=None)
     if getattr(check, "func", check).__name__ not in INPUT_CHECKS],
    ids=_get_check_estimator_ids,
)
def test_other_paths_are_sklearn_compatible(estimator, check):
    check(estimator)


# ----------------------------------------------------------------------- refits refused for their parameters
FAST_FIT = dict(hidden_layer_sizes=(4,), max_epochs=5, random_state=0)
REFUSED_PARAMETERS = [
    (LaplaceRegressor(**FAST_FIT), dict(hessian_structure="kron", curvature="hessian")),
    (MCMCRegressor(**FAST_FIT, n_samples=4, n_burnin=4, n_chains=2), dict(n_jobs=0)),
    (MCMCClassifier(**FAST_FIT, n_samples=4, n_burnin=4, n_chains=2), dict(predictive="mc_bridge")),
    (SWAGRegressor(**FAST_FIT, swag_epochs=4, n_estimators=2, n_samples=4), dict(n_samples=1)),
    (SMCRegressor(hidden_layer_sizes=(2,), n_particles=8, n_mcmc_steps=1, n_leapfrog=2, random_state=0),
     dict(prior="logistic")),
]


@pytest.mark.parametrize("estimator, bad", REFUSED_PARAMETERS, ids=lambda value: type(value).__name__)
def test_a_refit_refused_for_its_parameters_keeps_the_earlier_fit(estimator, bad):
    """Parameters that no data make valid are refused before anything of the earlier fit goes: it
    predicts as before once they are set back (its posterior_ was gone, and predict failed)."""
    rng = np.random.RandomState(0)
    X = rng.randn(30, 2)
    y = (X[:, 0] > 0).astype(int) if is_classifier(estimator) else X[:, 0] + 0.3 * rng.randn(30)
    fitted = clone(estimator).fit(X, y)
    before = fitted.predict(X)
    good = {name: fitted.get_params()[name] for name in bad}
    with pytest.raises(ValueError):
        fitted.set_params(**bad).fit(X, y)
    np.testing.assert_array_equal(fitted.set_params(**good).predict(X), before)


@pytest.mark.parametrize("estimator", [model for model in ESTIMATORS if not isinstance(model, EvidenceSearch)],
                         ids=lambda estimator: type(estimator).__name__)
def test_a_refit_that_fails_inside_the_family_keeps_the_earlier_fit(estimator, monkeypatch):
    """A refusal or an interrupt once the family's own fit has begun (a data fraction that leaves a
    member no rows, a validation split too small, a Ctrl-C) leaves the earlier fit whole, and an
    unfitted estimator unfitted: it passed check_is_fitted with ``classes_`` and
    ``n_features_in_`` of the refused data, and failed to predict with an AttributeError."""
    from sklearn.exceptions import NotFittedError

    rng = np.random.RandomState(0)
    X = rng.randn(30, 2)
    y = (X[:, 0] > 0).astype(int) if is_classifier(estimator) else X[:, 0] + 0.3 * rng.randn(30)
    fitted = clone(estimator).fit(X, y)
    before = fitted.predict(X)

    def fails_midway(self, X, Y):
        self.posterior_ = None
        raise KeyboardInterrupt

    monkeypatch.setattr(type(fitted), "_fit", fails_midway)
    for model in (fitted, clone(estimator)):
        with pytest.raises(KeyboardInterrupt):
            model.fit(rng.randn(30, 3), y)
    monkeypatch.undo()
    assert fitted.n_features_in_ == 2
    np.testing.assert_array_equal(fitted.predict(X), before)
    unfitted = clone(estimator)
    monkeypatch.setattr(type(unfitted), "_fit", fails_midway)
    with pytest.raises(KeyboardInterrupt):
        unfitted.fit(X, y)
    with pytest.raises(NotFittedError):
        unfitted.predict(X)
