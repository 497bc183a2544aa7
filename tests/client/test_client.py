"""The blocking client against a real ``sift serve`` process: every endpoint, every input type,
typed results, and errors that carry the service's problem detail."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest
import scipy.linalg
import scipy.sparse as sp

from siftstream import (
    AuthenticationError,
    Client,
    ConflictError,
    InvalidInputError,
    NotFoundError,
    PermissionDeniedError,
)
from siftstream.results import ChunkReceipt, FeaturesReceipt, SelectorInfo
from tests.support.client import ADMIN_TOKEN
from tests.support.harness import ServiceProcess


def rows(n: int, m: int, seed: int = 0) -> np.ndarray:
    values: np.ndarray = np.random.default_rng(seed).normal(size=(n, m))
    return values


def ocfs_scores(x: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """OCFS's s(i) = sum_j n_j/n (m_j^i - m^i)^2, computed directly."""
    mean = x.mean(axis=0)
    scores = np.zeros(x.shape[1])
    for c in np.unique(labels):
        scores += (labels == c).sum() / len(labels) * (x[labels == c].mean(axis=0) - mean) ** 2
    return scores


def test_health_readiness_and_metrics(sift: Client) -> None:
    assert sift.health().status == "ok"
    assert sift.ready().status == "ready"
    assert "# TYPE sift_chunks_accepted_total counter" in sift.metrics()


def test_create_push_dense_in_chunks_then_rankings(sift: Client, selector_name: str) -> None:
    created = sift.create(selector_name, "fsds", n_features=12, params={"k": 4})
    assert isinstance(created, SelectorInfo)
    assert (created.version, created.rows_seen, created.params["k"]) == (0, 0, 4)

    seen: list[ChunkReceipt] = []
    summary = sift.push(selector_name, rows(1000, 12), chunk_rows=300, on_chunk=seen.append)
    assert [r.items for r in summary.receipts] == [300, 300, 300, 100]
    assert seen == summary.receipts
    assert summary.seen == 1000 and summary.items == 1000 and summary.duplicates == 0
    assert len({r.log_id for r in summary.receipts}) == 4

    top = sift.top(selector_name, h=5)
    weights = sift.weights(selector_name)
    assert weights.version == top.version == summary.version
    assert weights.rows_seen == top.rows_seen == 1000
    assert weights.weights.shape == (12,) and weights.weights.dtype == np.float64
    # The top 5 by score are the 5 largest weights (ties to the lower index).
    expected = np.lexsort((np.arange(12), -weights.weights))[:5]
    np.testing.assert_array_equal(top.indices, expected)
    assert [f.rank for f in top.features] == [1, 2, 3, 4, 5]
    np.testing.assert_allclose([f.score for f in top.features], weights.weights[expected])

    described = sift.describe(selector_name)
    assert described.rows_seen == 1000 and described.state is not None
    assert described.state["pending_entries"] == 0
    assert selector_name in {s.name for s in sift.list_selectors()}

    sift.delete(selector_name)
    with pytest.raises(NotFoundError) as raised:
        sift.describe(selector_name)
    assert raised.value.status == 404 and raised.value.kind == "not-found"
    assert selector_name in raised.value.detail


def test_sparse_input_is_sent_as_npz_and_counts_exactly(sift: Client, selector_name: str) -> None:
    matrix = sp.random(500, 40, density=0.05, format="csc", random_state=3)
    sift.create(selector_name, "variance", n_features=40)
    summary = sift.push(selector_name, matrix, chunk_rows=128)
    assert summary.seen == 500 and len(summary.receipts) == 4
    # Variance is exact for any chunking: the service's scores are numpy's.
    np.testing.assert_allclose(
        sift.weights(selector_name).weights, matrix.toarray().var(axis=0), rtol=1e-10
    )


def test_dataframe_columns_become_feature_names(sift: Client, selector_name: str) -> None:
    frame = pd.DataFrame(rows(200, 5, seed=1), columns=["alpha", "beta", "gamma", "delta", "eps"])
    frame["beta"] *= 20  # by far the largest variance
    created = sift.create(selector_name, "variance", data=frame)
    assert created.n_features == 5 and created.has_feature_names
    sift.push(selector_name, frame)
    top = sift.top(selector_name, h=2)
    assert top.names[0] == "beta" and set(top.names) <= set(frame.columns)


