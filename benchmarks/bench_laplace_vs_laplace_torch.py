"""Post-hoc Laplace: sklearn_quinn's engine against laplace-torch on the same MAP.

For each UCI data set (split 0; inputs and target standardised with training
statistics) one MAP network (1 hidden layer of 50 ReLU units, float64) is
trained once with ``LaplaceRegressor``. Both libraries then get that same
network, the same training data, the same observation noise (the one fitted
with the MAP) and the same starting prior precision 1.0, and are timed on

- ours: ``LaplaceApproximation(...)`` (GGN curvature + eigen decomposition)
  + ``maximise_evidence`` (L-BFGS-B on log prior precision) + ``posterior``
  (Cholesky of the posterior precision);
- laplace-torch: ``Laplace(...)`` + ``fit`` (one full-batch loader) +
  ``optimize_prior_precision(method='marglik')`` with its defaults
  (Adam, lr=0.1, n_steps=100, init_prior_prec=1.0, scalar prior).

Each timing is the median of ``--reps`` repetitions after one warm-up, the
sides interleaved so background load hits both alike. Test log-likelihood
per point is in the original units of y, with the linearised (GLM)
predictive plus the observation noise.

Needs laplace-torch (``pip install laplace-torch``) and the UCI data
(``--data-dir``, default ``../shared/data/uci`` from the repository root).

    python benchmarks/bench_laplace_vs_laplace_torch.py [--threads 1] [--reps 7]
"""

import argparse
import copy
import math
import os
import statistics
import subprocess
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from sklearn_quinn import LaplaceRegressor
from sklearn_quinn._core.curvature import curvature
from sklearn_quinn._core.likelihoods import GaussianLikelihood
from sklearn_quinn._core.network import FunctionalModel
from sklearn_quinn._core.pushforward import linear_pushforward
from sklearn_quinn.datasets import load_uci_split
from sklearn_quinn.laplace._engine import LaplaceApproximation

DEFAULT_DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "uci"


def package_version():
    """The commit measured, with '+dirty' when sklearn_quinn/ has uncommitted changes."""
    root = Path(__file__).resolve().parents[1]
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root,
                                capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "sklearn_quinn"], cwd=root,
                               capture_output=True, text=True, check=True).stdout.strip()
        return commit + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def median(values):
    return statistics.median(values)


def gaussian_ll(y, mean, var, y_scale):
    """Mean test log-likelihood per point, in the original units of y."""
    ll = -0.5 * np.log(2 * np.pi * var) - 0.5 * (y - mean) ** 2 / var
    return float(ll.mean() - np.log(y_scale))


# ----------------------------------------------------------------------------- ours
def ours_fit(module, X, Y, noise, structure):
    model = FunctionalModel(module)
    theta = model.flatten()
    la = LaplaceApproximation(model, theta, X, Y, GaussianLikelihood(noise), kind="ggn", structure=structure)
    delta, _ = la.maximise_evidence(1.0, tune_noise=False)
    posterior = la.posterior(delta)
    return model, la, delta, posterior


def ours_breakdown(module, X, Y, noise, structure):
    """Seconds of each stage of ``ours_fit``, run stage by stage."""
    model = FunctionalModel(module)
    theta = model.flatten()
    t_curv = timed(lambda: curvature(model, theta, X, Y, GaussianLikelihood(noise), "ggn", structure))[0]
    t_init, la = timed(
        lambda: LaplaceApproximation(model, theta, X, Y, GaussianLikelihood(noise), kind="ggn", structure=structure)
    )
    # The full structure decomposes on first need (here the evidence's): timed apart.
    t_eig = timed(lambda: la.eigenvalues)[0] if structure == "full" else 0.0
    t_tune, (delta, _) = timed(lambda: la.maximise_evidence(1.0, tune_noise=False))
    t_post = timed(lambda: la.posterior(delta))[0]
    return {
        "curvature": t_curv,
        "eigh": t_eig,
        "init_other": max(t_init - t_curv, 0.0),
        "evidence": t_tune,
        "posterior": t_post,
    }


