"""``prior_precision='gridsearch'``: the held-out rows, and the grid search on them."""

import warnings

from sklearn.model_selection import train_test_split

from .._scale_search import search_scale


class GridsearchPriorMixin:
    """Shared by the Laplace regressor and classifier; each says how its internal
    targets read in the units the user gave (``_user_targets``; the inputs: ``_user_inputs``)."""

    def _hold_out(self, X, Y, stratify=None):
        """Split off ``validation_fraction`` of the rows when the grid search scores a
        held-out objective. Returns the training rows and the held-out ``(X, Y)`` (or None)."""
        if self.prior_precision != "gridsearch" or self.calibration_objective == "marginal_log_likelihood":
            return X, Y, None
        try:
            X, X_val, Y, Y_val = train_test_split(
                X, Y, test_size=self.validation_fraction, random_state=self._split_seed, stratify=stratify
            )
        except ValueError as error:  # a stratified split with fewer rows on a side than classes
            raise ValueError(f"validation_fraction={self.validation_fraction!r} of {len(X)} rows cannot be held out "
                             f"for prior_precision='gridsearch': {error}") from error
        return X, Y, (X_val, Y_val)

    def _search_prior_precision(self, held_out):
        """Set the prior precision that ``calibration_objective`` picks on the default grid (the
        held-out rows read back in the units the user gave, as the search reads its rows)."""
        X_val, y_val = (None, None) if held_out is None else (self._user_inputs(held_out[0]),
                                                              self._user_targets(held_out[1]))
        with warnings.catch_warnings():
            # The held-out rows are the user's table's, validated at fit, in an array: the search's
            # validation of them, as predict's, would warn that they lack the table's column names.
            warnings.filterwarnings("ignore", message="X does not have valid feature names", category=UserWarning)
            search_scale(self, X_val, y_val, param="prior_precision", grid=None,
                         objective=self.calibration_objective)
