"""The monitor: after every commit of this process, the selector's automatic baseline and its
alerts, judged off the commit's path.

The applier calls ``Monitor.committed`` right after a commit (``ApplierCore.observers``): it
only hands the version on (never awaits, never raises), so a commit is never slower or failed
by what follows. A background task per selector then, for the newest version handed on (a busy
selector's intermediate versions are skipped while one is being judged):

1. reads the selector's baseline and alerts (cached ``WATCH_SECONDS``: another replica's new
   alert counts from then on);
2. without a baseline, makes this version the baseline if its ranking is stable
   (``drift.is_stable``, at ``drift.baseline_h``; ``set_baseline.lua`` writes it once per
   incarnation);
3. for each alert, compares the version's top h (``drift.judged_h``: at most the selector's
   features less one) with the baseline's (``drift.compare``) and
   has ``claim_crossing.lua`` judge it: the one caller that claims a crossing (whichever
   replica, whatever the retries) puts its event in the selector's outbox in the same script,
   and wakes the outbox (``outbox``), which delivers it at least once.

Everything here is best effort: a failure is logged and the next commit tries again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from service.algorithms import get_method
from service.algorithms.base import EstimatesStability, offers
from service.algorithms.drift import baseline_h, compare, is_over, is_stable, judged_h
from service.algorithms.stability import ResampledRanking, Stability
from service.algorithms.subsamples import resample_count
from service.applier import Update, resolved_params
from service.cache import LRU
from service.config import Settings
from service.errors import SiftError
from service.metrics import Metrics
from service.monitoring.destinations import DestinationPolicy
from service.monitoring.formats import summary
from service.monitoring.outbox import Outbox
from service.monitoring.webhooks import Webhooks
from service.store.keys import is_partition
from service.store.monitoring_records import (
    Alert,
    Baseline,
    HistoryEntry,
    Judgement,
    RankedList,
)
from service.store.records import Head, SelectorMeta
from service.store.redis_store import SelectorStore
from service.wire.kinds import ChunkFormat, chunk_format

log = logging.getLogger("sift.monitor")

#: How long a process trusts what it read of a selector's baseline and alerts.
WATCH_SECONDS = 1.0
#: Selectors whose baseline, alerts and last version a process remembers.
WATCHED_MAX = 4096
#: What an event says it is.
EVENT_TYPE = "sift.ranking.drift"

#: The name of each ``(view, index)`` of a selector (of the kind given), as answers show it.
FeatureLabels = Callable[
    [SelectorMeta, ChunkFormat, Sequence[tuple[str | None, int]]],
    Awaitable[dict[tuple[str | None, int], str]],
]


@dataclass(frozen=True)
class Committed:
    """A committed version, as the monitor judges it."""

    meta: SelectorMeta
    version: int
    items_seen: int
    incarnation: str
    updated_at: float
    ranking: list[RankedList]
    #: What the version's resamples say of its top (single rankings), and the stability of
    #: its top ``drift.stable_h`` (None without an estimate).
    resampled: ResampledRanking | None
    stability: Stability | None

    def stability_at(self, h: int) -> float | None:
        """The stability index of the top ``h`` (a multi-view selector's is the one its version
        records, of its top ``drift.stable_h``)."""
        if self.resampled is not None and self.resampled.answers(h):
            assessed = self.resampled.assess(h)
            return None if assessed is None else assessed.stability.index
        if self.stability is not None and (self.meta.views or self.stability.h == h):
            return self.stability.index
        return None


class Monitor:
    """Judges this process's commits for baselines and alerts (module docstring)."""

    def __init__(
        self,
        store: SelectorStore,
        settings: Settings,
        metrics: Metrics,
        feature_labels: FeatureLabels,
    ) -> None:
        self.store = store
        #: The names events give the features that entered or left a ranking: the ones answers
        #: give (``StateReader.feature_labels``).
        self.feature_labels = feature_labels
        self.settings = settings
        self.metrics = metrics
        #: Where alerts may send (``SIFT_ALERT_HOSTS``, ``SIFT_ALERT_PRIVATE``): checked when
        #: an alert is created and at every attempt.
        self.destinations = DestinationPolicy.of(settings.alert_hosts, settings.alert_private)
        webhooks = Webhooks(self.destinations, settings.alert_timeout_seconds)
        self.outbox = Outbox(store, webhooks, settings, metrics)
        self._watched: LRU[str, tuple[float, Baseline | None, list[Alert]]] = LRU(WATCHED_MAX)
        self._previous: LRU[str, Committed] = LRU(WATCHED_MAX)
        self._judging: dict[str, asyncio.Task[None]] = {}
        self._next: dict[str, Committed] = {}
        self._closing = False

    def committed(self, meta: SelectorMeta, head: Head, update: Update) -> None:
        """A version this process committed (the applier's observer): judged in the
        background. Returns at once."""
        if self._closing or update.ranking is None or is_partition(meta.name):
            return
        version = Committed(
            meta,
            head.version,
            head.items_seen,
            head.incarnation,
            head.updated_at,
            update.ranking,
            update.resampled,
            update.stability,
        )
        if meta.name in self._judging:
            self._next[meta.name] = version  # the newest wins; the task takes it next
            return
        task = asyncio.create_task(self._judge_from(version), name=f"monitor:{meta.name}")
        self._judging[meta.name] = task

    def changed(self, name: str) -> None:
        """The baseline or the alerts of ``name`` changed here: read them afresh."""
        self._watched.pop(name)

    async def _judge_from(self, version: Committed) -> None:
        name = version.meta.name
        try:
            current: Committed | None = version
            while current is not None:
                try:
                    await self._judge(current)
                except SiftError as exc:
                    log.info("selector %s: version %d not judged: %s", name, current.version, exc)
                except Exception:
                    log.exception("selector %s: judging version %d failed", name, current.version)
                current = self._next.pop(name, None)
        finally:
            self._judging.pop(name, None)

    async def _judge(self, version: Committed) -> None:
        name = version.meta.name
        previous = self._previous.get(name)
        self._previous.put(name, version)
        if previous is not None and (
            previous.incarnation != version.incarnation or previous.version >= version.version
        ):
            previous = None
        baseline, alerts = await self._watch(name)
        if baseline is not None and baseline.incarnation != version.incarnation:
            baseline = None
        if baseline is None:
            baseline = await self._maybe_baseline(version, previous, [a.h for a in alerts])
        if baseline is None:
            return
        for alert in alerts:
            await self._judge_alert(version, baseline, alert)

    async def _watch(self, name: str) -> tuple[Baseline | None, list[Alert]]:
        cached = self._watched.get(name)
        now = time.monotonic()
        if cached is not None and now - cached[0] < WATCH_SECONDS:
            return cached[1], cached[2]
        baseline, alerts = await self.store.monitoring.watched(name)
        self._watched.put(name, (now, baseline, alerts))
        return baseline, alerts

    async def _maybe_baseline(
        self, version: Committed, previous: Committed | None, alert_hs: list[int]
    ) -> Baseline | None:
        """This version as the automatic baseline, if its ranking is stable (``is_stable``, at
        ``baseline_h``) and the selector has none yet."""
        h = baseline_h(alert_hs, version.meta.ranked_features)
        index = version.stability_at(h)
        if index is None and estimates_stability(version.meta):
            return None  # not yet: a resample has seen no row, say
        earlier = None if previous is None else previous.ranking
        if not is_stable(index, earlier, version.ranking, self.settings.baseline_stability, h):
            return None
        entry = HistoryEntry(
            version.version,
            version.items_seen,
            version.updated_at,
            version.ranking,
            None if version.stability is None else version.stability.as_dict(),
        )
        baseline = Baseline(entry, "auto", time.time(), version.incarnation)
        name = version.meta.name
        if not await self.store.monitoring.set_baseline(name, baseline, pin=False):
            self.changed(name)  # another replica set one, or the selector is gone
            return None
        log.info("selector %s: version %d is the baseline (stable)", name, version.version)
        self.changed(name)
        return baseline

    async def _judge_alert(self, version: Committed, baseline: Baseline, alert: Alert) -> None:
        meta = version.meta
        # An alert made deeper than the selector ranks is judged where its top is defined.
        h = judged_h(alert.h, meta.ranked_features)
        comparison = compare(baseline.entry.rankings, version.ranking, h)
        stability = version.stability_at(h)
        over = is_over(comparison, stability, alert.threshold, alert.min_stability)
        prefix = ""
        resolves = alert.kind == "alertmanager"  # told when the ranking settles back
        if over or resolves:
            kind = chunk_format(get_method(meta.method).chunk_kind)
            labels = await self.feature_labels(meta, kind, [*comparison.entered, *comparison.left])

            def shown(features: list[tuple[str | None, int]]) -> list[dict[str, Any]]:
                return [
                    {"index": i, "name": labels[(view, i)], **({"view": view} if view else {})}
                    for view, i in features
                ]

            event = {
                "type": EVENT_TYPE,
                "alert": alert.id,
                "label": alert.label,
                "selector": meta.name,
                "method": meta.method,
                "h": h,
                "threshold": alert.threshold,
                "min_stability": alert.min_stability,
                "version": version.version,
                kind.seen_field: version.items_seen,
                "baseline_version": baseline.entry.version,
                "drift": comparison.drift,
                "rbo": comparison.rbo,
                "jaccard": comparison.jaccard,
                "stability": stability,
                "entered": shown(comparison.entered),
                "left": shown(comparison.left),
                "at": time.time(),
            }
            # Not over: the event, if any, resolves (claim_crossing.lua marks it so).
            event["summary"] = summary({**event, "resolved": not over})
            prefix = orjson.dumps(event).decode()[:-1]
        judgement = Judgement(
            alert.id, version.incarnation, version.version, over, prefix or "{", resolves
        )
        claimed = await self.store.monitoring.claim_crossing(
            meta.name, judgement, {"status": "pending", "attempts": 0, "updated_at": time.time()}
        )
        if claimed is None:
            return
        self.metrics.alert_events.inc()
        log.info(
            "selector %s: alert %s crossed at version %d (drift %.3f since version %d)",
            meta.name,
            alert.id,
            version.version,
            comparison.drift,
            baseline.entry.version,
        )
        await self.outbox.queued(meta.name)

    async def close(self, timeout: float) -> None:
        """Stop judging and delivering (events in the outbox stay there: the next start, or
        another replica, delivers them)."""
        self._closing = True
        judging = list(self._judging.values())
        for task in judging:
            task.cancel()
        if judging:
            await asyncio.wait(judging, timeout=timeout)
        await self.outbox.close(timeout)


def estimates_stability(meta: SelectorMeta) -> bool:
    """Whether the selector's versions come with a stability estimate (once every resample
    has rows): a method that keeps resamples, created with some."""
    method = get_method(meta.method)
    return offers(method, EstimatesStability) and resample_count(resolved_params(meta)) > 0
