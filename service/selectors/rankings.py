"""Rankings: the h best features of the committed state, and every feature's score."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import numpy as np

from service import tracing
from service.algorithms import require_capability
from service.algorithms.base import (
    AnyMethod,
    EstimatesStability,
    SelectsColumns,
    State,
    TestsSignificance,
    offers,
    order_by_score,
    top_per_view,
)
from service.algorithms.resampling import resample_fields
from service.algorithms.stability import (
    CONFIDENCE,
    Assessment,
    ResampledRanking,
    Stability,
    assess,
    assess_views,
)
from service.algorithms.subsamples import COUNTS_FIELD, resample_count
from service.algorithms.univariate import Correction, significant
from service.applier import (
    RANKING_INDEX_FIELD,
    RANKING_SCORE_FIELD,
    RESAMPLE_RANKS_FIELD,
    RESAMPLE_TOP_FIELD,
    resolved_params,
)
from service.cache import LRU
from service.errors import InvalidInput, SelectorMismatch
from service.selectors.pivoted import Pivoted, selecting
from service.selectors.reading import Seen, StateReader, seen
from service.selectors.results import RankedFeature, StabilityOut, TopOut, WeightsOut
from service.store.codec import decode_array
from service.store.parts.checkpoints import Checkpoints
from service.store.records import Head, SelectorMeta, default_name
from service.wire.kinds import ChunkFormat


@dataclass(frozen=True)
class Significance:
    """A selection by p-value (``GET .../top?alpha=``): its level and correction."""

    alpha: float
    correction: Correction = "none"


#: Ranking strategies of ``GET .../top``: individual scores, or pivoted QR's spanning selection.
STRATEGIES = ("score", "diverse")


@dataclass(frozen=True)
class Scores:
    """Every feature's score, at the version it was read from."""

    meta: SelectorMeta
    kind: ChunkFormat
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

    def __init__(
        self, reader: StateReader, checkpoints: Checkpoints, pivoted: Pivoted, published_top: int
    ) -> None:
        self.reader = reader
        #: The store's state reads (the published top, read alone).
        self.checkpoints = checkpoints
        self.pivoted = pivoted
        #: How many top features each version publishes (``SIFT_HISTORY_TOP``).
        self.published_top = published_top
        self._answers: LRU[tuple[object, ...], TopOut] = LRU(TOP_ANSWERS_CACHED)

    async def scores(self, name: str) -> Scores:
        selector = await self.reader.described(name)
        field = selector.method.score_field
        head, arrays = await self.reader.arrays(name, [field])
        return Scores(selector.meta, selector.kind, head, arrays[field])

    async def top(
        self,
        name: str,
        h: int,
        strategy: str = "score",
        candidates: int | None = None,
        view: str | None = None,
        test: Significance | None = None,
    ) -> TopOut:
        """The h best features: by score, or the h columns pivoted QR selects (``diverse``,
        and always for a method that ranks that way), i.e. h features that together span the
        data. Multi-view selectors rank each view (or the one asked for). ``test``: only the
        features a test at its level selects (methods with p-values), by score."""
        if strategy not in STRATEGIES:
            raise InvalidInput(f"strategy must be one of {', '.join(STRATEGIES)}; got {strategy!r}")
        with tracing.span("sift.read", {"sift.selector": name, "sift.read": "head"}) as span:
            current = await self.reader.current(name)
            meta, method, kind, head = current.meta, current.method, current.kind, current.head
            tracing.annotate(span, {"sift.method": meta.method, "sift.version": head.version})
        by_default = offers(method, SelectsColumns) and method.pivoted_by_default
        if strategy == "diverse" or by_default:
            return await self.pivoted.top(meta, selecting(meta, method), kind, h, candidates)
        if candidates is not None:
            raise SelectorMismatch(
                f"l (IQRP's candidate list) applies to pivoted selections (strategy=diverse); "
                f"selector '{name}' ranks by score"
            )
        cached = self._answers.get((name, head.state_key, h, view, test))
        if cached is not None:
            return cached
        stability: StabilityOut | None = None
        p_field = method.p_value_field if offers(method, TestsSignificance) else None
        if test is not None and p_field is None:
            require_capability(method, TestsSignificance, "alpha selects by p-value", name)
        if test is not None and p_field is not None:
            at, scored = await self.reader.state(name, [method.score_field, p_field])
            features = await asyncio.to_thread(
                self._significant, meta, method.score_field, p_field, scored, h, test
            )
        elif view is not None or meta.views is not None:
            at, scored = await self.reader.state(name, scored_fields(method, meta))
            features, assessed = await asyncio.to_thread(
                self._by_view, meta, method, scored, h, view
            )
            if assessed is not None:
                stability = stability_out(method, meta, assessed, h)
        else:
            at, order, top_scores, assessment, p_values = await self._best(meta, method, h)
            names = await self.reader.item_names(meta, kind, order)
            band_of = assessment.bands.tolist() if assessment is not None else None
            features = [
                RankedFeature(
                    rank=rank,
                    index=index,
                    name=label,
                    score=score,
                    p_value=None if p_values is None else float(p_values[index]),
                    band=None if band_of is None else band_of[rank - 1],
                )
                for rank, (index, label, score) in enumerate(
                    zip(order, names, top_scores, strict=True), start=1
                )
            ]
            if assessment is not None:
                stability = stability_out(method, meta, assessment.stability, len(features))
        counts = seen(kind, at)
        answer = TopOut(
            name=name,
            method=meta.method,
            version=at.version,
            rows_seen=counts.rows_seen,
            features_seen=counts.features_seen,
            features=features,
            versions=versions_of(at),
            stability=stability,
        )
        self._answers.put((name, at.state_key, h, view, test), answer)
        return answer

    @staticmethod
    def _significant(
        meta: SelectorMeta,
        score_field: str,
        p_field: str,
        scored: State,
        h: int,
        test: Significance,
    ) -> list[RankedFeature]:
        """The ``h`` best features by score among those ``test`` selects by p-value."""
        scores = np.asarray(scored[score_field], dtype=np.float64)
        p_values = np.asarray(scored[p_field], dtype=np.float64)
        chosen = np.flatnonzero(significant(p_values, test.alpha, test.correction))
        order = chosen[order_by_score(scores[chosen], h)]
        return [
            RankedFeature(
                rank=rank,
                index=int(index),
                name=meta.feature_names[index] if meta.feature_names else default_name(index),
                score=float(scores[index]),
                p_value=float(p_values[index]),
            )
            for rank, index in enumerate(order.tolist(), start=1)
        ]

    async def _best(
        self, meta: SelectorMeta, method: AnyMethod, h: int
    ) -> tuple[Head, list[int], list[float], Assessment | None, np.ndarray | None]:
        """The indices and scores of the ``h`` best features of the current version, what its
        resamples say of them, and every feature's p-value (methods with p-values): from the
        ranking the version published (a few KiB) when it holds ``h``, else from every score
        (a partitioned selector's merged scores, say)."""
        raw: dict[str, bytes] = {}
        p_field = method.p_value_field if offers(method, TestsSignificance) else None
        if not meta.partitioned:
            wanted = PUBLISHED_TOP if p_field is None else [*PUBLISHED_TOP, p_field]
            with tracing.span("sift.read", {"sift.selector": meta.name, "sift.read": "top"}):
                head, raw = await self.checkpoints.read_state_fields(meta.name, wanted)
        if RANKING_INDEX_FIELD in raw and RANKING_SCORE_FIELD in raw:
            indices, scores = (
                decode_array(raw[f]) for f in (RANKING_INDEX_FIELD, RANKING_SCORE_FIELD)
            )
            resampled = None
            if RESAMPLE_TOP_FIELD in raw and RESAMPLE_RANKS_FIELD in raw:
                resampled = ResampledRanking(
                    decode_array(raw[RESAMPLE_TOP_FIELD]),
                    decode_array(raw[RESAMPLE_RANKS_FIELD]),
                    meta.size,
                )
            # Fewer than published means every feature is there: any h is answered.
            every = indices.size < self.published_top
            has_p = p_field is None or p_field in raw
            if (
                (h <= indices.size or every)
                and (resampled is None or resampled.answers(h))
                and has_p
            ):
                assessment = None if resampled is None else resampled.assess(h)
                top = [int(i) for i in indices[:h]], [float(x) for x in scores[:h]]
                p_values = None if p_field is None else decode_array(raw[p_field])
                return head, *top, assessment, p_values
        head, scored = await self.reader.state(meta.name, scored_fields(method, meta))

        def ranked() -> tuple[list[int], list[float], Assessment | None, np.ndarray | None]:
            weights = np.asarray(scored[method.score_field], dtype=np.float64)
            order = [int(i) for i in order_by_score(weights, h)]
            resampled = resample_scores(method, meta, scored)
            assessment = None
            if resampled is not None:
                assessment = assess(weights, resampled, h, corrected(method))
            p_values = None if p_field is None else np.asarray(scored[p_field])
            return order, [float(weights[i]) for i in order], assessment, p_values

        return head, *await asyncio.to_thread(ranked)

    @staticmethod
    def _by_view(
        meta: SelectorMeta,
        method: AnyMethod,
        scored: State,
        h: int,
        view: str | None,
    ) -> tuple[list[RankedFeature], Stability | None]:
        """The top h of one view, or of every view in turn (OMVFS, Algorithm 1 step 19), and
        the stability of what is shown (``assess_views``).

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
        weights = np.asarray(scored[method.score_field], dtype=np.float64)
        resampled = resample_scores(method, meta, scored)
        shown, offset = views, 0
        if view is not None:
            for name, dim in views:
                if name == view:
                    shown = [(name, dim)]
                    break
                offset += dim
        assessed = None
        if resampled is not None:
            width = sum(dim for _, dim in shown)
            part = slice(offset, offset + width)
            assessed = assess_views(weights[part], resampled[:, part], shown, h, corrected(method))
        features = []
        for index, (name, start, order) in enumerate(top_per_view(weights, views, h)):
            if view is None or name == view:
                band_of = None
                if assessed is not None:
                    band_of = assessed[1][0 if view is not None else index].tolist()
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
                            band=None if band_of is None else band_of[rank - 1],
                        )
                    )
        return features, None if assessed is None else assessed[0]


#: What ``top`` reads of a version: its published top and what its resamples say of it.
PUBLISHED_TOP = [
    RANKING_INDEX_FIELD,
    RANKING_SCORE_FIELD,
    RESAMPLE_TOP_FIELD,
    RESAMPLE_RANKS_FIELD,
]


def scored_fields(method: AnyMethod, meta: SelectorMeta) -> list[str]:
    """The score field, and what the resamples' scores read (``resample_fields``: a subsample's
    fields, the whole stream's its derivation reads, the counts) when the selector keeps
    resamples (``ResampledMethod``); read with the scalars."""
    fields = [method.score_field]
    if offers(method, TestsSignificance):
        fields.append(method.p_value_field)
    params = resolved_params(meta)
    k = resample_count(params)
    fields.extend(f for f in resample_fields(method, k, params) if f not in fields)
    return fields


def resample_scores(method: AnyMethod, meta: SelectorMeta, scored: State) -> np.ndarray | None:
    """The resamples' scores from ``scored`` (the fields of ``scored_fields`` and the scalars),
    or None."""
    if not offers(method, EstimatesStability) or COUNTS_FIELD not in scored:
        return None
    return method.resample_scores(scored, resolved_params(meta))


def corrected(method: AnyMethod) -> bool:
    """Whether ``method``'s resamples are scaled to the whole stream (``EstimatesStability``)."""
    return not offers(method, EstimatesStability) or method.stability_corrected


def stability_out(
    method: AnyMethod, meta: SelectorMeta, stability: Stability, h: int
) -> StabilityOut:
    """The answer's stability; ``h`` as the answer counts it (per view, for multi-view ones:
    the index itself is of the views' tops together); ``estimated_by`` as it holds for the
    selector's params (FSDS's kernel mode)."""
    estimate = ""
    if offers(method, EstimatesStability):
        estimate = method.stability_estimate_for(resolved_params(meta))
    return StabilityOut(
        index=stability.index,
        interval=[stability.low, stability.high],
        level=CONFIDENCE,
        resamples=stability.resamples,
        h=h,
        estimated_by=estimate,
        corrected=corrected(method),
    )
