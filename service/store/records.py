"""Plain records the store hands out: selector description, head, append outcome, log entry, lease;
and how each is read from Redis's replies (``head_from_reply``, ``log_entry_from_reply``, ...).

They hold no behaviour beyond (de)serialisation; the store owns how they are kept in Redis.
"""

from __future__ import annotations

import dataclasses
import json
import math
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast, get_args

import orjson

from service.algorithms.base import ChunkKind
from service.errors import CodecError
from service.store.keys import SelectorKeys


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
    #: the first entry it applies (``Kind.stream_feature``: where its features lie in a
    #: stream of feature columns).
    stream: str | None = None
    stream_incarnation: str = ""
    stream_base: int = 0

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
    shape and names (``service.wire.kinds.Shaped``)."""

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

    @classmethod
    def parse(cls, selector: bytes | str, value: bytes | str) -> Attachment:
        """An attachment from its hash field and value (``"<incarnation> <start> <released>
        <ms>"``, as the ``ATTACH`` and ``RELEASE`` scripts write it)."""
        text = as_text(value)
        try:
            incarnation, start, released, at = text.split(" ")
            return cls(as_text(selector), incarnation, start, released, int(at))
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

    #: Redis key of the checkpoint hash (its fields possibly cut in pieces, ``codec.cut_fields``).
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
class DirectEntry:
    """A chunk appended and committed in one script by the applier that computed it
    (``append_and_commit``): what ``append`` takes of it (a direct entry names no items)."""

    payload: bytes
    items: int
    digest: str
    idempotency_key: str | None
    #: The incarnation the chunk was checked against ("" for any).
    incarnation: str = ""


@dataclass(frozen=True)
class Taken:
    """What an applier's ``take`` took: its attempt number on the first entry, and the entries."""

    attempt: int
    entries: list[LogEntry]


@dataclass
class TakeRequest:
    """An applier's ``take`` of the entries after ``after`` (see ``SelectorStore.take``), when
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


@dataclass(frozen=True)
class Snapshot:
    """A selector as committed at one version, read consistently: its description, the head,
    every encoded state field, and the names items were given on arrival (index -> name, for
    the items the head counts). Segments are immutable, so they are read separately
    (``SelectorStore.get_segments``) by the ids the state refers to."""

    meta: SelectorMeta
    head: Head
    state: dict[str, bytes]
    item_names: dict[int, str]


@dataclass(frozen=True)
class RankedList:
    """The top features of one ranking of a version: ``view`` (multi-view selectors) or None,
    the features' indices (within the view) in rank order and their scores."""

    view: str | None
    indices: list[int]
    scores: list[float]


@dataclass(frozen=True)
class HistoryEntry:
    """One committed version's top features, as the ranking history keeps it."""

    version: int
    items_seen: int
    updated_at: float
    rankings: list[RankedList]
    #: The stability of the version's top 10 (``index``, ``interval``, ``resamples``, ``h``:
    #: ``service.algorithms.stability.Stability.as_dict``), for methods that estimate it.
    stability: dict[str, Any] | None = None

    def to_json(self, with_time: bool = True) -> str:
        """The stored JSON; without ``updated_at`` when the commit script adds its own clock."""
        entry: dict[str, object] = {"version": self.version, "items_seen": self.items_seen}
        if with_time:
            entry["updated_at"] = self.updated_at
        if self.stability is not None:
            entry["stability"] = self.stability
        entry["top"] = [[r.view, r.indices, r.scores] for r in self.rankings]
        if not all(math.isfinite(x) for r in self.rankings for x in r.scores):
            raise ValueError("a history entry holds a score that is not finite")
        return orjson.dumps(entry).decode()  # compact, as the commit script extends it

    @classmethod
    def from_json(cls, raw: str | bytes) -> HistoryEntry:
        try:
            data = json.loads(raw)
            return cls(
                version=int(data["version"]),
                items_seen=int(data["items_seen"]),
                updated_at=float(data["updated_at"]),
                rankings=[
                    RankedList(
                        None if view is None else str(view),
                        [int(i) for i in indices],
                        [float(x) for x in scores],
                    )
                    for view, indices, scores in data["top"]
                ],
                stability=_stability_record(data.get("stability")),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise CodecError(f"stored history entry does not parse: {exc}") from exc


@dataclass(frozen=True)
class Baseline:
    """The version a selector's drift is measured against: its history entry, chosen
    automatically (the first version whose ranking is stable) or pinned, and when."""

    entry: HistoryEntry
    #: ``auto`` or ``pinned``.
    how: str
    pinned_at: float
    #: The incarnation whose version it is (``SelectorMeta.incarnation``).
    incarnation: str

    def to_json(self) -> str:
        return orjson.dumps(
            {
                "how": self.how,
                "pinned_at": self.pinned_at,
                "incarnation": self.incarnation,
                "entry": orjson.loads(self.entry.to_json()),
            }
        ).decode()

    @classmethod
    def from_json(cls, raw: str | bytes) -> Baseline:
        try:
            data = json.loads(raw)
            return cls(
                entry=HistoryEntry.from_json(json.dumps(data["entry"])),
                how=str(data["how"]),
                pinned_at=float(data["pinned_at"]),
                incarnation=str(data["incarnation"]),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise CodecError(f"stored baseline does not parse: {exc}") from exc


@dataclass(frozen=True)
class Alert:
    """A webhook raised when a version's drift since the baseline crosses ``threshold``."""

    id: str
    url: str
    #: The top h compared.
    h: int
    #: Drift (1 - rank-biased overlap with the baseline's top h) at or over which it fires.
    threshold: float
    #: Fires only while the version's top h is at least this stable (None: whatever it is).
    min_stability: float | None
    label: str
    created_at: float
    #: The secret every delivery is signed under (``service.monitoring.signing``; shown once,
    #: at creation or rotation).
    secret: str
    #: The secret before the last rotation, which signs beside ``secret`` until
    #: ``previous_until`` (Unix seconds), so that receivers switch at their own pace.
    previous_secret: str | None = None
    previous_until: float | None = None
    #: ``webhook`` (the event as JSON) or ``alertmanager`` (Alertmanager's API v2:
    #: ``service.monitoring.formats``).
    kind: str = "webhook"

    def signing_secrets(self, now: float) -> list[str]:
        """The secrets in force at ``now``: the current one, and the previous one while its
        overlap lasts."""
        if self.previous_secret and self.previous_until is not None and now < self.previous_until:
            return [self.secret, self.previous_secret]
        return [self.secret]

    def public(self) -> dict[str, Any]:
        """What listings show: everything but the secret."""
        return {
            "id": self.id,
            "url": self.url,
            "h": self.h,
            "threshold": self.threshold,
            "min_stability": self.min_stability,
            "label": self.label,
            "created_at": self.created_at,
            "kind": self.kind,
        }

    def to_json(self) -> str:
        secrets = {"secret": self.secret}
        if self.previous_secret is not None:
            secrets |= {"previous_secret": self.previous_secret}
        return orjson.dumps(
            {**self.public(), **secrets, "previous_until": self.previous_until}
        ).decode()

    @classmethod
    def from_json(cls, raw: str | bytes) -> Alert:
        try:
            data = json.loads(raw)
            floor = data.get("min_stability")
            previous, until = data.get("previous_secret"), data.get("previous_until")
            return cls(
                id=str(data["id"]),
                url=str(data["url"]),
                h=int(data["h"]),
                threshold=float(data["threshold"]),
                min_stability=None if floor is None else float(floor),
                label=str(data.get("label", "")),
                created_at=float(data["created_at"]),
                secret=str(data["secret"]),
                previous_secret=None if previous is None else str(previous),
                previous_until=None if until is None else float(until),
                kind=str(data.get("kind", "webhook")),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise CodecError(f"stored alert does not parse: {exc}") from exc


@dataclass(frozen=True)
class ClaimedDelivery:
    """An event this process claimed from its selector's outbox (``claim_deliveries.lua``)."""

    event_id: str
    #: The event as recorded (what a webhook sends, byte for byte), and parsed.
    raw: bytes
    event: dict[str, Any]
    #: Attempts so far, this one included.
    attempts: int

    @property
    def alert_id(self) -> str:
        return str(self.event.get("alert", ""))

    def __str__(self) -> str:
        return self.event_id


@dataclass(frozen=True)
class AlertState:
    """An alert's judgement of the last version it saw (``claim_crossing.lua``)."""

    version: int
    firing: bool
    crossings: int

    @classmethod
    def from_json(cls, raw: str | bytes) -> AlertState:
        try:
            data = json.loads(raw)
            return cls(int(data["version"]), bool(data["firing"]), int(data["crossings"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise CodecError(f"stored alert state does not parse: {exc}") from exc


def _stability_record(raw: object) -> dict[str, Any] | None:
    """A history entry's stability as stored (checked for its shape), or None."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise TypeError("a history entry's stability is an object")
    low, high = raw["interval"]
    return {
        "index": float(raw["index"]),
        "interval": [float(low), float(high)],
        "resamples": int(raw["resamples"]),
        "h": int(raw["h"]),
    }


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


#: An idempotency record's fields, as ``outcome_from_idem`` reads them.
IDEM_FIELDS = ["digest", "log_id", "applied_version", "rows_seen", "first", "rejected"]


def outcome_from_idem(values: Sequence[Any]) -> AppendOutcome | None:
    """The outcome an idempotency record (``IDEM_FIELDS``) holds; None if there is none."""
    _digest, log_id, version, items_seen, first, rejected = values
    if log_id is None:
        return None
    return AppendOutcome(
        log_id=as_text(log_id),
        duplicate=True,
        applied_version=as_opt_int(version),
        items_seen=as_opt_int(items_seen),
        first=as_opt_int(first) or 0,
        rejected=None if rejected is None else as_text(rejected),
    )


def first_outcome_from_idem(replies: Sequence[Sequence[Any]]) -> AppendOutcome | None:
    """The first of several records (the places a key's record may be, read in that order)
    that exists."""
    for values in replies:
        record = outcome_from_idem(values)
        if record is not None:
            return record
    return None


#: The head's fields a ``Head`` is read from, in this order (the ``READ_FIELDS`` script too).
HEAD_FIELDS = (
    "version",
    "cursor",
    "rows_seen",
    "state_key",
    "updated_at",
    "checkpoint_key",
    "checkpoint_version",
    "checkpoint_cursor",
    "checkpoint_items",
    "checkpoint_layout",
    "incarnation",
)


def head_from_reply(values: Sequence[Any]) -> Head:
    """The ``Head`` of the head's ``HEAD_FIELDS`` values."""
    version, cursor, items_seen, state_key, updated_at = values[:5]
    if version is None or cursor is None or items_seen is None or state_key is None:
        raise CodecError(f"head record is incomplete: {list(values)!r}")
    return Head(
        version=int(version),
        cursor=as_text(cursor),
        items_seen=int(items_seen),
        state_key=as_text(state_key),
        updated_at=float(updated_at) if updated_at is not None else 0.0,
        checkpoint=checkpoint_from_reply(values[5:10]),
        incarnation="" if values[10] is None else as_text(values[10]),
    )


def checkpoint_from_reply(values: Sequence[Any]) -> Checkpoint | None:
    """The checkpoint of a head from its ``checkpoint_*`` fields (None: the earlier layout)."""
    key, version, cursor, items_seen, layout = values
    if key is None:
        return None
    if version is None or cursor is None or items_seen is None:
        raise CodecError(f"head record's checkpoint is incomplete: {list(values)!r}")
    return Checkpoint(
        as_text(key), int(version), as_text(cursor), int(items_seen), cut=layout is None
    )


def log_entry_from_reply(
    k: SelectorKeys, log_id: bytes | str, fields: Mapping[Any, Any]
) -> LogEntry:
    """The ``LogEntry`` of a stream entry of the log of the selector keyed by ``k``."""
    record_id, legacy_key = fields.get(b"idk"), fields.get(b"idem")
    record = None
    if record_id is not None:
        record = k.idem_record(as_text(record_id))
    elif legacy_key is not None:  # appended by an earlier release: the key itself
        record = k.idem_legacy(as_text(legacy_key))
    return LogEntry(
        log_id=as_text(log_id),
        payload=fields.get(b"payload", b""),
        idem_record=record,
        items=int(fields.get(b"rows", 0)),
        first=int(fields.get(b"first", 0)),
        merge=fields.get(b"merge") == b"1",
    )
