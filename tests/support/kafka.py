"""A real Apache Kafka broker for the tests: a single-node KRaft broker (``process.roles=broker,
controller``) run by the system's JDK from the jars ``scripts/kafka/fetch`` keeps in a cache
(the release pinned in ``scripts/kafka/pom.xml``, checksums checked), on free ports, its log
directory in a folder of the test's. It is formatted once, started, stopped (SIGKILL too) and
started again on the same ports with the same data, as a bus a source reads; ``create_topic``
and ``produce`` go through aiokafka, a client other than the one the service reads with
(librdkafka).
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import json
import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic, RecordsToDelete
from aiokafka.errors import KafkaError

from tests.support import processes
from tests.support.redis import free_port

REPO_ROOT = Path(__file__).resolve().parents[2]
FETCH = REPO_ROOT / "scripts" / "kafka" / "fetch"
#: The broker's heap: enough for the tests' topics, small beside the rest of a CI machine.
HEAP = "-Xmx512m"
#: ``SIFT_TEST_KAFKA_LOG=INFO`` (or DEBUG) turns the broker's log up (it goes to kafka.log).
LOG_LEVEL = os.environ.get("SIFT_TEST_KAFKA_LOG", "warn").lower()


@cache
def kafka_jars() -> Path:
    """The folder of the pinned release's jars (fetched by ``scripts/setup``; fetching again
    here only checks the cache's checksums, unless it is missing)."""
    done = subprocess.run([str(FETCH)], check=True, capture_output=True, text=True, timeout=600)
    return Path(done.stdout.strip().splitlines()[-1])


def java_binary() -> str:
    found = shutil.which("java")
    if found is None:
        raise RuntimeError("java is not installed (scripts/setup installs a JDK)")
    return found


def cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class KafkaBroker:
    """One KRaft broker and controller on 127.0.0.1: ``port`` for clients, ``controller_port``
    for its quorum of one. ``start`` formats the log directory the first time."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.controller_port = free_port()
        while self.controller_port == self.port:
            self.controller_port = free_port()
        self.data = self.folder / "data"
        self.properties = self.folder / "server.properties"
        self.process: subprocess.Popen[bytes] | None = None
        self.formatted = False
        #: Seconds the last ``start`` took until the broker served metadata.
        self.started_in: float | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _write_properties(self) -> None:
        settings = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": (
                f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}"
            ),
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(self.data),
            "num.partitions": "1",
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            # A quorum of one: after a SIGKILL it elects itself and lets its broker in again
            # within a second or two, not the default's ten.
            "controller.quorum.election.timeout.ms": "500",
            "controller.quorum.fetch.timeout.ms": "1000",
            "broker.heartbeat.interval.ms": "500",
            "broker.session.timeout.ms": "3000",
            "num.network.threads": "2",
            "num.io.threads": "4",
            # Every message on disk before its acknowledgement matters not here: a SIGKILL of
            # the broker loses only what the page cache held, and the OS keeps that.
            "log.flush.interval.messages": "9223372036854775807",
        }
        self.properties.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))

    def _java(self, main: str, *args: str) -> list[str]:
        return [
            java_binary(),
            HEAP,
            "-Xms64m",
            "-XX:+UseSerialGC",
            "-Djava.awt.headless=true",
            f"-Dorg.slf4j.simpleLogger.defaultLogLevel={LOG_LEVEL}",
            "-cp",
            f"{kafka_jars()}/*",
            main,
            *args,
        ]

    def format(self) -> None:
        self._write_properties()
        subprocess.run(
            self._java(
                "kafka.tools.StorageTool",
                "format",
                # One argument: an id may begin with '-'.
                f"--cluster-id={cluster_id()}",
                f"--config={self.properties}",
            ),
            check=True,
            capture_output=True,
            timeout=120,
        )
        self.formatted = True

    def start(self, timeout_s: float = 60.0) -> None:
        began = time.monotonic()
        if not self.formatted:
            self.format()
        log = (self.folder / "kafka.log").open("ab")
        self.process = subprocess.Popen(
            self._java("kafka.Kafka", str(self.properties)),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout_s
        while not self._listening():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"the Kafka broker did not start: {self.log_tail()}")
            time.sleep(0.05)
        # In a thread of its own: a test on the event loop may restart the broker.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, self._until_ready(deadline)).result()
        self.started_in = time.monotonic() - began

    def _listening(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return True
        except OSError:
            return False

    async def _until_ready(self, deadline: float) -> None:
        """Until the broker knows its controller (it then creates topics and serves them)."""
        while True:
            admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=5000)
            try:
                await admin.start()
                described = await admin.describe_cluster()
                if described.get("controller_id", -1) >= 0 and described.get("brokers"):
                    return
            except KafkaError:
                pass
            finally:
                await admin.close()
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Kafka broker never became ready: {self.log_tail()}")
            await asyncio.sleep(0.1)

    @property
    def running(self) -> bool:
        return processes.running(self.process)

    def kill(self) -> None:
        processes.kill(self.process)

    def stop(self) -> None:
        processes.stop(self.process, timeout_s=30)

    def restart(self, kill: bool = False) -> None:
        """Stopped (SIGKILL if ``kill``) and started again: same ports, same data."""
        if kill:
            self.kill()
        else:
            self.stop()
        self.start()

    def log_tail(self) -> str:
        path = self.folder / "kafka.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""


async def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    finally:
        await admin.close()
    # Until every partition has its leader: a produce right after the creation may not.
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for _ in range(200):
            found = await producer.partitions_for(name)
            if found is not None and len(found) == partitions:
                return
            await asyncio.sleep(0.05)
    finally:
        await producer.stop()


def encoded(document: Any) -> bytes:
    return document if isinstance(document, bytes) else json.dumps(document).encode()


async def produce(
    bootstrap: str,
    topic: str,
    documents: Sequence[Any],
    partition: Callable[[int], int] | None = None,
    retries_s: float = 0.0,
) -> list[tuple[int, int]]:
    """Produce each document (JSON; bytes as they are) with ``acks=all``, to the partition
    ``partition(i)`` names (else round robin by the client); the (partition, offset) of each.
    Idempotent producer: a retried batch is never written twice."""
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=True,
        linger_ms=5,
        max_batch_size=1 << 20,
        request_timeout_ms=max(30_000, int(retries_s * 1000)),
    )
    await producer.start()
    try:
        out: list[tuple[int, int]] = []
        for begin in range(0, len(documents), 2000):
            futures = [
                await producer.send(
                    topic,
                    encoded(documents[i]),
                    partition=None if partition is None else partition(i),
                )
                for i in range(begin, min(begin + 2000, len(documents)))
            ]
            for metadata in await asyncio.gather(*futures):
                out.append((metadata.partition, metadata.offset))
        return out
    finally:
        await producer.stop()


class Transactions:
    """A transactional producer (``transactional_id``): each ``transaction`` writes its
    documents in one Kafka transaction, committed or aborted, every message acknowledged by
    the broker before the outcome is written; ``open`` leaves one open until ``finish``."""

    def __init__(self, bootstrap: str, transactional_id: str) -> None:
        self.producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            acks="all",
            enable_idempotence=True,
            transactional_id=transactional_id,
            request_timeout_ms=30_000,
        )

    async def __aenter__(self) -> Transactions:
        await self.producer.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.producer.stop()

    async def open(
        self, topic: str, documents: Sequence[Any], partition: Callable[[int], int] | None = None
    ) -> list[tuple[int, int]]:
        """A transaction begun and its documents written (acknowledged), left open."""
        await self.producer.begin_transaction()
        futures = [
            await self.producer.send(
                topic, encoded(d), partition=None if partition is None else partition(i)
            )
            for i, d in enumerate(documents)
        ]
        return [(m.partition, m.offset) for m in await asyncio.gather(*futures)]

    async def finish(self, commit: bool) -> None:
        if commit:
            await self.producer.commit_transaction()
        else:
            await self.producer.abort_transaction()

    async def transaction(
        self,
        topic: str,
        documents: Sequence[Any],
        commit: bool,
        partition: Callable[[int], int] | None = None,
    ) -> list[tuple[int, int]]:
        placed = await self.open(topic, documents, partition)
        await self.finish(commit)
        return placed


async def delete_topic(bootstrap: str, name: str) -> None:
    """Delete a topic and wait until the broker no longer knows it (a topic of the name created
    afterwards is a new one: a new topic id, offsets from 0)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    await admin.start()
    try:
        await admin.delete_topics([name])
        for _ in range(200):
            if name not in await admin.list_topics():
                return
            await asyncio.sleep(0.05)
        raise RuntimeError(f"topic {name!r} was not deleted")
    finally:
        await admin.close()


async def delete_records(bootstrap: str, topic: str, before: dict[int, int]) -> None:
    """Trim partitions as retention does: every record of partition p before offset
    ``before[p]`` deleted (the log start offset moves there)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    await admin.start()
    try:
        await admin.delete_records(
            {TopicPartition(topic, p): RecordsToDelete(offset) for p, offset in before.items()}
        )
    finally:
        await admin.close()
