"""Where a source may connect: the addresses the operator's policy allows, and never Sift's own
Redis.

**The policy.** A source is a way to make the service connect where its admin (who may be one
tenant's, ``t1-``) chose: the server-side request forgery that alert webhooks guard against
(``service.monitoring.destinations``), with the same ``DestinationPolicy``. By default a source
reaches only global addresses (never loopback, private, unique local, shared, link-local such
as cloud metadata at 169.254.169.254, multicast, reserved or unspecified), and no Unix socket.
The operator opts hosts, networks and socket paths in with ``SIFT_SOURCE_PRIVATE``: buses
usually live on private networks, and that is where the operator says so.

**Judged on the address connected to.** A literal address, ``localhost``, and a name that
resolves only to refused addresses are refused when the source is created (``check``). At every
connection to the bus the host is resolved once and the connection goes to an address the
policy allows (``address``): never to the name, so a resolver that answers differently the
second time (DNS rebinding) is never asked twice. A Kafka cluster's brokers, which librdkafka
connects to itself, are judged by name (``service.sources.kafka`` says how).

**Never Sift's own Redis.** Whatever the policy says, a source may not reach the Redis that
holds Sift's state (one tenant would read another's logs through it): not at its address and
port, nor at any address of this machine on its port when it is local (``127.0.0.2``, ``[::1]``,
the host's own addresses), nor at its Unix socket, for every kind of bus. A Redis bus is also
asked, on each connection and before any read, for its ``run_id`` and replication id
(``INFO``): one that is Sift's own Redis's, or one of its nodes' or replicas', is refused,
whatever address or port reached it.

Refusals are ``Refused`` (the source retries, and its ``last_error`` says why in Sift's words).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import socket
import ssl
import time
from collections.abc import Mapping
from typing import Any

from redis import exceptions as rexc
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import Connection, SSLConnection, UnixDomainSocketConnection

from service.errors import DestinationNotAllowed
from service.monitoring.destinations import DestinationPolicy, IPAddress
from service.sources.bus import BusUnavailable
from service.sources.endpoints import Endpoint
from service.store.connection import RedisClient

#: Bound on resolving a bus's host name (at creation, and at each connection).
RESOLVE_TIMEOUT_SECONDS = 5.0
#: How long the addresses of Sift's own Redis are reused before they are resolved again.
OWN_ADDRESSES_SECONDS = 10.0
_NOT_REACHABLE = (
    "resolves only to addresses sources may not reach (loopback, private, link-local...; "
    "SIFT_SOURCE_PRIVATE opts them in)"
)
_OWN = "is Sift's own Redis, which a source may not read"


class Refused(BusUnavailable):
    """A connection Sift will not make, or a bus it will not read; the text is Sift's own."""


def _plain(address: IPAddress) -> IPAddress:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


_local: dict[IPAddress, bool] = {}


def is_local(address: IPAddress) -> bool:
    """Whether ``address`` is this machine's (a connection to it reaches a server listening on
    any of this machine's addresses): loopback, unspecified, or one it can bind."""
    address = _plain(address)
    if address.is_loopback or address.is_unspecified:
        return True
    known = _local.get(address)
    if known is None:
        family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((str(address), 0))
                known = True
            except OSError:
                known = False
        if len(_local) > 1024:
            _local.clear()
        _local[address] = known
    return known


