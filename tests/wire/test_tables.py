"""The table reader (service/wire/tables.py) on its own: CSV round trips of every float, any
bytes answered with a refusal (never another exception), and Arrow without pyarrow."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from service.errors import SiftError
from service.wire.media import ARROW, CSV
from service.wire.tables import read_table

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 2**20

names = st.lists(
    st.text(
        st.characters(codec="utf-8", exclude_characters="\r\n\x00\ufeff"), min_size=1, max_size=6
    ),
    min_size=1,
    max_size=5,
    unique=True,
)


def csv_of(header: list[str], rows: np.ndarray) -> bytes:
    def quoted(name: str) -> str:
        return '"' + name.replace('"', '""') + '"' if any(c in name for c in ',"') else name

    lines = [",".join(quoted(name) for name in header)]
    lines += [",".join(repr(float(value)) for value in row) for row in rows]
    return ("\n".join(lines) + "\n").encode()


@given(data=st.data(), header=names)
@settings(max_examples=150, deadline=None)
def test_every_finite_float_and_every_name_comes_back_exactly(data, header) -> None:
    rows = data.draw(
        hnp.arrays(
            np.float64,
            st.tuples(st.integers(1, 6), st.just(len(header))),
            elements=st.floats(allow_nan=False, allow_infinity=False),
        )
    )
    table = read_table(csv_of(header, rows), CSV, None, LIMIT)
    assert table.names == header
    assert table.values.tobytes() == rows.tobytes()
    assert table.labels is None


@given(body=st.binary(max_size=300))
@settings(max_examples=400, deadline=None)
def test_any_bytes_are_a_table_or_a_refusal(body: bytes) -> None:
    for media_type in (CSV, ARROW):
        try:
            read_table(body, media_type, None, LIMIT)
        except SiftError as exc:
            assert 400 <= exc.status < 500 and exc.detail


@given(
    lines=st.lists(
        st.text(st.sampled_from(list('0123456789.,-+eE"\r\n abcnaif')), max_size=20),
        min_size=1,
        max_size=8,
    ),
    labels=st.sampled_from([None, "a", "b"]),
)
@settings(max_examples=400, deadline=None)
def test_csv_like_text_is_a_table_or_a_refusal(lines: list[str], labels: str | None) -> None:
    body = ("a,b,c\n" + "\n".join(lines)).encode()
    try:
        table = read_table(body, CSV, labels, LIMIT)
    except SiftError as exc:
        assert 400 <= exc.status < 500 and exc.detail
        return
    width = 3 if labels is None else 2
    assert table.values.shape[1] == width
    if labels is not None:
        assert table.labels is not None and len(table.labels) == table.values.shape[0]


def test_without_pyarrow_an_arrow_body_is_415_naming_the_extra() -> None:
    """A server installed without its ``arrow`` extra: pyarrow cannot be imported."""
    script = (
        "import sys; sys.modules['pyarrow'] = None\n"
        "from service.errors import UnsupportedMediaType\n"
        "from service.wire.tables import read_table\n"
        "try:\n"
        "    read_table(b'anything', 'application/vnd.apache.arrow.stream', None, 1000)\n"
        "except UnsupportedMediaType as exc:\n"
        "    print(exc.status, exc.detail)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.startswith("415 ") and "siftstream-server[arrow]" in done.stdout


def test_arrow_labels_may_be_strings_of_either_width_or_integers() -> None:
    import pyarrow as pa

    for labels in (
        pa.array(["p", "q"]),
        pa.array(["p", "q"], pa.large_string()),
        pa.array([7, -1], pa.int8()),
    ):
        table = pa.table({"a": [1.0, 2.0], "y": labels})
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        read = read_table(sink.getvalue().to_pybytes(), ARROW, "y", LIMIT)
        assert read.labels == labels.to_pylist() and read.names == ["a"]
