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

import numpy as np
import pytest
from sklearn.linear_model import BayesianRidge, LinearRegression

from sklearn_quinn._cli import compare as compare_module
from sklearn_quinn._cli import data as data_module
from sklearn_quinn._cli.main import main
from sklearn_quinn._cli.methods import METHODS, make_estimator
from sklearn_quinn._cli.references import REFERENCES, RowSubsample

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
    "a method twice": (lambda tmp: ["compare", "--methods", "de", "laplace", "de"],
                       "method 'de' listed more than once"),
    "target of a bundled set": (lambda tmp: ["compare", "iris", "--target", "x"],
                                "the bundled data set 'iris' has its own target"),
    "unknown method": (lambda tmp: ["compare", "--methods", "laplace", "gp"], "unknown method 'gp'"),
    "bad test size": (lambda tmp: ["compare", "--test-size", "1.5"], "--test-size must be in (0, 1)"),
    "no data dir": (lambda tmp: ["benchmark", "uci"], "pass --data-dir DIR or set SKLEARN_QUINN_UCI_DIR"),
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