@pytest.mark.parametrize("labels_from", ["series", "column", "strings", "mixed"])
def test_labelled_rows_from_a_series_or_a_column(
    sift: Client, selector_name: str, labels_from: str
) -> None:
    x = rows(600, 6, seed=2)
    classes = np.random.default_rng(5).integers(0, 3, size=600)
    x[:, 4] += classes  # feature 4 separates the classes
    frame = pd.DataFrame(x, columns=[f"f{i}" for i in range(6)])
    labels: object = classes
    if labels_from == "series":
        labels = pd.Series(classes)
    elif labels_from == "column":
        frame["label"] = classes
        labels = "label"
    elif labels_from == "strings":
        labels = [f"class-{c}" for c in classes]
    else:  # integers and strings: two different classes, 1 and "1" (sent as JSON)
        labels = [int(c) if c != 2 else "2" for c in classes]
    sift.create(selector_name, "ocfs", n_features=6)
    summary = sift.push(selector_name, frame, labels, chunk_rows=250)
    assert summary.seen == 600
    described = sift.describe(selector_name)
    assert described.classes is not None
    assert sorted(c.count for c in described.classes) == sorted(np.bincount(classes).tolist())
    if labels_from == "mixed":  # the integers stay integers, the string a string
        assert {c.label for c in described.classes} == {0, 1, "2"}
    np.testing.assert_allclose(
        sift.weights(selector_name).weights, ocfs_scores(x, classes), rtol=1e-9, atol=1e-12
    )
    assert sift.top(selector_name, h=1).indices[0] == 4


def test_sparse_labelled_rows(sift: Client, selector_name: str) -> None:
    matrix = sp.random(300, 20, density=0.2, format="csr", random_state=7)
    classes = np.arange(300) % 4
    sift.create(selector_name, "ocfs", n_features=20)
    sift.push(selector_name, matrix, classes, chunk_rows=100)
    np.testing.assert_allclose(
        sift.weights(selector_name).weights,
        ocfs_scores(matrix.toarray(), classes),
        rtol=1e-9,
        atol=1e-12,
    )


def test_large_inputs_are_cut_to_the_chunk_budget(
    service: ServiceProcess, selector_name: str
) -> None:
    x = rows(1000, 50)  # 400 kB of values
    with Client(service.url, chunk_bytes=100_000) as small:
        small.create(selector_name, "variance", n_features=50)
        summary = small.push(selector_name, x)
    assert [r.items for r in summary.receipts] == [250, 250, 250, 250]
    assert summary.seen == 1000


def test_same_key_prefix_twice_is_answered_as_duplicates(sift: Client, selector_name: str) -> None:
    x = rows(400, 8)
    sift.create(selector_name, "variance", n_features=8)
    first = sift.push(selector_name, x, chunk_rows=100, key_prefix="batch-7")
    again = sift.push(selector_name, x, chunk_rows=100, key_prefix="batch-7")
    assert first.duplicates == 0 and again.duplicates == 4
    assert [r.log_id for r in again.receipts] == [r.log_id for r in first.receipts]
    assert sift.describe(selector_name).rows_seen == 400


def test_pending_chunk_and_its_status(sift: Client, selector_name: str) -> None:
    sift.create(selector_name, "variance", n_features=3)
    receipt = sift.push_chunk(selector_name, rows(10, 3), wait=False)
    assert receipt.status == "pending" and receipt.version is None and receipt.rows == 10
    for _ in range(200):  # the sweeper applies it within about a second
        status = sift.chunk_status(selector_name, receipt.log_id)
        if status.applied:
            break
        time.sleep(0.05)
    assert status.status == "applied" and status.rows_seen == 10


def test_refusals_raise_with_the_problem_detail(sift: Client, selector_name: str) -> None:
    sift.create(selector_name, "fsds", n_features=5)
    with pytest.raises(ConflictError) as conflict:
        sift.create(selector_name, "fsds", n_features=5)
    assert conflict.value.status == 409 and "exists" in conflict.value.detail

    with pytest.raises(InvalidInputError) as mismatch:
        sift.push(selector_name, rows(4, 6))
    assert mismatch.value.kind == "selector-mismatch"
    assert "5" in mismatch.value.detail and "6" in mismatch.value.detail
    assert mismatch.value.problem["status"] == 422

    with pytest.raises(InvalidInputError) as params:
        sift.create(selector_name + "-b", "fsds", n_features=5, params={"k": 10, "ell": 3})
    assert params.value.kind == "invalid-params"

    with pytest.raises(ValueError, match="2-D"):
        sift.push(selector_name, np.ones(5))


