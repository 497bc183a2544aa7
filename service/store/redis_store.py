"""Persistence of selectors in Redis: descriptions, ingest log, idempotency, leases, state.

The write path (see ARCHITECTURE.md, "The write path"):

* ``append`` puts a chunk on the selector's stream together with its idempotency record, in one
  Lua script;
* one applier at a time holds a lease (``acquire_lease``) whose fencing token increases on every
  acquisition;
* ``commit`` first writes the new state into a fresh hash that nothing points at yet, then flips
  the head in one compare-and-set script. Readers follow the head, so they see the old state or
  the new one, never a mix. Large states never travel as Lua arguments.

State keys are unique per write (version, fencing token and a random nonce), so a retry with a
stale expected version can never touch the blob the head points at. Every state hash also
carries a reserved ``__writer__`` field (the lease holder that wrote it, or ``create``): the
commit script flips the head only to a blob that is still exactly the one this applier wrote.

The store needs a client with ``decode_responses=False`` (payloads and state are binary).

This module owns ``SelectorStore``, the one object the service talks to: its construction, its
health and its shutdown. What it does lives in its rooms (``service.store.rooms``), each owning
one concern; what they share, in ``service.store.core``.
"""

from __future__ import annotations

from service.store import scripts
from service.store.connection import RedisClient
from service.store.keys import (
    DEFAULT_PREFIX,
    commits_channel,
    expiring_key,
    outboxes_key,
    pending_key,
    registry_key,
    validate_name,
)
from service.store.redis_errors import map_redis_errors
from service.store.rooms.checkpoints import Checkpoints
from service.store.rooms.commits import Commits
from service.store.rooms.history import History
from service.store.rooms.leases import Leases
from service.store.rooms.log import Log
from service.store.rooms.monitoring import Monitoring
from service.store.rooms.registry import Registry
from service.store.rooms.streams import Streams


class SelectorStore(Commits, Streams, Log, Checkpoints, Registry, Leases, History, Monitoring):
    """All Redis access of Sift. Methods are async and raise the ``service.errors`` tree."""

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
        """``wait_replicas`` > 0: every write that a client is told about (a chunk appended, a
        version committed, a checkpoint, a creation) is followed by ``WAIT wait_replicas
        wait_ms`` on the same connection, and is answered Unavailable unless that many
        replicas of the selector's master have it (``_run_acknowledged``)."""
        if redis.get_encoder().decode_responses:
            raise ValueError("SelectorStore needs a Redis client with decode_responses=False")
        if wait_replicas < 0 or wait_ms < 1:
            raise ValueError(
                f"need wait_replicas >= 0 and wait_ms >= 1; got {wait_replicas}, {wait_ms}"
            )
        if not prefix or "{" in prefix or "}" in prefix:
            raise ValueError(f"key prefix must be non-empty and free of braces, got {prefix!r}")
        if idempotency_ttl_s < 1:
            raise ValueError(f"idempotency_ttl_s must be >= 1, got {idempotency_ttl_s}")
        self.redis = redis
        self.prefix = prefix
        if idempotency_max_records < 1:
            raise ValueError(f"idempotency_max_records must be >= 1, got {idempotency_max_records}")
        self.idempotency_ttl_ms = int(idempotency_ttl_s) * 1000
        self.idempotency_max_records = int(idempotency_max_records)
        self.wait_replicas = int(wait_replicas)
        self.wait_ms = int(wait_ms)
        self._registry = registry_key(prefix)
        self._expiring = expiring_key(prefix)
        self._pending = pending_key(prefix)
        self._outboxes = outboxes_key(prefix)
        self._commits_channel = commits_channel(prefix)
        self._scripts = {name: redis.register_script(text) for name, text in scripts.ALL.items()}
        self._init_log()
        self._init_registry()
        self._init_streams()

    # -- health ------------------------------------------------------------------------------

    @map_redis_errors
    async def ping(self) -> bool:
        return bool(await self.redis.ping())

    async def close(self) -> None:
        """Stop the background marking (what is left unmarked, the next start sweeps)."""
        await self._stop_marking()


__all__ = ["SelectorStore", "validate_name"]
