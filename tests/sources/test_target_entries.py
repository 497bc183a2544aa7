"""Entries with a target field as rows with a target (``service.sources.entries``, then the
kind's ``from_entries``), without a bus: the target is one more numeric column, read by every
path the features are (Redis text in order and shuffled, parsed fields, JSON and msgpack
messages decoded into structs, wide targets gathered by orjson) to the same float64, and a
target that is missing, not a number, not finite or beyond the values' bound sets its entry
aside with a reason naming the target field, whatever path the batch took."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import msgspec
import numpy as np
import orjson
import pytest

from service.algorithms.base import MAX_ABS_VALUE
from service.algorithms.targets import TargetRows
from service.sources.bus import BusEntry
from service.sources.entries import EntryShape
from service.wire.kinds import chunk_format

NAMES = ["a", "b", "c"]
TARGET = "y"


def redis_entry(position: int, fields: dict[str, Any]) -> BusEntry:
    pairs: list[bytes] = []
    for key, value in fields.items():
        pairs += [key.encode(), value if isinstance(value, bytes) else str(value).encode()]
    return BusEntry(f"{position}-0", None, pairs=pairs)


def raw_entry(position: int, raw: bytes) -> BusEntry:
    return BusEntry(str(position), None, raw=raw)


def documents(rows: np.ndarray, targets: np.ndarray, names: list[str]) -> list[dict[str, Any]]:
    return [
        {**dict(zip(names, row.tolist(), strict=True)), TARGET: float(target)}
        for row, target in zip(rows, targets, strict=True)
    ]


def shuffled(document: dict[str, Any], seed: int) -> dict[str, Any]:
    keys = list(document)
    order = np.random.default_rng(seed).permutation(len(keys))
    return {keys[k]: document[keys[k]] for k in order}


def sample(n: int, width: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    rows = rng.normal(size=(n, width)) * 10.0 ** rng.integers(-4, 4, size=width)
    targets = 2.0 * rows[:, 0] - rows[:, -1] + rng.normal(size=n)
    return rows, targets


def check_rows_with_a_target(shape: EntryShape, entries: list[BusEntry], rows, targets) -> None:
    converted = shape.convert(entries)
    assert converted.rejects == []
    assert converted.labels is None
    assert converted.rows.shape == (len(rows), rows.shape[1] + 1)
    expected = np.column_stack([rows, targets])
    assert converted.rows.tobytes() == expected.tobytes()
    chunk = chunk_format("rows with a target").from_entries(converted.rows, [])
    assert isinstance(chunk, TargetRows)
    assert np.asarray(chunk.rows).tobytes() == np.ascontiguousarray(rows).tobytes()
    assert chunk.targets.dtype == np.float64 and chunk.targets.tobytes() == targets.tobytes()


def test_the_target_is_read_as_one_more_numeric_column_on_every_path() -> None:
    rows, targets = sample(40, 3, seed=11)
    docs = documents(rows, targets, NAMES)
    shape = EntryShape(NAMES, None, target_field=TARGET)
    assert shape.names == [*NAMES, TARGET] and shape.width == 4
    # Redis text, the fields in the expected order (one list comparison) and shuffled.
    as_text = [{k: repr(v) for k, v in d.items()} for d in docs]
    check_rows_with_a_target(
        shape, [redis_entry(i, d) for i, d in enumerate(as_text)], rows, targets
    )
    check_rows_with_a_target(
        shape, [redis_entry(i, shuffled(d, i)) for i, d in enumerate(as_text)], rows, targets
    )
    # Parsed fields (a bus whose client parses).
    parsed = [BusEntry(str(i), json.loads(json.dumps(d))) for i, d in enumerate(docs)]
    check_rows_with_a_target(shape, parsed, rows, targets)
    # JSON messages: decoded into structs in one pass, the target a float field of them, in
    # the producer's key order or another.
    for reorder in (False, True):
        entries = [
            raw_entry(i, orjson.dumps(shuffled(d, 7) if reorder else d)) for i, d in enumerate(docs)
        ]
        assert shape._decoders is not None and shape._decoders.decode(entries) is not None
        check_rows_with_a_target(shape, entries, rows, targets)
    # msgpack maps, decoded into structs alike.
    packed = EntryShape(NAMES, None, "msgpack", target_field=TARGET)
    entries = [raw_entry(i, msgspec.msgpack.encode(d)) for i, d in enumerate(docs)]
    assert packed._decoders is not None and packed._decoders.decode(entries) is not None
    check_rows_with_a_target(packed, entries, rows, targets)


@pytest.mark.parametrize("format", ["json", "msgpack"])
def test_a_target_structs_cannot_serve_is_read_to_the_same_rows(format: str) -> None:
    """Wider than structs serve: JSON gathered by orjson, msgpack entry by entry."""
    wide = [f"feature {i}" for i in range(200)]
    rows, targets = sample(12, len(wide), seed=5)
    shape = EntryShape(wide, None, format, target_field=TARGET)
    assert shape._decoders is None
    encode: Callable[[Any], bytes] = orjson.dumps if format == "json" else msgspec.msgpack.encode
    entries = [
        raw_entry(i, encode(shuffled(d, i))) for i, d in enumerate(documents(rows, targets, wide))
    ]
    if format == "json":
        assert shape._gather_json(entries) is not None
    check_rows_with_a_target(shape, entries, rows, targets)


GOOD = {"a": 1.5, "b": -2.0, "c": 3.0, TARGET: 0.25}
WITHOUT_TARGET = {k: v for k, v in GOOD.items() if k != TARGET}


def text(document: dict[str, Any]) -> dict[str, Any]:
    return {k: repr(v) if isinstance(v, float) else v for k, v in document.items()}


#: Per producer: how an entry is written, and its bad targets with the reason each gives.
PRODUCERS: dict[str, tuple[Callable[[int, dict[str, Any]], BusEntry], list[tuple[Any, str]]]] = {
    "redis text": (
        lambda i, d: redis_entry(i, text(d)),
        [
            ("twelve", "target field 'y' is not a number: got \"twelve\""),
            ("", "target field 'y' is not a number: got \"\""),
            ("nan", "target field 'y': values must be finite; got nan"),
            ("-inf", "target field 'y': values must be finite; got -inf"),
            ("1e300", f"target field 'y': values must lie within +-{MAX_ABS_VALUE:g}"),
        ],
    ),
    "json": (
        lambda i, d: raw_entry(i, json.dumps(d).encode()),
        [
            ("12", "target field 'y' is not a number: got \"12\""),
            (True, "target field 'y' is not a number: got true"),
            (None, "target field 'y' is not a number: got null"),
            ([1.0], "target field 'y' is not a number"),
            (1e300, f"target field 'y': values must lie within +-{MAX_ABS_VALUE:g}"),
        ],
    ),
    "msgpack": (
        lambda i, d: raw_entry(i, msgspec.msgpack.encode(d)),
        [
            ("3", "target field 'y' is not a number: got \"3\""),
            (b"3", "target field 'y' is not a number: got binary data"),
            (float("nan"), "target field 'y': values must be finite; got nan"),
            (float("inf"), "target field 'y': values must be finite; got inf"),
            (-1e51, f"target field 'y': values must lie within +-{MAX_ABS_VALUE:g}"),
        ],
    ),
}


@pytest.mark.parametrize("producer", sorted(PRODUCERS))
def test_a_bad_target_sets_its_entry_aside_naming_the_target_field(producer: str) -> None:
    write, bad_targets = PRODUCERS[producer]
    shape = EntryShape(
        NAMES, None, "msgpack" if producer == "msgpack" else "json", target_field=TARGET
    )
    written = [GOOD]
    expected: dict[int, str] = {}
    for value, reason in bad_targets:
        expected[len(written)] = reason
        written.append({**GOOD, TARGET: value})
    expected[len(written)] = "missing target field 'y'"
    written.append(WITHOUT_TARGET)
    expected[len(written)] = "unknown field 'z': expected the target's feature names and the "
    written.append({**WITHOUT_TARGET, "z": 1.0})
    written.append({**GOOD, TARGET: -7})  # an integer target is a number
    entries = [write(i, d) for i, d in enumerate(written)]
    converted = shape.convert(entries)
    reasons = dict(converted.rejects)
    assert sorted(reasons) == sorted(entries[i].position for i in expected)
    for i, reason in expected.items():
        assert reasons[entries[i].position].startswith(reason), reasons[entries[i].position]
    assert "target field 'y'" in reasons[entries[max(expected)].position]
    np.testing.assert_array_equal(converted.rows, [[1.5, -2.0, 3.0, 0.25], [1.5, -2.0, 3.0, -7]])
    # Each entry alone gives the same verdict as in its batch.
    alone = [reject for entry in entries for reject in shape.convert([entry]).rejects]
    assert alone == converted.rejects


def test_an_array_holds_no_target_field() -> None:
    """A message that is an array gives features by position (a selector without names), and
    has no field for the target: set aside, saying which is missing."""
    positional = [f"f{i}" for i in range(3)]
    shape = EntryShape(positional, None, target_field=TARGET)
    converted = shape.convert([raw_entry(1, b"[1.0, 2.0, 3.0]"), raw_entry(2, b"[1, 2, 3, 4]")])
    assert dict(converted.rejects) == {
        "1": "missing target field 'y'",
        "2": "unknown field 'f3': expected the target's feature names and the target field 'y'",
    }
    good = shape.convert([raw_entry(3, b'{"f0": 1, "f1": 2, "f2": 3, "y": 4}')])
    np.testing.assert_array_equal(good.rows, [[1, 2, 3, 4]])


def test_an_entry_holds_a_label_or_a_target_not_both() -> None:
    with pytest.raises(ValueError, match="not both"):
        EntryShape(NAMES, "label", target_field=TARGET)
