"""The sources as the service offers them: created, listed, described, deleted; and run, each by
the one process that holds its lease.

Every second each process reads the sources' definitions, renews the leases of those it
consumes (a consumer whose lease is lost, or whose source was deleted or replaced, is
cancelled) and tries to take the lease of each source nobody holds. A process that dies stops
renewing: its sources are taken over once their leases expire (``LEASE_MS``). Two processes
never both commit a batch: the lease keeps them apart, and the position compared in the commit
script (``append.lua``) catches the moment one of them does not know yet that it lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

from service.applier import Applier
from service.config import Settings
from service.errors import Forbidden, InvalidParams, NotFound, SiftError
from service.metrics import Metrics
from service.sources.adapters import bus_for, shared
from service.sources.consumer import Consumer, Host, describe_target
from service.sources.endpoints import endpoint
from service.sources.reach import Reach
from service.sources.resets import halted_reason
from service.sources.results import RejectedEntry, ResetEvent, SourceList, SourceOut
from service.sources.spec import (
    DEFAULT_BATCH_BYTES,
    AnySource,
    KafkaSource,
    redacted,
    restart_start,
)
from service.store.redis_store import SelectorStore
from service.store.sources import SourceStore, Target

log = logging.getLogger("sift.sources")

#: A consumer's lease: taken over this long after its process stopped renewing it.
LEASE_MS = 5000
#: How often a process renews its leases and looks for sources nobody consumes.
ASSIGN_EVERY_SECONDS = 1.0
#: A failed source (its target gone or unfit) is tried again after this long.
FAILED_RETRY_SECONDS = 30.0
#: Rejected entries shown per source (the newest).
REJECTS_SHOWN = 20


class Sources:
    def __init__(
        self, store: SelectorStore, applier: Applier, settings: Settings, metrics: Metrics
    ) -> None:
        self.store = store
        self.records = SourceStore(store)
        self.applier = applier
        self.settings = settings
        self.metrics = metrics
        #: Where sources may connect (SIFT_SOURCE_PRIVATE), never to Sift's own Redis.
        self.reach = Reach.of(settings.source_private, store.redis)
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self._host = Host(
            store, self.records, applier, metrics, self.holder, settings.source_max_pending
        )
        #: Sources this process consumes: name -> (source id, its consumer, its task, when
        #: the task ended if it did).
        self._running: dict[str, tuple[str, Consumer, asyncio.Task[None]]] = {}
        self._ended: dict[str, float] = {}
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        #: Set by ``close``: no consumer begins after it (a cancellation that ``wait_for``
        #: swallows while the loop wakes must not start one that nobody stops).
        self._closed = False

    # -- the API -----------------------------------------------------------------------------

    async def create(
        self,
        spec: AnySource,
        visible: Callable[[str], bool],
        prefix: str,
        admit: Callable[[], Awaitable[None]],
    ) -> SourceOut:
        """Register a source (``admit`` raises QuotaExceeded for a tenant at its quota; it
        runs once the body is checked, just before the write)."""
        for what, name in (("sources", spec.name), (f"{spec.into.kind}s", spec.into.name)):
            if not visible(name):
                raise Forbidden(
                    f"this API key may only name {what} that start with '{prefix}'; got '{name}'"
                )
        target = Target(spec.into.kind, spec.into.name)
        await describe_target(self.store, target, spec.definition())
        # What can be judged now of where it connects (each connection is judged again):
        # the URL as its library reads it (BadUrl if none could), then the addresses.
        await self.reach.check(
            endpoint(spec.url), "bootstrap" if isinstance(spec, KafkaSource) else "url"
        )
        definition = spec.definition()
        await admit()
        await self.records.create(spec.name, definition, target)
        log.info(
            "source '%s' created: %s %s into %s '%s'",
            spec.name,
            spec.kind,
            redacted(spec.url),
            target.kind,
            target.name,
        )
        self._wake.set()
        return await self.describe(spec.name, visible)

    async def page(self, visible: Callable[[str], bool]) -> SourceList:
        definitions = await self.records.all()
        out = []
        for name in sorted(definitions):
            if visible(name):
                out.append(await self._out(name, definitions[name]))
        return SourceList(sources=out)

    async def describe(self, name: str, visible: Callable[[str], bool]) -> SourceOut:
        if not visible(name):
            raise NotFound(f"source '{name}' does not exist")
        return await self._out(name, await self.records.get(name))

    async def delete(self, name: str, visible: Callable[[str], bool]) -> None:
        if not visible(name):
            raise NotFound(f"source '{name}' does not exist")
        definition = await self.records.get(name)
        await self.records.delete(name, Target.of(definition["into"]), str(definition["id"]))
        await self._stop(name)
        await self.records.forget_status(name, str(definition["id"]))
        log.info("source '%s' deleted", name)

    async def restart(self, name: str, start: str, visible: Callable[[str], bool]) -> SourceOut:
        """Restart a source stopped at a bus reset: each partition stopped reads again from
        ``start`` (Conflict if none is stopped)."""
        if not visible(name):
            raise NotFound(f"source '{name}' does not exist")
        definition = await self.records.get(name)
        wrong = restart_start(str(definition["kind"]), start)
        if wrong is not None:
            raise InvalidParams(wrong)
        target = Target.of(definition["into"])
        restarted = await self.records.restart(name, str(definition["id"]), target, start)
        log.info(
            "source '%s' restarted after a bus reset: partitions %s from %s", name, restarted, start
        )
        self._wake.set()
        return await self.describe(name, visible)

    async def _out(self, name: str, definition: dict[str, Any]) -> SourceOut:
        target = Target.of(definition["into"])
        source_id = str(definition["id"])
        # The status first: a consumer writes it after the progress it speaks of, so a reset
        # it reports is in the progress read next.
        status = await self.records.read_status(name, source_id)
        progress = await self.records.progress(name, target)
        rejects = await self.records.rejects(name, source_id, target, REJECTS_SHOWN)
        lags = dict((status or {}).get("lag") or {})
        known = [v for v in lags.values() if v is not None]
        state = "starting" if status is None else str(status["state"])
        last_error = None if status is None else status.get("last_error")
        if progress is not None and progress.id == source_id:
            if progress.halted:
                state, last_error = "reset", halted_reason(name, progress.halted)
            elif state == "reset":  # restarted since: its consumer reads again at its next step
                state, last_error = "running", None
        if progress is None or progress.id != source_id:
            state, last_error = "failed", f"its {target.kind} '{target.name}' was deleted"
        if state == "retrying":  # the bus does not answer: how far behind it is, unknown
            lags, known = dict.fromkeys(lags), []
        return SourceOut(
            name=name,
            kind=definition["kind"],
            url=redacted(str(definition["url"])),
            key=definition.get("key"),
            stream=definition.get("stream"),
            subject=definition.get("subject"),
            topic=definition.get("topic"),
            group=definition.get("group"),
            into=target.to_json(),
            batch_rows=int(definition["batch_rows"]),
            batch_bytes=int(definition.get("batch_bytes") or DEFAULT_BATCH_BYTES),
            batch_ms=int(definition["batch_ms"]),
            start=str(definition["start"]),
            label_field=definition.get("label_field"),
            target_field=definition.get("target_field"),
            format=definition.get("format") or "json",
            value_field=definition.get("value_field"),
            on_reset=definition.get("on_reset") or "stop",
            created_at=float(definition["created_at"]),
            state=state,
            last_error=last_error,
            positions={} if progress is None else progress.positions,
            lag=sum(known) if known and len(known) == len(lags) else None,
            partition_lag=lags,
            entries=0 if progress is None else progress.entries,
            rows=0 if progress is None else progress.rows,
            rejected=0 if progress is None else progress.rejected,
            rejected_entries=[
                RejectedEntry(partition=r.partition, position=r.position, reason=r.reason, at=r.at)
                for r in rejects
            ],
            resets=[] if progress is None else [_reset_event(r) for r in progress.resets],
            reset_count=0 if progress is None else progress.reset_count,
            rows_per_second=float((status or {}).get("rows_per_second") or 0.0),
            updated_at=None if progress is None else progress.updated_at,
        )

    # -- running them ------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._assign_forever(), name="sources")

    async def close(self, timeout_s: float) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait([self._task], timeout=timeout_s)
        for name in list(self._running):
            with contextlib.suppress(SiftError, TimeoutError):
                await asyncio.wait_for(self._stop(name), timeout_s)

    async def _assign_forever(self) -> None:
        while not self._closed:
            try:
                await self._assign()
            except SiftError as exc:
                log.warning("sources: could not look at the sources (%s)", exc.detail)
            except Exception:
                log.exception("sources: assigning failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), ASSIGN_EVERY_SECONDS)
            self._wake.clear()

    async def _assign(self) -> None:
        definitions = await self.records.all()
        for name, (source_id, _consumer, task) in list(self._running.items()):
            definition = definitions.get(name)
            if definition is None or str(definition["id"]) != source_id:
                await self._stop(name)
            elif not shared(definition) and not await self.records.renew_lease(
                name, self.holder, LEASE_MS
            ):
                log.warning("source '%s': lease lost, another process consumes it", name)
                await self._stop(name, release=False)
            elif task.done():
                ended = self._ended.setdefault(name, time.monotonic())
                if time.monotonic() - ended >= FAILED_RETRY_SECONDS:
                    self._ended.pop(name, None)
                    self._begin(name, definition)
        for name, definition in definitions.items():
            if name in self._running:
                continue
            # A shared source (Kafka) is consumed by every process, each reading the
            # partitions whose leases it holds (``Consumer._claim``).
            if shared(definition) or await self.records.take_lease(name, self.holder, LEASE_MS):
                self._begin(name, definition)

    def _begin(self, name: str, definition: dict[str, Any]) -> None:
        if self._closed:
            return
        consumer = Consumer(name, definition, bus_for(definition, self.reach), self._host)
        task = asyncio.create_task(consumer.run(), name=f"source:{name}")
        self._running[name] = (str(definition["id"]), consumer, task)
        log.info("source '%s': consuming", name)

    async def _stop(self, name: str, release: bool = True) -> None:
        entry = self._running.pop(name, None)
        self._ended.pop(name, None)
        if entry is None:
            return
        _source_id, _consumer, task = entry
        task.cancel()
        await asyncio.wait([task], timeout=5.0)
        if release:
            with contextlib.suppress(SiftError):
                await self.records.release_lease(name, self.holder)


def _reset_event(document: dict[str, Any]) -> ResetEvent:
    def text(key: str) -> str | None:
        value = document.get(key)
        return None if value is None else str(value)

    at = document.get("restarted_at")
    return ResetEvent(
        partition=str(document.get("partition")),
        at=float(document.get("at") or 0.0),
        position=str(document.get("position")),
        first=text("first"),
        last=text("last"),
        why=str(document.get("why") or ""),
        action="restarted" if document.get("action") == "restarted" else "stopped",
        restarted_at=None if at is None else float(at),
        restarted_from=text("restarted_from"),
    )
