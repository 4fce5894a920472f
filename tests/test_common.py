"""scikit-learn's estimator checks for every estimator, with fast settings."""

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
SMC_FAST = dict(hidden_layer_sizes=(8,), n_particles=20, n_mcmc_steps=1, n_leapfrog=5, random_state=0)

ESTIMATORS = [
    LaplaceRegressor(**FAST),
    LaplaceRegressor(**FAST, hessian_structure="diag", pushforward="nonlinear", n_samples=20),
    LaplaceRegressor(**FAST, likelihood="heteroscedastic"),
    LaplaceRegressor(**FAST, subset_of_weights="last_layer", prior_precision="marglik"),
    MCMCRegressor(**FAST, n_samples=20, n_burnin=20, n_leapfrog=3, n_chains=2),
    MCMCRegressor(**FAST, sampler="amcmc", n_samples=30, n_burnin=10, n_chains=2),
    MCMCRegressor(**FAST, n_samples=20, n_burnin=20, n_leapfrog=3, n_chains=2, likelihood="heteroscedastic"),
    DeepEnsembleRegressor(**FAST, n_estimators=3),
    DeepEnsembleRegressor(**FAST, n_estimators=3, likelihood="heteroscedastic"),
    RMSRegressor(**FAST, n_estimators=3, data_fraction=0.8),
    SWAGRegressor(**FAST, swag_epochs=10, max_rank=4, n_samples=20),
    SWAGRegressor(**FAST, cov_type="diag", swag_epochs=4, n_samples=20),
    BBBRegressor(**FAST, n_samples=20),
    BBBRegressor(**FAST, prior_pi=0.5, kl_weighting="blundell", n_samples=20),
    MCDropoutRegressor(**FAST, n_samples=20),
    MCDropoutRegressor(**FAST, dropout_rate=0.0, n_samples=5),
    LaplaceClassifier(**FAST, prior_precision="marglik"),
    LaplaceClassifier(**FAST, subset_of_weights="last_layer"),
    LaplaceClassifier(**FAST, hessian_structure="diag", predictive="laplace_bridge", prior_std=1.0),
    DeepEnsembleClassifier(**FAST, n_estimators=3),
    RMSClassifier(**FAST, n_estimators=3, predictive="mean_field_2", moment_match=True),
    SWAGClassifier(**FAST, swag_epochs=10, max_rank=4, n_samples=20),
    BBBClassifier(**FAST, n_samples=20),
    MCDropoutClassifier(**FAST, n_samples=20),
    MCDropoutClassifier(**FAST, dropout_rate=0.3, predictive="mean_field_1", moment_match=True),
    MCMCClassifier(**FAST, n_samples=20, n_burnin=20, n_leapfrog=3, n_chains=2),
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
