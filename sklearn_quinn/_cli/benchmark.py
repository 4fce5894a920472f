"""``sklearn-quinn benchmark uci``: the UCI regression benchmark, resumable.

Each finished split is written at once as ``OUT/<data set>/<method>/split_<i>.json``;
a run skips the splits whose file exists, so an interrupted run continues
where it stopped, and refuses a folder whose files, of any data set or
method, were fitted with another ``--max-epochs`` or ``--device`` (their
figures would join this run's table as if they were its own). The Markdown
table (``OUT/results.md``) is made from every split file in ``OUT``, so runs
with different ``--splits`` per data set add up to one table.
"""

import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
from joblib import Parallel, delayed

from ..datasets import UCI_DATASETS, load_uci_reference, uci_n_splits
from .methods import METHODS, check_methods, make_estimator
from .uci_protocol import decimals, fmt, run_split

DATA_DIR_VARIABLE = "SKLEARN_QUINN_UCI_DIR"
DEFAULT_DATASETS = ("concrete", "energy", "yacht", "boston", "wine", "power", "kin8nm", "naval")


def data_dir_or_error(data_dir):
    """``--data-dir``, else ``$SKLEARN_QUINN_UCI_DIR``, else a ValueError saying so."""
    data_dir = data_dir or os.environ.get(DATA_DIR_VARIABLE)
    if not data_dir:
        raise ValueError(f"no UCI data directory: pass --data-dir DIR or set {DATA_DIR_VARIABLE}")
    if not Path(data_dir).is_dir():
        raise ValueError(f"UCI data directory {data_dir} does not exist")
    return Path(data_dir)


def n_hidden(data_dir, name):
    """Hidden units of the protocol for ``name``: its ``n_hidden.txt`` (50, protein 100), else 50."""
    path = Path(data_dir) / UCI_DATASETS[name] / "n_hidden.txt"
    return int(np.loadtxt(path)) if path.is_file() else 50


def split_path(out, name, method, split):
    return Path(out) / name / method / f"split_{split:02d}.json"


def run_benchmark(data_dir, datasets, methods, n_splits, out, *, max_epochs=None, device="cpu", n_jobs=1,
                  log=sys.stderr):
    """Fit every unfinished (data set, method, split), write its JSON, then ``out/results.md``.

    Every estimator fits on the torch ``device``. ``n_jobs`` splits run at
    once in separate processes (joblib), each with the calling process's
    number of torch threads; a line per finished split goes to ``log`` as it ends.

    Returns
    -------
    table : str
        The Markdown table of every split file in ``out``.
    fitted, skipped : int
        Splits fitted now, and splits skipped because their file existed.
    """
    data_dir = data_dir_or_error(data_dir)
    unknown = [name for name in datasets if name not in UCI_DATASETS]
    if unknown:
        raise ValueError(f"unknown UCI data set {', '.join(map(repr, unknown))}; "
                         f"expected some of {', '.join(UCI_DATASETS)}")
    repeated = sorted({name for name in datasets if datasets.count(name) > 1})
    if repeated:  # each split would be fitted twice, into one file
        raise ValueError(f"data set {', '.join(map(repr, repeated))} listed more than once")
    check_methods(methods)
    load_uci_reference(data_dir)  # the table's published figures: refused now, not after every fit
    if Path(out).exists() and not Path(out).is_dir():
        raise ValueError(f"--out {out} is a file, not a folder")
    # The table reads every split file in out: each must have been fitted as this run would fit its method.
    for path in sorted(Path(out).glob("*/*/split_*.json")):
        if path.parent.name in METHODS:
            check_settings(path, settings(make_estimator(path.parent.name, False, quick=False, max_epochs=max_epochs,
                                                         device=device)))
    tasks, skipped = [], 0
    for name in datasets:
        splits = range(min(n_splits, uci_n_splits(data_dir, name)))
        for method in methods:
            estimator = make_estimator(method, False, quick=False, max_epochs=max_epochs, device=device,
                                       hidden_layer_sizes=(n_hidden(data_dir, name),))
            for split in splits:
                if split_path(out, name, method, split).is_file():
                    skipped += 1
                else:
                    tasks.append(delayed(_fit_split)(estimator, data_dir, name, method, split, out,
                                                     torch.get_num_threads()))
    for line in Parallel(n_jobs=n_jobs, return_as="generator_unordered")(tasks):
        print(line, file=log, flush=True)
    Path(out).mkdir(parents=True, exist_ok=True)  # where every data set has fewer splits than asked, none made it
    table = markdown_table(read_results(out), data_dir)
    (Path(out) / "results.md").write_text(table)
    return table, len(tasks), skipped


