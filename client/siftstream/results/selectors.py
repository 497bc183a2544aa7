"""Selectors: their descriptions, the methods, and the receipts of what is pushed to them."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

from siftstream.results._common import Answer, Json, Page, _seen, wire


@dataclass(frozen=True)
class ClassCount(Answer):
    """A class a labelled selector has seen, and its rows."""

    label: int | str
    count: int


@dataclass(frozen=True)
class TargetSummary(Answer):
    """The targets a selector of rows with a target has seen."""

    mean: float
    variance: float


@dataclass(frozen=True)
class SelectorInfo(Answer):
    """A selector (create, list, describe, import). Describe adds ``state``, ``classes``, ..."""

    name: str
    method: str
    n_features: int
    params: dict[str, Any]
    version: int
    created_at: float
    updated_at: float
    has_feature_names: bool
    #: What one chunk holds (``MethodInfo.chunk_kind``): ``rows``, ``labelled rows``, ``rows
    #: with a target``, ``views`` or ``columns``.
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
    target: TargetSummary | None = None
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
        """Whether chunks are rows with one class label each (``push(..., y=labels)``)."""
        return self.chunk_kind == "labelled rows"

    @property
    def takes_targets(self) -> bool:
        """Whether chunks are rows with one numeric target each (``push(..., y=targets)``)."""
        return self.chunk_kind == "rows with a target"


@dataclass(frozen=True)
class MethodInfo(Answer):
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


class SelectorPage(Page[SelectorInfo]):
    """One page of the selector list (``GET /v1/selectors``)."""

    items_key = "selectors"

    @property
    def selectors(self) -> list[SelectorInfo]:
        return self.items


@dataclass(frozen=True)
class DeletedSelectors(Answer):
    """What ``Client.delete_selectors`` deleted (``DELETE /v1/selectors?prefix=``): the names,
    sorted, and those that matched and could not be deleted (``failed``). One batch's answer
    also has ``next`` (None: the last batch); the client follows them all."""

    deleted: list[str]
    next: str | None = None
    failed: list[str] = field(default_factory=list)
    raw: Json = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class Merged(Answer):
    """What a merge added: the source, the version of it that was read, its rows."""

    #: The answer's ``from`` (a Python keyword).
    source: str = field(metadata=wire("from"))
    version: int
    rows: int


@dataclass(frozen=True, kw_only=True)
class Receipt(Answer):
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

    @classmethod
    def wire_doc(cls, doc: Json) -> Json:
        # A pending write has no version yet, nor what the selector had seen with it.
        if doc.get("status") == "pending":
            return {**doc, "version": None, "rows_seen": None, "features_seen": None}
        return {**doc, "status": "applied"}


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


@dataclass(frozen=True)
class Decision(Answer):
    """What OFS decided for one feature column on arrival."""

    index: int
    name: str
    kept: bool
    leverage: float
    probability: float
    scale: float


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
    def wire_doc(cls, doc: Json) -> Json:
        shaped = super().wire_doc(doc)
        if "first_index" not in doc:  # decisions carry their indices
            decisions = doc["decisions"]
            shaped.update(first_index=decisions[0]["index"], columns=len(decisions))
        return shaped


@dataclass(frozen=True)
class ChunkStatus(Answer):
    """Where a chunk answered with 202 got to: pending, applied, or rejected (with a reason)."""

    log_id: str
    status: Literal["pending", "applied", "rejected"]
    applied: bool
    version: int
    rows_seen: int | None = None
    features_seen: int | None = None
    reason: str | None = None


@dataclass(frozen=True)
class FeaturePage(Answer):
    """Decided features in arrival order, from ``offset``."""

    name: str
    version: int
    features_seen: int
    offset: int
    features: list[Decision]
