"""Every gallery example runs, with its quick settings.

The scripts in ``examples/gallery/`` read the environment variable
``SKLEARN_QUINN_QUICK``: set to ``1`` they train for fewer epochs and draw fewer
samples through the same code, which is how the documentation build runs them
too. Each runs here as ``__main__`` under matplotlib's Agg backend, from a
temporary working directory (an example must write nothing into the
repository), with one torch thread (two threads are several times slower for
these small networks whenever anything else runs on a two-core machine).
"""

import ast
import runpy
from pathlib import Path

import pytest

GALLERY = Path(__file__).resolve().parents[1] / "examples" / "gallery"
SCRIPTS = sorted(GALLERY.glob("plot_*.py"))

#: Optional packages an example imports beyond the package's own dependencies.
#: They are in the ``test`` extra, so CI runs these examples; a local
#: environment without them skips the example instead of failing.
OPTIONAL_IMPORTS = {"plot_conformal_mapie.py": ["mapie"]}


def test_gallery_is_found():
    assert GALLERY.is_dir()
    assert len(SCRIPTS) >= 4, [script.name for script in SCRIPTS]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.stem)
def test_example_has_gallery_header_and_quick_mode(script):
    source = script.read_text(encoding="utf-8")
    docstring = ast.get_docstring(ast.parse(source), clean=False)
    assert docstring, f"{script.name} needs a sphinx-gallery docstring"
    lines = docstring.strip("\n").splitlines()
    # sphinx-gallery's header: a title over- and underlined with '=', at
    # least as long as the title (docutils warns otherwise, and the docs
    # build treats warnings as errors).
    over, title, under = lines[:3]
    assert set(over) == {"="} and set(under) == {"="}, lines[:3]
    assert len(over) >= len(title) and len(under) >= len(title), lines[:3]
    assert "SKLEARN_QUINN_QUICK" in source, f"{script.name} has no quick mode"


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.stem)
def test_example_runs(script, monkeypatch, tmp_path):
    for module in OPTIONAL_IMPORTS.get(script.name, []):
        pytest.importorskip(module)
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import torch

    monkeypatch.setenv("SKLEARN_QUINN_QUICK", "1")
    monkeypatch.chdir(tmp_path)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        namespace = runpy.run_path(str(script), run_name="__main__")
        # Every example draws at least one figure.
        assert plt.get_fignums(), f"{script.name} drew no figure"
    finally:
        torch.set_num_threads(threads)
        plt.close("all")
    assert namespace["QUICK"] is True
    assert list(tmp_path.iterdir()) == [], "an example wrote files"