# ---------------------------------------------------------------------- laplace-torch
def theirs_fit(module, loader, noise, structure, backend=None, n_steps=100):
    from laplace import Laplace

    la = Laplace(
        copy.deepcopy(module),
        "regression",
        subset_of_weights="all",
        hessian_structure=structure,
        sigma_noise=noise,
        prior_precision=1.0,
        backend=backend,
    )
    t_fit = timed(lambda: la.fit(loader))[0]
    t_opt = timed(lambda: la.optimize_prior_precision(method="marglik", n_steps=n_steps))[0]
    return la, t_fit, t_opt


def run_dataset(name, args, backends):
    X_train, X_test, y_train, y_test = load_uci_split(args.data_dir, name, args.split)
    x_mean, x_std = X_train.mean(0), X_train.std(0)
    x_std[x_std == 0] = 1.0
    y_mean, y_std = y_train.mean(), y_train.std()
    Xtr, Xte = (X_train - x_mean) / x_std, (X_test - x_mean) / x_std
    ytr, yte = (y_train - y_mean) / y_std, (y_test - y_mean) / y_std

    t_map, reg = timed(
        lambda: LaplaceRegressor(
            hidden_layer_sizes=(50,),
            max_epochs=args.epochs,
            lr=args.lr,
            normalize_y=False,
            random_state=0,
        ).fit(Xtr, ytr)
    )
    module = reg.net_.module_
    noise_t = reg._noise_std.detach().clone()  # (1,), network units
    noise = float(noise_t[0])
    X_t = torch.as_tensor(Xtr, dtype=torch.float64)
    Y_t = torch.as_tensor(ytr, dtype=torch.float64).reshape(-1, 1)
    Xte_t = torch.as_tensor(Xte, dtype=torch.float64)
    loader = DataLoader(TensorDataset(X_t, Y_t), batch_size=len(X_t))  # one full batch
    n_params = sum(p.numel() for p in module.parameters())
    print(
        f"\n[{name}] N_train={len(Xtr)} N_test={len(Xte)} D={Xtr.shape[1]} K={n_params} "
        f"MAP: {args.epochs} epochs lr={args.lr} ({t_map:.1f} s), noise (std units)={noise:.4f}"
    )

    rows = []
    for structure in ("full", "diag"):
        times = {"ours": []}
        theirs_parts = {}
        for label, _ in backends:
            times[label] = []
            theirs_parts[label] = ([], [])
        breakdown = []
        for rep in range(args.reps + 1):  # rep 0 is the warm-up
            t, (model, la_ours, delta_ours, posterior) = timed(
                lambda: ours_fit(module, X_t, Y_t, noise_t, structure)
            )
            if rep:
                times["ours"].append(t)
            for label, backend in backends:
                t, (la_theirs, t_fit, t_opt) = timed(
                    lambda: theirs_fit(module, loader, noise, structure, backend)
                )
                if rep:
                    times[label].append(t)
                    theirs_parts[label][0].append(t_fit)
                    theirs_parts[label][1].append(t_opt)
                if label == backends[0][0]:
                    la_default = la_theirs
            parts = ours_breakdown(module, X_t, Y_t, noise_t, structure)
            if rep:
                breakdown.append(parts)

        # Predictions (untimed): linearised predictive + observation noise.
        pred = linear_pushforward(model, posterior, Xte_t)
        ll_ours = gaussian_ll(
            yte, pred.mean[:, 0].numpy(), (pred.variance[:, 0] + noise**2).numpy(), y_std
        )
        with torch.no_grad():
            f_mu, f_var = la_default(Xte_t, pred_type="glm")
        ll_theirs = gaussian_ll(
            yte, f_mu[:, 0].numpy(), (f_var[:, 0, 0] + noise**2).numpy(), y_std
        )
        delta_theirs = float(la_default.prior_precision)

        # Same curvature? ours at the MAP noise vs theirs H / sigma^2.
        ours_matrix = curvature(model, model.flatten(), X_t, Y_t, noise_t, "ggn", structure)
        theirs_matrix = la_default.H / noise**2
        curv_rel = float((ours_matrix - theirs_matrix).abs().max() / theirs_matrix.abs().max())

        # Evidence at both prior precisions, by both libraries (standardised units).
        def lml_ours(d):
            return float(la_ours.log_marginal_likelihood(d))

        def lml_theirs(d):
            with torch.no_grad():
                return float(
                    la_default.log_marginal_likelihood(
                        prior_precision=torch.tensor([d], dtype=torch.float64)
                    )
                )

        def dlml_dlog(d):
            # Closed-form gradient of our evidence in log(prior precision), noise scale 1.
            return float(la_ours._evidence(math.log(d), 0.0)[1][0])

        # laplace-torch run long enough to converge (timed once, after warm-up above).
        t_long, (la_long, _, _) = timed(
            lambda: theirs_fit(module, loader, noise, structure, None, n_steps=args.long_steps)
        )
        delta_long = float(la_long.prior_precision)
        with torch.no_grad():
            f_mu, f_var = la_long(Xte_t, pred_type="glm")
        ll_long = gaussian_ll(yte, f_mu[:, 0].numpy(), (f_var[:, 0, 0] + noise**2).numpy(), y_std)

        # Their posterior factor (lazy in laplace-torch, built at first prediction).
        if structure == "full":
            t_scale = median(
                [timed(lambda: (setattr(la_default, "_posterior_scale", None),
                                la_default.posterior_scale))[0] for _ in range(3)]
            )
        else:
            t_scale = median([timed(lambda: la_default.posterior_scale)[0] for _ in range(3)])

        ours_s = median(times["ours"])
        row = {
            "data": name,
            "structure": structure,
            "ours": ours_s,
            "theirs": {lab: median(v) for lab, v in times.items() if lab != "ours"},
            "theirs_fit": {lab: median(v[0]) for lab, v in theirs_parts.items()},
            "theirs_opt": {lab: median(v[1]) for lab, v in theirs_parts.items()},
            "ll_ours": ll_ours,
            "ll_theirs": ll_theirs,
            "delta_ours": delta_ours,
            "delta_theirs": delta_theirs,
            "delta_long": delta_long,
            "t_long": t_long,
            "ll_long": ll_long,
            "lml": {
                "ours@ours": lml_ours(delta_ours),
                "theirs@ours": lml_theirs(delta_ours),
                "ours@theirs": lml_ours(delta_theirs),
                "theirs@theirs": lml_theirs(delta_theirs),
                "ours@long": lml_ours(delta_long),
            },
            "grad_at_theirs": dlml_dlog(delta_theirs),
            "grad_at_ours": dlml_dlog(delta_ours),
            "curv_rel": curv_rel,
            "t_scale": t_scale,
            "breakdown": {k: median([b[k] for b in breakdown]) for k in breakdown[0]},
        }
        rows.append(row)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.environ.get("UCI_DATA_DIR", DEFAULT_DATA_DIR))
    parser.add_argument("--datasets", nargs="+", default=["concrete", "yacht"])
    parser.add_argument("--split", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=300)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--long-steps", type=int, default=1000,
                        help="Adam steps of the laplace-torch run checked for convergence")
    parser.add_argument("--other-backends", action=argparse.BooleanOptionalAction, default=True,
                        help="also time laplace-torch with the BackPACK and ASDL GGN backends")
    args = parser.parse_args()

    warnings.filterwarnings("ignore")
    torch.set_num_threads(args.threads)
    import laplace
    from laplace.curvature import CurvlinopsGGN

    backends = [("curvlinops", None)]  # None: laplace-torch's default, CurvlinopsGGN
    if args.other_backends:
        from laplace.curvature import AsdlGGN, BackPackGGN

        backends += [("backpack", BackPackGGN), ("asdl", AsdlGGN)]
    print(f"sklearn_quinn at {package_version()}")
    print(
        f"torch {torch.__version__}, laplace-torch {getattr(laplace, '__version__', '0.3')} "
        f"(default backend {CurvlinopsGGN.__name__}), torch threads={torch.get_num_threads()}, "
        f"reps={args.reps} (+1 warm-up), load average at start {os.getloadavg()}"
    )
    t0 = time.perf_counter()
    rows = []
    for name in args.datasets:
        rows += run_dataset(name, args, backends)

    print_report(rows, args)
    print(f"\nTotal wall time {time.perf_counter() - t0:.1f} s; "
          f"load average at end {os.getloadavg()}")


