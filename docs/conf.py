"""Sphinx configuration: numpydoc API pages from the docstrings, a sphinx-gallery of examples.

Build with ``sphinx-build -W -b html docs <out>`` (CI does, see ``.ci/run``).
The gallery scripts in ``examples/gallery/`` run during the build in their
quick mode (``SKLEARN_QUINN_QUICK=1``: fewer epochs, draws and grid points,
the same code), so the whole build takes about a minute on two cores; set
``SKLEARN_QUINN_QUICK=0`` in the environment to build the gallery with the
full settings instead.
"""

import os
import re
import warnings

# Before anything imports torch or the examples: small settings for the
# gallery, and a non-interactive matplotlib backend.
os.environ.setdefault("SKLEARN_QUINN_QUICK", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

import torch

import sklearn_quinn

# The gallery examples run inside this process. Their small networks are
# several times slower on two torch threads than on one whenever anything else
# runs on a two-core machine (see benchmarks/README.md).
torch.set_num_threads(1)

project = "sklearn_quinn"
author = "sklearn_quinn developers"
copyright = "sklearn_quinn developers"
version = release = sklearn_quinn.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

autosummary_generate = True
autodoc_default_options = {"members": False}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
# The docstrings' "See Also" entries name classes of this package and of
# scikit-learn; without intersphinx (the build needs no network) they are
# rendered as text, which is what ``numpydoc_xref_param_type=False`` keeps.
numpydoc_xref_param_type = False

templates_path = ["_templates"]
exclude_patterns = ["_build", "generated/gallery/*.ipynb", "generated/gallery/*.py"]
html_theme = "alabaster"
html_static_path = []

sphinx_gallery_conf = {
    # The gallery lives beside the other runnable examples; its rendered pages
    # go under docs/generated/ (ignored by git, like the API pages).
    "examples_dirs": os.path.join("..", "examples", "gallery"),
    "gallery_dirs": os.path.join("generated", "gallery"),
    "filename_pattern": r"/plot_",
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    # No per-example timing page written into docs/ itself.
    "write_computation_times": False,
    "remove_config_comments": True,
    # The examples set their own seeds; don't let one example's figures leak
    # into the next.
    "reset_modules": ("matplotlib",),
    "capture_repr": ("_repr_html_", "__repr__"),
    "min_reported_time": 1,
    # Two examples at a time, one process each (joblib gives each one torch thread
    # of the two cores): the gallery is most of the build's time.
    "parallel": 2,
}

# Noise from third-party code running inside the gallery examples must not
# fail a ``-W`` build (sphinx-gallery reports an example's own warnings in its
# output; they are not Sphinx warnings).
warnings.filterwarnings("ignore", message="Matplotlib is currently using agg", category=UserWarning)


_CONTINUATION = re.compile(r"\\\s*$")


def _join_continued_lines(app, what, name, obj, options, lines):
    r"""Join scikit-learn style ``\`` continuations of long parameter lines.

    Several docstrings list many parameters (or a long set of options) on one
    numpydoc parameter line, continued with a backslash at the end of the line
    and the rest written from column 0 (``hidden_layer_sizes, ..., \\`` then
    ``n_chains, ...``). Python's ``inspect.cleandoc`` then finds a margin of 0
    and leaves the whole docstring indented, which numpydoc cannot parse. Here
    the continued lines are joined back into one and the docstring is dedented
    again, before numpydoc sees it (this handler runs at a higher priority).
    """
    if not any(_CONTINUATION.search(line) for line in lines):
        return
    joined = []
    pending = None
    for line in lines:
        if pending is not None:
            line = pending + line.lstrip()
            pending = None
        if _CONTINUATION.search(line):
            pending = _CONTINUATION.sub("", line).rstrip() + " "
            continue
        joined.append(line)
    if pending is not None:
        joined.append(pending.rstrip())
    body = [line for line in joined[1:] if line.strip()]
    margin = min((len(line) - len(line.lstrip()) for line in body), default=0)
    lines[:] = joined[:1] + [line[margin:] if line.strip() else "" for line in joined[1:]]


def setup(app):
    # numpydoc mangles docstrings at the default priority (500); join first.
    app.connect("autodoc-process-docstring", _join_continued_lines, priority=400)
