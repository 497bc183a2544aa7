"""F-regression and correlation selectors over HTTP: rows with a target in every format a
labelled chunk has, scikit-learn's scores and p-values in the answers, streams of rows with a
target, and bad targets refused before anything is written."""

from __future__ import annotations

import io
import warnings
from typing import Any

import httpx
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_diabetes
from sklearn.feature_selection import SelectFdr, f_regression, r_regression

from tests.support.api import assert_problem, assert_untouched, create_selector, csr_json

pytestmark = pytest.mark.asyncio

NAMES = ["age", "sex", "bmi", "bp", "s1", "s2", "s3", "s4", "s5", "s6"]


def diabetes() -> tuple[np.ndarray, np.ndarray]:
    x, y = load_diabetes(return_X_y=True)
    return np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)


def npz_targets(rows: Any, targets: Any, key: str = "targets") -> bytes:
    buffer = io.BytesIO()
    arrays: dict[str, Any] = {key: np.asarray(targets)}
    if sp.issparse(rows):
        csr = sp.csr_matrix(rows)
        arrays |= {"data": csr.data, "indices": csr.indices, "indptr": csr.indptr}
        arrays["shape"] = np.array(csr.shape)
    else:
        arrays["rows"] = np.asarray(rows)
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def csv_of(x: np.ndarray, y: np.ndarray, target: str = "progression") -> bytes:
    lines = [",".join([*NAMES[:4], target, *NAMES[4:]])]
    for row, value in zip(x, y, strict=True):
        fields = [repr(float(v)) for v in row]
        lines.append(",".join([*fields[:4], repr(float(value)), *fields[4:]]))
    return ("\n".join(lines) + "\n").encode()


