"""Quick start: a Laplace-approximated network on scikit-learn's diabetes data.

Fits ``LaplaceRegressor`` in a pipeline with input scaling, then prints the
test RMSE, the mean negative log-likelihood of the predictive distribution and
the coverage of its central 95% intervals.
"""

import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_quinn import LaplaceRegressor
from sklearn_quinn.metrics import gaussian_nll, interval_coverage

X, y = load_diabetes(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2, random_state=0)

# Diabetes is small and noisy. At the defaults the prior precision of each
# layer's weights and biases (of each input column, for the layers that read the
# inputs) and the noise level are learned from the data, by maximising the
# Laplace evidence while the network trains.
model = make_pipeline(StandardScaler(), LaplaceRegressor(random_state=0))
model.fit(X_train, y_train)
y_pred, y_std = model.predict(X_test, return_std=True)

print(f"LaplaceRegressor on diabetes ({len(X_train)} train / {len(X_test)} test rows)")
print(f"  test RMSE          {np.sqrt(np.mean((y_test - y_pred) ** 2)):8.3f}")
print(f"  test NLL           {gaussian_nll(y_test, y_pred, y_std):8.3f}")
print(f"  95% coverage       {interval_coverage(y_test, y_pred, y_std, level=0.95):8.3f}")
print("  learned prior precisions", {name: round(value, 2) for name, value in model[-1].prior_precisions_.items()})
