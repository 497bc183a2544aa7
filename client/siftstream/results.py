"""Typed answers of the Sift API, as the client returns them.

Each is a frozen dataclass built from the service's JSON by ``from_json`` (and, for arrays
sent as ``.npy``, from the array and its ``Sift-*`` headers). Arrays (weights, projections,
cluster labels, transformed rows) are numpy arrays. Every answer keeps the JSON it came from in
``raw`` (empty for ``.npy`` answers), so fields a newer service adds are not lost.

Row streams count ``rows_seen``, feature streams (``ofs``, ``iqrp``) ``features_seen``: the
other one is ``None``; ``seen`` gives whichever the selector counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np

Json = dict[str, Any]


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


def _seen(rows_seen: int | None, features_seen: int | None) -> int:
    return rows_seen if rows_seen is not None else (features_seen or 0)


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


@dataclass(frozen=True)
class SelectorPage:
    """One page of the selector list; ``next`` is the ``after`` of the following page."""

    selectors: list[SelectorInfo]
    next: str | None

    @classmethod
    def from_json(cls, doc: Json) -> SelectorPage:
        following = doc.get("next")
        return cls(
            [SelectorInfo.from_json(s) for s in doc["selectors"]],
            None if following is None else str(following),
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


@dataclass(frozen=True)
class RankedFeature:
    """One feature of a ranking: its rank (1 = best), index, name, score (and view)."""

    rank: int
    index: int
    name: str
    score: float
    view: str | None = None
    #: The lowest and highest rank the feature takes in this ranking and in the resampled ones
    #: (``Top.stability``); None when the answer has no stability.
    band: tuple[int, int] | None = None

    @classmethod
    def from_json(cls, doc: Json) -> RankedFeature:
        view = doc.get("view")
        band = doc.get("band")
        return cls(
            int(doc["rank"]),
            int(doc["index"]),
            str(doc["name"]),
            float(doc["score"]),
            None if view is None else str(view),
            None if band is None else (int(band[0]), int(band[1])),
        )


@dataclass(frozen=True)
class Stability:
    """How settled a top h is: the selection-stability index of Nogueira, Sechidis & Brown
    (JMLR 2018) over the resampled rankings, 1 when they agree, about 0 at random; its 95%
    interval; how many resamples it compares and how the method keeps them. ``corrected``: the
    resamples' spread is scaled to every row seen (else it is the index of 1/resamples of them).
    """

    index: float
    interval: tuple[float, float]
    resamples: int
    h: int
    estimated_by: str
    corrected: bool
    level: float = 0.95

    @classmethod
    def from_json(cls, doc: Json) -> Stability:
        low, high = doc["interval"]
        return cls(
            float(doc["index"]),
            (float(low), float(high)),
            int(doc["resamples"]),
            int(doc["h"]),
            str(doc.get("estimated_by", "")),
            bool(doc.get("corrected", True)),
            float(doc.get("level", 0.95)),
        )


@dataclass(frozen=True)
class Top:
    """The h best features of a committed version (``account``: IQRP's pass account)."""

    name: str
    method: str
    version: int
    features: list[RankedFeature]
    rows_seen: int | None = None
    features_seen: int | None = None
    strategy: str | None = None
    account: dict[str, Any] | None = None
    #: How settled this top is (row methods ranked by score); None otherwise.
    stability: Stability | None = None
    raw: Json = field(default_factory=dict, repr=False, compare=False)

    @property
    def seen(self) -> int:
        return _seen(self.rows_seen, self.features_seen)

    @property
    def bands(self) -> list[tuple[int, int] | None]:
        """Each feature's band, best first (None where the answer has none)."""
        return [f.band for f in self.features]

    @property
    def indices(self) -> np.ndarray:
        """The features' indices, best first (within their view for multi-view selectors)."""
        return np.array([f.index for f in self.features], dtype=np.int64)

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.features]

    @classmethod
    def from_json(cls, doc: Json) -> Top:
        return cls(
            name=str(doc["name"]),
            method=str(doc["method"]),
            version=int(doc["version"]),
            features=[RankedFeature.from_json(f) for f in doc["features"]],
            rows_seen=_int_or_none(doc.get("rows_seen")),
            features_seen=_int_or_none(doc.get("features_seen")),
            strategy=doc.get("strategy"),
            account=doc.get("account"),
            stability=None
            if doc.get("stability") is None
            else Stability.from_json(doc["stability"]),
            raw=doc,
        )


