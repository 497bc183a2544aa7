"""Chunk kinds: everything the service does with a chunk, by the kind a method declares.

A method says what one pushed chunk holds (``service.algorithms.base.ChunkKind``); the kind
object here knows the rest, so that nothing outside the methods asks which method it is:

* how a selector of that kind is shaped at creation (``shape``: features per row, samples per
  column, features per view) and what parameters the method needs from that shape;
* which route takes its chunks, in which media types, and how a body decodes (``decode``:
  the validated chunk, its log payload and its identity for idempotency);
* how pending chunks join into one update (``join``, for methods that coalesce);
* what a rejected chunk leaves behind (``placeholder``: nothing for rows; zero columns for
  feature columns, which are numbered when appended and must keep their indices);
* how answers count what was seen (``seen_field``) and whether items are named as they arrive;
* what a source's bus entry holds beside its features (``entry_side``: a label, a numeric
  target) and how a batch of entries becomes a chunk (``from_entries``);
* which methods a stream of the kind feeds (``feeds``, ``taken``: a stream of labelled rows
  feeds unlabelled row methods too, with the rows alone), how a stream's creation body picks
  its kind (``stream_kind``) and where a selector's feature lies in its stream
  (``stream_feature``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import numpy as np
import orjson
import scipy.sparse as sp

from service.algorithms import METHODS
from service.algorithms.base import AnyMethod, ChunkKind, Matrix
from service.algorithms.labels import Label, LabelledRows, join, labelled
from service.algorithms.params import VIEW_NAME
from service.algorithms.targets import TargetRows, join_targets
from service.errors import CodecError, Inconsistent, InvalidInput, SelectorMismatch, shown
from service.store.codec import encode_matrix
from service.store.keys import NAME_PATTERN
from service.store.records import SelectorMeta
from service.wire.columns import decode_columns
from service.wire.labelled import decode_labelled_rows, decode_target_rows
from service.wire.log import encode_chunk
from service.wire.media import COLUMN_MEDIA_TYPES, JSON, ROW_MEDIA_TYPES
from service.wire.names import MAX_NAME_LENGTH, validate_names
from service.wire.rows import decode_rows
from service.wire.views import decode_views, validate_view_names

__all__ = [
    "CHUNK_FORMATS",
    "ENTRY_SIDES",
    "MAX_FEATURES",
    "MAX_SAMPLES",
    "ChunkFormat",
    "ChunkTarget",
    "EntrySide",
    "Shape",
    "ValidChunk",
    "chunk_format",
    "stream_kind",
]

#: Upper bound on features of one selector (the state alone is ell x m doubles).
MAX_FEATURES = 10_000_000
#: Upper bound on samples of a feature-stream selector (OFS keeps an n x n factor at worst).
MAX_SAMPLES = 100_000

Chunk = Matrix | LabelledRows | TargetRows

#: Documented shape fields (JSON Schema) of creation bodies.
FEATURES = {
    "type": "integer",
    "minimum": 1,
    "maximum": MAX_FEATURES,
    "description": "Width of every row chunk.",
}
FEATURE_NAMES = {
    "type": "array",
    "minItems": 1,
    "uniqueItems": True,
    "items": {"type": "string", "minLength": 1, "maxLength": MAX_NAME_LENGTH},
    "description": "Optional unique names, one per feature (default f0, f1, ...).",
}


class ChunkTarget(Protocol):
    """What a chunk is checked against: a selector's description (``SelectorMeta``) or a
    stream's (``StreamMeta``), which share the shape fields of a creation."""

    @property
    def name(self) -> str: ...

    @property
    def size(self) -> int: ...

    @property
    def feature_names(self) -> list[str] | None: ...

    @property
    def views(self) -> tuple[tuple[str, int], ...] | None: ...


