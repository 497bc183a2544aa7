"""Redis key layout of Sift, and helpers for Redis Stream IDs.

Every key of one selector carries the hash tag ``{name}`` so that all of them live in one slot
and the Lua scripts (``service/store/lua/``) stay valid on Redis Cluster::

    {prefix}:{name}:meta             JSON of the SelectorMeta (without feature names)
    {prefix}:{name}:names            JSON list of feature names (absent when there are none)
    {prefix}:{name}:head             hash: version, cursor, rows_seen, appended (items ever
                                     appended: numbers them in log order), state_key (what
                                     readers read of this version), updated_at, last_id (the
                                     newest appended entry), entries and applied (entries
                                     appended and committed past: their difference is pending),
                                     the checkpoint: checkpoint_key, checkpoint_version,
                                     checkpoint_cursor, checkpoint_items, and the incarnation
                                     (``SelectorMeta.incarnation``); for a selector attached
                                     to a stream, the stream and its incarnation (``stream``,
                                     ``stream_incarnation``): its cursor is in that stream's log
    {prefix}:{name}:fname            hash: feature name -> index (features named on arrival)
    {prefix}:{name}:findex           hash: index -> feature name (same features)
    {prefix}:{name}:log              Redis Stream of appended chunks (the ingest log): the
                                     truth; kept from the checkpoint's cursor on
    {prefix}:{name}:commits          list of the versions committed after the checkpoint (JSON
                                     [version, cursor, rejected]): how to replay the log
    {prefix}:{name}:idem:<id>        hash: digest, log_id, first[, applied_version, rows_seen];
                                     TTL. <id> is ``idem_id(key)``, a digest of the
                                     Idempotency-Key: a record costs the same for any key length
                                     (records of earlier releases are named by the key itself,
                                     ``idem_legacy``, and are still honoured until they expire)
    {prefix}:{name}:idems            sorted set of the ids above (score = expiry, ms; an earlier
                                     release's member is a whole key name); the oldest are
                                     dropped beyond the per-selector bound
    {prefix}:{name}:rejected         hash: log id -> JSON {reason, at} of entries that could not
                                     be applied and were moved aside (dead letters)
    {prefix}:{name}:rejected_order   sorted set of those log ids (score = time, ms), to bound them
    {prefix}:{name}:attempts         hash: log id -> times an applier started on it as the first
                                     entry of a batch and did not come back to say it was no
                                     fault of the entry; ``by:<holder>`` -> the log id that lease
                                     holder's last attempt was on (cleared by every commit)
    {prefix}:{name}:lease            the applier lease (value = holder id, PX ttl)
    {prefix}:{name}:fence            fencing counter (INCR on every lease acquisition)
    {prefix}:{name}:state:<v>:<t>:<n>  hash of the published fields of version v (what readers
                                     need: scores, decisions, projections, the scalars), written
                                     by the applier with fencing token t (0: create), nonce n
    {prefix}:{name}:blobs            set of state keys written (orphan cleanup)
    {prefix}:{name}:ckpt:<v>:<t>:<n> hash of the whole state of version v (a checkpoint), each
                                     array cut into pieces well under 1 MiB
    {prefix}:{name}:ckpts            set of checkpoint keys written (orphan cleanup)
    {prefix}:{name}:segment:<id>     an immutable array a method emitted (e.g. a full block of
                                     columns): written once, never rewritten, read on demand
    {prefix}:{name}:segments         set of the segment keys above (removed with the selector)
    {prefix}:{name}:staging:<nonce>[:...]  state (and, for an import, feature names and segments)
                                     of a ``create`` in flight (short TTL, then renamed)
    {prefix}:{name}:history          list of JSON ranking-history entries, newest first (capped)
    {prefix}:{name}:baseline         JSON: the version drift is measured against (its history
                                     entry, how it was chosen, when, the incarnation)
    {prefix}:{name}:alerts           hash: alert id -> JSON alert (webhook URL, h, threshold,
                                     minimum stability, its HMAC secret, created_at)
    {prefix}:{name}:alert_states     hash: alert id -> JSON {version, firing, crossings}: the
                                     last version judged, whether it was over the threshold
    {prefix}:{name}:alert_events     list of JSON events (one per crossing), newest first, capped
    {prefix}:{name}:alert_deliveries hash: event id -> JSON delivery status (attempts, outcome)
    {prefix}:{name}:outbox           sorted set: event id -> when it is due for an attempt (ms;
                                     while attempted, when the attempt's lease ends)
    {prefix}:{name}:outbox_events    hash: event id -> its JSON, and id#attempts -> attempts
    {prefix}:{name}:sources          hash: source name -> JSON of its id, its position per bus
                                     partition and its counts (a stream's log has them too)
    {prefix}:{name}:source_rejects   list of JSON entries those sources set aside, capped

``{prefix}:sources`` (``sources_registry_key``) holds the sources' definitions;
``{prefix}:source:{s}:lease`` and ``:status:{id}`` the consuming process's lease and last word
(under the source's id: a consumer of a source deleted and created again speaks only of its own).

``{prefix}:outboxes`` (``outboxes_key``) marks the selectors whose outbox may hold an event
due, scored by when to look (ms), in its own slot like the registry.

The registry ``{prefix}:selectors`` is a plain set in its own slot, updated by separate commands;
``{prefix}:expiring`` (``expiring_key``) likewise orders the selectors that expire when idle.

A stream's keys (``StreamKeys``) carry the stream's name as their hash tag under their own
base, ``{prefix}:stream:{name}``, so they never meet a selector's keys of the same name::

    {prefix}:stream:{name}:meta      JSON of the StreamMeta (without feature names)
    {prefix}:stream:{name}:names     JSON list of feature names
    {prefix}:stream:{name}:head      hash: incarnation, appended, entries, last_id, trimmed (the
                                     log holds the entries after it), closing (a forced delete)
    {prefix}:stream:{name}:log       Redis Stream of pushed chunks (as a selector's log)
    {prefix}:stream:{name}:idem:<id>, :idems, :fname, :findex   as a selector's
    {prefix}:stream:{name}:selectors hash: attached selector -> "<incarnation> <start cursor>
                                     <released cursor> <attached at, ms>"

``{prefix}:streams`` (``streams_registry_key``) is the registry of stream names.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from service import names
from service.errors import InvalidInput

DEFAULT_PREFIX = "sift"

#: Reserved field of every state hash: who wrote it (lease holder, or "create").
WRITER_FIELD = "__writer__"
#: The first cursor of every selector: nothing applied yet.
INITIAL_CURSOR = "0-0"

_STREAM_ID = re.compile(r"(0|[1-9][0-9]{0,19})-(0|[1-9][0-9]{0,19})")
_U64_MAX = 2**64 - 1


#: Names become part of Redis keys (``{name}`` is the hash tag): ``service.names``.
NAME_PATTERN = names.NAME_PATTERN


def validate_name(name: Any) -> str:
    """A selector's (or view's) name: 1-128 letters, digits, '.', '_' or '-', matched whole."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise InvalidInput(f"selector name must be {names.NAME_RULE}; got {name!r}")
    return name


