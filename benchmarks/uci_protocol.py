"""The UCI regression protocol, shared by the benchmark scripts.

The protocol itself lives in the package (``sklearn_quinn._cli.uci_protocol``,
also behind ``sklearn-quinn benchmark uci``); this module re-exports it with
the scripts' default data directory, ``../shared/data/uci`` beside the
repository.
"""

from pathlib import Path

import numpy as np

from sklearn_quinn._cli.uci_protocol import fmt, mean_se, reference, run_split, score_fit, standardise_inputs

DEFAULT_DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "uci"

__all__ = ["DEFAULT_DATA_DIR", "fmt", "mean_se", "print_summary", "reference", "run_split", "score_fit",
           "standardise_inputs"]


def print_summary(rows_by_data, headers):
    """A markdown table of each data set's mean +- standard error over its splits, one
    column per entry of the splits' rows (``rows_by_data``: data set -> rows)."""
    print("\n| data set | " + " | ".join(headers) + " |")
    print("|---" * (len(headers) + 1) + "|")
    for data, rows in rows_by_data.items():
        print(f"| {data} | " + " | ".join(fmt(column) for column in np.array(rows).T) + " |")