@dataclass(frozen=True)
class Shape:
    """What a creation fixes, read from its body."""

    #: The dimension the method is sized by (``resolve_params``' ``size``).
    size: int
    n_features: int | None = None
    n_samples: int | None = None
    views: tuple[tuple[str, int], ...] | None = None
    feature_names: list[str] | None = None
    #: Parameters the method takes from the shape (the views of a multi-view method).
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ValidChunk:
    """A request body as a validated chunk, ready for the log."""

    chunk: Chunk
    #: Rows, or feature columns.
    items: int
    #: The log payload (``service.wire.log``), uncompressed (``pack_payload`` compresses it where
    #: that pays).
    payload: bytes
    #: What makes two requests the same one (compared for a repeated Idempotency-Key).
    digest: str
    #: Names given to the items as they arrive (feature columns), or ().
    names: tuple[str, ...] = ()
    #: The classes a labelled chunk brings.
    classes: tuple[Label, ...] = ()
    #: The feature names the chunk gave, for a selector that has none yet: the selector takes
    #: them (``service.wire.names``) before the chunk is appended.
    adopt: tuple[str, ...] | None = None


@dataclass(frozen=True)
class EntrySide:
    """What a source's bus entry holds beside its features, in a field the source names."""

    #: The source's setting that names that field (``label_field``).
    setting: str
    #: What the field holds, for messages ("label").
    what: str
    #: Whether it is a number, read as one more numeric column of the entry (after the
    #: features: validated as they are), rather than a label read apart.
    numeric: bool


LABEL_SIDE = EntrySide("label_field", "label", numeric=False)
TARGET_SIDE = EntrySide("target_field", "numeric target", numeric=True)


def validate_size(value: Any, field: str, upper: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"{field} must be an integer; got {value!r}")
    if not 1 <= value <= upper:
        raise InvalidInput(f"{field} must be between 1 and {upper}; got {value}")
    return value


#: What ``ChunkFormat.shape`` is told it shapes when it shapes a stream.
STREAM = "stream"


def _what(method: str) -> str:
    """How a message names what a creation body creates: a method's selector, or a stream."""
    return "a stream of this kind" if method == STREAM else f"method {method}"


def _reject_fields(document: dict[str, Any], fields: Sequence[str], message: str) -> None:
    """InvalidInput(``message`` with ``{given}`` filled in) if any of ``fields`` is given."""
    given = [f for f in fields if document.get(f) is not None]
    if given:
        raise InvalidInput(message.format(given=", ".join(given)))


