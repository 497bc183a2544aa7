"""Chunks as tables (``service.wire.tables``): ``text/csv`` and Arrow IPC streams, through the real
app and a real redis-server.

``variance`` keeps exact per-feature moments and ``ocfs`` exact per-class sums, so a table that
landed a value anywhere else than the same rows sent as ``.npy`` (``.npz`` with labels) would
show in their weights, compared here bit for bit. Every refusal is a 4xx problem after which the
selector has exactly the version and rows it had.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from tests.support.api import assert_problem, npy_bytes, npz_labelled

pytestmark = pytest.mark.asyncio

NAMES = ["a", "b", "c", "d", "e"]
RNG = np.random.default_rng(7)
#: Values whose every bit matters: a CSV must carry them exactly (``%.17g``).
ROWS = RNG.standard_normal((40, 5)) * 10.0 ** RNG.integers(-6, 6, size=(40, 5))
LABELS = [int(x) for x in RNG.integers(0, 3, size=40)]
CSV = {"content-type": "text/csv"}
ARROW = {"content-type": "application/vnd.apache.arrow.stream"}
NPY = {"content-type": "application/x-npy"}
NPZ = {"content-type": "application/x-npz"}


def csv_body(
    rows: np.ndarray,
    names: list[str],
    labels: list[Any] | None = None,
    label_name: str = "class",
    newline: str = "\n",
) -> bytes:
    header = list(names) + ([label_name] if labels is not None else [])
    lines = [",".join(header)]
    for i, row in enumerate(rows):
        fields = [f"{value:.17g}" for value in row]
        if labels is not None:
            fields.append(str(labels[i]))
        lines.append(",".join(fields))
    return (newline.join(lines) + newline).encode()


def arrow_body(columns: dict[str, Any], batch_rows: int = 7, **options: Any) -> bytes:
    table = pa.table(columns)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, **options) as writer:
        for batch in table.to_batches(max_chunksize=batch_rows):
            writer.write_batch(batch)
    return bytes(sink.getvalue().to_pybytes())


def arrow_rows(rows: np.ndarray, names: list[str], labels: list[Any] | None = None) -> bytes:
    columns: dict[str, Any] = {name: rows[:, j] for j, name in enumerate(names)}
    if labels is not None:
        columns["class"] = labels
    return arrow_body(columns)


async def create(http, name: str, method: str = "variance", names: list[str] | None = NAMES):
    body: dict[str, Any] = {"name": name, "method": method, "n_features": len(NAMES)}
    if names is not None:
        body["feature_names"] = names
    response = await http.post("/v1/selectors", json=body)
    assert response.status_code == 201, response.text


async def push(http, name: str, content: bytes, headers: dict[str, str], **params: str):
    response = await http.post(
        f"/v1/selectors/{name}/chunks", content=content, headers=headers, params=params
    )
    assert response.status_code == 200, response.text


async def weights(http, name: str) -> np.ndarray:
    """The weights as ``.npy``: every bit of them."""
    response = await http.get(
        f"/v1/selectors/{name}/weights", headers={"accept": "application/x-npy"}
    )
    assert response.status_code == 200, response.text
    loaded: np.ndarray = np.load(io.BytesIO(response.content), allow_pickle=False)
    return loaded


async def test_csv_and_arrow_rows_give_the_state_npy_gives(client):
    for name in ("npy", "csv", "crlf", "arrow"):
        await create(client, name)
    await push(client, "npy", npy_bytes(ROWS), NPY)
    await push(client, "csv", csv_body(ROWS, NAMES), CSV)
    # RFC 4180's CRLF, a byte-order mark, Content-Type parameters: the same rows.
    crlf = b"\xef\xbb\xbf" + csv_body(ROWS, NAMES, newline="\r\n")
    await push(client, "crlf", crlf, {"content-type": "text/csv; charset=utf-8; header=present"})
    await push(client, "arrow", arrow_rows(ROWS, NAMES), ARROW)
    expected = await weights(client, "npy")
    # numpy's population variance, the exact reference (up to the update's rounding).
    np.testing.assert_allclose(expected, ROWS.var(axis=0), rtol=1e-12)
    for name in ("csv", "crlf", "arrow"):
        got = await weights(client, name)
        assert got.tobytes() == expected.tobytes(), name
        described = (await client.get(f"/v1/selectors/{name}")).json()
        assert described["rows_seen"] == len(ROWS) and described["version"] == 1


async def test_labelled_tables_give_the_state_npz_gives(client):
    for name in ("npz", "csv", "arrow", "arrow-strings"):
        await create(client, name, "ocfs")
    await push(client, "npz", npz_labelled(ROWS, np.array(LABELS)), NPZ)
    await push(client, "csv", csv_body(ROWS, NAMES, LABELS), CSV, labels="class")
    await push(client, "arrow", arrow_rows(ROWS, NAMES, LABELS), ARROW, labels="class")
    expected = await weights(client, "npz")
    for name in ("csv", "arrow"):
        assert (await weights(client, name)).tobytes() == expected.tobytes(), name
    # String labels (in their own order of first appearance) land as the JSON path lands them.
    words = [f"k{label}" for label in LABELS]
    await push(client, "arrow-strings", arrow_rows(ROWS, NAMES, words), ARROW, labels="class")
    await create(client, "json-strings", "ocfs")
    body = {"rows": ROWS.tolist(), "labels": words}
    assert (await client.post("/v1/selectors/json-strings/chunks", json=body)).status_code == 200
    got = await weights(client, "arrow-strings")
    assert got.tobytes() == (await weights(client, "json-strings")).tobytes()


async def test_the_label_column_may_be_anywhere_and_labels_read_as_integers(client):
    await create(client, "json", "ocfs")
    await create(client, "csv", "ocfs")
    labels = ["x", 3, -2, "x"] * 10
    body = {"rows": ROWS.tolist(), "labels": labels}
    assert (await client.post("/v1/selectors/json/chunks", json=body)).status_code == 200
    lines = ["y," + ",".join(NAMES)]
    lines += [f"{labels[i]}," + ",".join(f"{v:.17g}" for v in row) for i, row in enumerate(ROWS)]
    await push(client, "csv", "\n".join(lines).encode(), CSV, labels="y")
    assert (await weights(client, "csv")).tobytes() == (await weights(client, "json")).tobytes()


async def test_columns_land_by_name_and_a_selector_without_names_takes_them(client):
    await create(client, "reference")
    await push(client, "reference", npy_bytes(ROWS), NPY)
    expected = await weights(client, "reference")
    await create(client, "twice")
    for _ in range(2):
        await push(client, "twice", npy_bytes(ROWS), NPY)
    order = [4, 2, 0, 3, 1]
    shuffled = [NAMES[i] for i in order]
    await create(client, "csv")
    await push(client, "csv", csv_body(ROWS[:, order], shuffled), CSV)
    await create(client, "arrow")
    await push(client, "arrow", arrow_rows(ROWS[:, order], shuffled), ARROW)
    for name in ("csv", "arrow"):
        assert (await weights(client, name)).tobytes() == expected.tobytes(), name
    await create(client, "unnamed", names=None)
    await push(client, "unnamed", csv_body(ROWS[:, order], shuffled), CSV)
    assert (await client.get("/v1/selectors/unnamed")).json()["has_feature_names"] is True
    top = (await client.get("/v1/selectors/unnamed/top", params={"h": 5})).json()
    scores = {feature["name"]: feature["score"] for feature in top["features"]}
    assert scores == {name: float(expected[NAMES.index(name)]) for name in NAMES}
    # From then on, by name: the selector's own order (the first chunk's) is kept.
    await push(client, "unnamed", arrow_rows(ROWS, NAMES), ARROW)
    twice = await weights(client, "unnamed")
    assert twice.tobytes() == (await weights(client, "twice"))[order].tobytes()


def _bad_csv() -> list[tuple[str, bytes, dict[str, str], int, str]]:
    good = csv_body(ROWS[:2], NAMES)
    return [
        ("empty", b"", {}, 422, "empty body"),
        ("header only", b"a,b,c,d,e\n", {}, 422, "no rows"),
        ("header without newline", b"a,b,c,d,e", {}, 422, "no rows"),
        ("empty line", good + b"\n1,2,3,4,5\n", {}, 422, "line 4 of the CSV is empty"),
        ("ragged", good + b"1,2,3,4\n", {}, 422, "ragged: the header has 5 columns but line 4"),
        ("quoted value", good + b'1,2,"3",4,5\n', {}, 422, "line 4 of the CSV holds a quoted"),
        ("not a number", good + b"1,2,x3,4,5\n", {}, 422, "line 4, column 'c' is \"x3\""),
        ("empty field", good + b"1,2,,4,5\n", {}, 422, "line 4, column 'c'"),
        ("nan", good + b"1,2,nan,4,5\n", {}, 422, "finite; got nan at row 2, column 2"),
        ("inf", good + b"1,2,3,-inf,5\n", {}, 422, "finite"),
        ("beyond 1e50", good + b"1,2,3,4,1e60\n", {}, 422, "within +-1e+50"),
        ("lone CR", good + b"1,2,3\r4,5\n", {}, 422, "carriage return"),
        ("unknown name", b"a,b,c,d,z\n1,2,3,4,5\n", {}, 422, "missing ['e'], unexpected ['z']"),
        ("too few columns", b"a,b,c,d\n1,2,3,4\n", {}, 422, "missing ['e']"),
        ("duplicate names", b"a,b,c,d,d\n1,2,3,4,5\n", {}, 422, "unique"),
        ("not UTF-8", b"a,b,c,d,\xff\n1,2,3,4,5\n", {}, 400, "UTF-8"),
        ("labels on a row method", good, {"labels": "a"}, 422, "labelled methods"),
    ]


@pytest.mark.parametrize(("case", "content", "params", "status", "fragment"), _bad_csv())
async def test_a_bad_csv_is_a_problem_and_writes_nothing(
    client, case, content, params, status, fragment
):
    await create(client, "s")
    response = await client.post(
        "/v1/selectors/s/chunks", content=content, headers=CSV, params=params
    )
    assert_problem(response, status, fragment)
    described = (await client.get("/v1/selectors/s")).json()
    assert described["version"] == 0 and described["rows_seen"] == 0, case


def _bad_arrow() -> list[tuple[str, bytes, int, str]]:
    good = arrow_rows(ROWS[:3], NAMES)
    floats = {name: [1.0, 2.0] for name in NAMES}
    return [
        ("empty", b"", 422, "empty body"),
        ("garbage", b"not an arrow stream at all", 400, "not a well-formed Arrow IPC stream"),
        ("truncated", good[: len(good) // 2], 400, "not a well-formed Arrow IPC stream"),
        ("end of stream only", b"\xff\xff\xff\xff\0\0\0\0", 400, "not a well-formed Arrow"),
        ("string column", arrow_body({**floats, "e": ["x", "y"]}), 422, "column 'e' is string"),
        ("bool column", arrow_body({**floats, "e": [True, False]}), 422, "column 'e' is bool"),
        ("nulls", arrow_body({**floats, "e": [1.0, None]}), 422, "column 'e' holds 1 nulls"),
        (
            "dictionary",
            arrow_body({**floats, "e": pa.array(["x", "y"]).dictionary_encode()}),
            422,
            "dictionary-encoded",
        ),
        (
            "compressed",
            arrow_body(floats, options=pa.ipc.IpcWriteOptions(compression="zstd")),
            422,
            "compressed record batches",
        ),
        ("no rows", arrow_body({name: pa.array([], pa.float64()) for name in NAMES}), 422, "no"),
        ("nan", arrow_body({**floats, "e": [1.0, float("nan")]}), 422, "finite"),
        ("file format", _arrow_file(floats), 422, "Arrow IPC file"),
        (
            "pre-1.0 framing",
            arrow_body(floats, options=pa.ipc.IpcWriteOptions(use_legacy_format=True)),
            400,
            "expected the continuation marker 0xFFFFFFFF at byte 0",
        ),
        ("bytes after the end", arrow_body(floats) + b"\0" * 8, 400, "8 bytes follow the end"),
        (
            "a batch where the schema belongs",
            _header_type(arrow_body(floats), 3),
            400,
            "the first message is a record batch: expected the schema",
        ),
        ("a batch of the wrong width", _wrong_width(), 400, "a record batch has 5 columns"),
        ("unknown name", arrow_body({**floats, "z": [1.0, 2.0]}), 422, "unexpected ['z']"),
    ]


def _header_type(body: bytes, kind: int) -> bytes:
    """The stream with its first message's header type changed (a schema read as another
    message kills pyarrow unless Sift refuses it first)."""
    metadata = bytes(pa.ipc.read_message(pa.py_buffer(body)).metadata)
    at = 8  # after the continuation marker and the metadata length
    root = int.from_bytes(metadata[:4], "little")
    vtable = root - int.from_bytes(metadata[root : root + 4], "little", signed=True)
    slot = int.from_bytes(metadata[vtable + 6 : vtable + 8], "little")  # field 1: header_type
    changed = bytearray(body)
    changed[at + root + slot] = kind
    return bytes(changed)


def _wrong_width() -> bytes:
    """A schema of four columns followed by a batch of five."""
    four = arrow_body({name: [1.0] for name in NAMES[:4]})
    five = arrow_body({name: [1.0] for name in NAMES})
    schema_end = 8 + len(pa.ipc.read_message(pa.py_buffer(four)).metadata)
    return four[:schema_end] + five[8 + len(pa.ipc.read_message(pa.py_buffer(five)).metadata) :]


def _arrow_file(columns: dict[str, Any]) -> bytes:
    table = pa.table(columns)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


@pytest.mark.parametrize(("case", "content", "status", "fragment"), _bad_arrow())
async def test_a_bad_arrow_stream_is_a_problem_and_writes_nothing(
    client, case, content, status, fragment
):
    await create(client, "s")
    response = await client.post("/v1/selectors/s/chunks", content=content, headers=ARROW)
    assert_problem(response, status, fragment)
    assert "pyarrow" not in response.json()["detail"] or "pyarrow.ipc" in response.json()["detail"]
    described = (await client.get("/v1/selectors/s")).json()
    assert described["version"] == 0 and described["rows_seen"] == 0, case


async def test_the_label_column_is_asked_for_where_it_is_needed_and_nowhere_else(client):
    await create(client, "o", "ocfs")
    csv = csv_body(ROWS[:3], NAMES, LABELS[:3])
    cases = [
        (csv, CSV, {}, 422, "?labels=<column>"),
        (arrow_rows(ROWS[:3], NAMES, LABELS[:3]), ARROW, {}, 422, "?labels=<column>"),
        (csv, CSV, {"labels": "nope"}, 422, "labels='nope' names no column"),
        (csv_body(ROWS[:3], NAMES), CSV, {"labels": "a"}, 422, "missing ['a']"),
        (
            arrow_body({**{n: [1.0] for n in NAMES}, "class": [1.5]}),
            ARROW,
            {"labels": "class"},
            422,
            "the label column 'class' is double",
        ),
        (
            b'{"rows": [[1, 2, 3, 4, 5]], "labels": [1]}',
            {"content-type": "application/json"},
            {"labels": "class"},
            422,
            "carries its labels itself",
        ),
        (csv, CSV, {"labels": ""}, 422, ""),
    ]
    for content, headers, params, status, fragment in cases:
        response = await client.post(
            "/v1/selectors/o/chunks", content=content, headers=headers, params=params
        )
        assert_problem(response, status, fragment)
    described = (await client.get("/v1/selectors/o")).json()
    assert described["version"] == 0 and described["rows_seen"] == 0


async def test_views_and_columns_refuse_tables_saying_what_they_take(client):
    views = {"name": "mv", "method": "omvfs", "views": {"a": 2, "b": 2}}
    assert (await client.post("/v1/selectors", json=views)).status_code == 201
    response = await client.post("/v1/selectors/mv/chunks", content=b"a,b\n1,2\n", headers=CSV)
    assert_problem(response, 415, "application/json or application/x-npz")
    columns = {"name": "cols", "method": "ofs", "n_samples": 2}
    assert (await client.post("/v1/selectors", json=columns)).status_code == 201
    response = await client.post("/v1/selectors/cols/features", content=b"a\n1\n", headers=CSV)
    assert_problem(response, 415, "application/json")


async def test_tables_are_bounded_by_the_body_limit(app_factory):
    async with app_factory(max_body_bytes=2000) as (_, http):
        await create(http, "s")
        # 150 rows of "0,0,0,0,0": 1500 bytes of CSV, 6000 bytes of floats.
        small = b"a,b,c,d,e\n" + b"0,0,0,0,0\n" * 150
        response = await http.post("/v1/selectors/s/chunks", content=small, headers=CSV)
        assert_problem(response, 422, "6000 bytes of float64", "limit of 2000 bytes")
        big = csv_body(ROWS, NAMES)
        assert len(big) > 2000
        response = await http.post("/v1/selectors/s/chunks", content=big, headers=CSV)
        assert_problem(response, 413, "limit of 2000 bytes")
        response = await http.post(
            "/v1/selectors/s/chunks", content=arrow_rows(ROWS, NAMES), headers=ARROW
        )
        assert response.status_code == 413, response.text
        described = (await http.get("/v1/selectors/s")).json()
        assert described["version"] == 0 and described["rows_seen"] == 0


async def test_a_labelled_stream_takes_csv_with_its_label_column(client):
    stream = {"name": "st", "n_features": 5, "labelled": True, "feature_names": NAMES}
    assert (await client.post("/v1/streams", json=stream)).status_code == 201
    for name, method in (("st-ocfs", "ocfs"), ("st-var", "variance")):
        body = {"name": name, "method": method, "stream": "st"}
        assert (await client.post("/v1/selectors", json=body)).status_code == 201
    response = await client.post(
        "/v1/streams/st/chunks",
        content=csv_body(ROWS, NAMES, LABELS),
        headers=CSV,
        params={"labels": "class"},
    )
    assert response.status_code == 200, response.text
    await create(client, "ref-ocfs", "ocfs")
    await push(client, "ref-ocfs", npz_labelled(ROWS, np.array(LABELS)), NPZ)
    await create(client, "ref-var")
    await push(client, "ref-var", npy_bytes(ROWS), NPY)
    for name in ("ocfs", "var"):
        got, want = await weights(client, f"st-{name}"), await weights(client, f"ref-{name}")
        assert got.tobytes() == want.tobytes(), name


async def test_the_openapi_document_lists_the_table_media_types(client):
    schema = (await client.get("/openapi.json")).json()
    for path in ("/v1/selectors/{name}/chunks", "/v1/streams/{name}/chunks"):
        post = schema["paths"][path]["post"]
        content = post["requestBody"]["content"]
        assert {"text/csv", "application/vnd.apache.arrow.stream"} <= set(content), path
        assert "labels" in {parameter["name"] for parameter in post["parameters"]}, path
    columns = schema["paths"]["/v1/selectors/{name}/features"]["post"]["requestBody"]["content"]
    assert "text/csv" not in columns
