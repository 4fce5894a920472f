"""Pickling that survives a change of machine: a model fitted on a GPU loads on a CPU.

Python's pickle rebuilds a CUDA tensor on CUDA, and fails where there is none,
before the estimator could say where its tensors should go. So a fitted
estimator pickles its state as one ``torch.save`` blob (written by
cloudpickle) beside the device it was fitted on; unpickling loads the blob
onto that device when this machine has it, and onto the CPU otherwise (with a
warning, since a refit with the same ``device`` would fail here).

A pickle also names the version of sklearn_quinn that wrote it, and another
version warns as it loads it (:class:`~sklearn_quinn.exceptions.InconsistentVersionWarning`),
as scikit-learn does for its own estimators: the fitted state is one
version's, and another may read it otherwise.
"""

import io

import cloudpickle
import torch

from ._warnings import warn
from .exceptions import InconsistentVersionWarning

_STATE = "_torch_state"
_DEVICE = "_fitted_device"
_VERSION = "_sklearn_quinn_version"


def device_available(device):
    """Whether this machine can hold tensors on ``device`` (a torch.device)."""
    if device.type == "cpu":
        return True
    if device.type == "cuda":
        return torch.cuda.is_available() and (device.index or 0) < torch.cuda.device_count()
    try:
        torch.empty(0, device=device)
    except (RuntimeError, AssertionError):
        return False
    return True


def resolve_device(device):
    """The torch.device of a ``device`` parameter: ``'auto'`` is CUDA where there is one, else the CPU.

    Raises ValueError for a name torch does not know, 'meta', or a device this machine lacks.
    """
    if isinstance(device, str) and device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"device={device!r} is not a torch device: {error}") from None
    if resolved.type == "meta":
        raise ValueError(f"device={device!r} holds tensors without values, which no fit can train: use 'cpu' or "
                         "an accelerator.")
    if not device_available(resolved):
        raise ValueError(f"device={device!r} was requested but this machine has no such device.")
    return resolved


def _package_version():
    from . import __version__  # read when pickling: the package has finished importing

    return __version__


class DevicePortablePickle:
    """Mixin: a fitted estimator unpickles on the CPU when its fitting device is absent.

    Needs a ``_device`` attribute (a torch.device) once fitted; an unfitted
    estimator pickles as usual. Fitted or not, the pickle names the package's
    version, and another version warns as it unpickles it.
    """

    def __getstate__(self):
        state = super().__getstate__()
        if "_device" in state:
            blob = io.BytesIO()
            # Protocol 4, not torch.save's default 2, which writes a NumPy array's bytes as a latin-1
            # string, half again as long (the MCMC chains_, the draws' diagnostics). cloudpickle, not
            # torch.save's pickle, whatever pickler holds the estimator: a user's module class or
            # callback defined in a script or a notebook (or a lambda) is written by value, so that a
            # fitted estimator reaches joblib's worker processes (n_jobs) and loads where that script
            # is not importable; what is importable is still written by reference.
            torch.save(self._state_to_save(state), blob, pickle_module=cloudpickle, pickle_protocol=4)
            state = {_STATE: blob.getvalue(), _DEVICE: str(state["_device"])}
        return {**state, _VERSION: _package_version()}

    def _state_to_save(self, state):
        """The fitted state as pickled: a family whose state holds one thing twice leaves a copy out."""
        return state

    def _state_loaded(self, state):
        """The fitted state from what :meth:`_state_to_save` gave, on the device it loads on."""
        return state

    def __setstate__(self, state):
        state = dict(state)
        # Before the blob loads: where another version's state fails to load, the warning says why.
        original, current = state.pop(_VERSION, None), _package_version()
        if original != current:
            warn(InconsistentVersionWarning(estimator_name=type(self).__name__, current_version=current,
                                            original_version=original))
        if _STATE in state:
            device = torch.device(state[_DEVICE])
            available = device_available(device)
            # weights_only=False: the blob is this object's own pickled state,
            # trusted exactly as far as the pickle that holds it.
            state = torch.load(
                io.BytesIO(state[_STATE]), map_location=None if available else "cpu", weights_only=False
            )
            if not available:
                warn(
                    f"This {type(self).__name__} was fitted on {device}, which this machine does not "
                    "have; its tensors are loaded on the CPU, where it predicts as fitted. "
                    "Refitting needs set_params(device='cpu') or device='auto'."
                )
                state["_device"] = torch.device("cpu")
            state = self._state_loaded(state)
        super().__setstate__(state)
