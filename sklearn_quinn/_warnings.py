"""Warnings that name the line of the caller's code."""

import os
import sys
import warnings

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn(message, category=UserWarning):
    """``warnings.warn`` at the first frame outside the package: the line of the code that called
    into it (the user's, or scikit-learn's under a search), however deep in the package the
    warning arises, as pandas' ``find_stack_level`` does; a count of frames written at each call
    goes stale whenever the calls between move."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level + 1)
