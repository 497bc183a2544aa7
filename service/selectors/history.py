"""The ranking history: the top features of a selector's recent versions, to watch drift.

The applier records every committed version's top ``SIFT_HISTORY_TOP`` features (per view for
multi-view selectors) right after the commit, best effort, and Redis keeps the newest
``SIFT_HISTORY_VERSIONS`` of them under the selector's keys (deleted with it). This room reads
them back with names, and starts the history of an imported selector.
"""

from __future__ import annotations

import asyncio
import logging

from service.applier import Applier, top_of
from service.config import Settings
from service.errors import InvalidInput, NotFound, SelectorMismatch, Unavailable
from service.selectors.reading import StateReader
from service.selectors.results import HistoryOut, HistoryVersion, RankedFeature
from service.store.monitoring_records import HistoryEntry
from service.store.parts.history import History as HistoryRecords
from service.store.records import Head, SelectorMeta
from service.wire.kinds import ChunkFormat

#: What ``GET .../history`` shows unless asked otherwise: the top 10 of the newest 20 versions.
log = logging.getLogger("sift.history")

DEFAULT_H = 10
DEFAULT_LIMIT = 20


class History:
    def __init__(
        self, reader: StateReader, records: HistoryRecords, applier: Applier, settings: Settings
    ) -> None:
        self.reader = reader
        #: The store's ranking history.
        self.records = records
        self.applier = applier
        self.settings = settings

    async def versions(self, name: str, h: int | None, limit: int | None) -> HistoryOut:
        """The top ``h`` of the newest ``limit`` versions, newest first.

        ``h`` may not exceed what is kept per version (``SIFT_HISTORY_TOP``), nor ``limit``
        the versions kept (``SIFT_HISTORY_VERSIONS``): the app's OpenAPI document states both
        settings as maxima, and a 422 says the limit. Unset, they are 10 and 20 (or the
        limits, if smaller).
        """
        h = min(DEFAULT_H, self.settings.history_top) if h is None else h
        limit = min(DEFAULT_LIMIT, self.settings.history_versions) if limit is None else limit
        if not 1 <= h <= self.settings.history_top:
            raise InvalidInput(
                f"h must be between 1 and {self.settings.history_top}, the features the history "
                f"keeps per version (SIFT_HISTORY_TOP); got {h}"
            )
        if not 1 <= limit <= self.settings.history_versions:
            raise InvalidInput(
                f"limit must be between 1 and {self.settings.history_versions}, the versions "
                f"the history keeps (SIFT_HISTORY_VERSIONS); got {limit}"
            )
        selector = await self.reader.described(name)
        meta, kind = selector.meta, selector.kind
        if meta.partitioned:
            raise SelectorMismatch(
                f"selector '{name}' is partitioned: each partition keeps its own history, and "
                "merged answers are not versions of one selector"
            )
        entries = await self.records.read(name, limit)
        names = await self._names(meta, kind, entries, h)
        versions = [
            HistoryVersion(
                version=entry.version,
                **{kind.seen_field: entry.items_seen},
                updated_at=entry.updated_at,
                top=[
                    RankedFeature(
                        rank=rank,
                        view=ranking.view,
                        index=index,
                        name=names[(ranking.view, index)],
                        score=score,
                    )
                    for ranking in entry.rankings
                    for rank, (index, score) in enumerate(
                        zip(ranking.indices[:h], ranking.scores[:h], strict=True), start=1
                    )
                ],
            )
            for entry in entries
        ]
        return HistoryOut(name=name, method=meta.method, h=h, versions=versions)

    async def start(self, meta: SelectorMeta, head: Head, encoded_state: dict[str, bytes]) -> None:
        """The first entry of a selector that begins at ``head`` (an import): its version's
        top, recorded like any commit's (best effort)."""
        top = await asyncio.to_thread(top_of, meta, encoded_state, self.settings.history_top)
        entry = HistoryEntry(head.version, head.items_seen, head.updated_at, top)
        try:
            await self.records.record(meta.name, entry, self.settings.history_versions)
        except (Unavailable, NotFound) as exc:
            log.info(
                "selector %s: version %d left out of the history: %s", meta.name, head.version, exc
            )

    async def _names(
        self, meta: SelectorMeta, kind: ChunkFormat, entries: list[HistoryEntry], h: int
    ) -> dict[tuple[str | None, int], str]:
        """The name of every (view, index) the answer shows, looked up once each."""
        wanted = {
            (ranking.view, index)
            for entry in entries
            for ranking in entry.rankings
            for index in ranking.indices[:h]
        }
        return await self.reader.feature_labels(meta, kind, wanted)