class ChunkFormat:
    """What a chunk kind means on the wire (its routes, media types, decoding, payload and
    placeholder); subclasses say what differs."""

    name: ChunkKind
    #: The route that takes the chunks: ``POST /v1/selectors/{name}/<route>``.
    route = "chunks"
    media_types: tuple[str, ...] = ROW_MEDIA_TYPES
    #: The answers' count of what was seen.
    seen_field = "rows_seen"
    #: Whether items are named as they arrive (else names are fixed at creation).
    names_on_arrival = False
    #: The fields of a creation body that give this kind's shape (a stream's body says its
    #: kind by them, ``stream_kind``) ...
    shape_fields: tuple[str, ...] = ("n_features",)
    #: ... and what its rows carry beside them: the field of a stream's creation body that says
    #: so (``"labelled": true``, ``"targets": true``), or None for nothing.
    flag: str | None = None
    #: Whether a source feeds this kind: a bus entry is one row (its label or its target in a
    #: field, ``entry_side``).
    from_sources = False
    #: What a source's entry holds beside its features, in the field the source names (None:
    #: nothing).
    entry_side: EntrySide | None = None

    @property
    def feeds(self) -> tuple[ChunkKind, ...]:
        """The kinds of the methods a stream of this kind feeds: its own, and those that take
        its chunks with something left out (``taken``)."""
        return (self.name,)

    def feeds_method(self, method: AnyMethod) -> bool:
        """Whether a stream of this kind feeds ``method`` (its kind is one of ``feeds``)."""
        return method.chunk_kind in self.feeds

    def feeds_whole(self, method: AnyMethod) -> bool:
        """Whether a stream of this kind feeds ``method`` its chunks as they are (labels and
        all), not ``taken`` by a kind that leaves something out."""
        return method.chunk_kind == self.name

    def fed_methods(self) -> list[str]:
        """The names of the methods a stream of this kind feeds, sorted."""
        return sorted(name for name, method in METHODS.items() if self.feeds_method(method))

    def taken(self, chunk: Chunk) -> Chunk:
        """A chunk of a stream that feeds this kind (``feeds``), as this kind's chunk."""
        return chunk

    def stream_feature(self, index: int, base: int) -> int:
        """The stream's index of feature ``index`` of a selector that attached when the stream
        held ``base`` items: the same feature, for kinds whose features are fixed."""
        return index

    def shape(self, document: dict[str, Any], method: str) -> Shape:
        """The shape a creation body gives (validated): what ``create_schema`` documents.
        ``method`` names what is created, for messages (``"fsds"``; for a stream,
        ``STREAM``)."""
        raise NotImplementedError

    def create_schema(self) -> dict[str, Any]:
        """JSON Schema of the shape fields of a creation body: ``properties``, ``required``
        and any further keywords (the name and method come from the caller)."""
        raise NotImplementedError

    def example(self) -> dict[str, Any]:
        """The shape fields of an example creation."""
        raise NotImplementedError

    def decode(
        self,
        body: bytes,
        media: str,
        meta: ChunkTarget,
        max_bytes: int,
        labels: str | None = None,
        target: str | None = None,
    ) -> ValidChunk:
        """A body of media type ``media`` validated as a chunk for ``meta``; ``labels`` names
        the label column of a table body (``text/csv``, Arrow), where labelled rows have one,
        and ``target`` the target column, where rows with a target have one."""
        raise NotImplementedError

    def from_entries(self, rows: np.ndarray, labels: Sequence[Label]) -> Chunk:
        """A source's batch as a chunk of this kind: ``rows`` converted from its entries (a
        numeric ``entry_side`` as their last column), and their labels (a label side)."""
        return rows

    def join(self, chunks: Sequence[Chunk]) -> Chunk:
        """Pending chunks in log order as one update (rows stacked, CSR if any is sparse)."""
        if len(chunks) == 1:
            return chunks[0]
        matrices = cast(Sequence[Matrix], chunks)
        if any(sp.issparse(chunk) for chunk in matrices):
            return sp.vstack([sp.csr_matrix(chunk) for chunk in matrices], format="csr")
        return np.vstack(matrices)

    def placeholder(self, meta: ChunkTarget, items: int) -> bytes | None:
        """The log payload applied instead of a rejected entry, or None for nothing at all."""
        return None

    def probe_body(self, meta: ChunkTarget) -> dict[str, Any] | list[Any]:
        """A JSON body of one item whose values are all 1: an ordinary chunk."""
        return [[1.0] * meta.size]

    def probe(self, meta: ChunkTarget) -> bytes:
        """The log payload of ``probe_body``: what a state must be able to take (an imported
        state that cannot take an ordinary chunk would reject every later one)."""
        body = orjson.dumps(self.probe_body(meta))
        return self.decode(body, JSON, meta, len(body)).payload

    def items_of(self, chunk: Chunk) -> int:
        """How many items (rows, or feature columns) a chunk holds."""
        return int(cast(Matrix, chunk).shape[0])

    def expects(self, meta: ChunkTarget) -> str:
        """What this kind's chunks are, for a message to a client who sent something else."""
        return f"rows at POST /v1/selectors/{meta.name}/chunks"

    def features_scored(self, meta: ChunkTarget, items_seen: int) -> int:
        """How many features a state that has seen ``items_seen`` items scores: the fixed
        features of a row stream."""
        return meta.size


def _matrix_decoded(
    rows: Matrix, payload_names: Sequence[str] = (), adopt: Sequence[str] | None = None
) -> ValidChunk:
    payload = encode_matrix(rows)
    hasher = hashlib.sha256(payload)
    # Names are part of a column request: the same columns under other names are another body.
    hasher.update(b"\0".join(name.encode() for name in payload_names))
    return ValidChunk(
        rows,
        int(rows.shape[0]),
        payload,
        hasher.hexdigest(),
        tuple(payload_names),
        adopt=None if adopt is None else tuple(adopt),
    )


def _adopted(meta: ChunkTarget, names: list[str] | None) -> list[str] | None:
    """The names a chunk gave, if the selector has none yet (it takes them)."""
    return names if meta.feature_names is None else None


