"""Entries as rows (``service.sources.entries``) and URLs without credentials
(``service.sources.spec``), without a bus: the fast path (Redis pairs in the expected order,
parsed in one pass) gives exactly what the entry-by-entry path gives, every bad entry is set
aside with its own reason whatever else the batch holds, and no credential survives."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.sources.bus import BusEntry
from service.sources.entries import EntryShape
from service.sources.spec import redacted, scrub

NAMES = ["a", "b", "c"]


def redis_entry(position: int, fields: dict[str, Any]) -> BusEntry:
    pairs: list[bytes] = []
    for key, value in fields.items():
        pairs += [key.encode(), value if isinstance(value, bytes) else str(value).encode()]
    return BusEntry(f"{position}-0", None, pairs=pairs)


def json_entry(position: int, document: Any) -> BusEntry:
    data = json.loads(json.dumps(document))
    if isinstance(data, dict):
        return BusEntry(str(position), data)
    return BusEntry(str(position), None, "not an object")


def test_fields_in_any_order_give_the_same_rows() -> None:
    rows = np.random.default_rng(0).normal(size=(50, 3))
    shape = EntryShape(NAMES, None)
    ordered = [
        redis_entry(i, dict(zip(NAMES, (repr(float(v)) for v in r), strict=True)))
        for i, r in enumerate(rows)
    ]
    shuffled = [
        redis_entry(i, dict(reversed(list(zip(NAMES, (repr(float(v)) for v in r), strict=True)))))
        for i, r in enumerate(rows)
    ]
    as_json = [json_entry(i, dict(zip(NAMES, r.tolist(), strict=True))) for i, r in enumerate(rows)]
    for entries in (ordered, shuffled, as_json):
        converted = shape.convert(entries)
        assert converted.rejects == []
        np.testing.assert_array_equal(converted.rows, rows)


def test_each_bad_entry_is_set_aside_with_its_own_reason() -> None:
    shape = EntryShape(NAMES, "y")
    good = {"a": "1", "b": "2", "c": "3", "y": "cat"}
    entries = [
        redis_entry(1, good),
        redis_entry(2, {**good, "b": "two"}),
        redis_entry(3, {**good, "d": "4"}),
        redis_entry(4, {k: v for k, v in good.items() if k != "c"}),
        redis_entry(5, {**good, "a": "inf"}),
        redis_entry(6, {**good, "c": "1e51"}),
        redis_entry(7, {k: v for k, v in good.items() if k != "y"}),
        redis_entry(8, {**good, "y": "x" * 300}),
        BusEntry("9-0", None, pairs=[b"a", b"1", b"a", b"2", b"b", b"3", b"y", b"1"]),
        redis_entry(10, {**good, "y": "-3"}),
    ]
    converted = shape.convert(entries)
    reasons = dict(converted.rejects)
    assert [position for position, _ in converted.rejects] == [f"{i}-0" for i in range(2, 10)]
    assert "'b' is not a number" in reasons["2-0"]
    assert "unknown field 'd'" in reasons["3-0"]
    assert "missing field 'c'" in reasons["4-0"]
    assert "finite" in reasons["5-0"] and "'a'" in reasons["5-0"]
    assert "within" in reasons["6-0"] and "'c'" in reasons["6-0"]
    assert "missing field 'y'" in reasons["7-0"]
    assert "label field 'y'" in reasons["8-0"]
    assert "twice" in reasons["9-0"]
    np.testing.assert_array_equal(converted.rows, [[1, 2, 3], [1, 2, 3]])
    assert converted.labels == ["cat", -3]


def test_a_json_string_is_not_a_number_nor_a_boolean() -> None:
    shape = EntryShape(NAMES, None)
    entries = [
        json_entry(1, {"a": 1, "b": 2.5, "c": -3}),
        json_entry(2, {"a": "1", "b": 2, "c": 3}),
        json_entry(3, {"a": True, "b": 2, "c": 3}),
        json_entry(4, {"a": None, "b": 2, "c": 3}),
        json_entry(5, [1, 2, 3]),
    ]
    converted = shape.convert(entries)
    assert [p for p, _ in converted.rejects] == ["2", "3", "4", "5"]
    np.testing.assert_array_equal(converted.rows, [[1, 2.5, -3]])


def test_text_is_read_as_float_reads_it_bit_for_bit() -> None:
    shape = EntryShape(NAMES, None)
    texts = [["-0", "-0.0", "1e-0"], ["007", "1E5", "123456789012345678901234567890"]]
    entries = [redis_entry(i, dict(zip(NAMES, row, strict=True))) for i, row in enumerate(texts)]
    converted = shape.convert(entries)
    expected = np.array([[float(v) for v in row] for row in texts])
    assert converted.rows.tobytes() == expected.tobytes()


values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64).map(repr),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.sampled_from(
        ["", "x", "1e400", "-0", " 7 ", "nan", "1_0", "0x10", "007", ".5", "1.", "+3", "1,2"]
    ),
    st.sampled_from(["[1]", "1],[2", "true", '"1"', "1e", "--1", "[]", "2]"]),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(values, values, values), min_size=1, max_size=20))
def test_the_batch_and_each_entry_alone_agree(batch: list[tuple[str, str, str]]) -> None:
    """Converting a batch gives, entry for entry, what converting each entry alone gives:
    one bad value never takes a good entry with it."""
    shape = EntryShape(NAMES, None)
    entries = [redis_entry(i, dict(zip(NAMES, v, strict=True))) for i, v in enumerate(batch)]
    together = shape.convert(entries)
    rows, rejects = [], []
    for entry in entries:
        alone = shape.convert([entry])
        rows += alone.rows.tolist()
        rejects += alone.rejects
    assert together.rejects == rejects
    np.testing.assert_array_equal(together.rows, np.array(rows).reshape(-1, 3))
    # Every good entry holds what Python's float() reads in its text, bit for bit.
    refused = {position for position, _ in together.rejects}
    expected = [[float(v) for v in row] for i, row in enumerate(batch) if f"{i}-0" not in refused]
    assert together.rows.tobytes() == np.array(expected, dtype=np.float64).reshape(-1, 3).tobytes()


@pytest.mark.parametrize(
    ("url", "shown", "secret"),
    [
        ("redis://bob:pw123@h:6379/0", "redis://bob:***@h:6379/0", "pw123"),
        ("redis://:pw123@h:6379", "redis://***@h:6379", "pw123"),
        ("nats://tok3n@h:4222", "nats://***@h:4222", "tok3n"),
        ("nats://h:4222", "nats://h:4222", None),
    ],
)
def test_credentials_never_survive(url: str, shown: str, secret: str | None) -> None:
    assert redacted(url) == shown
    error = f"could not connect to {url} (user bob, password {secret})"
    cleaned = scrub(error, url)
    assert shown in cleaned
    if secret is not None:
        assert secret not in cleaned


def raw_entry(position: int, value: bytes | None) -> BusEntry:
    """A message as a JSON bus carries it (Kafka): its value not yet parsed."""
    if value is None:
        return BusEntry(str(position), None, "no value (a tombstone)")
    return BusEntry(str(position), None, raw=value)


json_values = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.sampled_from(["1.5", "", True, False, None, [1.0], {"a": 1}, 1e300, -0.0]),
)
raw_values = st.one_of(
    st.fixed_dictionaries({n: json_values for n in NAMES}).map(lambda d: json.dumps(d).encode()),
    st.fixed_dictionaries({n: json_values for n in NAMES}, optional={"d": json_values}).map(
        lambda d: json.dumps(dict(reversed(list(d.items())))).encode()
    ),
    st.dictionaries(st.sampled_from([*NAMES, "y"]), json_values).map(
        lambda d: json.dumps(d).encode()
    ),
    st.lists(json_values, max_size=4).map(lambda v: json.dumps(v).encode()),
    st.sampled_from([b"not json", b"", b"3", b'"abc"', b"[1, 2", b"null", None]),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(raw_values, min_size=1, max_size=20))
def test_a_batch_of_json_messages_and_each_alone_agree(batch: list[bytes | None]) -> None:
    """A batch of JSON messages parsed together (the fast path) gives, message for message,
    what each gives alone, and what its parsed fields give (the path of a bus that parses)."""
    shape = EntryShape(NAMES, None)
    entries = [raw_entry(i, value) for i, value in enumerate(batch)]
    together = shape.convert(entries)
    rows, rejects = [], []
    for entry in entries:
        alone = shape.convert([entry])
        rows += alone.rows.tolist()
        rejects += alone.rejects
    assert together.rejects == rejects
    assert together.rows.tobytes() == np.array(rows, dtype=np.float64).reshape(-1, 3).tobytes()
    parsed = [
        BusEntry(e.position, json.loads(e.raw), None)
        if e.raw is not None and e.raw.startswith(b"{")
        else e
        for e in entries
    ]
    assert shape.convert(parsed).rows.tobytes() == together.rows.tobytes()


def test_a_batch_of_good_json_messages_takes_the_fast_path() -> None:
    rows = np.random.default_rng(1).normal(size=(30, 3))
    shape = EntryShape(NAMES, "y")
    documents = [
        {**dict(zip(NAMES, r.tolist(), strict=True)), "y": i % 3} for i, r in enumerate(rows)
    ]
    entries = [raw_entry(i, json.dumps(d).encode()) for i, d in enumerate(documents)]
    assert shape._gather_json(entries) is not None
    converted = shape.convert(entries)
    assert converted.rejects == []
    assert converted.rows.tobytes() == rows.tobytes()
    assert converted.labels == [i % 3 for i in range(30)]
    entries[7] = raw_entry(7, b'{"a": 1, "b": 2, "c": "3", "y": 1}')
    entries[9] = raw_entry(9, None)
    assert shape._gather_json(entries) is None
    converted = shape.convert(entries)
    assert dict(converted.rejects) == {
        "7": "field 'c' is not a number: got \"3\"",
        "9": "no value (a tombstone)",
    }
    np.testing.assert_array_equal(converted.rows, np.delete(rows, [7, 9], axis=0))


def feature_names(max_size: int) -> st.SearchStrategy[list[str]]:
    """Distinct feature names msgspec takes as keys (no quote, backslash or control
    character), not identifiers in general."""
    return st.lists(
        st.text(
            st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters='"\\'),
            min_size=1,
            max_size=12,
        ),
        min_size=1,
        max_size=max_size,
        unique=True,
    )


@settings(max_examples=100, deadline=None)
@given(
    names=feature_names(max_size=12),
    labelled=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
    orders=st.integers(1, 4),
)
def test_json_messages_in_any_key_order_give_what_their_fields_give(
    names: list[str], labelled: bool, seed: int, orders: int
) -> None:
    """JSON messages decoded into structs (their keys in one or several orders, names that
    are not identifiers, a feature named like the label's attribute) give exactly the rows
    and labels their parsed fields give, the path independent of msgspec."""
    label = "y" if labelled and "y" not in names else None
    shape = EntryShape(names, label)
    assert shape._decoders is not None
    rng = np.random.default_rng(seed)
    keys = [*names, *([label] if label else [])]
    permutations = [rng.permutation(len(keys)) for _ in range(orders)]
    rows = rng.normal(size=(25, len(names))) * 10.0 ** rng.integers(-5, 5, size=len(names))
    entries, parsed = [], []
    for i, row in enumerate(rows):
        values: dict[str, Any] = dict(zip(names, row.tolist(), strict=True))
        if label:
            values[label] = ["cat", 3, "dog"][i % 3]
        document = {keys[k]: values[keys[k]] for k in permutations[i % orders]}
        raw = json.dumps(document).encode()
        entries.append(raw_entry(i, raw))
        parsed.append(BusEntry(str(i), json.loads(raw)))
    assert shape._decoders.decode(entries) is not None
    decoded, reference = shape.convert(entries), shape.convert(parsed)
    assert decoded.rejects == reference.rejects == []
    assert decoded.rows.tobytes() == reference.rows.tobytes() == rows.tobytes()
    assert decoded.labels == reference.labels


@pytest.mark.parametrize(
    "wide",
    [[f"feature {i}" for i in range(200)], ['say "hi"', "back\\slash", "tab\t", "plain"]],
    ids=["wider than MAX_FIELDS", "names msgspec refuses"],
)
def test_a_target_structs_cannot_serve_is_read_with_orjson_to_the_same_rows(
    wide: list[str],
) -> None:
    """Beyond ``MAX_FIELDS`` a shuffled message would cost the width squared in a struct,
    and msgspec refuses some keys: such targets are read with orjson, to the same rows."""
    shape = EntryShape(wide, None)
    assert shape._decoders is None
    rows = np.random.default_rng(3).normal(size=(10, len(wide)))
    order = np.random.default_rng(4).permutation(len(wide))
    entries = [
        raw_entry(i, json.dumps({wide[k]: row[k] for k in order}).encode())
        for i, row in enumerate(rows.tolist())
    ]
    converted = shape.convert(entries)
    assert converted.rejects == []
    assert converted.rows.tobytes() == rows.tobytes()


def msgpack_entry(position: int, document: Any) -> BusEntry:
    """A message whose value is msgpack, as a bus carries it."""
    return BusEntry(str(position), None, raw=msgspec.msgpack.encode(document))


def test_arrays_of_numbers_are_decoded_with_their_batch_to_the_json_path_s_rows() -> None:
    """A selector without names takes arrays by position: a batch of them is decoded in one
    pass (JSON or msgpack) to what each message's parsed fields give, bit for bit."""
    positional = [f"f{i}" for i in range(4)]
    rows = np.random.default_rng(5).normal(size=(40, 4)) * 10.0 ** np.arange(-3, 5, 2)
    parsed = [
        BusEntry(str(i), dict(zip(positional, r.tolist(), strict=True))) for i, r in enumerate(rows)
    ]
    reference = EntryShape(positional, None).convert(parsed)
    for format, encode in (("json", orjson.dumps), ("msgpack", msgspec.msgpack.encode)):
        shape = EntryShape(positional, None, format)
        entries = [raw_entry(i, encode(r.tolist())) for i, r in enumerate(rows)]
        assert shape._decoders is not None and shape._decoders.decode(entries) is not None
        converted = shape.convert(entries)
        assert converted.rejects == []
        assert converted.rows.tobytes() == reference.rows.tobytes() == rows.tobytes()
        # A short array, a long one, a string in one: set aside, the others kept.
        entries[3] = raw_entry(3, encode([1.0, 2.0, 3.0]))
        entries[4] = raw_entry(4, encode([1.0, 2.0, 3.0, 4.0, 5.0]))
        entries[5] = raw_entry(5, encode([1.0, "2", 3.0, 4.0]))
        assert shape._decoders.decode(entries) is None
        converted = shape.convert(entries)
        assert converted.rejects == [
            ("3", "missing field 'f3'"),
            ("4", "unknown field 'f4': expected the target's feature names"),
            ("5", "field 'f1' is not a number: got \"2\""),
        ]
        np.testing.assert_array_equal(converted.rows, np.delete(rows, [3, 4, 5], axis=0))


@settings(max_examples=100, deadline=None)
@given(
    names=feature_names(max_size=20),
    labelled=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
    orders=st.integers(1, 3),
)
def test_msgpack_maps_give_exactly_what_the_same_json_messages_give(
    names: list[str], labelled: bool, seed: int, orders: int
) -> None:
    """The same documents written as msgpack maps and as JSON objects (keys in one or
    several orders, a label as text or a number) give the same rows, bit for bit, and the
    same labels."""
    label = "y" if labelled and "y" not in names else None
    json_shape, msgpack_shape = EntryShape(names, label), EntryShape(names, label, "msgpack")
    assert msgpack_shape._decoders is not None
    rng = np.random.default_rng(seed)
    keys = [*names, *([label] if label else [])]
    permutations = [rng.permutation(len(keys)) for _ in range(orders)]
    rows = rng.normal(size=(30, len(names))) * 10.0 ** rng.integers(-8, 8, size=len(names))
    documents = []
    for i, row in enumerate(rows):
        values: dict[str, Any] = dict(zip(names, row.tolist(), strict=True))
        if label:
            values[label] = ["cat", 3, "dog", -7][i % 4]
        documents.append({keys[k]: values[keys[k]] for k in permutations[i % orders]})
    as_json = [raw_entry(i, orjson.dumps(d)) for i, d in enumerate(documents)]
    as_msgpack = [msgpack_entry(i, d) for i, d in enumerate(documents)]
    assert msgpack_shape._decoders.decode(as_msgpack) is not None
    from_json, from_msgpack = json_shape.convert(as_json), msgpack_shape.convert(as_msgpack)
    assert from_msgpack.rejects == from_json.rejects == []
    assert from_msgpack.rows.tobytes() == from_json.rows.tobytes() == rows.tobytes()
    assert from_msgpack.labels == from_json.labels


def test_bad_msgpack_messages_are_set_aside_each_with_its_reason() -> None:
    shape = EntryShape(NAMES, "y", "msgpack")
    good = {"a": 1.5, "b": -2, "c": 3e10, "y": "cat"}
    pack = msgspec.msgpack.encode
    twice = b"\x85" + b"".join(pack(k) + pack(v) for k, v in [*good.items(), ("a", 9.0)])
    entries = [
        msgpack_entry(1, good),
        BusEntry("2", None, raw=b"\xc1 not msgpack"),
        BusEntry("3", None, raw=orjson.dumps(good)),  # JSON, not msgpack
        msgpack_entry(4, 17),
        BusEntry("5", None, raw=twice),
        msgpack_entry(6, {**good, "b": "2"}),
        msgpack_entry(7, {**good, "b": b"2"}),
        msgpack_entry(8, {**good, "b": True}),
        msgpack_entry(9, {**good, "b": None}),
        msgpack_entry(10, {**good, "d": 4.0}),
        msgpack_entry(11, {k: v for k, v in good.items() if k != "c"}),
        msgpack_entry(12, {**good, "a": float("nan")}),
        msgpack_entry(13, {**good, "c": 1e51}),
        msgpack_entry(14, {**good, "y": "x" * 300}),
        msgpack_entry(15, {**good, "y": 4}),
        msgpack_entry(16, {**good, "y": b"dog"}),
        BusEntry("17", None, raw=pack(good)[:-2]),  # cut short
    ]
    assert shape._decoders is not None and shape._decoders.decode(entries) is None
    converted = shape.convert(entries)
    reasons = dict(converted.rejects)
    assert [p for p, _ in converted.rejects] == [str(i) for i in range(2, 15)] + ["17"]
    assert (
        reasons["2"]
        == reasons["3"]
        == reasons["17"]
        == ("not msgpack: expected a map keyed by feature name")
    )
    assert reasons["4"] == "expected a msgpack map keyed by feature name; got int"
    assert reasons["5"] == "field 'a' is given twice"
    assert reasons["6"] == "field 'b' is not a number: got \"2\""
    assert reasons["7"] == "field 'b' is not a number: got binary data"
    assert reasons["8"] == "field 'b' is not a number: got true"
    assert reasons["9"] == "field 'b' is not a number: got null"
    assert reasons["10"].startswith("unknown field 'd'")
    assert reasons["11"] == "missing field 'c'"
    assert "finite" in reasons["12"] and "'a'" in reasons["12"]
    assert "within" in reasons["13"] and "'c'" in reasons["13"]
    assert reasons["14"].startswith("label field 'y'")
    # No raw bytes of a message in any reason.
    assert not any("\\x" in reason or "\ufffd" in reason for reason in reasons.values())
    np.testing.assert_array_equal(converted.rows, [[1.5, -2, 3e10]] * 3)
    assert converted.labels == ["cat", 4, "dog"]


def test_a_map_given_a_key_twice_in_a_wide_header_is_found() -> None:
    """A msgpack map written in a larger header than needed (map16 for four pairs), a key
    given twice in it or not: read entry by entry, to the same verdicts."""
    shape = EntryShape(NAMES, None, "msgpack")
    pack = msgspec.msgpack.encode
    pairs = [("a", 1.0), ("b", 2.0), ("c", 3.0)]
    wide = b"\xde\x00\x03" + b"".join(pack(k) + pack(v) for k, v in pairs)
    twice = b"\xde\x00\x04" + b"".join(pack(k) + pack(v) for k, v in [*pairs, ("c", 4.0)])
    converted = shape.convert([BusEntry("1", None, raw=wide), BusEntry("2", None, raw=twice)])
    assert converted.rejects == [("2", "field 'c' is given twice")]
    np.testing.assert_array_equal(converted.rows, [[1.0, 2.0, 3.0]])


msgpack_values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.floats(width=32),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.sampled_from(["1.5", "", True, False, None, b"1", [1.0], {"a": 1}, 1e300, -0.0]),
)
raw_msgpack = st.one_of(
    st.fixed_dictionaries({n: msgpack_values for n in NAMES}).map(msgspec.msgpack.encode),
    st.fixed_dictionaries({n: msgpack_values for n in NAMES}, optional={"d": msgpack_values}).map(
        lambda d: msgspec.msgpack.encode(dict(reversed(list(d.items()))))
    ),
    st.dictionaries(st.sampled_from([*NAMES, "y"]), msgpack_values).map(msgspec.msgpack.encode),
    st.lists(msgpack_values, max_size=4).map(msgspec.msgpack.encode),
    st.binary(max_size=12),
    st.sampled_from([b"\x83", b"", b"\xc0", b"\x93\x01\x02", None]),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(raw_msgpack, min_size=1, max_size=20))
def test_a_batch_of_msgpack_messages_and_each_alone_agree(batch: list[bytes | None]) -> None:
    """A batch of msgpack messages decoded together gives, message for message, what each
    gives alone: one bad message never takes a good one with it."""
    shape = EntryShape(NAMES, None, "msgpack")
    entries = [raw_entry(i, value) for i, value in enumerate(batch)]
    together = shape.convert(entries)
    rows, rejects = [], []
    for entry in entries:
        alone = shape.convert([entry])
        rows += alone.rows.tolist()
        rejects += alone.rejects
    assert together.rejects == rejects
    assert together.rows.tobytes() == np.array(rows, dtype=np.float64).reshape(-1, 3).tobytes()


def test_a_format_is_json_or_msgpack() -> None:
    with pytest.raises(ValueError, match="format"):
        EntryShape(NAMES, None, "xml")
