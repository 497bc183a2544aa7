"""Bus entries as rows of a selector: matched by feature name, validated one by one, so that a
bad entry is set aside with its position and reason and the others go on.

An entry holds one field per feature name (in any order), and the label field for a labelled
target, or the target field for one of rows with a target. A message's value
(``BusEntry.raw``) is written in the source's ``format``: JSON (an object keyed by feature
name, or an array of numbers by position, for a selector without names) or msgpack (a map, or
an array, alike). What it may not hold: an unknown field, a missing one, a value that is not a
number, a number that is not finite or beyond ``MAX_ABS_VALUE`` (the checks every chunk
passes, ``service.wire.rows``), a label that is not an integer or a string of 1-256
characters. A target is a number like the features: it is read as one more numeric column
after them, by the same paths and checks (its rows come out one column wider, the target
last).

The common case is converted in bulk: a Redis entry whose fields come in the expected order is
recognised by one list comparison, any other entry's values gathered by one ``itemgetter``;
a batch of messages (``BusEntry.raw``) is decoded by msgspec, in C, into structs of exactly the
expected fields (or lists of numbers, for arrays) in one pass (``_StructDecoders``); the values
of the whole batch are then made one matrix; only when that fails (a message that is not of
its format or has other fields, a value that is not a number somewhere in the batch) are the
entries parsed one at a time to find which.
"""

from __future__ import annotations

import itertools
import json
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any

import msgspec
import numpy as np
import orjson
from msgspec.structs import astuple

from service.algorithms.base import MAX_ABS_VALUE
from service.algorithms.labels import Label
from service.errors import InvalidInput, shown
from service.sources.bus import BusEntry, label_value
from service.wire.labelled import validate_labels
from service.wire.numbers import parse_number
from service.wire.rows import value_problem

#: JSON numbers (``bool`` is an ``int`` in Python, and is not a number here).
_NUMBERS = (int, float)
_NUMBER_TYPES = frozenset(_NUMBERS)
#: What JSON arrays of numbers are written with (and nothing else: ``_parse_text``).
_JSON_NUMBER_TEXT = b"0123456789.eE+-,[]"


@dataclass(frozen=True)
class Rows:
    """What a batch of entries gave: the good rows in bus order (their target as a last
    column, for a target field), their labels (a labelled target), and the entries set aside,
    as (position, reason)."""

    rows: np.ndarray
    labels: list[Label] | None
    rejects: list[tuple[str, str]]


