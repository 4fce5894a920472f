"""cov_scale='loo': closed-form leave-one-out cavities of the linearised Laplace, for the softmax."""

import numpy as np
import pytest
import torch
from sklearn.datasets import make_classification
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_quinn import LaplaceClassifier, LaplaceRegressor, metrics
from sklearn_quinn._core.likelihoods import CategoricalLikelihood
from sklearn_quinn.calibration import calibrate
from sklearn_quinn.laplace._base import LOO_COV_SCALES
from sklearn_quinn.laplace._loo import site_cavities


def test_cavities_equal_removing_the_row_in_weight_space():
    """Brute force on random Jacobians of a softmax: the posterior precision
    ``s (sum_i J_i^T Lambda_i J_i + delta I)`` without row i's term, and the
    mean moved by the row's gradient site, give the cavity ``J_i theta_-i``,
    ``J_i P_-i^-1 J_i^T``: the cavity at ``s = 1``, its covariance divided by ``s``."""
    rng = np.random.RandomState(0)
    n_rows, n_classes, n_weights, delta, scale = 6, 3, 9, 0.7, 2.5
    jacobians = torch.as_tensor(rng.randn(n_rows, n_classes, n_weights))
    mean = torch.as_tensor(3 * rng.randn(n_rows, n_classes))
    labels = torch.as_tensor(rng.randint(n_classes, size=n_rows))
    p = torch.softmax(mean, -1)
    site_precision = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)
    site_gradient = torch.nn.functional.one_hot(labels, n_classes).double() - p  # of log p(y_i | f)
    precision = scale * (torch.einsum("nck,ncd,ndl->kl", jacobians, site_precision, jacobians)
                         + delta * torch.eye(n_weights, dtype=torch.float64))
    covariance = jacobians @ torch.linalg.inv(precision) @ jacobians.mT
    likelihood = CategoricalLikelihood()
    gradient = likelihood.output_gradient(mean, labels[:, None].double())
    cavity_mean, cavity_covariance = site_cavities(mean, scale * covariance, gradient, likelihood.output_hessian(mean))
    cavity_covariance = cavity_covariance / scale
    for i in range(n_rows):
        without = precision - scale * jacobians[i].T @ site_precision[i] @ jacobians[i]
        shift = -scale * torch.linalg.solve(without, jacobians[i].T @ site_gradient[i])
        torch.testing.assert_close(cavity_mean[i], mean[i] + jacobians[i] @ shift)
        torch.testing.assert_close(cavity_covariance[i], jacobians[i] @ torch.linalg.solve(without, jacobians[i].T))


def test_a_row_whose_site_holds_all_its_precision_or_more_has_an_improper_cavity():
    """Sites ``Lambda_i`` against output covariances ``V_i = diag(2, 1)``: ``V_1 Lambda_1 = diag(1, 0.3)``
    leaves no cavity (``I - V Lambda`` singular), ``V_2 Lambda_2 = diag(1.2, 0.3)`` a negative variance;
    those rows are NaN, and row 0's cavity is ``diag(2 / 0.7, 1 / 0.7)``. The solve had raised for the
    whole batch at the first, and passed the second on."""
    covariance = torch.diag(torch.tensor([2.0, 1.0], dtype=torch.float64)).expand(3, 2, 2)
    hessian = torch.diag_embed(torch.tensor([[0.15, 0.3], [0.5, 0.3], [0.6, 0.3]], dtype=torch.float64))
    mean, gradient = torch.zeros(3, 2, dtype=torch.float64), torch.ones(3, 2, dtype=torch.float64)
    cavity_mean, cavity_covariance = site_cavities(mean, covariance, gradient, hessian)
    assert torch.isnan(cavity_covariance[1:]).all() and torch.isnan(cavity_mean[1:]).all()
    torch.testing.assert_close(cavity_covariance[0], torch.diag(torch.tensor([2 / 0.7, 1 / 0.7], dtype=torch.float64)))


def test_loo_at_weights_that_are_no_mode_falls_back_to_the_evidences_posterior():
    """A training at lr=300 ends far from a mode (weights in the thousands, a posterior covariance whose
    eigenvalues span 1e-5 to 6e7), where some rows' cavities are improper in floating point:
    ``cov_scale_`` is 1, with a warning, where the fit had ended in torch's LinAlgError."""
    rng = np.random.RandomState(0)
    X = rng.randn(400, 3)
    y = ((X[:, 0] + np.sin(X[:, 1]) + 0.3 * rng.randn(400)) > 0).astype(int)
    clf = LaplaceClassifier(lr=300.0, max_epochs=100, random_state=0)
    with pytest.warns(UserWarning, match="leave-one-out cavities are improper"):
        clf.fit(X[:200], y[:200])
    assert clf.cov_scale_ == 1.0
    assert np.all(np.isfinite(clf.predict_proba(X)))


