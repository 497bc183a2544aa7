"""Selectors: their descriptions, the methods, and the receipts of what is pushed to them."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

from siftstream.results._common import Json, Page, _int_or_none, _seen


@dataclass(frozen=True)
class ClassCount:
    """A class a labelled selector has seen, and its rows."""

    label: int | str
    count: int


@dataclass(frozen=True)
class SelectorInfo:
    """A selector (create, list, describe, import). Describe adds ``state``, ``classes``, ..."""

    name: str
    method: str
    n_features: int
    params: dict[str, Any]
    version: int
    created_at: float
    updated_at: float
    has_feature_names: bool
    #: What one chunk holds (``MethodInfo.chunk_kind``): ``rows``, ``labelled rows``, ``views``
    #: or ``columns``.
    chunk_kind: str = "rows"
    #: Seconds without a commit after which the service deletes it (None: never).
    expires_after: float | None = None
    #: A job's selector that the job deletes when done (a scikit-learn fit's).
    temporary: bool = False
    rows_seen: int | None = None
    features_seen: int | None = None
    n_samples: int | None = None
    views: dict[str, int] | None = None
    classes: list[ClassCount] | None = None
    features_kept: int | None = None
    state: dict[str, Any] | None = None
    #: The stream it is attached to (it applies the stream's chunks), and the stream's items
    #: before its first chunk.
    stream: str | None = None
    stream_base: int | None = None
    raw: Json = field(default_factory=dict, repr=False, compare=False)

    @property
    def seen(self) -> int:
        """Rows seen (row streams) or features seen (feature streams)."""
        return _seen(self.rows_seen, self.features_seen)

    @property
    def is_feature_stream(self) -> bool:
        """Whether chunks are feature columns over fixed samples (``push_features``)."""
        return self.chunk_kind == "columns"

    @property
    def labelled(self) -> bool:
        """Whether chunks are rows with one class label each (``push(..., y=...)``)."""
        return self.chunk_kind == "labelled rows"

    @classmethod
    def from_json(cls, doc: Json) -> SelectorInfo:
        classes = doc.get("classes")
        return cls(
            name=str(doc["name"]),
            method=str(doc["method"]),
            n_features=int(doc["n_features"]),
            params=dict(doc.get("params") or {}),
            version=int(doc["version"]),
            created_at=float(doc.get("created_at", 0.0)),
            updated_at=float(doc.get("updated_at", 0.0)),
            has_feature_names=bool(doc.get("has_feature_names", False)),
            chunk_kind=str(doc["chunk_kind"]),
            expires_after=None if doc.get("expires_after") is None else float(doc["expires_after"]),
            temporary=bool(doc.get("temporary", False)),
            rows_seen=_int_or_none(doc.get("rows_seen")),
            features_seen=_int_or_none(doc.get("features_seen")),
            n_samples=_int_or_none(doc.get("n_samples")),
            views=None
            if doc.get("views") is None
            else {k: int(v) for k, v in doc["views"].items()},
            classes=None
            if classes is None
            else [ClassCount(c["label"], int(c["count"])) for c in classes],
            features_kept=_int_or_none(doc.get("features_kept")),
            state=doc.get("state"),
            stream=None if doc.get("stream") is None else str(doc["stream"]),
            stream_base=_int_or_none(doc.get("stream_base")),
            raw=doc,
        )


@dataclass(frozen=True)
class MethodInfo:
    """A method the service runs (``GET /v1/methods``): what one chunk of it holds and where it
    goes, what it offers, its parameters (JSON Schema, with the defaults that do not depend on
    the selector's size) and the paper it implements."""

    name: str
    paper: str
    chunk_kind: str
    route: str
    counts: str
    shape: list[str]
    capabilities: list[str]
    coalesces: bool
    chunking_invariant: bool
    params_schema: dict[str, Any]
    example: dict[str, Any]
    raw: Json = field(default_factory=dict, repr=False, compare=False)

    @property
    def parameters(self) -> dict[str, Any]:
        """Each parameter's JSON Schema, by name."""
        return dict(self.params_schema.get("properties", {}))

    @classmethod
    def from_json(cls, doc: Json) -> MethodInfo:
        return cls(
            name=str(doc["name"]),
            paper=str(doc["paper"]),
            chunk_kind=str(doc["chunk_kind"]),
            route=str(doc["route"]),
            counts=str(doc["counts"]),
            shape=[str(f) for f in doc["shape"]],
            capabilities=[str(c) for c in doc["capabilities"]],
            coalesces=bool(doc["coalesces"]),
            chunking_invariant=bool(doc["chunking_invariant"]),
            params_schema=dict(doc["params_schema"]),
            example=dict(doc["example"]),
            raw=doc,
        )


class SelectorPage(Page[SelectorInfo]):
    """One page of the selector list (``GET /v1/selectors``)."""

    items_key = "selectors"

    @classmethod
    def read_item(cls, doc: Json) -> SelectorInfo:
        return SelectorInfo.from_json(doc)

    @property
    def selectors(self) -> list[SelectorInfo]:
        return self.items


@dataclass(frozen=True)
class DeletedSelectors:
    """What ``Client.delete_selectors`` deleted (``DELETE /v1/selectors?prefix=``): the names,
    sorted, and those that matched and could not be deleted (``failed``). One batch's answer
    also has ``next`` (None: the last batch); the client follows them all."""

    deleted: list[str]
    next: str | None = None
    failed: list[str] = field(default_factory=list)
    raw: Json = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: Json) -> DeletedSelectors:
        following = doc.get("next")
        return cls(
            deleted=[str(n) for n in doc["deleted"]],
            next=None if following is None else str(following),
            failed=[str(n) for n in doc.get("failed") or []],
            raw=doc,
        )


