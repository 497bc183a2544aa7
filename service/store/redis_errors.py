"""What a Redis failure means to Sift's clients: ``map_redis_errors`` turns connection-level
failures (an unreachable Redis or cluster node, loading, out of memory, a failover, refused
credentials) into the ``service.errors`` tree, and logs outages at a bounded rate.

Every Redis access of the store (``SelectorStore``), of the API keys and of the inventory goes
through it.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

from redis import exceptions as rexc
from redis.asyncio.cluster import RedisCluster

from service.errors import SiftError, Unavailable
from service.store.connection import refresh_topology

log = logging.getLogger("sift.store")

P = ParamSpec("P")
T = TypeVar("T")

#: At most one log line per this many seconds while Redis is unavailable.
_UNAVAILABLE_LOG_SECONDS = 5.0


#: Failures of the cluster client that are mistakes of ours, never the cluster's state.
_CLUSTER_MISUSE = (rexc.CrossSlotTransactionError, rexc.InvalidPipelineStack)


def unavailable_for(exc: rexc.RedisError | rexc.RedisClusterException) -> Unavailable | None:
    """The ``Unavailable`` a Redis failure means, or None if it is not an availability problem.

    The client sees a fixed sentence; the library's message (which names the Redis address)
    goes to the log only.
    """
    if isinstance(exc, rexc.RedisClusterException):
        # The cluster client reached no node, or no node serves the slot (a master down and
        # not yet replaced): retryable, unless it is a transaction across slots (our bug).
        if isinstance(exc, _CLUSTER_MISUSE):
            return None
        mapped = Unavailable("Redis Cluster is unreachable or reconfiguring; retry shortly", 1)
    elif isinstance(exc, rexc.BusyLoadingError):
        mapped = Unavailable("Redis is loading its dataset into memory; retry shortly", 2)
    elif isinstance(exc, rexc.ConnectionError | rexc.TimeoutError):
        mapped = Unavailable("Redis is unreachable; retry shortly", 1)
    elif isinstance(exc, rexc.OutOfMemoryError):
        mapped = Unavailable("Redis is out of memory (maxmemory reached); retry later", 5)
    elif isinstance(exc, rexc.ReadOnlyError | rexc.ClusterDownError | rexc.TryAgainError):
        mapped = Unavailable("Redis cannot accept writes right now; retry shortly", 1)
    elif isinstance(exc, rexc.ClusterError | rexc.AskError):
        # Redirections that did not settle (MOVED/ASK, "TTL exhausted"): a slot is moving to
        # another master, or a failover is under way.
        mapped = Unavailable("Redis Cluster is moving this data; retry shortly", 1)
    else:
        return None
    _log_unavailable(exc)
    return mapped


_last_unavailable_log = 0.0
_unavailable_unlogged = 0


def _log_unavailable(exc: rexc.RedisError | rexc.RedisClusterException) -> None:
    """Log Redis outages at most every few seconds: every request fails while Redis is down."""
    global _last_unavailable_log, _unavailable_unlogged
    now = time.monotonic()
    if now - _last_unavailable_log < _UNAVAILABLE_LOG_SECONDS:
        _unavailable_unlogged += 1
        return
    log.warning(
        "Redis unavailable (%s: %s); %d more failures since the last report",
        type(exc).__name__,
        exc,
        _unavailable_unlogged,
    )
    _last_unavailable_log, _unavailable_unlogged = now, 0


def map_redis_errors(fn: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """Turn connection-level Redis failures into ``Unavailable`` (503 + Retry-After)."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await fn(*args, **kwargs)
        except rexc.AuthenticationError as exc:
            # Permanent until an operator fixes the configuration: never a retryable 503.
            raise SiftError(
                f"Redis refused the service's credentials ({exc}); check SIFT_REDIS_URL"
            ) from exc
        except (rexc.RedisError, rexc.RedisClusterException) as exc:
            if isinstance(exc.__cause__, rexc.AuthenticationError):  # the cluster client's
                raise SiftError(
                    f"Redis refused the service's credentials ({exc.__cause__}); check "
                    "SIFT_REDIS_URL"
                ) from exc
            mapped = unavailable_for(exc)
            if mapped is None:
                raise
            if isinstance(exc, rexc.ConnectionError):
                await _drop_idle_connections(args[0] if args else None)
            raise mapped from exc

    return wrapper


async def _drop_idle_connections(owner: object) -> None:
    """Close the idle pooled connections of ``owner``'s Redis client after a connection error.

    They may be sockets to a Redis that has since restarted: the first command sent on one
    would fail once Redis is back (a 503 after ``/v1/readyz`` already said ready). Closed,
    they reconnect on their next use. Best effort: Redis may well be down right now. A
    cluster client instead learns the topology again (a master down, or replaced).
    """
    client = getattr(owner, "redis", None)
    if isinstance(client, RedisCluster):
        await refresh_topology(client)
        return
    pool = getattr(client, "connection_pool", None)
    if pool is None:
        return
    with contextlib.suppress(Exception):
        await pool.disconnect(inuse_connections=False)


def is_outage(exc: Exception) -> bool:
    """Whether ``exc`` says a Redis (cluster node) is unavailable, without logging it."""
    if isinstance(exc, rexc.RedisClusterException):
        return not isinstance(exc, _CLUSTER_MISUSE)
    return isinstance(
        exc,
        rexc.ConnectionError
        | rexc.TimeoutError
        | rexc.BusyLoadingError
        | rexc.ClusterError
        | rexc.AskError
        | rexc.TryAgainError,
    )
