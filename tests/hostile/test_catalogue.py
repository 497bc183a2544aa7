"""The hostile-input catalogue: every route and method attacked through a real service process.

Each case sends one hostile request to a live ``sift serve`` (authentication on, real
redis-server) and requires the documented 4xx problem; after every case the process still
answers, and at the end every selector has exactly the state and version it had before, with
nothing pending, and the process's peak memory stayed bounded. The cases are the ones the
reliability issue found (a CSC ``.npz`` that segfaulted scipy, a ``.npy`` header claiming 10^12
elements, nested JSON, huge integers, names with a newline, values near 1e308, ...) and more.
"""

from __future__ import annotations

import contextlib
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np
import pytest

from tests.support import bodies
from tests.support.api import npz_labelled
from tests.support.harness import ServiceProcess, live_service
from tests.support.hostile import peak_rss

TOKEN = "hostile-admin-token"
ADMIN = {"authorization": f"Bearer {TOKEN}"}
NPY = {"content-type": "application/x-npy"}
NPZ = {"content-type": "application/x-npz"}
JSON = {"content-type": "application/json"}
TEXT = {"content-type": "text/plain"}
CSV = {"content-type": "text/csv"}
ARROW = {"content-type": "application/vnd.apache.arrow.stream"}
M = 4
#: Limits of the service under attack (small, so that over-limit bodies are cheap to send).
MAX_BODY = 4 * 2**20
MAX_JSON = 1 * 2**20
#: The peak memory the attacks may add to the service (it starts at about 100 MB).
PEAK_GROWTH_BOUND = 300 * 2**20


@dataclass(frozen=True)
class Case:
    """One hostile request and the answer it must get."""

    id: str
    method: str
    path: str
    status: int
    fragment: str = ""
    json: Any = None
    content: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    admin: bool = True
    #: Send the body in pieces without Content-Length (chunked transfer encoding).
    chunked: bool = False


def chunk(selector: str, case_id: str, status: int, fragment: str = "", **kwargs: Any) -> Case:
    return Case(case_id, "POST", f"/v1/selectors/{selector}/chunks", status, fragment, **kwargs)


def create(case_id: str, body: Any, status: int = 422, fragment: str = "") -> Case:
    return Case(case_id, "POST", "/v1/selectors", status, fragment, json=body)


HUGE = 1234567890123456789012345678901234
FINITE = "finite"

