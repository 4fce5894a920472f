"""The ``sklearn-quinn`` command line: ``compare`` and ``benchmark uci``.

Private: the public face is the console script (``sklearn-quinn --help``,
also ``python -m sklearn_quinn``). One module per job: ``main`` parses the
arguments and turns bad input into a one-line error, ``methods`` is the
registry of estimators, ``references`` the scikit-learn models set beside
them, ``data`` reads a table, ``compare`` and ``report`` fit and write the
comparison, ``uci_protocol`` and ``benchmark`` run the UCI regression
benchmark.
"""
