"""How far the ensembles' members spread, against the Laplace posterior about the same MAP.

Every regressor that trains from the evidence's MAP (Laplace, the deep
ensemble, RMS, SWAG) shares its learned prior and noise; they differ in how
they spread the network's outputs. For each table (the synthetic tables of
``bench_defaults_regression.py``, fresh draws per seed, and diabetes' random
80/20 splits, or a UCI set's standard splits) and each family at its defaults in ``Pipeline([StandardScaler(),
estimator])``, this prints the mean epistemic variance of the outputs
(``predict_uncertainty``'s ``epistemic_std`` squared; for the deep ensemble,
RMS and SWAG their draws' own spread, before each carries the Laplace
posterior beyond it) over the training
rows and over the test rows, divided by the learned noise variance, and the
test coverage of the central 95% interval. For a linear model with Gaussian noise
the Laplace ratio on the training rows is ``gamma / N``, MacKay's
well-determined parameters per row; a family whose ratio is far below the
Laplace posterior's has intervals too narrow by the missing part.

A second table scores the deep ensemble's test predictive four ways from one
fit: its members alone (their spread and the noise), each member's Gaussian
widened by the Laplace posterior's mean output variance over the training
rows (``member_std_``: the deep ensemble before 2026-12-02), as it is (the
epistemic variance the larger of the members' spread and the Laplace
posterior's variance at the test row), and each member widened by the whole
of that variance (a mixture of Laplace approximations in full; the
``LaplaceRegressor`` of the same settings trains the same MAP network and
gives it), beside Laplace's; and the paired differences of the last three
from the members' mean variance's.

    python benchmarks/bench_member_spread.py [--tables wide linear diabetes small yacht ...] [--seeds 3]
        [--threads 1] [--data-dir ../shared/data/uci]
"""

import argparse
import warnings

import numpy as np
import torch
from bench_defaults_regression import SYNTHETIC
from defaults_options import pin_threads
from sklearn.datasets import load_diabetes
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from uci_protocol import DEFAULT_DATA_DIR, fmt

from sklearn_quinn import DeepEnsembleRegressor, LaplaceRegressor, RMSRegressor, SWAGRegressor
from sklearn_quinn.datasets import UCI_DATASETS, load_uci_split

FAMILIES = {"Laplace": LaplaceRegressor, "deep ensemble": DeepEnsembleRegressor, "RMS": RMSRegressor,
            "SWAG": SWAGRegressor}


def split_of(table, seed, data_dir=DEFAULT_DATA_DIR):
    """Training and test rows of ``table`` for ``seed`` (a UCI set's standard split ``seed``)."""
    if table == "diabetes":
        X, y = load_diabetes(return_X_y=True)
        return train_test_split(X, y, test_size=0.2, random_state=seed)
    if table in UCI_DATASETS:
        return load_uci_split(data_dir, table, seed)
    return SYNTHETIC[table](seed)


def gaussian_scores(y, mean, variance):
    """Mean negative log density and 95% coverage of ``N(mean, variance)`` at ``y``."""
    nll = np.mean(0.5 * np.log(2 * np.pi * variance) + 0.5 * (y - mean) ** 2 / variance)
    return float(nll), float(np.mean(np.abs(y - mean) < 1.96 * np.sqrt(variance)))


def member_variance(regressor):
    """The variance the deep ensemble adds to each member's output (0 for the other families)."""
    member_std = getattr(regressor, "member_std_", None)
    return 0.0 if member_std is None else member_std**2


def draws_spread(estimator, X):
    """The own spread of the outputs at ``X`` (units of y) of the draws a family's predictions average
    (the deep ensemble's and RMS's members, SWAG's weight draws), before each carries the Laplace
    posterior beyond it: a probe of its fitted network (``_model``) and draws (``_prediction_draws``)."""
    scaler, regressor = estimator[0], estimator[-1]
    inputs = torch.as_tensor(scaler.transform(X), dtype=torch.float64)
    theta, _ = regressor._prediction_draws()
    outputs = regressor._model(theta, inputs)[..., 0].detach().numpy()
    return outputs.var(0, ddof=1) * regressor._y_scale[0] ** 2