#: What the store keys: a selector's name, or one of its partitions' (``records.partition_name``).
STORED_NAME_PATTERN = re.compile(names.NAME_TEXT + r"(:p(0|[1-9][0-9]{0,3}))?")


def is_partition(name: str) -> bool:
    """Whether ``name`` is a partition of a selector (hidden from listings)."""
    return ":p" in name


@dataclass(frozen=True)
class SelectorKeys:
    """All keys of one selector or partition (``name`` is validated on construction)."""

    prefix: str
    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not STORED_NAME_PATTERN.fullmatch(self.name):
            validate_name(self.name)  # says what a name may be

    @property
    def base(self) -> str:
        return f"{self.prefix}:{{{self.name}}}"

    @property
    def meta(self) -> str:
        return f"{self.base}:meta"

    @property
    def names(self) -> str:
        return f"{self.base}:names"

    @property
    def head(self) -> str:
        return f"{self.base}:head"

    @property
    def feature_index(self) -> str:
        """Names given to features as they arrive -> their index."""
        return f"{self.base}:fname"

    @property
    def feature_name(self) -> str:
        """Index -> name, for features named as they arrive."""
        return f"{self.base}:findex"

    @property
    def log(self) -> str:
        return f"{self.base}:log"

    @property
    def lease(self) -> str:
        return f"{self.base}:lease"

    @property
    def fence(self) -> str:
        return f"{self.base}:fence"

    @property
    def blobs(self) -> str:
        return f"{self.base}:blobs"

    @property
    def segments(self) -> str:
        return f"{self.base}:segments"

    @property
    def commits(self) -> str:
        return f"{self.base}:commits"

    @property
    def checkpoints(self) -> str:
        return f"{self.base}:ckpts"

    def checkpoint(self, version: int, token: int, nonce: str) -> str:
        return f"{self.base}:ckpt:{version}:{token}:{nonce}"

    def segment(self, segment_id: str) -> str:
        return f"{self.base}:segment:{segment_id}"

    @property
    def idems(self) -> str:
        return f"{self.base}:idems"

    @property
    def rejected(self) -> str:
        return f"{self.base}:rejected"

    @property
    def rejected_order(self) -> str:
        return f"{self.base}:rejected_order"

    @property
    def attempts(self) -> str:
        return f"{self.base}:attempts"

    @property
    def history(self) -> str:
        """The ranking history: one JSON entry per committed version, newest first."""
        return f"{self.base}:history"

    @property
    def baseline(self) -> str:
        """The version drift is measured against (JSON)."""
        return f"{self.base}:baseline"

    @property
    def alerts(self) -> str:
        """The selector's alerts: id -> JSON."""
        return f"{self.base}:alerts"

    @property
    def alert_states(self) -> str:
        """Each alert's judgement of the last version: id -> JSON."""
        return f"{self.base}:alert_states"

    @property
    def alert_events(self) -> str:
        """The events the alerts raised, newest first (capped)."""
        return f"{self.base}:alert_events"

    @property
    def alert_deliveries(self) -> str:
        """How each event's delivery went: event id -> JSON."""
        return f"{self.base}:alert_deliveries"

    @property
    def outbox(self) -> str:
        """The alert events to deliver: event id -> when due (ms)."""
        return f"{self.base}:outbox"

    @property
    def outbox_events(self) -> str:
        """The outbox's events: id -> JSON, id#attempts -> attempts so far."""
        return f"{self.base}:outbox_events"

    @property
    def sources(self) -> str:
        """The sources that feed this log: source name -> JSON of its id, its position in
        each partition of its bus, and its counts (committed with each append,
        ``append.lua``)."""
        return f"{self.base}:sources"

    @property
    def source_rejects(self) -> str:
        """Entries the sources feeding this log could not use: JSON each, newest first,
        capped."""
        return f"{self.base}:source_rejects"

    def idem(self, key: str) -> str:
        """The idempotency record of ``Idempotency-Key`` ``key``."""
        return self.idem_record(idem_id(key))

    def idem_record(self, record_id: str) -> str:
        """The idempotency record of id ``record_id`` (``idem_id`` of its key)."""
        return f"{self.base}:idem:{record_id}"

    def idem_legacy(self, key: str) -> str:
        """Where an earlier release kept the record of ``key`` (named by the key itself)."""
        return f"{self.base}:idem:{key}"

    def state(self, version: int, token: int, nonce: str) -> str:
        # The nonce matters: an applier retrying with a stale expected version (or one of an
        # earlier incarnation of the name) must never write into the blob the head points at.
        return f"{self.base}:state:{version}:{token}:{nonce}"

    def staging(self, nonce: str) -> str:
        return f"{self.base}:staging:{nonce}"

    def scan_pattern(self) -> str:
        """A SCAN MATCH pattern for every key of this selector (glob characters escaped)."""
        return glob_escape(self.base) + ":*"


