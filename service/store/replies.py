"""Redis's replies read into records: heads, checkpoints, log entries, idempotency records."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from service.errors import CodecError
from service.store.keys import SelectorKeys
from service.store.records import AppendOutcome, Checkpoint, Head, LogEntry, as_opt_int, as_text

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
