"""How the service reaches Redis: one server (or a primary with replicas), or a Redis Cluster.

``SIFT_REDIS_URL`` names the server. A Redis Cluster is reached with redis-py's cluster client
when ``SIFT_REDIS_CLUSTER=true`` or when the URL's scheme says so: ``redis+cluster://host:port``
(``rediss+cluster://`` with TLS). Any one node is enough: the client asks it for the others and
for which master serves which slot, and learns again whenever a slot moves or a master fails.

Every key of a selector carries its hash tag (``service.store.keys``), so each selector's scripts
and transactions run on one slot; the registry and API keys live in other slots and are only
touched by single-key commands and non-transactional pipelines, which the cluster client splits
by node.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import TypeAlias
from urllib.parse import urlsplit, urlunsplit

import redis.asyncio as aioredis
from redis import exceptions as rexc
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

#: A connection to Redis: one server, or a cluster.
RedisClient: TypeAlias = aioredis.Redis | RedisCluster

#: URL schemes that say "this is a Redis Cluster", and the plain scheme each stands for.
CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}
#: Connections the cluster client may open to one node. Its default (100) is a hard limit that
#: raises instead of waiting: lingering appliers each hold one for a blocking read, so a busy
#: node would refuse work that a single Redis (whose pool is unbounded) serves.
CLUSTER_MAX_CONNECTIONS_PER_NODE = 10_000
#: A node that went away (a dead pod's address) must not stall a reconnect for the kernel's
#: two minutes: the client then tries the next node it knows.
CLUSTER_CONNECT_TIMEOUT_S = 2.0
#: How long readiness waits for one node's answer.
PROBE_TIMEOUT_S = 2.0
#: The cluster client does not retry a command itself. Its retries of a pipeline begin by
#: closing every connection to every node (``aclose``), which fails the commands in flight on
#: the healthy masters too: one master down would then cost every selector. Without them a
#: command on a master that is down fails at once (503, Retry-After) and the client looks the
#: topology up again before its next command (``refresh_topology`` after pipelines); the
#: client's own retry is left to the caller, who retries with its Idempotency-Key.
CLUSTER_RETRY = Retry(NoBackoff(), 0)


def cluster_url(url: str) -> tuple[str, bool]:
    """``url`` with a cluster scheme replaced by its plain one, and whether it had one."""
    parts = urlsplit(url)
    plain = CLUSTER_SCHEMES.get(parts.scheme.lower())
    if plain is None:
        return url, False
    return urlunsplit(parts._replace(scheme=plain)), True


def connect(url: str, *, cluster: bool = False) -> RedisClient:
    """A client of the Redis at ``url`` that returns raw bytes (the store needs them).

    A cluster (``cluster`` or a ``redis+cluster://`` URL) gets redis-py's cluster client; its
    query string may override the defaults set here (``?max_connections=...``).
    """
    plain, says_cluster = cluster_url(url)
    if not (cluster or says_cluster):
        return aioredis.from_url(plain)
    return RedisCluster.from_url(
        plain,
        max_connections=CLUSTER_MAX_CONNECTIONS_PER_NODE,
        socket_connect_timeout=CLUSTER_CONNECT_TIMEOUT_S,
        retry=CLUSTER_RETRY,
    )


def without_password(url: str) -> str:
    """``url`` with its password (if any) replaced by ``***``, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urlunsplit(parts._replace(netloc=user + netloc))


async def refresh_topology(client: RedisCluster) -> None:
    """Ask a node that answers which master serves which slot now (after a connection error:
    the master may be down, or replaced by its replica). A single command does this by itself
    on its next call; a failed pipeline does not. Best effort, bounded."""
    with contextlib.suppress(Exception):
        await asyncio.wait_for(client.nodes_manager.initialize(), CLUSTER_CONNECT_TIMEOUT_S * 2)


def is_cluster(client: RedisClient) -> bool:
    return isinstance(client, RedisCluster)


@dataclass(frozen=True)
class ClusterStatus:
    """What readiness says of a cluster: its state as a master that answers sees it, and how
    many of the masters the client knows answer a PING."""

    state: str
    masters: int
    #: The masters that answered (never shown: their addresses are internal).
    answering: tuple[ClusterNode, ...]

    @property
    def masters_answering(self) -> int:
        return len(self.answering)

    @property
    def serving(self) -> bool:
        """Whether some selectors can be served: the cluster says ok and a master answers. A
        master that is down (until its replica takes over) makes only its own slots answer
        503; refusing traffic everywhere for it would take the others' selectors down too."""
        return self.state == "ok" and self.masters_answering > 0

    def as_dict(self) -> dict[str, object]:
        return {
            "state": self.state,
            "masters": self.masters,
            "masters_answering": self.masters_answering,
        }


async def cluster_status(client: RedisCluster) -> ClusterStatus:
    """PING every master the client knows (each on its own) and read ``cluster_state`` from
    one that answered. Raises ``redis.exceptions.ConnectionError`` when none answers."""
    await client.initialize()
    masters = client.get_primaries()
    answers = await asyncio.gather(*(_answers(client, node) for node in masters))
    answering = [node for node, ok in zip(masters, answers, strict=True) if ok]
    if not answering:
        raise rexc.ConnectionError("no master of the Redis Cluster answers")
    state = "unknown"
    with contextlib.suppress(rexc.RedisError, TimeoutError):
        info = await asyncio.wait_for(
            client.cluster_info(target_nodes=answering[0]), PROBE_TIMEOUT_S
        )
        state = str(info.get("cluster_state", "unknown"))
    return ClusterStatus(state, len(masters), tuple(answering))


async def _answers(client: RedisCluster, node: ClusterNode) -> bool:
    try:
        return bool(await asyncio.wait_for(client.ping(target_nodes=node), PROBE_TIMEOUT_S))
    except (rexc.RedisError, rexc.RedisClusterException, TimeoutError, OSError):
        return False


__all__ = [
    "ClusterStatus",
    "RedisClient",
    "cluster_status",
    "cluster_url",
    "connect",
    "is_cluster",
    "refresh_topology",
]
