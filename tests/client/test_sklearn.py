"""``SiftSelector``: scikit-learn's conventions, and Pipelines on real data (``datasets/``)
against a real service, whose ``/top`` is what the selector keeps."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.cluster import KMeans
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline

from siftstream import Client, NotFoundError, SiftSelector
from tests.support.datasets import load_mat
from tests.support.harness import ServiceProcess


def test_parameters_are_stored_as_given_and_clone_works() -> None:
    params = {"k": 5}
    selector = SiftSelector(
        "news", method="ocfs", n_features_to_select=7, url="http://127.0.0.1:1", params=params
    )
    assert selector.get_params() == {
        "name": "news",
        "method": "ocfs",
        "n_features_to_select": 7,
        "url": "http://127.0.0.1:1",
        "api_key": None,
        "params": params,
        "expires_after": 3600.0,
        "keep": False,
    }
    assert selector.params is params  # stored as given, not copied or resolved
    copy = clone(selector)
    assert copy.get_params() == selector.get_params() and copy is not selector
    selector.set_params(n_features_to_select=3, method="fsds")
    assert (selector.n_features_to_select, selector.method) == (3, "fsds")
    with pytest.raises(NotFittedError):
        selector.get_support()


def test_pipeline_with_a_labelled_method_on_pcmac(
    service: ServiceProcess, selector_name: str
) -> None:
    """OCFS keeps the 20 PCMAC words that separate the two newsgroups: a classifier on them
    beats one on 20 random words by far. The Pipeline passes y on; the data stays sparse."""
    x, y = load_mat("PCMAC.mat", dense=False)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=0.3, random_state=0, stratify=y
    )
    pipe = Pipeline(
        [
            (
                "select",
                SiftSelector(
                    selector_name,
                    method="ocfs",
                    n_features_to_select=20,
                    url=service.url,
                    keep=True,  # compared with the service's answers below
                ),
            ),
            ("model", LogisticRegression(max_iter=2000)),
        ]
    )
    pipe.fit(x_train, y_train)
    selector: SiftSelector = pipe.named_steps["select"]
    assert selector.selector_name_.startswith(selector_name + "-")
    with Client(service.url) as sift:
        top = sift.top(selector.selector_name_, h=20)
        described = sift.describe(selector.selector_name_)
    assert described.rows_seen == x_train.shape[0] and described.classes is not None
    assert sorted(np.flatnonzero(selector.get_support()).tolist()) == sorted(top.indices.tolist())
    np.testing.assert_array_equal(selector.get_support(indices=True), np.sort(top.indices))
    assert selector.version_ == top.version and selector.seen_ == x_train.shape[0]
    assert selector.transform(x_test).shape == (x_test.shape[0], 20)

    accuracy = pipe.score(x_test, y_test)
    columns = np.random.default_rng(0).choice(x.shape[1], 20, replace=False)
    random_words = LogisticRegression(max_iter=2000).fit(x_train[:, columns], y_train)
    assert accuracy > 0.8
    assert accuracy > random_words.score(x_test[:, columns], y_test) + 0.15


def test_pipeline_into_kmeans_on_coil20(service: ServiceProcess, selector_name: str) -> None:
    x, _ = load_mat("COIL20.mat")
    pipe = Pipeline(
        [
            (
                "select",
                SiftSelector(
                    selector_name,
                    n_features_to_select=50,
                    url=service.url,
                    params={"k": 20},
                    keep=True,  # compared with the service's answers below
                ),
            ),
            ("cluster", KMeans(n_clusters=20, n_init=1, random_state=0)),
        ]
    )
    labels = pipe.fit_predict(x)
    assert labels.shape == (1440,)
    selector: SiftSelector = pipe.named_steps["select"]
    with Client(service.url) as sift:
        top = sift.top(selector.selector_name_, h=50)
        weights = sift.weights(selector.selector_name_)
    assert selector.support_.sum() == 50
    np.testing.assert_array_equal(np.sort(top.indices), selector.get_support(indices=True))
    np.testing.assert_allclose(selector.scores_, weights.weights)
    # ranking_: 1..50 for the selected features in /top's order, the rest after by score.
    np.testing.assert_array_equal(selector.ranking_[top.indices], np.arange(1, 51))
    rest = np.flatnonzero(~selector.support_)
    by_rank = rest[np.argsort(selector.ranking_[rest])]
    assert np.all(np.diff(selector.scores_[by_rank]) <= 0)
    np.testing.assert_array_equal(
        pipe.named_steps["select"].transform(x), x[:, selector.get_support()]
    )


def test_partial_fit_streams_and_fit_starts_afresh(
    service: ServiceProcess, selector_name: str
) -> None:
    rng = np.random.default_rng(3)
    frame = pd.DataFrame(rng.normal(size=(900, 6)), columns=list("abcdef"))
    frame["d"] *= 10
    frame["b"] *= 5
    selector = SiftSelector(
        selector_name, method="variance", n_features_to_select=2, url=service.url
    )
    versions = []
    for part in np.array_split(np.arange(900), 3):
        selector.partial_fit(frame.iloc[part])
        versions.append(selector.version_)
    assert selector.seen_ == 900 and versions == sorted(set(versions))
    assert list(selector.feature_names_in_) == list("abcdef")
    assert list(selector.get_feature_names_out()) == ["b", "d"]
    kept = selector.set_output(transform="pandas").transform(frame)
    assert list(kept.columns) == ["b", "d"]
    np.testing.assert_array_equal(kept.to_numpy(), frame[["b", "d"]].to_numpy())
    np.testing.assert_allclose(selector.scores_, frame.to_numpy().var(axis=0), rtol=1e-10)
    with Client(service.url) as sift:
        assert sift.describe(selector_name).has_feature_names
        assert selector.selector_name_ == selector_name

        selector.set_params(keep=True).fit(frame.iloc[:100])
        assert selector.seen_ == 100  # a selector of its own, made afresh ...
        first_own = selector.selector_name_
        assert first_own.startswith(selector_name + "-")
        kept = sift.describe(first_own)
        assert kept.expires_after == 3600.0  # ... that expires when idle
        assert not kept.temporary  # kept: not marked as a job's
        assert sift.describe(selector_name).rows_seen == 900  # the streamed one is untouched
        selector.partial_fit(frame.iloc[100:150])  # continues the fitted selector
        assert selector.seen_ == 150 and selector.selector_name_ == first_own
        selector.fit(frame.iloc[:10])  # a refit lets go of the previous fit's selector
        with pytest.raises(NotFoundError):
            sift.describe(first_own)
        sift.delete(selector.selector_name_)
    with pytest.raises(ValueError, match="no longer exists"):
        selector.partial_fit(frame.iloc[:10])


def test_labelled_methods_require_y(service: ServiceProcess, selector_name: str) -> None:
    x = np.random.default_rng(4).normal(size=(50, 4))
    selector = SiftSelector(selector_name, method="ocfs", url=service.url)
    with pytest.raises(ValueError, match="pass y"):
        selector.fit(x)
    selector.fit(x, np.arange(50) % 2)
    assert selector.seen_ == 50


def test_unlabelled_methods_ignore_y(service: ServiceProcess, selector_name: str) -> None:
    x = np.random.default_rng(5).normal(size=(50, 4))
    selector = SiftSelector(
        selector_name, method="variance", n_features_to_select=1, url=service.url
    )
    selector.fit(x, np.arange(50) % 2)  # as a Pipeline with a classifier passes it
    assert selector.seen_ == 50


@pytest.mark.parametrize("method", ["ofs", "iqrp", "omvfs"])
def test_methods_that_do_not_take_rows_are_refused_clearly(
    service: ServiceProcess, selector_name: str, method: str
) -> None:
    selector = SiftSelector(selector_name, method=method, url=service.url)
    with pytest.raises(ValueError, match=f"refused a '{method}' selector") as refused:
        selector.fit(np.ones((5, 3)))
    assert "n_samples" in str(refused.value) or "views" in str(refused.value)


def test_an_existing_feature_stream_is_refused(service: ServiceProcess, selector_name: str) -> None:
    with Client(service.url) as sift:
        sift.create(selector_name, "ofs", n_samples=5)
    with pytest.raises(ValueError, match="feature columns over fixed samples"):
        SiftSelector(selector_name, url=service.url).partial_fit(np.ones((5, 3)))


def test_width_must_match_an_existing_selector(service: ServiceProcess, selector_name: str) -> None:
    with Client(service.url) as sift:
        sift.create(selector_name, "variance", n_features=4)
    with pytest.raises(ValueError, match="has 4 features; X has 3"):
        SiftSelector(selector_name, url=service.url).partial_fit(np.ones((5, 3)))


def test_client_errors_pickle_and_say_the_same() -> None:
    """Errors cross process boundaries (joblib's workers): every one pickles whole."""
    import pickle

    from siftstream.errors import TransportError, problem_error

    for error in (
        problem_error(404, {"detail": "selector 'g3' does not exist"}, "GET", "http://s/x"),
        problem_error(422, {"type": "urn:sift:problem:chunk-rejected", "log_id": "1-2"}, "P", "u"),
        TransportError("cannot reach", 3),
    ):
        again = pickle.loads(pickle.dumps(error))
        assert type(again) is type(error) and str(again) == str(error)
        assert vars(again) == vars(error)


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_a_grid_search_fits_every_clone_on_a_selector_of_its_own(
    service: ServiceProcess, selector_name: str, n_jobs: int
) -> None:
    """GridSearchCV clones the estimator for every fold and candidate, in worker processes with
    n_jobs=2: every fit owns its selector, none sees another's rows, and each fit deletes its
    own: nothing is left behind (13 fits, 0 selectors)."""
    from sklearn.model_selection import GridSearchCV, cross_val_score

    rng = np.random.default_rng(6)
    x = rng.normal(size=(400, 8))
    y = (x[:, 2] - x[:, 5] > 0).astype(int)
    pipe = Pipeline(
        [
            ("select", SiftSelector(selector_name, method="ocfs", url=service.url)),
            ("model", LogisticRegression()),
        ]
    )
    search = GridSearchCV(
        pipe, {"select__n_features_to_select": [1, 2, 4]}, cv=3, n_jobs=n_jobs, error_score="raise"
    )
    search.fit(x, y)
    assert search.best_params_["select__n_features_to_select"] >= 2
    assert search.best_score_ > 0.9
    # The refit learned on all rows, in a selector of its own.
    assert search.best_estimator_.named_steps["select"].seen_ == 400
    scores = cross_val_score(pipe, x, y, cv=3, n_jobs=n_jobs, error_score="raise")
    assert scores.shape == (3,) and np.all(scores > 0.5)
    with Client(service.url) as sift:
        made = [s for s in sift.list_selectors() if s.name.startswith(selector_name + "-")]
    # 3 candidates x 3 folds + the refit + 3 folds of cross_val_score: each deleted its own.
    assert made == []


def test_scikit_learns_own_estimator_checks_pass(service: ServiceProcess, selector_name: str):
    """``check_estimator`` against the live service: every check passes or is skipped for a
    reason scikit-learn gives (``non_deterministic``: a service answers), but one: by default
    a fit deletes its selector, so ``partial_fit`` after ``fit`` (which only
    ``check_fit_score_takes_y`` does) says to keep it; with ``keep=True`` that check passes."""
    from sklearn.utils.estimator_checks import check_estimator, check_fit_score_takes_y

    estimator = SiftSelector(selector_name, url=service.url, n_features_to_select=2)
    results = check_estimator(estimator, on_fail=None)
    failed = {
        r["check_name"]: str(r["exception"])[:200] for r in results if r["status"] == "failed"
    }
    assert set(failed) <= {"check_fit_score_takes_y"}, failed
    assert all("fit with keep=True" in reason for reason in failed.values()), failed
    assert sum(r["status"] == "passed" for r in results) >= 39
    check_fit_score_takes_y("SiftSelector", estimator.set_params(keep=True))


def test_a_fit_deletes_its_selector_and_transforms_without_it(
    service: ServiceProcess, selector_name: str
) -> None:
    """By default a fit reads what it needs and deletes its selector: transform, the support,
    the names out and the scores need no service afterwards. The selector was temporary while
    it lived (expiring when idle); partial_fit cannot continue a deleted one."""
    rng = np.random.default_rng(7)
    frame = pd.DataFrame(rng.normal(size=(300, 5)), columns=list("vwxyz"))
    frame["x"] *= 8
    frame["v"] *= 4
    selector = SiftSelector(
        selector_name, method="variance", n_features_to_select=2, url=service.url
    )
    selector.fit(frame)
    assert selector.selector_name_.startswith(selector_name + "-") and not selector.selector_kept_
    with Client(service.url) as sift:
        with pytest.raises(NotFoundError):
            sift.describe(selector.selector_name_)
        assert not [s for s in sift.list_selectors() if s.name.startswith(selector_name)]
    selector.url = "http://127.0.0.1:1"  # no service: nothing below asks it
    assert list(selector.get_feature_names_out()) == ["v", "x"]
    np.testing.assert_array_equal(selector.transform(frame), frame[["v", "x"]].to_numpy())
    np.testing.assert_allclose(selector.scores_, frame.to_numpy().var(axis=0), rtol=1e-10)
    assert selector.ranking_[[0, 2]].tolist() == [2, 1] and selector.seen_ == 300
    with pytest.raises(ValueError, match="keep=True"):
        selector.partial_fit(frame)


def test_a_kept_fit_is_not_temporary_and_a_failed_fit_leaves_nothing(
    service: ServiceProcess, selector_name: str
) -> None:
    """A fit that fails after creating its selector deletes it too; a kept fit's selector is
    not marked temporary (a job's selector created so is), and partial_fit continues it."""
    x = np.random.default_rng(8).normal(size=(40, 3))
    failing = SiftSelector(selector_name, method="ocfs", url=service.url)
    with pytest.raises(ValueError, match="pass y"):
        failing.fit(x)  # created, refused, deleted
    with Client(service.url) as sift:
        assert not [s for s in sift.list_selectors() if s.name.startswith(selector_name)]
        kept = SiftSelector(selector_name, method="variance", url=service.url, keep=True)
        kept.fit(x)
        info = sift.describe(kept.selector_name_)
        assert kept.selector_kept_ and not info.temporary and info.expires_after == 3600.0
        sift.create(f"{selector_name}-job", "variance", n_features=3, temporary=True)
        assert sift.describe(f"{selector_name}-job").temporary
        sift.delete(f"{selector_name}-job")
        kept.partial_fit(x)  # a kept fit continues
        assert kept.seen_ == 80
        sift.delete(kept.selector_name_)


def test_a_delete_that_fails_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    """The service unreachable when the fit deletes its selector: a warning, and the fit
    stands (the selector expires)."""
    from siftstream import RetryPolicy

    unreachable = Client("http://127.0.0.1:1", retry=RetryPolicy(max_attempts=1))
    with unreachable, caplog.at_level("WARNING", logger="siftstream"):
        SiftSelector._let_go(unreachable, "gone-1234")
    assert "could not delete its selector 'gone-1234'" in caplog.text


@pytest.mark.parametrize("method, test", [("anova", "f_classif"), ("chi2", "chi2")])
def test_a_pipeline_selects_what_select_k_best_selects(
    service: ServiceProcess, selector_name: str, method: str, test: str
) -> None:
    """``SiftSelector(method="anova")`` and ``SelectKBest(f_classif)`` (and chi2 alike) keep
    the same features on the same rows, and the classifiers after them agree."""
    from sklearn.datasets import load_digits
    from sklearn.feature_selection import SelectKBest, chi2, f_classif

    x, y = load_digits(return_X_y=True)
    x_train, x_test, y_train, _ = train_test_split(x, y, test_size=0.3, random_state=0)
    score_func = {"f_classif": f_classif, "chi2": chi2}[test]
    sift = Pipeline(
        [
            (
                "select",
                SiftSelector(
                    selector_name, method=method, n_features_to_select=20, url=service.url
                ),
            ),
            ("model", LogisticRegression(max_iter=3000)),
        ]
    )
    batch = Pipeline(
        [("select", SelectKBest(score_func, k=20)), ("model", LogisticRegression(max_iter=3000))]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn's constant-feature warnings
        sift.fit(x_train, y_train)
        batch.fit(x_train, y_train)
    np.testing.assert_array_equal(
        sift.named_steps["select"].get_support(), batch.named_steps["select"].get_support()
    )
    np.testing.assert_array_equal(sift.predict(x_test), batch.predict(x_test))


def test_the_client_reads_p_values_undefined_tests_and_selections_by_alpha(
    service: ServiceProcess, selector_name: str
) -> None:
    """``Client.top`` on a chi2 selector: each feature's p-value (scikit-learn's); for the
    pixels that are always 0 a NaN score and no p-value; and ``alpha`` with ``correction``
    as ``SelectFdr``."""
    from sklearn.datasets import load_digits
    from sklearn.feature_selection import SelectFdr, chi2

    x, y = load_digits(return_X_y=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, p = chi2(x, y)
        support = SelectFdr(chi2, alpha=1e-3).fit(x, y).get_support()
    with Client(service.url) as sift:
        sift.create(selector_name, "chi2", n_features=x.shape[1])
        sift.push(selector_name, x, y)
        every = sift.top(selector_name, h=64)
        chosen = sift.top(selector_name, h=64, alpha=1e-3, correction="fdr")
        sift.delete(selector_name)
    constant = set(np.flatnonzero(x.max(axis=0) == 0).tolist())
    for feature in every.features:
        if feature.index in constant:
            assert np.isnan(feature.score) and feature.p_value is None
        else:
            assert feature.p_value == pytest.approx(p[feature.index], rel=1e-9, abs=1e-300)
    assert sorted(chosen.indices.tolist()) == np.flatnonzero(support).tolist()


def _abs_r(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """|r| of every feature: what ``correlation`` ranks by (the sign is the direction)."""
    from sklearn.feature_selection import r_regression

    scores: np.ndarray = np.abs(r_regression(x, y))
    return scores


@pytest.mark.parametrize("method", ["f_regression", "correlation"])
def test_a_regression_pipeline_selects_what_select_k_best_selects(
    service: ServiceProcess, selector_name: str, method: str
) -> None:
    """``SiftSelector(method="f_regression")`` and ``SelectKBest(f_regression)`` keep the same
    5 of the diabetes data's 10 features, and the regressions after them predict alike;
    ``correlation`` as ``SelectKBest`` on |r|. The Pipeline passes the numeric y on; the
    scores are scikit-learn's, and so are the p-values of the top."""
    from sklearn.datasets import load_diabetes
    from sklearn.feature_selection import SelectKBest, f_regression
    from sklearn.linear_model import LinearRegression

    x, y = load_diabetes(return_X_y=True, as_frame=True)
    x_train, x_test, y_train, _ = train_test_split(x, y, test_size=0.3, random_state=0)
    score_func = f_regression if method == "f_regression" else _abs_r
    sift = Pipeline(
        [
            (
                "select",
                SiftSelector(selector_name, method=method, n_features_to_select=5, url=service.url),
            ),
            ("model", LinearRegression()),
        ]
    )
    batch = Pipeline([("select", SelectKBest(score_func, k=5)), ("model", LinearRegression())])
    sift.fit(x_train, y_train)
    batch.fit(x_train, y_train)
    selector: SiftSelector = sift.named_steps["select"]
    kbest = batch.named_steps["select"]
    np.testing.assert_array_equal(selector.get_support(), kbest.get_support())
    assert list(selector.get_feature_names_out()) == list(kbest.get_feature_names_out())
    np.testing.assert_array_equal(selector.transform(x_test), kbest.transform(x_test))
    np.testing.assert_allclose(sift.predict(x_test), batch.predict(x_test), rtol=1e-9)
    np.testing.assert_allclose(selector.scores_, kbest.scores_, rtol=1e-9)
    assert selector.seen_ == len(x_train) and not selector.selector_kept_
    # The top's p-values are the F-test's (both methods: r and F test the same thing).
    _, p = f_regression(x_train, y_train)
    top = selector.top_
    assert [f.name for f in top.features] == list(x.columns[np.argsort(-kbest.scores_)[:5]])
    for feature in top.features:
        assert feature.p_value == pytest.approx(p[feature.index], rel=1e-9, abs=1e-300)


def test_a_regression_pipeline_on_sparse_rows(service: ServiceProcess, selector_name: str) -> None:
    """Sparse X and a numeric y: the rows stay sparse, the selection is SelectKBest's."""
    import scipy.sparse as sp
    from sklearn.feature_selection import SelectKBest, f_regression

    x = sp.random(400, 30, density=0.2, format="csr", random_state=9)
    coefficients = np.zeros(30)
    coefficients[[2, 7, 11, 19, 23]] = [5.0, -4.0, 3.0, 2.0, -6.0]
    y = np.asarray(x @ coefficients).ravel() + np.random.default_rng(9).normal(scale=0.2, size=400)
    selector = SiftSelector(
        selector_name, method="f_regression", n_features_to_select=5, url=service.url
    )
    selector.fit(x, y)
    kbest = SelectKBest(f_regression, k=5).fit(x, y)
    np.testing.assert_array_equal(selector.get_support(), kbest.get_support())
    assert sorted(selector.get_support(indices=True).tolist()) == [2, 7, 11, 19, 23]
    np.testing.assert_allclose(selector.scores_, kbest.scores_, rtol=1e-9)
    assert sp.issparse(selector.transform(x)) and selector.transform(x).shape == (400, 5)


def test_regression_methods_require_a_numeric_y(
    service: ServiceProcess, selector_name: str
) -> None:
    x = np.random.default_rng(10).normal(size=(60, 4))
    selector = SiftSelector(selector_name, method="f_regression", url=service.url)
    with pytest.raises(ValueError, match=r"\(f_regression\) learns from rows with a numeric "):
        selector.fit(x)
    with pytest.raises(ValueError, match=r"takes rows with a target .*target 0 is 'up'"):
        selector.fit(x, np.where(np.arange(60) % 2, "down", "up"))
    with Client(service.url) as sift:  # each failed fit deleted its selector
        assert not [s for s in sift.list_selectors() if s.name.startswith(selector_name)]
    selector.set_params(n_features_to_select=1).fit(x, x[:, 2] * 2.0 + 1.0)
    assert selector.seen_ == 60 and selector.get_support(indices=True).tolist() == [2]