def _with_side(
    chunk: LabelledRows | TargetRows,
    meta: ChunkTarget,
    names: list[str] | None,
    classes: tuple[Label, ...] = (),
) -> ValidChunk:
    """A decoded chunk of rows with a label or a target each, ready for the log: its blob is
    its payload and its identity."""
    payload = encode_chunk(chunk)
    adopt = _adopted(meta, names)
    return ValidChunk(
        chunk,
        chunk.n_rows,
        payload,
        hashlib.sha256(payload).hexdigest(),
        classes=classes,
        adopt=None if adopt is None else tuple(adopt),
    )


class RowsFormat(ChunkFormat):
    name: ChunkKind = "rows"
    from_sources = True

    def shape(self, document: dict[str, Any], method: str) -> Shape:
        if document.get("views") is not None:
            multi_view = ", ".join(n for n, m in METHODS.items() if m.chunk_kind == "views")
            raise InvalidInput(f"views apply to multi-view methods ({multi_view}), not {method}")
        _reject_fields(
            document,
            ("n_samples", "n_objects"),
            f"{_what(method)} takes rows over fixed features: expected n_features, not {{given}}",
        )
        n_features = validate_size(document.get("n_features"), "n_features", MAX_FEATURES)
        names = validate_names(
            document.get("feature_names"), n_features, "feature_names", "feature"
        )
        return Shape(n_features, n_features=n_features, feature_names=names)

    def create_schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {
                "n_features": FEATURES,
                "feature_names": {"anyOf": [FEATURE_NAMES, {"type": "null"}]},
            },
            "required": ["n_features"],
            "additionalProperties": False,
        }

    def example(self) -> dict[str, Any]:
        return {"n_features": 4862}

    def decode(
        self,
        body: bytes,
        media: str,
        meta: ChunkTarget,
        max_bytes: int,
        labels: str | None = None,
        target: str | None = None,
    ) -> ValidChunk:
        named = decode_rows(body, media, meta.size, max_bytes, meta.feature_names, labels, target)
        return _matrix_decoded(named.rows, adopt=_adopted(meta, named.names))

    def taken(self, chunk: Chunk) -> Chunk:
        """The rows of a labelled chunk, without their labels (a labelled stream's chunks, for
        an unlabelled method). A stream's chunk holds one row per sample (multiplicities come
        only with merges, which go to one selector)."""
        if isinstance(chunk, LabelledRows):
            if chunk.multiplicity is not None:
                raise CodecError("a chunk whose rows stand for several samples has no rows alone")
            return chunk.rows
        if isinstance(chunk, TargetRows):
            return chunk.rows
        return chunk


class LabelledRowsFormat(RowsFormat):
    name: ChunkKind = "labelled rows"
    flag = "labelled"
    entry_side = LABEL_SIDE

    @property
    def feeds(self) -> tuple[ChunkKind, ...]:
        """Labelled rows feed unlabelled row methods too (``RowsFormat.taken`` keeps the rows)."""
        return (self.name, "rows")

    def decode(
        self,
        body: bytes,
        media: str,
        meta: ChunkTarget,
        max_bytes: int,
        labels: str | None = None,
        target: str | None = None,
    ) -> ValidChunk:
        _refuse_target(target, self)
        chunk, names = decode_labelled_rows(
            body, media, meta.size, max_bytes, meta.feature_names, labels
        )
        return _with_side(chunk, meta, names, chunk.classes)

    def probe_body(self, meta: ChunkTarget) -> dict[str, Any] | list[Any]:
        return {"rows": [[1.0] * meta.size], "labels": [0]}

    def from_entries(self, rows: np.ndarray, labels: Sequence[Label]) -> Chunk:
        return labelled(rows, labels)

    def taken(self, chunk: Chunk) -> Chunk:
        return chunk

    def join(self, chunks: Sequence[Chunk]) -> Chunk:
        """Labels stay with their rows; classes keep their order of first appearance."""
        return join(cast(Sequence[LabelledRows], chunks))

    def items_of(self, chunk: Chunk) -> int:
        return cast(LabelledRows, chunk).samples

    def expects(self, meta: ChunkTarget) -> str:
        return f"labelled rows at POST /v1/selectors/{meta.name}/chunks"


