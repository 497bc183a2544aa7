"""Persistence of selectors in Redis: descriptions, ingest log, idempotency, leases, state.

The write path (see ARCHITECTURE.md, "The write path"):

* ``log.append`` puts a chunk on the selector's stream together with its idempotency record,
  in one Lua script;
* one applier at a time holds a lease (``leases.acquire_lease``) whose fencing token increases
  on every acquisition;
* ``commits.commit`` first writes the new state into a fresh hash that nothing points at yet,
  then flips the head in one compare-and-set script. Readers follow the head, so they see the
  old state or the new one, never a mix. Large states never travel as Lua arguments.

State keys are unique per write (version, fencing token and a random nonce), so a retry with a
stale expected version can never touch the blob the head points at. Every state hash also
carries a reserved ``__writer__`` field (the lease holder that wrote it, or ``create``): the
commit script flips the head only to a blob that is still exactly the one this applier wrote.

The store needs a client with ``decode_responses=False`` (payloads and state are binary).

This module owns ``SelectorStore``, the one object the service talks to: its construction, its
health and its shutdown. What it does lives in its parts (``service.store.parts``), each owning
one concern; what they share, in ``service.store.core``.
"""

from __future__ import annotations

from service.store.connection import RedisClient
from service.store.core import StoreCore
from service.store.keys import DEFAULT_PREFIX, validate_name
from service.store.parts.checkpoints import Checkpoints
from service.store.parts.commits import Commits
from service.store.parts.history import History
from service.store.parts.leases import Leases
from service.store.parts.log import Log
from service.store.parts.monitoring import Monitoring
from service.store.parts.registry import Registry
from service.store.parts.streams import Streams
from service.store.redis_errors import map_redis_errors


class SelectorStore(StoreCore):
    """All Redis access of Sift, in parts that each own one concern: ``store.log.append(...)``,
    ``store.commits.commit(...)``. Methods are async and raise the ``service.errors`` tree."""

    def __init__(
        self,
        redis: RedisClient,
        prefix: str = DEFAULT_PREFIX,
        idempotency_ttl_s: int = 86400,
        idempotency_max_records: int = 100_000,
        *,
        wait_replicas: int = 0,
        wait_ms: int = 1000,
    ) -> None:
        super().__init__(
            redis,
            prefix,
            idempotency_ttl_s,
            idempotency_max_records,
            wait_replicas=wait_replicas,
            wait_ms=wait_ms,
        )
        #: Which selectors exist and what they are.
        self.registry = Registry(self)
        #: Each selector's ingest log: appends, idempotency, pending marks, takes.
        self.log = Log(self, self.registry)
        #: The applier's lease per selector.
        self.leases = Leases(self)
        #: New versions, commit records and notices.
        self.commits = Commits(self, self.log)
        #: Checkpoints, segments and state reads.
        self.checkpoints = Checkpoints(self, self.registry)
        #: The ranking history.
        self.history = History(self)
        #: Baselines, alerts and their deliveries.
        self.monitoring = Monitoring(self)
        #: Streams, their appends and attachments.
        self.streams = Streams(self, self.registry, self.log)

    # -- health ------------------------------------------------------------------------------

    @map_redis_errors
    async def ping(self) -> bool:
        return bool(await self.redis.ping())

    async def close(self) -> None:
        """Stop the background marking (what is left unmarked, the next start sweeps)."""
        await self.log.stop_marking()


__all__ = ["SelectorStore", "validate_name"]
