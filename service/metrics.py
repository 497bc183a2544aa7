"""Prometheus metrics of one service instance (its own registry: apps in one process stay apart).

Besides the write path's counters: HTTP requests by route template (never the raw path, so the
label sets stay bounded), method and status, with a latency histogram per route; and gauges of
the selectors (how many, pending log entries and state bytes of each), which come from Redis.
Prometheus collectors are synchronous, so those gauges show the last reading, which the
``/metrics`` route refreshes before rendering when it is older than
``SIFT_METRICS_REFRESH_SECONDS`` (one bounded, pipelined read; scrapes in between cost nothing).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from service.errors import Unavailable

if TYPE_CHECKING:
    from service.store.inventory import Usage

__all__ = ["CONTENT_TYPE_LATEST", "GAUGED_SELECTORS_MAX", "Metrics", "SelectorGauges"]

log = logging.getLogger("sift.metrics")

#: Selectors with their own label in the per-selector gauges (the first ones by name); the
#: count ``sift_selectors`` covers all of them.
GAUGED_SELECTORS_MAX = 1000
#: HTTP methods that get their own label value; anything else is counted as ``other``.
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
#: The route label of requests that matched no route (404s of unknown paths, scanners).
UNMATCHED_ROUTE = "unmatched"


class SelectorGauges(Collector):
    """The selector gauges, from the last reading of the registry's usage."""

    def __init__(self) -> None:
        self.usage: Usage | None = None
        self.read_at: float | None = None
        self._lock = asyncio.Lock()

    async def refresh(self, read: Callable[[], Awaitable[Usage]], max_age_s: float) -> None:
        """Read the usage again if the last reading is older than ``max_age_s``.

        One reading at a time: concurrent scrapes wait for it instead of reading too. While
        Redis is unavailable the last reading stays (its age says how old it is).
        """
        async with self._lock:
            if self.read_at is not None and time.monotonic() - self.read_at < max_age_s:
                return
            try:
                self.usage = await read()
            except Unavailable as exc:
                log.debug("selector gauges not refreshed: %s", exc.detail)
                return
            self.read_at = time.monotonic()

    def collect(self) -> Iterator[Metric]:
        usage = self.usage
        if usage is None or self.read_at is None:
            return
        yield GaugeMetricFamily(
            "sift_selectors", "Selectors in the registry.", value=usage.selectors
        )
        pending = GaugeMetricFamily(
            "sift_selector_pending_entries",
            f"Log entries not yet applied, per selector (the first {GAUGED_SELECTORS_MAX} "
            "by name).",
            labels=["selector"],
        )
        state = GaugeMetricFamily(
            "sift_selector_state_bytes",
            "Bytes Redis reports for the committed state, per selector.",
            labels=["selector"],
        )
        stability = GaugeMetricFamily(
            "sift_ranking_stability",
            "Stability index (Nogueira et al. 2018) of the top 10 of the newest version, per "
            "selector that estimates it: 1 when resamples agree, about 0 at random.",
            labels=["selector"],
        )
        drift = GaugeMetricFamily(
            "sift_ranking_drift",
            "Drift (1 - rank-biased overlap) of the newest top 10 since the baseline, per "
            "selector that has one: 0 unchanged, 1 disjoint.",
            labels=["selector"],
        )
        for measured in usage.measured:
            pending.add_metric([measured.name], measured.pending_entries)
            state.add_metric([measured.name], measured.state_bytes)
            if measured.stability is not None:
                stability.add_metric([measured.name], measured.stability)
            if measured.drift is not None:
                drift.add_metric([measured.name], measured.drift)
        yield pending
        yield state
        yield stability
        yield drift
        yield GaugeMetricFamily(
            "sift_selector_gauges_age_seconds",
            "Seconds since the selector gauges were read from Redis.",
            value=time.monotonic() - self.read_at,
        )


M = TypeVar("M", Counter, Gauge, Histogram)

#: Buckets of the histograms of durations (seconds).
SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class MetricSpec(Generic[M]):
    """One metric of ``Metrics``, declared on the class: each instance gets its own collector
    in its own registry (the attribute of the same name)."""

    def __init__(self, name: str, make: Callable[[CollectorRegistry], M]) -> None:
        self.name = name
        #: The collector, made in a registry.
        self.make: Callable[[CollectorRegistry], M] = make

    @overload
    def __get__(self, instance: None, owner: type[Any]) -> MetricSpec[M]: ...
    @overload
    def __get__(self, instance: object, owner: type[Any]) -> M: ...
    def __get__(self, instance: object | None, owner: type[Any]) -> MetricSpec[M] | M:
        # Only reached on the class: ``Metrics.__init__`` shadows it on every instance.
        if instance is not None:
            raise AttributeError(f"metric {self.name} is made by Metrics.__init__")
        return self


def counter(name: str, documentation: str, *labels: str) -> MetricSpec[Counter]:
    return MetricSpec(
        name, lambda registry: Counter(name, documentation, labels, registry=registry)
    )


def gauge(name: str, documentation: str, *labels: str) -> MetricSpec[Gauge]:
    return MetricSpec(name, lambda registry: Gauge(name, documentation, labels, registry=registry))