class TargetRowsFormat(RowsFormat):
    name: ChunkKind = "rows with a target"
    flag = "targets"
    from_sources = True
    entry_side = TARGET_SIDE

    @property
    def feeds(self) -> tuple[ChunkKind, ...]:
        """Rows with a target feed row methods too (``RowsFormat.taken`` keeps the rows)."""
        return (self.name, "rows")

    def decode(
        self,
        body: bytes,
        media: str,
        meta: ChunkTarget,
        max_bytes: int,
        labels: str | None = None,
        target: str | None = None,
    ) -> ValidChunk:
        if labels is not None:
            raise SelectorMismatch(
                f"labels={labels!r} names a label column; {self.expects(meta)} name their "
                "target column with ?target=<column>"
            )
        chunk, names = decode_target_rows(
            body, media, meta.size, max_bytes, meta.feature_names, target
        )
        return _with_side(chunk, meta, names)

    def probe_body(self, meta: ChunkTarget) -> dict[str, Any] | list[Any]:
        return {"rows": [[1.0] * meta.size], "targets": [0.0]}

    def from_entries(self, rows: np.ndarray, labels: Sequence[Label]) -> Chunk:
        """The target is the entries' last numeric column."""
        return TargetRows(np.ascontiguousarray(rows[:, :-1]), np.ascontiguousarray(rows[:, -1]))

    def taken(self, chunk: Chunk) -> Chunk:
        return chunk

    def join(self, chunks: Sequence[Chunk]) -> Chunk:
        """Targets stay with their rows."""
        return join_targets(cast(Sequence[TargetRows], chunks))

    def items_of(self, chunk: Chunk) -> int:
        return cast(TargetRows, chunk).n_rows

    def expects(self, meta: ChunkTarget) -> str:
        return f"rows with a target at POST /v1/selectors/{meta.name}/chunks"


def _refuse_target(target: str | None, kind: ChunkFormat) -> None:
    if target is not None:
        raise SelectorMismatch(
            f"target={target!r} names a target column; targets apply to methods of rows with a "
            f"target, and this selector takes {kind.name}"
        )


class ViewsFormat(ChunkFormat):
    name: ChunkKind = "views"
    shape_fields = ("views",)

    def shape(self, document: dict[str, Any], method: str) -> Shape:
        _reject_fields(
            document,
            ("n_features", "n_samples", "n_objects"),
            "a multi-view selector takes views, not {given}",
        )
        views = validate_views(document.get("views"))
        names = validate_view_names(document.get("feature_names"), views)
        total = sum(dim for _, dim in views)
        return Shape(
            total, n_features=total, views=views, feature_names=names, params={"views": dict(views)}
        )

    def create_schema(self) -> dict[str, Any]:
        by_view = {"type": "object", "propertyNames": {"pattern": VIEW_NAME}}
        return {
            "type": "object",
            "properties": {
                "views": {
                    **by_view,
                    "minProperties": 1,
                    "additionalProperties": FEATURES,
                    "description": "Features of every view, in order.",
                },
                "feature_names": {
                    "anyOf": [{**by_view, "additionalProperties": FEATURE_NAMES}, {"type": "null"}],
                    "description": "Names of every view's features ({view: [...]}).",
                },
            },
            "required": ["views"],
            "additionalProperties": False,
        }

    def example(self) -> dict[str, Any]:
        return {"views": {"text": 3000, "links": 500}}

    def probe_body(self, meta: ChunkTarget) -> dict[str, Any] | list[Any]:
        return {"views": {view: [[1.0] * dim] for view, dim in meta.views or ()}}

    def decode(
        self,
        body: bytes,
        media: str,
        meta: ChunkTarget,
        max_bytes: int,
        labels: str | None = None,
        target: str | None = None,
    ) -> ValidChunk:
        _refuse_target(target, self)
        views = list(meta.views or ())
        rows, names = decode_views(body, media, views, max_bytes, meta.feature_names, labels)
        return _matrix_decoded(rows, adopt=_adopted(meta, names))

    def expects(self, meta: ChunkTarget) -> str:
        return f'every view\'s rows ({{"views": ...}}) at POST /v1/selectors/{meta.name}/chunks'