@dataclass(frozen=True)
class Weights:
    """Every feature's score at one version."""

    version: int
    weights: np.ndarray
    rows_seen: int | None = None
    features_seen: int | None = None


@dataclass(frozen=True)
class Projection:
    """IOC's W (n_features x n_components), its eigenvalue estimates and their agreement."""

    name: str
    version: int
    rows_seen: int
    n_components: int
    solution: str
    eigenvalues: np.ndarray
    agreement: np.ndarray
    projection: np.ndarray
    raw: Json = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: Json) -> Projection:
        return cls(
            name=str(doc["name"]),
            version=int(doc["version"]),
            rows_seen=int(doc["rows_seen"]),
            n_components=int(doc["n_components"]),
            solution=str(doc["solution"]),
            eigenvalues=np.asarray(doc["eigenvalues"], dtype=np.float64),
            agreement=np.asarray(doc["agreement"], dtype=np.float64),
            projection=np.asarray(doc["projection"], dtype=np.float64).reshape(
                -1, int(doc["n_components"])
            ),
            raw=doc,
        )


@dataclass(frozen=True)
class Transformed:
    """Rows mapped by a projection (``W^T x`` per row), at one version."""

    version: int
    rows_seen: int
    rows: np.ndarray


@dataclass(frozen=True)
class Clustering:
    """k-means of an OFS selector's samples on its kept columns."""

    name: str
    version: int
    features_seen: int
    features_used: int
    k: int
    seed: int
    objective: float
    labels: np.ndarray

    @classmethod
    def from_json(cls, doc: Json) -> Clustering:
        return cls(
            str(doc["name"]),
            int(doc["version"]),
            int(doc["features_seen"]),
            int(doc["features_used"]),
            int(doc["k"]),
            int(doc["seed"]),
            float(doc["objective"]),
            np.asarray(doc["labels"], dtype=np.int64),
        )


@dataclass(frozen=True)
class HistoryVersion:
    """The top features of one past version."""

    version: int
    updated_at: float
    top: list[RankedFeature]
    rows_seen: int | None = None
    features_seen: int | None = None

    @property
    def seen(self) -> int:
        return _seen(self.rows_seen, self.features_seen)

    @classmethod
    def from_json(cls, doc: Json) -> HistoryVersion:
        return cls(
            version=int(doc["version"]),
            updated_at=float(doc["updated_at"]),
            top=[RankedFeature.from_json(f) for f in doc["top"]],
            rows_seen=_int_or_none(doc.get("rows_seen")),
            features_seen=_int_or_none(doc.get("features_seen")),
        )


@dataclass(frozen=True)
class History:
    """How a selector's top h changed: versions newest first."""

    name: str
    method: str
    h: int
    versions: list[HistoryVersion]
    raw: Json = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: Json) -> History:
        return cls(
            str(doc["name"]),
            str(doc["method"]),
            int(doc["h"]),
            [HistoryVersion.from_json(v) for v in doc["versions"]],
            raw=doc,
        )


@dataclass(frozen=True)
class ApiKey:
    """An API key as listed (never with its secret)."""

    id: str
    scopes: list[str]
    prefix: str
    label: str
    created_at: float

    @classmethod
    def from_json(cls, doc: Json) -> ApiKey:
        return cls(
            str(doc["id"]),
            [str(s) for s in doc["scopes"]],
            str(doc.get("prefix", "")),
            str(doc.get("label", "")),
            float(doc["created_at"]),
        )


@dataclass(frozen=True)
class CreatedKey:
    """A new API key: ``key`` is the secret, shown only in this answer."""

    info: ApiKey
    key: str = field(repr=False)

    @classmethod
    def from_json(cls, doc: Json) -> CreatedKey:
        return cls(ApiKey.from_json(doc), str(doc["key"]))


@dataclass(frozen=True)
class TenantQuota:
    """A tenant's quotas (``limits``) and what its names hold (``used``): selectors,
    state_bytes (declared), alerts, streams."""

    tenant: str
    limits: dict[str, int]
    used: dict[str, int]

    @classmethod
    def from_json(cls, doc: Json) -> TenantQuota:
        return cls(
            str(doc["tenant"]),
            {str(k): int(v) for k, v in doc["limits"].items()},
            {str(k): int(v) for k, v in doc["used"].items()},
        )


