"""Selectors' lifecycle: create (validated by the method and its chunk kind), describe, list,
delete."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np

from service import tracing
from service.algorithms import get_method, require_capability
from service.algorithms.base import AnyMethod, Mergeable
from service.algorithms.params import MethodParams
from service.algorithms.subsamples import of_resamples
from service.applier import publish, state_size_problem
from service.config import Settings
from service.errors import (
    Conflict,
    Inconsistent,
    InvalidInput,
    InvalidParams,
    NotFound,
    SelectorMismatch,
    StateTooLarge,
    Unavailable,
    shown,
)
from service.selectors.reading import StateReader, seen
from service.selectors.results import SelectorList, SelectorOut
from service.store.codec import encode_state
from service.store.inventory import Inventory, declared_state_bytes
from service.store.keys import validate_name, validate_stream_name
from service.store.records import (
    MAX_PARTITIONS,
    Attached,
    Attachment,
    Head,
    SelectorMeta,
    StreamMeta,
    new_incarnation,
)
from service.store.redis_store import SelectorStore
from service.wire.kinds import ChunkFormat, Shape, chunk_format, creation_shape
from service.wire.media import whole_floats_as_ints

log = logging.getLogger("sift.selectors")

#: Fields of a ``POST /v1/selectors`` body (which of them apply depends on the method's kind).
CREATE_FIELDS = (
    "name",
    "method",
    "n_features",
    "feature_names",
    "params",
    "n_samples",
    "n_objects",
    "views",
    "partitions",
    "expires_after",
    "temporary",
    "stream",
    "from",
)
#: Where a selector attached to a stream starts (``from``): the oldest entry the stream holds,
#: or its next one.
STREAM_STARTS = ("start", "now")
#: The longest ``expires_after`` (seconds): 30 days.
MAX_EXPIRES_AFTER = 30 * 86_400.0
#: Selectors looked at for expiry per pass (``Lifecycle.expire_idle``).
EXPIRY_BATCH = 100
#: The fields of a creation body that give a shape (a selector attached to a stream takes the
#: stream's instead).
SHAPE_FIELDS = ("n_features", "n_samples", "n_objects", "views")
#: An attachment whose selector does not claim its stream is removed once this old (ms): a
#: younger one may belong to a create still running (ATTACH comes before CREATE).
REAP_AFTER_MS = 60_000
#: Tries of a detach whose selector committed again after its checkpoint was brought up.
DETACH_ATTEMPTS = 5


def selector_out(
    meta: SelectorMeta, kind: ChunkFormat, head: Head, **described: Any
) -> SelectorOut:
    """What a selector is, at ``head``; ``described`` adds what describing its state shows."""
    body: dict[str, Any] = {
        "name": meta.name,
        "method": meta.method,
        "chunk_kind": kind.name,
        # A feature stream's features are the ones seen so far.
        "n_features": meta.n_features if meta.n_features is not None else head.items_seen,
        "params": meta.params,
        "version": head.version,
        **seen(kind, head).as_dict(),
        "created_at": meta.created_at,
        "updated_at": head.updated_at,
        "has_feature_names": meta.feature_names is not None,
    }
    if meta.expires_after is not None:
        body["expires_after"] = meta.expires_after
    if meta.temporary:
        body["temporary"] = True
    if meta.n_samples is not None:
        body["n_samples"] = meta.n_samples
    if meta.views is not None:
        body["views"] = dict(meta.views)
    if head.partition_versions is not None:
        body["partitions"] = meta.partitions
        body["versions"] = list(head.partition_versions)
    if meta.stream is not None:
        body["stream"] = meta.stream
        body["stream_base"] = meta.stream_base
    return SelectorOut(**body, **described)


def creation_document(document: Any) -> dict[str, Any]:
    """A ``POST /v1/selectors`` body with known fields, at least a name and a method; JSON's
    3.0 is the integer 3 wherever one is expected."""
    if not isinstance(document, dict):
        raise InvalidInput(f"expected a JSON object; got {type(document).__name__}")
    unknown = sorted(set(document) - set(CREATE_FIELDS))
    if unknown:
        raise InvalidInput(
            f"unexpected fields {unknown}; expected some of: {', '.join(CREATE_FIELDS)}"
        )
    if "name" not in document or "method" not in document:
        raise InvalidInput("expected at least the fields name and method")
    converted: dict[str, Any] = whole_floats_as_ints(document)
    return converted


def shaped_meta(
    name: str,
    method: str,
    params: dict[str, Any],
    created_at: float,
    shape: Shape,
    **more: Any,
) -> SelectorMeta:
    """The description of a new incarnation of selector ``name`` of ``shape``; ``more``: the
    other fields of its description."""
    return SelectorMeta(
        name=name,
        method=method,
        params=params,
        created_at=created_at,
        n_features=shape.n_features,
        n_samples=shape.n_samples,
        views=shape.views,
        feature_names=shape.feature_names,
        incarnation=new_incarnation(),
        **more,
    )


@dataclasses.dataclass(frozen=True)
class Creation:
    """A creation checked as a whole: the selector it describes, its method and kind, the
    parameters the method resolved, and the stream it attaches to (None: none) and where it
    starts there."""

    meta: SelectorMeta
    method: AnyMethod
    kind: ChunkFormat
    resolved: MethodParams
    stream: StreamMeta | None
    start: str


#: A creation's admission (``Tenancy.admit``: the quotas that bind the caller): the name
#: created, and what it would add.
Admit = Callable[..., Awaitable[None]]


class Lifecycle:
    def __init__(
        self,
        store: SelectorStore,
        reader: StateReader,
        settings: Settings,
        bring_up_to_date: Callable[[str], Awaitable[Head]],
        forget: Callable[[str], None],
    ) -> None:
        """``bring_up_to_date``: the applier's ``checkpoint_now``; ``forget``: its ``forget``
        (what it holds of a selector that changes under it)."""
        self.store = store
        self.reader = reader
        self.settings = settings
        self.inventory = Inventory(store)
        self.bring_up_to_date = bring_up_to_date
        self.forget = forget

    async def create(self, document: Any, admit: Admit | None = None) -> SelectorOut:
        """Create a selector from a ``POST /v1/selectors`` body; ``admit(name, selectors=1,
        state_bytes=...)`` (the caller's quotas) is awaited once the body is checked and
        before anything is written.

        The method's chunk kind reads the shape (``n_features``, ``n_samples`` or ``views``);
        the method resolves its parameters; the state the parameters imply must fit
        ``SIFT_MAX_STATE_BYTES`` (computed without allocating it).
        """
        creation = await self._creation(creation_document(document))
        meta = creation.meta
        if admit is not None:  # counted as the tenant's usage counts it
            await admit(meta.name, selectors=1, state_bytes=declared_state_bytes(meta))
        initial_state = await asyncio.to_thread(creation.method.initial_state, creation.resolved)
        initial, published = await asyncio.to_thread(
            lambda: (
                encode_state(initial_state, elide_zeros=True),
                publish(meta, initial_state, elide_zeros=True),
            )
        )
        if creation.stream is not None:
            return await self._create_attached(
                meta, creation.stream, creation.start, initial, published
            )
        if not meta.partitioned:
            head = await self.store.registry.create(meta, initial, published=published)
            if meta.expires_after is not None:
                await self.store.registry.expire_after(
                    meta.name, head.updated_at + meta.expires_after
                )
            return selector_out(meta, creation.kind, head)
        # The name first (the description alone), so that a second create of it fails before
        # any partition exists; then each partition, a selector of its own.
        await self.store.registry.create_partitioned(meta)
        for index in range(meta.partitions):
            part = meta.partition(index)
            published = publish(part, initial_state, elide_zeros=True)
            await self.store.registry.create(part, initial, published=published)
        return selector_out(meta, creation.kind, await self.reader.head(meta.name))

    async def _creation(self, document: dict[str, Any]) -> Creation:
        """What a creation body (its fields checked) creates, checked as a whole."""
        name = validate_name(document["name"])
        if not isinstance(document["method"], str):
            raise InvalidInput(f"method must be a string; got {document['method']!r}")
        method = get_method(document["method"])
        params = document.get("params")
        if params is not None and not isinstance(params, dict):
            raise InvalidInput(f"params must be an object; got {type(params).__name__}")
        kind = chunk_format(method.chunk_kind)
        stream, start = self._stream(document)
        stream_meta = None
        if stream is not None:
            stream_meta = await self.store.streams.get_stream(stream)
            document = {**document, **self._shape_from_stream(document, stream_meta, method)}
        shape = kind.shape(document, method.name)
        partitions = self._partitions(document, method)
        expires_after = self._expires_after(document, partitions)
        temporary = document.get("temporary", False)
        if not isinstance(temporary, bool):
            raise InvalidInput(f"temporary must be true or false; got {shown(temporary)}")
        resolved = method.resolve_params({**(params or {}), **shape.params}, shape.size)
        self._check_fits(method, resolved, partitions)
        meta = shaped_meta(
            name,
            method.name,
            resolved.as_params(),
            time.time(),
            shape,
            partitions=partitions,
            expires_after=expires_after,
            temporary=temporary,
        )
        return Creation(meta, method, kind, resolved, stream_meta, start)

    def _check_fits(self, method: AnyMethod, resolved: MethodParams, partitions: int) -> None:
        """InvalidParams for partitions of parameters that do not merge; StateTooLarge for a
        state (of every partition together) over ``SIFT_MAX_STATE_BYTES``."""
        if partitions > 1 and isinstance(method, Mergeable):
            refusal = method.merge_refusal(resolved)
            if refusal is not None:
                raise InvalidParams(f"partitions: {refusal}")
        sizes = method.state_sizes(resolved)
        problem = state_size_problem(
            {field: size * partitions for field, size in sizes.items()},
            self.settings.max_state_bytes,
        )
        if problem is not None:
            raise StateTooLarge(
                f"a {method.name} selector of this size and these parameters cannot be created: "
                f"{problem}; use fewer features or parameters that need less memory"
            )

    @staticmethod
    def _stream(document: dict[str, Any]) -> tuple[str | None, str]:
        """The stream a creation attaches the selector to (None: none), and where it starts."""
        stream, start = document.get("stream"), document.get("from")
        if stream is None:
            if start is not None:
                raise InvalidInput("from applies to selectors attached to a stream (stream)")
            return None, "start"
        validate_stream_name(stream)
        start = "start" if start is None else start
        if start not in STREAM_STARTS:
            raise InvalidInput(f"from must be 'start' or 'now'; got {shown(start)}")
        return stream, start

    @staticmethod
    def _shape_from_stream(
        document: dict[str, Any], stream: StreamMeta, method: AnyMethod
    ) -> dict[str, Any]:
        """The shape fields of a selector attached to ``stream``: the stream's (a creation that
        gives its own is refused), for a method its chunks feed."""
        fed = chunk_format(stream.kind)
        if not fed.feeds_method(method):
            raise SelectorMismatch(
                f"stream '{stream.name}' carries {stream.kind}, which the methods "
                f"{', '.join(fed.fed_methods())} take; {method.name} takes {method.chunk_kind}"
            )
        shape = creation_shape(stream)
        given = [f for f in (*SHAPE_FIELDS, "feature_names") if document.get(f) is not None]
        if given:
            raise InvalidInput(
                f"a selector attached to a stream takes the stream's shape and names; expected "
                f"no {', '.join(given)}"
            )
        if document.get("partitions", 1) != 1:
            raise InvalidInput("partitions apply to selectors without a stream")
        if document.get("expires_after") is not None:
            # Whether it is idle depends on its stream's log, in another slot: an expiry could
            # not check it atomically with the delete.
            raise InvalidInput("expires_after applies to selectors without a stream")
        return shape

    async def _create_attached(
        self,
        meta: SelectorMeta,
        stream: StreamMeta,
        start: str,
        initial: dict[str, bytes],
        published: dict[str, bytes],
    ) -> SelectorOut:
        """Attach ``meta`` to ``stream`` (where it starts), then create it there; a create that
        fails takes its attachment back (ARCHITECTURE.md, "Streams")."""
        attached = await self.attach(meta, stream, start)
        meta = dataclasses.replace(
            meta,
            stream=stream.name,
            stream_incarnation=attached.stream_incarnation,
            stream_base=attached.items,
        )
        try:
            head = await self.store.registry.create(
                meta, initial, published=published, attached=attached
            )
        except BaseException:
            with contextlib.suppress(Exception):
                await self.store.streams.detach_from_stream(
                    stream.name, meta.name, meta.incarnation
                )
            raise
        if stream.feature_names is None:
            # Named by a chunk meanwhile? The names its chunks are matched to are the stream's.
            named = (await self.store.streams.get_stream(stream.name)).feature_names
            if named is not None:
                await self.store.registry.adopt_feature_names(meta.name, named)
        kind = chunk_format(get_method(meta.method).chunk_kind)
        return selector_out(meta, kind, head)

    async def attach(self, meta: SelectorMeta, stream: StreamMeta, start: str) -> Attached:
        """Record ``meta`` as attached to ``stream``. A stale attachment of the name (its
        selector gone: a crash between the two slots) is removed first (``reap``)."""
        try:
            return await self.store.streams.attach(
                stream.name, meta.name, meta.incarnation, start, stream.incarnation
            )
        except Conflict:
            await self.reap(stream.name)
            return await self.store.streams.attach(
                stream.name, meta.name, meta.incarnation, start, stream.incarnation
            )

    async def reap(self, stream: str) -> list[Attachment]:
        """The attachments of ``stream`` whose selectors claim it; the others (a selector
        deleted, created anew, or detached, when a crash came between its slot and the
        stream's) are removed, once older than ``REAP_AFTER_MS`` (a create may be running)."""
        attachments = await self.store.streams.attachments(stream)
        detaching = await self.store.streams.detaching(stream)
        every = [*attachments, *detaching]
        heads = await self.store.streams.attached_heads([a.selector for a in every])
        now_ms = time.time() * 1000
        live = []
        for attachment, head in zip(every, heads, strict=True):
            claims = head is not None and head == (attachment.incarnation, stream)
            unknown = head is not None and head[1] == "?"
            # A detach under way holds the log for its selector until it finishes (or it is
            # called again): only an attachment's selector may be a create still running.
            young = attachment.cut is None and now_ms - attachment.attached_ms < REAP_AFTER_MS
            if claims or unknown or young:
                if attachment.cut is None:
                    live.append(attachment)
                continue
            log.info(
                "stream %s: removed the attachment of %s (its selector no longer reads it)",
                stream,
                attachment.selector,
            )
            await self.store.streams.detach_from_stream(
                stream, attachment.selector, attachment.incarnation
            )
        return live

    async def detach(self, name: str) -> SelectorOut:
        """Make a selector attached to a stream standalone: it keeps its state and version and
        takes chunks directly from now on; its stream no longer waits for it nor keeps its
        log for it.

        Bounded however busy the stream is: the stream is first cut for the selector at its
        newest entry (``cut_stream``: no entry appended after that is the selector's, nor
        waits for it), then the selector takes no entry after the cut (``cut_selector``),
        applies those up to it and brings its checkpoint there (so that it never replays from
        the stream again), and is made standalone at the cut. Its state is then exactly the
        stream's entries through the cut (``detached_at`` in the answer). A detach cut short
        (the process died) is finished by calling it again, at the same cut."""
        meta = await self.store.registry.get_meta(name)
        if meta.stream is None:
            raise Conflict(f"selector '{name}' is not attached to a stream")
        method = get_method(meta.method)
        kind = chunk_format(method.chunk_kind)
        standalone = dataclasses.replace(meta, stream=None, stream_incarnation="", stream_base=0)
        # Not attached any more (its stream deleted or created anew): nothing after its cursor
        # is its.
        cut = await self.store.streams.cut_stream(meta.stream, name, meta.incarnation)
        cut = await self.store.streams.cut_selector(meta, cut)
        for _attempt in range(DETACH_ATTEMPTS):
            head = await self.bring_up_to_date(name)
            if await self.store.log.pending(name, head.cursor, 1):
                continue  # not applied through the cut yet (its lease held elsewhere)
            names: dict[int, str] = {}
            if kind.names_on_arrival:
                names = await self.store.streams.stream_item_names_from(
                    meta.stream, meta.stream_base, head.items_seen
                )
            if await self.store.streams.detach(meta, standalone, names):
                break
        else:
            raise Conflict(
                f"selector '{name}' has not applied its stream's chunks up to where it is "
                f"detached ({cut}) yet; retry"
            )
        with contextlib.suppress(Unavailable):  # else reaped later: it claims the stream no more
            await self.store.streams.detach_from_stream(meta.stream, name, meta.incarnation)
        self.forget(name)
        described = await self.describe(name)
        return described.model_copy(update={"detached_at": cut})

    @staticmethod
    def _partitions(document: dict[str, Any], method: AnyMethod) -> int:
        """``partitions`` of a creation: 1 by default; more only for a method that merges
        (each partition learns from part of the stream; reads merge them)."""
        partitions = document.get("partitions", 1)
        if isinstance(partitions, bool) or not isinstance(partitions, int):
            raise InvalidInput(f"partitions must be an integer; got {partitions!r}")
        if not 1 <= partitions <= MAX_PARTITIONS:
            raise InvalidInput(
                f"partitions must be between 1 and {MAX_PARTITIONS}; got {partitions}"
            )
        if partitions > 1:
            require_capability(
                method,
                Mergeable,
                "partitions apply to methods whose states merge",
                str(document.get("name")),
            )
        return partitions

    @staticmethod
    def _expires_after(document: dict[str, Any], partitions: int) -> float | None:
        """``expires_after`` of a creation: seconds without a commit before the selector is
        deleted (for a selector a job makes and forgets: a scikit-learn fit, a trial run)."""
        value = document.get("expires_after")
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidInput(f"expires_after must be a number of seconds; got {value!r}")
        if not 1 <= value <= MAX_EXPIRES_AFTER:
            raise InvalidInput(
                f"expires_after must be between 1 and {MAX_EXPIRES_AFTER:.0f} seconds (30 days); "
                f"got {value}"
            )
        if partitions > 1:  # two valid fields that contradict each other
            raise Inconsistent("expires_after applies to selectors without partitions")
        return float(value)

    async def expire_idle(self) -> list[str]:
        """Delete the selectors whose ``expires_after`` has passed since their last commit (and
        that have nothing pending); the names deleted. Each due selector is checked against
        its head, and deleted only if it is still idle at that commit (atomically): a chunk that
        arrives meanwhile keeps it. Any replica may do this; the first one deletes."""
        now, due = await self.store.registry.due_to_expire(EXPIRY_BATCH)
        deleted = []
        for name in due:
            try:
                meta = await self.store.registry.get_meta(name)
                head = await self.store.registry.get_head(name)
                if meta.expires_after is None:
                    await self.store.registry.forget_expiry(name)
                    continue
                ends = head.updated_at + meta.expires_after
                if ends <= now and await self.store.registry.delete(
                    name, idle_since=head.updated_at
                ):
                    log.info(
                        "selector %s expired (%g s without a commit)", name, meta.expires_after
                    )
                    deleted.append(name)
                else:  # written to since, or busy: look again when it would end
                    await self.store.registry.expire_after(name, max(ends, now + 1.0))
            except NotFound:
                await self.store.registry.forget_expiry(name)
        return deleted

    async def expire_forever(self, interval_s: float, stop: asyncio.Event) -> None:
        """``expire_idle`` every ``interval_s`` seconds until ``stop`` is set (an event, not a
        cancellation: one that lands inside a Redis call may come back as a connection error,
        which this loop survives by design)."""
        while not stop.is_set():
            try:
                await self.expire_idle()
            except Unavailable:
                pass  # the sweeper says it when Redis is away
            except Exception:
                log.exception("expiring idle selectors failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval_s)

    async def describe(self, name: str) -> SelectorOut:
        """The selector, the scalars of its state, what its method shows of the state, and the
        entries still pending."""
        with tracing.span("sift.read", {"sift.selector": name, "sift.read": "state"}) as span:
            selector = await self.reader.described(name)
            meta, method = selector.meta, selector.method
            head, state = await self.reader.state(name, method.describe_fields)
            tracing.annotate(span, {"sift.method": meta.method, "sift.version": head.version})
        shown = method.describe(state)
        # Scalars the method shows in its own form (a class list) are not repeated raw, nor
        # the resamples' copies of the method's own (``GET .../top`` says what they show).
        scalars = {
            key: value
            for key, value in state.items()
            if not isinstance(value, np.ndarray) and key not in shown and not of_resamples(key)
        }
        # Entries appended and not yet committed past (counted on the head, in one read).
        scalars["pending_entries"] = sum(
            [await self.store.log.pending_count(part) for part in self._stored_names(meta)]
        )
        return selector_out(meta, selector.kind, head, **shown, state=scalars)

    @staticmethod
    def _stored_names(meta: SelectorMeta) -> list[str]:
        """The selectors that hold ``meta``'s data: itself, or its partitions."""
        if not meta.partitioned:
            return [meta.name]
        return [meta.partition(i).name for i in range(meta.partitions)]

    async def page(
        self,
        limit: int,
        after: str | None,
        visible: Callable[[str], bool],
        accept: Callable[[SelectorMeta], bool] | None = None,
    ) -> SelectorList:
        """At most ``limit`` selectors after the name ``after``, sorted by name, among those
        ``visible`` accepts (a key's prefix filters before paging) whose description ``accept``
        takes (``Inventory.page``); reads only those (``service.selectors.listing``)."""
        names = await self.inventory.page(limit, after, visible, accept)
        described = []
        unreadable = []
        for name in names.names:
            try:
                meta = await self.store.registry.get_meta(name)
                head = await self.reader.head(name)
                described.append(
                    selector_out(meta, chunk_format(get_method(meta.method).chunk_kind), head)
                )
            except NotFound:  # deleted between listing and reading
                continue
            except Unavailable:
                raise
            except Exception:
                # One damaged record must not take the listing of every other selector down.
                log.exception("selector %s could not be described for a listing", name)
                unreadable.append(name)
        return SelectorList(selectors=described, next=names.next, unreadable=unreadable)

    async def delete(self, name: str) -> None:
        meta = await self.store.registry.get_meta(name)
        for part in self._stored_names(meta):
            if part != name:
                with contextlib.suppress(NotFound):  # a partition a failed create never made
                    await self.store.registry.delete(part)
        await self.store.registry.delete(name)
        await self._detached(meta)

    async def _detached(self, meta: SelectorMeta) -> None:
        """After ``meta`` was deleted: its stream keeps nothing more for it (best effort:
        ``reap`` removes what a failure here leaves)."""
        if meta.stream is not None:
            with contextlib.suppress(Unavailable):
                await self.store.streams.detach_from_stream(
                    meta.stream, meta.name, meta.incarnation
                )
