"""EvidenceSearch: ranking by the evidence, and Bayesian model averaging; the one-standard-error refit rule."""

import pickle

import numpy as np
import pytest
from sklearn.datasets import load_iris
from sklearn.linear_model import BayesianRidge, LogisticRegression, Ridge
from sklearn.metrics import accuracy_score, r2_score
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_quinn import DeepEnsembleRegressor, LaplaceRegressor, SMCClassifier, SMCRegressor
from sklearn_quinn.model_selection import EvidenceSearch, one_standard_error_rule


@pytest.fixture(scope="module")
def one_unit_data():
    """y from a network with one tanh hidden unit, noise 0.1."""
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, size=(80, 2))
    y = 1.5 * np.tanh(1.2 * X[:, 0] - 0.8 * X[:, 1] + 0.3) + 0.1 * rng.randn(80)
    return X, y


@pytest.fixture(scope="module")
def smc_search(one_unit_data):
    X, y = one_unit_data
    # Gentler tempering than the default target_ess=0.5: the one-unit network's posterior
    # is a narrow mode that larger increments let few particles miss (its log evidence was
    # then -22 to +34 by seed, against +43 where found). Since the input columns have their
    # own precisions (two more hyperparameters), 60 particles at 0.8 missed it on seed 0
    # (+23, against +35 to +42 on seeds 1-5); 100 at 0.9 found it on seeds 0-5 (+40 to +47).
    estimator = SMCRegressor(activation="tanh", n_particles=100, n_leapfrog=20, target_ess=0.9, random_state=0)
    return EvidenceSearch(estimator, {"hidden_layer_sizes": [(), (1,), (20,)]}).fit(X, y)


def test_ranks_the_generating_architecture_first(smc_search):
    """One hidden unit made the data: it wins, the linear model (which cannot
    bend) comes last, 20 units pay for their flexibility in between.
    (Measured log evidences: linear -48, one unit +43, twenty units +34, seeds 0-2.)"""
    results = smc_search.results_
    assert smc_search.best_params_ == {"hidden_layer_sizes": (1,)}
    assert results["rank"].tolist() == [3, 1, 2]
    assert results["probability"].sum() == pytest.approx(1.0)
    np.testing.assert_array_equal(results["log_evidence"], [e.log_evidence_ for e in smc_search.estimators_])
    assert list(results["param_hidden_layer_sizes"]) == [(), (1,), (20,)]


def test_regression_average_is_the_weighted_mixture(smc_search, one_unit_data):
    X, _ = one_unit_data
    probability = smc_search.results_["probability"]
    moments = [estimator.predict(X, return_std=True) for estimator in smc_search.estimators_]
    mean = sum(p * m for p, (m, _) in zip(probability, moments))
    second = sum(p * (s**2 + m**2) for p, (m, s) in zip(probability, moments))
    got_mean, got_std = smc_search.predict(X, return_std=True)
    np.testing.assert_allclose(got_mean, mean, rtol=1e-12)
    np.testing.assert_allclose(got_std, np.sqrt(second - mean**2), rtol=1e-10)
    np.testing.assert_allclose(smc_search.predict(X), mean, rtol=1e-12)


def test_classification_average_is_the_weighted_mixture():
    X, y = load_iris(return_X_y=True)
    estimator = make_pipeline(StandardScaler(), SMCClassifier(n_particles=30, n_leapfrog=8, random_state=0))
    search = EvidenceSearch(estimator, {"smcclassifier__hidden_layer_sizes": [(2,), (4,)]}).fit(X, y)
    probability = search.results_["probability"]
    expected = sum(p * e.predict_proba(X) for p, e in zip(probability, search.estimators_))
    np.testing.assert_allclose(search.predict_proba(X), expected, rtol=1e-12)
    np.testing.assert_allclose(search.predict_log_proba(X), np.log(expected), rtol=1e-10)
    np.testing.assert_array_equal(search.predict(X), search.classes_[expected.argmax(1)])
    assert search.score(X, y) > 0.9
    with pytest.raises(ValueError, match="return_std"):
        search.predict(X, return_std=True)


