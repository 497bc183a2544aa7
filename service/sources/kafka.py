"""A Kafka topic as a source's bus: its partitions are the bus's ('0', '1', ...), positions are
offsets (a partition's position is the offset of the last message read; '-1' before offset 0).

Read with aiokafka on the event loop, as the other buses are read (confluent-kafka's librdkafka
would block a thread per call, and would bring a second network stack to configure). The
consumer is *assigned* the partitions this process holds (``keep``), never subscribed: Kafka's
group protocol does not decide who reads what, Sift's leases per partition do
(``service.sources.consumer``), and each read seeks to the position Sift committed with the
state (``source_append.lua``) whenever it is not where the last read left off. Kafka's own
committed offsets (the group ``sift-<name>`` by default) are written afterwards, only so that
Kafka's tools show the lag: Sift never reads them.

aiokafka retries a broker that went away forever and quietly; a read that found nothing asks
the broker for the partition's end offset (at most once a second), so the broker away becomes
``BusUnavailable`` within ``TIMEOUT_SECONDS`` and the consumer's state says so. The lag of a
partition is its end offset less the committed position's next.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError
from aiokafka.structs import OffsetAndMetadata

from service.sources.bus import BusEntry, BusUnavailable, Start

#: Bound on connecting and on each request to a broker.
TIMEOUT_SECONDS = 5.0
#: How often a read that found nothing checks that the broker answers; how long end offsets
#: (the lag) are reused.
CHECK_EVERY_SECONDS = 1.0
#: How often the topic's partitions are asked again (partitions added to it are read).
PARTITIONS_EVERY_SECONDS = 10.0
#: Why a message without a value is set aside.
TOMBSTONE = "no value (a tombstone)"


class KafkaBus:
    """One topic, read by offset from the partitions this process holds."""

    #: Its partitions are shared by the processes running (a lease each), not held by one.
    shared = True

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        group: str,
        username: str | None = None,
        password: str | None = None,
        mechanism: str = "PLAIN",
        tls: bool = False,
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.group = group
        self._security: dict[str, Any] = {}
        if username is not None:
            self._security = {
                "security_protocol": "SASL_SSL" if tls else "SASL_PLAINTEXT",
                "sasl_mechanism": mechanism,
                "sasl_plain_username": username,
                "sasl_plain_password": password or "",
            }
        elif tls:
            self._security = {"security_protocol": "SSL"}
        if tls:
            import ssl

            self._security["ssl_context"] = ssl.create_default_context()
        self._consumer: AIOKafkaConsumer | None = None
        #: The offset each assigned partition's next message has (where reads left off).
        self._next: dict[int, int] = {}
        self._assigned: frozenset[int] = frozenset()
        #: How many times the partitions were assigned (a read across one drops its records).
        self._assignments = 0
        self._checked = 0.0
        self._ends: dict[int, int] = {}
        self._ends_at = 0.0
        self._partitions: list[str] = []
        self._partitions_at = 0.0

    async def connect(self) -> None:
        await self.close()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap.split(","),
            group_id=self.group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            request_timeout_ms=int(TIMEOUT_SECONDS * 1000),
            metadata_max_age_ms=10_000,
            fetch_max_wait_ms=100,
            max_partition_fetch_bytes=4 << 20,
            fetch_max_bytes=16 << 20,
            **self._security,
        )
        try:
            await asyncio.wait_for(consumer.start(), TIMEOUT_SECONDS * 2)
            known = await asyncio.wait_for(consumer.topics(), TIMEOUT_SECONDS)
        except (KafkaError, OSError, TimeoutError) as exc:
            with contextlib.suppress(Exception):
                await consumer.stop()
            raise BusUnavailable(_why(exc)) from None
        self._consumer = consumer
        if self.topic not in known:
            await self.close()
            raise BusUnavailable(f"the Kafka brokers have no topic '{self.topic}'")
        await self._refresh_partitions()

    async def partitions(self) -> Sequence[str]:
        if time.monotonic() - self._partitions_at >= PARTITIONS_EVERY_SECONDS:
            await self._refresh_partitions()
        return self._partitions

    async def _refresh_partitions(self) -> None:
        """The topic's partitions, from the whole cluster's metadata (the consumer's own only
        covers the partitions it is assigned)."""
        # aiokafka's public topics() asks for this and keeps only the names.
        cluster = await self._call(self._client()._client.fetch_all_metadata())
        found = cluster.partitions_for_topic(self.topic)
        if not found:
            raise BusUnavailable(f"the Kafka brokers have no topic '{self.topic}'")
        self._partitions = [str(p) for p in sorted(found)]
        self._partitions_at = time.monotonic()

    def keep(self, partitions: Iterable[str]) -> None:
        """Be assigned exactly ``partitions`` (those this process holds): the others are not
        fetched."""
        wanted = frozenset(int(p) for p in partitions)
        if wanted == self._assigned:
            return
        self._client().assign([TopicPartition(self.topic, p) for p in sorted(wanted)])
        self._assigned = wanted
        # A new assignment forgets every partition's position, kept ones included (aiokafka
        # would start them again at Kafka's committed offsets, behind Sift's): each is sought
        # again at its next read, and a read that was waiting meanwhile finds nothing.
        self._next = {}
        self._assignments += 1

    async def start(self, partition: str, start: str) -> Start:
        tp = TopicPartition(self.topic, int(partition))
        if start == "earliest":
            first = (await self._call(self._client().beginning_offsets([tp])))[tp]
            return Start(str(first - 1), first)
        if start == "latest":
            end = (await self._call(self._client().end_offsets([tp])))[tp]
            return Start(str(end - 1), end)
        return Start(start, None)

    async def read(
        self, partition: str, after: str, max_entries: int, max_wait_s: float
    ) -> list[BusEntry]:
        number = int(partition)
        if number not in self._assigned:
            self.keep([str(p) for p in self._assigned | {number}])
        consumer = self._client()
        tp = TopicPartition(self.topic, number)
        wanted = int(after) + 1
        if self._next.get(number) != wanted:
            consumer.seek(tp, wanted)
            self._next[number] = wanted
        assignments = self._assignments
        try:
            batches = await consumer.getmany(
                tp, timeout_ms=max(1, int(max_wait_s * 1000)), max_records=max_entries
            )
        except (KafkaError, OSError) as exc:
            raise BusUnavailable(_why(exc)) from None
        if assignments != self._assignments:
            return []
        # Only what follows ``after``: never an earlier offset, whatever the fetcher held.
        fetched = batches.get(tp, [])
        # Offsets only grow within a partition: the first record says whether to filter.
        records = (
            fetched
            if not fetched or fetched[0].offset >= wanted
            else [r for r in fetched if r.offset >= wanted]
        )
        if fetched and not records:
            self._next.pop(number, None)  # sought again at the next read
            return []
        if not records:
            if time.monotonic() - self._checked >= CHECK_EVERY_SECONDS:
                await self._ends_of([number])  # raises BusUnavailable if the broker is away
            return []
        self._next[number] = records[-1].offset + 1
        # Each value is parsed with its batch (``EntryShape.convert``); None is a tombstone.
        return [
            BusEntry(str(r.offset), None, None, None, r.value)
            if r.value is not None
            else BusEntry(str(r.offset), None, TOMBSTONE)
            for r in records
        ]

    async def lag(
        self, partition: str, position: str, consumed: int, before: int | None
    ) -> int | None:
        number = int(partition)
        if time.monotonic() - self._ends_at >= CHECK_EVERY_SECONDS or number not in self._ends:
            await self._ends_of(sorted(self._assigned | {number}))
        return max(0, self._ends[number] - (int(position) + 1))

    async def committed(self, positions: Mapping[str, str]) -> None:
        """Kafka's committed offsets of the group brought to Sift's positions (the next offset
        of each partition), for Kafka's lag tools. Best effort: Sift never reads them."""
        offsets = {
            TopicPartition(self.topic, int(p)): OffsetAndMetadata(int(position) + 1, "")
            for p, position in positions.items()
            if int(position) >= 0
        }
        if offsets and self._consumer is not None:
            with contextlib.suppress(KafkaError, OSError, TimeoutError):
                await asyncio.wait_for(self._consumer.commit(offsets), TIMEOUT_SECONDS)

    async def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        self._next, self._assigned, self._ends = {}, frozenset(), {}
        if consumer is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(consumer.stop(), TIMEOUT_SECONDS)

    async def _ends_of(self, partitions: Sequence[int]) -> None:
        tps = [TopicPartition(self.topic, p) for p in partitions]
        ends = await self._call(self._client().end_offsets(tps))
        self._ends.update({tp.partition: int(offset) for tp, offset in ends.items()})
        self._ends_at = self._checked = time.monotonic()

    def _client(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            raise BusUnavailable("not connected")
        return self._consumer

    async def _call(self, awaitable: Any) -> Any:
        try:
            return await asyncio.wait_for(awaitable, TIMEOUT_SECONDS + 1)
        except (KafkaError, OSError, TimeoutError) as exc:
            raise BusUnavailable(_why(exc)) from None


def _why(exc: BaseException) -> str:
    return f"the Kafka brokers do not answer or refused ({type(exc).__name__}: {exc})"
