"""Streams: their descriptions, the receipts of their pushes, the side-by-side rankings."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from siftstream.results._common import Json, Page, _int_or_none, _seen
from siftstream.results.rankings import Top
from siftstream.results.selectors import Receipt


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


class StreamPage(Page[StreamInfo]):
    """One page of the stream list (``GET /v1/streams``)."""

    items_key = "streams"

    @classmethod
    def read_item(cls, doc: Json) -> StreamInfo:
        return StreamInfo.from_json(doc)

    @property
    def streams(self) -> list[StreamInfo]:
        return self.items


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