@dataclass(frozen=True)
class Health:
    """A probe's answer: ``ok`` (healthz) or ``ready`` (readyz), with readiness's Redis mode."""

    status: str
    redis: str | None = None

    @classmethod
    def from_json(cls, doc: Json) -> Health:
        redis = doc.get("redis")
        return cls(str(doc["status"]), None if redis is None else str(redis))


# -- streams ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class StreamSelectorInfo:
    """A selector attached to a stream, as the stream describes it."""

    name: str
    method: str
    version: int
    pending_entries: int
    start: str
    checkpoint: str
    rows_seen: int | None = None
    features_seen: int | None = None

    @property
    def seen(self) -> int:
        return _seen(self.rows_seen, self.features_seen)

    @classmethod
    def from_json(cls, doc: Json) -> StreamSelectorInfo:
        return cls(
            name=str(doc["name"]),
            method=str(doc["method"]),
            version=int(doc["version"]),
            pending_entries=int(doc["pending_entries"]),
            start=str(doc["start"]),
            checkpoint=str(doc["checkpoint"]),
            rows_seen=_int_or_none(doc.get("rows_seen")),
            features_seen=_int_or_none(doc.get("features_seen")),
        )


@dataclass(frozen=True)
class StreamInfo:
    """A stream (create, list, describe): its shape, its log, the methods that may attach,
    and (describe) the selectors attached to it."""

    name: str
    chunk_kind: str
    has_feature_names: bool
    created_at: float
    entries: int
    items: int
    last_id: str
    log_entries: int
    trimmed_through: str
    methods: list[str]
    n_features: int | None = None
    n_samples: int | None = None
    views: dict[str, int] | None = None
    selectors: list[StreamSelectorInfo] | None = None
    raw: Json = field(default_factory=dict, repr=False, compare=False)

    @property
    def is_feature_stream(self) -> bool:
        """Whether its chunks are feature columns over fixed samples."""
        return self.chunk_kind == "columns"

    @property
    def labelled(self) -> bool:
        """Whether its rows carry one class label each."""
        return self.chunk_kind == "labelled rows"

    @classmethod
    def from_json(cls, doc: Json) -> StreamInfo:
        selectors = doc.get("selectors")
        return cls(
            name=str(doc["name"]),
            chunk_kind=str(doc["chunk_kind"]),
            has_feature_names=bool(doc["has_feature_names"]),
            created_at=float(doc["created_at"]),
            entries=int(doc["entries"]),
            items=int(doc["items"]),
            last_id=str(doc["last_id"]),
            log_entries=int(doc["log_entries"]),
            trimmed_through=str(doc["trimmed_through"]),
            methods=[str(m) for m in doc["methods"]],
            n_features=_int_or_none(doc.get("n_features")),
            n_samples=_int_or_none(doc.get("n_samples")),
            views=None
            if doc.get("views") is None
            else {k: int(v) for k, v in doc["views"].items()},
            selectors=None
            if selectors is None
            else [StreamSelectorInfo.from_json(s) for s in selectors],
            raw=doc,
        )


@dataclass(frozen=True)
class StreamPage:
    """One page of the stream list; ``next`` is the ``after`` of the following page."""

    streams: list[StreamInfo]
    next: str | None

    @classmethod
    def from_json(cls, doc: Json) -> StreamPage:
        following = doc.get("next")
        return cls(
            [StreamInfo.from_json(s) for s in doc["streams"]],
            None if following is None else str(following),
        )


@dataclass(frozen=True)
class StreamOutcome:
    """What became of a chunk pushed to a stream in one attached selector."""

    name: str
    method: str
    status: Literal["applied", "pending", "rejected"]
    version: int | None = None
    rows_seen: int | None = None
    features_seen: int | None = None
    reason: str | None = None

    @property
    def seen(self) -> int | None:
        return None if self.version is None else _seen(self.rows_seen, self.features_seen)

    @classmethod
    def from_json(cls, doc: Json) -> StreamOutcome:
        return cls(
            name=str(doc["name"]),
            method=str(doc["method"]),
            status=doc["status"],
            version=_int_or_none(doc.get("version")),
            rows_seen=_int_or_none(doc.get("rows_seen")),
            features_seen=_int_or_none(doc.get("features_seen")),
            reason=doc.get("reason"),
        )