class ColumnsFormat(ChunkFormat):
    name: ChunkKind = "columns"
    route = "features"
    media_types = COLUMN_MEDIA_TYPES
    seen_field = "features_seen"
    names_on_arrival = True
    shape_fields = ("n_samples", "n_objects")

    def stream_feature(self, index: int, base: int) -> int:
        """Feature columns are the stream's items: a selector's feature ``index`` is the
        stream's ``base + index``."""
        return base + index

    def features_scored(self, meta: ChunkTarget, items_seen: int) -> int:
        """Every feature column seen is a feature."""
        return items_seen

    def shape(self, document: dict[str, Any], method: str) -> Shape:
        _reject_fields(
            document,
            ("n_features", "feature_names", "views"),
            f"{_what(method)} takes feature columns over fixed samples: expected n_samples "
            "(features are counted and named as they arrive), not {given}",
        )
        n_samples, n_objects = document.get("n_samples"), document.get("n_objects")
        if n_objects is not None:
            if n_samples is not None:
                raise Inconsistent("give n_samples or n_objects (the same thing), not both")
            n_samples = n_objects
        size = validate_size(n_samples, "n_samples", MAX_SAMPLES)
        return Shape(size, n_samples=size)

    def create_schema(self) -> dict[str, Any]:
        samples = {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_SAMPLES,
            "description": "Values per feature column (the fixed samples).",
        }
        return {
            "type": "object",
            "properties": {
                "n_samples": samples,
                "n_objects": {**samples, "description": "Another name for n_samples."},
            },
            "required": [],
            # One of the two names, not both.
            "oneOf": [{"required": ["n_samples"]}, {"required": ["n_objects"]}],
            "additionalProperties": False,
        }

    def example(self) -> dict[str, Any]:
        return {"n_samples": 1440}

    def decode(
        self,
        body: bytes,
        media: str,
        meta: ChunkTarget,
        max_bytes: int,
        labels: str | None = None,
        target: str | None = None,
    ) -> ValidChunk:
        columns, names = decode_columns(body, media, meta.size)
        decoded = _matrix_decoded(columns, names or ())
        # A chunk of columns counts columns, not the samples its matrix has as rows.
        return ValidChunk(
            decoded.chunk, columns.shape[1], decoded.payload, decoded.digest, decoded.names
        )

    def probe_body(self, meta: ChunkTarget) -> dict[str, Any] | list[Any]:
        return {"columns": [[1.0] * meta.size]}

    def join(self, chunks: Sequence[Chunk]) -> Chunk:
        """Columns side by side: a column method processes them exactly as one by one."""
        if len(chunks) == 1:
            return chunks[0]
        matrices = cast(Sequence[Matrix], chunks)
        return np.hstack([c if isinstance(c, np.ndarray) else c.toarray() for c in matrices])

    def placeholder(self, meta: ChunkTarget, items: int) -> bytes | None:
        """Zero columns: a zero column scores 0 everywhere, is never kept nor selected."""
        return encode_matrix(np.zeros((meta.size, items)))

    def items_of(self, chunk: Chunk) -> int:
        return int(cast(Matrix, chunk).shape[1])

    def expects(self, meta: ChunkTarget) -> str:
        return f"feature columns at POST /v1/selectors/{meta.name}/features"


def validate_views(views: Any) -> tuple[tuple[str, int], ...]:
    """``{"<view>": <number of features>, ...}`` of a multi-view selector, in the given order."""
    if not isinstance(views, dict) or not views:
        raise InvalidInput(
            'expected "views": {"<view name>": <number of features>, ...}; got ' + shown(views)
        )
    out = []
    for view, dim in views.items():
        if not isinstance(view, str) or not NAME_PATTERN.fullmatch(view):
            raise InvalidInput(
                f"view names must be 1-128 letters, digits, '.', '_' or '-'; got {view!r}"
            )
        out.append((view, validate_size(dim, f"views['{view}']", MAX_FEATURES)))
    if sum(dim for _, dim in out) > MAX_FEATURES:
        raise Inconsistent(f"the views have more than {MAX_FEATURES} features in all")
    return tuple(out)


