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
from service.algorithms.base import Method
from service.algorithms.column_blocks import block_bounds
from service.algorithms.labels import CLASSES_FIELD, COUNTS_FIELD, Label, stored_classes
from service.algorithms.ofs import cluster_samples, recorded_decisions
from service.algorithms.pivoted_qr import IQRPResult, MatrixSource, iqrp
from service.api.labelled_payloads import decode_labelled_rows
from service.api.payloads import decode_columns, decode_rows, decode_views, validate_names
from service.applier import Applier, is_applied
from service.column_source import StoredColumns
from service.config import Settings
from service.errors import CodecError, Conflict, InvalidInput
from service.metrics import Metrics
from service.store.chunks import encode_chunk
from service.store.codec import decode_array, decode_state, encode_matrix, encode_state
from service.store.records import AppendOutcome, Head, SelectorMeta
from service.store.redis_store import SelectorStore

#: Names become part of Redis keys ({name} is the hash tag): no braces, colons or spaces.
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
#: Upper bound on features of one selector (the state alone is ell x m doubles).
MAX_FEATURES = 10_000_000
#: Upper bound on samples of a feature-stream selector (OFS keeps an n x n factor at worst).
MAX_SAMPLES = 100_000
#: Most decisions one ``GET .../features`` returns.
MAX_FEATURE_PAGE = 10_000
#: Class sums a labelled selector may keep, in doubles (1 GiB): bounds its number of classes.
MAX_CLASS_CELLS = 2**27
#: Most classes of one labelled selector, whatever its width.
MAX_CLASSES = 10_000
#: Ranking strategies of ``GET .../top``: individual scores, or IQRP's spanning selection.
STRATEGIES = ("score", "diverse")
#: State fields that record OFS decisions (see ``recorded_decisions``).
DECISION_FIELDS = ["leverage", "probability", "kept_indices", "kept_scales"]


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


@dataclass(frozen=True)
class Submitted:
    """An appended entry and, once applied, the version that contains it."""

    outcome: AppendOutcome
    version: int | None
    rows_seen: int | None

    @property
    def applied(self) -> bool:
        return self.version is not None


