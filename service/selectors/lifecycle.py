"""Selectors' lifecycle: create (validated by the method and its chunk kind), describe, list,
delete."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from service.algorithms import METHODS, get_method
from service.algorithms.base import AnyMethod, Mergeable
from service.config import Settings
from service.errors import InvalidInput, InvalidParams, NotFound, SelectorMismatch, StateTooLarge
from service.selectors.reading import StateReader, seen
from service.selectors.results import SelectorList, SelectorOut
from service.store.codec import encode_state
from service.store.inventory import Inventory
from service.store.keys import validate_name
from service.store.records import MAX_PARTITIONS, Head, SelectorMeta
from service.store.redis_store import SelectorStore
from service.updates import publish, state_size_problem
from service.wire.kinds import Kind, kind_of
from service.wire.media import integral

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
)


def selector_out(meta: SelectorMeta, kind: Kind, head: Head, **described: Any) -> SelectorOut:
    """What a selector is, at ``head``; ``described`` adds what describing its state shows."""
    body: dict[str, Any] = {
        "name": meta.name,
        "method": meta.method,
        # A feature stream's features are the ones seen so far.
        "n_features": meta.n_features if meta.n_features is not None else head.items_seen,
        "params": meta.params,
        "version": head.version,
        **seen(kind, head).as_dict(),
        "created_at": meta.created_at,
        "updated_at": head.updated_at,
        "has_feature_names": meta.feature_names is not None,
    }
    if meta.n_samples is not None:
        body["n_samples"] = meta.n_samples
    if meta.views is not None:
        body["views"] = dict(meta.views)
    if head.partition_versions is not None:
        body["partitions"] = meta.partitions
        body["versions"] = list(head.partition_versions)
    return SelectorOut(**body, **described)


class Lifecycle:
    def __init__(self, store: SelectorStore, reader: StateReader, settings: Settings) -> None:
        self.store = store
        self.reader = reader
        self.settings = settings
        self.inventory = Inventory(store)

    async def create(self, document: Any) -> SelectorOut:
        """Create a selector from a ``POST /v1/selectors`` body.

        The method's chunk kind reads the shape (``n_features``, ``n_samples`` or ``views``);
        the method resolves its parameters; the state the parameters imply must fit
        ``SIFT_MAX_STATE_BYTES`` (computed without allocating it).
        """
        if not isinstance(document, dict):
            raise InvalidInput(f"expected a JSON object; got {type(document).__name__}")
        unknown = sorted(set(document) - set(CREATE_FIELDS))
        if unknown:
            raise InvalidInput(
                f"unexpected fields {unknown}; expected some of: {', '.join(CREATE_FIELDS)}"
            )
        if "name" not in document or "method" not in document:
            raise InvalidInput("expected at least the fields name and method")
        document = integral(document)  # JSON's 3.0 is the integer 3 wherever one is expected
        name = validate_name(document["name"])
        if not isinstance(document["method"], str):
            raise InvalidInput(f"method must be a string; got {document['method']!r}")
        method = get_method(document["method"])
        params = document.get("params")
        if params is not None and not isinstance(params, dict):
            raise InvalidInput(f"params must be an object; got {type(params).__name__}")
        kind = kind_of(method.chunk_kind)
        shape = kind.shape(document, method.name)
        partitions = self._partitions(document, method)
        resolved = method.resolve_params({**(params or {}), **shape.params}, shape.size)
        if partitions > 1 and isinstance(method, Mergeable):
            refusal = method.merge_refusal(resolved)
            if refusal is not None:
                raise InvalidParams(f"partitions: {refusal}")
        sizes = method.state_sizes(resolved, shape.size)
        problem = state_size_problem(
            {field: size * partitions for field, size in sizes.items()},
            self.settings.max_state_bytes,
        )
        if problem is not None:
            raise StateTooLarge(
                f"a {method.name} selector of this size and these parameters cannot be created: "
                f"{problem}; use fewer features or parameters that need less memory"
            )
        meta = SelectorMeta(
            name=name,
            method=method.name,
            params=resolved,
            created_at=time.time(),
            n_features=shape.n_features,
            n_samples=shape.n_samples,
            views=shape.views,
            feature_names=shape.feature_names,
            partitions=partitions,
        )
        initial_state = await asyncio.to_thread(method.initial_state, resolved, shape.size)
        initial, published = await asyncio.to_thread(
            lambda: (encode_state(initial_state), publish(meta, initial_state))
        )
        if not meta.partitioned:
            head = await self.store.create(meta, initial, published=published)
            return selector_out(meta, kind, head)
        # The name first (the description alone), so that a second create of it fails before
        # any partition exists; then each partition, a selector of its own.
        await self.store.create_partitioned(meta)
        for index in range(partitions):
            part = meta.partition(index)
            await self.store.create(part, initial, published=publish(part, initial_state))
        return selector_out(meta, kind, await self.reader.head(name))

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
        if partitions > 1 and not isinstance(method, Mergeable):
            offered = ", ".join(n for n, m in METHODS.items() if isinstance(m, Mergeable))
            raise SelectorMismatch(
                f"partitions apply to methods whose states merge ({offered}); "
                f"{method.name} does not merge"
            )
        return partitions

    async def describe(self, name: str) -> SelectorOut:
        """The selector, the scalars of its state, what its method shows of the state, and the
        entries still pending."""
        meta, method, kind = await self.reader.described(name)
        head, state = await self.reader.state(name, method.describe_fields)
        shown = method.describe(state)
        # Scalars the method shows in its own form (a class list) are not repeated raw.
        scalars = {
            key: value
            for key, value in state.items()
            if not isinstance(value, np.ndarray) and key not in shown
        }
        # Entries appended and not yet committed past (counted on the head, in one read).
        scalars["pending_entries"] = sum(
            [await self.store.pending_count(part) for part in self._stored_names(meta)]
        )
        return selector_out(meta, kind, head, **shown, state=scalars)

    @staticmethod
    def _stored_names(meta: SelectorMeta) -> list[str]:
        """The selectors that hold ``meta``'s data: itself, or its partitions."""
        if not meta.partitioned:
            return [meta.name]
        return [meta.partition(i).name for i in range(meta.partitions)]

    async def list(self) -> list[SelectorOut]:
        described = []
        for name in await self.store.list_names():
            try:
                meta = await self.store.get_meta(name)
                head = await self.reader.head(name)
            except Exception:  # deleted between listing and reading
                continue
            described.append(selector_out(meta, kind_of(get_method(meta.method).chunk_kind), head))
        return described

    async def page(
        self, limit: int, after: str | None, visible: Callable[[str], bool]
    ) -> SelectorList:
        """At most ``limit`` selectors after the name ``after``, sorted by name, among those
        ``visible`` accepts (a key's prefix filters before paging); reads only those."""
        names = await self.inventory.page(limit, after, visible)
        described = []
        for name in names.names:
            try:
                meta = await self.store.get_meta(name)
                head = await self.reader.head(name)
            except NotFound:  # deleted between listing and reading
                continue
            described.append(selector_out(meta, kind_of(get_method(meta.method).chunk_kind), head))
        return SelectorList(selectors=described, next=names.next)

    async def delete(self, name: str) -> None:
        meta = await self.store.get_meta(name)
        for part in self._stored_names(meta):
            if part != name:
                with contextlib.suppress(NotFound):  # a partition a failed create never made
                    await self.store.delete(part)
        await self.store.delete(name)
