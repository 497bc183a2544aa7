"""Rankings: the h best features of the committed state, and every feature's score."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import numpy as np

from service.algorithms.base import SelectsColumns, offers, order_by_score, top_per_view
from service.cache import LRU
from service.errors import InvalidInput, SelectorMismatch
from service.selectors.pivoted import Pivoted, selecting
from service.selectors.reading import Seen, StateReader, seen
from service.selectors.results import RankedFeature, TopOut, WeightsOut
from service.store.codec import decode_array
from service.store.records import Head, SelectorMeta, default_name
from service.updates import RANKING_INDEX_FIELD, RANKING_SCORE_FIELD
from service.wire.kinds import Kind

#: Ranking strategies of ``GET .../top``: individual scores, or pivoted QR's spanning selection.
STRATEGIES = ("score", "diverse")


@dataclass(frozen=True)
class Scores:
    """Every feature's score, at the version it was read from."""

    meta: SelectorMeta
    kind: Kind
    head: Head
    weights: np.ndarray

    @property
    def counts(self) -> Seen:
        return seen(self.kind, self.head)

    def answer(self) -> WeightsOut:
        return WeightsOut(
            name=self.meta.name,
            version=self.head.version,
            rows_seen=self.counts.rows_seen,
            features_seen=self.counts.features_seen,
            weights=self.weights,
            versions=versions_of(self.head),
        )


def versions_of(head: Head) -> list[int] | None:
    """The version vector of a partitioned selector's answer (None for one selector)."""
    return None if head.partition_versions is None else list(head.partition_versions)


#: Answers of ``top`` kept, each for one version and one set of arguments.
TOP_ANSWERS_CACHED = 512


class Rankings:
    """Rankings of the current version. A version never changes, so each answer is computed
    once per version and arguments (off the event loop), then served from memory: a reader
    costs two small Redis reads (the description and the head) while chunks stream in."""

    def __init__(self, reader: StateReader, pivoted: Pivoted, published_top: int) -> None:
        self.reader = reader
        self.pivoted = pivoted
        #: How many top features each version publishes (``SIFT_HISTORY_TOP``).
        self.published_top = published_top
        self._answers: LRU[tuple[object, ...], TopOut] = LRU(TOP_ANSWERS_CACHED)

    async def scores(self, name: str) -> Scores:
        meta, method, kind = await self.reader.described(name)
        head, arrays = await self.reader.arrays(name, [method.score_field])
        return Scores(meta, kind, head, arrays[method.score_field])

    async def top(
        self,
        name: str,
        h: int,
        strategy: str = "score",
        candidates: int | None = None,
        view: str | None = None,
    ) -> TopOut:
        """The h best features: by score, or the h columns pivoted QR selects (``diverse``,
        and always for a method that ranks that way), i.e. h features that together span the
        data. Multi-view selectors rank each view (or the one asked for)."""
        if strategy not in STRATEGIES:
            raise InvalidInput(f"strategy must be one of {', '.join(STRATEGIES)}; got {strategy!r}")
        meta, method, kind, head = await self.reader.current(name)
        by_default = offers(method, SelectsColumns) and method.pivoted_by_default
        if strategy == "diverse" or by_default:
            return await self.pivoted.top(meta, selecting(meta, method), kind, h, candidates)
        if candidates is not None:
            raise SelectorMismatch(
                f"l (IQRP's candidate list) applies to pivoted selections (strategy=diverse); "
                f"selector '{name}' ranks by score"
            )
        cached = self._answers.get((name, head.state_key, h, view))
        if cached is not None:
            return cached
        if view is not None or meta.views is not None:
            scores = await self.scores(name)
            at = scores.head
            features = await asyncio.to_thread(self._by_view, meta, scores.weights, h, view)
        else:
            at, order, top_scores = await self._best(meta, method.score_field, h)
            names = await self.reader.item_names(meta, kind, order)
            features = [
                RankedFeature(rank=rank, index=index, name=label, score=score)
                for rank, (index, label, score) in enumerate(
                    zip(order, names, top_scores, strict=True), start=1
                )
            ]
        counts = seen(kind, at)
        answer = TopOut(
            name=name,
            method=meta.method,
            version=at.version,
            rows_seen=counts.rows_seen,
            features_seen=counts.features_seen,
            features=features,
            versions=versions_of(at),
        )
        self._answers.put((name, at.state_key, h, view), answer)
        return answer

    async def _best(
        self, meta: SelectorMeta, score_field: str, h: int
    ) -> tuple[Head, list[int], list[float]]:
        """The indices and scores of the ``h`` best features of the current version: from the
        ranking the version published (a few KiB) when it holds ``h``, else from every score
        (a partitioned selector's merged scores, say)."""
        raw: dict[str, bytes] = {}
        if not meta.partitioned:
            head, raw = await self.reader.store.read_state_fields(
                meta.name, [RANKING_INDEX_FIELD, RANKING_SCORE_FIELD]
            )
        if len(raw) == 2:
            indices, scores = (
                decode_array(raw[f]) for f in (RANKING_INDEX_FIELD, RANKING_SCORE_FIELD)
            )
            # Fewer than published means every feature is there: any h is answered.
            if h <= indices.size or indices.size < self.published_top:
                return head, [int(i) for i in indices[:h]], [float(x) for x in scores[:h]]
        head, arrays = await self.reader.arrays(meta.name, [score_field])
        weights = arrays[score_field]
        order = [int(i) for i in await asyncio.to_thread(order_by_score, weights, h)]
        return head, order, [float(weights[i]) for i in order]

    @staticmethod
    def _by_view(
        meta: SelectorMeta, weights: np.ndarray, h: int, view: str | None
    ) -> list[RankedFeature]:
        """The top h of one view, or of every view in turn (OMVFS, Algorithm 1 step 19).

        ``index`` is the feature's position in its view; ``rank`` counts within the view.
        """
        views = list(meta.views or ())
        if not views:
            raise SelectorMismatch(
                f"view= applies to multi-view selectors; '{meta.name}' has no views"
            )
        if view is not None and view not in dict(views):
            raise SelectorMismatch(
                f"unknown view {view!r}; expected one of {[v for v, _ in views]}"
            )
        features = []
        for name, start, order in top_per_view(weights, views, h):
            if view is None or name == view:
                for rank, local in enumerate(order, start=1):
                    features.append(
                        RankedFeature(
                            rank=rank,
                            view=name,
                            index=int(local),
                            name=meta.feature_names[start + local]
                            if meta.feature_names
                            else default_name(int(local)),
                            score=float(weights[start + local]),
                        )
                    )
        return features
