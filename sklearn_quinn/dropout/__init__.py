"""MC dropout: dropout masks on the weights as an approximate posterior."""

from ._dropout import MCDropoutClassifier, MCDropoutRegressor

__all__ = ["MCDropoutClassifier", "MCDropoutRegressor"]
