"""Where a selector's log entries are (``LogSource``): its own log, or its stream's, through
the cut of a detach under way; what the log part reads of a head to know it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from service.store.keys import SelectorKeys, compare_stream_ids, log_id_belongs
from service.store.records import LogEntry, as_text
from service.store.replies import log_entry_from_reply


@dataclass(frozen=True)
class LogSource:
    """Where a selector's entries are: its own log, or (attached) its stream's, of which only
    the entries of the stream incarnation it attached to are its."""

    keys: SelectorKeys
    #: The stream's incarnation (None: the selector's own log).
    stream_incarnation: str | None = None
    #: The last entry of the stream that is the selector's: the cut of a detach under way
    #: (``DETACH_CUT``); None: every entry after its cursor.
    through: str | None = None

    def holds(self, log_id: str) -> bool:
        """Whether entry ``log_id`` of this log is one of the selector's."""
        return self.stream_incarnation is None or log_id_belongs(self.stream_incarnation, log_id)

    def entry(self, log_id: Any, fields: Any) -> LogEntry:
        """A log entry as the selector applies it: a stream's entry without its idempotency
        record (the stream's, in another slot: the selector's commit never touches it)."""
        entry = log_entry_from_reply(self.keys, log_id, fields)
        if self.stream_incarnation is not None:
            return dataclasses.replace(entry, idem_record=None)
        return entry


#: What ``Log._head_and_source`` reads of a selector's head.
SOURCE_FIELDS = [
    "cursor",
    "last_id",
    "stream",
    "stream_incarnation",
    "entries",
    "applied",
    "stream_cut",
]


def through(last: Any, cut: Any) -> Any:
    """The newest entry of a stream that is a selector's: ``last`` (the stream's), or the cut
    of a detach under way if that comes first."""
    if cut is None or last is None:
        return last
    return cut if compare_stream_ids(as_text(cut), as_text(last)) < 0 else last