def settings(estimator):
    """The settings of a run that its split files record and a resumed run must share."""
    params = estimator.get_params()
    return {"max_epochs": params.get("max_epochs"), "device": params["device"]}


def check_settings(path, asked):
    """A ValueError where the split file ``path`` was fitted with other settings than ``asked``
    (a file written before the device was recorded was fitted on the CPU)."""
    result = json.loads(path.read_text())
    stored = {name: result.get(name, "cpu" if name == "device" else None) for name in asked}
    if stored != asked:
        def listed(values):
            return ", ".join(f"{name}={value!r}" for name, value in values.items())

        raise ValueError(f"{path} was fitted with {listed(stored)}, and this run asks {listed(asked)}; "
                         f"give another --out, or remove {path.parent.parent.parent}")


def _fit_split(estimator, data_dir, name, method, split, out, threads):
    """Fit one split, write its JSON atomically (complete or absent) and return a line saying how it went."""
    torch.set_num_threads(threads)
    result = run_split(estimator, data_dir, name, split)
    del result["estimator"]
    result.update(dataset=name, method=method, split=split, **settings(estimator), threads=threads,
                  finished=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    path = split_path(out, name, method, split)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps(result, indent=1))
    partial.replace(path)
    return f"{name} {method} split {split}: RMSE {result['rmse']:.3f}  LL {result['ll']:.3f}  {result['seconds']:.1f} s"


def read_results(out):
    """Every split file under ``out``, as ``{(data set, method): [result, ...]}`` in split order."""
    results = {}
    for path in sorted(Path(out).glob("*/*/split_*.json")):
        result = json.loads(path.read_text())
        results.setdefault((result["dataset"], result["method"]), []).append(result)
    return results


def _label(method):
    return METHODS[method].label if method in METHODS else method


def markdown_table(results, data_dir):
    """Mean ± s.e. test RMSE and log-likelihood per (data set, method), beside the published ones."""
    reference = load_uci_reference(data_dir)
    published = list(next(iter(reference["log_likelihood"].values())))
    order = {name: i for i, name in enumerate(UCI_DATASETS)}
    methods = {name: i for i, name in enumerate(METHODS)}
    keys = sorted(results, key=lambda key: (order.get(key[0], len(order)), methods.get(key[1], len(methods)), key))

    def published_cells(metric, name):  # as the data README prints them, two decimals
        row = reference[metric].get(name, {})
        return " | ".join(f"{row[column][0]:.2f} ± {row[column][1]:.2f}" if column in row else "n/a"
                          for column in published)

    lines = []
    for metric, title, key in (("rmse", "Test RMSE (lower is better)", "rmse"),
                               ("log_likelihood", "Test log-likelihood per point (higher is better)", "ll")):
        lines += [f"{title}. Ours: mean ± s.e. over the splits; then the published columns of the data README "
                  "(its Deep ensembles ± is a standard deviation over splits).", "",
                  f"| data set | method | splits | ours | {' | '.join(published)} |",
                  "|---" * (4 + len(published)) + "|"]
        for name, method in keys:
            values = [run[key] for run in results[(name, method)]]
            lines.append(f"| {name} | {_label(method)} | {len(values)} | "
                         f"{fmt(values, decimals(np.mean(values), 2))} | {published_cells(metric, name)} |")
        lines.append("")
    note = ("Seconds of fit and predict per split: wall, and CPU time of the process (the cost when other "
            "work shares the cores); wall seconds of all the splits.")
    lines += [note, "",
              "| data set | method | splits | wall s / split | CPU s / split | wall s, all splits |",
              "|---|---|---|---|---|---|"]
    for name, method in keys:
        runs = results[(name, method)]
        seconds = [run["seconds"] for run in runs]
        lines.append(f"| {name} | {_label(method)} | {len(runs)} | {np.mean(seconds):.1f} | "
                     f"{np.mean([run['cpu_seconds'] for run in runs]):.1f} | {np.sum(seconds):.0f} |")
    totals = {}
    for (name, _), runs in results.items():
        totals[name] = totals.get(name, 0.0) + sum(run["seconds"] for run in runs)
    lines += ["", "| data set | wall s, all methods and splits |", "|---|---|"]
    lines += [f"| {name} | {totals[name]:.0f} |" for name in sorted(totals, key=lambda n: order.get(n, len(order)))]
    return "\n".join(lines) + "\n"
