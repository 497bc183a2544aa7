"""The history part of the store: each selector's ranking history, one entry (the top
features) per committed version, newest first, bounded in length.

A commit may add its entry in the same script (``Commits.commit``); ``record_history`` adds one
on its own.
"""

from __future__ import annotations

from service.store.core import Room, not_found
from service.store.monitoring_records import HistoryEntry
from service.store.redis_errors import map_redis_errors


class History(Room):
    """The ranking history: record an entry, read the newest."""

    @map_redis_errors
    async def record(self, name: str, entry: HistoryEntry, keep: int) -> bool:
        """Add ``entry`` as the newest of the selector's history, keeping the ``keep`` newest.

        False (nothing written) if the selector is gone or was created anew at an earlier
        version since the entry's commit.
        """
        k = self.core.keys(name)
        reply = await self.core.run(
            "record_history", [k.head, k.history], [entry.to_json(), entry.version, int(keep)]
        )
        return bool(reply)

    @map_redis_errors
    async def read(self, name: str, limit: int) -> list[HistoryEntry]:
        """The newest ``limit`` history entries, newest version first."""
        k = self.core.keys(name)
        # One round trip; a delete racing it may leave an empty list for a head still seen.
        pipe = self.core.redis.pipeline(transaction=False)
        pipe.exists(k.head)
        pipe.lrange(k.history, 0, max(limit, 1) - 1)
        exists, raw = await pipe.execute()
        if not exists:
            raise not_found(name)
        entries = [HistoryEntry.from_json(item) for item in raw]
        # Appliers of two replicas may push in the other order around a takeover.
        return sorted(entries, key=lambda entry: entry.version, reverse=True)
