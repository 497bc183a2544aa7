"""``SiftSelector``: scikit-learn's conventions, and Pipelines on real data (``datasets/``)
against a real service, whose ``/top`` is what the selector keeps."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.cluster import KMeans
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline

from service.client import Client, SiftSelector
from tests.datasets import load_mat
from tests.faults.harness import ServiceProcess


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
                    selector_name, method="ocfs", n_features_to_select=20, url=service.url
                ),
            ),
            ("model", LogisticRegression(max_iter=2000)),
        ]
    )
    pipe.fit(x_train, y_train)
    selector: SiftSelector = pipe.named_steps["select"]
    with Client(service.url) as sift:
        top = sift.top(selector_name, h=20)
        described = sift.describe(selector_name)
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
                ),
            ),
            ("cluster", KMeans(n_clusters=20, n_init=1, random_state=0)),
        ]
    )
    labels = pipe.fit_predict(x)
    assert labels.shape == (1440,)
    selector: SiftSelector = pipe.named_steps["select"]
    with Client(service.url) as sift:
        top = sift.top(selector_name, h=50)
        weights = sift.weights(selector_name)
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

    selector.fit(frame.iloc[:100])
    assert selector.seen_ == 100  # the selector was deleted and made again


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