class Reach:
    """The policy of one process's sources, and what Sift's own Redis is (module docstring)."""

    def __init__(self, policy: DestinationPolicy, own: RedisClient) -> None:
        self.policy = policy
        self.own = own
        self._own_at = 0.0
        self._own_pairs: set[tuple[IPAddress, int]] = set()
        self._own_local_ports: set[int] = set()
        self._own_paths: list[str] = []

    @classmethod
    def of(cls, source_private: str, own: RedisClient) -> Reach:
        policy = DestinationPolicy.of(
            "", source_private, what="sources", setting="SIFT_SOURCE_PRIVATE", paths=True
        )
        return cls(policy, own)

    # -- at creation ---------------------------------------------------------------------------

    async def check(self, where: Endpoint, field: str) -> None:
        """DestinationNotAllowed for a bus that can be judged now: a Unix socket not opted in
        or Sift's own, a literal address refused or Sift's own Redis's, a loopback name, a
        name that resolves only to such addresses. A name that does not resolve (yet) is
        judged when the source connects."""
        if where.path is not None:
            try:
                self.check_path(where.path)
            except Refused as exc:
                raise DestinationNotAllowed(str(exc)) from None
            return
        for host, port in where.hosts:
            self.policy.check_host(host, field)
            try:
                await self.address(host, port)
            except Refused as exc:
                if not isinstance(exc, _Unresolved):
                    raise DestinationNotAllowed(f"{field}: {exc}") from None

    # -- at each connection --------------------------------------------------------------------

    async def address(self, host: str, port: int) -> IPAddress:
        """The address to connect to for ``host``: the first it resolves to now that the
        policy allows and that is not Sift's own Redis; Refused otherwise."""
        try:
            async with asyncio.timeout(RESOLVE_TIMEOUT_SECONDS):
                allowed = await self.policy.allowed_addresses(host, port)
        except (OSError, TimeoutError):  # socket.gaierror is an OSError
            raise _Unresolved(f"the host name {host!r} does not resolve") from None
        await self._refresh_own()
        for address in allowed:
            if not self._is_own(address, port):
                return address
        if allowed:
            raise Refused(f"{shown_address(host, port)} {_OWN}")
        raise Refused(f"the host {host!r} {_NOT_REACHABLE}")

    def check_path(self, path: str) -> None:
        """Refused unless a Unix socket at ``path`` is opted in and is not Sift's own Redis."""
        if not self.policy.path_allowed(path):
            raise Refused(
                f"the Unix socket {path} is not one sources may reach unless the operator "
                "allows it (SIFT_SOURCE_PRIVATE)"
            )
        for own in self._own_socket_paths():
            with contextlib.suppress(OSError):
                if os.path.realpath(path) == os.path.realpath(own) or os.path.samefile(path, own):
                    raise Refused(f"the Unix socket {path} {_OWN}")

    async def not_own_redis(self, ids: set[str]) -> None:
        """Refused if a bus whose ``INFO`` gave ``ids`` (its run_id, its replication id) is
        Sift's own Redis, one of its nodes, or one of their replicas."""
        try:
            own = await asyncio.wait_for(self._own_ids(), RESOLVE_TIMEOUT_SECONDS)
        except (rexc.RedisError, OSError, TimeoutError):
            raise Refused(
                "Sift's own Redis does not answer, so the bus cannot be told from it"
            ) from None
        if ids & own:
            raise Refused(f"the bus {_OWN} (the same server, by its run_id)")

    # -- Sift's own Redis ----------------------------------------------------------------------

    def _is_own(self, address: IPAddress, port: int) -> bool:
        address = _plain(address)
        if (address, port) in self._own_pairs:
            return True
        return port in self._own_local_ports and is_local(address)

    def _own_nodes(self) -> list[tuple[str, int]]:
        if isinstance(self.own, RedisCluster):
            return [(node.host, int(node.port)) for node in self.own.get_nodes()]
        kwargs: Mapping[str, Any] = self.own.connection_pool.connection_kwargs
        if "path" in kwargs:
            return []
        return [(str(kwargs.get("host") or "localhost"), int(kwargs.get("port") or 6379))]

    def _own_socket_paths(self) -> list[str]:
        if isinstance(self.own, RedisCluster):
            return []
        kwargs = self.own.connection_pool.connection_kwargs
        return [str(kwargs["path"])] if kwargs.get("path") else []

    async def _refresh_own(self) -> None:
        """The addresses of Sift's own Redis (of every node of a cluster), resolved again when
        older than ``OWN_ADDRESSES_SECONDS``."""
        if time.monotonic() - self._own_at < OWN_ADDRESSES_SECONDS:
            return
        pairs: set[tuple[IPAddress, int]] = set()
        local_ports: set[int] = set()
        loop = asyncio.get_running_loop()
        for host, port in self._own_nodes():
            try:
                addresses = [ipaddress.ip_address(host)]
            except ValueError:
                try:
                    infos = await asyncio.wait_for(
                        loop.getaddrinfo(host, port, type=socket.SOCK_STREAM),
                        RESOLVE_TIMEOUT_SECONDS,
                    )
                except (OSError, TimeoutError):
                    continue
                addresses = [
                    ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos
                ]
            for address in addresses:
                pairs.add((_plain(address), port))
                if is_local(address):
                    local_ports.add(port)
        self._own_pairs, self._own_local_ports = pairs, local_ports
        self._own_at = time.monotonic()

    async def _own_ids(self) -> set[str]:
        """The run_ids and replication ids of Sift's own Redis (every node of a cluster)."""
        ids: set[str] = set()
        for section in ("server", "replication"):
            if isinstance(self.own, RedisCluster):
                answer: Any = await self.own.info(section, target_nodes=RedisCluster.ALL_NODES)
            else:
                answer = await self.own.info(section)
            infos = [answer] if _identity(answer) else [a for a in answer.values()]
            for info in infos:
                ids |= _identity(info)
        return ids


