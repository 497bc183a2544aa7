"""A real Redis Cluster of local ``redis-server`` processes, for the tests.

``LocalCluster`` starts ``masters * (1 + replicas)`` nodes on free 127.0.0.1 ports in a data
directory of their own (``--cluster-enabled yes``, ``--appendonly yes --appendfsync always`` by
default, no RDB), joins them with ``redis-cli --cluster create`` and waits until every node says
``cluster_state:ok`` (and, with replicas, until every replica has synced with its master). A
node can be SIGKILLed (``kill``) to make a failover happen; ``stop`` ends every process.

The nodes run with ``cluster-require-full-coverage no`` (as ``deploy/`` recommends): while a
master is down and not yet replaced, the slots of the other masters keep answering.
Never port 6379: every port is a free one the kernel handed out, and so is its cluster bus port
(``port + 10000``, which Redis uses for node-to-node traffic).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import redis
from redis.cluster import RedisCluster as SyncRedisCluster

from service.errors import SiftError
from service.store.embedded import find_redis_server
from tests.support.redis import free_port

#: redis-server and redis-cli ship together (Debian's redis-server package, Homebrew's redis).
START_TIMEOUT_S = 30.0
#: The offset of a node's cluster bus port from its client port (fixed by Redis).
BUS_PORT_OFFSET = 10_000


def free_cluster_port(taken: set[int]) -> int:
    """A free port whose cluster bus port (``+10000``) is a valid and free port too."""
    return free_port(also_free_at=BUS_PORT_OFFSET, taken=taken)


def redis_cli() -> str:
    """``redis-cli`` next to the ``redis-server`` the service would use."""
    server = Path(find_redis_server())
    beside = server.with_name("redis-cli")
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    raise SiftError(f"no redis-cli next to {server}: the cluster tests need it to create one")


@dataclass
class NodeProcess:
    """One ``redis-server`` on a fixed port and data directory: a cluster node
    (``--cluster-enabled yes``), or with ``cluster=False`` a plain server (a primary, or with
    ``--replicaof`` in ``settings`` its replica)."""

    port: int
    data_dir: Path
    settings: Sequence[str]
    cluster: bool = True
    process: subprocess.Popen[bytes] | None = None
    kills: int = 0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        command = [
            find_redis_server(),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.data_dir),
            *(
                ("--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{self.port}.conf")
                if self.cluster
                else ()
            ),
            "--appendonly",
            "yes",
            "--save",
            "",
            "--logfile",
            "redis.log",
            *self.settings,
        ]
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def client(self, timeout_s: float = 2.0) -> redis.Redis:
        """A plain client of this node alone (node-local commands: INFO, CLUSTER ...)."""
        return redis.Redis(
            host="127.0.0.1",
            port=self.port,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            decode_responses=True,
        )

    def answers(self) -> bool:
        with contextlib.suppress(redis.RedisError), self.client(0.5) as client:
            return bool(client.ping())
        return False

    def info(self, section: str) -> dict[str, str]:
        with self.client() as client:
            parsed = client.info(section)
        return {str(key): str(value) for key, value in parsed.items()}

    def cluster_info(self) -> dict[str, str]:
        with self.client() as client:
            parsed = client.execute_command("CLUSTER INFO")
        return {str(key): str(value) for key, value in dict(parsed).items()}

    def pause(self) -> None:
        """SIGSTOP: the node stops answering, its sockets stay open (a hung machine)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def wait_answers(self, timeout_s: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while not self.answers():
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.address} did not answer; log:\n{self.log_tail()}")
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL: the node is gone at once, as a crashed machine would be."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)
            self.kills += 1

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)  # a paused node cannot stop
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.process = None

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = (self.data_dir / "redis.log").read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