def test_laplace_pipeline_and_parallel_fits_agree(one_unit_data):
    """Laplace candidates inside a pipeline are ranked by log_marginal_likelihood();
    n_jobs=2 gives the same candidates and evidences."""
    X, y = one_unit_data
    estimator = make_pipeline(StandardScaler(), LaplaceRegressor(max_epochs=50, random_state=0))
    grid = {"laplaceregressor__prior_std": [0.1, 1.0]}
    serial = EvidenceSearch(estimator, grid).fit(X, y)
    parallel = EvidenceSearch(estimator, grid, n_jobs=2).fit(X, y)
    expected = [pipeline[-1].log_marginal_likelihood() for pipeline in serial.estimators_]
    np.testing.assert_allclose(serial.results_["log_evidence"], expected)
    np.testing.assert_allclose(parallel.results_["log_evidence"], expected)


@pytest.mark.parametrize("pipeline", [False, True])
def test_estimator_without_evidence_is_refused_before_fitting(one_unit_data, pipeline, monkeypatch):
    X, y = one_unit_data
    estimator, grid = DeepEnsembleRegressor(n_estimators=2, max_epochs=5), {"hidden_layer_sizes": [(3,)]}
    if pipeline:
        estimator, grid = make_pipeline(StandardScaler(), estimator), {"deepensembleregressor__max_epochs": [5]}

    def no_fit(*args, **kwargs):
        raise AssertionError("a candidate was fitted before the estimator was refused")

    monkeypatch.setattr(DeepEnsembleRegressor, "fit", no_fit)
    search = EvidenceSearch(estimator, grid)
    with pytest.raises(ValueError, match="log_evidence_.*DeepEnsembleRegressor"):
        search.fit(X, y)


class EvidenceRidge(BayesianRidge):
    """Another library's estimator that keeps its log evidence in ``log_evidence_``."""

    def fit(self, X, y):
        super().fit(X, y)
        self.log_evidence_ = float(self.scores_[-1])
        return self


class GivenEvidence(EvidenceRidge):
    """An :class:`EvidenceRidge` whose log evidence is set by its ``alpha_1``: ``evidence[alpha_1]``."""

    evidence = {}

    def fit(self, X, y):
        super().fit(X, y)
        self.log_evidence_ = self.evidence[self.alpha_1]
        return self


def test_another_estimator_with_a_log_evidence_is_ranked(one_unit_data):
    X, y = one_unit_data
    search = EvidenceSearch(EvidenceRidge(compute_score=True), {"alpha_1": [1e-6, 1.0]}).fit(X, y)
    assert search.results_["log_evidence"].tolist() == [e.log_evidence_ for e in search.estimators_]


def test_an_estimator_in_the_grid_is_cloned_for_each_candidate(one_unit_data):
    """As GridSearchCV does: the grid's estimator was one object that the candidates, fitted in
    turn, shared and refitted, so both had the last one's evidence (equal weights where one
    model is decisively better), and the user's object came back fitted."""
    X, y = one_unit_data
    mine = EvidenceRidge(compute_score=True)
    grid = {"evidenceridge": [mine], "evidenceridge__alpha_1": [1e-6, 1e6]}
    search = EvidenceSearch(make_pipeline(StandardScaler(), EvidenceRidge()), grid).fit(X, y)
    alone = [EvidenceRidge(compute_score=True, alpha_1=alpha).fit(StandardScaler().fit_transform(X), y).log_evidence_
             for alpha in (1e-6, 1e6)]
    np.testing.assert_allclose(search.results_["log_evidence"], alone)
    assert search.estimators_[0][-1] is not search.estimators_[1][-1]
    assert not hasattr(mine, "log_evidence_") and mine.alpha_1 == 1e-6


@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_an_undefined_evidence_is_refused(one_unit_data, value):
    """A NaN or +inf evidence made every weight, and every prediction, NaN, silently."""

    class Undefined(EvidenceRidge):
        def fit(self, X, y):
            super().fit(X, y)
            self.log_evidence_ = value if self.alpha_1 > 1 else self.log_evidence_
            return self

    X, y = one_unit_data
    search = EvidenceSearch(Undefined(compute_score=True), {"alpha_1": [1e-6]}).fit(X, y)
    with pytest.raises(ValueError, match=f"log evidence of candidate {{'alpha_1': 10.0}} is {value}"):
        search.set_params(param_grid={"alpha_1": [1e-6, 10.0, 20.0]}).fit(X, y)
    assert len(search.estimators_) == 1  # the earlier fit whole, its candidates with its weights
    np.testing.assert_array_equal(search.predict(X), search.estimators_[0].predict(X))


