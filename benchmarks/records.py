"""Results as JSON lines: appended as each task (a fit, or a split of fits) ends, read back to resume a run.

``bench_defaults_uci.py``, ``bench_heteroscedastic_uci.py``,
``bench_defaults_classification.py`` and ``bench_scale.py`` keep their records
this way: a run skips what its file already holds under the same settings.
:func:`side_by_side` runs fits in fresh processes at once and reads the record
each prints.
"""

import json
import subprocess
import sys
from pathlib import Path

from joblib import Parallel


def read_lines(path):
    """The records of the JSON-lines file ``path`` (none when it does not exist)."""
    if not Path(path).is_file():
        return []
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def matches(record, run_settings, unrecorded=None):
    """Whether ``record`` was run with ``run_settings`` (a setting the record
    predates takes its value of the time, from ``unrecorded``). Settings
    compare as JSON stores them (a tuple as a list)."""
    unrecorded = unrecorded or {}
    return all(record.get(key, unrecorded.get(key)) == json.loads(json.dumps(value))
               for key, value in run_settings.items())


def append_as_they_end(path, tasks, n_jobs, describe):
    """Run the joblib ``tasks`` (each returns a list of records) in ``n_jobs``
    processes, appending every record to ``path`` as its task ends and printing
    ``describe(record)`` to stderr."""
    with open(path, "a") as file:
        for records in Parallel(n_jobs=n_jobs, return_as="generator_unordered")(tasks):
            for record in records:
                file.write(json.dumps(record) + "\n")
                file.flush()
                print(describe(record), file=sys.stderr, flush=True)


def side_by_side(commands, env=None):
    """Start every command of ``commands`` (name -> argv) at once, each in its own process
    (environment ``env``), and return name -> the JSON record it printed as its last line."""
    runs = {name: subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env)
            for name, argv in commands.items()}
    return {name: json.loads(run.communicate()[0].strip().splitlines()[-1]) for name, run in runs.items()}
