"""Fingerprint of every estimator's outputs, to prove that a restructuring changed no number.

Fits every estimator in several configurations (small networks, few epochs,
fixed seeds) on two small tables and saves what a user reads from it:
predictions, stds, covariances, draws, class probabilities, evidences,
fitted noise and diagnostics. Run it before and after a change, then compare::

    python benchmarks/fingerprint.py --out /tmp/before.npz
    # ... change the code ...
    python benchmarks/fingerprint.py --out /tmp/after.npz --compare /tmp/before.npz

The comparison prints the largest relative difference per entry; a
restructuring that keeps the arithmetic keeps every entry bit-identical.
"""

import argparse
import warnings

import numpy as np
import torch
from sklearn.datasets import load_iris

import sklearn_quinn as sq
from sklearn_quinn.calibration import calibrate

FAST = dict(hidden_layer_sizes=(8,), lr=0.01, max_epochs=40, random_state=0)
SMC_FAST = dict(hidden_layer_sizes=(4,), n_particles=16, n_mcmc_steps=1, n_leapfrog=3, random_state=0)
MCMC_FAST = dict(n_samples=15, n_burnin=15, n_leapfrog=3, n_chains=2)

REGRESSORS = {
    "laplace": sq.LaplaceRegressor(**FAST),
    "laplace_marglik": sq.LaplaceRegressor(**FAST, prior_precision="marglik"),
    "laplace_diag_nonlinear": sq.LaplaceRegressor(**FAST, hessian_structure="diag", pushforward="nonlinear",
                                                  n_samples=10),
    "laplace_hessian_fixed_noise": sq.LaplaceRegressor(**FAST, curvature="hessian", noise_std=0.3),
    "laplace_ef_gridsearch": sq.LaplaceRegressor(**FAST, curvature="ef", prior_precision="gridsearch"),
    "mcmc_hmc": sq.MCMCRegressor(**FAST, **MCMC_FAST),
    "mcmc_hmc_fixed_noise_prior_init": sq.MCMCRegressor(**FAST, **MCMC_FAST, noise_std=0.3, init="prior"),
    "mcmc_mala": sq.MCMCRegressor(**FAST, **MCMC_FAST, sampler="mala"),
    "mcmc_amcmc": sq.MCMCRegressor(**FAST, **MCMC_FAST, sampler="amcmc"),
    "deep_ensemble": sq.DeepEnsembleRegressor(**FAST, n_estimators=3),
    "deep_ensemble_jobs": sq.DeepEnsembleRegressor(**FAST, n_estimators=4, data_fraction=0.8, n_jobs=2),
    "rms": sq.RMSRegressor(**FAST, n_estimators=3),
    "rms_fixed_noise": sq.RMSRegressor(**FAST, n_estimators=3, noise_std=0.3, perturb_targets=False),
    "swag_lowrank": sq.SWAGRegressor(**FAST, swag_epochs=6, max_rank=3, n_samples=10),
    "swag_diag": sq.SWAGRegressor(**FAST, cov_type="diag", swag_epochs=4, n_samples=10),
    "bbb": sq.BBBRegressor(**FAST, n_samples=10),
    "bbb_mixture": sq.BBBRegressor(**FAST, prior_pi=0.5, kl_weighting="blundell", n_samples=10),
    "dropout": sq.MCDropoutRegressor(**FAST, n_samples=10),
    "smc": sq.SMCRegressor(**SMC_FAST),
    "smc_logistic_fixed_noise": sq.SMCRegressor(**SMC_FAST, prior="logistic", prior_std=1.0, noise_std=0.5),
}

