"""Merges (capability ``Mergeable``): one selector takes another's state, exactly.

A merge goes through the write path like a chunk: its log entry holds the source's summary
(the fields the method's ``merge`` needs), so it is applied once, in log order, under the same
lease and idempotency rules as any chunk. The source's pending chunks are applied first; the
source itself does not change. Merging the same data twice counts it twice: merge disjoint
streams, and retry with the same ``Idempotency-Key``.
"""

from __future__ import annotations

import asyncio
import hashlib

from service.algorithms import require_capability
from service.algorithms.base import Mergeable
from service.algorithms.resampling import summary_fields_of
from service.algorithms.subsamples import resample_count
from service.applier import Applier, resolved_params
from service.config import Settings
from service.errors import Conflict, Inconsistent, SelectorMismatch
from service.selectors.ingest import Ingest, Receipt
from service.selectors.reading import StateReader, settle
from service.selectors.results import Merged
from service.store.codec import encode_state, pack_fields
from service.store.keys import validate_name
from service.store.records import Entry


class Merging:
    def __init__(
        self, reader: StateReader, ingest: Ingest, applier: Applier, settings: Settings
    ) -> None:
        self.reader = reader
        self.ingest = ingest
        self.applier = applier
        self.settings = settings

    async def merge(
        self, name: str, source: str, idempotency_key: str | None, wait: bool
    ) -> Receipt:
        """Add the state of selector ``source`` to ``name`` (same method, same features)."""
        selector = await self.reader.described(name)
        meta = selector.meta
        method = require_capability(
            selector.method,
            Mergeable,
            "a merge adds another selector's state, which only some methods can",
            name,
        )
        validate_name(source)
        if source == name:
            raise Inconsistent(f"cannot merge selector '{name}' into itself")
        other = await self.reader.meta(source)
        if other.method != meta.method or other.size != meta.size:
            raise SelectorMismatch(
                f"can merge a {meta.method} selector with {meta.size} features; '{source}' runs "
                f"{other.method} with {other.size}"
            )
        params = resolved_params(meta)
        ours, theirs = resample_count(params), resample_count(resolved_params(other))
        if theirs != ours:
            raise SelectorMismatch(
                f"'{name}' keeps {ours} resamples and '{source}' "
                f"{theirs}: a merge adds each resample to its own, so both "
                "must keep as many (selectors created before resamples existed keep none)"
            )
        if meta.feature_names and other.feature_names and meta.feature_names != other.feature_names:
            raise SelectorMismatch(
                f"'{name}' and '{source}' name their features differently: the columns would "
                "not line up"
            )
        await settle(self.applier, source, self.settings.apply_wait_seconds, "merge")
        fields = summary_fields_of(method, params)
        head, summary = await self.reader.state(source, fields)
        if head.items_seen == 0:
            raise Conflict(f"selector '{source}' has seen no rows: nothing to merge")
        lacking = [f for f in fields if f not in summary]
        if lacking:
            raise SelectorMismatch(
                f"'{name}' merges {lacking} from its source, which '{source}' does not keep: "
                f"its params differ ({other.params} here {meta.params}); merge selectors "
                "created with the same params"
            )
        payload = await asyncio.to_thread(lambda: pack_fields(encode_state(summary)))
        samples = method.summary_samples(summary)
        # The request is "merge <source>": a retry with the same key is a duplicate even if
        # the source has grown since, and the same key naming another source is refused.
        digest = hashlib.sha256(b"merge\0" + source.encode()).hexdigest()
        entry = Entry(payload, samples, digest, idempotency_key, merge=True)
        submitted = await self.ingest.submit(meta, entry, wait)
        merged = Merged(source=source, version=head.version, rows=samples)
        return self.ingest.merge_receipt(submitted, merged, samples)
