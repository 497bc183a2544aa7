"""Plain records the store hands out: selector and stream descriptions, heads, append outcomes,
log entries, leases (the ranking history's and the monitoring's are in ``monitoring_records``,
how Redis's replies become records in ``replies``); and the reading of a reply's values as text
and integers.

They hold no behaviour beyond (de)serialisation; the store owns how they are kept in Redis.
"""

from __future__ import annotations

import dataclasses
import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast, get_args

from service.algorithms.base import ChunkKind
from service.errors import CodecError, InvalidInput
from service.store.monitoring_records import HistoryEntry


@dataclass(frozen=True)
class SelectorMeta:
    """What a selector is: method, shape, resolved parameters. Immutable after ``create``.

    The shape says what is fixed: ``n_features`` for row streams (``views``, the features of
    every view, for multi-view ones), ``n_samples`` for feature streams (whose features are
    counted as they arrive, so ``n_features`` is None).
    """

    name: str
    method: str
    params: dict[str, Any]
    created_at: float
    n_features: int | None = None
    n_samples: int | None = None
    views: tuple[tuple[str, int], ...] | None = None
    feature_names: list[str] | None = None
    #: Partitions of a partitioned selector (1: not partitioned). Partition ``i`` is a selector
    #: of its own, ``partition(i)``: its own log, head, lease and applier.
    partitions: int = 1
    #: Which creation of the name this is: random, new at every create (and import). A name
    #: deleted and created again is another selector; whatever a process keeps of a selector
    #: (an applier, a backoff, a waiter) and every log id it hands out belong to one
    #: incarnation. "" for a selector created before incarnations were recorded.
    incarnation: str = ""
    #: Seconds without a commit after which the service deletes the selector (None: never).
    expires_after: float | None = None
    #: The stream this selector is attached to (None: chunks are pushed to it directly), the
    #: incarnation of that stream it attached to, and how many items the stream had before
    #: the first entry it applies (``ChunkFormat.stream_feature``: where its features lie in a
    #: stream of feature columns).
    stream: str | None = None
    stream_incarnation: str = ""
    stream_base: int = 0
    #: Made by a job that deletes it when done (a scikit-learn fit): listings mark it, and may
    #: leave it out (``GET /v1/selectors?temporary=false``).
    temporary: bool = False

    @property
    def partitioned(self) -> bool:
        return self.partitions > 1

    def partition(self, index: int) -> SelectorMeta:
        """The description of partition ``index``: this selector's, under the partition's name."""
        if not 0 <= index < self.partitions:
            raise ValueError(f"selector '{self.name}' has no partition {index}")
        return dataclasses.replace(self, name=partition_name(self.name, index), partitions=1)

    @property
    def size(self) -> int:
        """The fixed dimension the method is sized by (``resolve_params``' ``size``)."""
        fixed = self.n_samples if self.n_samples is not None else self.n_features
        if fixed is None:
            raise CodecError(f"selector '{self.name}' has neither n_features nor n_samples")
        return fixed

    @property
    def ranked_features(self) -> int | None:
        """How many features one of its rankings holds: ``n_features``, a multi-view
        selector's widest view (each view is ranked on its own), None for a feature stream
        (its features are counted as they arrive)."""
        if self.views:
            return max(dim for _, dim in self.views)
        return self.n_features

    def feature_name(self, index: int) -> str:
        """The name of fixed feature ``index``: given at creation, else ``f<index>``."""
        return self.feature_names[index] if self.feature_names else default_name(index)

    def to_json(self) -> str:
        """JSON of everything except ``feature_names`` (stored under their own key)."""
        return json.dumps(
            {
                "name": self.name,
                "method": self.method,
                "params": self.params,
                "created_at": self.created_at,
                "n_features": self.n_features,
                "n_samples": self.n_samples,
                "views": None if self.views is None else [list(view) for view in self.views],
                "partitions": self.partitions,
                "incarnation": self.incarnation,
                "expires_after": self.expires_after,
                # Stored only when set: the descriptions of every other selector stay as they were.
                **({"temporary": True} if self.temporary else {}),
                **(
                    {}
                    if self.stream is None
                    else {
                        "stream": self.stream,
                        "stream_incarnation": self.stream_incarnation,
                        "stream_base": self.stream_base,
                    }
                ),
            },
            allow_nan=False,
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, raw: str | bytes, feature_names: list[str] | None) -> SelectorMeta:
        try:
            data = json.loads(raw)
            # Descriptions written before the shape had its own fields kept it in "extra".
            extra = dict(data.get("extra") or {})
            n_samples = data.get("n_samples", extra.get("n_samples"))
            views = data.get("views", extra.get("views"))
            n_features = data.get("n_features")
            return cls(
                name=str(data["name"]),
                method=str(data["method"]),
                params=dict(data["params"]),
                created_at=float(data["created_at"]),
                n_features=None if n_samples is not None or n_features is None else int(n_features),
                n_samples=None if n_samples is None else int(n_samples),
                views=None if views is None else tuple((str(v), int(d)) for v, d in views),
                feature_names=feature_names,
                partitions=int(data.get("partitions", 1)),
                incarnation=str(data.get("incarnation", "")),
                expires_after=None
                if data.get("expires_after") is None
                else float(data["expires_after"]),
                stream=None if data.get("stream") is None else str(data["stream"]),
                stream_incarnation=str(data.get("stream_incarnation", "")),
                stream_base=int(data.get("stream_base", 0)),
                temporary=bool(data.get("temporary", False)),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise CodecError(f"stored selector description does not parse: {exc}") from exc


#: Most partitions of one selector.
MAX_PARTITIONS = 64


def partition_name(name: str, index: int) -> str:
    """The selector that is partition ``index`` of ``name``: ``name:p<index>``, which no user's
    selector can be called (names have no colon). Its own hash tag spreads partitions over a
    cluster's slots."""
    return f"{name}:p{index}"


def new_incarnation() -> str:
    """A fresh ``SelectorMeta.incarnation``: 64 random bits in hex."""
    return secrets.token_hex(8)


@dataclass(frozen=True)
class StreamMeta:
    """What a stream is: its chunk kind and the shape every chunk is checked against (the
    shape fields of a selector's creation), fixed at creation. Its selectors take the same
    shape and names (``service.wire.kinds.ChunkTarget``)."""

    name: str
    #: The chunk kind of its chunks (``service.wire.kinds``): which methods may attach.
    kind: ChunkKind
    created_at: float
    incarnation: str
    n_features: int | None = None
    n_samples: int | None = None
    views: tuple[tuple[str, int], ...] | None = None
    feature_names: list[str] | None = None

    @property
    def size(self) -> int:
        """The fixed dimension chunks are checked against (as ``SelectorMeta.size``)."""
        fixed = self.n_samples if self.n_samples is not None else self.n_features
        if fixed is None:
            raise CodecError(f"stream '{self.name}' has neither n_features nor n_samples")
        return fixed

    def to_json(self) -> str:
        """JSON of everything except ``feature_names`` (stored under their own key)."""
        return json.dumps(
            {
                "name": self.name,
                "kind": self.kind,
                "created_at": self.created_at,
                "incarnation": self.incarnation,
                "n_features": self.n_features,
                "n_samples": self.n_samples,
                "views": None if self.views is None else [list(view) for view in self.views],
            },
            allow_nan=False,
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, raw: str | bytes, feature_names: list[str] | None) -> StreamMeta:
        try:
            data = json.loads(raw)
            views = data.get("views")
            kind = str(data["kind"])
            if kind not in get_args(ChunkKind):
                raise ValueError(f"unknown chunk kind {kind!r}")
            return cls(
                name=str(data["name"]),
                kind=cast(ChunkKind, kind),
                created_at=float(data["created_at"]),
                incarnation=str(data["incarnation"]),
                n_features=None if data.get("n_features") is None else int(data["n_features"]),
                n_samples=None if data.get("n_samples") is None else int(data["n_samples"]),
                views=None if views is None else tuple((str(v), int(d)) for v, d in views),
                feature_names=feature_names,
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise CodecError(f"stored stream description does not parse: {exc}") from exc


@dataclass(frozen=True)
class StreamHead:
    """Where a stream's log stands."""

    incarnation: str
    #: Items (rows or feature columns) and entries ever appended, and the newest entry's id.
    appended: int
    entries: int
    last_id: str
    #: The log holds the entries after this id (everything before is trimmed).
    trimmed: str
    #: Entries the log holds now.
    length: int
    #: A forced delete is under way: no more appends or attachments.
    closing: bool = False


@dataclass(frozen=True)
class Attachment:
    """A selector attached to a stream, as the stream's slot records it: the incarnation of
    the selector, the cursor it started after, the cursor of its last checkpoint as it
    reported it (the log is trimmed only up to the lowest of these), and when it attached
    (Redis time, ms)."""

    selector: str
    incarnation: str
    start: str
    released: str
    attached_ms: int
    #: Where a detach cut the stream for it (``STREAM_CUT``); None while it is attached.
    cut: str | None = None

    @classmethod
    def parse(cls, selector: bytes | str, value: bytes | str) -> Attachment:
        """An attachment from its hash field and value (``"<incarnation> <start> <released>
        <ms>"``, as the ``ATTACH`` and ``RELEASE`` scripts write it; then ``" <cut>"`` for a
        selector being detached, as ``STREAM_CUT`` writes it)."""
        text = as_text(value)
        try:
            incarnation, start, released, at, *cut = text.split(" ")
            if len(cut) > 1:
                raise ValueError("too many fields")
            return cls(
                as_text(selector), incarnation, start, released, int(at), cut[0] if cut else None
            )
        except ValueError as exc:
            raise CodecError(f"stream attachment does not parse: {text[:200]!r}") from exc


@dataclass(frozen=True)
class Attached:
    """Where a selector starts in a stream (``ATTACH``): after ``cursor``, as the
    ``items``-th item and after ``entries`` entries of the stream (its own head counts from
    there), of the stream's ``stream_incarnation``."""

    cursor: str
    items: int
    entries: int
    stream_incarnation: str


def default_name(index: int) -> str:
    """The name shown for feature ``index`` when none was given: ``f<index>``."""
    return f"f{index}"


@dataclass(frozen=True)
class Checkpoint:
    """Where the whole state of one version lies, and how far the log had been applied then:
    loading it and replaying the log after ``cursor`` gives the state of any later version."""

    #: Redis key of the checkpoint hash (its fields possibly cut in pieces, ``codec.cut_state``).
    key: str
    version: int
    cursor: str
    items_seen: int
    #: Whether the hash is cut in pieces (False for a whole-state hash of an earlier layout).
    cut: bool = True


@dataclass(frozen=True)
class CommitRecord:
    """What one commit applied, as replay needs it: the entries after the previous cursor up to
    ``cursor``, joined into one update, or (``rejected``) one entry set aside."""

    version: int
    cursor: str
    rejected: bool


@dataclass(frozen=True)
class Head:
    """The committed position of a selector: which state is current and how far the log went."""

    #: 0 at creation, +1 per commit.
    version: int
    #: Last applied stream id; ``"0-0"`` before anything was applied.
    cursor: str
    #: Items folded in so far: rows for row streams, feature columns for feature streams
    #: (kept in Redis as the head's ``rows_seen`` field).
    items_seen: int
    #: Redis key of the state hash of this version.
    state_key: str
    #: Seconds since the epoch (Redis server clock) of the last commit or the creation.
    updated_at: float
    #: The last checkpoint. None for a head written before checkpoints existed: its state key
    #: then holds the whole state, which is its own checkpoint (``recovery_point``).
    checkpoint: Checkpoint | None = None
    #: A partitioned selector's head is its partitions' heads combined (versions and items
    #: summed): the version of each partition its answers are made of, in partition order.
    partition_versions: tuple[int, ...] | None = None
    #: Which creation of the name this head belongs to (``SelectorMeta.incarnation``; "" for a
    #: selector created before incarnations were recorded).
    incarnation: str = ""

    @property
    def recovery_point(self) -> Checkpoint:
        """The checkpoint to load and replay from to rebuild this head's state."""
        if self.checkpoint is not None:
            return self.checkpoint
        return Checkpoint(self.state_key, self.version, self.cursor, self.items_seen, cut=False)


@dataclass(frozen=True)
class AppendOutcome:
    """Answer of ``append``: where the entry went and, for a repeated key, how far it got."""

    log_id: str
    #: True when the idempotency key was seen before (nothing new was appended).
    duplicate: bool
    #: The version that contains the entry, once it is applied (else None).
    applied_version: int | None
    #: ``items_seen`` of that version (else None).
    items_seen: int | None
    #: Stream position of the entry's first item (row or feature column), from 0.
    first: int = 0
    #: Why the entry was rejected instead of applied (dead-lettered), for a repeated key.
    rejected: str | None = None


@dataclass(frozen=True)
class Entry:
    """A chunk to append: its payload and how many items (rows, or feature columns) it holds,
    the digest of the body it came in (what a repeated idempotency key is compared with), its
    idempotency key, the incarnation it was checked against ("" for any), the names of its
    items (in order, or none) and whether it is another selector's summary to merge."""

    payload: bytes
    items: int
    digest: str = ""
    key: str | None = None
    names: Sequence[str] = ()
    merge: bool = False
    incarnation: str = ""

    def check(self) -> None:
        """What an entry must be whatever log it goes to: one name per item (or none), and a
        key that is not empty."""
        if self.names and len(self.names) != self.items:
            raise ValueError(f"expected {self.items} item names, got {len(self.names)}")
        if self.key is not None and not self.key:
            raise InvalidInput("Idempotency-Key must not be empty")


@dataclass(frozen=True)
class Taken:
    """What an applier's ``take`` took: its attempt number on the first entry, and the entries."""

    attempt: int
    entries: list[LogEntry]


@dataclass
class TakeRequest:
    """An applier's ``take`` of the entries after ``after`` (see ``Log.take``), when
    it goes along with a commit: the commit fills in ``taken``."""

    after: str
    count: int
    forgive: tuple[str, ...] = ()
    held: tuple[str, ...] = ()
    taken: Taken | None = None
    #: Whether the take counts an attempt on its first entry (a write, see ``take``).
    counts: bool = True


@dataclass(frozen=True)
class Rejection:
    """A log entry moved aside because it cannot be applied, and why (shown to clients)."""

    log_id: str
    reason: str
    #: The Redis key of the entry's idempotency record, if it has one.
    idem_record: str | None = None


@dataclass(frozen=True)
class Imported:
    """Where an imported selector starts: at ``version`` having seen ``items_seen`` items,
    with its immutable ``segments`` (by id) and the names its items were given on arrival
    (``item_names``, index -> name)."""

    version: int = 0
    items_seen: int = 0
    segments: Mapping[str, bytes] = dataclasses.field(default_factory=dict)
    item_names: Mapping[int, str] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True)
class NextVersion:
    """The version a commit makes of a selector: the one after ``after`` (the head must still
    be at it), what readers read of it (``published``), the cursor of the last entry it covers
    and the items seen with it, and its entry of the ranking history (``history``, its
    ``updated_at`` set to the commit's time; None: no ranking), of which ``history_kept``
    entries are kept. (``Commits.append_and_commit`` appends the entries it covers itself:
    there ``cursor`` is the head's cursor the update followed.)"""

    after: int
    published: Mapping[str, bytes]
    cursor: str
    items_seen: int
    history: HistoryEntry | None = None
    history_kept: int = 0

    @property
    def version(self) -> int:
        return self.after + 1


@dataclass(frozen=True)
class LogEntry:
    """One appended chunk, as the applier reads it back."""

    log_id: str
    payload: bytes
    #: The Redis key of the entry's idempotency record (None: posted without a key).
    idem_record: str | None
    #: Items (rows or columns) the appender declared for this chunk (bounds coalescing without
    #: decoding).
    items: int = 0
    #: Stream position of its first item (row or feature column), from 0.
    first: int = 0
    #: True for a merge (its payload is another selector's summary, see ``Mergeable``).
    merge: bool = False


@dataclass(frozen=True)
class CommitNotice:
    """A commit as every replica hears of it (the ``COMMIT`` script publishes it)."""

    name: str
    incarnation: str
    version: int
    cursor: str
    items_seen: int
    #: Whether the commit moved past rejected entries.
    rejected: bool

    @classmethod
    def parse(cls, message: bytes | str) -> CommitNotice | DeletionNotice:
        """A notice on the commits channel: a commit, or (three fields, the last ``deleted``)
        the deletion of a selector (``DELETE`` announces it there too, so that what a process
        knows of its heads is dropped by the same listener)."""
        text = message.decode() if isinstance(message, bytes) else message
        try:
            fields = text.split("\t")
            if len(fields) == 3 and fields[2] == DELETED_NOTICE:
                return DeletionNotice(fields[0], fields[1])
            name, incarnation, version, cursor, items_seen, rejected = fields
            return cls(name, incarnation, int(version), cursor, int(items_seen), rejected == "1")
        except ValueError as exc:
            raise CodecError(f"commit notice does not parse: {text[:200]!r}") from exc


#: The last field of a deletion's notice on the commits channel (``DELETE``).
DELETED_NOTICE = "deleted"


@dataclass(frozen=True)
class DeletionNotice:
    """A selector deleted (or expired), as every replica hears of it."""

    name: str
    incarnation: str


@dataclass(frozen=True)
class Lease:
    """The right to apply a selector's log, as long as ``token`` is the current fencing token."""

    name: str
    #: Fencing token, strictly increasing per selector.
    token: int
    #: Random id of this holder (value of the lease key).
    holder: str
    #: The incarnation of the selector the lease was taken on ("" for one created before
    #: incarnations were recorded).
    incarnation: str = ""
    #: The stream the selector reads its entries from when it is attached to one (None: its
    #: own log), and the incarnation of that stream.
    stream: str | None = None
    stream_incarnation: str = ""
    #: The last entry of that stream the selector may take, while a detach is under way
    #: (``DETACH_CUT``); None: every entry.
    stream_cut: str | None = None


@dataclass(frozen=True)
class Snapshot:
    """A selector as committed at one version, read consistently: its description, the head,
    every encoded state field, and the names items were given on arrival (index -> name, for
    the items the head counts). Segments are immutable, so they are read separately
    (``Checkpoints.get_segments``) by the ids the state refers to."""

    meta: SelectorMeta
    head: Head
    state: dict[str, bytes | memoryview]
    item_names: dict[int, str]


# -- reading Redis's replies ------------------------------------------------------------------


def as_text(value: bytes | str) -> str:
    """A reply's value (bytes, from the store's client) as text."""
    return value.decode("utf-8") if isinstance(value, bytes) else value


def as_opt_int(value: bytes | str | None) -> int | None:
    """A reply's integer, or None where Redis had no value."""
    return None if value is None else int(value)


def pairs_from_reply(flat: Sequence[Any]) -> dict[Any, Any]:
    """A Lua-returned ``[field, value, field, value, ...]`` as a dict."""
    return {flat[i]: flat[i + 1] for i in range(0, len(flat) - 1, 2)}
