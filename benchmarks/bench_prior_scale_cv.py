"""The learned prior's common scale chosen by cross-validation (``prior_std_scale``) against the evidence's own.

On UCI splits, a family's regressor is fitted at its defaults and at the
learned prior's stds times each of ``--scales`` (``prior_std_scale``: every
evidence update of the MAP training sets the precisions to the evidence's
maximisers over its square), each by the UCI protocol's ``score_fit`` (inputs
standardised on the training rows, ``random_state`` the split). Beside them,
``GridSearchCV`` over the same scales on the training rows alone
(:func:`~sklearn_quinn.metrics.neg_nll_scorer`, ``--folds`` shuffled folds)
picks one, by the best mean score and by
:func:`~sklearn_quinn.model_selection.one_standard_error_rule` (the default
unless beaten by more than the standard error of the paired fold
differences); each pick's fit is the one at its scale. Per split and data
set: the test log-likelihood per point, RMSE and 95% coverage of the default
(scale 1) and of each pick, the paired gains, which scales the folds and the
test rows prefer, and the seconds of the default fit and of the whole search
(the folds and the refit).

Records are appended to ``--out`` as the splits end and read back to resume.

    python benchmarks/bench_prior_scale_cv.py [--datasets yacht boston energy concrete wine] \\
        [--splits 0 1 2 3 4] [--family laplace] [--scales 1 2 4] [--folds 5] [--n-jobs 2]
"""

import argparse
import time

import numpy as np
from defaults_options import pin_threads
from joblib import delayed
from records import append_as_they_end, matches, read_lines
from sklearn.model_selection import GridSearchCV, KFold
from uci_protocol import DEFAULT_DATA_DIR, fmt, score_fit, standardise_inputs

from sklearn_quinn import DeepEnsembleRegressor, LaplaceRegressor, MCDropoutRegressor, RMSRegressor, SWAGRegressor
from sklearn_quinn.datasets import UCI_DATASETS, load_uci_split
from sklearn_quinn.metrics import neg_nll_scorer
from sklearn_quinn.model_selection import one_standard_error_rule

FAMILIES = {"laplace": LaplaceRegressor, "de": DeepEnsembleRegressor, "rms": RMSRegressor,
            "dropout": MCDropoutRegressor, "swag": SWAGRegressor}


def run(family, dataset, split, scales, folds, likelihood, data_dir):
    """One split: a fit per scale on the training rows, scored on the test rows, and the
    cross-validated search over the scales on the training rows alone; one record."""
    pin_threads(1)
    estimator = FAMILIES[family](likelihood=likelihood, random_state=split)
    X_train, X_test, y_train, y_test = load_uci_split(data_dir, dataset, split)
    fits = {scale: score_fit(estimator.set_params(prior_std_scale=scale), X_train, X_test, y_train, y_test,
                             random_state=split) for scale in scales}
    search = GridSearchCV(estimator, {"prior_std_scale": scales}, scoring=neg_nll_scorer, refit=False,
                          cv=KFold(folds, shuffle=True, random_state=split))
    start = time.perf_counter()
    search.fit(standardise_inputs(X_train, X_test)[0], y_train)
    picked = search.best_params_["prior_std_scale"]
    picked_rule = scales[one_standard_error_rule("prior_std_scale", 1.0)(search.cv_results_)]
    return [dict(
        family=family, dataset=dataset, split=split, likelihood=likelihood, scales=scales, folds=folds,
        test_ll={str(s): fit["ll"] for s, fit in fits.items()},
        rmse={str(s): fit["rmse"] for s, fit in fits.items()},
        coverage={str(s): fit["coverage_95"] for s, fit in fits.items()},
        cv_ll=dict(zip(map(str, scales), map(float, search.cv_results_["mean_test_score"]))),
        cv_folds={str(scale): [float(search.cv_results_[f"split{fold}_test_score"][i]) for fold in range(folds)]
                  for i, scale in enumerate(scales)},
        picked=picked,
        picked_rule=picked_rule,
        seconds_default=fits[1.0]["seconds"],
        seconds_search=time.perf_counter() - start + fits[picked]["seconds"],
    )]