@dataclass(frozen=True)
class Merged:
    """What a merge added: the source, the version of it that was read, its rows."""

    source: str
    version: int
    rows: int


@dataclass(frozen=True, kw_only=True)
class Receipt:
    """What a write answers: applied with ``version``, or pending (202, ``version`` None).

    ``Client.chunk_status`` (or writing with ``wait=True``, the default) tells when a pending
    write is applied. ``duplicate``: answered from an earlier request with the same
    Idempotency-Key (nothing was applied again).
    """

    status: Literal["applied", "pending"]
    log_id: str
    duplicate: bool
    version: int | None = None
    raw: Json = field(default_factory=dict, repr=False, compare=False)

    @property
    def applied(self) -> bool:
        return self.status == "applied"

    @property
    def items(self) -> int:
        """What the write held: rows, or feature columns."""
        raise NotImplementedError

    @property
    def seen(self) -> int | None:
        """Rows (or features) the selector had seen once this write was applied."""
        raise NotImplementedError

    @staticmethod
    def shared_fields(doc: Json) -> dict[str, Any]:
        pending = doc.get("status") == "pending"
        return {
            "status": "pending" if pending else "applied",
            "log_id": str(doc["log_id"]),
            "duplicate": bool(doc["duplicate"]),
            "version": None if pending else int(doc["version"]),
            "raw": doc,
        }


@dataclass(frozen=True, kw_only=True)
class ChunkReceipt(Receipt):
    """The answer to a chunk of rows (or a merge, with ``merged``)."""

    rows: int
    rows_seen: int | None = None
    merged: Merged | None = None

    @property
    def items(self) -> int:
        return self.rows

    @property
    def seen(self) -> int | None:
        return self.rows_seen

    def once_applied(self, status: ChunkStatus) -> ChunkReceipt:
        """This receipt, applied as ``status`` (of its pending chunk) says."""
        return replace(self, status="applied", version=status.version, rows_seen=status.rows_seen)

    @classmethod
    def from_json(cls, doc: Json) -> ChunkReceipt:
        shared = cls.shared_fields(doc)
        merged = doc.get("merged")
        return cls(
            **shared,
            rows=int(doc["rows"]),
            rows_seen=_int_or_none(doc.get("rows_seen")) if shared["version"] is not None else None,
            merged=None
            if merged is None
            else Merged(str(merged["from"]), int(merged["version"]), int(merged["rows"])),
        )


@dataclass(frozen=True)
class Decision:
    """What OFS decided for one feature column on arrival."""

    index: int
    name: str
    kept: bool
    leverage: float
    probability: float
    scale: float

    @classmethod
    def from_json(cls, doc: Json) -> Decision:
        return cls(
            int(doc["index"]),
            str(doc["name"]),
            bool(doc["kept"]),
            float(doc["leverage"]),
            float(doc["probability"]),
            float(doc["scale"]),
        )


@dataclass(frozen=True, kw_only=True)
class FeaturesReceipt(Receipt):
    """The answer to feature columns: OFS's decisions, or where IQRP stored them.

    ``first_index`` is the index of the first column (known even while pending);
    ``decisions`` is empty for methods that decide at read time (IQRP) and while pending.
    """

    columns: int
    first_index: int
    features_seen: int | None = None
    decisions: list[Decision] = field(default_factory=list)

    @property
    def items(self) -> int:
        return self.columns

    @property
    def seen(self) -> int | None:
        return self.features_seen

    def once_applied(self, status: ChunkStatus) -> FeaturesReceipt:
        """This receipt, applied as ``status`` (of its pending columns) says."""
        return replace(
            self, status="applied", version=status.version, features_seen=status.features_seen
        )

    @classmethod
    def from_json(cls, doc: Json) -> FeaturesReceipt:
        shared = cls.shared_fields(doc)
        decisions = [Decision.from_json(d) for d in doc.get("decisions", [])]
        if "first_index" in doc:
            first_index, columns = int(doc["first_index"]), int(doc["columns"])
        else:  # decisions carry their indices
            first_index, columns = decisions[0].index, len(decisions)
        return cls(
            **shared,
            columns=columns,
            first_index=first_index,
            features_seen=int(doc["features_seen"]) if shared["version"] is not None else None,
            decisions=decisions,
        )


@dataclass(frozen=True)
class ChunkStatus:
    """Where a chunk answered with 202 got to: pending, applied, or rejected (with a reason)."""

    log_id: str
    status: Literal["pending", "applied", "rejected"]
    applied: bool
    version: int
    rows_seen: int | None = None
    features_seen: int | None = None
    reason: str | None = None

    @classmethod
    def from_json(cls, doc: Json) -> ChunkStatus:
        return cls(
            log_id=str(doc["log_id"]),
            status=doc["status"],
            applied=bool(doc["applied"]),
            version=int(doc["version"]),
            rows_seen=_int_or_none(doc.get("rows_seen")),
            features_seen=_int_or_none(doc.get("features_seen")),
            reason=doc.get("reason"),
        )


@dataclass(frozen=True)
class FeaturePage:
    """Decided features in arrival order, from ``offset``."""

    name: str
    version: int
    features_seen: int
    offset: int
    features: list[Decision]

    @classmethod
    def from_json(cls, doc: Json) -> FeaturePage:
        return cls(
            str(doc["name"]),
            int(doc["version"]),
            int(doc["features_seen"]),
            int(doc["offset"]),
            [Decision.from_json(d) for d in doc["features"]],
        )