def spread(estimator, X_train, X_test, y_test):
    """Epistemic (the ensembles' and SWAG's: their draws' own spread) over noise variance on the
    training and the test rows, and the test coverage."""
    regressor = estimator[-1]
    noise_variance = float(np.ravel(regressor.noise_std_)[0]) ** 2
    if not isinstance(regressor, LaplaceRegressor):
        ratios = [float(np.mean(draws_spread(estimator, X))) / noise_variance for X in (X_train, X_test)]
    else:
        ratios = [float(np.mean(regressor.predict_uncertainty(estimator[0].transform(X)).epistemic_std ** 2))
                  / noise_variance for X in (X_train, X_test)]
    mean, std = estimator.predict(X_test, return_std=True)
    return (*ratios, float(np.mean(np.abs(y_test - mean) < 1.96 * std)))


def widened_ensemble(fits, y_test, X_test):
    """The deep ensemble's test NLL and coverage with its members alone, widened by ``member_std_``,
    as it is, and widened by the Laplace posterior's variance at each test row; Laplace's."""
    laplace, ensemble = fits["Laplace"], fits["deep ensemble"]
    mean, std = ensemble.predict(X_test, return_std=True)
    laplace_mean, laplace_std = laplace.predict(X_test, return_std=True)
    members_alone = draws_spread(ensemble, X_test) + float(np.ravel(ensemble[-1].noise_std_)[0]) ** 2
    local = laplace[-1].predict_uncertainty(laplace[0].transform(X_test)).epistemic_std ** 2
    return (*gaussian_scores(y_test, mean, members_alone),
            *gaussian_scores(y_test, mean, members_alone + member_variance(ensemble[-1])),
            *gaussian_scores(y_test, mean, std**2),
            *gaussian_scores(y_test, mean, members_alone + local),
            *gaussian_scores(y_test, laplace_mean, laplace_std**2))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", nargs="+", choices=[*SYNTHETIC, "diabetes", *UCI_DATASETS],
                        default=["wide", "linear", "diabetes"])
    parser.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help="the UCI splits' folder")
    parser.add_argument("--families", nargs="+", choices=list(FAMILIES), default=list(FAMILIES),
                        help="the families of the first table (the second needs Laplace and the deep ensemble)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    pin_threads(args.threads)

    print(f"Mean epistemic / noise variance on the training and the test rows, and test 95% coverage; "
          f"mean ± s.e. over {args.seeds} seeds, one thread.\n")
    print("| table | family | training rows | test rows | coverage |")
    print("|---|---|---|---|---|")
    widened = {}
    for table in args.tables:
        results = {name: [] for name in args.families}
        widened[table] = []
        for seed in range(args.seeds):
            X_train, X_test, y_train, y_test = split_of(table, seed, args.data_dir)
            fits = {}
            for name in args.families:
                family = FAMILIES[name]
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    estimator = make_pipeline(StandardScaler(), family(random_state=seed)).fit(X_train, y_train)
                results[name].append(spread(estimator, X_train, X_test, y_test))
                fits[name] = estimator
            widened[table].append(widened_ensemble(fits, y_test, X_test))
        for name, rows in results.items():
            columns = np.array(rows).T
            print(f"| {table} | {name} | {fmt(columns[0])} | {fmt(columns[1])} | {fmt(columns[2])} |", flush=True)

    print("\nThe deep ensemble's test NLL and 95% coverage: its members alone; each member widened by "
          "member_std_ (before 2026-12-02); as it is (the larger of the spread and the Laplace variance at "
          "the row); each member widened by the whole Laplace variance at the row; Laplace's. Then the NLL "
          "of the last three ensembles minus member_std_'s, paired:\n")
    print("| table | members alone | member_std_ | as it is | whole Laplace variance | Laplace | "
          "as it is - member_std_ | whole - member_std_ |")
    print("|---|---|---|---|---|---|---|---|")
    for table, rows in widened.items():
        columns = np.array(rows).T
        cells = [f"{fmt(columns[i])}, {fmt(columns[i + 1])}" for i in (0, 2, 4, 6, 8)]
        print(f"| {table} | {' | '.join(cells)} | {fmt(columns[4] - columns[2])} | {fmt(columns[6] - columns[2])} |",
              flush=True)


if __name__ == "__main__":
    main()
