"""Bus resets as a source meets them (``Consumer``): a partition checked against the bus
(``Bus.check``), a reset recorded and counted, and followed as the source's ``on_reset`` says:
``stop`` holds the partition (``halted``: state ``reset``) until an operator restarts the source,
``restart`` moves its position to the start of what the bus holds now. Each is one step of
``SourceStore.move``, fenced by the position the consumer read from.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from service.metrics import Metrics
from service.sources.bus import Bus, Extent
from service.store.sources import PartitionMove, Progress, SourceStore, Target

log = logging.getLogger("sift.sources")


def halted_reason(name: str, halted: dict[str, dict[str, Any]]) -> str:
    """What a source stopped at a bus reset says (its ``last_error``)."""
    parts = []
    for partition in sorted(halted, key=lambda p: (len(p), p)):
        event = halted[partition]
        where = f"partition {partition} at position {event.get('position')}"
        parts.append(f"{where}: {event.get('why')}")
    return (
        f"the bus was reset ({'; '.join(parts)}); the source stopped there, as its on_reset "
        f"says: restart it from the start or a position (POST /v1/sources/{name}/restart)"
    )


def counted_from(before: int | None, progress: Progress) -> int | None:
    """The entries before a partition's start less those the source consumed so far: what its
    lag counts from (the lag is the bus's count less this and the entries consumed)."""
    return None if before is None else before - progress.entries


@dataclass(frozen=True)
class Checker:
    """One source's checks of its bus."""

    name: str
    id: str
    target: Target
    on_reset: str
    bus: Bus
    sources: SourceStore
    metrics: Metrics

    async def check(self, partition: str, position: str, progress: Progress) -> Progress:
        """Check ``partition`` (read through ``position``) and meet a reset; the progress as it
        is then (its position moved, or the partition halted, if a reset was met)."""
        recorded = progress.epochs.get(partition)
        extent = await self.bus.check(partition, position, recorded)
        if extent.reset is not None:
            return await self._reset(partition, position, extent, progress)
        if extent.epoch is not None and recorded is None:
            # A position recorded without its incarnation: the partition as it is now.
            return await self.sources.move(
                self.name,
                self.id,
                self.target,
                PartitionMove(partition, position, epoch=extent.epoch),
            )
        return progress

    async def _reset(
        self, partition: str, position: str, extent: Extent, progress: Progress
    ) -> Progress:
        stop = self.on_reset != "restart"
        event: dict[str, Any] = {
            "partition": partition,
            "at": time.time(),
            "position": position,
            "first": extent.first,
            "last": extent.last,
            "why": extent.reset,
            "action": "stopped" if stop else "restarted",
        }
        if not stop:
            event["restarted_at"] = event["at"]
            event["restarted_from"] = extent.start.position
        if stop:
            move = PartitionMove(partition, position, reset=event, halt=True)
        else:
            start = extent.start
            before = counted_from(start.before, progress)
            move = PartitionMove(partition, position, start.position, before, extent.epoch, event)
        moved = await self.sources.move(self.name, self.id, self.target, move)
        self.metrics.source_resets.labels(self.name).inc()
        log.warning(
            "source '%s': partition %s of its bus was reset at position %s (%s); %s",
            self.name,
            partition,
            position,
            extent.reset,
            "stopped there, as its on_reset says"
            if stop
            else f"reading it again from {extent.start.position}, as its on_reset says",
        )
        return moved