def test_every_evidence_at_minus_infinity_is_refused(one_unit_data):
    class Impossible(GivenEvidence):
        evidence = {1e-6: -np.inf, 10.0: -np.inf}

    with pytest.raises(ValueError, match="Every candidate's log evidence is -inf"):
        EvidenceSearch(Impossible(compute_score=True), {"alpha_1": [1e-6, 10.0]}).fit(*one_unit_data)


def test_a_candidate_at_minus_infinity_weighs_nothing_and_the_others_are_averaged(one_unit_data):
    """Log evidences 0, -inf and log 3: probabilities 1/4, 0 and 3/4, ranks 2, 3, 1; the average's
    mean, total std and R² are those of the two possible candidates' mixture (the search is refused
    only when every candidate is at -inf)."""

    class OneImpossible(GivenEvidence):
        evidence = {1e-6: 0.0, 1e-5: -np.inf, 1.0: np.log(3.0)}

    X, y = one_unit_data
    search = EvidenceSearch(OneImpossible(compute_score=True), {"alpha_1": [1e-6, 1e-5, 1.0]}).fit(X, y)
    np.testing.assert_allclose(search.results_["probability"], [0.25, 0.0, 0.75], rtol=1e-12)
    assert search.results_["rank"].tolist() == [2, 3, 1] and search.best_params_ == {"alpha_1": 1.0}
    (m0, s0), (m1, s1) = (search.estimators_[index].predict(X, return_std=True) for index in (0, 2))
    mean = 0.25 * m0 + 0.75 * m1
    variance = 0.25 * s0**2 + 0.75 * s1**2 + 0.25 * 0.75 * (m0 - m1) ** 2  # within plus between candidates
    got_mean, got_std = search.predict(X, return_std=True)
    np.testing.assert_allclose(got_mean, mean, rtol=1e-12)
    np.testing.assert_allclose(got_std, np.sqrt(variance), rtol=1e-10)
    np.testing.assert_allclose(search.predict(X), mean, rtol=1e-12)
    assert search.score(X, y) == pytest.approx(r2_score(y, mean), rel=1e-12)


def test_a_classifier_search_scores_the_accuracy_of_its_predicted_labels():
    """As a classifier's score does: the fraction of the averaged labels that are right (string
    labels included, which no regression score reads)."""

    class EvidenceLogistic(LogisticRegression):
        def fit(self, X, y):
            super().fit(X, y)
            self.log_evidence_ = 0.0
            return self

    X, y = load_iris(return_X_y=True)
    labels = np.array(["setosa", "versicolor", "virginica"])[y]
    search = EvidenceSearch(EvidenceLogistic(max_iter=1000), {"C": [0.01, 1.0]}).fit(X, labels)
    assert search.score(X, labels) == accuracy_score(labels, search.predict(X))


def test_an_estimator_without_evidence_in_the_grid_is_refused_before_fitting(one_unit_data, monkeypatch):
    """As one given as the search's estimator is: it was refused after every candidate's fit."""

    def no_fit(*args, **kwargs):
        raise AssertionError("a candidate was fitted before the estimator was refused")

    monkeypatch.setattr(LaplaceRegressor, "fit", no_fit)
    X, y = one_unit_data
    grid = {"reg": [LaplaceRegressor(), DeepEnsembleRegressor()]}
    with pytest.raises(ValueError, match="log_evidence_.*DeepEnsembleRegressor"):
        EvidenceSearch(Pipeline([("scale", StandardScaler()), ("reg", LaplaceRegressor())]), grid).fit(X, y)


def cv_results(values, fold_scores, name="scale"):
    """A ``GridSearchCV.cv_results_`` of the candidates ``values`` with these per-fold scores."""
    fold_scores = np.asarray(fold_scores, dtype=float)
    results = {f"param_{name}": np.ma.masked_array(values, dtype=object), "mean_test_score": fold_scores.mean(1)}
    results.update({f"split{fold}_test_score": fold_scores[:, fold] for fold in range(fold_scores.shape[1])})
    return results


def test_the_rule_moves_to_a_candidate_that_beats_the_default_beyond_the_folds_noise():
    # Gains 0.1, 0.2, 0.1, 0.2 over the default: mean 0.15, paired standard error 0.029.
    results = cv_results([1.0, 2.0, 4.0], [[-1.0, -2.0, -1.0, -2.0], [-0.9, -1.8, -0.9, -1.8],
                                            [-1.5, -2.5, -1.5, -2.5]])
    assert one_standard_error_rule("scale", 1.0)(results) == 1


