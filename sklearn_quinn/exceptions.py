"""Warnings a user may want to filter or catch by class."""


class InconsistentVersionWarning(UserWarning):
    """An estimator was unpickled by another version of sklearn_quinn than the one that pickled it.

    As scikit-learn's warning of the same name: a pickle holds the fitted
    state of one version's code, which another version may read otherwise
    (another attribute, another meaning of one), so its predictions may break
    or, worse, differ silently. Refit with this version where it matters.

    Parameters
    ----------
    estimator_name : str
        The class of the unpickled estimator.
    current_version : str
        This sklearn_quinn's version.
    original_version : str or None
        The version that pickled it; None for a pickle written before pickles
        named their version.

    Examples
    --------
    A pickle from this version loads without it; to refuse another version's:

    >>> import pickle, warnings
    >>> from sklearn_quinn import LaplaceRegressor
    >>> from sklearn_quinn.exceptions import InconsistentVersionWarning
    >>> blob = pickle.dumps(LaplaceRegressor())
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("error", InconsistentVersionWarning)
    ...     model = pickle.loads(blob)
    """

    def __init__(self, *, estimator_name, current_version, original_version):
        self.estimator_name = estimator_name
        self.current_version = current_version
        self.original_version = original_version

    def __str__(self):
        original = "an unnamed version" if self.original_version is None else f"version {self.original_version}"
        return (
            f"This {self.estimator_name} was pickled by sklearn_quinn {original} and is unpickled by version "
            f"{self.current_version}; its fitted state may be read otherwise than it was written, so its "
            "predictions may break or differ. Refit it with this version where that matters."
        )
