"""RMSRegressor on nearly linear tables: the hidden path its anchors draw from the learned prior.

On diabetes and on the linear table of ``bench_defaults_regression.py`` the
evidence's MAP network explains the targets with its linear skip path and keeps
its hidden path small; the Laplace evidence at that MAP then sets the hidden
layers' prior. Randomized MAP sampling (Pearce et al. 2020) anchors each member
to a draw of that prior in the nonlinear network, where the Laplace posterior
sees only its linearisation about the MAP. Per split (diabetes: ``compare``'s
random 80/20 splits, ``random_state`` the split; linear: fresh draws per seed;
inputs scaled as by ``Pipeline([StandardScaler(), estimator])``), every family
at its defaults with the split's seed, this prints:

- per parameter tensor, the squared norm the learned prior expects (the sum of
  its variances), the MAP's (``LaplaceRegressor``'s, the same training that
  learned the prior) and the members' mean;
- the members' spread of the outputs on the test rows, of the hidden path,
  the linear skip path and the sum, each in units of the learned noise std,
  beside the Laplace posterior's (``epistemic_std``);
- the test NLL (and RMSE) of ``BayesianRidge``, Laplace, RMS, and HMC
  (``MCMCRegressor``) with its default hyperprior (the precisions drawn by
  Gibbs steps) and with ``hyperprior='empirical'`` (the learned prior held
  fixed, the prior RMS samples under).

    python benchmarks/bench_rms_hidden_path.py [--tables diabetes linear] [--splits 5] [--threads 1]
"""

import argparse

import numpy as np
import torch
from bench_member_spread import split_of
from defaults_options import pin_threads
from scipy.stats import norm
from sklearn.linear_model import BayesianRidge
from sklearn.preprocessing import StandardScaler
from uci_protocol import fmt

from sklearn_quinn import LaplaceRegressor, MCMCRegressor, RMSRegressor

FAMILIES = {"BayesianRidge": BayesianRidge, "Laplace": LaplaceRegressor, "RMS": RMSRegressor,
            "HMC": MCMCRegressor, "HMC, empirical": lambda **kw: MCMCRegressor(hyperprior="empirical", **kw)}


def scaled_split(table, seed):
    """Training and test rows of ``table`` for ``seed`` (``bench_member_spread.py``'s), the inputs
    scaled by the training rows."""
    X_train, X_test, y_train, y_test = split_of(table, seed)
    scaler = StandardScaler().fit(X_train)
    return scaler.transform(X_train), scaler.transform(X_test), y_train, y_test


def squared_norms(model, theta):
    """``{tensor name: squared norm}`` of each row of ``theta (S, K)``, averaged over the rows."""
    return {name: float(theta[:, start:stop].square().sum(1).mean())
            for name, (start, stop, _) in model._slices.items()}


def path_spreads(rms, X):
    """The members' std of the outputs over the test rows ``X``, mean over the rows, of the
    hidden path, the linear skip path and their sum, in units of the learned noise std."""
    model, theta = rms._model, rms.posterior_.samples
    start, stop, shape = model._slices["linear.weight"]
    with torch.no_grad():
        X = torch.as_tensor(X, dtype=theta.dtype)
        total = model(theta, X)[..., 0]
        skip = torch.einsum("nd,sd->sn", X, theta[:, start:stop].reshape(-1, *shape)[:, 0])
    noise = float(rms._member_noise.mean())
    return {part: float(values.std(0).mean()) / noise
            for part, values in (("hidden", total - skip), ("skip", skip), ("sum", total))}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", nargs="+", choices=["diabetes", "linear"], default=["diabetes", "linear"])
    parser.add_argument("--splits", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    pin_threads(args.threads)
    for table in args.tables:
        norms, spreads, scores = {}, {}, {}
        for seed in range(args.splits):
            X_train, X_test, y_train, y_test = scaled_split(table, seed)
            fitted = {}
            for name, family in FAMILIES.items():
                estimator = family() if family is BayesianRidge else family(random_state=seed)
                fitted[name] = estimator.fit(X_train, y_train)
                mean, std = estimator.predict(X_test, return_std=True)
                scores.setdefault(name, []).append((-norm.logpdf(y_test, mean, std).mean(),
                                                    np.sqrt(np.mean((y_test - mean) ** 2))))
            rms, laplace = fitted["RMS"], fitted["Laplace"]
            for source, theta in (("prior", None), ("MAP", laplace._model.flatten()[None]),
                                  ("members", rms.posterior_.samples)):
                values = ({name: float(rms._prior.precision[start:stop].reciprocal().sum())
                           for name, (start, stop, _) in rms._model._slices.items()}
                          if theta is None else squared_norms(rms._model, theta))
                for name, value in values.items():
                    norms.setdefault((name, source), []).append(value)
            for part, value in path_spreads(rms, X_test).items():
                spreads.setdefault(part, []).append(value)
            spreads.setdefault("Laplace", []).append(
                float(np.mean(laplace.predict_uncertainty(X_test).epistemic_std / laplace.noise_std_)))
            print(f"{table} split {seed}: " + ", ".join(f"{name} {values[-1][0]:.3f}"
                                                        for name, values in scores.items()), flush=True)
        print(f"\n{table}, {args.splits} splits, mean ± s.e.\n")
        print("| tensor | prior's expected squared norm | MAP's | members' |")
        print("|---|---|---|---|")
        for name in rms._model._slices:
            print(f"| {name} | " + " | ".join(fmt(norms[name, source], 3) for source in ("prior", "MAP", "members"))
                  + " |")
        print("\n| output spread on the test rows (noise stds) | RMS's hidden path | skip path | sum | Laplace's |")
        print("|---|---|---|---|---|")
        parts = ("hidden", "skip", "sum", "Laplace")
        print("| mean over the rows | " + " | ".join(fmt(spreads[part], 3) for part in parts) + " |")
        print("\n| family | test NLL | RMSE |")
        print("|---|---|---|")
        for name, values in scores.items():
            values = np.array(values)
            print(f"| {name} | {fmt(values[:, 0])} | {fmt(values[:, 1], 2)} |")
        print()


if __name__ == "__main__":
    main()
