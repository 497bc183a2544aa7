"""Projections (capability ``Projects``, IOC): the learned ``W`` and ``W^T x`` for new rows.

Both solutions a method offers are a pure function of the state: computed once per version.
"""

from __future__ import annotations

import asyncio

import numpy as np
import scipy.sparse as sp

from service.algorithms import require_capability
from service.algorithms.base import Projection, Projects
from service.applier import resolved_params
from service.cache import LRU
from service.config import Settings
from service.errors import Conflict, InvalidInput
from service.selectors.reading import StateReader
from service.selectors.results import ProjectionOut, TransformOut
from service.store.records import Head, SelectorMeta
from service.wire.rows import decode_rows


class Projections:
    def __init__(self, reader: StateReader, settings: Settings, cache_size: int = 16) -> None:
        self.reader = reader
        self.settings = settings
        self._solutions: LRU[tuple[str, str], dict[str, Projection]] = LRU(cache_size)

    async def learned(
        self, name: str, solution: str | None
    ) -> tuple[SelectorMeta, Head, str, Projection]:
        """The projection ``solution`` (default: the method's first) at the current version."""
        selector = await self.reader.described(name)
        meta = selector.meta
        method = require_capability(
            selector.method,
            Projects,
            "projections are learned by selectors that project rows",
            name,
        )
        chosen = method.solutions[0] if solution is None else solution
        if chosen not in method.solutions:
            raise InvalidInput(
                f"solution must be one of {', '.join(method.solutions)}; got {chosen!r}"
            )
        head, arrays = await self.reader.arrays(name, method.projection_fields)
        solutions = self._solutions.get((name, head.state_key))
        if solutions is None:
            try:
                params = resolved_params(meta)
                solutions = await asyncio.to_thread(method.projections, arrays, params)
            except Conflict as exc:
                raise Conflict(
                    f"selector '{name}' ({head.items_seen} rows seen): {exc.detail}"
                ) from None
            self._solutions.put((name, head.state_key), solutions)
        return meta, head, chosen, solutions[chosen]

    async def projection(self, name: str, solution: str | None) -> ProjectionOut:
        _meta, head, chosen, learned = await self.learned(name, solution)
        return ProjectionOut(
            name=name,
            version=head.version,
            rows_seen=head.items_seen,
            n_components=learned.projection.shape[1],
            solution=chosen,
            eigenvalues=learned.eigenvalues,
            agreement=learned.agreement,
            projection=learned.projection,
        )

    async def transform(
        self, name: str, body: bytes, media_type: str, solution: str | None
    ) -> TransformOut:
        """``W^T x`` for every row of the body (rows as a chunk takes them, without labels)."""
        meta, head, chosen, learned = await self.learned(name, solution)
        limit = self.settings.max_body_bytes

        def apply() -> np.ndarray:
            rows = decode_rows(body, media_type, meta.size, limit, meta.feature_names).rows
            out = rows @ learned.projection
            return np.asarray(out.toarray() if sp.issparse(out) else out, dtype=np.float64)

        return TransformOut(
            name=name,
            version=head.version,
            rows_seen=head.items_seen,
            n_components=learned.projection.shape[1],
            solution=chosen,
            rows=await asyncio.to_thread(apply),
        )