def test_feature_columns_ofs_decisions_page_and_clusters(sift: Client, selector_name: str) -> None:
    samples = np.random.default_rng(4).normal(size=(60, 25))
    frame = pd.DataFrame(samples, columns=[f"gene{i}" for i in range(25)])
    created = sift.create(selector_name, "ofs", n_samples=60, params={"epsilon": 0.5})
    assert created.is_feature_stream
    summary = sift.push_features(selector_name, frame, chunk_columns=10)
    receipts = summary.receipts
    assert all(isinstance(r, FeaturesReceipt) for r in receipts)
    decisions = [d for r in receipts if isinstance(r, FeaturesReceipt) for d in r.decisions]
    assert [d.index for d in decisions] == list(range(25))
    assert [d.name for d in decisions] == list(frame.columns)
    assert summary.seen == 25

    page = sift.features(selector_name, offset=5, limit=10)
    assert page.offset == 5 and page.features == decisions[5:15]

    clusters = sift.cluster(selector_name, k=3, seed=1)
    assert clusters.labels.shape == (60,) and set(clusters.labels.tolist()) <= {0, 1, 2}
    assert clusters.features_used == sum(d.kept for d in decisions)


def test_feature_columns_iqrp_match_pivoted_qr(sift: Client, selector_name: str) -> None:
    columns = np.random.default_rng(8).normal(size=(40, 30))
    sift.create(selector_name, "iqrp", n_samples=40)
    summary = sift.push_features(selector_name, columns, chunk_columns=12)
    firsts = [r.first_index for r in summary.receipts if isinstance(r, FeaturesReceipt)]
    assert firsts == [0, 12, 24]
    top = sift.top(selector_name, h=6)
    assert top.strategy == "pivoted-qr" and top.account is not None
    _, _, pivots = scipy.linalg.qr(columns, pivoting=True, mode="economic")
    np.testing.assert_array_equal(top.indices, pivots[:6])


def test_merge_adds_another_selectors_data_exactly(sift: Client, selector_name: str) -> None:
    x = rows(500, 7, seed=9)
    east, west = selector_name + "-east", selector_name + "-west"
    for name, part in ((east, x[:200]), (west, x[200:])):
        sift.create(name, "variance", n_features=7)
        sift.push(name, part)
    receipt = sift.merge(east, west)
    assert receipt.merged is not None and receipt.merged.source == west
    assert receipt.merged.rows == 300 and receipt.rows_seen == 500
    np.testing.assert_allclose(sift.weights(east).weights, x.var(axis=0), rtol=1e-10)


def test_ioc_projection_and_transform(sift: Client, selector_name: str) -> None:
    rng = np.random.default_rng(11)
    classes = rng.integers(0, 3, size=400)
    x = rng.normal(size=(400, 6)) + np.eye(3, 6)[classes] * 4
    sift.create(selector_name, "ioc", n_features=6, params={"n_components": 2})
    sift.push(selector_name, x, classes)
    projection = sift.projection(selector_name)
    assert projection.projection.shape == (6, 2) and projection.n_components == 2
    assert projection.eigenvalues.shape == (2,) and projection.agreement.shape == (2,)
    exact = sift.projection(selector_name, solution="exact")
    assert exact.solution == "exact"

    sample = x[:25]
    mapped = sift.transform(selector_name, sample)
    assert mapped.rows_seen == 400 and mapped.version == projection.version
    np.testing.assert_allclose(mapped.rows, sample @ projection.projection, rtol=1e-10)
    sparse_mapped = sift.transform(selector_name, sp.csr_matrix(sample), solution="exact")
    np.testing.assert_allclose(sparse_mapped.rows, sample @ exact.projection, rtol=1e-10)


def test_views_dense_and_sparse(sift: Client, selector_name: str) -> None:
    rng = np.random.default_rng(12)
    text = sp.random(60, 9, density=0.3, format="csr", random_state=12)
    image = np.abs(rng.normal(size=(60, 4)))
    created = sift.create(
        selector_name, "omvfs", views={"text": 9, "image": 4}, params={"n_clusters": 3}
    )
    assert created.views == {"text": 9, "image": 4}
    sparse_summary = sift.push(selector_name, {"text": text, "image": image}, chunk_rows=30)
    dense_summary = sift.push(selector_name, {"text": text.toarray(), "image": image})
    assert sparse_summary.seen == 60 and dense_summary.seen == 120
    top = sift.top(selector_name, h=3, view="image")
    assert {f.view for f in top.features} == {"image"} and len(top.features) == 3