@dataclass(frozen=True)
class StreamKeys(SelectorKeys):
    """All keys of one stream: a selector's layout for what a stream shares with a selector
    (meta, names, head, log, idempotency records, names on arrival), under the stream's own
    base, and its attachments."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not NAME_PATTERN.fullmatch(self.name):
            validate_stream_name(self.name)

    @property
    def base(self) -> str:
        return f"{self.prefix}:stream:{{{self.name}}}"

    @property
    def attachments(self) -> str:
        """The selectors attached to the stream (``records.Attachment``)."""
        return f"{self.base}:selectors"

    @property
    def detaching(self) -> str:
        """The selectors being detached from the stream: their attachments, each with the cut
        it is detached at (``records.Attachment``, ``STREAM_CUT``)."""
        return f"{self.base}:detaching"


def validate_stream_name(name: Any) -> str:
    """A stream's name: the same rule as a selector's."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise InvalidInput(
            "stream name must be 1-128 characters of letters, digits, '.', '_' or '-', "
            f"starting with a letter or digit; got {name!r}"
        )
    return name


def streams_registry_key(prefix: str) -> str:
    """The set of stream names: one key in its own slot, like the selectors' registry."""
    return f"{prefix}:streams"


def sources_registry_key(prefix: str) -> str:
    """The sources: name -> JSON of what each reads and where it appends."""
    return f"{prefix}:sources"


def source_lease_key(prefix: str, name: str) -> str:
    """The lease of the one process that consumes source ``name``."""
    return f"{prefix}:source:{{{name}}}:lease"


def source_partition_lease_key(prefix: str, name: str, partition: str) -> str:
    """The lease of the process that consumes one partition of source ``name`` (a source whose
    partitions the processes share: Kafka)."""
    return f"{prefix}:source:{{{name}}}:lease:{partition}"


