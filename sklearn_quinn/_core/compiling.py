"""``torch.compile`` with a fallback to eager execution when compiling fails."""

import warnings

import torch


def compiled_or_eager(function):
    """``function`` compiled by ``torch.compile`` on its first call, or eager if that fails.

    Compilation needs a working backend (on a CPU, a C++ compiler); when it
    fails (``torch._dynamo`` raises), a ``UserWarning`` names the error and
    every call, this one included, runs ``function`` eagerly. Shapes, dtypes
    and Python constants of the first call are specialised on; a later call
    that differs recompiles (with dynamic shapes from the second shape on).
    """
    fast = torch.compile(function)
    failed = False

    def call(*args, **kwargs):
        nonlocal failed
        if not failed:
            try:
                return fast(*args, **kwargs)
            except torch._dynamo.exc.TorchDynamoException as error:
                failed = True
                warnings.warn(
                    f"torch.compile failed ({type(error).__name__}: {str(error).splitlines()[0]}); "
                    f"running {function.__name__} eagerly.",
                    UserWarning,
                    stacklevel=2,
                )
        return function(*args, **kwargs)

    return call