class EntryShape:
    """What an entry must hold for one target: its feature names, and its label field or its
    target field (a number, read as a last column: ``names`` ends with it); and what a
    message's value is written in (``format``: ``json`` or ``msgpack``, the source's)."""

    def __init__(
        self,
        names: Sequence[str],
        label_field: str | None,
        format: str = "json",
        target_field: str | None = None,
    ) -> None:
        if format not in _FORMATS:
            raise ValueError(f"expected format to be one of {sorted(_FORMATS)}; got {format!r}")
        if label_field is not None and target_field is not None:
            raise ValueError("an entry holds a label field or a target field, not both")
        #: The numeric columns: the features, then the target field if any.
        self.names = [*names, *([target_field] if target_field is not None else [])]
        self.label_field = label_field
        self.target_field = target_field
        #: How a reason names each numeric column.
        self._described = [f"field '{name}'" for name in names] + (
            [f"target field '{target_field}'"] if target_field is not None else []
        )
        self.format = _FORMATS[format]
        self.width = len(self.names) + (label_field is not None)
        self._expected = set(self.names) | ({label_field} if label_field else set())
        # The same getters over bytes keys (Redis replies) and text keys (JSON).
        wanted = [*self.names, *([label_field] if label_field else [])]
        self._wanted = wanted
        self._keys = [name.encode() for name in wanted]
        self._get_text = _getter(wanted)
        self._get_bytes = _getter(self._keys)
        self._decoders = _StructDecoders.of(self.names, label_field, format)

    def convert(self, entries: Sequence[BusEntry]) -> Rows:
        """The rows of ``entries`` and the entries set aside."""
        rejects: list[tuple[str, str]] = []
        decoded = self._decoders.decode(entries) if self._decoders is not None else None
        if decoded is not None:
            matrix, label_values = decoded
            positions = [entry.position for entry in entries]
        else:
            matrix, label_values, positions = self._parse(entries, rejects)
        good = list(range(len(matrix)))
        labels: list[Label] | None = None
        if self.label_field is not None:
            labels = []
            kept = []
            for i in good:
                label, problem = _label(label_values[i], self.label_field)
                if problem is not None:
                    rejects.append((positions[i], problem))
                elif label is not None:
                    labels.append(label)
                    kept.append(i)
            good = kept
        if len(good) != len(matrix):
            matrix = matrix[good]
        # Values beyond the limit (or not finite) set their entry aside.
        within = np.abs(matrix) <= MAX_ABS_VALUE  # NaN compares False
        if not within.all():
            ok: np.ndarray = np.asarray(within.all(axis=1))
            for row in np.flatnonzero(~ok):
                column = int(np.argmin(within[row]))
                rejects.append(
                    (
                        positions[good[row]],
                        f"{self._described[column]}: {value_problem(float(matrix[row, column]))}",
                    )
                )
            matrix = matrix[ok]
            if labels is not None:
                labels = [label for label, keep in zip(labels, ok.tolist(), strict=True) if keep]
        rejects.sort(key=lambda reject: _order(reject[0]))
        return Rows(np.ascontiguousarray(matrix, dtype=np.float64), labels, rejects)

    def _parse(
        self, entries: Sequence[BusEntry], rejects: list[tuple[str, str]]
    ) -> tuple[np.ndarray, list[Any], list[str]]:
        """The rows of the entries whose values are all numbers, their label values and
        positions; the others' reasons appended to ``rejects``."""
        gathered = self._gather_json(entries) if self.format.gathered_by_orjson else None
        if gathered is not None:
            positions = [entry.position for entry in entries]
        else:
            gathered, positions = [], []
            for entry in entries:
                values = self._gather(entry)
                if isinstance(values, str):
                    rejects.append((entry.position, values))
                else:
                    gathered.append(values)
                    positions.append(entry.position)
        n = len(self.names)
        matrix = _parse_bulk(gathered, n)
        if matrix is None:  # some value is not a number: find which, entry by entry
            rows = np.empty((len(gathered), n))
            good: list[int] = []
            for i, values in enumerate(gathered):
                problem = _parse_one(values[:n], self._described, rows[i])
                if problem is None:
                    good.append(i)
                else:
                    rejects.append((positions[i], problem))
            matrix = rows[good]
            gathered = [gathered[i] for i in good]
            positions = [positions[i] for i in good]
        label_values = [values[n] for values in gathered] if self.label_field else []
        return matrix, label_values, positions

    def _gather_json(self, entries: Sequence[BusEntry]) -> list[Sequence[Any]] | None:
        """The values of a batch of JSON messages (label last) when each is an object of
        exactly the expected fields, the common case, in one pass; None otherwise (entries of
        another kind, or a message that is not such: the batch then goes entry by entry, which
        says which and why). One ``orjson.loads`` per message: one call on the batch joined
        into an array was slower (BENCHMARKS.md, "Sources")."""
        if not entries or entries[0].raw is None:
            return None
        try:
            documents = list(map(orjson.loads, [entry.raw or b"" for entry in entries]))
            # The fields in the expected order in every message (one producer's messages are
            # written alike): their values as they are, cheaper than gathering them by name.
            # A key given twice: entry by entry, which says which.
            if not all(map(_once, [entry.raw or b"" for entry in entries], documents)):
                return None
            if list(documents[0]) == self._wanted and all(
                list(document) == self._wanted for document in documents
            ):
                return list(map(list, map(dict.values, documents)))
            if set(map(len, documents)) != {self.width}:
                return None
            return list(map(self._get_text, documents))
        except (ValueError, TypeError, KeyError):  # not JSON, not an object, a field missing
            return None

    def _gather(self, entry: BusEntry) -> Sequence[Any] | str:
        """The entry's values in the expected order (label last), or why it has none."""
        pairs = entry.pairs
        fields: Mapping[Any, Any] | None
        if entry.raw is not None:
            document = self.format.fields(entry.raw)
            if isinstance(document, str):
                return document
            fields = document
        elif pairs is not None:
            if pairs[0::2] == self._keys:  # the expected fields, in the expected order
                return pairs[1::2]
            fields = dict(zip(pairs[0::2], pairs[1::2], strict=False))
            if 2 * len(fields) != len(pairs):
                return "a field is given twice"
        else:
            fields = entry.fields
        if fields is None:
            return entry.problem or "not an object of fields"
        if len(fields) == self.width:
            first = next(iter(fields), None)
            get = self._get_bytes if isinstance(first, bytes) else self._get_text
            try:
                return get(fields)
            except KeyError:
                pass
        return self._mismatch(fields)

    def _mismatch(self, fields: Mapping[Any, Any]) -> str:
        given = {k.decode("utf-8", "replace") if isinstance(k, bytes) else str(k) for k in fields}
        unknown = sorted(given - self._expected)
        if unknown:
            side = ""
            if self.label_field is not None:
                side = f" and the label field '{self.label_field}'"
            elif self.target_field is not None:
                side = f" and the target field '{self.target_field}'"
            return f"unknown field '{unknown[0][:200]}': expected the target's feature names{side}"
        for name, described in zip(self.names, self._described, strict=True):
            if name not in given:
                return f"missing {described}"
        return f"missing field '{self.label_field}'"