@dataclass
class LocalCluster:
    """``masters`` masters with ``replicas`` replicas each, on this machine."""

    root: Path
    masters: int = 3
    replicas: int = 0
    #: How long a master may be unreachable before the others mark it failed (Redis's default
    #: is 15 s; the tests want a failover within seconds).
    node_timeout_ms: int = 2_000
    #: ``always``: what is acknowledged is on disk (the failover tests); ``everysec``: the
    #: suites that test logic, not durability (as their single redis-server does).
    appendfsync: str = "always"
    extra_settings: Sequence[str] = ()
    nodes: list[NodeProcess] = field(default_factory=list)

    @property
    def url(self) -> str:
        """What ``SIFT_REDIS_URL`` says for this cluster: any node finds the others."""
        return f"redis+cluster://{self.nodes[0].address}"

    def start(self) -> LocalCluster:
        settings = [
            "--appendfsync",
            self.appendfsync,
            "--cluster-node-timeout",
            str(self.node_timeout_ms),
            "--cluster-require-full-coverage",
            "no",
            # Replicas sync at once instead of waiting 5 s for others to share the transfer.
            "--repl-diskless-sync-delay",
            "0",
            *self.extra_settings,
        ]
        taken: set[int] = set()
        for index in range(self.masters * (1 + self.replicas)):
            port = free_cluster_port(taken)
            taken |= {port, port + BUS_PORT_OFFSET}
            self.nodes.append(NodeProcess(port, self.root / f"node-{index}", settings))
        try:
            for node in self.nodes:
                node.start()
            self._wait(lambda: all(node.answers() for node in self.nodes), "every node answers")
            created = subprocess.run(
                [
                    redis_cli(),
                    "--cluster",
                    "create",
                    *(node.address for node in self.nodes),
                    "--cluster-replicas",
                    str(self.replicas),
                    "--cluster-yes",
                ],
                capture_output=True,
                text=True,
                timeout=START_TIMEOUT_S,
                check=False,
            )
            if created.returncode != 0:
                raise AssertionError(f"redis-cli --cluster create failed:\n{created.stdout}")
            self.wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def wait_healthy(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Until every running node says ``cluster_state:ok`` and every running replica is
        in sync with a master (``master_link_status:up``)."""

        def healthy() -> bool:
            for node in self.nodes:
                if not node.running:
                    continue
                with contextlib.suppress(redis.RedisError):
                    if node.cluster_info().get("cluster_state") != "ok":
                        return False
                    replication = node.info("replication")
                    if replication.get("role") == "slave" and (
                        replication.get("master_link_status") != "up"
                        or replication.get("master_sync_in_progress") != "0"
                    ):
                        return False
                    continue
                return False
            return True

        self._wait(healthy, "a healthy cluster", timeout_s)

    def _wait(self, probe: object, what: str, timeout_s: float = START_TIMEOUT_S) -> None:
        assert callable(probe)
        deadline = time.monotonic() + timeout_s
        while not probe():
            if time.monotonic() > deadline:
                tails = "\n".join(f"{n.address}:\n{n.log_tail(8)}" for n in self.nodes)
                raise AssertionError(f"timed out waiting for {what}; node logs:\n{tails}")
            time.sleep(0.1)

    def client(self) -> SyncRedisCluster:
        """A (synchronous) cluster client for the tests' own reads."""
        return SyncRedisCluster(
            host="127.0.0.1",
            port=next(n for n in self.nodes if n.running).port,
            socket_timeout=5.0,
        )

    def node(self, port: int) -> NodeProcess:
        return next(node for node in self.nodes if node.port == port)

    def master_of(self, key: str) -> NodeProcess:
        """The node that serves ``key``'s slot now, as a running node sees it."""
        with self.client() as client:
            slot = client.keyslot(key)
            port = int(client.nodes_manager.get_node_from_slot(slot).port)
        return self.node(port)

    def masters_now(self) -> list[NodeProcess]:
        """The running nodes that are masters now."""
        return [
            node
            for node in self.nodes
            if node.running and node.info("replication").get("role") == "master"
        ]

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class ReplicatedRedis:
    """A plain Redis primary with one replica (``--replicaof``), both ``appendfsync always``:
    what ``SIFT_REDIS_WAIT_REPLICAS`` waits for outside a cluster."""

    root: Path
    primary: NodeProcess | None = None
    replica: NodeProcess | None = None

    @property
    def url(self) -> str:
        assert self.primary is not None
        return f"redis://{self.primary.address}/0"

    def start(self) -> ReplicatedRedis:
        taken: set[int] = set()
        primary_port = free_cluster_port(taken)
        replica_port = free_cluster_port({primary_port, primary_port + BUS_PORT_OFFSET})
        common = ["--appendfsync", "always", "--repl-diskless-sync-delay", "0"]
        self.primary = NodeProcess(primary_port, self.root / "primary", common, cluster=False)
        replica_of = ["--replicaof", "127.0.0.1", str(primary_port)]
        self.replica = NodeProcess(
            replica_port, self.root / "replica", [*common, *replica_of], cluster=False
        )
        try:
            self.primary.start()
            self.primary.wait_answers()
            self.replica.start()
            self.replica.wait_answers()
            self.wait_in_sync()
        except BaseException:
            self.stop()
            raise
        return self

    def wait_in_sync(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Until the primary counts one replica online."""
        assert self.primary is not None
        primary = self.primary
        deadline = time.monotonic() + timeout_s
        while True:
            with contextlib.suppress(redis.RedisError):
                info = primary.info("replication")
                if info.get("connected_slaves") == "1" and "online" in info.get("slave0", ""):
                    return
            if time.monotonic() > deadline:
                raise AssertionError(f"the replica never synced; log:\n{primary.log_tail()}")
            time.sleep(0.05)

    def stop(self) -> None:
        for node in (self.replica, self.primary):
            if node is not None:
                node.stop()

    def __enter__(self) -> ReplicatedRedis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def local_cluster(root: Path, masters: int = 3, replicas: int = 0) -> Iterator[LocalCluster]:
    """A started ``LocalCluster`` in ``root``, stopped afterwards."""
    cluster = LocalCluster(root, masters=masters, replicas=replicas)
    with cluster:
        yield cluster