def max_classes(n_features: int) -> int:
    """How many classes a labelled selector over ``n_features`` features may discover."""
    return max(2, min(MAX_CLASSES, MAX_CLASS_CELLS // max(n_features, 1)))


def validate_name(name: Any) -> str:
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise InvalidInput(
            "selector name must be 1-128 characters of letters, digits, '.', '_' or '-', "
            f"starting with a letter or digit; got {name!r}"
        )
    return name


def validate_size(value: Any, field: str, upper: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"{field} must be an integer; got {value!r}")
    if not 1 <= value <= upper:
        raise InvalidInput(f"{field} must be between 1 and {upper}; got {value}")
    return value


def validate_views(views: Any) -> list[tuple[str, int]]:
    """``{"<view>": <number of features>, ...}`` of a multi-view selector, in the given order."""
    if not isinstance(views, dict) or not views:
        raise InvalidInput(
            'expected "views": {"<view name>": <number of features>, ...}; got ' + repr(views)
        )
    out = []
    for view, dim in views.items():
        if not isinstance(view, str) or not NAME_PATTERN.match(view):
            raise InvalidInput(
                f"view names must be 1-128 letters, digits, '.', '_' or '-'; got {view!r}"
            )
        out.append((view, validate_size(dim, f"views['{view}']", MAX_FEATURES)))
    if sum(dim for _, dim in out) > MAX_FEATURES:
        raise InvalidInput(f"the views have more than {MAX_FEATURES} features in all")
    return out


def validate_view_names(names: Any, views: list[tuple[str, int]]) -> list[str] | None:
    """Optional ``{"<view>": [names...]}``, flattened in view order (stored like fsds names)."""
    if names is None:
        return None
    if not isinstance(names, dict) or set(names) != {view for view, _ in views}:
        got = sorted(names) if isinstance(names, dict) else type(names).__name__
        raise InvalidInput(
            f"feature_names of a multi-view selector must be an object with a list for every "
            f"view {[view for view, _ in views]}; got {got}"
        )
    flat: list[str] = []
    for view, dim in views:
        flat += validate_names(names[view], dim, f"feature_names['{view}']", "feature") or []
    return flat


def views_of(meta: SelectorMeta) -> list[tuple[str, int]]:
    return [(str(view), int(dim)) for view, dim in meta.extra.get("views") or []]


def n_samples_of(meta: SelectorMeta) -> int:
    """The fixed number of samples of a feature-stream (``"columns"``) selector."""
    return int(meta.extra["n_samples"])


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
    if "views" in meta.extra:
        body["views"] = dict(views_of(meta))
    if "n_samples" in meta.extra:
        # A feature stream: the samples are fixed and every applied item is a feature.
        body["n_samples"] = n_samples_of(meta)
        body["n_features"] = head.rows_seen
        body["features_seen"] = head.rows_seen
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
        # Committed state is immutable per state key (unique per commit): cache a few decoded
        # small arrays (scores, decisions) to skip Redis reads and decoding.
        self._arrays_cache: OrderedDict[tuple[str, str, tuple[str, ...]], dict[str, np.ndarray]]
        self._arrays_cache = OrderedDict()
        # Pivoted-QR selections are a pure function of (state, h, l): cache the last few.
        self._pivoted_cache: OrderedDict[tuple[Any, ...], dict[str, Any]] = OrderedDict()
        # k-means answers are a pure function of (state, k, seed): cache the last few.
        self._cluster_cache: OrderedDict[tuple[str, str, int, int], dict[str, Any]] = OrderedDict()

    # -- selectors -------------------------------------------------------------------------

    async def create(
        self,
        name: Any,
        method_name: Any,
        n_features: Any = None,
        feature_names: Any = None,
        params: Any = None,
        n_samples: Any = None,
        n_objects: Any = None,
        views: Any = None,
    ) -> dict[str, Any]:
        """Create a selector: ``n_features`` for rows, ``n_samples`` for feature columns.

        ``n_objects`` is accepted for ``n_samples`` (IQRP's paper calls the rows objects).
        """
        name = validate_name(name)
        if not isinstance(method_name, str):
            raise InvalidInput(f"method must be a string; got {method_name!r}")
        method = get_method(method_name)
        extra: dict[str, Any] = {}
        if n_objects is not None:
            if n_samples is not None:
                raise InvalidInput("give n_samples or n_objects (the same thing), not both")
            n_samples = n_objects
        if params is not None and not isinstance(params, dict):
            raise InvalidInput(f"params must be an object; got {type(params).__name__}")
        params = dict(params or {})
        if method.name == "omvfs" or views is not None:
            if method.name != "omvfs":
                raise InvalidInput(f"views apply to multi-view methods (omvfs), not {method.name}")
            if n_features is not None or n_samples is not None:
                raise InvalidInput("a multi-view selector takes views, not n_features/n_samples")
            view_list = validate_views(views)
            n_features = size = sum(dim for _, dim in view_list)
            names = validate_view_names(feature_names, view_list)
            extra["views"] = [[view, dim] for view, dim in view_list]
            params["views"] = dict(view_list)
        elif method.stream == "columns":
            if n_features is not None or feature_names is not None:
                raise InvalidInput(
                    f"method {method.name} takes feature columns over fixed samples: expected "
                    "n_samples (features are counted and named as they arrive), not "
                    "n_features or feature_names"
                )
            size = validate_size(n_samples, "n_samples", MAX_SAMPLES)
            extra["n_samples"] = size
            names = None
            n_features = 0
        else:
            if n_samples is not None:
                raise InvalidInput(
                    f"method {method.name} takes rows over fixed features: expected n_features, "
                    "not n_samples"
                )
            size = n_features = validate_size(n_features, "n_features", MAX_FEATURES)
            names = validate_names(feature_names, n_features, "feature_names", "feature")
        resolved = method.resolve_params(params, size)
        meta = SelectorMeta(
            name=name,
            method=method.name,
            n_features=n_features,
            params=resolved,
            feature_names=names,
            created_at=time.time(),
            extra=extra,
        )
        initial = await asyncio.to_thread(
            lambda: encode_state(method.initial_state(resolved, size))
        )
        head = await self.store.create(meta, initial)
        return describe(meta, head)

    async def describe(self, name: str) -> dict[str, Any]:
        meta = await self.store.get_meta(name)
        labelled = get_method(meta.method).labelled
        wanted = ["__scalars__", COUNTS_FIELD] if labelled else ["__scalars__"]
        head, fields = await self.store.read_state_fields(name, wanted)
        summary = decode_state(fields) if fields.get("__scalars__") else {}
        # The commit trims the log up to its cursor atomically: what remains is pending.
        summary["pending_entries"] = await self.store.log_length(name)
        body = describe(meta, head, summary)
        if "features_kept" in summary:
            body["features_kept"] = summary["features_kept"]
        if labelled:
            # Labels as sent (integers stay integers), in order of discovery, with counts.
            counts = summary.pop(COUNTS_FIELD, [])
            classes = stored_classes(summary)
            summary.pop(CLASSES_FIELD, None)
            body["classes"] = [
                {"label": label, "count": int(count)}
                for label, count in zip(classes, counts, strict=True)
            ]
        return body

    async def list_selectors(self) -> list[dict[str, Any]]:
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
        """Append a chunk of rows; answer with the version that contains it (or 202)."""
        method = require_stream(meta, "rows")
        try:
            rows, payload, classes = await asyncio.to_thread(self._decode, body, media_type, meta)
            if classes:
                await self._check_class_budget(meta, classes)
        except InvalidInput as exc:
            self.metrics.chunks_rejected.labels(str(exc.status)).inc()
            raise
        digest = hashlib.sha256(payload).hexdigest()
        submitted = await self.submit(meta, method, payload, rows, digest, idempotency_key, wait)
        outcome = submitted.outcome
        if not submitted.applied:
            return ChunkReceipt(False, self.pending_body(outcome, rows))
        body_out = {
            "version": submitted.version,
            "rows_seen": submitted.rows_seen,
            "rows": rows,
            "duplicate": outcome.duplicate,
            "log_id": outcome.log_id,
        }
        return ChunkReceipt(True, body_out)

    async def push_features(
        self,
        meta: SelectorMeta,
        body: bytes,
        media_type: str,
        idempotency_key: str | None,
        wait: bool,
    ) -> ChunkReceipt:
        """Append new feature columns; answer with what the method decided for each (or 202).

        The decisions are read back from the committed state, where the method records them:
        a retried or repeated request gets the very same decisions, never new ones.
        """
        method = require_stream(meta, "columns")
        n_samples = n_samples_of(meta)

        def decode() -> tuple[int, bytes, list[str] | None]:
            columns, names = decode_columns(body, media_type, n_samples)
            return columns.shape[1], encode_matrix(columns), names

        try:
            count, payload, names = await asyncio.to_thread(decode)
        except InvalidInput as exc:
            self.metrics.chunks_rejected.labels(str(exc.status)).inc()
            raise
        # The names are part of the request: the same columns under other names are another body.
        hasher = hashlib.sha256(payload)
        hasher.update(b"\0".join(name.encode() for name in names or []))
        submitted = await self.submit(
            meta, method, payload, count, hasher.hexdigest(), idempotency_key, wait, names or ()
        )
        outcome = submitted.outcome
        if not submitted.applied:
            pending = self.pending_body(outcome, count)
            pending["columns"] = pending.pop("rows")
            pending["first_index"] = outcome.first
            return ChunkReceipt(False, pending)
        answer: dict[str, Any] = {
            "version": submitted.version,
            "features_seen": submitted.rows_seen,
            "rows_seen": submitted.rows_seen,
            "duplicate": outcome.duplicate,
            "log_id": outcome.log_id,
        }
        if method.name == "ofs":  # OFS decides on arrival; iqrp only stores the columns
            _head, answer["decisions"] = await self._decisions(meta, outcome.first, count)
        else:
            answer["columns"], answer["first_index"] = count, outcome.first
        return ChunkReceipt(True, answer)

    async def submit(
        self,
        meta: SelectorMeta,
        method: Method,
        payload: bytes,
        items: int,
        digest: str,
        idempotency_key: str | None,
        wait: bool,
        item_names: tuple[str, ...] | list[str] = (),
    ) -> Submitted:
        """Append with the idempotency record, then wait (bounded) for the applier."""
        name = meta.name
        outcome = await self.store.append(name, payload, items, digest, idempotency_key, item_names)
        if outcome.duplicate:
            self.metrics.chunks_duplicate.inc()
        else:
            self.metrics.chunks_accepted.labels(method.name).inc()
        if outcome.applied_version is not None:
            return Submitted(outcome, outcome.applied_version, outcome.rows_seen)
        self.applier.kick(name)
        if not wait:
            return Submitted(outcome, None, None)
        head = await self.applier.wait_applied(
            name, outcome.log_id, self.settings.apply_wait_seconds
        )
        if head is None:
            return Submitted(outcome, None, None)
        version, rows_seen = head.version, head.rows_seen
        if idempotency_key:
            # The idempotency record knows the exact version that applied the entry, so that a
            # repeated request answers exactly what the first one did.
            record = await self.store.idempotency_record(name, idempotency_key)
            if record is not None and record.applied_version is not None:
                version = record.applied_version
                rows_seen = record.rows_seen if record.rows_seen is not None else rows_seen
        return Submitted(outcome, version, rows_seen)

    def _decode(
        self, body: bytes, media_type: str, meta: SelectorMeta
    ) -> tuple[int, bytes, tuple[Label, ...]]:
        """Rows in the body, the log payload, and the classes of a labelled chunk."""
        limit = self.settings.max_body_bytes
        if get_method(meta.method).labelled:
            chunk = decode_labelled_rows(body, media_type, meta.n_features, limit)
            return chunk.n_rows, encode_chunk(chunk), chunk.classes
        if "views" in meta.extra:
            rows = decode_views(body, media_type, views_of(meta), limit)
        else:
            rows = decode_rows(body, media_type, meta.n_features, limit)
        return rows.shape[0], encode_matrix(rows), ()

    async def _check_class_budget(self, meta: SelectorMeta, classes: tuple[Label, ...]) -> None:
        """422 if the chunk would take the selector past ``max_classes`` (a row of sums each).

        Checked against the committed classes: chunks racing each other may overshoot by what
        they bring together, which stays bounded by the per-chunk limit.
        """
        _head, fields = await self.store.read_state_fields(meta.name, ["__scalars__"])
        known = stored_classes(decode_state(fields)) if fields.get("__scalars__") else []
        seen = {(type(label), label) for label in known}
        new = sum(1 for label in classes if (type(label), label) not in seen)
        budget = max_classes(meta.n_features)
        if len(known) + new > budget:
            raise InvalidInput(
                f"selector '{meta.name}' may hold at most {budget} classes (class sums of "
                f"{meta.n_features} features each); it has {len(known)} and this chunk brings "
                f"{new} new"
            )

    @staticmethod
    def pending_body(outcome: AppendOutcome, rows: int) -> dict[str, Any]:
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

    # -- feature streams -------------------------------------------------------------------

    async def read_arrays(
        self, name: str, fields: list[str], cache: bool = True
    ) -> tuple[Head, dict[str, np.ndarray]]:
        """Arrays of the committed state (decoded in a worker thread), cached per state key."""
        head = await self.store.get_head(name)
        key = (name, head.state_key, tuple(fields))
        cached = self._arrays_cache.get(key)
        if cached is not None:
            self._arrays_cache.move_to_end(key)
            return head, cached
        head, raw = await self.store.read_state_fields(name, fields)
        missing = [f for f in fields if f not in raw]
        if missing:
            raise CodecError(f"state of '{name}' at version {head.version} has no {missing}")
        arrays = await asyncio.to_thread(lambda: {f: decode_array(raw[f]) for f in fields})
        if cache:
            self._arrays_cache[(name, head.state_key, tuple(fields))] = arrays
            while len(self._arrays_cache) > 64:
                self._arrays_cache.popitem(last=False)
        return head, arrays

    async def _decisions(
        self, meta: SelectorMeta, first: int, count: int
    ) -> tuple[Head, list[dict[str, Any]]]:
        """Decisions on features ``first .. first + count - 1`` as the committed state has them."""
        head, arrays = await self.read_arrays(meta.name, DECISION_FIELDS)
        leverage = arrays["leverage"]
        count = max(0, min(count, int(leverage.size) - first))
        decided = await asyncio.to_thread(
            recorded_decisions,
            leverage,
            arrays["probability"],
            arrays["kept_indices"],
            arrays["kept_scales"],
            first,
            count,
        )
        names = await self.store.item_names(meta.name, [d.index for d in decided])
        return head, [
            {
                "index": d.index,
                "name": given or f"f{d.index}",
                "kept": d.kept,
                "leverage": d.leverage,
                "probability": d.probability,
                "scale": d.scale,
            }
            for d, given in zip(decided, names, strict=True)
        ]

    async def features(self, name: str, offset: int, limit: int) -> dict[str, Any]:
        """A page of decided features, in arrival order (also what a 202 answer can look up)."""
        meta = await self.store.get_meta(name)
        require_ofs(meta, "GET .../features lists the decisions")
        if offset < 0 or not 1 <= limit <= MAX_FEATURE_PAGE:
            raise InvalidInput(
                f"expected offset >= 0 and limit in [1, {MAX_FEATURE_PAGE}]; "
                f"got offset={offset}, limit={limit}"
            )
        head, decisions = await self._decisions(meta, offset, limit)
        return {
            "name": name,
            "version": head.version,
            "features_seen": head.rows_seen,
            "offset": offset,
            "features": decisions,
        }

    async def cluster(self, name: str, k: Any, seed: Any) -> dict[str, Any]:
        """k-means of the ``n_samples`` samples on the kept, rescaled columns (OFS, section 4)."""
        meta = await self.store.get_meta(name)
        require_ofs(meta, "POST .../cluster clusters the samples on the kept columns")
        n_samples = n_samples_of(meta)
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= n_samples:
            raise InvalidInput(f"k must be an integer in [1, n_samples={n_samples}]; got {k!r}")
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
            raise InvalidInput(f"seed must be an integer in [0, 2**32); got {seed!r}")
        head = await self.store.get_head(name)
        cached = self._cluster_cache.get((name, head.state_key, k, seed))
        if cached is not None:
            return cached
        # Kept columns can be large (n x kept): read for this answer only, never cached.
        head, arrays = await self.read_arrays(name, ["kept_columns"], cache=False)
        kept = arrays["kept_columns"]
        if kept.shape[1] == 0:
            raise Conflict(
                f"selector '{name}' has kept no feature yet ({head.rows_seen} seen): "
                "push feature columns first"
            )
        labels, objective = await asyncio.to_thread(cluster_samples, kept, k, seed)
        answer = {
            "name": name,
            "version": head.version,
            "features_seen": head.rows_seen,
            "features_used": int(kept.shape[1]),
            "k": k,
            "seed": seed,
            "objective": objective,
            "labels": labels,
        }
        self._cluster_cache[(name, head.state_key, k, seed)] = answer
        while len(self._cluster_cache) > 8:
            self._cluster_cache.popitem(last=False)
        return answer

    # -- rankings --------------------------------------------------------------------------

    async def ranking(self, name: str) -> Ranking:
        meta = await self.store.get_meta(name)
        field = get_method(meta.method).score_field
        head, arrays = await self.read_arrays(name, [field])
        return Ranking(meta, head, arrays[field])

    async def top(
        self,
        name: str,
        h: int,
        strategy: str = "score",
        candidates: int | None = None,
        view: str | None = None,
    ) -> dict[str, Any]:
        """The h best features: by score, or (``diverse``, and always for ``iqrp``) the h
        columns pivoted QR selects, i.e. h features that together span the data."""
        if strategy not in STRATEGIES:
            raise InvalidInput(f"strategy must be one of {', '.join(STRATEGIES)}; got {strategy!r}")
        meta = await self.store.get_meta(name)
        if meta.method == "iqrp":
            return await self._top_pivoted(meta, h, candidates, "stored columns")
        if strategy == "diverse":
            if meta.method != "fsds":
                raise InvalidInput(
                    f"strategy=diverse needs a sketch to select from (fsds); selector '{name}' "
                    f"runs {meta.method}"
                )
            return await self._top_pivoted(meta, h, candidates, "sketch")
        if candidates is not None:
            raise InvalidInput("l (IQRP's candidate list) applies to strategy=diverse and iqrp")
        if view is not None or "views" in meta.extra:
            return await self._top_by_view(meta, h, view)
        ranking = await self.ranking(name)
        weights = ranking.weights
        h = min(h, weights.size)
        # Highest score first; ties by the lower index so the order is deterministic
        # (argpartition would pick arbitrarily among ties at the cut).
        order = [int(i) for i in np.lexsort((np.arange(weights.size), -weights))[:h]]
        scores = [float(weights[i]) for i in order]
        return await self._top_answer(ranking.meta, ranking.head, order, scores)

    async def _top_by_view(self, meta: SelectorMeta, h: int, view: str | None) -> dict[str, Any]:
        """Multi-view ranking (OMVFS step 19): the top h of one view, or of every view in turn.

        ``index`` is the feature's position in its view; ``rank`` counts within the view.
        """
        views = views_of(meta)
        if not views:
            raise InvalidInput(f"view= applies to multi-view selectors; '{meta.name}' has no views")
        if view is not None and view not in dict(views):
            raise InvalidInput(f"unknown view {view!r}; expected one of {[v for v, _ in views]}")
        ranking = await self.ranking(meta.name)
        features = []
        start = 0
        for name, dim in views:
            scores = ranking.weights[start : start + dim]
            if view is None or name == view:
                order = np.lexsort((np.arange(dim), -scores))[: min(h, dim)]
                for rank, local in enumerate(order, start=1):
                    label = meta.feature_names[start + local] if meta.feature_names else f"f{local}"
                    features.append(
                        {
                            "rank": rank,
                            "view": name,
                            "index": int(local),
                            "name": label,
                            "score": float(scores[local]),
                        }
                    )
            start += dim
        return {
            "name": meta.name,
            "method": meta.method,
            "version": ranking.head.version,
            "rows_seen": ranking.head.rows_seen,
            "features": features,
        }

    async def _top_answer(
        self, meta: SelectorMeta, head: Head, order: list[int], scores: list[float]
    ) -> dict[str, Any]:
        if "n_samples" in meta.extra:
            given = await self.store.item_names(meta.name, order)
            names = [g or f"f{i}" for g, i in zip(given, order, strict=True)]
        else:
            names = [feature_name(meta, i) for i in order]
        return {
            "name": meta.name,
            "method": meta.method,
            "version": head.version,
            "rows_seen": head.rows_seen,
            "features": [
                {"rank": rank, "index": index, "name": label, "score": score}
                for rank, (index, label, score) in enumerate(
                    zip(order, names, scores, strict=True), start=1
                )
            ],
        }

    async def _top_pivoted(
        self, meta: SelectorMeta, h: int, candidates: int | None, source: str
    ) -> dict[str, Any]:
        """IQRP's exact pivoted-QR selection of h columns (scores are the pivots ``|R_jj|``).

        ``candidates`` is IQRP's l (default h). ``source`` is ``"stored columns"`` (an iqrp
        selector: blocks read from Redis in passes, skipped blocks never fetched) or
        ``"sketch"`` (fsds: the feature columns of the Frequent-Directions sketch B, in memory).
        Answers are cached per version.
        """
        head = await self.store.get_head(meta.name)
        cache_key = (meta.name, head.state_key, h, candidates, source)
        cached = self._pivoted_cache.get(cache_key)
        if cached is not None:
            self._pivoted_cache.move_to_end(cache_key)
            return cached
        if source == "sketch":
            head, arrays = await self.read_arrays(meta.name, ["sketch_rows"], cache=False)
            # In gaussian mode the sketch has random-feature columns after the m features.
            sketch = arrays["sketch_rows"][:, : meta.n_features]
            in_memory = MatrixSource(sketch)
            result = await asyncio.to_thread(iqrp, in_memory, h, candidates)
            blocks_total = len(in_memory.block_bounds)
        else:
            head, raw = await self.store.read_state_fields(meta.name, ["__scalars__", "tail"])
            state = await asyncio.to_thread(decode_state, raw)
            bounds = block_bounds(state, meta.params)
            if not bounds:
                raise Conflict(f"selector '{meta.name}' has no columns yet: push features first")
            columns = StoredColumns(
                self.store,
                meta.name,
                asyncio.get_running_loop(),
                bounds,
                int(state["full_blocks"]),
                state["tail"],
            )
            result = await asyncio.to_thread(iqrp, columns, h, candidates)
            blocks_total = len(bounds)
        answer = await self._top_answer(meta, head, result.indices, result.pivots)
        answer["strategy"] = "pivoted-qr"
        answer["account"] = pass_account(result, blocks_total)
        self._pivoted_cache[(meta.name, head.state_key, h, candidates, source)] = answer
        while len(self._pivoted_cache) > 32:
            self._pivoted_cache.popitem(last=False)
        return answer


def pass_account(result: IQRPResult, blocks_total: int) -> dict[str, Any]:
    """What IQRP's passes cost (section 4.3): passes, IO-passes, reads and flops."""
    return {
        "l": result.l,
        "passes": result.passes,
        "io_passes": result.io_passes,
        "columns_read": result.columns_read,
        "blocks_read": result.blocks_read,
        "blocks_total": blocks_total,
        "flops": result.flops,
        "flops_per_kmn": result.flops_per_kmn,
    }


def require_stream(meta: SelectorMeta, stream: str) -> Method:
    """The selector's method, if it takes this kind of chunk; else a 422 naming the right one."""
    method = get_method(meta.method)
    if method.stream != stream:
        if method.stream == "columns":
            expected = f"feature columns at POST /v1/selectors/{meta.name}/features"
        else:
            expected = f"rows at POST /v1/selectors/{meta.name}/chunks"
        raise InvalidInput(f"selector '{meta.name}' runs {method.name}, which takes {expected}")
    return method


def require_ofs(meta: SelectorMeta, what: str) -> None:
    """422 unless the selector runs OFS (decisions and kept columns exist only there)."""
    if meta.method != "ofs":
        require_stream(meta, "columns")  # the more helpful message for a row selector
        raise InvalidInput(f"{what} of an ofs selector; selector '{meta.name}' runs {meta.method}")