def print_report(rows, args):
    print("\nTimes: curvature + prior-precision tuning (+ our posterior Cholesky), median s;")
    print("theirs = laplace-torch, default backend (CurvlinopsGGN), default marglik tuning")
    print("(Adam, lr=0.1, 100 steps). LL: test log-likelihood per point, original units.")
    print("delta: tuned prior precision.\n")
    header = (f"{'data':9s} {'struct':6s} {'ours s':>8s} {'theirs s':>9s} {'ratio':>6s} "
              f"{'LL ours':>8s} {'LL theirs':>9s} {'|dLL|':>7s} "
              f"{'delta ours':>10s} {'delta theirs':>12s}")
    print(header)
    print("-" * len(header))
    for r in rows:
        th = r["theirs"]["curvlinops"]
        print(f"{r['data']:9s} {r['structure']:6s} {r['ours']:8.4f} {th:9.4f} "
              f"{r['ours'] / th:6.3f} {r['ll_ours']:8.4f} {r['ll_theirs']:9.4f} "
              f"{abs(r['ll_ours'] - r['ll_theirs']):7.4f} "
              f"{r['delta_ours']:10.4f} {r['delta_theirs']:12.4f}")

    print("\nlaplace-torch by backend: total = fit + optimize_prior_precision (median s);"
          " ratio = ours / total")
    for r in rows:
        print(f"  {r['data']} {r['structure']}:")
        for lab in r["theirs"]:
            print(f"    {lab:10s} {r['theirs'][lab]:.4f} = {r['theirs_fit'][lab]:.4f} + "
                  f"{r['theirs_opt'][lab]:.4f}  (ratio {r['ours'] / r['theirs'][lab]:.3f})")
        print(f"    their posterior factor, built lazily at first prediction "
              f"(not in 'theirs s'): {r['t_scale']:.4f} s")

    print("\nOur time by stage (median s, stages run one by one):")
    for r in rows:
        b = r["breakdown"]
        print(f"  {r['data']:9s} {r['structure']:5s} curvature {b['curvature']:.4f}  "
              f"eigh {b['eigh']:.4f}  other init {b['init_other']:.4f}  "
              f"evidence tuning {b['evidence']:.4f}  posterior Cholesky {b['posterior']:.4f}  "
              f"(sum {sum(b.values()):.4f})")

    print("\nEvidence (log marginal likelihood, standardised units) and convergence:")
    for r in rows:
        L = r["lml"]
        print(f"  {r['data']:9s} {r['structure']:5s} curvature max rel. diff ours vs theirs "
              f"{r['curv_rel']:.1e}")
        print(f"    at delta_ours={r['delta_ours']:.5g}: ours {L['ours@ours']:.5f}  "
              f"theirs {L['theirs@ours']:.5f}  d/dlog(delta) {r['grad_at_ours']:.2e}")
        print(f"    at delta_theirs={r['delta_theirs']:.5g} (100 Adam steps): "
              f"ours {L['ours@theirs']:.5f}  theirs {L['theirs@theirs']:.5f}  "
              f"d/dlog(delta) {r['grad_at_theirs']:.2e}")
        print(f"    laplace-torch with {args.long_steps} Adam steps: delta {r['delta_long']:.5g}, "
              f"evidence {L['ours@long']:.5f}, test LL {r['ll_long']:.4f}, {r['t_long']:.3f} s")

if __name__ == "__main__":
    main()