CLASSIFIERS = {
    "laplace": sq.LaplaceClassifier(**FAST),
    "laplace_marglik_mf2": sq.LaplaceClassifier(**FAST, prior_precision="marglik", predictive="mean_field_2"),
    "laplace_diag_bridge": sq.LaplaceClassifier(**FAST, hessian_structure="diag", predictive="laplace_bridge"),
    "laplace_nonlinear": sq.LaplaceClassifier(**FAST, pushforward="nonlinear", n_samples=10),
    "laplace_gridsearch": sq.LaplaceClassifier(**FAST, prior_precision="gridsearch"),
    "mcmc_hmc": sq.MCMCClassifier(**FAST, **MCMC_FAST),
    "mcmc_amcmc_mm": sq.MCMCClassifier(**FAST, **MCMC_FAST, sampler="amcmc", predictive="mean_field_1",
                                       moment_match=True),
    "deep_ensemble": sq.DeepEnsembleClassifier(**FAST, n_estimators=3),
    "rms_mm": sq.RMSClassifier(**FAST, n_estimators=3, predictive="mean_field_2", moment_match=True),
    "swag": sq.SWAGClassifier(**FAST, swag_epochs=6, max_rank=3, n_samples=10),
    "bbb": sq.BBBClassifier(**FAST, n_samples=10),
    "dropout": sq.MCDropoutClassifier(**FAST, n_samples=10),
    "smc": sq.SMCClassifier(**SMC_FAST),
    "smc_logistic_mm": sq.SMCClassifier(**SMC_FAST, prior="logistic", prior_std=1.0,
                                        predictive="mean_field_1", moment_match=True),
}

FITTED = ("noise_std_", "prior_precision_", "cov_scale_", "acceptance_rate_", "rhat_", "ess_", "step_size_",
          "log_evidence_", "lr_swag_", "chains_")


def regression_data():
    rng = np.random.RandomState(1)
    X = rng.uniform(-2, 2, size=(60, 2))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.randn(60)
    return X, y


def fitted_values(name, estimator, out):
    for attribute in FITTED:
        value = getattr(estimator, attribute, None)
        if value is not None:
            out[f"{name}.{attribute}"] = np.asarray(value, dtype=np.float64)
    for method in ("log_marginal_likelihood",):
        if hasattr(estimator, method):
            out[f"{name}.{method}"] = np.asarray(getattr(estimator, method)())


def fingerprint():
    out = {}
    X, y = regression_data()
    for name, estimator in REGRESSORS.items():
        estimator.fit(X, y)
        key = f"reg.{name}"
        out[f"{key}.mean"], out[f"{key}.std"] = estimator.predict(X, return_std=True)
        out[f"{key}.cov"] = estimator.predict(X[:5], return_cov=True)[1]
        out[f"{key}.sample_y"] = estimator.sample_y(X[:5], n_samples=3, random_state=1)
        fitted_values(key, estimator, out)
        if name == "laplace":
            calibrate(estimator, X, y, param="cov_scale")
            out[f"{key}.calibrated_std"] = estimator.predict(X, return_std=True)[1]
    X_two = np.column_stack([y, X[:, 1]])
    two = sq.LaplaceRegressor(**FAST).fit(X, X_two)
    out["reg.laplace_two_targets.std"] = two.predict(X, return_std=True)[1]
    X, y = load_iris(return_X_y=True)
    for name, estimator in CLASSIFIERS.items():
        estimator.fit(X, y)
        key = f"clf.{name}"
        out[f"{key}.proba"] = estimator.predict_proba(X)
        fitted_values(key, estimator, out)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="where to save the fingerprint (.npz)")
    parser.add_argument("--compare", help="an earlier fingerprint to compare with")
    args = parser.parse_args()
    torch.set_num_threads(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = fingerprint()
    np.savez(args.out, **out)
    if not args.compare:
        print(f"{len(out)} entries saved to {args.out}")
        return
    before = dict(np.load(args.compare))
    changed = 0
    for key in sorted(set(before) | set(out)):
        if key not in before or key not in out:
            print(f"{key}: only in {'the new' if key in out else 'the old'} fingerprint")
            changed += 1
            continue
        old, new = before[key], out[key]
        if old.shape != new.shape:
            print(f"{key}: shape {old.shape} -> {new.shape}")
            changed += 1
        elif not np.array_equal(old, new, equal_nan=True):
            scale = np.maximum(np.abs(old), 1e-300)
            print(f"{key}: max relative difference {np.nanmax(np.abs(new - old) / scale):.3g}")
            changed += 1
    print(f"{len(out)} entries, {changed} differ")


if __name__ == "__main__":
    main()