def print_tables(records):
    print("| data set | splits | test LL, default | CV pick: test LL | gain | 1-SE rule: test LL | gain "
          "| RMSE default / pick / rule | coverage default / pick / rule | picks (CV; rule; test rows) "
          "| s default / search |")
    print("|---" * 11 + "|")
    for dataset in dict.fromkeys(r["dataset"] for r in records):
        rows = [r for r in records if r["dataset"] == dataset]

        def column(metric, pick=None):
            return np.array([r[metric]["1.0" if pick is None else str(r[pick])] for r in rows])

        def picks(values):
            return " ".join(f"{scale:g}:{count}" for scale, count in zip(*np.unique(values, return_counts=True)))

        default, chosen, ruled = column("test_ll"), column("test_ll", "picked"), column("test_ll", "picked_rule")
        best_on_test = [float(max(r["test_ll"], key=r["test_ll"].get)) for r in rows]
        print(f"| {dataset} | {len(rows)} | {fmt(default)} | {fmt(chosen)} | {fmt(chosen - default)} "
              f"| {fmt(ruled)} | {fmt(ruled - default)} "
              f"| {column('rmse').mean():.3f} / {column('rmse', 'picked').mean():.3f} / "
              f"{column('rmse', 'picked_rule').mean():.3f} "
              f"| {column('coverage').mean():.3f} / {column('coverage', 'picked').mean():.3f} / "
              f"{column('coverage', 'picked_rule').mean():.3f} "
              f"| {picks([r['picked'] for r in rows])}; {picks([r['picked_rule'] for r in rows])}; "
              f"{picks(best_on_test)} "
              f"| {np.median([r['seconds_default'] for r in rows]):.0f} / "
              f"{np.median([r['seconds_search'] for r in rows]):.0f} |")
    print()
    for dataset in dict.fromkeys(r["dataset"] for r in records):
        rows = [r for r in records if r["dataset"] == dataset]
        for pick in ("picked", "picked_rule"):
            gain = np.array([r["test_ll"][str(r[pick])] - r["test_ll"]["1.0"] for r in rows])
            print(f"- {dataset}, {'CV pick' if pick == 'picked' else '1-SE rule'}: lost on "
                  f"{int((gain < -1e-12).sum())} of {len(rows)} splits, gained on {int((gain > 1e-12).sum())}; "
                  f"worst {gain.min():+.3f}, best {gain.max():+.3f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", choices=UCI_DATASETS,
                        default=["yacht", "boston", "energy", "concrete", "wine"])
    parser.add_argument("--splits", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--family", choices=list(FAMILIES), default="laplace")
    parser.add_argument("--scales", type=float, nargs="+", default=[1.0, 2.0, 4.0],
                        help="prior_std_scale values; 1 (the default) is always included")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--likelihood", choices=("gaussian", "heteroscedastic"), default="gaussian")
    parser.add_argument("--data-dir", default=str(DEFAULT_DATA_DIR))
    parser.add_argument("--out", default="prior-scale-cv.jsonl",
                        help="JSON-lines records, appended as splits end and read back to resume")
    parser.add_argument("--n-jobs", type=int, default=1, help="splits at once, in separate processes")
    args = parser.parse_args(argv)
    scales = sorted({1.0, *args.scales})
    settings = dict(family=args.family, likelihood=args.likelihood, scales=scales, folds=args.folds)
    done = {(r["dataset"], r["split"]) for r in read_lines(args.out) if matches(r, settings)}
    tasks = [delayed(run)(args.family, dataset, split, scales, args.folds, args.likelihood, args.data_dir)
             for dataset in args.datasets for split in args.splits if (dataset, split) not in done]
    append_as_they_end(args.out, tasks, args.n_jobs, lambda r: (
        f"{r['dataset']} split {r['split']}: picked {r['picked']} (rule {r['picked_rule']}), test LL default "
        f"{r['test_ll']['1.0']:.3f}, picked {r['test_ll'][str(r['picked'])]:.3f}, search {r['seconds_search']:.0f} s"))
    records = [r for r in read_lines(args.out) if matches(r, settings)
               and r["dataset"] in args.datasets and r["split"] in args.splits]
    print(f"{args.family}, likelihood {args.likelihood!r}, prior_std_scale in {scales} by {args.folds}-fold CV "
          f"of the test NLL; one thread a split; records in {args.out}.\n")
    print_tables(records)


if __name__ == "__main__":
    main()