def test_the_rule_keeps_the_default_when_the_best_gain_is_within_the_folds_noise():
    # The best mean (scale 2) gains 0.05 on average, but +0.5, -0.3, +0.3, -0.3 fold by fold:
    # standard error 0.2.
    results = cv_results([1.0, 2.0, 4.0], [[-1.0, -2.0, -1.0, -2.0], [-0.5, -2.3, -0.7, -2.3],
                                            [-1.5, -2.5, -1.5, -2.5]])
    assert np.argmax(results["mean_test_score"]) == 1
    assert one_standard_error_rule("scale", 1.0)(results) == 0


def test_the_rule_moves_on_a_gain_beyond_its_standard_error_though_within_the_folds_spread():
    # Gains +0.5, -0.1, +0.5, -0.1: mean 0.2, above the standard error of the mean 0.173 (the folds'
    # std 0.346 over the root of 4 folds), below the std itself.
    results = cv_results([1.0, 2.0], [[-1.0, -2.0, -1.0, -2.0], [-0.5, -2.1, -0.5, -2.1]])
    assert one_standard_error_rule("scale", 1.0)(results) == 1


def test_the_rule_keeps_the_best_of_several_defaults():
    """With a second parameter in the grid, the reference is the best candidate at the default:
    candidate 2 gains 0.025 on it (+0.05, +0.1, -0.05, 0; standard error 0.032), within the folds'
    noise, though it gains 1.025 on the other default, candidate 0."""
    results = cv_results([1.0, 1.0, 2.0], [[-2.0, -3.0, -2.0, -3.0], [-1.0, -2.0, -1.0, -2.0],
                                            [-0.95, -1.9, -1.05, -2.0]])
    assert np.argmax(results["mean_test_score"]) == 2
    assert one_standard_error_rule("scale", 1.0)(results) == 1


def test_the_rule_passes_over_candidates_whose_fits_failed():
    """GridSearchCV scores a failed fit NaN (error_score=np.nan): neither the failed default
    (candidate 0) nor the failed non-default (candidate 2) is the reference or the choice, and
    candidate 3 gains 0.15 on candidate 1 (standard error 0.029)."""
    nan = np.nan
    results = cv_results([1.0, 1.0, 2.0, 4.0], [[nan, nan, nan, nan], [-1.0, -2.0, -1.0, -2.0],
                                                 [nan, nan, nan, nan], [-0.9, -1.8, -0.9, -1.8]])
    assert one_standard_error_rule("scale", 1.0)(results) == 3


def test_the_rule_keeps_the_default_on_one_fold():
    """One train/validation split (cv=[(train, test)]) has no spread of gains to judge one by: a
    gain of 1.0 there does not move the rule."""
    assert one_standard_error_rule("scale", 1.0)(cv_results([1.0, 2.0], [[-2.0], [-1.0]])) == 0


def test_the_rule_counts_the_folds_by_their_test_scores_only():
    """GridSearchCV(return_train_score=True) adds split<k>_train_score: the folds are still four."""
    results = cv_results([1.0, 2.0, 4.0], [[-1.0, -2.0, -1.0, -2.0], [-0.9, -1.8, -0.9, -1.8],
                                            [-1.5, -2.5, -1.5, -2.5]])
    results.update({f"split{fold}_train_score": np.zeros(3) for fold in range(4)})
    assert one_standard_error_rule("scale", 1.0)(results) == 1


def test_the_rule_refuses_several_scoring_metrics_by_name():
    results = cv_results([1.0, 2.0], [[-1.0, -2.0], [-1.5, -2.5]])
    results["mean_test_r2"] = results.pop("mean_test_score")
    with pytest.raises(ValueError, match="needs a single scoring metric"):
        one_standard_error_rule("scale", 1.0)(results)


def test_the_rule_passes_over_candidates_that_do_not_set_the_parameter():
    """GridSearchCV masks a parameter that a candidate's sub-grid does not set, and a masked value
    compared equal to a default of 0: such a candidate, at the estimator's own default, was the
    reference (here the best mean, within the folds' noise of candidate 0, the only one at 0.0)."""
    results = cv_results([0.0, 30.0, 0.0], [[-1.0, -2.0, -1.0, -2.0], [-1.5, -2.5, -1.5, -2.5],
                                            [-0.9, -2.1, -0.8, -2.1]])
    results["param_scale"][2] = np.ma.masked
    assert one_standard_error_rule("scale", 0.0)(results) == 0


