"""Streams: one log that several selectors apply, each exactly once with its own state.

A producer pushes a chunk to a stream once; every selector attached to it (created with
``"stream": "<name>"``, ``Lifecycle.create``) applies it through its own applier, as if the
chunk had been pushed to it alone (ARCHITECTURE.md, "Streams"). This room creates, describes,
lists and deletes streams, takes their chunks (validated by the stream's chunk kind exactly as a
selector's are, appended once, handed to this process's applier for each selector, waited for
per selector), says where a chunk got to, and puts the attached selectors' rankings side by
side with their pairwise agreement (``service.algorithms.agreement``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Callable, Sequence
from typing import Any

from service.algorithms import get_method
from service.algorithms.agreement import DEFAULT_PERSISTENCE, jaccard, rank_biased_overlap
from service.applier import Applier, is_applied
from service.config import Settings
from service.errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    NotFound,
    SiftError,
    Unavailable,
)
from service.metrics import Metrics
from service.selectors.ingest import (
    Ingest,
    Push,
    Receipt,
    once_more_if_stale,
    rejected,
    stored_payload,
)
from service.selectors.lifecycle import Lifecycle
from service.selectors.rankings import Rankings
from service.selectors.reading import counted, seen
from service.selectors.results import (
    Agreement,
    StreamChunkOut,
    StreamChunkSelector,
    StreamList,
    StreamOut,
    StreamRankings,
    StreamSelector,
    TopOut,
    Unranked,
)
from service.store.keys import compare_stream_ids, log_id_belongs, validate_stream_name
from service.store.records import (
    AppendOutcome,
    Attachment,
    Entry,
    SelectorMeta,
    StreamHead,
    StreamMeta,
    new_incarnation,
)
from service.store.redis_store import SelectorStore
from service.wire.kinds import STREAM_FIELDS, chunk_format, stream_kind
from service.wire.media import whole_floats_as_ints

#: Fields of a ``POST /v1/streams`` body.
CREATE_FIELDS = (*STREAM_FIELDS, "n_features", "feature_names", "views", "n_samples", "n_objects")
#: Most selectors one stream's rankings put side by side (every pair is compared).
MAX_SIDE_BY_SIDE = 64


class Streams:
    """Streams as the service offers them (see the module); the selectors' own rooms do the
    rest: ``lifecycle`` attaches, detaches and reaps, ``ingest`` decodes, ``rankings`` ranks."""

    def __init__(
        self,
        store: SelectorStore,
        lifecycle: Lifecycle,
        ingest: Ingest,
        rankings: Rankings,
        applier: Applier,
        settings: Settings,
        metrics: Metrics,
    ) -> None:
        self.store = store
        self.lifecycle = lifecycle
        self.ingest = ingest
        self.ranker = rankings
        self.applier = applier
        self.settings = settings
        self.metrics = metrics

    # -- lifecycle ---------------------------------------------------------------------------

    async def create(self, document: Any) -> StreamOut:
        """Create a stream from a ``POST /v1/streams`` body: its name and the shape fields of a
        selector's creation (which give its chunk kind, ``stream_kind``)."""
        if not isinstance(document, dict):
            raise InvalidInput(f"expected a JSON object; got {type(document).__name__}")
        unknown = sorted(set(document) - set(CREATE_FIELDS))
        if unknown:
            raise InvalidInput(
                f"unexpected fields {unknown}; expected some of: {', '.join(CREATE_FIELDS)}"
            )
        if "name" not in document:
            raise InvalidInput("expected the field name")
        document = whole_floats_as_ints(document)
        name = validate_stream_name(document["name"])
        kind, shape = stream_kind(document)
        meta = StreamMeta(
            name=name,
            kind=kind.name,
            created_at=time.time(),
            incarnation=new_incarnation(),
            n_features=shape.n_features,
            n_samples=shape.n_samples,
            views=shape.views,
            feature_names=shape.feature_names,
        )
        await self.store.streams.create_stream(meta)
        return self._out(meta, await self.store.streams.stream_head(name))

    async def describe(self, name: str, visible: Callable[[str], bool]) -> StreamOut:
        """The stream, its log, and the attached selectors ``visible`` lets the caller see."""
        meta = await self.store.streams.get_stream(name)
        head = await self.store.streams.stream_head(name)
        selectors = []
        for attachment in await self.lifecycle.reap(name):
            if not visible(attachment.selector):
                continue
            try:
                selector = await self.store.registry.get_meta(attachment.selector)
                at = await self.store.registry.get_head(attachment.selector)
                pending = await self.store.log.pending_count(attachment.selector)
            except NotFound:
                continue
            selectors.append(
                StreamSelector(
                    name=selector.name,
                    method=selector.method,
                    version=at.version,
                    **seen(chunk_format(get_method(selector.method).chunk_kind), at).as_dict(),
                    pending_entries=pending,
                    start=attachment.start,
                    checkpoint=attachment.released,
                )
            )
        return self._out(meta, head, selectors)

    async def page(
        self, limit: int, after: str | None, visible: Callable[[str], bool]
    ) -> StreamList:
        """At most ``limit`` streams after the name ``after``, sorted, among those ``visible``
        accepts."""
        names = [n for n in await self.store.streams.list_streams() if visible(n)]
        if after is not None:
            names = [n for n in names if n > after]
        shown, rest = names[:limit], names[limit:]
        out = []
        for name in shown:
            try:
                out.append(
                    self._out(
                        await self.store.streams.get_stream(name),
                        await self.store.streams.stream_head(name),
                    )
                )
            except NotFound:  # deleted between listing and reading
                continue
        return StreamList(streams=out, next=shown[-1] if rest and shown else None)

    async def delete(self, name: str, force: bool, visible: Callable[[str], bool]) -> None:
        """Delete a stream. With selectors attached: 409 naming them, unless ``force``, which
        detaches them first (each keeps its state and becomes a standalone selector; the
        stream takes no chunk and no attachment meanwhile)."""
        await self.store.streams.get_stream(name)  # 404 first
        # Attached, or being detached (a detach cut short): each holds the stream.
        attached = await self.lifecycle.reap(name)
        attached += await self.store.streams.detaching(name)
        if attached and not force:
            names = [a.selector for a in attached if visible(a.selector)]
            hidden = len(attached) - len(names)
            raise Conflict(
                f"stream '{name}' has {len(attached)} selectors attached"
                + (f" ({', '.join(names)})" if names else "")
                + "; delete or detach them first, or delete the stream with ?force=true "
                "(which detaches them: they keep their state)",
                selectors=names,
                **({"hidden": hidden} if hidden else {}),
            )
        if attached:
            await self._refuse_hidden(name, [a.selector for a in attached], visible)
            names = await self.store.streams.close_stream(name)
            await self._refuse_hidden(name, names, visible)
            for selector in names:
                with contextlib.suppress(NotFound):
                    await self.lifecycle.detach(selector)
            await self.lifecycle.reap(name)  # what a detach left to it (its selector gone)
        await self.store.streams.delete_stream(name)

    @staticmethod
    async def _refuse_hidden(
        name: str, selectors: Sequence[str], visible: Callable[[str], bool]
    ) -> None:
        hidden = [s for s in selectors if not visible(s)]
        if hidden:
            raise Forbidden(
                f"stream '{name}' has {len(hidden)} selectors attached that this API key may "
                "not see; a key that sees them must delete it"
            )

    def _out(
        self, meta: StreamMeta, head: StreamHead, selectors: list[StreamSelector] | None = None
    ) -> StreamOut:
        return StreamOut(
            name=meta.name,
            chunk_kind=meta.kind,
            n_features=meta.n_features,
            n_samples=meta.n_samples,
            views=None if meta.views is None else dict(meta.views),
            has_feature_names=meta.feature_names is not None,
            created_at=meta.created_at,
            entries=head.entries,
            items=head.appended,
            last_id=head.last_id,
            log_entries=head.length,
            trimmed_through=head.trimmed,
            methods=chunk_format(meta.kind).fed_methods(),
            selectors=selectors,
        )

    # -- chunks ------------------------------------------------------------------------------

    async def push(self, name: str, push: Push, visible: Callable[[str], bool]) -> Receipt:
        """Append a chunk to the stream's log once; every selector attached then applies it.
        With ``push.wait``, answer once each has applied it (or set it aside), else 202.

        The chunk is checked by the stream's kind exactly as a selector of that shape checks
        it; a labelled stream also keeps each labelled selector within its class budget."""
        return await once_more_if_stale(
            await self.store.streams.cached_stream(name),
            lambda meta: self._push(meta, push, visible),
            lambda: self.store.streams.get_stream(name),
        )

    async def _push(self, meta: StreamMeta, push: Push, visible: Callable[[str], bool]) -> Receipt:
        kind = chunk_format(meta.kind)

        async def adopt(names: tuple[str, ...]) -> list[str]:
            adopted = await self.store.streams.adopt_stream_names(meta.name, names)
            await self._name_selectors(meta.name, adopted)
            return adopted

        meta, decoded = await self.ingest.validated(
            kind, push, meta, adopt, self._labelled_selectors
        )
        payload = await stored_payload(decoded.payload, push.wait)
        outcome, attached = await self.store.streams.append_to_stream(
            meta.name,
            Entry(
                payload,
                decoded.items,
                decoded.digest,
                push.idempotency_key,
                decoded.names,
                incarnation=meta.incarnation,
            ),
        )
        covered = [a for a in attached if compare_stream_ids(a.start, outcome.log_id) < 0]
        if outcome.duplicate:
            self.metrics.chunks_duplicate.inc()
        else:
            self.metrics.chunks_accepted.labels("stream").inc()
        self.applier.appended(
            outcome.log_id,
            None if outcome.duplicate else decoded.chunk,
            len(payload),
            [(attachment.selector, attachment.incarnation) for attachment in covered],
        )
        answer = await self._outcomes(
            meta.name, outcome, decoded.items, covered, push.wait, visible
        )
        if answer.selectors and all(s.status == "rejected" for s in answer.selectors):
            reasons = "; ".join(f"{s.name}: {s.reason}" for s in answer.selectors)
            raise rejected(outcome.log_id, f"every selector set it aside ({reasons})")
        return Receipt(answer, answer.status == "applied")

    async def _labelled_selectors(self, meta: StreamMeta) -> list[SelectorMeta]:
        """The attached selectors whose method takes the stream's labels (their classes are
        bounded, ``Ingest.check_class_budget``)."""
        out = []
        for attachment in await self.store.streams.attachments(meta.name):
            with contextlib.suppress(NotFound):
                selector = await self.store.registry.cached_meta(attachment.selector)
                if chunk_format(meta.kind).feeds_whole(get_method(selector.method)):
                    out.append(selector)
        return out

    async def _name_selectors(self, stream: str, names: list[str]) -> None:
        """The names a stream took from its first named chunk, for the selectors attached
        to it (best effort: a selector attached afterwards copies them when created)."""
        for attachment in await self.store.streams.attachments(stream):
            with contextlib.suppress(NotFound, Unavailable):
                await self.store.registry.adopt_feature_names(attachment.selector, names)

    async def _outcomes(
        self,
        stream: str,
        outcome: AppendOutcome,
        items: int,
        covered: list[Attachment],
        wait: bool,
        visible: Callable[[str], bool],
    ) -> StreamChunkOut:
        """What became of entry ``outcome`` in each selector of ``covered`` that the caller
        may see: waited for together (bounded by ``SIFT_APPLY_WAIT_SECONDS``) when ``wait``."""
        deadline = time.monotonic() + self.settings.apply_wait_seconds
        shown = [a for a in covered if visible(a.selector)]
        # A chunk just appended is applied by nobody yet: no head to read before waiting.
        fresh = not outcome.duplicate and wait
        results = await asyncio.gather(
            *(self._outcome(a, outcome.log_id, wait, deadline, fresh) for a in shown)
        )
        selectors = [r for r in results if r is not None]
        return StreamChunkOut(
            stream=stream,
            log_id=outcome.log_id,
            status="pending" if any(s.status == "pending" for s in selectors) else "applied",
            items=items,
            first_index=outcome.first,
            duplicate=outcome.duplicate,
            selectors=selectors,
        )

    async def _outcome(
        self, attachment: Attachment, log_id: str, wait: bool, deadline: float, fresh: bool
    ) -> StreamChunkSelector | None:
        """Where entry ``log_id`` is in one attached selector (None: the selector is gone).
        ``fresh``: the entry was just appended (no head is read before waiting for it)."""
        name = attachment.selector
        try:
            meta = await self.store.registry.cached_meta(name)
            if meta.incarnation != attachment.incarnation:
                meta = await self.store.registry.get_meta(name)
                if meta.incarnation != attachment.incarnation:
                    return None
            kind = chunk_format(get_method(meta.method).chunk_kind)
            head = None if fresh else await self.store.registry.get_head(name)
            version = items_seen = 0
            reason: str | None = None
            if head is not None and is_applied(head, log_id):
                version, items_seen = head.version, head.items_seen
                reason = await self.store.log.rejection(name, log_id)
            else:
                if not wait:
                    return StreamChunkSelector(name=name, method=meta.method, status="pending")
                settled = await self.applier.wait_applied(
                    name, log_id, max(deadline - time.monotonic(), 0.0), meta.incarnation
                )
                if settled is None:
                    return StreamChunkSelector(name=name, method=meta.method, status="pending")
                version, items_seen, reason = settled.version, settled.items_seen, settled.rejected
                if reason is None:  # heard of from afar: its record says
                    reason, _record = await self.store.log.settled(name, log_id, None)
        except NotFound:
            return None
        counts = counted(kind, items_seen)
        return StreamChunkSelector(
            name=name,
            method=meta.method,
            status="rejected" if reason else "applied",
            version=version,
            **counts.as_dict(),
            reason=reason or None,
        )

    async def status(
        self, name: str, log_id: str, visible: Callable[[str], bool]
    ) -> StreamChunkOut:
        """Where a pushed chunk is in each selector that applies it (as a push's answer)."""
        meta = await self.store.streams.get_stream(name)
        head = await self.store.streams.stream_head(name)
        if (
            not log_id_belongs(meta.incarnation, log_id)
            or compare_stream_ids(log_id, head.last_id) > 0
        ):
            raise NotFound(f"stream '{name}' has no chunk with log id '{log_id}'")
        covered = [
            a
            for a in await self.store.streams.attachments(name)
            if compare_stream_ids(a.start, log_id) < 0
        ]
        outcome = AppendOutcome(log_id, False, None, None)
        answer = await self._outcomes(name, outcome, 0, covered, False, visible)
        return answer.model_copy(update={"duplicate": None, "items": None, "first_index": None})

    # -- side by side ------------------------------------------------------------------------

    async def rankings(
        self, name: str, h: int, visible: Callable[[str], bool], p: float = DEFAULT_PERSISTENCE
    ) -> StreamRankings:
        """Every attached selector's top ``h`` at its current version, and the pairwise
        agreement of those top-h lists (Jaccard, and rank-biased overlap with persistence
        ``p``); for multi-view streams, per view."""
        if h < 1:
            raise InvalidInput(f"h must be at least 1; got {h}")
        await self.store.streams.get_stream(name)
        attached = [a for a in await self.lifecycle.reap(name) if visible(a.selector)]
        if len(attached) > MAX_SIDE_BY_SIDE:
            raise InvalidInput(
                f"stream '{name}' has {len(attached)} selectors this key sees; at most "
                f"{MAX_SIDE_BY_SIDE} are put side by side"
            )
        tops: list[TopOut] = []
        unranked: list[Unranked] = []
        for attachment in attached:
            try:
                tops.append(await self._top_in_stream(attachment.selector, h))
            except NotFound:
                continue
            except SiftError as exc:
                if exc.status >= 500:
                    raise
                unranked.append(Unranked(name=attachment.selector, detail=exc.detail))
        agreement = [
            agreed for a, b in itertools.combinations(tops, 2) for agreed in _agreement(a, b, p)
        ]
        return StreamRankings(
            stream=name, h=h, p=p, selectors=tops, agreement=agreement, unranked=unranked
        )

    async def _top_in_stream(self, name: str, h: int) -> TopOut:
        """A selector's top h with its features indexed as its stream indexes them."""
        top = await self.ranker.top(name, h)
        meta = await self.store.registry.cached_meta(name)
        kind = chunk_format(get_method(meta.method).chunk_kind)
        features = [
            feature.model_copy(
                update={"index": kind.stream_feature(feature.index, meta.stream_base)}
            )
            for feature in top.features
        ]
        return top.model_copy(update={"features": features})


def _agreement(a: TopOut, b: TopOut, p: float) -> list[Agreement]:
    """How the top lists of ``a`` and ``b`` agree, per view (one comparison for streams
    without views)."""
    views: dict[str | None, tuple[list[int], list[int]]] = {}
    for feature in a.features:
        views.setdefault(feature.view, ([], []))[0].append(feature.index)
    for feature in b.features:
        views.setdefault(feature.view, ([], []))[1].append(feature.index)
    return [
        Agreement(
            a=a.name,
            b=b.name,
            view=view,
            jaccard=jaccard(first, second),
            rbo=rank_biased_overlap(first, second, p),
            shared=len(set(first) & set(second)),
        )
        for view, (first, second) in views.items()
    ]
