"""Drift: how far a selector's top h moved since the previous version and since its baseline,
and the baseline itself (pinned, or forgotten so that the next stable version becomes it).

Read from the ranking history (the newest versions' tops) and the baseline the monitor set
(``service.monitoring.monitor``); compared by ``service.algorithms.drift``.
"""

from __future__ import annotations

import contextlib
import time

from service.algorithms.drift import Comparison, baseline_h, compare
from service.config import Settings
from service.errors import Conflict, InvalidInput, NotFound, SelectorMismatch
from service.monitoring.monitor import Monitor
from service.selectors.rankings import Rankings
from service.selectors.reading import StateReader
from service.selectors.results import (
    BaselineDrift,
    BaselineOut,
    BaselineRule,
    DriftOut,
    FeatureRef,
    VersionDrift,
)
from service.store.monitoring_records import Alert, Baseline, HistoryEntry
from service.store.records import SelectorMeta
from service.store.redis_store import SelectorStore
from service.wire.kinds import ChunkFormat

#: ``GET .../drift`` compares the top 10 unless asked otherwise.
DEFAULT_H = 10


class Drift:
    def __init__(
        self,
        reader: StateReader,
        rankings: Rankings,
        store: SelectorStore,
        monitor: Monitor,
        settings: Settings,
    ) -> None:
        self.reader = reader
        self.rankings = rankings
        self.store = store
        self.monitor = monitor
        self.settings = settings

    async def monitored(self, name: str) -> tuple[SelectorMeta, ChunkFormat]:
        """The selector and its chunk kind, if its rankings can be watched (not partitioned)."""
        selector = await self.reader.described(name)
        if selector.meta.partitioned:
            raise SelectorMismatch(
                f"selector '{name}' is partitioned: each partition keeps its own history, so its "
                "rankings have no drift, baseline or alerts of their own"
            )
        return selector.meta, selector.kind

    async def drift(self, name: str, h: int | None) -> DriftOut:
        """The newest version's top ``h`` against the version before and the baseline."""
        h = DEFAULT_H if h is None else h
        if not 1 <= h <= self.settings.history_top:
            raise InvalidInput(
                f"h must be between 1 and {self.settings.history_top}, the features the history "
                f"keeps per version (SIFT_HISTORY_TOP); got {h}"
            )
        meta, kind = await self.monitored(name)
        entries = await self.store.history.read(name, 2)
        baseline, alerts = await self.store.monitoring.watched(name)
        if baseline is not None and baseline.incarnation != meta.incarnation:
            baseline = None
        rule = None
        if baseline is None:
            rule = await self._baseline_rule(meta, entries[0] if entries else None, alerts)
        if not entries:
            return DriftOut(name=name, method=meta.method, h=h, version=0, baseline_rule=rule)
        newest = entries[0]
        comparisons: list[tuple[HistoryEntry, Comparison]] = []
        if len(entries) > 1:
            comparisons.append((entries[1], compare(entries[1].rankings, newest.rankings, h)))
        if baseline is not None:
            entry = baseline.entry
            comparisons.append((entry, compare(entry.rankings, newest.rankings, h)))
        wanted = [f for _, c in comparisons for f in (*c.entered, *c.left)]
        labels = await self.reader.feature_labels(meta, kind, wanted)

        def shown(features: list[tuple[str | None, int]]) -> list[FeatureRef]:
            return [FeatureRef(index=i, name=labels[(view, i)], view=view) for view, i in features]

        def moved(entry: HistoryEntry, comparison: Comparison) -> dict[str, object]:
            return {
                "version": entry.version,
                kind.seen_field: entry.items_seen,
                "rbo": comparison.rbo,
                "jaccard": comparison.jaccard,
                "drift": comparison.drift,
                "entered": shown(comparison.entered),
                "left": shown(comparison.left),
            }

        previous = None
        if len(entries) > 1:
            previous = VersionDrift.model_validate(moved(*comparisons[0]))
        since_baseline = None
        if baseline is not None:
            since_baseline = BaselineDrift.model_validate(
                {**moved(*comparisons[-1]), "how": baseline.how, "pinned_at": baseline.pinned_at}
            )
        return DriftOut.model_validate(
            {
                "name": name,
                "method": meta.method,
                "h": h,
                "version": newest.version,
                kind.seen_field: newest.items_seen,
                "previous": previous,
                "baseline": since_baseline,
                "baseline_rule": rule,
            }
        )

    async def _baseline_rule(
        self, meta: SelectorMeta, newest: HistoryEntry | None, alerts: list[Alert]
    ) -> BaselineRule:
        """What would make a version the baseline (the monitor's rule: ``baseline_h``, fitted
        to the selector's features), with the newest version's stability of that top h, so
        that an answer about another h never stands beside a baseline judged elsewhere without
        saying so. The history keeps the stability of the top ``stable_h``; another h (an
        alert's) is assessed from the current state."""
        name = meta.name
        h = baseline_h([a.h for a in alerts], meta.ranked_features)
        stability = None
        if newest is not None and newest.stability is not None:
            # A method that estimates no stability has none in its history either.
            if newest.stability["h"] == h:
                stability = float(newest.stability["index"])
            else:
                with contextlib.suppress(InvalidInput):  # h beyond the features: not estimated
                    assessed = (await self.rankings.top(name, h)).stability
                    stability = None if assessed is None else assessed.index
        return BaselineRule(h=h, threshold=self.settings.baseline_stability, stability=stability)

    async def pin(self, name: str) -> BaselineOut:
        """Make the newest version the baseline."""
        meta, kind = await self.monitored(name)
        entries = await self.store.history.read(name, 1)
        if not entries:
            raise Conflict(f"selector '{name}' has no version to pin yet: push data first")
        baseline = Baseline(entries[0], "pinned", time.time(), meta.incarnation)
        if not await self.store.monitoring.set_baseline(name, baseline, pin=True):
            raise NotFound(f"selector '{name}' does not exist")
        self.monitor.changed(name)
        return self._baseline_out(name, kind, baseline)

    async def forget(self, name: str) -> None:
        """Drop the baseline: the next stable version becomes the baseline again."""
        await self.monitored(name)
        await self.store.monitoring.forget_baseline(name)
        self.monitor.changed(name)

    @staticmethod
    def _baseline_out(name: str, kind: ChunkFormat, baseline: Baseline) -> BaselineOut:
        return BaselineOut.model_validate(
            {
                "name": name,
                "version": baseline.entry.version,
                kind.seen_field: baseline.entry.items_seen,
                "how": baseline.how,
                "pinned_at": baseline.pinned_at,
            }
        )
