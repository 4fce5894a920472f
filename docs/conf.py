"""Sphinx configuration: numpydoc API pages from the docstrings."""

project = "sklearn_quinn"
author = "sklearn_quinn developers"
extensions = ["sphinx.ext.autodoc", "sphinx.ext.autosummary", "numpydoc"]
autosummary_generate = True
numpydoc_show_class_members = False
exclude_patterns = ["_build"]
html_theme = "alabaster"
