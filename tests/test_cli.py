"""The ``sklearn-quinn`` command line, run in-process through ``main(argv)``.

Fits use ``--max-epochs 5``: these tests check the plumbing (tables, files,
errors, resuming), not the quality of the fits.
"""

import csv
import json
import subprocess
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import joblib
import numpy as np
import pytest
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.datasets import load_diabetes, load_iris
from sklearn.linear_model import BayesianRidge, LinearRegression
from sklearn.model_selection import train_test_split

from sklearn_quinn._cli import benchmark as benchmark_module
from sklearn_quinn._cli import compare as compare_module
from sklearn_quinn._cli import data as data_module
from sklearn_quinn._cli.benchmark import check_settings, data_dir_or_error, markdown_table
from sklearn_quinn._cli.data import detected_task
from sklearn_quinn._cli.main import build_parser, main
from sklearn_quinn._cli.methods import METHODS, make_estimator
from sklearn_quinn._cli.references import GPR_MAX_ROWS, REFERENCES, RowSubsample, make_reference, subsample_note
from sklearn_quinn._cli.uci_protocol import fmt, run_split, score_fit
from sklearn_quinn.datasets import load_uci_split

from .uci_folders import write_uci_set

SHARED_UCI = Path(__file__).resolve().parents[2] / "shared" / "data" / "uci"
TINY = ["--methods", "laplace", "de", "--max-epochs", "5", "--threads", "1"]


def read_csv(path):
    with open(path, newline="") as file:
        return list(csv.DictReader(file))


def test_compare_scores_coverage_at_95_and_ece_over_15_bins():
    """The table's columns by hand: a target 1.8 from its mean at std 1 is inside the 95% interval
    (1.96) and outside the 90% one (1.645); two predictions of confidence 0.62 (right) and 0.68 (wrong)
    fall in two of 15 bins, gaps 0.38 and 0.68, mean 0.53 (one of 10 bins: 0.15)."""
    assert compare_module.regression_scores(np.array([0.0, 1.8]), np.zeros(2), np.ones(2))["95% coverage"] == 1.0
    proba = np.array([[0.62, 0.38], [0.68, 0.32]])
    ece = compare_module.classification_scores(np.array([0, 1]), proba, np.array([0, 1]))["ECE"]
    assert ece == pytest.approx(0.53, abs=1e-12)


def test_compare_bundled_regression(tmp_path, capsys):
    assert main(["compare", "diabetes", *TINY, "--out", str(tmp_path)]) == 0
    rows = read_csv(tmp_path / "results.csv")
    assert [row["method"] for row in rows] == ["laplace", "de", "sklearn-bayesian-ridge", "sklearn-gpr"]
    assert list(rows[0]) == ["method", "RMSE", "NLL", "CRPS", "95% coverage", "fit s"]
    assert all(np.isfinite(float(value)) for row in rows for key, value in row.items() if key != "method")
    assert all(0 <= float(row["95% coverage"]) <= 1 for row in rows)
    report = (tmp_path / "results.md").read_text()
    assert report.startswith("| method | RMSE |") and "sklearn-* rows are scikit-learn references" in report
    assert all((tmp_path / f"{row['method']}.png").stat().st_size > 0 for row in rows)
    out = capsys.readouterr().out
    assert "| laplace |" in out and "| sklearn-gpr |" in out and "sklearn-gpr: GaussianProcessRegressor" in out
    assert "task: regression, detected from the target (214 distinct integer values, more than the 20" in out


def test_compare_bundled_classification(tmp_path):
    assert main(["compare", "iris", *TINY, "--out", str(tmp_path)]) == 0
    rows = read_csv(tmp_path / "results.csv")
    assert [row["method"] for row in rows] == ["laplace", "de", "sklearn-logistic"]
    assert list(rows[0]) == ["method", "accuracy", "NLL", "ECE", "fit s"]
    assert all(0 <= float(row["accuracy"]) <= 1 for row in rows)
    assert all(np.isfinite(float(row["NLL"])) and 0 <= float(row["ECE"]) <= 1 for row in rows)
    assert (tmp_path / "laplace.png").is_file() and (tmp_path / "sklearn-logistic.png").is_file()


@pytest.mark.parametrize("flags, settings", [([], {"max_epochs": "auto", "n_burnin": 500}),
                                              (["--quick"], {"max_epochs": 300, "n_burnin": 200})])
def test_compare_fits_the_package_defaults_unless_quick(flags, settings, tmp_path, monkeypatch):
    class Fitted(Exception):
        """Stops the run at its first fit, whose estimator it carries."""

    def first_fit(estimator, *args):
        raise Fitted(estimator)

    monkeypatch.setattr("sklearn_quinn._cli.compare.fit_and_score", first_fit)
    with pytest.raises(Fitted) as fitted:
        main(["compare", "--methods", "mcmc", *flags, "--out", str(tmp_path)])
    params = fitted.value.args[0].get_params()
    assert {name: params[name] for name in settings} == settings


@pytest.mark.parametrize("name, n_rows, settings", [
    ("rms", 300, {"max_epochs": 300, "n_estimators": 20}),
    # 250 steps an epoch: 'auto' trains 800 epochs, fewer than its full count, with 5 members.
    ("rms", 50_000, {"max_epochs": 300, "n_estimators": 5}),
    # 5,000 steps an epoch: 'auto' trains 40 epochs, fewer than quick's 300.
    ("rms", 1_000_000, {"max_epochs": "auto", "n_estimators": 5}),
    ("laplace", 1_000_000, {"max_epochs": "auto"}),
    ("laplace", 300, {"max_epochs": 300}),
])
def test_quick_is_never_a_bigger_budget_than_the_defaults(name, n_rows, settings):
    params = make_estimator(name, False, quick=True, n_rows=n_rows).get_params()
    assert {key: params[key] for key in settings} == settings