def histogram(
    name: str, documentation: str, *labels: str, buckets: tuple[float, ...]
) -> MetricSpec[Histogram]:
    return MetricSpec(
        name,
        lambda registry: Histogram(name, documentation, labels, buckets=buckets, registry=registry),
    )


class Metrics:
    """The metrics, as a table: every ``MetricSpec`` below becomes, on each instance, its
    collector in the instance's registry (in this order, as ``/metrics`` lists them)."""

    chunks_accepted = counter(
        "sift_chunks_accepted", "Chunks validated and appended to a selector log.", "method"
    )
    source_rows = counter(
        "sift_source_rows", "Rows a source read from its bus and appended to its target.", "source"
    )
    source_rejected = counter(
        "sift_source_rejected",
        "Entries a source read from its bus and set aside (bad values, unknown or missing fields).",
        "source",
    )
    source_lag = gauge(
        "sift_source_lag",
        "Entries on a source's bus after its committed position, by partition (reported by the "
        "process consuming it).",
        "source",
        "partition",
    )
    source_resets = counter(
        "sift_source_resets",
        "Resets of a source's bus met (a partition created again below the committed position), "
        "by source (counted by the process that met them).",
        "source",
    )
    chunks_duplicate = counter(
        "sift_chunks_duplicate",
        "Chunks answered from an earlier request with the same Idempotency-Key.",
    )
    chunks_rejected = counter(
        "sift_chunks_rejected",
        "Chunks rejected before anything was written, by HTTP status.",
        "status",
    )
    rows_applied = counter("sift_rows_applied", "Rows folded into selector state.", "method")
    apply_seconds = histogram(
        "sift_apply_seconds",
        "Time of one coalesced update: load state, compute, commit.",
        "method",
        buckets=SECONDS_BUCKETS,
    )
    entries_per_update = histogram(
        "sift_entries_per_update",
        "Log entries coalesced into one update.",
        buckets=(1, 2, 4, 8, 16, 32, 64, 128),
    )
    stale_commits = counter(
        "sift_stale_commits",
        "Commits rejected because the applier lost its lease or fencing token.",
    )
    chunks_dead_lettered = counter(
        "sift_chunks_dead_lettered",
        "Appended chunks that could not be applied and were moved aside, by method.",
        "method",
    )
    apply_failures = counter(
        "sift_apply_failures",
        "Updates that failed and will be retried (not the chunk's fault), by kind.",
        "kind",
    )
    checkpoints = counter(
        "sift_checkpoints",
        "Checkpoints written (the whole state, in pieces), by what made them due.",
        "trigger",
    )
    checkpoint_seconds = histogram(
        "sift_checkpoint_seconds",
        "Time to encode and write one checkpoint.",
        buckets=SECONDS_BUCKETS,
    )
    replay_seconds = histogram(
        "sift_replay_seconds",
        "Time to rebuild a state from its checkpoint and the log (an applier taking over).",
        buckets=SECONDS_BUCKETS,
    )
    replayed_versions = counter(
        "sift_replayed_versions",
        "Versions re-applied from the log after a checkpoint (takeovers, restarts).",
    )
    http_requests = counter(
        "sift_http_requests",
        "HTTP requests answered, by route template, method and status.",
        "route",
        "method",
        "status",
    )
    http_seconds = histogram(
        "sift_http_request_duration_seconds",
        "Time from a request's arrival to the end of its answer, by route template.",
        "route",
        "method",
        buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
    )
    redis_restarts = counter(
        "sift_embedded_redis_restarts", "Restarts of the embedded redis-server after it exited."
    )
    alert_events = counter(
        "sift_alert_events", "Alert crossings this process claimed (each raises one event)."
    )
    alert_deliveries = counter(
        "sift_alert_deliveries",
        "Attempts at delivering alert events, by the event's status after the attempt (delivered, "
        "pending: to be retried, failed: given up).",
        "status",
    )
    alert_events_failed = counter(
        "sift_alert_events_failed",
        "Alert events given up after their last attempt (listed with status failed; POST "
        ".../alerts/events/{id}/redeliver sends them again).",
    )

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        # Labelled children by metric and label values (``labelled``).
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        for attribute, spec in vars(Metrics).items():
            if isinstance(spec, MetricSpec):
                setattr(self, attribute, spec.make(self.registry))
        self.selector_gauges = SelectorGauges()
        self.registry.register(self.selector_gauges)

    def labelled(self, metric: Any, *values: str) -> Any:
        """``metric.labels(*values)``, remembered: prometheus_client checks and converts the
        values on every call, ~4% of a small request's CPU. (Every label here takes a bounded
        set of values.)"""
        key = (id(metric), values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def observe_request(self, route: str, method: str, status: int, seconds: float) -> None:
        method = method if method in HTTP_METHODS else "other"
        self.labelled(self.http_requests, route, method, str(status)).inc()
        self.labelled(self.http_seconds, route, method).observe(seconds)

    def observe_apply(self, method: str, entries: int, rows: int, seconds: float) -> None:
        self.labelled(self.rows_applied, method).inc(rows)
        self.labelled(self.apply_seconds, method).observe(seconds)
        self.entries_per_update.observe(entries)

    def render(self) -> bytes:
        return generate_latest(self.registry)