class _StructDecoders:
    """A batch of messages decoded by msgspec into structs of exactly the expected fields (a
    JSON or msgpack decoder, as the source's format says): it checks each value is a number
    (not a string, boolean or null) and that no field is missing or unknown as it parses, in
    C, so that a message costs about half what ``orjson.loads``, gathering and checking its
    values cost (BENCHMARKS.md, "Sources"). Arrays of numbers (a selector without names, its
    features ``f0``, ``f1``, ...) are decoded alike, as lists of floats.

    msgspec matches a key against the struct's fields starting after the last one matched,
    so a message costs this little only when its keys come in the struct's order, and up to
    the width squared when they come shuffled. So the struct's fields are declared in the
    order the batch's first message has them (a producer writes its messages alike; Go and
    many JSON libraries sort keys, others keep a map's order), a few orders kept; and targets
    wider than ``MAX_FIELDS`` are read with orjson (JSON) or entry by entry (msgpack), whose
    cost does not depend on the order, so that a producer shuffling its keys costs at most a
    few times the ordered case.

    Each message is one ``decode`` call (``map``, in C): one call on the batch joined into one
    array cost more than it saved (the join copies every message: 2,000 JSON arrays of 100
    numbers took about a tenth longer joined and decoded at once than decoded one by one),
    and msgpack values written one after another cannot be split back by message safely."""

    #: The widest target decoded so (a shuffled message of 100 fields: ~4x an ordered one).
    MAX_FIELDS = 128
    #: How many key orders are kept (one per producer writing differently, in practice).
    ORDERS_KEPT = 8

    @classmethod
    def of(
        cls, names: Sequence[str], label_field: str | None, format: str = "json"
    ) -> _StructDecoders | None:
        """The decoders of a target's messages, or None where structs cannot serve: a target
        wider than ``MAX_FIELDS``, or a name msgspec refuses as a key (one holding a quote, a
        backslash or a control character)."""
        if len(names) + (label_field is not None) > cls.MAX_FIELDS:
            return None
        decoders = cls(names, label_field, _FORMATS[format])
        try:
            decoders._decoder(tuple(decoders.names) + ((label_field,) if label_field else ()))
        except ValueError:
            return None
        return decoders

    def __init__(self, names: Sequence[str], label_field: str | None, format: _Format) -> None:
        self.names = list(names)
        self.label_field = label_field
        self.format = format
        self._column = {name: i for i, name in enumerate(self.names)}
        self._expected = frozenset(self._column) | ({label_field} if label_field else set())
        self._by_order: dict[tuple[str, ...], tuple[_Decoder, np.ndarray | None]] = {}
        #: Arrays by position: only for a target whose names are ``f0``, ``f1``, ... and
        #: that takes no label (an array has no field to hold it).
        by_position = self.names == [f"f{i}" for i in range(len(self.names))]
        self._arrays: _Decoder | None = (
            format.decoder(list[float]) if by_position and label_field is None else None
        )

    def decode(self, entries: Sequence[BusEntry]) -> tuple[np.ndarray, list[Any]] | None:
        """The batch's rows and label values, or None if a message is not an object of
        exactly the expected fields with numbers for values (or an array of as many numbers,
        for a target without names), or the batch is not messages: the caller then finds
        which, and why."""
        if not entries or entries[0].raw is None:
            return None
        raws = [entry.raw or b"" for entry in entries]
        first = self.format.document(raws[0])
        if isinstance(first, list):
            return self._decode_arrays(raws)
        if not isinstance(first, dict) or first.keys() != self._expected:
            return None
        decoder, columns = self._decoder(tuple(first))
        try:
            values = list(map(astuple, map(decoder.decode, raws)))
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None
        n = len(self.names)
        labels = [row[n] for row in values] if self.label_field is not None else []
        if not self.format.each_once(raws, labels, len(self._expected)):
            return None
        if labels:
            values = [row[:n] for row in values]
        # One pass over the numbers into the matrix: no array of tuples built in between.
        flat = itertools.chain.from_iterable(values)
        matrix = np.fromiter(flat, np.float64, len(values) * n).reshape(len(values), n)
        return (matrix if columns is None else matrix[:, columns]), labels

    def _decode_arrays(self, raws: list[bytes]) -> tuple[np.ndarray, list[Any]] | None:
        """A batch of arrays of exactly the target's width, all numbers, as rows (None
        otherwise)."""
        if self._arrays is None:
            return None
        try:
            values = list(map(self._arrays.decode, raws))
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None
        n = len(self.names)
        if set(map(len, values)) != {n}:
            return None
        return np.array(values, dtype=np.float64).reshape(len(values), n), []

    def _decoder(self, order: tuple[str, ...]) -> tuple[_Decoder, np.ndarray | None]:
        """The decoder of messages whose keys come in ``order``, and where each of its
        features goes (None: where it is)."""
        found = self._by_order.get(order)
        if found is None:
            features = [key for key in order if key != self.label_field]
            # Attribute names stand for the keys (feature names need not be identifiers);
            # the label, if any, comes last.
            fields: list[tuple[str, Any]] = [(f"v{i}", float) for i in range(len(features))]
            renamed = {f"v{i}": key for i, key in enumerate(features)}
            if self.label_field is not None:
                fields.append(("label", Any))
                renamed["label"] = self.label_field
            struct = msgspec.defstruct(
                "Message", fields, rename=renamed, forbid_unknown_fields=True, gc=False
            )
            # Column j of the target is field columns[j] of the struct.
            where = np.argsort([self._column[key] for key in features])
            columns = None if np.array_equal(where, np.arange(len(features))) else where
            if len(self._by_order) >= self.ORDERS_KEPT:
                self._by_order.pop(next(iter(self._by_order)))
            found = self._by_order[order] = (self.format.decoder(struct), columns)
        return found