def arrow_of(x: np.ndarray, y: np.ndarray) -> bytes:
    pa = pytest.importorskip("pyarrow")
    table = pa.table({"target": y, **{name: x[:, i] for i, name in enumerate(NAMES)}})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def reference(x: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f, p = f_regression(x, y)
        r = r_regression(x, y)
    return {"f": f, "p": p, "r": r}


async def top_of(http: httpx.AsyncClient, name: str, **params: Any) -> dict[str, Any]:
    response = await http.get(f"/v1/selectors/{name}/top", params={"h": 10, **params})
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def assert_answers(top: dict[str, Any], scores: np.ndarray, p: np.ndarray) -> None:
    order = np.argsort(-scores, kind="stable")
    assert [feature["index"] for feature in top["features"]] == order.tolist()
    np.testing.assert_allclose([f["score"] for f in top["features"]], scores[order], rtol=1e-9)
    np.testing.assert_allclose([f["p_value"] for f in top["features"]], p[order], rtol=1e-9)


async def test_every_format_of_rows_with_a_target_gives_scikit_learns_answers(
    client: httpx.AsyncClient,
) -> None:
    """JSON (dense and CSR), .npz (``targets`` and ``y``, dense and CSR), CSV and Arrow with
    ``?target=``: the same rows in any format are the same chunk, and the streamed F, |r| and
    p-values are scikit-learn's on all the rows."""
    x, y = diabetes()
    for name in ("f_regression", "correlation"):
        created = await create_selector(client, name, 10, method=name, feature_names=NAMES)
        assert created["chunk_kind"] == "rows with a target"
    parts = np.array_split(np.arange(len(y)), 7)
    sent = []
    for i, at in enumerate(parts):
        rows, targets = x[at], y[at]
        bodies: list[tuple[dict[str, Any], Any]] = [
            ({"json": {"rows": rows.tolist(), "targets": targets.tolist()}}, {}),
            ({"json": {**csr_json(sp.csr_matrix(rows)), "targets": targets.tolist()}}, {}),
            ({"content": npz_targets(rows, targets)}, "application/x-npz"),
            ({"content": npz_targets(sp.csr_matrix(rows), targets, "y")}, "application/x-npz"),
            ({"content": csv_of(rows, targets)}, ("text/csv", "progression")),
            (
                {"content": arrow_of(rows, targets)},
                ("application/vnd.apache.arrow.stream", "target"),
            ),
            (
                {
                    "json": {
                        "rows": rows.tolist(),
                        "targets": targets.tolist(),
                        "feature_names": NAMES,
                    }
                },
                {},
            ),
        ]
        body, media = bodies[i]
        headers, params = {}, {}
        if isinstance(media, str):
            headers["content-type"] = media
        elif isinstance(media, tuple):
            headers["content-type"], params["target"] = media
        sent.append(i)
        for name in ("f_regression", "correlation"):
            response = await client.post(
                f"/v1/selectors/{name}/chunks", headers=headers, params=params, **body
            )
            assert response.status_code == 200, response.text
    assert len(sent) == 7
    expected = reference(x, y)
    assert_answers(await top_of(client, "f_regression"), expected["f"], expected["p"])
    assert_answers(await top_of(client, "correlation"), np.abs(expected["r"]), expected["p"])
    described = (await client.get("/v1/selectors/f_regression")).json()
    assert described["rows_seen"] == len(y)
    assert described["target"]["mean"] == pytest.approx(y.mean(), rel=1e-12)
    assert described["target"]["variance"] == pytest.approx(y.var(), rel=1e-9)


async def test_selections_by_p_value_are_select_fdrs(client: httpx.AsyncClient) -> None:
    x, y = diabetes()
    rng = np.random.default_rng(4)
    noisy = np.column_stack([x, rng.standard_normal((len(y), 10))])
    await create_selector(client, "fdr", 20, method="f_regression")
    response = await client.post(
        "/v1/selectors/fdr/chunks", json={"rows": noisy.tolist(), "targets": y.tolist()}
    )
    assert response.status_code == 200, response.text
    top = await top_of(client, "fdr", h=20, alpha=0.01, correction="fdr")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wanted = set(
            np.flatnonzero(SelectFdr(f_regression, alpha=0.01).fit(noisy, y).get_support())
        )
    assert {f["index"] for f in top["features"]} == wanted
    assert 0 < len(wanted) < 20


async def test_a_stream_of_rows_with_a_target_feeds_target_and_row_methods(
    client: httpx.AsyncClient,
) -> None:
    x, y = diabetes()
    created = await client.post(
        "/v1/streams", json={"name": "patients", "n_features": 10, "targets": True}
    )
    assert created.status_code == 201, created.text
    assert created.json()["chunk_kind"] == "rows with a target"
    assert {"f_regression", "correlation", "variance"} <= set(created.json()["methods"])
    assert "anova" not in created.json()["methods"]
    for name, method in (("sf", "f_regression"), ("sv", "variance")):
        response = await client.post(
            "/v1/selectors", json={"name": name, "method": method, "stream": "patients"}
        )
        assert response.status_code == 201, response.text
    for at in np.array_split(np.arange(len(y)), 3):
        response = await client.post(
            "/v1/streams/patients/chunks",
            json={"rows": x[at].tolist(), "targets": y[at].tolist()},
        )
        assert response.status_code == 200, response.text
    expected = reference(x, y)
    assert_answers(await top_of(client, "sf"), expected["f"], expected["p"])
    variance = await top_of(client, "sv")
    np.testing.assert_allclose(
        sorted(f["score"] for f in variance["features"]), sorted(x.var(axis=0)), rtol=1e-9
    )
    both = await client.post(
        "/v1/streams", json={"name": "x", "n_features": 3, "targets": True, "labelled": True}
    )
    assert_problem(both, 422, "labelled and targets")


async def test_bad_targets_are_refused_and_leave_the_selector_untouched(
    client: httpx.AsyncClient,
) -> None:
    await create_selector(client, "s", 3, method="f_regression")
    rows = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    url = "/v1/selectors/s/chunks"
    cases: list[tuple[dict[str, Any], int, tuple[str, ...]]] = [
        ({"json": {"rows": rows, "targets": [1.0]}}, 422, ("expected 2 targets", "got 1")),
        ({"json": {"rows": rows, "targets": [1.0, "2"]}}, 422, ("numbers", "target 1", '"2"')),
        ({"json": {"rows": rows, "targets": [1.0, True]}}, 422, ("numbers", "target 1")),
        ({"json": {"rows": rows, "targets": [1.0, 1e300]}}, 422, ("within", "target 1")),
        ({"json": {"rows": rows, "targets": 1.0}}, 422, ("a list",)),
        ({"json": {"rows": rows}}, 422, ("rows with a target", "targets")),
        ({"json": {"rows": rows, "labels": [0, 1]}}, 422, ("rows with a target",)),
        (
            {
                "content": npz_targets(np.array(rows), np.array([1.0, np.nan])),
                "headers": {"content-type": "application/x-npz"},
            },
            422,
            ("finite", "target 1"),
        ),
        (
            {
                "content": npz_targets(np.array(rows), np.array([[1.0], [2.0]])),
                "headers": {"content-type": "application/x-npz"},
            },
            422,
            ("1-D",),
        ),
        (
            {"content": b"a,b,c,y\n1,2,3,4\n", "headers": {"content-type": "text/csv"}},
            422,
            ("?target=<column>",),
        ),
        (
            {
                "content": b"a,b,c,y\n1,2,3,4\n",
                "headers": {"content-type": "text/csv"},
                "params": {"target": "z"},
            },
            422,
            ("target='z' names no column",),
        ),
        (
            {
                "content": b"a,b,c,y\n1,2,3,4\n",
                "headers": {"content-type": "text/csv"},
                "params": {"labels": "y"},
            },
            422,
            ("labels='y'", "?target=<column>"),
        ),
        (
            {"json": {"rows": rows, "targets": [1, 2]}, "params": {"target": "y"}},
            422,
            ("target='y'", "JSON or .npz chunk carries its targets"),
        ),
    ]
    for request, status, fragments in cases:
        response = await client.post(url, **request)
        assert_problem(response, status, *fragments)
    await assert_untouched(client, "s")
    await create_selector(client, "plain", 3, method="variance")
    response = await client.post(
        "/v1/selectors/plain/chunks", json={"rows": rows, "targets": [1.0, 2.0]}
    )
    assert_problem(response, 422, "targets apply to methods of rows with a target")
    response = await client.post(
        "/v1/selectors/plain/chunks",
        content=b"a,b,c,y\n1,2,3,4\n",
        headers={"content-type": "text/csv"},
        params={"target": "y"},
    )
    assert_problem(response, 422, "target='y' names a target column")