@dataclass(frozen=True, kw_only=True)
class StreamReceipt(Receipt):
    """The answer to a chunk pushed to a stream: its log id and, per attached selector, what
    became of it (``selectors``). ``applied``: every one applied it or set it aside; the
    stream has no version of its own (``version`` is None: each selector has its own)."""

    stream: str
    selectors: list[StreamOutcome]
    chunk_items: int = 0
    first_index: int = 0

    @property
    def items(self) -> int:
        return self.chunk_items

    @property
    def seen(self) -> int | None:
        return None

    @property
    def rejected(self) -> list[StreamOutcome]:
        """The selectors that set the chunk aside (each with its ``reason``)."""
        return [s for s in self.selectors if s.status == "rejected"]

    def by_selector(self) -> dict[str, StreamOutcome]:
        return {s.name: s for s in self.selectors}

    def once_settled(self, status: StreamReceipt) -> StreamReceipt:
        """This receipt with the outcomes a later status of its chunk gives."""
        return replace(self, status=status.status, selectors=status.selectors)

    @classmethod
    def from_json(cls, doc: Json) -> StreamReceipt:
        return cls(
            status="pending" if doc.get("status") == "pending" else "applied",
            log_id=str(doc["log_id"]),
            duplicate=bool(doc.get("duplicate", False)),
            stream=str(doc["stream"]),
            selectors=[StreamOutcome.from_json(s) for s in doc["selectors"]],
            chunk_items=int(doc.get("items") or 0),
            first_index=int(doc.get("first_index") or 0),
            raw=doc,
        )


@dataclass(frozen=True)
class Agreement:
    """How much two selectors' top h agree: Jaccard of the sets, rank-biased overlap of the
    orders (1: the same ranking), features in both."""

    a: str
    b: str
    jaccard: float
    rbo: float
    shared: int
    view: str | None = None

    @classmethod
    def from_json(cls, doc: Json) -> Agreement:
        view = doc.get("view")
        return cls(
            str(doc["a"]),
            str(doc["b"]),
            float(doc["jaccard"]),
            float(doc["rbo"]),
            int(doc["shared"]),
            None if view is None else str(view),
        )


@dataclass(frozen=True)
class StreamRankings:
    """Every attached selector's top h side by side (features indexed as the stream indexes
    them), and the agreement of every pair."""

    stream: str
    h: int
    p: float
    selectors: list[Top]
    agreement: list[Agreement]
    unranked: dict[str, str] = field(default_factory=dict)
    raw: Json = field(default_factory=dict, repr=False, compare=False)

    def between(self, a: str, b: str, view: str | None = None) -> Agreement:
        """The agreement of selectors ``a`` and ``b`` (either order)."""
        for agreed in self.agreement:
            if {agreed.a, agreed.b} == {a, b} and agreed.view == view:
                return agreed
        raise KeyError(f"no agreement of {a!r} and {b!r} (view {view!r})")

    @classmethod
    def from_json(cls, doc: Json) -> StreamRankings:
        return cls(
            stream=str(doc["stream"]),
            h=int(doc["h"]),
            p=float(doc["p"]),
            selectors=[Top.from_json(t) for t in doc["selectors"]],
            agreement=[Agreement.from_json(a) for a in doc["agreement"]],
            unranked={str(u["name"]): str(u["detail"]) for u in doc.get("unranked", [])},
            raw=doc,
        )


@dataclass(frozen=True)
class PushSummary:
    """What pushing an input in chunks did: one receipt per chunk, in order."""

    receipts: list[ChunkReceipt | FeaturesReceipt | StreamReceipt]
    #: Rows (or feature columns) sent.
    items: int

    @property
    def last(self) -> Receipt:
        return self.receipts[-1]

    @property
    def version(self) -> int | None:
        """The version that contains the last chunk (None if it is still pending)."""
        return self.last.version

    @property
    def seen(self) -> int | None:
        """Rows (or features) seen by the selector once the last chunk was applied."""
        return self.last.seen

    @property
    def duplicates(self) -> int:
        """Chunks the service had already applied (answered from their Idempotency-Key)."""
        return sum(r.duplicate for r in self.receipts)


@dataclass(frozen=True)
class FeatureRef:
    """A feature as drift and alerts name it (``view``: multi-view selectors)."""

    index: int
    name: str
    view: str | None = None

    @classmethod
    def from_json(cls, doc: Json) -> FeatureRef:
        view = doc.get("view")
        return cls(int(doc["index"]), str(doc["name"]), None if view is None else str(view))


