"""Command-line options of the scripts that run every family at the package's defaults.

``bench_defaults_regression.py``, ``bench_defaults_classification.py`` and
``bench_defaults_uci.py`` take the same choice of families, budgets, device
and threads.
"""

import ast

import torch
from threadpoolctl import threadpool_limits

from sklearn_quinn._cli.methods import METHODS


def add_defaults_options(parser, threads_help="torch and BLAS threads (default: 1)"):
    """Add ``--methods``, ``--quick``, ``--max-epochs``, ``--device`` and ``--threads`` to ``parser``."""
    parser.add_argument("--methods", nargs="+", choices=list(METHODS), default=list(METHODS))
    parser.add_argument("--quick", action="store_true", help="compare --quick's budgets, not the defaults")
    parser.add_argument("--max-epochs", type=int, help="override every method's training epochs (smoke runs)")
    parser.add_argument("--device", default="cpu", help="torch device of the networks' fits: cpu, cuda, ...")
    parser.add_argument("--threads", type=int, default=1, help=threads_help)


def pin_threads(threads):
    """Limit torch and the BLAS libraries to ``threads`` threads."""
    torch.set_num_threads(threads)
    threadpool_limits(threads)


def parameter(text):
    """``NAME=VALUE`` of ``--set``, the value a Python literal where it is one (``1.0``, ``(50,)``), else a string."""
    name, _, value = text.partition("=")
    try:
        return name, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return name, value


def set_arguments(pairs):
    """``--set``'s ``(NAME, VALUE)`` pairs back as ``NAME=VALUE`` texts that :func:`parameter` reads again."""
    return [f"{name}={value!r}" for name, value in pairs]


def add_set_option(parser):
    """Add ``--set NAME=VALUE ...``: estimator parameters of the families away from their defaults."""
    parser.add_argument("--set", nargs="+", type=parameter, default=[], metavar="NAME=VALUE",
                        help="estimator parameters of the families, away from the defaults (e.g. cov_scale=1.0)")