@pytest.mark.slow
def test_loo_tempers_clean_labels_and_keeps_the_spread_of_noisy_ones():
    """With clean labels the evidence's posterior (s = 1) is too wide and 'loo'
    picks an s of at least 10; with 20% of the labels flipped it keeps s near 1. Either
    way its test NLL is within 0.02 of the better of s = 1 and s = 1000: about three
    standard errors of a paired difference of NLL over these 400 test rows (with the
    flipped labels, s = 1.78 against s = 1: 0.011 +- 0.007), while the worse of the
    two is 0.05 (clean) and 0.07 (flipped) away."""
    for flip, picks_large in [(0.0, True), (0.2, False)]:
        X, y = make_classification(600, 8, n_informative=4, flip_y=flip, random_state=0)
        nll = {}
        for scale in ["loo", 1.0, 1000.0]:
            clf = LaplaceClassifier(hidden_layer_sizes=(20,), max_epochs=300, cov_scale=scale, random_state=0)
            clf.fit(X[:200], y[:200])
            nll[scale] = metrics.categorical_nll(y[200:], clf.predict_proba(X[200:]))
            if scale == "loo":
                chosen = clf.cov_scale_
                assert chosen == LOO_COV_SCALES[clf.loo_scores_.argmin()]
        assert (chosen >= 10) == picks_large
        assert nll["loo"] <= min(nll[1.0], nll[1000.0]) + 0.02


def test_loo_is_a_classifier_option():
    X, y = make_classification(40, 3, n_informative=2, n_redundant=0, random_state=0)
    with pytest.raises(InvalidParameterError, match="cov_scale"):
        LaplaceRegressor(cov_scale="loo").fit(X, y.astype(float))
    with pytest.raises(InvalidParameterError, match="cov_scale"):
        LaplaceClassifier(cov_scale="leave-one-out").fit(X, y)


def test_a_refit_keeps_no_attribute_of_the_fit_before():
    """``loo_scores_`` belongs to a fit with ``cov_scale='loo'``: a refit with a fixed scale drops it,
    as a fresh estimator would lack it."""
    X, y = make_classification(40, 3, n_informative=2, n_redundant=0, random_state=0)
    clf = LaplaceClassifier(hidden_layer_sizes=(4,), max_epochs=5, cov_scale="loo", random_state=0).fit(X, y)
    assert hasattr(clf, "loo_scores_")
    assert not hasattr(clf.set_params(cov_scale=2.0).fit(X, y), "loo_scores_")
    X_bad = X.copy()
    X_bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        clf.fit(X_bad, y)
    assert clf.predict_proba(X).shape == (40, 2)  # a refit on bad data leaves the fit before whole


def test_loo_and_cov_scale_calibration_need_no_eigen_decomposition():
    """The fit's one prior precision and noise need only the posterior's Cholesky factor, and so
    does a search over cov_scale: over a few thousand weights the full curvature's eigen
    decomposition costs many factorisations, and it waits for what asks for another prior
    precision, the evidence."""
    X, y = make_classification(160, 6, n_informative=4, n_classes=3, random_state=0)
    clf = LaplaceClassifier(max_epochs=50, random_state=0).fit(X[:120], y[:120])
    assert clf.hessian_structure_ == "full"
    calibrate(clf, X[120:], y[120:], param="cov_scale", grid=np.logspace(-1, 1, 5))
    assert "_full_decomposition" not in vars(clf._laplace)
    evidence = clf.log_marginal_likelihood()
    assert np.isfinite(evidence) and "_full_decomposition" in vars(clf._laplace)


@pytest.mark.parametrize("params", [dict(hessian_structure="kron"), dict(hessian_structure="diag"),
                                    dict(hessian_structure="lowrank", max_rank=20), dict(curvature="hessian")])
def test_loo_needs_each_rows_term_whole_in_the_posterior(params):
    """Kronecker factors, a low rank and a diagonal do not hold each row's term of the curvature,
    and the exact Hessian has none in the outputs: the exact site removed from them left cavities
    that were not positive definite and leave-one-out NLLs of several nats, which chose s = 1 by
    accident. 'loo' keeps s = 1 there, says so, and keeps no scores."""
    X, y = make_classification(60, 3, n_informative=2, n_redundant=0, random_state=0)
    clf = LaplaceClassifier(hidden_layer_sizes=(4,), max_epochs=20, random_state=0, **params)
    with pytest.warns(UserWarning, match="cov_scale='loo' leaves each training row's term out"):
        clf.fit(X, y)
    assert clf.cov_scale_ == 1.0 and not hasattr(clf, "loo_scores_")


def test_where_auto_chose_the_factors_loo_says_why_without_a_warning(monkeypatch):
    """A default classifier past the full curvature (5,000 weights, patched to 10) takes the
    Kronecker factors: it keeps s = 1 and its hessian_structure_reason_ says why, where a
    warning at every fit would name a remedy that 'auto' has just ruled out."""
    import warnings

    from sklearn_quinn._core import curvature

    monkeypatch.setattr(curvature, "AUTO_MAX_FULL_PARAMS", 10)
    X, y = make_classification(60, 3, n_informative=2, n_redundant=0, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clf = LaplaceClassifier(hidden_layer_sizes=(4,), max_epochs=20, random_state=0).fit(X, y)
    assert clf.hessian_structure_ == "kron" and clf.cov_scale_ == 1.0
    assert "cov_scale='loo' needs the full structure" in clf.hessian_structure_reason_