CHUNK_FORMATS: dict[ChunkKind, ChunkFormat] = {
    kind.name: kind
    for kind in (
        RowsFormat(),
        LabelledRowsFormat(),
        TargetRowsFormat(),
        ViewsFormat(),
        ColumnsFormat(),
    )
}


#: What the entries of the kinds sources feed hold beside their features (``entry_side``), once
#: each: the settings a source may name them by.
ENTRY_SIDES = tuple(
    dict.fromkeys(
        kind.entry_side
        for kind in CHUNK_FORMATS.values()
        if kind.from_sources and kind.entry_side is not None
    )
)


def chunk_format(chunk_kind: ChunkKind) -> ChunkFormat:
    return CHUNK_FORMATS[chunk_kind]


class DeclaredShape(ChunkTarget, Protocol):
    """A description that says its shape the way a creation body does."""

    @property
    def n_features(self) -> int | None: ...

    @property
    def n_samples(self) -> int | None: ...


def creation_shape(meta: DeclaredShape) -> dict[str, Any]:
    """The shape fields of the creation body that made a selector (or a stream) like
    ``meta``: what an archive records, and what a selector attached to a stream takes."""
    if meta.n_samples is not None:
        return {"n_samples": meta.n_samples}
    if meta.views is not None:
        names = None
        if meta.feature_names is not None:
            names, start = {}, 0
            for view, dim in meta.views:
                names[view] = meta.feature_names[start : start + dim]
                start += dim
        return {"views": dict(meta.views), "feature_names": names}
    return {"n_features": meta.n_features, "feature_names": meta.feature_names}


#: The fields of a stream's creation body that say what its rows carry (``ChunkFormat.flag``).
STREAM_FLAGS = tuple(sorted({kind.flag for kind in CHUNK_FORMATS.values() if kind.flag}))
#: The fields of a stream's creation body besides the shape's.
STREAM_FIELDS = ("name", *STREAM_FLAGS)


def stream_kind(document: dict[str, Any]) -> tuple[ChunkFormat, Shape]:
    """The kind of a stream and its shape, from its creation body: the kind whose shape
    fields it gives (``n_features``, ``views``, ``n_samples``), labelled rows when it says
    ``"labelled": true``, rows with a target for ``"targets": true``; InvalidInput for a body
    that gives no shape, or several."""
    flags = []
    for name in STREAM_FLAGS:
        value = document.get(name, False)
        if not isinstance(value, bool):
            raise InvalidInput(f"{name} must be true or false; got {shown(value)}")
        if value:
            flags.append(name)
    if len(flags) > 1:
        raise Inconsistent(
            f"a stream's rows carry one thing beside them; got {' and '.join(flags)}"
        )
    flag: str | None = flags[0] if flags else None
    given = {
        kind.name: [f for f in kind.shape_fields if document.get(f) is not None]
        for kind in CHUNK_FORMATS.values()
        if kind.flag == flag
    }
    chosen = [name for name, fields in given.items() if fields]
    if len(chosen) != 1:
        expected = "n_features" if flag else "one of n_features, views or n_samples"
        if flag and document.get("n_features") is None:
            raise InvalidInput(
                f"{flag} applies to streams of rows (n_features); expected n_features, got "
                + (", ".join(f for fields in given.values() for f in fields) or "none")
            )
        got = [f for fields in given.values() for f in fields]
        raise InvalidInput(
            f"a stream's shape is {expected}; got {', '.join(got) if got else 'none'}"
        )
    kind = CHUNK_FORMATS[chosen[0]]
    shape_document = {f: v for f, v in document.items() if f not in STREAM_FIELDS and v is not None}
    return kind, kind.shape(shape_document, STREAM)


def require_route(kind: ChunkFormat, meta: SelectorMeta, route: str) -> None:
    """SelectorMismatch unless chunks of ``kind`` come to ``route``."""
    if kind.route != route:
        raise SelectorMismatch(
            f"selector '{meta.name}' runs {meta.method}, which takes {kind.expects(meta)}"
        )