def test_strategy_and_candidates_reach_the_service(sift: Client, selector_name: str) -> None:
    sift.create(selector_name, "fsds", n_features=20, params={"k": 4, "ell": 8})
    sift.push(selector_name, rows(300, 20, seed=13))
    diverse = sift.top(selector_name, h=4, strategy="diverse", l=6)
    assert diverse.strategy == "pivoted-qr" and diverse.account is not None
    assert diverse.account["l"] == 6 and len(diverse.features) == 4


def test_api_keys_scopes_and_polling_of_pending_chunks(secured: ServiceProcess) -> None:
    """On a service that requires keys and answers chunks with 202 at once: keys are created,
    listed and revoked; errors say which; a waiting push polls until its chunk is applied."""
    with Client(secured.url) as anonymous, pytest.raises(AuthenticationError) as missing:
        anonymous.list_selectors()
    assert missing.value.status == 401

    with Client(secured.url, api_key=ADMIN_TOKEN) as admin:
        writer = admin.create_key(["write"], prefix="team-a-", label="producers")
        assert writer.info.scopes == ["write"] and writer.key.startswith("sift_")
        assert writer.info.id in {k.id for k in admin.list_keys()}
        admin.create("team-a-news", "variance", n_features=3)

        with Client(secured.url, api_key=writer.key) as producer:
            summary = producer.push("team-a-news", rows(90, 3), chunk_rows=30)
            assert [r.status for r in summary.receipts] == ["applied"] * 3
            assert summary.seen == 90  # each 202 was followed up until applied
            pending = producer.push_chunk("team-a-news", rows(5, 3), wait=False)
            assert pending.status == "pending"
            with pytest.raises(PermissionDeniedError) as forbidden:
                producer.create("team-a-other", "variance", n_features=3)
            assert forbidden.value.status == 403

        admin.revoke_key(writer.info.id)
        assert writer.info.id not in {k.id for k in admin.list_keys()}
        with Client(secured.url, api_key=writer.key) as revoked, pytest.raises(AuthenticationError):
            revoked.describe("team-a-news")


def test_export_and_import(sift: Client, selector_name: str) -> None:
    x = rows(300, 6, seed=14)
    sift.create(selector_name, "fsds", n_features=6, params={"k": 3})
    sift.push(selector_name, x, chunk_rows=100)
    archive = sift.export(selector_name)
    assert isinstance(archive, bytes) and archive

    copy = sift.import_selector(archive, name=selector_name + "-copy")
    original = sift.describe(selector_name)
    assert (copy.name, copy.method, copy.version, copy.rows_seen) == (
        selector_name + "-copy",
        "fsds",
        original.version,
        300,
    )
    assert copy.params == original.params
    assert sift.top(selector_name + "-copy", h=6).features == sift.top(selector_name, h=6).features
    # It goes on from there, as the original would.
    sift.push(selector_name + "-copy", x[:50])
    assert sift.describe(selector_name + "-copy").rows_seen == 350

    with pytest.raises(ConflictError):
        sift.import_selector(archive)  # under its own name, which exists
    with pytest.raises(InvalidInputError) as damaged:
        sift.import_selector(archive[: len(archive) // 2], name=selector_name + "-broken")
    assert damaged.value.status == 422


def test_history_newest_first(sift: Client, selector_name: str) -> None:
    sift.create(selector_name, "variance", n_features=4)
    summary = sift.push(selector_name, rows(90, 4, seed=15) * [1, 2, 3, 4], chunk_rows=30)
    history = sift.history(selector_name, h=2, limit=10)
    assert (history.name, history.method, history.h) == (selector_name, "variance", 2)
    versions = [v.version for v in history.versions]
    assert versions == sorted(versions, reverse=True) and versions[0] == summary.version
    newest = history.versions[0]
    assert newest.rows_seen == 90 and len(newest.top) == 2
    assert [f.index for f in newest.top] == sift.top(selector_name, h=2).indices.tolist()


def test_list_pages(sift: Client, selector_name: str) -> None:
    for i in range(3):
        sift.create(f"{selector_name}-{i}", "variance", n_features=2)
    everything = sift.list_selectors()
    names = [s.name for s in everything]
    assert names == sorted(names) and {f"{selector_name}-{i}" for i in range(3)} <= set(names)
    first = sift.list_page(limit=2)
    assert [s.name for s in first.selectors] == names[:2] and first.next == names[1]
    following = sift.list_page(limit=2, after=first.next)
    assert [s.name for s in following.selectors] == names[2:4]
    assert [s.name for s in sift.list_selectors(page_size=2)] == names