class _Unresolved(Refused):
    """The host name does not resolve (now)."""


def shown_address(host: str, port: int) -> str:
    """``host:port`` as written in a URL (an IPv6 address in brackets)."""
    return f"{'[' + host + ']' if ':' in host else host}:{port}"


def _identity(info: Any) -> set[str]:
    """The run_id and replication id in an ``INFO`` answer (parsed, or as text)."""
    if isinstance(info, bytes | str):
        text = info.decode("utf-8", "replace") if isinstance(info, bytes) else info
        info = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    if not isinstance(info, Mapping):
        return set()
    out = set()
    for name in ("run_id", "master_replid"):
        value = info.get(name, info.get(name.encode()))
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        value = str(value or "").strip()
        if len(value) == 40 and value.strip("0"):
            out.add(value)
    return out


# -- Redis: the connection classes a Redis bus uses ---------------------------------------------


class _CheckedRedis:
    """Connects to an address the reach allows (resolved once), and refuses Sift's own Redis
    before anything is read."""

    reach: Reach
    host: str
    port: int
    _address: IPAddress | None = None

    async def _connect(self) -> None:
        self._address = await self.reach.address(self.host, self.port)
        await super()._connect()  # type: ignore[misc]

    def _connection_arguments(self) -> Mapping[str, Any]:
        arguments = dict(super()._connection_arguments())  # type: ignore[misc]
        if self._address is not None:
            arguments["host"] = str(self._address)
            if arguments.get("ssl") is not None:
                arguments["server_hostname"] = self.host  # TLS checks the name, not the address
        return arguments

    async def on_connect_check_health(self, check_health: bool = True) -> None:
        await super().on_connect_check_health(check_health)  # type: ignore[misc]
        await _not_own(self)


class _CheckedUnix:
    reach: Reach
    path: str

    async def _connect(self) -> None:
        self.reach.check_path(self.path)
        await super()._connect()  # type: ignore[misc]

    async def on_connect_check_health(self, check_health: bool = True) -> None:
        await super().on_connect_check_health(check_health)  # type: ignore[misc]
        await _not_own(self)


class BusIsRefused(rexc.ConnectionError):
    """A Redis bus refused on connecting (its cause, a ``Refused``, says why)."""


async def _not_own(connection: Any) -> None:
    """Ask the bus for its identity (``INFO``), as the first commands after the handshake."""
    ids: set[str] = set()
    try:
        for section in ("server", "replication"):
            await connection.send_command("INFO", section, check_health=False)
            ids |= _identity(await connection.read_response())
    except rexc.ResponseError:
        refused = Refused(
            "the bus's Redis does not answer INFO, which Sift asks of every bus to tell it "
            "from its own Redis (allow the source's user INFO)"
        )
    else:
        if not ids:
            refused = Refused("the bus does not answer INFO as a Redis server does")
        else:
            try:
                await connection.reach.not_own_redis(ids)
                return
            except Refused as exc:
                refused = exc
    await connection.disconnect()
    raise BusIsRefused(str(refused)) from refused


def redis_connection_class(reach: Reach, where: Endpoint) -> type:
    """The connection class of a Redis bus at ``where``, checked by ``reach``."""
    if where.path is not None:
        base: type = UnixDomainSocketConnection
        mixin: type = _CheckedUnix
    else:
        base = SSLConnection if where.scheme == "rediss" else Connection
        mixin = _CheckedRedis
    return type(f"Checked{base.__name__}", (mixin, base), {"reach": reach})


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and len(out) < 8 and seen not in out:
        out.append(seen)
        seen = seen.__cause__ or seen.__context__
    return out


def network_failure(exc: BaseException) -> str:
    """What failed on the way to a bus, by the kind of the error (never its text: a peer's
    bytes, an address, a path would show)."""
    for error in _chain(exc):
        if isinstance(error, socket.gaierror):
            return "the host name does not resolve"
        if isinstance(error, ConnectionRefusedError):
            return "the connection was refused"
        if isinstance(error, ssl.SSLError | ssl.CertificateError):
            return "the TLS handshake or the server's certificate failed"
        if isinstance(error, TimeoutError | rexc.TimeoutError):
            return "no answer in time"
        if isinstance(error, ConnectionError | asyncio.IncompleteReadError | EOFError):
            return "the connection was closed"
        if isinstance(error, OSError):
            return "the host could not be reached"
    return "the connection failed or was closed"


def refusal(exc: BaseException) -> BusUnavailable | None:
    """The ``BusUnavailable`` (a ``Refused``) behind a library's exception, if any."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return None
        if isinstance(seen, BusUnavailable):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None