CASES = [
    # -- creating selectors ---------------------------------------------------------------
    create("name-newline", {"name": "h-fsds\n", "method": "fsds", "n_features": 3}),
    create("name-braces", {"name": "a{b}", "method": "fsds", "n_features": 3}),
    create("name-too-long", {"name": "a" * 129, "method": "fsds", "n_features": 3}),
    create("name-huge-int", {"name": HUGE}),
    create("n-features-huge-int", {"name": "x", "method": "fsds", "n_features": HUGE}),
    create("n-features-bool", {"name": "x", "method": "fsds", "n_features": True}),
    create("unknown-method", {"name": "x", "method": "lasso", "n_features": 3}, 422, "lasso"),
    create("unknown-param", {"name": "x", "method": "fsds", "n_features": 3, "params": {"q": 1}}),
    create(
        "fsds-1e7-features",
        {"name": "x", "method": "fsds", "n_features": 10**7},
        422,
        "SIFT_MAX_STATE_BYTES",
    ),
    create(
        "fsds-ell-1e9",
        {"name": "x", "method": "fsds", "n_features": 10, "params": {"ell": 10**9}},
        422,
        "SIFT_MAX_STATE_BYTES",
    ),
    create(
        "fsds-kernel-components-1e9",
        {
            "name": "x",
            "method": "fsds",
            "n_features": 10,
            "params": {"kernel": "gaussian", "kernel_components": 10**9},
        },
        422,
        "SIFT_MAX_STATE_BYTES",
    ),
    create(
        "ioc-1e7-components",
        {"name": "x", "method": "ioc", "n_features": 10**7, "params": {"n_components": 10**7}},
        422,
        "SIFT_MAX_STATE_BYTES",
    ),
    create(
        "omvfs-1e9-clusters",
        {"name": "x", "method": "omvfs", "views": {"a": 10}, "params": {"n_clusters": 10**9}},
        422,
        "SIFT_MAX_STATE_BYTES",
    ),
    create(
        "ofs-ridge-1e5-samples",
        {"name": "x", "method": "ofs", "n_samples": 10**5, "params": {"ridge": 1.0}},
        422,
        "SIFT_MAX_STATE_BYTES",
    ),
    create(
        "feature-names-count",
        {"name": "x", "method": "fsds", "n_features": 3, "feature_names": ["a"]},
    ),
    create("view-name-newline", {"name": "x", "method": "omvfs", "views": {"a\n": 2}}),
    Case(
        "create-deep-json",
        "POST",
        "/v1/selectors",
        400,
        "JSON",
        content=bodies.nested(100_000),
        headers={"content-type": "application/json"},
    ),
    Case(
        "create-not-json",
        "POST",
        "/v1/selectors",
        400,
        "JSON",
        content=b"{name: x",
        headers={"content-type": "application/json"},
    ),
    Case(
        "create-text-plain",
        "POST",
        "/v1/selectors",
        415,
        "application/json",
        content=b"name=x",
        headers=TEXT,
    ),
    Case(
        "create-over-json-limit",
        "POST",
        "/v1/selectors",
        413,
        "limit",
        content=b" " * (MAX_JSON + 1),
        headers={"content-type": "application/json"},
    ),
    # -- sparse matrices scipy must never see unchecked -------------------------------------
    chunk(
        "h-fsds",
        "csc-row-far-out",
        422,
        "out of range",
        content=bodies.csc_out_of_range(1_000_000),
        headers=NPZ,
    ),
    chunk(
        "h-fsds",
        "csc-row-one-past",
        422,
        "out of range",
        content=bodies.csc_out_of_range(3),
        headers=NPZ,
    ),
    chunk(
        "h-fsds",
        "csc-indptr-decreasing",
        422,
        "",
        content=bodies.sparse_npz(
            "csc",
            (3, 4),
            data=np.array([1.0, 2.0]),
            indices=np.array([0, 1]),
            indptr=np.array([0, 2, 1, 2, 2]),
        ),
        headers=NPZ,
    ),
    chunk(
        "h-fsds",
        "coo-col-out",
        422,
        "",
        content=bodies.sparse_npz(
            "coo", (2, 4), data=np.array([1.0]), row=np.array([0]), col=np.array([4])
        ),
        headers=NPZ,
    ),
    chunk(
        "h-fsds",
        "csr-negative-index",
        422,
        "",
        content=bodies.sparse_npz(
            "csr", (1, 4), data=np.array([1.0]), indices=np.array([-1]), indptr=np.array([0, 1])
        ),
        headers=NPZ,
    ),
    chunk(
        "h-fsds",
        "csr-float-indices",
        422,
        "",
        content=bodies.sparse_npz(
            "csr", (1, 4), data=np.array([1.0]), indices=np.array([0.5]), indptr=np.array([0, 1])
        ),
        headers=NPZ,
    ),
    chunk(
        "h-fsds",
        "bsr-format",
        422,
        "",
        content=bodies.sparse_npz(
            "bsr", (1, 4), data=np.ones((1, 1, 4)), indices=np.array([0]), indptr=np.array([0, 1])
        ),
        headers=NPZ,
    ),
    chunk(
        "h-fsds",
        "coo-huge-row-count",
        422,
        "",
        content=bodies.sparse_npz(
            "coo", (10**12, 4), data=np.zeros(0), row=np.zeros(0, int), col=np.zeros(0, int)
        ),
        headers=NPZ,
    ),
    chunk("h-fsds", "npz-zip-bomb", 413, "", content=bodies.zip_bomb(40 * 2**20), headers=NPZ),
    chunk("h-fsds", "npz-lying-size", 400, "", content=bodies.lying_zip(), headers=NPZ),
    chunk(
        "h-fsds",
        "npz-bzip2-bomb",
        422,
        "stored or deflated",
        content=bodies.bzip2_bomb(256 * 2**20),
        headers=NPZ,
    ),
    chunk(
        "h-fsds",
        "npz-lzma-member",
        422,
        "stored or deflated",
        content=bodies.compressed_npz(zipfile.ZIP_LZMA),
        headers=NPZ,
    ),
    Case(
        "ocfs-npz-bzip2-member",
        "POST",
        "/v1/selectors/h-ocfs/chunks",
        422,
        "stored or deflated",
        content=bodies.compressed_npz(zipfile.ZIP_BZIP2),
        headers=NPZ,
    ),
    Case(
        "omvfs-npz-bzip2-member",
        "POST",
        "/v1/selectors/h-omvfs/chunks",
        422,
        "stored or deflated",
        content=bodies.compressed_npz(zipfile.ZIP_BZIP2),
        headers=NPZ,
    ),
    chunk(
        "h-fsds",
        "npy-shape-4300-digits",
        422,
        "entries along each axis",
        content=bodies.npy_header("<f8", (10**4299, 4)),
        headers=NPY,
    ),
    chunk(
        "h-fsds",
        "npy-shape-2-63-by-0",
        422,
        "entries along each axis",
        content=bodies.npy_header("<f8", (2**63, 0)),
        headers=NPY,
    ),
    chunk("h-fsds", "npz-many-members", 422, "", content=bodies.many_members(500), headers=NPZ),
    chunk("h-fsds", "npz-not-zip", 400, "", content=b"PK\x03\x04 not a zip", headers=NPZ),
    # -- .npy headers and dtypes -------------------------------------------------------------
    chunk(
        "h-fsds",
        "npy-claims-1e12",
        400,
        "",
        content=bodies.npy_header("<f8", (10**6, 10**6), b"\0" * 64),
        headers=NPY,
    ),
    chunk(
        "h-fsds",
        "npy-object-pickle",
        422,
        "pickle",
        content=bodies.npy(np.array([[1, "a", None, 2]], dtype=object)),
        headers=NPY,
    ),
    chunk(
        "h-fsds",
        "npy-void",
        422,
        "",
        content=bodies.npy_header("|V8", (1, 4), b"\0" * 32),
        headers=NPY,
    ),
    chunk(
        "h-fsds",
        "npy-structured",
        422,
        "",
        content=bodies.npy(np.zeros((1, 4), dtype=[("a", "<f4"), ("b", "<i4")])),
        headers=NPY,
    ),
    chunk(
        "h-fsds",
        "npy-complex",
        422,
        "complex",
        content=bodies.npy(np.ones((1, M), dtype=complex)),
        headers=NPY,
    ),
    chunk(
        "h-fsds",
        "npy-float128-overflow",
        422,
        "",
        content=bodies.npy(np.full((1, M), 1e400, dtype=np.longdouble)),
        headers=NPY,
    ),
    chunk(
        "h-fsds",
        "npy-big-endian-nan",
        422,
        FINITE,
        content=bodies.big_endian(np.array([[1.0, np.nan, 0.0, 1.0]])),
        headers=NPY,
    ),
    chunk("h-fsds", "npy-3d", 422, "", content=bodies.npy(np.ones((1, 2, 2))), headers=NPY),
    chunk(
        "h-fsds", "npy-truncated", 400, "", content=bodies.npy(np.ones((4, M)))[:-8], headers=NPY
    ),
    chunk(
        "h-fsds",
        "npy-datetime",
        422,
        "",
        content=bodies.npy(np.zeros((1, M), dtype="datetime64[s]")),
        headers=NPY,
    ),
    chunk("h-fsds", "npy-garbage", 400, "", content=b"\x93NUMPY garbage", headers=NPY),
    # -- JSON rows ---------------------------------------------------------------------------
    chunk("h-fsds", "json-nested-element", 422, "", json=[[1, 2, 3, [4]]]),
    *(
        Case(
            f"json-{where}-nested-{depth}",
            "POST",
            path,
            422,
            "",
            content=bodies.json_with(template, deep=bodies.deep(depth)),
            headers=JSON,
        )
        for depth in (300, 1000)
        for where, path, template in (
            ("row", "/v1/selectors/h-fsds/chunks", '[[1, 2, 3, "@deep@"]]'),
            (
                "csr-data",
                "/v1/selectors/h-fsds/chunks",
                '{"shape": [1, 4], "indptr": [0, 1], "indices": [0], "data": ["@deep@"]}',
            ),
            ("ofs-column", "/v1/selectors/h-ofs/features", '{"columns": [[1, 2, "@deep@"]]}'),
            (
                "view",
                "/v1/selectors/h-omvfs/chunks",
                '{"views": {"a": [[1, "@deep@"]], "b": [[1, 2]]}}',
            ),
            (
                "labelled-row",
                "/v1/selectors/h-ocfs/chunks",
                '{"rows": [[1, 2, 3, "@deep@"]], "labels": [1]}',
            ),
            (
                "label",
                "/v1/selectors/h-ocfs/chunks",
                '{"rows": [[1, 2, 3, 4]], "labels": ["@deep@"]}',
            ),
        )
    ),
    chunk("h-fsds", "json-rows-nested", 422, "", json={"rows": [[1, 2, {"a": 1}, 4]]}),
    chunk("h-raw", "json-1e308", 422, "", json=[[1e308, 1e308, 1e308, 1e308]]),
    chunk("h-raw", "json-1e51", 422, "1e+50", json=[[1e51, 0, 0, 0]]),
    chunk(
        "h-fsds",
        "json-nan-token",
        400,
        "JSON",
        content=b"[[NaN, 1, 2, 3]]",
        headers={"content-type": "application/json"},
    ),
    chunk("h-fsds", "json-ragged", 422, "", json=[[1, 2, 3, 4], [1, 2]]),
    # orjson reads integers beyond 64 bits as floats: 1e60 is then over the magnitude limit.
    chunk("h-fsds", "json-int-beyond-limit", 422, "1e+50", json=[[10**60, 0, 0, 0]]),
    chunk(
        "h-fsds",
        "json-deep",
        400,
        "JSON",
        content=bodies.nested(5000),
        headers={"content-type": "application/json"},
    ),
    chunk(
        "h-fsds",
        "csr-json-index-out",
        422,
        "",
        json={"shape": [1, M], "indptr": [0, 1], "indices": [M], "data": [1.0]},
    ),
    chunk(
        "h-fsds",
        "csr-json-indptr-down",
        422,
        "",
        json={"shape": [2, M], "indptr": [0, 2, 1], "indices": [0, 1], "data": [1, 2]},
    ),
    chunk(
        "h-fsds",
        "csr-json-huge-shape",
        422,
        "",
        json={"shape": [10**12, M], "indptr": [0], "indices": [], "data": []},
    ),
    chunk("h-fsds", "wrong-width", 422, f"expected {M} features", json=[[1.0, 2.0]]),
    chunk(
        "h-fsds",
        "labels-to-unlabelled",
        422,
        "labels",
        json={"rows": [[1, 2, 3, 4]], "labels": [1]},
    ),
    chunk(
        "h-fsds", "empty-body", 422, "", content=b"", headers={"content-type": "application/json"}
    ),
    chunk(
        "h-fsds", "no-content-type", 415, "", content=b"[[1,2,3,4]]", headers={"content-type": ""}
    ),
    # -- tables: text/csv and Arrow streams ------------------------------------------------
    chunk("h-fsds", "csv-header-only", 422, "no rows", content=b"1,2,3,4", headers=CSV),
    chunk(
        "h-fsds",
        "csv-inflates-beyond-the-limit",
        422,
        "bytes of float64",
        # Under the body limit, but four times it in floats: refused before they exist.
        content=b"a,b,c,d\n" + b"0,0,0,0\n" * ((MAX_BODY - 8) // 8),
        headers=CSV,
    ),
    chunk("h-fsds", "csv-1e308", 422, "1e+50", content=b"a,b,c,d\n1e308,0,0,0\n", headers=CSV),
    chunk("h-fsds", "csv-ragged", 422, "ragged", content=b"a,b,c,d\n1,2,3,4\n1,2\n", headers=CSV),
    chunk(
        "h-fsds",
        "csv-labels-unlabelled",
        422,
        "labelled methods",
        content=b"a,b,c,d,y\n1,2,3,4,5\n",
        headers=CSV,
        params={"labels": "y"},
    ),
    chunk(
        "h-ocfs",
        "ocfs-csv-without-labels",
        422,
        "?labels=",
        content=b"a,b,c,d,y\n1,2,3,4,5\n",
        headers=CSV,
    ),
    chunk(
        "h-fsds",
        "arrow-zstd-bomb",
        422,
        "compressed",
        # Twice the body limit in floats, in a few kilobytes: refused before it inflates.
        content=bodies.arrow_stream(
            {name: np.zeros(MAX_BODY // 16) for name in "abcd"}, compression="zstd"
        ),
        headers=ARROW,
    ),
    chunk("h-fsds", "arrow-garbage", 400, "Arrow IPC stream", content=b"\xff" * 64, headers=ARROW),
    chunk(
        "h-fsds",
        "arrow-strings",
        422,
        "string",
        content=bodies.arrow_stream({name: ["x"] for name in "abcd"}),
        headers=ARROW,
    ),
    chunk("h-fsds", "binary-over-limit", 413, "", content=b"\0" * (MAX_BODY + 1), headers=NPY),
    chunk(
        "h-fsds",
        "binary-over-limit-chunked",
        413,
        "exceeds the limit",
        content=b"\0" * (MAX_BODY + 1),
        headers=NPY,
        chunked=True,
    ),
    chunk(
        "h-fsds",
        "json-over-limit",
        413,
        "",
        content=b" " * (MAX_JSON + 1),
        headers={"content-type": "application/json"},
    ),
    chunk(
        "h-fsds",
        "idempotency-key-spaces",
        422,
        "",
        json=[[1, 2, 3, 4]],
        headers={"idempotency-key": "a b"},
    ),
    # -- labelled selectors ------------------------------------------------------------------
    chunk("h-ocfs", "ocfs-no-labels", 422, "labels", json={"rows": [[1, 2, 3, 4]]}),
    chunk(
        "h-ocfs", "ocfs-label-count", 422, "labels", json={"rows": [[1, 2, 3, 4]], "labels": [1, 2]}
    ),
    chunk(
        "h-ocfs", "ocfs-label-bool", 422, "label", json={"rows": [[1, 2, 3, 4]], "labels": [True]}
    ),
    chunk(
        "h-ocfs", "ocfs-label-nested", 422, "label", json={"rows": [[1, 2, 3, 4]], "labels": [[1]]}
    ),
    chunk(
        "h-ocfs",
        "ocfs-label-long",
        422,
        "label",
        json={"rows": [[1, 2, 3, 4]], "labels": ["x" * 300]},
    ),
    chunk(
        "h-ocfs",
        "ocfs-label-huge-int",
        422,
        "label",
        json={"rows": [[1, 2, 3, 4]], "labels": [2**64]},
    ),
    chunk("h-ocfs", "ocfs-1e308", 422, "", json={"rows": [[1e308, -1e308, 0, 0]], "labels": [1]}),
    chunk(
        "h-ocfs",
        "ocfs-npz-object-labels",
        422,
        "",
        content=npz_labelled(np.ones((1, M)), np.array([{"a": 1}], dtype=object)),
        headers=NPZ,
    ),
    chunk(
        "h-ioc",
        "ioc-npy-cannot-label",
        415,
        "labels",
        content=bodies.npy(np.ones((1, M))),
        headers=NPY,
    ),
    chunk(
        "h-ioc",
        "ioc-labelled-csr-out-of-range",
        422,
        "out of range",
        content=bodies.zip_of(
            {
                "data.npy": bodies.npy(np.array([1.0, 2.0])),
                "indices.npy": bodies.npy(np.array([0, 1_000_000])),
                "indptr.npy": bodies.npy(np.array([0, 1, 2])),
                "shape.npy": bodies.npy(np.array([2, M])),
                "labels.npy": bodies.npy(np.array([0, 1])),
            }
        ),
        headers=NPZ,
    ),
    Case(
        "transform-csc-far-out",
        "POST",
        "/v1/selectors/h-ioc/transform",
        422,
        "out of range",
        content=bodies.csc_out_of_range(1_000_000),
        headers=NPZ,
    ),
    Case(
        "transform-1e308", "POST", "/v1/selectors/h-ioc/transform", 422, "", json=[[1e308, 0, 0, 0]]
    ),
    Case(
        "transform-nested", "POST", "/v1/selectors/h-ioc/transform", 422, "", json=[[0, 0, 0, [1]]]
    ),
    Case(
        "merge-unknown-source",
        "POST",
        "/v1/selectors/h-ocfs/merge",
        404,
        "nope",
        json={"from": "nope"},
    ),
    Case(
        "merge-into-itself",
        "POST",
        "/v1/selectors/h-ocfs/merge",
        422,
        "itself",
        json={"from": "h-ocfs"},
    ),
    Case(
        "merge-from-fsds",
        "POST",
        "/v1/selectors/h-ocfs/merge",
        422,
        "ocfs",
        json={"from": "h-fsds"},
    ),
    Case("merge-bad-name", "POST", "/v1/selectors/h-ocfs/merge", 422, "", json={"from": "a\nb"}),
    # -- multi-view --------------------------------------------------------------------------
    chunk(
        "h-omvfs",
        "omvfs-negative",
        422,
        "nonnegative",
        json={"views": {"a": [[1, -1]], "b": [[1, 1]]}},
    ),
    chunk("h-omvfs", "omvfs-missing-view", 422, "views", json={"views": {"a": [[1, 1]]}}),
    chunk("h-omvfs", "omvfs-1e308", 422, "", json={"views": {"a": [[1e308, 1]], "b": [[1, 1]]}}),
    chunk(
        "h-omvfs",
        "omvfs-rows-differ",
        422,
        "",
        json={"views": {"a": [[1, 1], [1, 2]], "b": [[1, 1]]}},
    ),
    # -- feature columns ---------------------------------------------------------------------
    Case(
        "ofs-nested",
        "POST",
        "/v1/selectors/h-ofs/features",
        422,
        "",
        json={"columns": [[1, [2], 3]]},
    ),
    Case(
        "ofs-wrong-samples",
        "POST",
        "/v1/selectors/h-ofs/features",
        422,
        "n_samples",
        json={"columns": [[1, 2]]},
    ),
    Case(
        "ofs-duplicate-names",
        "POST",
        "/v1/selectors/h-ofs/features",
        422,
        "unique",
        json={"columns": [[1, 2, 3], [3, 2, 1]], "names": ["a", "a"]},
    ),
    Case(
        "iqrp-1e308",
        "POST",
        "/v1/selectors/h-iqrp/features",
        422,
        "",
        json={"columns": [[1e308, 1, 1]]},
    ),
    Case(
        "iqrp-npy-3d",
        "POST",
        "/v1/selectors/h-iqrp/features",
        422,
        "",
        content=bodies.npy(np.ones((3, 1, 1))),
        headers=NPY,
    ),
    Case(
        "cluster-k-huge", "POST", "/v1/selectors/h-ofs/cluster", 422, "n_samples", json={"k": 10**6}
    ),
    Case("cluster-k-string", "POST", "/v1/selectors/h-ofs/cluster", 422, "k", json={"k": "3"}),
    # -- reads -------------------------------------------------------------------------------
    Case("chunk-status-garbage", "GET", "/v1/selectors/h-fsds/chunks/garbage", 422, "log_id"),
    Case("chunk-status-0-0", "GET", "/v1/selectors/h-fsds/chunks/0-0", 404, "0-0"),
    Case(
        "chunk-status-made-up",
        "GET",
        "/v1/selectors/h-fsds/chunks/1700000000000-12345",
        404,
        "1700000000000-12345",
    ),
    Case("top-h-zero", "GET", "/v1/selectors/h-fsds/top", 422, "h", params={"h": "0"}),
    Case("top-unknown-view", "GET", "/v1/selectors/h-omvfs/top", 422, "view", params={"view": "c"}),
    Case(
        "top-bad-strategy",
        "GET",
        "/v1/selectors/h-fsds/top",
        422,
        "strategy",
        params={"strategy": "x"},
    ),
    Case(
        "weights-accept-csv",
        "GET",
        "/v1/selectors/h-fsds/weights",
        406,
        "Accept",
        headers={"accept": "text/csv"},
    ),
    Case("put-not-allowed", "PUT", "/v1/selectors/h-fsds", 405, "allowed"),
    Case("unknown-selector", "GET", "/v1/selectors/nope/top", 404, "nope"),
    # -- authentication ----------------------------------------------------------------------
    Case("no-token", "GET", "/v1/selectors", 401, "Bearer", admin=False),
    Case(
        "wrong-token",
        "GET",
        "/v1/selectors",
        401,
        "",
        headers={"authorization": "Bearer x"},
        admin=False,
    ),
    Case(
        "unauthenticated-big-create",
        "POST",
        "/v1/selectors",
        401,
        "",
        content=b" " * MAX_JSON,
        headers={"content-type": "application/json"},
        admin=False,
    ),
    Case(
        "forged-key",
        "GET",
        "/v1/selectors",
        401,
        "",
        headers={"authorization": "Bearer sift_0000000000000000_" + "0" * 48},
        admin=False,
    ),
]


def stream_chunk(
    case_id: str, status: int, fragment: str = "", stream: str = "h-stream", **kwargs: Any
) -> Case:
    return Case(case_id, "POST", f"/v1/streams/{stream}/chunks", status, fragment, **kwargs)


def create_stream(case_id: str, body: Any, status: int = 422, fragment: str = "") -> Case:
    return Case(case_id, "POST", "/v1/streams", status, fragment, json=body)


def attach(case_id: str, body: Any, status: int = 422, fragment: str = "") -> Case:
    return Case(case_id, "POST", "/v1/selectors", status, fragment, json=body)


#: Streams: a labelled stream of M features with an ocfs and a variance selector attached
#: (``setup_selectors``), attacked through every stream route.
STREAM_CASES = [
    create_stream("stream-name-newline", {"name": "s\n", "n_features": 3}),
    create_stream("stream-name-braces", {"name": "s{t}", "n_features": 3}),
    create_stream("stream-name-huge-int", {"name": HUGE, "n_features": 3}),
    create_stream("stream-no-shape", {"name": "s"}, 422, "shape"),
    create_stream("stream-two-shapes", {"name": "s", "n_features": 3, "n_samples": 3}),
    create_stream("stream-labelled-views", {"name": "s", "views": {"a": 2}, "labelled": True}),
    create_stream("stream-labelled-string", {"name": "s", "n_features": 3, "labelled": "yes"}),
    create_stream("stream-n-features-huge", {"name": "s", "n_features": HUGE}),
    create_stream("stream-unknown-field", {"name": "s", "n_features": 3, "method": "fsds"}),
    create_stream(
        "stream-names-count", {"name": "s", "n_features": 3, "feature_names": ["a"]}, 422
    ),
    create_stream("stream-taken", {"name": "h-stream", "n_features": M}, 409),
    Case(
        "stream-create-deep-json",
        "POST",
        "/v1/streams",
        400,
        "",
        content=bodies.nested(100_000),
        headers=JSON,
    ),
    attach("attach-wrong-kind", {"name": "x", "method": "iqrp", "stream": "h-stream"}),
    attach(
        "attach-with-shape",
        {"name": "x", "method": "ocfs", "stream": "h-stream", "n_features": M},
    ),
    attach("attach-bad-from", {"name": "x", "method": "ocfs", "stream": "h-stream", "from": 0}),
    attach("attach-stream-braces", {"name": "x", "method": "ocfs", "stream": "a{b}"}),
    attach(
        "attach-partitions",
        {"name": "x", "method": "ocfs", "stream": "h-stream", "partitions": 2},
    ),
    attach("attach-unknown-stream", {"name": "x", "method": "ocfs", "stream": "nope"}, 404),
    attach("attach-name-taken", {"name": "h-s-ocfs", "method": "ocfs", "stream": "h-stream"}, 409),
    stream_chunk("stream-wrong-width", 422, "", json={"rows": [[1, 2]], "labels": [0]}),
    stream_chunk("stream-no-labels", 422, "labelled", json=[[1.0] * M]),
    stream_chunk("stream-labels-count", 422, "", json={"rows": [[1.0] * M] * 2, "labels": [0]}),
    stream_chunk(
        "stream-value-1e308", 422, "", json={"rows": [[1e308] + [0.0] * (M - 1)], "labels": [0]}
    ),
    stream_chunk(
        "stream-npy-no-labels",
        415,
        "cannot carry labels",
        content=bodies.npy(np.ones((1, M))),
        headers=NPY,
    ),
    stream_chunk(
        "stream-npy-object",
        422,
        "",
        stream="h-plain",
        content=bodies.npy(np.array([[1, "a", None, 2]], dtype=object)),
        headers=NPY,
    ),
    stream_chunk(
        "stream-npy-huge-header",
        400,
        "promises shape",
        stream="h-plain",
        content=bodies.npy_header("<f8", (10**6, 10**6), b"\0" * 64),
        headers=NPY,
    ),
    stream_chunk(
        "stream-bzip2-bomb",
        422,
        "",
        content=bodies.bzip2_bomb(256 * 2**20),
        headers=NPZ,
    ),
    stream_chunk("stream-zip-bomb", 413, "", content=bodies.zip_bomb(40 * 2**20), headers=NPZ),
    stream_chunk("stream-deep-json", 400, "", content=bodies.nested(100_000), headers=JSON),
    stream_chunk("stream-text", 415, "", content=b"1,2,3,4", headers=TEXT),
    stream_chunk("stream-over-limit", 413, "", content=b"\0" * (MAX_BODY + 1), headers=NPY),
    stream_chunk(
        "stream-idempotency-key-space",
        422,
        "",
        json={"rows": [[1.0] * M], "labels": [0]},
        headers={"idempotency-key": "a b"},
    ),
    stream_chunk("stream-wait-word", 422, "", json=[[1.0] * M], params={"wait": "maybe"}),
    Case("stream-unknown-chunks", "POST", "/v1/streams/nope/chunks", 404, "", json=[[1.0] * M]),
    Case("stream-status-bad-id", "GET", "/v1/streams/h-stream/chunks/x-1", 422, ""),
    Case("stream-status-made-up", "GET", "/v1/streams/h-stream/chunks/1-1", 404, ""),
    Case("stream-rankings-h-0", "GET", "/v1/streams/h-stream/rankings", 422, "", params={"h": "0"}),
    Case(
        "stream-rankings-h-huge",
        "GET",
        "/v1/streams/h-stream/rankings",
        422,
        "",
        params={"h": str(HUGE)},
    ),
    Case("stream-rankings-p-1", "GET", "/v1/streams/h-stream/rankings", 422, "", params={"p": "1"}),
    Case(
        "stream-rankings-p-nan",
        "GET",
        "/v1/streams/h-stream/rankings",
        422,
        "",
        params={"p": "nan"},
    ),
    Case("stream-delete-attached", "DELETE", "/v1/streams/h-stream", 409, "h-s-ocfs"),
    Case(
        "stream-delete-force-word", "DELETE", "/v1/streams/h-stream", 422, "", params={"force": "x"}
    ),
    Case("stream-patch", "PATCH", "/v1/streams/h-stream", 405, ""),
    chunk(
        "h-s-ocfs", "direct-to-attached", 409, "POST /v1/streams/h-stream/chunks", json=[[1.0] * M]
    ),
    Case("detach-standalone", "POST", "/v1/selectors/h-fsds/detach", 409, "not attached"),
    Case("detach-unknown", "POST", "/v1/selectors/nope/detach", 404, ""),
]
CASES += STREAM_CASES


def non_ascii_token_case() -> Case:
    return Case(
        "non-ascii-token",
        "GET",
        "/v1/selectors",
        401,
        "",
        headers={"authorization": "Bearer h\u00e9llo"},
        admin=False,
    )


def setup_selectors(http: httpx.Client) -> None:
    """One selector per method (and the raw fsds and omvfs variants), each with some data."""

    def ok(response: httpx.Response) -> None:
        assert response.status_code in (200, 201), response.text

    rows = np.arange(12.0).reshape(3, M)
    labelled = {"rows": rows.tolist(), "labels": [0, 1, "two"]}
    for name, body, data in (
        ("h-fsds", {"method": "fsds", "n_features": M}, rows.tolist()),
        (
            "h-raw",
            {"method": "fsds", "n_features": M, "params": {"normalize_rows": False}},
            rows.tolist(),
        ),
        ("h-ocfs", {"method": "ocfs", "n_features": M}, labelled),
        ("h-ioc", {"method": "ioc", "n_features": M}, labelled),
        (
            "h-omvfs",
            {
                "method": "omvfs",
                "views": {"a": 2, "b": 2},
                "params": {"n_clusters": 2, "max_iter": 5, "normalize_rows": False},
            },
            {"views": {"a": [[1, 2], [0, 1]], "b": [[1, 0], [2, 1]]}},
        ),
    ):
        ok(http.post("/v1/selectors", json={"name": name, **body}, headers=ADMIN))
        ok(http.post(f"/v1/selectors/{name}/chunks", json=data, headers=ADMIN))
    ok(
        http.post(
            "/v1/streams",
            json={"name": "h-stream", "n_features": M, "labelled": True},
            headers=ADMIN,
        )
    )
    for name, method in (("h-s-ocfs", "ocfs"), ("h-s-var", "variance")):
        attached = {"name": name, "method": method, "stream": "h-stream"}
        ok(http.post("/v1/selectors", json=attached, headers=ADMIN))
    ok(http.post("/v1/streams/h-stream/chunks", json=labelled, headers=ADMIN))
    ok(http.post("/v1/streams", json={"name": "h-plain", "n_features": M}, headers=ADMIN))
    attached = {"name": "h-p-var", "method": "variance", "stream": "h-plain"}
    ok(http.post("/v1/selectors", json=attached, headers=ADMIN))
    ok(http.post("/v1/streams/h-plain/chunks", json=rows.tolist(), headers=ADMIN))
    for name, method in (("h-ofs", "ofs"), ("h-iqrp", "iqrp")):
        ok(
            http.post(
                "/v1/selectors",
                json={"name": name, "method": method, "n_samples": 3},
                headers=ADMIN,
            )
        )
        ok(
            http.post(
                f"/v1/selectors/{name}/features",
                json={"columns": [[1, 2, 0], [0, 1, 5]]},
                headers=ADMIN,
            )
        )


def snapshot(http: httpx.Client) -> dict[str, Any]:
    """Every selector's version, rows, pending entries and scores, as a client sees them, and
    every stream's log and attachments."""
    listed = http.get("/v1/selectors", headers=ADMIN).json()["selectors"]
    out: dict[str, Any] = {}
    for stream in http.get("/v1/streams", headers=ADMIN).json()["streams"]:
        described = http.get(f"/v1/streams/{stream['name']}", headers=ADMIN).json()
        out[f"stream:{stream['name']}"] = (
            described["entries"],
            described["items"],
            described["last_id"],
            [(s["name"], s["version"], s["pending_entries"]) for s in described["selectors"]],
        )
    for selector in listed:
        name = selector["name"]
        described = http.get(f"/v1/selectors/{name}", headers=ADMIN).json()
        weights = http.get(f"/v1/selectors/{name}/weights", headers=ADMIN).json()["weights"]
        out[name] = (
            described["version"],
            described.get("rows_seen", described.get("features_seen")),
            described["state"]["pending_entries"],
            weights,
        )
    return out


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    env = {
        "SIFT_API_TOKEN": TOKEN,
        "SIFT_MAX_BODY_BYTES": str(MAX_BODY),
        "SIFT_MAX_JSON_BODY_BYTES": str(MAX_JSON),
        "SIFT_APPLY_WAIT_SECONDS": "10",
    }
    with live_service(tmp_path_factory.mktemp("hostile"), "hostile", env) as service:
        with httpx.Client(base_url=service.url, timeout=60) as http:
            setup_selectors(http)
        yield service


def send(service: ServiceProcess, case: Case) -> httpx.Response:
    headers = {**(ADMIN if case.admin else {}), **case.headers}
    raw_headers = [(k.encode(), v.encode("utf-8")) for k, v in headers.items()]
    content: Any = case.content
    if case.chunked and case.content is not None:
        whole = case.content
        content = (whole[i : i + 65536] for i in range(0, len(whole), 65536))
    with httpx.Client(base_url=service.url, timeout=60) as http:
        return http.request(
            case.method,
            case.path,
            json=case.json,
            content=content,
            headers=raw_headers,
            params=case.params,
        )


def test_catalogue_is_large_and_covers_every_route_and_method() -> None:
    assert len(CASES) + 1 >= 60
    ids = [case.id for case in CASES]
    assert len(ids) == len(set(ids)), "case ids must be unique"
    routes = {
        (
            case.method,
            case.path.replace("h-", "{").split("/")[3] if case.path.count("/") > 2 else "",
        )
        for case in CASES
    }
    assert len(routes) >= 8
    targets = " ".join(case.path for case in CASES)
    for selector in ("h-fsds", "h-raw", "h-ocfs", "h-ioc", "h-ofs", "h-iqrp", "h-omvfs"):
        assert selector in targets, selector


@pytest.mark.slow
def test_every_hostile_request_gets_its_4xx_and_changes_nothing(target: ServiceProcess) -> None:
    with httpx.Client(base_url=target.url, timeout=60) as http:
        before = snapshot(http)
    baseline = peak_rss(target.pid)
    wrong: list[str] = []
    for case in [*CASES, non_ascii_token_case()]:
        response = send(target, case)
        problem: dict[str, Any] = {}
        with contextlib.suppress(ValueError):
            problem = response.json()
        detail = str(problem.get("detail", ""))
        if (
            response.status_code != case.status
            or response.headers.get("content-type") != "application/problem+json"
            or case.fragment not in detail
        ):
            got = f"{response.status_code} {response.text[:300]}"
            wrong.append(f"{case.id}: expected {case.status} with {case.fragment!r}; got {got}")
        if case.status == 405 and not response.headers.get("allow"):
            wrong.append(f"{case.id}: 405 without Allow")
        assert target.alive, f"the service died on case {case.id}"
        assert httpx.get(f"{target.url}/v1/healthz", timeout=10).status_code == 200, case.id
    peak = peak_rss(target.pid)
    with httpx.Client(base_url=target.url, timeout=60) as http:
        after = snapshot(http)
    print(
        f"hostile catalogue: {len(CASES) + 1} cases, {len(wrong)} wrong; peak RSS "
        f"{baseline / 2**20:.0f} MiB before, {peak / 2**20:.0f} MiB after"
    )
    assert not wrong, "\n".join(wrong)
    assert after == before, "a hostile request changed a selector"
    assert peak - baseline < PEAK_GROWTH_BOUND
