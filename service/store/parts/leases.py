"""The leases part of the store: the applier lease of each selector.

One applier at a time holds a selector's lease; its fencing token increases on every
acquisition, so that a commit of an applier that lost its lease is refused. A lease holder is
named by its host, pid and a random part (``holder_died`` reads the first two).
"""

from __future__ import annotations

import os
import secrets
import socket

from service.store.core import Room, not_found
from service.store.records import Lease, as_text
from service.store.redis_errors import map_redis_errors


def _holder_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(8)}"


def holder_died(holder: str) -> bool:
    """Whether lease ``holder`` (``_holder_id``) is a process of this machine that exists no
    more: a restarted service need not wait out the lease of the one it replaces.

    Only a certainty counts (same host name, pid gone); anything else (another machine, a pid
    reused or not ours to signal) is taken as alive, and the lease simply expires. Breaking the
    lease of a process that is in fact alive would cost it its next commit (the fencing token
    refuses it), never the state.
    """
    host, _, rest = holder.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit() or int(pid_text) == os.getpid():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError):
        return False
    return False


class Leases(Room):
    """The applier lease: acquire, renew, release, break a dead holder's."""

    @map_redis_errors
    async def acquire_lease(self, name: str, ttl_ms: int) -> Lease | None:
        """Take the applier lease if free; None if someone holds it."""
        k = self.core.keys(name)
        holder = _holder_id()
        reply = await self.core.run(
            "acquire_lease", [k.head, k.lease, k.fence], [holder, int(ttl_ms)]
        )
        status = as_text(reply[0])
        if status == "NOTFOUND":
            raise not_found(name)
        if status == "BUSY":
            return None
        stream = as_text(reply[3]) if len(reply) > 3 else ""
        return Lease(
            name=name,
            token=int(reply[1]),
            holder=holder,
            incarnation=as_text(reply[2]),
            stream=stream or None,
            stream_incarnation=as_text(reply[4]) if stream else "",
            stream_cut=(as_text(reply[5]) or None) if stream and len(reply) > 5 else None,
        )

    @map_redis_errors
    async def break_dead_lease(self, name: str) -> bool:
        """Remove the lease of ``name`` if its holder is a process of this machine that died
        (``holder_died``); whether it did."""
        k = self.core.keys(name)
        holder = await self.core.redis.get(k.lease)
        if holder is None or not holder_died(as_text(holder)):
            return False
        return bool(await self.core.run("release_lease", [k.lease], [as_text(holder)]))

    @map_redis_errors
    async def lease_ttl_ms(self, name: str) -> int:
        """Milliseconds left on the applier lease of ``name`` (0 or less: nobody holds it)."""
        return int(await self.core.redis.pttl(self.core.keys(name).lease))

    @map_redis_errors
    async def renew_lease(self, lease: Lease, ttl_ms: int) -> bool:
        """Extend the lease; False if it was lost (expired or taken over)."""
        k = self.core.keys(lease.name)
        reply = await self.core.run(
            "renew_lease", [k.lease, k.fence], [lease.holder, lease.token, int(ttl_ms)]
        )
        return bool(reply)

    @map_redis_errors
    async def release_lease(self, lease: Lease) -> None:
        """Give the lease back (a no-op if it is no longer ours)."""
        k = self.core.keys(lease.name)
        await self.core.run("release_lease", [k.lease], [lease.holder])
