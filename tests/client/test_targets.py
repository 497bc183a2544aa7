"""Rows with a target from the client against a real service: ``push(X, y=...)`` (dense,
sparse, a DataFrame's column, a file's), one chunk as it is, streams, and ``y`` refused when it
is not what the selector takes. The scores and p-values are scikit-learn's ``f_regression``
and ``r_regression`` of the same rows."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_regression
from sklearn.feature_selection import f_regression, r_regression

from siftstream import AsyncClient, Client, UnsupportedMediaTypeError
from siftstream.results import Top
from tests.support.harness import ServiceProcess

NAMES = [f"x{i}" for i in range(8)]


def regression(seed: int = 0, n: int = 600) -> tuple[np.ndarray, np.ndarray]:
    """Rows where 3 of 8 features carry the target, with noise; a target of both signs."""
    x, y = make_regression(
        n_samples=n, n_features=8, n_informative=3, noise=5.0, bias=-40.0, random_state=seed
    )
    return x, y


def sparse_regression(seed: int = 1) -> tuple[sp.csr_matrix, np.ndarray]:
    matrix = sp.random(500, 8, density=0.3, format="csr", random_state=seed)
    coefficients = np.array([0.0, 4.0, 0.0, -3.0, 0.0, 0.0, 1.0, 0.0])
    noise = np.random.default_rng(seed).normal(scale=0.5, size=500)
    return matrix, np.asarray(matrix @ coefficients).ravel() + noise


def p_values(top: Top) -> np.ndarray:
    """The p-value of every feature of a ``/top`` that ranks them all, by index."""
    found = np.full(len(top.features), np.nan)
    for feature in top.features:
        assert feature.p_value is not None
        found[feature.index] = feature.p_value
    return found


def assert_like_scikit_learn(sift: Client, name: str, x: object, y: np.ndarray) -> None:
    """The selector's scores and p-values are scikit-learn's for the same rows: F for
    f_regression, |r| for correlation (whose p-values are the F-test's)."""
    method = sift.describe(name).method
    f, p = f_regression(x, y)
    expected = f if method == "f_regression" else np.abs(r_regression(x, y))
    weights = sift.weights(name).weights
    np.testing.assert_allclose(weights, expected, rtol=1e-9)
    top = sift.top(name, h=len(expected))
    np.testing.assert_allclose([t.score for t in top.features], weights[top.indices])
    np.testing.assert_allclose(p_values(top), p, rtol=1e-9, atol=1e-300)


@pytest.mark.parametrize("method", ["f_regression", "correlation"])
def test_dense_rows_with_a_target_in_chunks(sift: Client, selector_name: str, method: str) -> None:
    x, y = regression()
    created = sift.create(selector_name, method, n_features=8)
    assert created.takes_targets and not created.labelled
    assert created.chunk_kind == "rows with a target"
    summary = sift.push(selector_name, x, y, chunk_rows=250)
    assert [r.items for r in summary.receipts] == [250, 250, 100] and summary.seen == 600
    assert_like_scikit_learn(sift, selector_name, x, y)
    informative = set(np.argsort(-np.abs(r_regression(x, y)))[:3].tolist())
    assert set(sift.top(selector_name, h=3).indices.tolist()) == informative


@pytest.mark.parametrize("method", ["f_regression", "correlation"])
def test_sparse_rows_with_a_target(sift: Client, selector_name: str, method: str) -> None:
    matrix, y = sparse_regression()
    sift.create(selector_name, method, n_features=8)
    summary = sift.push(selector_name, matrix.tocsc(), y=y, chunk_rows=128)
    assert summary.seen == 500 and len(summary.receipts) == 4
    assert_like_scikit_learn(sift, selector_name, matrix, y)
    assert sorted(sift.top(selector_name, h=2).indices.tolist()) == [1, 3]


@pytest.mark.parametrize("target_from", ["series", "column", "list", "integers"])
def test_a_target_from_a_series_a_column_a_list_or_integers(
    sift: Client, selector_name: str, target_from: str
) -> None:
    x, y = regression(seed=2, n=300)
    frame = pd.DataFrame(x, columns=NAMES)
    target: object = y
    if target_from == "series":
        target = pd.Series(y, index=np.arange(300) + 1000)  # any index: rows are in order
    elif target_from == "column":
        frame.insert(3, "price", y)  # a named column, not a feature
        target = "price"
    elif target_from == "list":
        target = y.tolist()
    else:  # integer targets are numbers, not class labels
        y = np.round(y).astype(np.int64)
        target = y
    sift.create(selector_name, "f_regression", n_features=8, feature_names=NAMES)
    sift.push(selector_name, frame, target, chunk_rows=100)
    assert_like_scikit_learn(sift, selector_name, x, y.astype(np.float64))
    assert sift.describe(selector_name).raw["target"]["mean"] == pytest.approx(y.mean())


def test_one_chunk_as_it_is_and_the_async_client(
    service: ServiceProcess, sift: Client, selector_name: str
) -> None:
    x, y = regression(seed=3, n=200)
    sift.create(selector_name, "correlation", n_features=8)
    receipt = sift.push_chunk(selector_name, x[:120], targets=y[:120].tolist())
    assert receipt.rows == 120 and receipt.rows_seen == 120
    sift.push_chunk(selector_name, sp.csr_matrix(x[120:]), targets=y[120:])
    assert_like_scikit_learn(sift, selector_name, x, y)

    async def push() -> np.ndarray:
        async with AsyncClient(service.url) as client:
            await client.create(f"{selector_name}-async", "f_regression", n_features=8)
            await client.push(f"{selector_name}-async", x, y, chunk_rows=64)
            return (await client.weights(f"{selector_name}-async")).weights

    np.testing.assert_allclose(asyncio.run(push()), f_regression(x, y)[0], rtol=1e-9)


def test_a_files_target_column_or_array(sift: Client, selector_name: str, tmp_path: Path) -> None:
    """A CSV, Parquet or .npz file's target (its column or array named by y, then not a
    feature), or a target given apart for an .npy: the same scores as the arrays'."""
    x, y = regression(seed=4, n=300)
    csv = tmp_path / "rows.csv"
    with open(csv, "w") as handle:
        handle.write(",".join(["price", *NAMES]) + "\n")
        for value, row in zip(y, x, strict=True):
            handle.write(",".join(repr(float(v)) for v in (value, *row)) + "\n")
    parquet = tmp_path / "rows.parquet"
    pq.write_table(pa.table({**{n: x[:, i] for i, n in enumerate(NAMES)}, "price": y}), parquet)
    npz = tmp_path / "rows.npz"
    np.savez(npz, rows=x, price=y)
    for path in (csv, parquet, npz):
        name = f"{selector_name}-{path.suffix[1:]}"
        sift.create(name, "f_regression", n_features=8, feature_names=NAMES)
        sift.push(name, path, y="price", chunk_rows=70)
        assert_like_scikit_learn(sift, name, x, y)
    npy = tmp_path / "rows.npy"
    np.save(npy, x)
    sift.create(f"{selector_name}-npy", "f_regression", n_features=8)
    sift.push(f"{selector_name}-npy", str(npy), y=y, chunk_rows=100)
    assert_like_scikit_learn(sift, f"{selector_name}-npy", x, y)


def test_a_stream_of_rows_with_a_target(sift: Client, selector_name: str) -> None:
    """A stream created with targets feeds f_regression, correlation and the row methods
    (which leave the target out); its chunks carry the target."""
    x, y = regression(seed=5, n=400)
    frame = pd.DataFrame(x, columns=NAMES).assign(price=y)
    stream = f"{selector_name}-s"
    created = sift.create_stream(stream, data=frame, y="price", targets=True)
    assert created.takes_targets and not created.labelled
    assert created.n_features == 8 and created.has_feature_names
    assert {"f_regression", "correlation", "variance"} <= set(created.methods)
    for method in ("f_regression", "correlation", "variance"):
        sift.create(f"{selector_name}-{method}", method, stream=stream)
    summary = sift.push_stream(stream, frame, y="price", chunk_rows=150)
    assert summary.items == 400 and len(summary.receipts) == 3
    sift.push_stream_chunk(stream, x[:10], targets=y[:10])
    both_x, both_y = np.vstack([x, x[:10]]), np.concatenate([y, y[:10]])
    for method in ("f_regression", "correlation"):
        assert_like_scikit_learn(sift, f"{selector_name}-{method}", both_x, both_y)
    np.testing.assert_allclose(
        sift.weights(f"{selector_name}-variance").weights, both_x.var(axis=0), rtol=1e-9
    )
    plain = sift.create_stream(f"{selector_name}-t", n_features=8, targets=True)
    assert plain.chunk_kind == "rows with a target"


def test_the_methods_say_their_chunk_kind(sift: Client) -> None:
    methods = {m.name: m for m in sift.methods()}
    for name in ("f_regression", "correlation"):
        assert methods[name].chunk_kind == "rows with a target"
        assert methods[name].route == "chunks" and "p-values" in methods[name].capabilities


def test_a_y_that_is_not_what_the_selector_takes_is_refused_before_any_chunk(
    sift: Client, selector_name: str
) -> None:
    x, y = regression(seed=6, n=50)
    regressor, plain, labelled = (f"{selector_name}-{kind}" for kind in ("r", "p", "l"))
    sift.create(regressor, "f_regression", n_features=8)
    sift.create(plain, "fsds", n_features=8)
    sift.create(labelled, "anova", n_features=8)
    takes = r"selector '.*-r' \(f_regression\) takes rows with a target \(one finite number"
    refused = [
        (["cat", "dog"] * 25, "targets must be numbers; target 0 is 'cat'"),  # class labels
        (np.where(np.arange(50) % 2, "a", "b"), "targets must be numbers; target 0 is 'b'"),
        (np.arange(50) % 2 == 0, "targets must be numbers; target 0 is True"),
        ([1.0, None] * 25, "targets must be numbers; target 1 is None"),
        (np.r_[y[:49], np.nan], "targets must be finite numbers; target 49 is nan"),
        (np.r_[np.inf, y[1:]], "targets must be finite numbers; target 0 is inf"),
        (y.reshape(-1, 1), r"expected one target per row \(1-D\); got shape \(50, 1\)"),
        (y[:49], r"expected 50 targets \(one per row\); got 49"),
    ]
    for bad, why in refused:
        with pytest.raises(ValueError, match=f"{takes}.*{why}"):
            sift.push(regressor, x, bad)
    with pytest.raises(ValueError, match="no column 'price' to take targets from"):
        sift.push(regressor, pd.DataFrame(x), "price")
    with pytest.raises(ValueError, match=r"\(fsds\) takes rows without labels or a target: push"):
        sift.push(plain, x, y)
    # A target is not class labels: what the labelled selector takes is said.
    with pytest.raises(ValueError, match=r"\(anova\) takes labelled rows \(one integer or str"):
        sift.push(labelled, x, y)
    with pytest.raises(ValueError, match="labels or targets, not both"):
        sift.push_chunk(regressor, x, [0] * 50, targets=y)
    with pytest.raises(ValueError, match="targets must be finite numbers; target 0 is nan"):
        sift.push_chunk(regressor, x[:2], targets=[np.nan, 1.0])
    assert sift.describe(regressor).rows_seen == 0 and sift.describe(plain).rows_seen == 0
    # Rows without their target: the service says what its chunks carry.
    with pytest.raises(UnsupportedMediaTypeError, match="cannot carry targets"):
        sift.push(regressor, x)
    # Streams alike: a y for a stream whose rows carry none.
    sift.create_stream(f"{selector_name}-s", n_features=8)
    with pytest.raises(ValueError, match=r"stream '.*-s' takes rows without labels or a target"):
        sift.push_stream(f"{selector_name}-s", x, y)
    sift.create_stream(f"{selector_name}-st", n_features=8, targets=True)
    with pytest.raises(ValueError, match=r"stream '.*-st' takes rows with a target .*'cat'"):
        sift.push_stream(f"{selector_name}-st", x, ["cat"] * 50)
