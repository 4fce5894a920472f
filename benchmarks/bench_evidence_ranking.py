"""Does the evidence rank priors as held-out data do? Laplace's and SMC's log evidence beside the test log-likelihood.

On UCI splits, ``LaplaceRegressor`` and ``SMCRegressor`` are fitted at fixed
Gaussian priors ``N(0, s**2)`` on every weight (``--prior-stds``) and at their
defaults (``default``: Laplace's evidence-learned precisions, SMC's Gamma
hyperpriors, which its evidence integrates out), each by the UCI protocol's
``run_split`` (inputs standardised on the training rows, ``random_state`` the
split). Per fit: the log evidence in the units of y
(``log_marginal_likelihood()``, ``log_evidence_``), the test log-likelihood
per point, RMSE, 95% coverage and seconds (fit and predict). Then, per
family and split, whether the evidence and the test log-likelihood pick the
same prior, and Spearman's rank correlation of the two over the priors.

Laplace's evidence is the Gaussian approximation at one mode; SMC's is a
Monte Carlo estimate of the exact one (its spread on concrete is tens of
nats a run, docs/smc.rst), so where the two disagree by hundreds of nats the
approximation, not the sampler, decides the ranking.

Records are appended to ``--out`` as the fits end and read back to resume
(an SMC fit of concrete takes minutes on one thread).

    python benchmarks/bench_evidence_ranking.py [--dataset concrete] [--splits 1] \\
        [--prior-stds 0.1 0.3 1.0] [--families laplace smc] [--likelihood gaussian] [--n-jobs 2]
"""

import argparse

import numpy as np
from defaults_options import pin_threads
from joblib import delayed
from records import append_as_they_end, matches, read_lines
from scipy.stats import spearmanr
from uci_protocol import DEFAULT_DATA_DIR, run_split

from sklearn_quinn import LaplaceRegressor, SMCRegressor
from sklearn_quinn.datasets import UCI_DATASETS
from sklearn_quinn.model_selection import log_evidence

FAMILIES = {"laplace": LaplaceRegressor, "smc": SMCRegressor}
DEFAULT = "default"


def fit(family, prior, dataset, split, likelihood, data_dir):
    """One fit on one thread, by the UCI protocol's ``run_split``: its record."""
    pin_threads(1)
    fixed = {} if prior == DEFAULT else {"prior_std": float(prior)}
    scored = run_split(FAMILIES[family](likelihood=likelihood, **fixed), data_dir, dataset, split)
    return [dict(
        dataset=dataset, split=split, family=family, prior=prior, likelihood=likelihood,
        log_evidence=log_evidence(scored["estimator"]), test_ll=scored["ll"], rmse=scored["rmse"],
        coverage=scored["coverage_95"], seconds=scored["seconds"],
    )]


def print_tables(records, families, priors, splits):
    for split in splits:
        print(f"\n### split {split}\n")
        print("| prior | " + " | ".join(f"{f} log evidence | {f} test LL | {f} RMSE | {f} coverage | {f} s"
                                         for f in families) + " |")
        print("|---|" + "---|" * 5 * len(families))
        by_key = {(r["family"], r["prior"]): r for r in records if r["split"] == split}
        for prior in priors:
            cells = []
            for family in families:
                r = by_key.get((family, prior))
                cells += (["not run"] * 5 if r is None else
                          [f"{r['log_evidence']:.1f}", f"{r['test_ll']:.3f}", f"{r['rmse']:.2f}",
                           f"{r['coverage']:.3f}", f"{r['seconds']:.0f}"])
            print(f"| {prior} | " + " | ".join(cells) + " |")
        print()
        for family in families:
            rows = [by_key[(family, p)] for p in priors if (family, p) in by_key]
            if len(rows) < 2:
                continue
            evidence = [r["log_evidence"] for r in rows]
            held_out = [r["test_ll"] for r in rows]
            picked, best = rows[int(np.argmax(evidence))]["prior"], rows[int(np.argmax(held_out))]["prior"]
            print(f"- {family}: the evidence picks {picked}, the test log-likelihood {best}; "
                  f"rank correlation {spearmanr(evidence, held_out).statistic:+.2f} over {len(rows)} priors")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", choices=UCI_DATASETS, default="concrete")
    parser.add_argument("--splits", type=int, nargs="+", default=[1])
    parser.add_argument("--prior-stds", nargs="+", default=["0.1", "0.3", "1.0"],
                        help="fixed prior standard deviations; the defaults are always fitted too")
    parser.add_argument("--families", nargs="+", choices=list(FAMILIES), default=list(FAMILIES))
    parser.add_argument("--likelihood", choices=("gaussian", "heteroscedastic"), default="gaussian")
    parser.add_argument("--data-dir", default=str(DEFAULT_DATA_DIR))
    parser.add_argument("--out", default="evidence-ranking.jsonl",
                        help="JSON-lines records, appended as fits end and read back to resume")
    parser.add_argument("--n-jobs", type=int, default=1, help="fits at once, in separate processes")
    args = parser.parse_args(argv)
    priors = [str(float(s)) for s in args.prior_stds] + [DEFAULT]
    settings = dict(dataset=args.dataset, likelihood=args.likelihood)
    done = {(r["family"], r["prior"], r["split"]) for r in read_lines(args.out) if matches(r, settings)}
    tasks = [delayed(fit)(family, prior, args.dataset, split, args.likelihood, args.data_dir)
             for split in args.splits for family in args.families for prior in priors
             if (family, prior, split) not in done]
    append_as_they_end(args.out, tasks, args.n_jobs, lambda r: (
        f"{r['family']} prior {r['prior']} split {r['split']}: log evidence {r['log_evidence']:.1f}, "
        f"test LL {r['test_ll']:.3f}, {r['seconds']:.0f} s"))
    records = [r for r in read_lines(args.out) if matches(r, settings)]
    print(f"UCI {args.dataset}, likelihood {args.likelihood!r}, one thread a fit; records in {args.out}.")
    print_tables(records, args.families, priors, args.splits)


if __name__ == "__main__":
    main()