#: A msgspec decoder of either format.
_Decoder = msgspec.json.Decoder[Any] | msgspec.msgpack.Decoder[Any]
#: Any msgpack value, as Python has it (a map a dict, an array a list, bin bytes).
_MSGPACK: msgspec.msgpack.Decoder[Any] = msgspec.msgpack.Decoder()


def _map_header(pairs: int) -> bytes:
    """How a msgpack map of ``pairs`` pairs starts (its smallest form, as encoders write it)."""
    if pairs < 16:
        return bytes([0x80 | pairs])
    if pairs < 1 << 16:
        return b"\xde" + pairs.to_bytes(2, "big")
    return b"\xdf" + pairs.to_bytes(4, "big")


def json_fields(raw: bytes) -> Mapping[str, Any] | str:
    """A JSON message's fields: an object's, or an array's by position (``f0``, ``f1``, ...:
    the names of a selector given none); else why it has none."""
    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return "not JSON: expected an object keyed by feature name"
    if isinstance(document, list):
        return {f"f{i}": v for i, v in enumerate(document)}
    if not isinstance(document, dict):
        return f"expected a JSON object keyed by feature name; got {type(document).__name__}"
    return duplicated(raw, document) or document


def msgpack_fields(raw: bytes) -> Mapping[Any, Any] | str:
    """A msgpack message's fields: a map's, or an array's by position (``f0``, ``f1``, ...),
    as ``json_fields`` has a JSON message's; else why it has none. A bin value stays apart
    from text (``_parse_one`` says it is not a number), as a JSON string is."""
    try:
        document = _MSGPACK.decode(raw)
    except (msgspec.MsgspecError, ValueError, TypeError, RecursionError):
        return "not msgpack: expected a map keyed by feature name"
    if isinstance(document, list):
        fields: dict[Any, Any] = {f"f{i}": v for i, v in enumerate(document)}
    elif isinstance(document, dict):
        fields = document
        twice = _msgpack_twice(raw, document)
        if twice is not None:
            return twice
    else:
        return f"expected a msgpack map keyed by feature name; got {type(document).__name__}"
    for key, value in fields.items():
        if type(value) is bytes:
            fields[key] = bytearray(value)
    return fields