@dataclass(frozen=True)
class Moved:
    """How a top h moved since an earlier ``version``: rank-biased overlap, Jaccard, drift
    (1 - rbo), and the features that entered and left it. ``how``/``pinned_at``: of a
    baseline (``auto`` or ``pinned``)."""

    version: int
    rbo: float
    jaccard: float
    drift: float
    entered: list[FeatureRef]
    left: list[FeatureRef]
    rows_seen: int | None = None
    features_seen: int | None = None
    how: str | None = None
    pinned_at: float | None = None

    @classmethod
    def from_json(cls, doc: Json) -> Moved:
        pinned = doc.get("pinned_at")
        return cls(
            int(doc["version"]),
            float(doc["rbo"]),
            float(doc["jaccard"]),
            float(doc["drift"]),
            [FeatureRef.from_json(f) for f in doc["entered"]],
            [FeatureRef.from_json(f) for f in doc["left"]],
            _int_or_none(doc.get("rows_seen")),
            _int_or_none(doc.get("features_seen")),
            doc.get("how"),
            None if pinned is None else float(pinned),
        )


@dataclass(frozen=True)
class Drift:
    """How far a selector's top h moved since the previous version and since the baseline
    (None: no earlier version kept, no baseline yet)."""

    name: str
    method: str
    h: int
    version: int
    previous: Moved | None
    baseline: Moved | None
    rows_seen: int | None = None
    features_seen: int | None = None
    raw: Json = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: Json) -> Drift:
        previous, baseline = doc.get("previous"), doc.get("baseline")
        return cls(
            str(doc["name"]),
            str(doc["method"]),
            int(doc["h"]),
            int(doc["version"]),
            None if previous is None else Moved.from_json(previous),
            None if baseline is None else Moved.from_json(baseline),
            _int_or_none(doc.get("rows_seen")),
            _int_or_none(doc.get("features_seen")),
            raw=doc,
        )


@dataclass(frozen=True)
class Baseline:
    """The version a selector's drift is measured against."""

    name: str
    version: int
    how: str
    pinned_at: float
    rows_seen: int | None = None
    features_seen: int | None = None

    @classmethod
    def from_json(cls, doc: Json) -> Baseline:
        return cls(
            str(doc["name"]),
            int(doc["version"]),
            str(doc["how"]),
            float(doc["pinned_at"]),
            _int_or_none(doc.get("rows_seen")),
            _int_or_none(doc.get("features_seen")),
        )


@dataclass(frozen=True)
class Alert:
    """An alert: ``url`` gets an event when a version's drift since the baseline reaches
    ``threshold`` (and its top h is at least ``min_stability`` stable, if set)."""

    id: str
    url: str
    h: int
    threshold: float
    min_stability: float | None
    label: str
    created_at: float
    firing: bool = False
    crossings: int = 0
    judged_version: int | None = None
    #: webhook (the event as JSON) or alertmanager (Prometheus Alertmanager's API v2).
    kind: str = "webhook"

    @classmethod
    def from_json(cls, doc: Json) -> Alert:
        floor = doc.get("min_stability")
        return cls(
            str(doc["id"]),
            str(doc["url"]),
            int(doc["h"]),
            float(doc["threshold"]),
            None if floor is None else float(floor),
            str(doc.get("label", "")),
            float(doc["created_at"]),
            bool(doc.get("firing", False)),
            int(doc.get("crossings", 0)),
            _int_or_none(doc.get("judged_version")),
            str(doc.get("kind", "webhook")),
        )


@dataclass(frozen=True)
class RotatedSecret:
    """An alert's new Standard Webhooks secret, in this answer only; the previous one signs
    beside it until ``previous_valid_until`` (Unix seconds)."""

    id: str
    secret: str = field(repr=False)
    previous_valid_until: float

    @classmethod
    def from_json(cls, doc: Json) -> RotatedSecret:
        return cls(str(doc["id"]), str(doc["secret"]), float(doc["previous_valid_until"]))


@dataclass(frozen=True)
class CreatedAlert:
    """A new alert: ``secret`` (``whsec_...``, the Standard Webhooks secret of its signatures)
    is in this answer only."""

    alert: Alert
    secret: str = field(repr=False)

    @classmethod
    def from_json(cls, doc: Json) -> CreatedAlert:
        return cls(Alert.from_json(doc), str(doc["secret"]))


