"""scikit-learn's estimator checks for every estimator, with fast settings.

One configuration per estimator, and for some a second that takes another
path through fit and predict (a heteroscedastic or a last-layer Laplace, a
classifier's moment-matched predictive, SMC's other prior and heteroscedastic
likelihood); the other options (the other samplers, structures and
covariance types, every family's heteroscedastic likelihood) are tested in
the families' own tests and tests/test_heteroscedastic.py. The evidence-driven
training is checked here through the Gaussian regressors, the Laplace classifier
and MC dropout's joint prior learning (the classifiers share the MAP training and its
evidence); the other classifiers and the heteroscedastic
Laplace train under a fixed prior (``FIXED_PRIOR``), since a classifier's evidence
searches the prior's scale with several full-batch polishes a fit and these
checks run about fifty fits each (the heteroscedastic fit still runs its
evidence updates, for the means' variances).
"""

from sklearn.utils.estimator_checks import parametrize_with_checks

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
SMC_FAST = dict(hidden_layer_sizes=(8,), n_particles=20, n_mcmc_steps=1, n_leapfrog=5, random_state=0)

ESTIMATORS = [
    LaplaceRegressor(**FAST),
    LaplaceRegressor(**FIXED_PRIOR, likelihood="heteroscedastic"),
    LaplaceRegressor(**FAST, subset_of_weights="last_layer", prior_precision="marglik"),
    MCMCRegressor(**FAST, n_samples=20, n_burnin=20, n_leapfrog=3, n_chains=2),
    DeepEnsembleRegressor(**FAST, n_estimators=3),
    RMSRegressor(**FAST, n_estimators=3, data_fraction=0.8),
    SWAGRegressor(**FAST, swag_epochs=10, max_rank=4, n_samples=20),
    BBBRegressor(**FAST, n_samples=20),
    MCDropoutRegressor(**FAST, n_samples=20),
    LaplaceClassifier(**FAST, prior_precision="marglik"),
    LaplaceClassifier(**FAST, hessian_structure="diag", predictive="laplace_bridge", prior_std=1.0),
    DeepEnsembleClassifier(**FIXED_PRIOR, n_estimators=3),
    RMSClassifier(**FIXED_PRIOR, n_estimators=3, predictive="mean_field_2", moment_match=True),
    SWAGClassifier(**FIXED_PRIOR, swag_epochs=10, max_rank=4, n_samples=20),
    BBBClassifier(**FIXED_PRIOR, n_samples=20),
    MCDropoutClassifier(**FIXED_PRIOR, n_samples=20),
    MCDropoutClassifier(**FAST, dropout_rate=0.3, prior_learning="joint", predictive="mean_field_1", moment_match=True),
    MCMCClassifier(**FIXED_PRIOR, n_samples=20, n_burnin=20, n_leapfrog=3, n_chains=2),
    SMCRegressor(**SMC_FAST),
    SMCRegressor(**SMC_FAST, prior="logistic", prior_std=1.0, noise_std=0.5),
    SMCRegressor(**SMC_FAST, likelihood="heteroscedastic"),
    SMCClassifier(**SMC_FAST),
    SMCClassifier(**SMC_FAST, prior="logistic", prior_std=1.0, predictive="mean_field_1", moment_match=True),
    EvidenceSearch(LaplaceRegressor(**FAST), {"prior_std": [0.5, 1.0]}),
    EvidenceSearch(SMCClassifier(**SMC_FAST), {"hidden_layer_sizes": [(2,), (4,)]}),
]


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
