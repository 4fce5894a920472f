"""matplotlib helpers shared by the Display classes.

matplotlib is imported here only when a Display draws, so the package imports
without it.
"""

from ._pipelines import final_step


def pyplot(caller):
    """``matplotlib.pyplot``, or an ImportError saying how to install it.

    Parameters
    ----------
    caller : str
        What needs matplotlib (``'ReliabilityDisplay.plot'``), named in the error.

    Returns
    -------
    module
        ``matplotlib.pyplot``.
    """
    try:
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise ImportError(
            f"{caller} requires matplotlib; install it with `pip install matplotlib` "
            "(or `pip install 'sklearn-quinn[plot]'`)."
        ) from error
    return plt


def axes_or_new(caller, ax):
    """``ax``, or the axes of a new figure when ``ax`` is None."""
    plt = pyplot(caller)
    if ax is None:
        _, ax = plt.subplots()
    return ax


_DIAGONAL = "perfectly calibrated"


def plot_diagonal(ax):
    """The line of perfect calibration on the unit square, which the axes are set to; once, however
    many curves the axes overlay."""
    if not any(line.get_label() == _DIAGONAL for line in ax.get_lines()):
        ax.plot([0, 1], [0, 1], linestyle=":", color="k", label=_DIAGONAL)
    ax.set(xlim=(0, 1), ylim=(0, 1), aspect="equal")


def estimator_name(estimator):
    """A fitted model's name for a legend, as scikit-learn's Displays give it: its class's, or a
    ``Pipeline``'s last step's."""
    return type(final_step(estimator)).__name__
