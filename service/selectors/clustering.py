"""Clustering the fixed samples (capability ``Clusters``, OFS: k-means of the rows of A~, the
pipeline of the paper's section 4). Answers are cached per version, k and seed."""

from __future__ import annotations

import asyncio

from service.algorithms import require_capability
from service.algorithms.base import Clusters
from service.cache import LRU
from service.errors import Conflict, SelectorMismatch
from service.selectors.reading import StateReader
from service.selectors.results import ClusterOut


class Clustering:
    def __init__(self, reader: StateReader, cache_size: int = 8) -> None:
        self.reader = reader
        self._answers: LRU[tuple[str, str, int, int], ClusterOut] = LRU(cache_size)

    async def cluster(self, name: str, k: int, seed: int) -> ClusterOut:
        selector = await self.reader.described(name)
        meta = selector.meta
        method = require_capability(
            selector.method,
            Clusters,
            "POST .../cluster clusters the samples of a selector that keeps feature columns",
            name,
            takes=selector.kind.expects(meta),
        )
        if meta.n_samples is not None and k > meta.n_samples:
            raise SelectorMismatch(
                f"k must be at most the selector's n_samples={meta.n_samples} (one cluster per "
                f"sample at most); got {k}"
            )
        head = await self.reader.head(name)
        cached = self._answers.get((name, head.state_key, k, seed))
        if cached is not None:
            return cached
        # What is clustered can be large (n x kept): read for this answer only, never cached.
        head, arrays = await self.reader.arrays(name, method.cluster_fields, cache=False)
        try:
            labels, objective, used = await asyncio.to_thread(method.cluster, arrays, k, seed)
        except Conflict as exc:
            raise Conflict(
                f"selector '{name}' ({head.items_seen} features seen): {exc.detail}"
            ) from None
        answer = ClusterOut(
            name=name,
            version=head.version,
            features_seen=head.items_seen,
            features_used=used,
            k=k,
            seed=seed,
            objective=objective,
            labels=labels,
        )
        self._answers.put((name, head.state_key, k, seed), answer)
        return answer
