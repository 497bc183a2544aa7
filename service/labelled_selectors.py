"""What labelled selectors offer beyond rows in and rankings out (paper: Yan et al. 2006).

* ``merge``: an OCFS selector takes another one's class counts and sums. The merge goes
  through the write path like a chunk (one labelled row per class holding the class sum, the
  class count as its multiplicity), so it is applied exactly once, in log order, under the
  same lease and idempotency rules as any chunk.
* ``projection`` and ``transform``: IOC's ``W = [u^1 .. u^p]`` and ``W^T x`` for new rows.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import OrderedDict
from typing import Any

import numpy as np
import scipy.sparse as sp

from service.algorithms import get_method
from service.algorithms.ioc import projection
from service.algorithms.labels import COUNTS_FIELD
from service.algorithms.ocfs import SUMS_FIELD, exact_directions, summary_rows
from service.api.payloads import decode_rows
from service.errors import Conflict, InvalidInput
from service.selectors import ChunkReceipt, SelectorService, validate_name
from service.store.chunks import encode_chunk
from service.store.codec import decode_state
from service.store.records import Head, SelectorMeta

#: State arrays IOC's answers read (cached per version by ``read_arrays``).
IOC_FIELDS = ["vectors", "eigenvalues", COUNTS_FIELD, SUMS_FIELD]
#: Which W a projection answers: IOC's learned vectors, or the exact batch OC solution.
SOLUTIONS = ("ioc", "exact")


class LabelledSelectors:
    """Merges of OCFS selectors and IOC projections, on top of the selector service."""

    def __init__(self, service: SelectorService) -> None:
        self.service = service
        self.store = service.store
        # Both solutions are a pure function of the state (one SVD): keep the last few states'.
        self._projections: OrderedDict[tuple[str, str], dict[str, dict[str, np.ndarray]]]
        self._projections = OrderedDict()

    # -- OCFS: merge ------------------------------------------------------------------------

    async def merge(
        self, name: str, source: Any, idempotency_key: str | None, wait: bool
    ) -> ChunkReceipt:
        """Add the class counts and sums of selector ``source`` to ``name`` (both OCFS).

        Exact: the scores afterwards are those of one selector that saw both streams. The
        source's pending chunks are applied first (bounded wait); the source is not changed.
        Merging the same data twice counts it twice: use disjoint streams, and an
        ``Idempotency-Key`` to retry safely.
        """
        meta = await self.store.get_meta(name)
        if meta.method != "ocfs":
            raise InvalidInput(
                f"merge adds class counts and sums, which is exact for ocfs only; selector "
                f"'{name}' runs {meta.method}"
            )
        if not isinstance(source, str):
            raise InvalidInput(f'expected {{"from": "<selector name>"}}; got {source!r}')
        validate_name(source)
        if source == name:
            raise InvalidInput(f"cannot merge selector '{name}' into itself")
        other = await self.store.get_meta(source)
        if other.method != "ocfs" or other.n_features != meta.n_features:
            raise InvalidInput(
                f"can merge an ocfs selector with {meta.n_features} features; '{source}' runs "
                f"{other.method} with {other.n_features}"
            )
        if meta.feature_names and other.feature_names and meta.feature_names != other.feature_names:
            raise InvalidInput(
                f"'{name}' and '{source}' name their features differently: the columns would "
                "not line up"
            )
        await self._settle(source)
        fields = ["__scalars__", COUNTS_FIELD, SUMS_FIELD]
        head, raw = await self.store.read_state_fields(source, fields)
        if head.rows_seen == 0:
            raise Conflict(f"selector '{source}' has seen no rows: nothing to merge")
        chunk = summary_rows(decode_state(raw))  # small: c x m sums, decoded views
        payload = await asyncio.to_thread(encode_chunk, chunk)
        # The request is "merge <source>": a retry with the same key is a duplicate even if
        # the source has grown since, and the same key naming another source is refused.
        digest = hashlib.sha256(b"merge\0" + source.encode()).hexdigest()
        submitted = await self.service.submit(
            meta, get_method(meta.method), payload, chunk.samples, digest, idempotency_key, wait
        )
        merged = {"from": source, "version": head.version, "rows": chunk.samples}
        outcome = submitted.outcome
        if not submitted.applied:
            pending = self.service.pending_body(outcome, chunk.samples)
            pending["merged"] = merged
            return ChunkReceipt(False, pending)
        return ChunkReceipt(
            True,
            {
                "version": submitted.version,
                "rows_seen": submitted.rows_seen,
                "rows": chunk.samples,
                "duplicate": outcome.duplicate,
                "log_id": outcome.log_id,
                "merged": merged,
            },
        )

    async def _settle(self, name: str) -> None:
        """Wait (bounded) until everything appended to ``name`` so far is applied."""
        last = await self.store.last_log_id(name)
        if last is None:
            return
        applied = await self.service.applier.wait_applied(
            name, last, self.service.settings.apply_wait_seconds
        )
        if applied is None:
            raise Conflict(
                f"selector '{name}' still has chunks being applied; retry the merge once "
                f"GET /v1/selectors/{name} shows pending_entries 0"
            )

    # -- IOC: projection and transform ------------------------------------------------------

    async def projection(
        self, name: str, solution: str = "ioc"
    ) -> tuple[SelectorMeta, Head, dict[str, np.ndarray]]:
        """``W`` (``m x p``), the eigenvalue estimates and how far IOC has converged.

        ``solution="ioc"`` answers IOC's vectors (Table 1); ``"exact"`` the batch OC solution,
        which the state determines exactly (``S_b`` depends only on the class counts and
        sums). Both come with ``agreement``: ``|u^j . e_j|`` between IOC's vector and the exact
        eigenvector, 1 when converged.

        409 until every one of the ``p`` vectors has started (a vector starts at a nonzero
        sample) and while fewer than ``p + 1`` classes have been seen: ``S_b`` has rank at
        most ``c - 1``, so directions beyond ``c - 1`` carry no class information at all.
        """
        if solution not in SOLUTIONS:
            raise InvalidInput(f"solution must be one of {', '.join(SOLUTIONS)}; got {solution!r}")
        meta = await self.store.get_meta(name)
        if meta.method != "ioc":
            raise InvalidInput(
                f"projections are learned by ioc selectors; selector '{name}' runs {meta.method}"
            )
        head, arrays = await self.service.read_arrays(name, IOC_FIELDS)
        p = int(meta.params["n_components"])
        classes = int(arrays[COUNTS_FIELD].size)
        started = int(np.count_nonzero(arrays["eigenvalues"]))
        if started < p:
            raise Conflict(
                f"selector '{name}' has started {started} of its n_components={p} vectors "
                f"({head.rows_seen} rows seen; vector j starts at the j-th nonzero row): "
                "push more rows"
            )
        if classes < p + 1:
            raise Conflict(
                f"selector '{name}' has seen {classes} classes, so S_b has rank at most "
                f"{max(classes - 1, 0)} and only that many of its n_components={p} directions "
                "carry class information; push rows of more classes, or create the selector "
                f"with n_components <= {max(classes - 1, 1)}"
            )
        key = (name, head.state_key)
        answers = self._projections.get(key)
        if answers is None:
            answers = await asyncio.to_thread(_solutions, arrays, p)
            self._projections[key] = answers
            while len(self._projections) > 16:
                self._projections.popitem(last=False)
        return meta, head, answers[solution]

    async def transform(
        self, name: str, body: bytes, media_type: str, solution: str = "ioc"
    ) -> tuple[SelectorMeta, Head, np.ndarray]:
        """``W^T x`` for every row of the body (rows as a chunk takes them, without labels)."""
        meta, head, learned = await self.projection(name, solution)
        limit = self.service.settings.max_body_bytes

        def apply() -> np.ndarray:
            rows = decode_rows(body, media_type, meta.n_features, limit)
            out = rows @ learned["projection"]
            return np.asarray(out.toarray() if sp.issparse(out) else out, dtype=np.float64)

        return meta, head, await asyncio.to_thread(apply)


def _solutions(arrays: dict[str, np.ndarray], p: int) -> dict[str, dict[str, np.ndarray]]:
    """Both W (IOC's and the exact one) with their eigenvalues and IOC's agreement."""
    learned = projection(np.asarray(arrays["vectors"]))
    exact, exact_values = exact_directions(arrays[COUNTS_FIELD], arrays[SUMS_FIELD], p)
    # Eigenvectors have no sign: show the exact ones pointing the way IOC's do.
    signs = np.where(np.sum(learned * exact, axis=0) < 0, -1.0, 1.0)
    exact = exact * signs
    agreement = np.abs(np.sum(learned * exact, axis=0))
    eigenvalues = np.asarray(arrays["eigenvalues"], dtype=np.float64)
    return {
        "ioc": {"projection": learned, "eigenvalues": eigenvalues, "agreement": agreement},
        "exact": {"projection": exact, "eigenvalues": exact_values, "agreement": agreement},
    }
