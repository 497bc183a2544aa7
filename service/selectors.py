"""The selector service: what the HTTP routes (and any other front end) call.

It owns the rules that do not depend on HTTP: names, creation, the write path of a chunk
(validate, append with its idempotency record, wait for the applier) and reading rankings
from committed state. Routes only translate HTTP to these calls and back.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from service.algorithms import get_method
from service.api.payloads import decode_rows
from service.applier import Applier, is_applied
from service.config import Settings
from service.errors import CodecError, InvalidInput
from service.metrics import Metrics
from service.store.codec import decode_array, decode_state, encode_matrix, encode_state
from service.store.records import AppendOutcome, Head, SelectorMeta
from service.store.redis_store import SelectorStore

#: Names become part of Redis keys ({name} is the hash tag): no braces, colons or spaces.
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
#: Upper bound on features of one selector (the state alone is ell x m doubles).
MAX_FEATURES = 10_000_000


@dataclass(frozen=True)
class ChunkReceipt:
    """What a POST of a chunk answers: applied (with version) or still pending (202)."""

    applied: bool
    body: dict[str, Any]


@dataclass(frozen=True)
class Ranking:
    meta: SelectorMeta
    head: Head
    weights: np.ndarray


def validate_name(name: Any) -> str:
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise InvalidInput(
            "selector name must be 1-128 characters of letters, digits, '.', '_' or '-', "
            f"starting with a letter or digit; got {name!r}"
        )
    return name


def validate_feature_names(names: Any, n_features: int) -> list[str] | None:
    if names is None:
        return None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise InvalidInput("feature_names must be a list of strings")
    if len(names) != n_features:
        raise InvalidInput(
            f"expected {n_features} feature_names (one per feature); got {len(names)}"
        )
    if len(set(names)) != len(names):
        seen: set[str] = set()
        duplicate = next(n for n in names if n in seen or seen.add(n))  # type: ignore[func-returns-value]
        raise InvalidInput(f"feature_names must be unique; '{duplicate}' appears more than once")
    return names


def validate_n_features(n_features: Any) -> int:
    if isinstance(n_features, bool) or not isinstance(n_features, int):
        raise InvalidInput(f"n_features must be an integer; got {n_features!r}")
    if not 1 <= n_features <= MAX_FEATURES:
        raise InvalidInput(f"n_features must be between 1 and {MAX_FEATURES}; got {n_features}")
    return n_features


def feature_name(meta: SelectorMeta, index: int) -> str:
    return meta.feature_names[index] if meta.feature_names else f"f{index}"


def describe(
    meta: SelectorMeta, head: Head, summary: dict[str, Any] | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": meta.name,
        "method": meta.method,
        "n_features": meta.n_features,
        "params": meta.params,
        "version": head.version,
        "rows_seen": head.rows_seen,
        "created_at": meta.created_at,
        "updated_at": head.updated_at,
        "has_feature_names": meta.feature_names is not None,
    }
    if summary is not None:
        body["state"] = summary
    return body


class SelectorService:
    def __init__(
        self, store: SelectorStore, applier: Applier, settings: Settings, metrics: Metrics
    ):
        self.store = store
        self.applier = applier
        self.settings = settings
        self.metrics = metrics
        # Committed weights are immutable per state key: cache a few to skip Redis reads.
        self._weights_cache: OrderedDict[tuple[str, str, float], np.ndarray] = OrderedDict()

    # -- selectors -------------------------------------------------------------------------

    async def create(
        self,
        name: Any,
        method_name: Any,
        n_features: Any,
        feature_names: Any = None,
        params: Any = None,
    ) -> dict[str, Any]:
        name = validate_name(name)
        if not isinstance(method_name, str):
            raise InvalidInput(f"method must be a string; got {method_name!r}")
        method = get_method(method_name)
        n_features = validate_n_features(n_features)
        names = validate_feature_names(feature_names, n_features)
        if params is not None and not isinstance(params, dict):
            raise InvalidInput(f"params must be an object; got {type(params).__name__}")
        resolved = method.resolve_params(params or {}, n_features)
        meta = SelectorMeta(
            name=name,
            method=method.name,
            n_features=n_features,
            params=resolved,
            feature_names=names,
            created_at=time.time(),
        )
        initial = await asyncio.to_thread(
            lambda: encode_state(method.initial_state(resolved, n_features))
        )
        head = await self.store.create(meta, initial)
        return describe(meta, head)

    async def describe(self, name: str) -> dict[str, Any]:
        meta = await self.store.get_meta(name)
        head, fields = await self.store.read_state_fields(name, ["__scalars__"])
        summary = decode_state(fields) if fields.get("__scalars__") else {}
        # The commit trims the log up to its cursor atomically: what remains is pending.
        summary["pending_entries"] = await self.store.log_length(name)
        return describe(meta, head, summary)

    async def list(self) -> list[dict[str, Any]]:
        described = []
        for name in await self.store.list_names():
            try:
                meta = await self.store.get_meta(name)
                head = await self.store.get_head(name)
            except Exception:  # deleted between listing and reading
                continue
            described.append(describe(meta, head))
        return described

    async def delete(self, name: str) -> None:
        await self.store.delete(name)

    # -- the write path --------------------------------------------------------------------

    async def meta(self, name: str) -> SelectorMeta:
        return await self.store.get_meta(name)

    async def push_chunk(
        self,
        meta: SelectorMeta,
        body: bytes,
        media_type: str,
        idempotency_key: str | None,
        wait: bool,
    ) -> ChunkReceipt:
        """Validate fully, append atomically with the idempotency record, then wait (bounded)."""
        name = meta.name
        try:
            rows, payload = await asyncio.to_thread(self._decode, body, media_type, meta)
        except InvalidInput as exc:
            self.metrics.chunks_rejected.labels(str(exc.status)).inc()
            raise
        digest = hashlib.sha256(payload).hexdigest()
        outcome = await self.store.append(name, payload, rows, digest, idempotency_key)
        if outcome.duplicate:
            self.metrics.chunks_duplicate.inc()
        else:
            self.metrics.chunks_accepted.labels(meta.method).inc()
        if outcome.applied_version is not None:
            return ChunkReceipt(
                True, self._applied_body(outcome, rows, outcome.applied_version, outcome.rows_seen)
            )
        self.applier.kick(name)
        if not wait:
            return ChunkReceipt(False, self._pending_body(outcome, rows))
        head = await self.applier.wait_applied(
            name, outcome.log_id, self.settings.apply_wait_seconds
        )
        if head is None:
            return ChunkReceipt(False, self._pending_body(outcome, rows))
        version, rows_seen = head.version, head.rows_seen
        if idempotency_key:
            # The idempotency record knows the exact version that applied the entry, so that a
            # repeated request answers exactly what the first one did.
            record = await self.store.idempotency_record(name, idempotency_key)
            if record is not None and record.applied_version is not None:
                version = record.applied_version
                rows_seen = record.rows_seen if record.rows_seen is not None else rows_seen
        return ChunkReceipt(True, self._applied_body(outcome, rows, version, rows_seen))

    def _decode(self, body: bytes, media_type: str, meta: SelectorMeta) -> tuple[int, bytes]:
        rows = decode_rows(body, media_type, meta.n_features, self.settings.max_body_bytes)
        return rows.shape[0], encode_matrix(rows)

    @staticmethod
    def _applied_body(
        outcome: AppendOutcome, rows: int, version: int, rows_seen: int | None
    ) -> dict[str, Any]:
        return {
            "version": version,
            "rows_seen": rows_seen,
            "rows": rows,
            "duplicate": outcome.duplicate,
            "log_id": outcome.log_id,
        }

    @staticmethod
    def _pending_body(outcome: AppendOutcome, rows: int) -> dict[str, Any]:
        return {
            "log_id": outcome.log_id,
            "status": "pending",
            "rows": rows,
            "duplicate": outcome.duplicate,
        }

    async def chunk_status(self, name: str, log_id: str) -> dict[str, Any]:
        head = await self.store.get_head(name)
        applied = is_applied(head, log_id)
        return {
            "log_id": log_id,
            "applied": applied,
            "version": head.version,
            "rows_seen": head.rows_seen,
        }

    # -- rankings --------------------------------------------------------------------------

    async def ranking(self, name: str) -> Ranking:
        meta = await self.store.get_meta(name)
        head = await self.store.get_head(name)
        key = (name, head.state_key, head.updated_at)
        weights = self._weights_cache.get(key)
        if weights is None:
            head, fields = await self.store.read_state_fields(name, ["weights"])
            raw = fields.get("weights")
            if raw is None:
                raise CodecError(f"state of '{name}' at version {head.version} has no weights")
            weights = decode_array(raw)
            self._weights_cache[(name, head.state_key, head.updated_at)] = weights
            while len(self._weights_cache) > 64:
                self._weights_cache.popitem(last=False)
        return Ranking(meta, head, weights)

    async def top(self, name: str, h: int) -> dict[str, Any]:
        ranking = await self.ranking(name)
        weights = ranking.weights
        h = min(h, weights.size)
        # Highest score first; ties by the lower index so the order is deterministic
        # (argpartition would pick arbitrarily among ties at the cut).
        order = np.lexsort((np.arange(weights.size), -weights))[:h]
        features = [
            {
                "rank": rank,
                "index": int(index),
                "name": feature_name(ranking.meta, int(index)),
                "score": float(weights[index]),
            }
            for rank, index in enumerate(order, start=1)
        ]
        return {
            "name": name,
            "method": ranking.meta.method,
            "version": ranking.head.version,
            "rows_seen": ranking.head.rows_seen,
            "features": features,
        }