def _msgpack_twice(raw: bytes, document: Mapping[Any, Any]) -> str | None:
    """Why the msgpack map ``raw`` (decoded as ``document``, where a key given twice keeps its
    last value) is refused if a key is given twice in it; None if none is. Its header says how
    many pairs it holds; if ``document`` holds fewer, the pairs are read again as one array of
    keys and values, to say which key."""
    first = raw[0]
    if first >> 4 == 0x8:
        pairs, header = first & 0x0F, 1
    elif first == 0xDE:
        pairs, header = int.from_bytes(raw[1:3], "big"), 3
    else:  # 0xdf: a map32
        pairs, header = int.from_bytes(raw[1:5], "big"), 5
    if pairs == len(document):
        return None
    seen: set[Any] = set()
    try:
        items = _MSGPACK.decode(b"\xdd" + (2 * pairs).to_bytes(4, "big") + raw[header:])
    except (msgspec.MsgspecError, ValueError, TypeError, RecursionError):
        return "a field is given twice"
    for key in items[0::2]:
        if key in seen:
            text = key.decode("utf-8", "replace") if isinstance(key, bytes) else str(key)
            return given_twice(text)
        seen.add(key)
    return "a field is given twice"


def _json_document(raw: bytes) -> Any:
    """A JSON message as a document (None: it is not JSON)."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None


def _msgpack_document(raw: bytes) -> Any:
    """A msgpack message as a document (None: it is not msgpack)."""
    try:
        return _MSGPACK.decode(raw)
    except (msgspec.MsgspecError, ValueError, TypeError):
        return None


def _json_each_once(raws: list[bytes], labels: list[Any], keys: int) -> bool:
    """Whether every JSON message of a batch decoded into structs of ``keys`` fields gives
    each key once (msgspec keeps a key given twice's last value): it holds the quotes of its
    keys and of a label written as text, no more."""
    quotes = 2 * keys
    counts = [raw.count(b'"') for raw in raws]
    if labels:
        return counts == [quotes + 2 * (type(label) is str) for label in labels]
    return counts.count(quotes) == len(counts)


def _msgpack_each_once(raws: list[bytes], _labels: list[Any], keys: int) -> bool:
    """Whether every msgpack map of a batch decoded into structs of ``keys`` fields gives
    each key once: a map says how many pairs it holds, and a map of exactly that count that
    decoded into the struct (every field required, no other allowed) holds each once."""
    return all(map(bytes.startswith, raws, repeat(_map_header(keys))))


@dataclass(frozen=True)
class _Format:
    """How a message's value is read in one format (a source's ``format``)."""

    #: Its fields, entry by entry, or why it has none.
    fields: Callable[[bytes], Mapping[Any, Any] | str]
    #: It as a document (a batch's first, to learn its keys' order), or None.
    document: Callable[[bytes], Any]
    #: A msgspec decoder of messages of a type (a struct, ``list[float]``).
    decoder: Callable[[Any], _Decoder]
    #: Whether every message of a batch decoded into structs gave each key once.
    each_once: Callable[[list[bytes], list[Any], int], bool]
    #: Whether a batch of objects may be gathered by orjson (targets structs cannot serve).
    gathered_by_orjson: bool


_FORMATS: dict[str, _Format] = {
    "json": _Format(json_fields, _json_document, msgspec.json.Decoder, _json_each_once, True),
    "msgpack": _Format(
        msgpack_fields, _msgpack_document, msgspec.msgpack.Decoder, _msgpack_each_once, False
    ),
}


def _once(raw: bytes, document: Any) -> bool:
    """Whether the JSON text ``raw`` (parsed as ``document``) gives no key twice, as far as
    one count of its quotes can tell (``duplicated``)."""
    return not isinstance(document, dict) or raw.count(b'"') == _quotes(document)


def _quotes(document: Mapping[str, Any]) -> int | None:
    """The quotes the text of ``document`` holds if each key is in it once and no string
    holds one (None: a value is a container, whose text cannot be told so)."""
    quotes = 2 * len(document)
    for value in document.values():
        kind = type(value)
        if kind is str:
            quotes += 2
        elif kind is list or kind is dict:
            return None
    return quotes


def duplicated(raw: bytes, document: Mapping[str, Any]) -> str | None:
    """Why the JSON object ``raw`` (parsed as ``document``, where a key given twice keeps its
    last value) is refused if a key is given twice in it; None if none is. Each key and string
    is two quotes at least, so a text holding exactly the quotes ``document`` needs holds each
    key once (the common case, one count); any other is parsed again, pair by pair."""
    if raw.count(b'"') == _quotes(document):
        return None
    twice: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: set[str] = set()
        for key, _value in items:
            if key in seen:
                twice.append(key)
            seen.add(key)
        return dict(items)

    try:
        json.loads(raw, object_pairs_hook=pairs)
    except (ValueError, RecursionError):
        return None  # orjson read it: the other parser's limits are not the message's
    return None if not twice else given_twice(twice[0])


def given_twice(name: str) -> str:
    """Why an entry giving the field ``name`` twice is set aside (a long name cut)."""
    return f"field '{name[:200]}' is given twice"


def _getter(keys: Sequence[Any]) -> Callable[[Mapping[Any, Any]], tuple[Any, ...]]:
    """A function returning the values of ``keys`` as a tuple (even for a single key)."""
    if len(keys) == 1:
        key = keys[0]
        return lambda mapping: (mapping[key],)
    return operator.itemgetter(*keys)


def _parse_bulk(gathered: list[Sequence[Any]], n: int) -> np.ndarray | None:
    """All values as floats in one pass, or None if one is not a number (or is not in a
    form the pass reads: the entries are then parsed one by one, which decides)."""
    if not gathered:
        return np.empty((0, n))
    rows = gathered if len(gathered[0]) == n else [values[:n] for values in gathered]
    try:
        if isinstance(rows[0][0], bytes):
            return _parse_text(rows, n)
        # JSON values: numbers only (not strings, booleans, nulls or containers).
        if not set(map(type, itertools.chain.from_iterable(rows))) <= _NUMBER_TYPES:
            return None
        return np.array(rows, dtype=np.float64)
    except (ValueError, TypeError, OverflowError, orjson.JSONDecodeError):
        return None


def _parse_text(rows: list[Sequence[Any]], n: int) -> np.ndarray | None:
    """A Redis batch's values (text) as floats: written as one JSON array of arrays and read
    by orjson, much faster than ``float()`` of each (BENCHMARKS.md, "Sources"). Only
    text made of JSON number characters goes this way (no quote, letter or space can hide a
    value or split one), and the shape must come out as the entries'; anything else (``nan``,
    ``1_0``, `` 7 ``, a value that is not a number) is left to ``parse_number`` entry by entry
    (``service.wire.numbers``: the grammar CSV reads). For a JSON number both give the same
    double: each rounds correctly."""
    blob = b"[[" + b"],[".join([b",".join(values) for values in rows]) + b"]]"
    # orjson reads the integer -0 as 0, where float() keeps the sign.
    if blob.translate(None, _JSON_NUMBER_TEXT) or b"-0," in blob or b"-0]" in blob:
        return None
    matrix = np.array(orjson.loads(blob), dtype=np.float64)
    return matrix if matrix.shape == (len(rows), n) else None


def _parse_one(values: Sequence[Any], described: Sequence[str], into: np.ndarray) -> str | None:
    """Parse one entry's values into ``into``; the problem with the first bad one, if any
    (``described`` names each column: ``field 'a'``). A Redis entry's values are text (bytes)
    and are parsed; a JSON or msgpack message's must be numbers (a string is not, even one
    that spells a number, nor msgpack's bin)."""
    for column, value in enumerate(values):
        try:
            if isinstance(value, bytes):  # a Redis entry's value is text, read as CSV's is
                into[column] = parse_number(value)
            elif type(value) in _NUMBERS:
                into[column] = value
            else:
                raise ValueError
        except (ValueError, OverflowError):
            if isinstance(value, bytearray):  # a msgpack bin value (``msgpack_fields``)
                return f"{described[column]} is not a number: got binary data"
            given = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
            return f"{described[column]} is not a number: got {shown(given)}"
    return None


def _label(raw: Any, field: str) -> tuple[Label, None] | tuple[None, str]:
    try:
        return validate_labels([label_value(raw)], 1)[0], None
    except InvalidInput as exc:
        return None, f"label field '{field}': {exc.detail}"


def _order(position: str) -> tuple[int, ...]:
    """Positions in bus order (Redis ids 'ms-seq', sequences, offsets)."""
    try:
        return tuple(int(part) for part in position.split("-"))
    except ValueError:
        return (0,)
