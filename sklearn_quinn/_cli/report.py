"""The report of ``compare``: the table as CSV and Markdown, and a PNG per method and reference."""

import csv

import matplotlib.pyplot as plt
import numpy as np
from scipy.stats import norm

from ..plotting import RegressionCalibrationDisplay, ReliabilityDisplay
from .uci_protocol import decimals

_Z95 = norm.ppf(0.975)


def markdown(rows):
    """``rows`` (dicts with the same keys) as a Markdown table, a column's numbers to 3 decimals, or
    more where they show fewer than two significant digits of its typical one, the median magnitude
    (a target of 1e-4; not one score of a signed column that happens to be near zero)."""
    columns = list(rows[0])
    places = {column: decimals(np.median(_magnitudes(row[column] for row in rows) or [0.0]), 3) for column in columns}
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(row[column], places[column]) for column in columns) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def write_tables(rows, out, notes=()):
    """``out/results.csv`` and ``out/results.md`` (the table, then ``notes``, one paragraph each)."""
    with open(out / "results.csv", "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    (out / "results.md").write_text(markdown(rows) + "".join(f"\n{note}.\n" for note in notes))


def plot_regression(path, title, y_test, mean, std):
    """Predicted against observed with 95% intervals, beside the coverage curve, saved to ``path``."""
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4.6), layout="constrained")
    left.errorbar(y_test, mean, yerr=_Z95 * std, fmt="o", markersize=3, elinewidth=0.8, alpha=0.7,
                  label="prediction ± 95% interval")
    low, high = min(y_test.min(), mean.min()), max(y_test.max(), mean.max())
    left.plot([low, high], [low, high], linestyle=":", color="k", label="predicted = observed")
    left.set(xlabel="observed", ylabel="predicted", title=title)
    left.legend(loc="upper left")
    RegressionCalibrationDisplay.from_predictions(y_test, mean, std, ax=right)
    right.set_title("calibration of the central intervals")
    figure.savefig(path, dpi=100)
    plt.close(figure)


def plot_classification(path, title, y_test, proba, classes):
    """Reliability diagram, saved to ``path``."""
    display = ReliabilityDisplay.from_predictions(y_test, proba, labels=classes)
    display.ax_.set_title(title)
    display.figure_.savefig(path, dpi=100)
    plt.close(display.figure_)


def _magnitudes(values):
    """The magnitudes of the finite non-zero floats among ``values``."""
    return [abs(value) for value in values if isinstance(value, float) and np.isfinite(value) and value != 0]


def _cell(value, places):
    return f"{value:.{places}f}" if isinstance(value, float) and not np.isnan(value) else str(value)
