"""Lease keepalive: a drain's lease renewed while it computes, until the drain says stop."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from service.errors import Unavailable
from service.store.records import Lease
from service.store.redis_store import SelectorStore

log = logging.getLogger("sift.applier")


async def keep_lease(
    store: SelectorStore, lease: Lease, lease_ms: int, stop: asyncio.Event
) -> None:
    """Renew the lease every third of it until ``stop`` is set (the fence, not the lease,
    is what keeps a stalled applier from committing)."""
    interval = lease_ms / 3000
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=interval)
            return
        try:
            renewed = await store.leases.renew_lease(lease, lease_ms)
        except Unavailable:
            continue  # Redis away: the commit will tell whether the lease survived
        if not renewed:
            log.warning("lost the lease of %s (token %s)", lease.name, lease.token)
            return
