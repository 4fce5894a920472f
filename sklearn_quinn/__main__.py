"""``python -m sklearn_quinn``: the ``sklearn-quinn`` command line."""

import sys

from ._cli.main import main

sys.exit(main())