@dataclass(frozen=True)
class AlertEvent:
    """One crossing of an alert, as POSTed to its webhook, with how its delivery went
    (``delivery``: status, attempts, last_status, last_error)."""

    id: str
    alert: str
    crossing: int
    version: int
    baseline_version: int
    drift: float
    entered: list[FeatureRef]
    left: list[FeatureRef]
    at: float
    stability: float | None = None
    delivery: dict[str, Any] | None = None
    raw: Json = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: Json) -> AlertEvent:
        stability = doc.get("stability")
        return cls(
            str(doc["id"]),
            str(doc["alert"]),
            int(doc["crossing"]),
            int(doc["version"]),
            int(doc["baseline_version"]),
            float(doc["drift"]),
            [FeatureRef.from_json(f) for f in doc["entered"]],
            [FeatureRef.from_json(f) for f in doc["left"]],
            float(doc["at"]),
            None if stability is None else float(stability),
            doc.get("delivery"),
            raw=doc,
        )


# -- sources ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RejectedEntry:
    """An entry a source set aside: where it is on the bus (its partition and position: a
    Redis entry id, a JetStream sequence), why, and when (seconds since the epoch)."""

    partition: str
    position: str
    reason: str
    at: float

    @classmethod
    def from_json(cls, doc: Json) -> RejectedEntry:
        return cls(
            str(doc["partition"]), str(doc["position"]), str(doc["reason"]), float(doc["at"])
        )


@dataclass(frozen=True)
class Source:
    """A source (create, list, describe): the bus it reads (``url`` with its credentials shown
    as ``***``; ``key`` for a Redis stream, ``stream`` and ``subject`` for JetStream), where it
    appends (``into``: ``{"selector": name}`` or ``{"stream": name}``), and how far it got.

    ``state``: starting, running, paused (its target is behind: consumption waits), retrying
    (the bus or Sift's Redis does not answer: see ``last_error``) or failed (it cannot feed its
    target: see ``last_error``). ``positions``: each partition's committed position; ``lag``:
    entries on the bus after them (None: the bus cannot say). ``rejected_entries``: the newest
    of the ``rejected`` entries, newest first."""

    name: str
    kind: str
    url: str
    into: dict[str, str]
    batch_rows: int
    batch_ms: int
    start: str
    created_at: float
    state: str
    positions: dict[str, str]
    entries: int
    rows: int
    rejected: int
    rejected_entries: list[RejectedEntry]
    rows_per_second: float = 0.0
    lag: int | None = None
    last_error: str | None = None
    key: str | None = None
    stream: str | None = None
    subject: str | None = None
    label_field: str | None = None
    updated_at: float | None = None
    raw: Json = field(default_factory=dict, repr=False, compare=False)

    @property
    def into_kind(self) -> str:
        """``selector`` or ``stream``: what it appends to."""
        return "stream" if "stream" in self.into else "selector"

    @property
    def into_name(self) -> str:
        """The name of the selector (or stream) it appends to."""
        return self.into[self.into_kind]

    @property
    def reads(self) -> str:
        """What it reads on the bus: the Redis stream's key, or the JetStream stream (and its
        subject filter)."""
        if self.kind == "nats":
            return f"{self.stream}" + (f" ({self.subject})" if self.subject else "")
        return str(self.key)

    @classmethod
    def from_json(cls, doc: Json) -> Source:
        updated = doc.get("updated_at")
        return cls(
            name=str(doc["name"]),
            kind=str(doc["kind"]),
            url=str(doc["url"]),
            into={str(k): str(v) for k, v in doc["into"].items()},
            batch_rows=int(doc["batch_rows"]),
            batch_ms=int(doc["batch_ms"]),
            start=str(doc["start"]),
            created_at=float(doc["created_at"]),
            state=str(doc["state"]),
            positions={str(k): str(v) for k, v in (doc.get("positions") or {}).items()},
            entries=int(doc.get("entries") or 0),
            rows=int(doc.get("rows") or 0),
            rejected=int(doc.get("rejected") or 0),
            rejected_entries=[RejectedEntry.from_json(r) for r in doc.get("rejected_entries", [])],
            rows_per_second=float(doc.get("rows_per_second") or 0.0),
            lag=_int_or_none(doc.get("lag")),
            last_error=None if doc.get("last_error") is None else str(doc["last_error"]),
            key=None if doc.get("key") is None else str(doc["key"]),
            stream=None if doc.get("stream") is None else str(doc["stream"]),
            subject=None if doc.get("subject") is None else str(doc["subject"]),
            label_field=None if doc.get("label_field") is None else str(doc["label_field"]),
            updated_at=None if updated is None else float(updated),
            raw=doc,
        )