def test_the_rule_refuses_a_default_whose_fits_all_failed():
    """GridSearchCV(error_score=np.nan) scores failed fits NaN: with every fit at the default failed,
    the rule has no reference, and says so by name (numpy's "All-NaN slice" before)."""
    nan = np.nan
    results = cv_results([1.0, 2.0], [[nan, nan, nan], [-1.0, -2.0, -1.0]])
    with pytest.raises(ValueError, match="every candidate with scale=1.0 failed to fit"):
        one_standard_error_rule("scale", 1.0)(results)


def test_the_rule_refuses_a_grid_without_the_default():
    with pytest.raises(ValueError, match="no candidate has scale=1.0"):
        one_standard_error_rule("scale", 1.0)(cv_results([2.0, 4.0], [[-1.0, -2.0], [-1.5, -2.5]]))


def test_the_rule_names_a_parameter_the_grid_does_not_search():
    with pytest.raises(ValueError, match=r"'alhpa' is not searched; the grid searches \['scale'\]"):
        one_standard_error_rule("alhpa", 1.0)(cv_results([1.0, 2.0], [[-1.0, -2.0], [-1.5, -2.5]]))


def test_the_rule_reads_array_values_and_pickles():
    """A per-target ``alpha`` is an array, whose ``==`` is one too: every candidate read as the
    default. And a search holding the rule pickles (a function defined inside it did not)."""
    results = cv_results([1.0, 2.0], [[-1.0, -2.0, -1.0, -2.0], [-0.99, -1.99, -1.01, -1.99]])
    results["param_scale"] = np.empty(2, dtype=object)
    results["param_scale"][0], results["param_scale"][1] = np.array([1.0, 1.0]), np.array([3.0, 3.0])
    assert one_standard_error_rule("scale", np.array([1.0, 1.0]))(results) == 0
    rule = pickle.loads(pickle.dumps(one_standard_error_rule("scale", 1.0)))
    assert rule(cv_results([1.0, 2.0], [[-1.0, -2.0, -1.0, -2.0], [-0.9, -1.8, -0.9, -1.8]])) == 1


def test_evidence_search_tabulates_tuple_values_and_refuses_an_empty_grid(one_unit_data):
    pd = pytest.importorskip("pandas")
    X, y = one_unit_data
    search = EvidenceSearch(LaplaceRegressor(max_epochs=5, random_state=0),
                            {"hidden_layer_sizes": [(1,), (2,)]}).fit(X, y)
    assert pd.DataFrame(search.results_)["param_hidden_layer_sizes"].tolist() == [(1,), (2,)]
    with pytest.raises(ValueError, match="no candidates"):
        EvidenceSearch(LaplaceRegressor(), []).fit(X, y)


def test_the_rule_refits_gridsearchcv_at_its_choice():
    rng = np.random.RandomState(0)
    X = rng.randn(40, 3)
    y = X @ [1.0, 0.5, 0.0] + rng.randn(40)
    grid = {"alpha": [1.0, 3.0]}
    plain = GridSearchCV(Ridge(), grid, cv=5).fit(X, y)
    ruled = GridSearchCV(Ridge(), grid, cv=5, refit=one_standard_error_rule("alpha", 1.0)).fit(X, y)
    assert plain.best_params_ == {"alpha": 3.0} and ruled.best_params_ == {"alpha": 1.0}
    np.testing.assert_allclose(ruled.predict(X), Ridge(alpha=1.0).fit(X, y).predict(X))


def test_a_refit_on_an_array_drops_the_feature_names_of_a_fit_on_a_dataframe(one_unit_data):
    pd = pytest.importorskip("pandas")
    X, y = one_unit_data
    search = EvidenceSearch(LaplaceRegressor(max_epochs=5, random_state=0), {"prior_std": [0.5, 1.0]})
    frame = pd.DataFrame(X, columns=[f"x{column}" for column in range(X.shape[1])])
    assert list(search.fit(frame, y).feature_names_in_) == list(frame.columns)
    assert not hasattr(search.fit(X, y), "feature_names_in_")