def source_members_key(prefix: str, name: str) -> str:
    """The processes consuming a shared source: holder -> until when (ms), renewed each second;
    each takes its share of the partitions."""
    return f"{prefix}:source:{{{name}}}:members"


def source_statuses_key(prefix: str, name: str, source_id: str) -> str:
    """What each consumer of a shared source (of id ``source_id``) last said: holder -> JSON,
    as a status."""
    return f"{prefix}:source:{{{name}}}:statuses:{source_id}"


def source_status_key(prefix: str, name: str, source_id: str) -> str:
    """What the consumer of source ``name`` (the one of id ``source_id``: a consumer of a
    source deleted and created again speaks only of its own) last said of it (state, error,
    lag, rate)."""
    return f"{prefix}:source:{{{name}}}:status:{source_id}"


def commits_channel(prefix: str) -> str:
    """The pub/sub channel every commit is announced on (``records.CommitNotice``)."""
    return f"{prefix}:committed"


def expiring_key(prefix: str) -> str:
    """The sorted set of selectors created with ``expires_after``, scored by when each is next
    due to be looked at (Redis time): one key in its own slot, like the registry."""
    return f"{prefix}:expiring"


def idem_id(key: str) -> str:
    """What names the idempotency record of ``Idempotency-Key`` ``key``: 128 bits of its
    SHA-256 in hex, so that a record costs the same whatever the key's length (up to 256
    characters), and no two keys of one selector ever share a record in practice."""
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def pending_key(prefix: str) -> str:
    """The sorted set of selectors that may hold entries nobody applied yet, each scored by
    when its last chunk was appended (Redis time, ms): what the sweeper reads every second,
    instead of every selector's head. One key in its own slot, like the registry."""
    return f"{prefix}:pending"


def outboxes_key(prefix: str) -> str:
    """The sorted set of selectors whose alert outbox may hold an event due, each scored by
    when to look at it (ms): what every process's outbox reads, instead of every selector."""
    return f"{prefix}:outboxes"


def registry_key(prefix: str) -> str:
    return f"{prefix}:selectors"


def glob_escape(text: str) -> str:
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)


def parse_stream_id(stream_id: str) -> tuple[int, int]:
    """``"1718000000000-3"`` -> ``(1718000000000, 3)``; ValueError when malformed."""
    match = _STREAM_ID.fullmatch(stream_id) if isinstance(stream_id, str) else None
    if match is None:
        raise ValueError(f"expected a stream id like '1718000000000-0', got {stream_id!r}")
    ms, seq = int(match.group(1)), int(match.group(2))
    if ms > _U64_MAX or seq > _U64_MAX:
        raise ValueError(f"stream id {stream_id!r} is out of range")
    return ms, seq


def compare_stream_ids(a: str, b: str) -> int:
    """-1, 0 or 1 as stream id ``a`` is before, equal to or after ``b``."""
    pa, pb = parse_stream_id(a), parse_stream_id(b)
    return (pa > pb) - (pa < pb)


def next_stream_id(stream_id: str) -> str:
    """The smallest stream id strictly after ``stream_id`` (for XTRIM MINID)."""
    ms, seq = parse_stream_id(stream_id)
    if seq < _U64_MAX:
        return f"{ms}-{seq + 1}"
    if ms < _U64_MAX:
        return f"{ms + 1}-0"
    raise ValueError(f"no stream id follows {stream_id!r}")


#: A log id's sequence part is ``k * LOG_ID_TAG_SPAN + tag``: ``k`` numbers the entries appended
#: in one millisecond, ``tag`` is ``log_id_tag`` of the incarnation, the millisecond and ``k``.
LOG_ID_TAG_SPAN = 2**32


def log_id_tag(incarnation: str, ms: int, k: int) -> int:
    """The tag the ``APPEND`` script puts into a log id of ``incarnation`` (the same SHA-1 that
    Lua's ``redis.sha1hex`` computes): 32 bits that only that incarnation's appends produce."""
    digest = hashlib.sha1(f"{incarnation}:{ms}:{k}".encode()).hexdigest()
    return int(digest[:8], 16)


def log_id_belongs(incarnation: str, log_id: str) -> bool:
    """Whether ``log_id`` is one the log of ``incarnation`` could have handed out: its tag is
    that incarnation's. A log id of another selector, of an earlier incarnation of the same
    name, or made up (``0-0``, a real id with a digit changed) fails, but for a chance of 2^-32.
    ValueError for a malformed id."""
    ms, seq = parse_stream_id(log_id)
    k, tag = divmod(seq, LOG_ID_TAG_SPAN)
    return tag == log_id_tag(incarnation, ms, k)
