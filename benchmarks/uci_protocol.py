"""The UCI regression protocol, shared by the benchmark scripts.

The protocol itself lives in the package (``sklearn_quinn._cli.uci_protocol``,
also behind ``sklearn-quinn benchmark uci``); this module re-exports it with
the scripts' default data directory, ``../shared/data/uci`` beside the
repository.
"""

from pathlib import Path

from sklearn_quinn._cli.uci_protocol import fmt, mean_se, reference, run_split, score_fit, standardise_inputs

DEFAULT_DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "uci"

__all__ = ["DEFAULT_DATA_DIR", "fmt", "mean_se", "reference", "run_split", "score_fit", "standardise_inputs"]
