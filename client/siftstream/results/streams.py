"""Streams: their descriptions, the receipts of their pushes, the side-by-side rankings."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from siftstream.results._common import Answer, Json, Page, _seen, wire
from siftstream.results.rankings import Top
from siftstream.results.selectors import Receipt


@dataclass(frozen=True)
class StreamSelectorInfo(Answer):
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


@dataclass(frozen=True)
class StreamInfo(Answer):
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

    @property
    def takes_targets(self) -> bool:
        """Whether its rows carry one numeric target each."""
        return self.chunk_kind == "rows with a target"


class StreamPage(Page[StreamInfo]):
    """One page of the stream list (``GET /v1/streams``)."""

    items_key = "streams"

    @property
    def streams(self) -> list[StreamInfo]:
        return self.items


@dataclass(frozen=True)
class StreamOutcome(Answer):
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


@dataclass(frozen=True, kw_only=True)
class StreamReceipt(Receipt):
    """The answer to a chunk pushed to a stream: its log id and, per attached selector, what
    became of it (``selectors``). ``applied``: every one applied it or set it aside; the
    stream has no version of its own (``version`` is None: each selector has its own)."""

    stream: str
    selectors: list[StreamOutcome]
    #: The answer's ``items``.
    chunk_items: int = field(default=0, metadata=wire("items"))
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
    def wire_doc(cls, doc: Json) -> Json:
        # Each selector has its own version; the stream has none.
        pending = doc.get("status") == "pending"
        status = "pending" if pending else "applied"
        return {"duplicate": False, **doc, "status": status, "version": None}


@dataclass(frozen=True)
class Agreement(Answer):
    """How much two selectors' top h agree: Jaccard of the sets, rank-biased overlap of the
    orders (1: the same ranking), features in both."""

    a: str
    b: str
    jaccard: float
    rbo: float
    shared: int
    view: str | None = None


@dataclass(frozen=True)
class StreamRankings(Answer):
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
    def wire_doc(cls, doc: Json) -> Json:
        # The answer lists the unranked selectors; each is its name's detail here.
        unranked = {u["name"]: u["detail"] for u in doc.get("unranked", [])}
        return {**doc, "unranked": unranked}