def test_compare_notes_a_small_split_and_the_fits_warnings(tmp_path, capsys, monkeypatch):
    """A fit's warnings go to the notes, not through the progress bar, once each; so does a test split
    of a handful of rows."""
    original = compare_module.fit_and_score

    def warning_fit(*args, **kwargs):
        for _ in range(2):
            warnings.warn("a fit's warning.", stacklevel=2)
        return original(*args, **kwargs)

    monkeypatch.setattr(compare_module, "fit_and_score", warning_fit)
    argv = ["compare", "diabetes", "--methods", "laplace", "--no-references", "--max-epochs", "5", "--threads", "1"]
    assert main(argv + ["--test-size", "0.015", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.count("laplace warned: a fit's warning.") == 1 and "only 7 test rows" in out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the user's filters still decide
        assert main(argv + ["--out", str(tmp_path)]) == 0
    assert "warned" not in capsys.readouterr().out


def test_compare_notes_what_reading_the_table_said(tmp_path, capsys):
    """A label kept though it reads as missing is said in the notes, beside the table, not as a Python
    warning on stderr before the progress bar."""
    rows = [f"{index % 7},{(index * 3) % 5},{['EU', 'NA'][index % 2]}" for index in range(40)]
    path = tmp_path / "regions.csv"
    path.write_text("a,b,region\n" + "\n".join(rows) + "\n")
    argv = ["compare", str(path), "--target", "region", "--methods", "laplace", "--max-epochs", "5", "--threads", "1"]
    assert main(argv + ["--out", str(tmp_path / "report")]) == 0
    captured = capsys.readouterr()
    assert "the table: the target column 'region' has the label(s) 'NA'" in captured.out
    assert "NA" not in captured.err


def test_compare_without_references(tmp_path, capsys):
    assert main(["compare", "iris", *TINY, "--no-references", "--out", str(tmp_path)]) == 0
    assert [row["method"] for row in read_csv(tmp_path / "results.csv")] == ["laplace", "de"]
    assert "sklearn-" not in capsys.readouterr().out and not (tmp_path / "sklearn-logistic.png").exists()


def test_compare_fits_the_gaussian_process_on_a_subset_of_a_large_table(tmp_path, capsys, monkeypatch):
    # The limit lowered to 40 rows: the 48 training rows of a 60-row table are then "large".
    monkeypatch.setitem(REFERENCES, "sklearn-gpr", REFERENCES["sklearn-gpr"]._replace(max_rows=40))
    path = tmp_path / "table.csv"
    X = np.random.RandomState(0).randn(60, 3)
    with open(path, "w", newline="") as file:
        csv.writer(file).writerows([["a", "b", "y"], *([a, b, a - b + 0.1 * c] for a, b, c in X)])
    assert main(["compare", str(path), "--target", "y", *TINY, "--out", str(tmp_path / "report")]) == 0
    note = "sklearn-gpr is fitted on a random 40 of the 48 training rows"
    assert note in capsys.readouterr().out and note in (tmp_path / "report" / "results.md").read_text()
    gpr = [row for row in read_csv(tmp_path / "report" / "results.csv") if row["method"] == "sklearn-gpr"]
    assert np.isfinite(float(gpr[0]["NLL"]))


def test_bayesian_ridge_reference_fits_the_standardised_target():
    """On prices of about 3e5 scikit-learn's BayesianRidge stops at a nearly constant prediction
    (RMSE 175,000 here, a linear fit's 38,000); on the standardised target it is the linear fit."""
    rng = np.random.RandomState(0)
    X = rng.normal(size=(200, 3))
    price = np.abs(3e5 + 1.5e5 * X[:, 0] - 8e4 * X[:, 1] + 3e4 * X[:, 2] ** 2 + rng.normal(0, 2e4, 200)) + 1e5
    reference = REFERENCES["sklearn-bayesian-ridge"].make(3, 0).fit(X[:160], price[:160])
    linear = LinearRegression().fit(X[:160], price[:160])
    rmse = [np.sqrt(np.mean((model.predict(X[160:]) - price[160:]) ** 2)) for model in (reference, linear)]
    assert rmse[0] < 1.05 * rmse[1]
    mean, std = reference.predict(X[160:], return_std=True)
    np.testing.assert_allclose(mean, reference.predict(X[160:]))
    assert np.all(std > 0.5 * rmse[1]) and np.all(std < 2 * rmse[1])


def test_csv_reading_takes_a_byte_order_mark_blank_lines_and_the_usual_missing_markers(tmp_path):
    path = tmp_path / "excel.csv"
    path.write_text("\ufeffprice,a\n1.5,NA\n\n2.5,3\n,\n", encoding="utf-8")
    columns = data_module._read_csv(path)
    assert list(columns) == ["price", "a"] and columns["price"] == ["1.5", "2.5", ""]
    assert np.isnan(data_module._as_float(columns["a"])).tolist() == [True, False, True]


def test_labels_that_spell_a_missing_value_stay_classes_with_a_warning(tmp_path):
    """'NA' may be North America and 'None' a level of damage: a text target keeps them, and says so;
    labels of numbers and codes beyond twenty classes stay labels."""
    path = tmp_path / "labels.csv"
    path.write_text("a,y\n1,NA\n2,EU\n3,None\n")
    with pytest.warns(UserWarning, match=r"label\(s\) 'NA', 'None', which R"):
        _, y, _ = data_module.load_table(str(path), "y")
    assert sorted(y) == ["EU", "NA", "None"]
    path.write_text("a,y\n" + "".join(f"{i},{i}\n" for i in range(25)) + "25,X1\n26,Y2\n")
    assert len(set(data_module.load_table(str(path), "y")[1])) == 27


def test_row_subsample_fits_on_at_most_max_rows():
    X, y = np.arange(20.0).reshape(10, 2), np.arange(10.0)
    small = RowSubsample(BayesianRidge(), max_rows=4, random_state=0).fit(X, y)
    assert small.n_fit_rows_ == 4 and small.predict(X, return_std=True)[1].shape == (10,)
    assert RowSubsample(BayesianRidge(), max_rows=20).fit(X, y).n_fit_rows_ == 10


@pytest.mark.parametrize("target, column", [("price", "RMSE"), ("colour", "accuracy")])
def test_compare_csv(tmp_path, target, column):
    rng = np.random.RandomState(0)
    X = rng.randn(60, 2)
    y = 2 * X[:, 0] - X[:, 1] + 0.1 * rng.randn(60) if target == "price" else np.where(X[:, 0] > 0, "red", "blue")
    path = tmp_path / "table.csv"
    with open(path, "w", newline="") as file:
        csv.writer(file).writerows([["a", "b", target], *([a, b, t] for (a, b), t in zip(X, y))])
    out = tmp_path / "report"
    assert main(["compare", str(path), "--target", target, *TINY, "--out", str(out)]) == 0
    assert column in read_csv(out / "results.csv")[0]


@pytest.mark.parametrize("name", list(METHODS))
def test_every_method_builds_with_the_overrides(name):
    for classification in (False, True):
        estimator = make_estimator(name, classification, quick=True, max_epochs=5, device="cuda", random_state=3)
        params = estimator.get_params()
        assert params["device"] == "cuda" and params["random_state"] == 3
        assert params.get("max_epochs", 5) == 5  # SMC trains no network and has no epochs


def _write(tmp_path, text):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    return str(path)


def _write_bytes(tmp_path, data):
    path = tmp_path / "bad.csv"
    path.write_bytes(data)
    return str(path)


def _csv(text):
    """The command line of ``compare`` on a CSV of ``text`` whose target is ``y``."""
    return lambda tmp_path: ["compare", _write(tmp_path, text), "--target", "y"]


def _out_is_a_file(tmp_path):
    """``compare`` where the report folder (``tmp_path / "out"``, which the test passes) is a file."""
    (tmp_path / "out").write_text("")
    return ["compare", "iris", "--methods", "laplace"]


BAD_INPUT = {
    "missing file": (lambda tmp: ["compare", str(tmp / "absent.csv"), "--target", "y"],
                     "neither a file nor a bundled data set"),
    "no target": (lambda tmp: ["compare", _write(tmp, "a,y\n1,2\n")], "--target COLUMN is required"),
    "unknown column": (lambda tmp: ["compare", _write(tmp, "a,y\n1,2\n"), "--target", "z"], "no column 'z'"),
    "text feature": (_csv("a,y\nx,2\n"), "non-numeric feature column(s) 'a'"),
    "NaN feature": (_csv("a,b,y\n1,,2\n2,3,1\nnan,NA,0\n"),
                    "missing values (NaN, empty or NA) in feature column(s) 'a' (1 row), 'b' (2 rows)"),
    "NaN target": (_csv("a,y\n1,2\n2,nan\n"), "missing values"),
    "empty target": (_csv("a,y\n1,2\n2,\n"), "missing values"),
    "NA target": (_csv("a,y\n1,2.5\n2,NA\n"), "missing values"),
    "empty label": (_csv("a,y\n1,red\n2,\n3,blue\n"), "missing values"),
    "thousands feature": (_csv('a,y\n"1,000",2\n'), "non-numeric feature column(s) 'a' ('1,000' in row 1)"),
    "thousands target": (_csv("a,y\n" + "".join(f'{i},"{i},500"\n' for i in range(30))),
                         "holds numbers written as text ('0,500' in row 1)"),
    "repeated column": (_csv("x,x,y\n1,2,3\n"), "several columns named 'x'"),
    "unnamed column": (_csv(",a,y\n0,1,2\n"), "column 1 of bad.csv has no name"),
    "semicolons": (_csv("a;y\n1;2\n"), "separated by semicolons"),
    "latin-1": (lambda tmp: ["compare", _write_bytes(tmp, "a,prix\n1,é\n".encode("latin-1")), "--target", "prix"],
                "bad.csv is not UTF-8 text"),
    "a class of one row": (_csv("a,y\n1,red\n2,red\n3,blue\n"),
                           "needs 2 rows of every class; 1 of the 2 classes have one ('blue')"),
    "infinite feature": (_csv("a,b,y\n1,inf,2\n"), "infinite values in feature column(s) 'b'"),
    "infinite target": (_csv("a,y\n1,-inf\n"), "infinite values in the target column 'y'"),
    "ragged row": (_csv("a,b,y\n1,2,3\n4,5\n"), "bad.csv: line 3 has a different number of fields than the header"),
    "header only": (_csv("a,y\n"), "bad.csv needs a header row and at least one data row"),
    "no feature column": (_csv("y\n1\n2\n"), "bad.csv has no feature columns besides the target 'y'"),
    "text target of a regression": (lambda tmp: ["compare", _write(tmp, "a,y\n1,red\n2,blue\n3,red\n4,blue\n"),
                                                 "--target", "y", "--task", "regression"],
                                    "a regression needs a numeric target"),
    "a method twice": (lambda tmp: ["compare", "--methods", "de", "laplace", "de"],
                       "method 'de' listed more than once"),
    "target of a bundled set": (lambda tmp: ["compare", "iris", "--target", "x"],
                                "the bundled data set 'iris' has its own target"),
    "unknown method": (lambda tmp: ["compare", "--methods", "laplace", "gp"], "unknown method 'gp'"),
    "bad test size": (lambda tmp: ["compare", "--test-size", "1.5"], "--test-size must be in (0, 1)"),
    "test size 0": (lambda tmp: ["compare", "--test-size", "0"], "--test-size must be in (0, 1)"),
    "test size 1": (lambda tmp: ["compare", "--test-size", "1"], "--test-size must be in (0, 1)"),
    "report folder is a file": (_out_is_a_file, "File exists"),
    "no data dir": (lambda tmp: ["benchmark", "uci"], "pass --data-dir DIR or set SKLEARN_QUINN_UCI_DIR"),
    "absent data dir": (lambda tmp: ["benchmark", "uci", "--data-dir", str(tmp / "nowhere")], "nowhere does not exist"),
    "unknown data set": (lambda tmp: ["benchmark", "uci", "--data-dir", str(tmp), "--datasets", "titanic"],
                         "unknown UCI data set 'titanic'"),
    "a data set twice": (lambda tmp: ["benchmark", "uci", "--data-dir", str(tmp), "--datasets", "yacht", "yacht"],
                         "data set 'yacht' listed more than once"),
    # Refused before any fit: it was refused after every split had been fitted and written.
    "no published figures": (lambda tmp: ["benchmark", "uci", "--data-dir", str(tmp), "--datasets", "yacht"],
                             "README.md is missing"),
}


@pytest.mark.parametrize("case", BAD_INPUT)
def test_bad_input_is_one_line(case, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("SKLEARN_QUINN_UCI_DIR", raising=False)
    argv, message = BAD_INPUT[case]
    assert main(argv(tmp_path) + ["--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("sklearn-quinn: error: ")
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "out" / "results.csv").exists()


@pytest.mark.parametrize("threads", ["0", "-2", "two"])
def test_threads_must_be_a_positive_integer(threads, capsys):
    with pytest.raises(SystemExit) as exit_status:
        main(["compare", "--threads", threads])
    assert exit_status.value.code == 2 and "--threads: must be a positive integer" in capsys.readouterr().err


@pytest.mark.parametrize("argv, option", [
    (["compare", "--max-epochs", "0"], "--max-epochs: must be a positive"),
    (["benchmark", "uci", "--max-epochs", "-3"], "--max-epochs: must be a positive"),
    (["benchmark", "uci", "--n-jobs", "0"], "--n-jobs: must be a non-zero"),
])
def test_counts_are_refused_as_they_are_parsed(argv, option, capsys):
    """--max-epochs 0 made the output folder and then failed at the first fit; --n-jobs 0 gave
    joblib's message, which does not name the option."""
    with pytest.raises(SystemExit) as exit_status:
        main(argv)
    assert exit_status.value.code == 2 and option in capsys.readouterr().err


@pytest.mark.skipif(not (SHARED_UCI / "README.md").is_file(), reason="UCI data not present")
def test_benchmark_uci_refuses_an_out_that_is_a_file_before_fitting(tmp_path, capsys):
    (tmp_path / "afile").write_text("")
    argv = ["benchmark", "uci", "--data-dir", str(SHARED_UCI), "--datasets", "yacht", "--methods", "laplace",
            "--splits", "1", "--max-epochs", "1", "--out", str(tmp_path / "afile")]
    assert main(argv) == 1
    assert "is a file, not a folder" in capsys.readouterr().err


@pytest.mark.parametrize("splits", ["0", "-5"])
def test_splits_must_be_a_positive_integer(splits, capsys):
    """0 failed on a results file the user never named, -5 ran nothing and exited 0."""
    with pytest.raises(SystemExit) as exit_status:
        main(["benchmark", "uci", "--splits", splits])
    assert exit_status.value.code == 2 and "--splits: must be a positive integer" in capsys.readouterr().err


@pytest.mark.skipif(not (SHARED_UCI / "yacht" / "data.txt").is_file(), reason="UCI data not present")
def test_benchmark_uci_resumes(tmp_path, capsys):
    argv = ["benchmark", "uci", "--data-dir", str(SHARED_UCI), "--datasets", "yacht", "--methods", "laplace",
            "--splits", "2", "--max-epochs", "5", "--threads", "1", "--n-jobs", "2", "--out", str(tmp_path)]
    assert main(argv) == 0
    first = capsys.readouterr()
    files = sorted(tmp_path.glob("yacht/laplace/split_*.json"))
    assert [path.name for path in files] == ["split_00.json", "split_01.json"]
    result = json.loads(files[0].read_text())
    assert result["dataset"] == "yacht" and result["split"] == 0 and np.isfinite(result["ll"])
    assert "2 split(s) fitted, 0 skipped" in first.out
    assert "| yacht | Laplace | 2 |" in (tmp_path / "results.md").read_text()

    stamps = [path.stat().st_mtime_ns for path in files]
    assert main(argv) == 0
    assert "0 split(s) fitted, 2 skipped" in capsys.readouterr().out
    assert [path.stat().st_mtime_ns for path in files] == stamps

    # Another --max-epochs into the same folder, for the same method or another: refused, where its
    # figures joined this run's table.
    for other_method in ("laplace", "de"):
        other = [arg if arg != "5" else "6" for arg in argv]
        other[other.index("laplace")] = other_method
        assert main(other) == 1
        err = capsys.readouterr().err
        assert "was fitted with max_epochs=5, device='cpu', and this run asks max_epochs=6" in err
    assert [path.stat().st_mtime_ns for path in files] == stamps
    assert not (tmp_path / "yacht" / "de").exists()


def test_python_m_help():
    result = subprocess.run([sys.executable, "-m", "sklearn_quinn", "--help"], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0 and "compare" in result.stdout and "benchmark" in result.stdout


def test_threads_are_restored_after_main(tmp_path):
    """main() is callable: --threads limited torch and BLAS for the rest of the process."""
    import torch
    from threadpoolctl import threadpool_info

    before = torch.get_num_threads(), [pool["num_threads"] for pool in threadpool_info()]
    other = str(torch.get_num_threads() + 1)  # a count other than the current one, whatever it is
    argv = ["compare", "diabetes", "--methods", "laplace", "--no-references", "--max-epochs", "2", "--threads", other]
    assert main(argv + ["--out", str(tmp_path)]) == 0
    assert (torch.get_num_threads(), [pool["num_threads"] for pool in threadpool_info()]) == before


def test_the_table_shows_two_significant_digits_of_a_small_column():
    """A target in units of 1e-4 printed every RMSE as 0.000; a column's decimals now show two
    significant digits of its median magnitude, and at least 3: a signed score near zero in one
    row does not stretch its column."""
    from sklearn_quinn._cli.report import markdown

    table = markdown([{"method": "a", "RMSE": 2.54e-05, "NLL": -9.81234}, {"method": "b", "RMSE": 3.1e-05,
                                                                         "NLL": float("nan")},
                      {"method": "c", "RMSE": 3.2e-03, "NLL": -2.1e-9}])
    assert "| a | 0.000025 | -9.812 |" in table and "| b | 0.000031 | nan |" in table
    assert "| c | 0.003200 | -0.000 |" in table


def test_a_text_target_is_offered_no_other_task():
    """A regression needs numbers: the note offered --task regression for a text target, which was
    then refused."""
    from sklearn_quinn._cli.data import detected_task

    assert detected_task(np.array(["a", "b", "a"])) == (True, "task: classification, detected from the target "
                                                              "(its values are text)")
    assert detected_task(np.array([0, 1, 0]))[1].endswith("--task regression overrides it")


# ---------------------------------------------------------------------------------------------------
# The UCI protocol's scores, split by split and over splits, and the benchmark's table and resuming.


def _tiny_uci(folder):
    """A UCI data directory of two data sets (yacht: 2 splits and 7 hidden units; concrete: 1 split, no
    n_hidden.txt) and a README of published figures for yacht only."""
    data = np.arange(24.0).reshape(6, 4)
    splits = [([0, 1, 2, 3], [4, 5]), ([2, 3, 4, 5], [0, 1])]
    write_uci_set(folder / "yacht", data, splits, n_hidden=7)
    write_uci_set(folder / "concrete", data, splits[:1])
    (folder / "README.md").write_text(
        "| data set | VI (H-L&A 2015) | PBP (H-L&A 2015) |\n|---|---|---|\n| yacht | -3.43 ± 0.16 | -1.63 ± 0.02 |\n\n"
        "Test RMSE:\n\n| data set | VI | PBP |\n|---|---|---|\n| yacht | 6.89 ± 0.67 | 1.02 ± 0.05 |\n")
    return folder


class _FixedPrediction(RegressorMixin, BaseEstimator):
    """Predicts mean 0 and std ``std`` everywhere; keeps the inputs it was fitted on and asked about.
    No ``random_state``, as scikit-learn's BayesianRidge."""

    def __init__(self, std=2.0):
        self.std = std

    def fit(self, X, y):
        self.X_fit_ = X
        return self

    def predict(self, X, return_std=False):
        self.X_predict_ = X
        mean = np.zeros(len(X))
        return (mean, np.full(len(X), self.std)) if return_std else mean


class _SeededFixedPrediction(_FixedPrediction):
    def __init__(self, std=2.0, random_state=None):
        self.std = std
        self.random_state = random_state


def test_uci_scores_of_a_split_by_hand():
    """Targets 0, 3.6 and -6 against mean 0 and std 2 are z = 0, 1.8 and -3: RMSE sqrt(48.96 / 3), a
    log-likelihood per point of -log 2 - log(2 pi) / 2 - mean(z^2) / 2, and 2 of 3 inside the 95%
    interval (1.96; 1.8 is outside the 90% one). The inputs are standardised with the training rows'
    mean and std, a constant column by 1."""
    X_train, X_test = np.array([[1.0, 5.0], [3.0, 5.0]]), np.array([[4.0, 5.0], [0.0, 5.0], [2.0, 5.0]])
    result = score_fit(_FixedPrediction(), X_train, X_test, np.array([1.0, 2.0]), np.array([0.0, 3.6, -6.0]))
    assert result["rmse"] == pytest.approx(np.sqrt(48.96 / 3), rel=1e-12)
    z = np.array([0.0, 1.8, -3.0])
    assert result["ll"] == pytest.approx(-np.log(2.0) - 0.5 * np.log(2 * np.pi) - np.mean(z**2) / 2, rel=1e-12)
    assert result["coverage_95"] == pytest.approx(2 / 3)
    assert (result["n_train"], result["n_test"]) == (2, 3)
    np.testing.assert_allclose(result["estimator"].X_fit_, [[-1.0, 0.0], [1.0, 0.0]])
    np.testing.assert_allclose(result["estimator"].X_predict_, [[2.0, 0.0], [-2.0, 0.0], [0.0, 0.0]])


def test_uci_split_seeds_its_fit_with_the_split_index(tmp_path):
    data_dir = _tiny_uci(tmp_path)
    result = run_split(_SeededFixedPrediction(random_state=42), data_dir, "yacht", 1)
    assert result["estimator"].random_state == 1 and result["n_test"] == 2


def test_mean_and_standard_error_over_splits():
    """1, 2 and 4: mean 7/3, sample std sqrt(7/3) (ddof 1), standard error sqrt(7/3) / sqrt(3) = 0.882;
    a single split has no standard error."""
    assert fmt([1.0, 2.0, 4.0], 2) == "2.33 ± 0.88"
    assert fmt([1.0, 2.0, 4.0], 4) == f"{7 / 3:.4f} ± {np.sqrt(7 / 3) / np.sqrt(3):.4f}"
    assert fmt([3.0]) == "3.000 ± nan"


def test_benchmark_table_by_hand(tmp_path):
    """Rows in the data README's order of data sets and the registry's order of methods; ours with two
    decimals, or two significant digits of a small mean (naval's RMSE of 6e-4); the published columns
    of the log-likelihood table ('n/a' where the README has no row); seconds per split, and summed."""
    data_dir = _tiny_uci(tmp_path)

    def run(rmse, ll, seconds, cpu_seconds):
        return {"rmse": rmse, "ll": ll, "seconds": seconds, "cpu_seconds": cpu_seconds}

    results = {
        ("yacht", "laplace"): [run(1.0, -2.0, 10.0, 11.0), run(2.0, -1.0, 20.0, 13.0)],
        ("naval", "de"): [run(0.0004, 5.0, 1.0, 1.0), run(0.0008, 6.0, 3.0, 2.0)],
        ("naval", "laplace"): [run(0.001, 4.0, 2.0, 2.0)],
    }
    lines = markdown_table(results, data_dir).splitlines()
    rmse, ll = [i for i, line in enumerate(lines) if line == "| data set | method | splits | ours | VI | PBP |"]
    assert lines[rmse + 1:rmse + 5] == ["|---|---|---|---|---|---|",
                                        "| naval | Laplace | 1 | 0.0010 ± nan | n/a | n/a |",
                                        "| naval | Deep ensemble | 2 | 0.00060 ± 0.00020 | n/a | n/a |",
                                        "| yacht | Laplace | 2 | 1.50 ± 0.50 | 6.89 ± 0.67 | 1.02 ± 0.05 |"]
    assert lines[ll - 2].startswith("Test log-likelihood per point")
    assert lines[ll + 1:ll + 5] == ["|---|---|---|---|---|---|",
                                    "| naval | Laplace | 1 | 4.00 ± nan | n/a | n/a |",
                                    "| naval | Deep ensemble | 2 | 5.50 ± 0.50 | n/a | n/a |",
                                    "| yacht | Laplace | 2 | -1.50 ± 0.50 | -3.43 ± 0.16 | -1.63 ± 0.02 |"]
    seconds = lines.index("| data set | method | splits | wall s / split | CPU s / split | wall s, all splits |")
    assert lines[seconds + 2:seconds + 5] == ["| naval | Laplace | 1 | 2.0 | 2.0 | 2 |",
                                              "| naval | Deep ensemble | 2 | 2.0 | 1.5 | 4 |",
                                              "| yacht | Laplace | 2 | 15.0 | 12.0 | 30 |"]
    assert lines[-2:] == ["| naval | 6 |", "| yacht | 30 |"]


def test_benchmark_uci_fits_the_splits_a_data_set_has_with_its_hidden_units(tmp_path, capsys, monkeypatch):
    """--splits 5 on data sets of 2 and 1 splits fits 3; yacht's n_hidden.txt gives 7 hidden units,
    concrete, without one, the protocol's 50; --device and --n-jobs reach the fits. The fits are
    stubbed: this checks what is fitted, not how well."""
    data_dir = _tiny_uci(tmp_path / "uci")
    fitted, jobs = [], []

    def instant_split(estimator, data_dir, name, split):
        load_uci_split(data_dir, name, split)  # refuses a split the data set lacks
        params = estimator.get_params()
        fitted.append((name, split, params["hidden_layer_sizes"], params["device"]))
        return {"rmse": 1.0 + split, "ll": -1.0, "seconds": 1.0, "cpu_seconds": 1.0, "estimator": estimator}

    def parallel(n_jobs, **kwargs):  # in this process, where the stub is
        jobs.append(n_jobs)
        return joblib.Parallel(n_jobs=1, **kwargs)

    monkeypatch.setattr(benchmark_module, "run_split", instant_split)
    monkeypatch.setattr(benchmark_module, "Parallel", parallel)
    out = tmp_path / "out"
    argv = ["benchmark", "uci", "--data-dir", str(data_dir), "--datasets", "yacht", "concrete", "--methods",
            "laplace", "--splits", "5", "--device", "cuda", "--n-jobs", "3", "--out", str(out)]
    assert main(argv) == 0
    assert sorted(fitted) == [("concrete", 0, (50,), "cuda"), ("yacht", 0, (7,), "cuda"), ("yacht", 1, (7,), "cuda")]
    assert jobs == [3] and "3 split(s) fitted, 0 skipped" in capsys.readouterr().out
    assert json.loads((out / "yacht" / "laplace" / "split_01.json").read_text())["device"] == "cuda"
    assert "| yacht | Laplace | 2 | 1.50 ± 0.50 |" in (out / "results.md").read_text()


def test_a_split_file_without_a_device_was_fitted_on_the_cpu(tmp_path):
    """Split files written before the device was recorded resume a CPU run, and refuse a CUDA one."""
    path = tmp_path / "yacht" / "laplace" / "split_00.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"max_epochs": 5}))
    check_settings(path, {"max_epochs": 5, "device": "cpu"})
    with pytest.raises(ValueError, match="with max_epochs=5, device='cpu', and this run asks max_epochs=5, "
                                         "device='cuda'"):
        check_settings(path, {"max_epochs": 5, "device": "cuda"})


def test_data_dir_option_comes_before_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("SKLEARN_QUINN_UCI_DIR", str(tmp_path / "elsewhere"))
    assert data_dir_or_error(str(tmp_path)) == tmp_path
    with pytest.raises(ValueError, match="elsewhere does not exist"):
        data_dir_or_error(None)


# ---------------------------------------------------------------------------------------------------
# compare: the split, the options reaching the fits, the report.


class _Stopped(Exception):
    """Stops a compare run at its first fit, whose arguments it carries."""


def _first_fit(monkeypatch, argv, tmp_path):
    """The arguments of ``fit_and_score`` at the first fit of ``compare argv``."""
    def first_fit(*args):
        raise _Stopped(*args)

    monkeypatch.setattr(compare_module, "fit_and_score", first_fit)
    with pytest.raises(_Stopped) as stopped:
        main(["compare", *argv, "--out", str(tmp_path)])
    return stopped.value.args


@pytest.mark.parametrize("flags, seed", [([], 0), (["--random-state", "3"], 3)])
def test_compare_holds_out_a_fifth_of_the_rows_drawn_by_the_random_state(flags, seed, tmp_path, monkeypatch):
    estimator, X_train, y_train, X_test, y_test, classification = _first_fit(
        monkeypatch, ["diabetes", "--methods", "laplace", "--device", "cuda", *flags], tmp_path)
    expected = train_test_split(*load_diabetes(return_X_y=True), test_size=0.2, random_state=seed)
    for array, value in zip((X_train, X_test, y_train, y_test), expected):
        np.testing.assert_array_equal(array, value)
    assert len(y_test) == 89 and not classification  # ceil(0.2 * 442)
    assert estimator.get_params()["random_state"] == seed and estimator.get_params()["device"] == "cuda"


def test_compare_task_option_overrides_the_detected_task(tmp_path, monkeypatch):
    assert _first_fit(monkeypatch, ["iris", "--methods", "laplace"], tmp_path)[-1]
    assert not _first_fit(monkeypatch, ["iris", "--methods", "laplace", "--task", "regression"], tmp_path)[-1]


def test_split_table_is_stratified_for_a_classification():
    """Iris's 50 rows per class: a fifth held out is 10 of each (an unstratified split of seed 0 holds
    out 11, 13 and 6)."""
    X, y = load_iris(return_X_y=True)
    assert np.bincount(compare_module.split_table(X, y, True)[3]).tolist() == [10, 10, 10]
    X, y = load_diabetes(return_X_y=True)
    assert len(compare_module.split_table(X, y, False)[3]) == 89


def test_compare_fits_on_standardised_inputs():
    X = np.column_stack([np.arange(8.0) * 100 + 5, np.arange(8.0) % 3])
    scored = compare_module.fit_and_score(_FixedPrediction(), X[:6], np.zeros(6), X[6:], np.zeros(2), False)
    fitted = scored.model[-1].X_fit_
    np.testing.assert_allclose(fitted.mean(axis=0), 0, atol=1e-12)
    np.testing.assert_allclose(fitted.std(axis=0), 1)
    assert scored.scores["RMSE"] == 0 and scored.scores["95% coverage"] == 1


def test_compare_report_says_the_task_then_the_references_then_the_notes(tmp_path, monkeypatch):
    """results.md is the table and then one paragraph per note, in that order. Fits stubbed: the
    report is checked, not the fits."""
    def fixed_fit(estimator, X_train, y_train, X_test, y_test, classification):
        return compare_module.Scored(SimpleNamespace(classes_=np.arange(3)), {"accuracy": 0.5, "fit s": 1.25},
                                     (None,))

    monkeypatch.setattr(compare_module, "fit_and_score", fixed_fit)
    monkeypatch.setattr(compare_module.report, "plot_classification", lambda *args: None)
    compare_module.run_compare("iris", None, ["laplace"], test_size=0.05, out=tmp_path)
    assert (tmp_path / "results.md").read_text() == (
        "| method | accuracy | fit s |\n|---|---|---|\n| laplace | 0.500 | 1.250 |\n"
        "| sklearn-logistic | 0.500 | 1.250 |\n"
        "\ntask: classification, detected from the target (3 distinct integer values); --task regression "
        "overrides it.\n"
        "\nsklearn-* rows are scikit-learn references, fitted and scored as the networks are "
        "(sklearn-logistic: LogisticRegression).\n"
        "\nonly 8 test rows: the scores are those of a handful of rows (a larger --test-size scores more).\n")
    assert read_csv(tmp_path / "results.csv") == [{"method": "laplace", "accuracy": "0.5", "fit s": "1.25"},
                                                  {"method": "sklearn-logistic", "accuracy": "0.5", "fit s": "1.25"}]


def test_a_split_of_few_rows_is_noted_below_ten_a_side():
    assert compare_module._size_notes(10, 10) == []
    assert compare_module._size_notes(9, 1) == [
        "only 1 test row: the scores are those of a handful of rows (a larger --test-size scores more)",
        "only 9 training rows (a smaller --test-size trains on more)"]


def test_compare_seeds_the_references_with_its_random_state():
    rows = compare_module.candidates([], False, np.zeros((10, 2)), random_state=5)
    gpr = [row.estimator for row in rows if row.name == "sklearn-gpr"][0]
    assert gpr.random_state == 5 and gpr.estimator.random_state == 5


# ---------------------------------------------------------------------------------------------------
# Reading a table; what a target makes of the task.


def test_task_detection_counts_up_to_twenty_integer_values():
    assert detected_task(np.arange(20.0)) == (True, "task: classification, detected from the target (20 distinct "
                                                    "integer values); --task regression overrides it")
    assert detected_task(np.arange(21.0)) == (False, "task: regression, detected from the target (21 distinct "
                                                     "integer values, more than the 20 of a classification); "
                                                     "--task classification overrides it")
    assert detected_task(np.array([0.5, 1.5, 0.5])) == (False, "task: regression, detected from the target (2 "
                                                               "distinct values); --task classification overrides it")


def test_csv_reading_takes_an_upper_case_suffix_spaced_names_and_lines_of_spaces(tmp_path):
    path = tmp_path / "TABLE.CSV"
    path.write_text(" a , price \n1,2\n   \n3,4\n")
    X, y, names = data_module.load_table(str(path), "price")
    assert X.tolist() == [[1.0], [3.0]] and y.tolist() == [2.0, 4.0] and names == ["a"]


def test_every_spreadsheet_marker_of_a_missing_value_reads_as_missing():
    values = ["1", "", "NA", "n/a", "NaN", "NaT", "null", "None", "<NA>", "#N/A", " #n/a "]
    assert np.isnan(data_module._as_float(values)).tolist() == [False] + [True] * 10


# ---------------------------------------------------------------------------------------------------
# The references.


def test_bayesian_ridge_reference_takes_a_constant_target():
    """A constant target has std 0: it is standardised by 1, not divided by zero."""
    X = np.random.RandomState(0).randn(20, 2)
    reference = REFERENCES["sklearn-bayesian-ridge"].make(2, 0).fit(X, np.full(20, 5.0))
    mean, std = reference.predict(np.zeros((3, 2)), return_std=True)
    np.testing.assert_allclose(mean, 5.0)
    assert np.all(np.isfinite(std))


def test_gpr_reference_note_above_its_row_limit():
    assert subsample_note("sklearn-gpr", GPR_MAX_ROWS) is None
    assert subsample_note("sklearn-gpr", GPR_MAX_ROWS + 1).startswith(
        f"sklearn-gpr is fitted on a random {GPR_MAX_ROWS} of the {GPR_MAX_ROWS + 1} training rows")
    assert subsample_note("sklearn-gpr", 50, max_rows=40).startswith("sklearn-gpr is fitted on a random 40 of the 50")
    assert subsample_note("sklearn-bayesian-ridge", 10**6) is None


def test_gpr_reference_draws_its_rows_from_its_random_state():
    X, y = np.linspace(0, 1, 10)[:, None], np.linspace(0, 1, 10)
    gpr = make_reference("sklearn-gpr", 1, random_state=4, max_rows=5).fit(X, y)
    rows = np.random.RandomState(4).choice(10, 5, replace=False)
    np.testing.assert_array_equal(gpr.estimator_.X_train_, X[rows])


def test_gpr_reference_std_is_in_the_targets_units():
    """On a target of about 1e5 with noise of std 2e3, the GPR fits the standardised target
    (normalize_y): its std is near 2e3, not capped by the kernel's bounds (a signal variance of at
    most 100) as on the raw target."""
    rng = np.random.RandomState(0)
    X = rng.uniform(-1, 1, size=(60, 1))
    y = 1e5 + 3e4 * X[:, 0] + rng.normal(0, 2e3, 60)
    gpr = make_reference("sklearn-gpr", 1).fit(X[:50], y[:50])
    mean, std = gpr.predict(X[50:], return_std=True)
    assert np.all(std > 1e3) and np.all(std < 4e3)
    assert np.sqrt(np.mean((mean - y[50:]) ** 2)) < 4e3


# ---------------------------------------------------------------------------------------------------
# The methods' settings and the command line's defaults, as the help gives them.


@pytest.mark.parametrize("name, settings", [
    ("laplace", {"max_epochs": 300}), ("de", {"max_epochs": 300}), ("rms", {"max_epochs": 300}),
    ("dropout", {"max_epochs": 300}),
    ("mcmc", {"max_epochs": 300, "n_burnin": 200, "n_samples": 200}),
    ("swag", {"max_epochs": 300, "swag_epochs": 50}),
    ("smc", {"n_particles": 100, "n_leapfrog": 10}),
])
def test_quick_budgets_are_those_the_help_gives(name, settings):
    """compare --help: 300 training epochs; MCMC 200 burn-in + 200 draws per chain; SWAG 50 collection
    epochs; SMC 100 particles of 10-step trajectories."""
    params = make_estimator(name, False, quick=True).get_params()
    assert {key: params[key] for key in settings} == settings


def test_the_help_gives_the_quick_budgets_and_the_defaults_tested_here(capsys):
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert ("300 training epochs instead of 1000; MCMC 200 burn-in + 200 draws per chain instead of 500 + 500; "
            "SWAG 50 collection epochs instead of 100; SMC 100 particles of 10-step trajectories instead of 200 "
            "of 50") in help_text
    for default in ("(default: diabetes)", "held-out fraction (default: 0.2)", "(default: sklearn-quinn-report)",
                    "seeds the split and the fits (default: 0)"):
        assert default in help_text


def test_command_line_defaults_are_those_the_help_gives():
    parser = build_parser()
    compare = parser.parse_args(["compare"])
    assert (compare.data, compare.test_size, compare.random_state, compare.out) == (
        "diabetes", 0.2, 0, "sklearn-quinn-report")
    uci = parser.parse_args(["benchmark", "uci"])
    assert (uci.splits, uci.n_jobs, uci.out, uci.device) == (20, 1, "sklearn-quinn-uci", "cpu")


def test_an_interrupted_run_exits_130(monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("sklearn_quinn._cli.main.run_compare", interrupted)
    assert main(["compare"]) == 130 and capsys.readouterr().err == "sklearn-quinn: interrupted\n"


def test_the_table_decimals_skip_zeros():
    """A column of two zeros and 2.5e-5: its typical magnitude is 2.5e-5 (six decimals), not zero."""
    from sklearn_quinn._cli.report import markdown

    table = markdown([{"method": name, "RMSE": value} for name, value in (("a", 0.0), ("b", 0.0), ("c", 2.5e-5))])
    assert "| c | 0.000025 |" in table and "| a | 0.000000 |" in table


def test_regression_plot_draws_the_central_95_percent_interval(tmp_path, monkeypatch):
    """The error bars reach 1.96 standard deviations each side of the mean (norm.ppf(0.975))."""
    from matplotlib.axes import Axes

    from sklearn_quinn._cli.report import plot_regression

    drawn, errorbar = [], Axes.errorbar

    def recorded_errorbar(self, x, y, yerr=None, **kwargs):
        drawn.append(yerr)
        return errorbar(self, x, y, yerr=yerr, **kwargs)

    monkeypatch.setattr(Axes, "errorbar", recorded_errorbar)
    plot_regression(tmp_path / "plot.png", "title", np.array([0.0, 1.0]), np.zeros(2), np.array([1.0, 2.0]))
    np.testing.assert_allclose(drawn[0], [1.959963984540054, 3.919927969080108], rtol=1e-12)
