"""Selectors by the thousand: listings filtered on the server (a name's prefix or a part of it,
the method, temporary or not) and deletion of every selector whose name starts with a prefix,
a bounded batch per request.

A grid search over ``SiftSelector`` makes a selector per fit; a dashboard over thousands of
them pages through what it looks for, and an operator removes a job's leftovers in one request
(``DELETE /v1/selectors?prefix=gs-``) instead of one per selector.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from service.errors import Inconsistent, NotFound, Unavailable
from service.selectors.lifecycle import Lifecycle
from service.selectors.results import SelectorList, SelectorsDeleted
from service.store.records import SelectorMeta

log = logging.getLogger("sift.selectors")

#: Selectors deleted side by side within one batch.
DELETE_CONCURRENCY = 16


@dataclass(frozen=True)
class SelectorFilter:
    """Which selectors a listing (or a deletion) takes, besides what the caller may see."""

    #: Names that start with this.
    prefix: str = ""
    #: Names that contain this, ignoring case.
    q: str = ""
    #: Selectors of this method (None: any).
    method: str | None = None
    #: Temporary ones only (True), none of them (False), or both (None).
    temporary: bool | None = None

    def names(self, visible: Callable[[str], bool]) -> Callable[[str], bool]:
        """The names this filter and ``visible`` (the caller's prefix) both take."""
        prefix, part = self.prefix, self.q.lower()
        return lambda name: (
            name.startswith(prefix) and (not part or part in name.lower()) and visible(name)
        )

    def descriptions(self) -> Callable[[SelectorMeta], bool] | None:
        """What this filter asks of a selector's description (None: nothing, then the listing
        reads no description to filter)."""
        if self.method is None and self.temporary is None:
            return None
        method, temporary = self.method, self.temporary
        return lambda meta: (
            (method is None or meta.method == method)
            and (temporary is None or meta.temporary == temporary)
        )


async def page(
    lifecycle: Lifecycle,
    limit: int,
    after: str | None,
    visible: Callable[[str], bool],
    chosen: SelectorFilter,
) -> SelectorList:
    """A page of the selectors ``chosen`` takes among those ``visible`` accepts."""
    return await lifecycle.page(limit, after, chosen.names(visible), chosen.descriptions())


async def delete_matching(
    lifecycle: Lifecycle,
    limit: int,
    after: str | None,
    visible: Callable[[str], bool],
    chosen: SelectorFilter,
    everything: bool = False,
) -> SelectorsDeleted:
    """Delete at most ``limit`` of the selectors ``chosen`` takes (a prefix is required, or
    ``everything``) among those ``visible`` accepts, after ``after``, ``DELETE_CONCURRENCY``
    at a time; what was deleted, and ``next`` when more may match."""
    # Parameters that the schema allows one by one, refused together (``inconsistent``).
    if not chosen.prefix and not everything:
        raise Inconsistent(
            "deleting selectors by name needs a prefix (prefix=gs-), or all=true to delete "
            "every selector this API key may see"
        )
    if chosen.prefix and everything:
        raise Inconsistent("give a prefix or all=true, not both")
    names = await lifecycle.inventory.page(
        limit, after, chosen.names(visible), chosen.descriptions()
    )
    gate = asyncio.Semaphore(DELETE_CONCURRENCY)

    async def delete(name: str) -> bool:
        async with gate:
            try:
                await lifecycle.delete(name)
            except NotFound:  # deleted meanwhile (by an expiry, another request)
                return False
            return True

    outcomes = await asyncio.gather(*(delete(n) for n in names.names), return_exceptions=True)
    deleted, failed = [], []
    for name, outcome in zip(names.names, outcomes, strict=True):
        if outcome is True:
            deleted.append(name)
        elif isinstance(outcome, Unavailable):
            raise outcome
        elif isinstance(outcome, BaseException):
            log.error("selector %s could not be deleted", name, exc_info=outcome)
            failed.append(name)
    if deleted:
        log.info("deleted %d selectors (%s...)", len(deleted), deleted[0])
    return SelectorsDeleted(deleted=deleted, next=names.next, failed=failed)
