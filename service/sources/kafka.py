"""A Kafka topic as a source's bus: its partitions are the bus's ('0', '1', ...), positions are
offsets (a partition's position is the offset of the last message read; '-1' before offset 0).

Read with aiokafka on the event loop, as the other buses are read (confluent-kafka's librdkafka
would block a thread per call, and would bring a second network stack to configure). The
consumer is *assigned* the partitions this process holds (``keep``), never subscribed: Kafka's
group protocol does not decide who reads what, Sift's leases per partition do
(``service.sources.consumer``), and each read seeks to the position Sift committed with the
state (``append.lua``) whenever it is not where the last read left off. Kafka's own
committed offsets (the group ``sift-<name>`` by default) are written afterwards, only so that
Kafka's tools show the lag: Sift never reads them.

aiokafka retries a broker that went away forever and quietly, and waits on one that stopped
answering (a hung machine, its sockets open) without a word; a read that found nothing asks
the broker for the partition's end offset (at most once a second), and the consumer asks for
the topic's id every second (``check``), each allowed ``ANSWER_SECONDS``: so a broker away or
silent becomes ``BusUnavailable`` within a few seconds and the consumer's state says so. The
lag of a partition is its end offset less the committed position's next. One round of offsets
(``_Offsets``: the first and end offsets of every assigned partition, in one request each)
serves the checks of all of them within ``ROUND_SECONDS``, each for a position read before
the round began; the id is asked on a connection of its own, so that it does not wait behind
the fetches (a broker answers one connection's requests in order).

A topic's incarnation is its topic id (Kafka 2.8 and later give one to every topic; a topic
deleted and created again under its name has a new one), asked with a metadata request of a
version aiokafka does not send itself (``_TopicId``). Every batch read is confirmed against the
id this connection began with before it is committed: a batch read before the check was read
from the topic the check found, so nothing of a re-created topic is committed as the old one's
continuation. A broker that gives no ids leaves the offsets: a partition whose end offset is
below the position was created again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from io import BytesIO
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.client import ConnectionGroup
from aiokafka.errors import IncompatibleBrokerVersion, KafkaError
from aiokafka.protocol.abstract import AbstractType
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import (
    Boolean,
    CompactArray,
    CompactString,
    Int16,
    Int32,
    Schema,
    TaggedFields,
)
from aiokafka.structs import OffsetAndMetadata

from service.sources.bus import (
    BusEntry,
    BusUnavailable,
    Extent,
    Start,
    changed_epoch,
    within_bytes,
)
from service.sources.reach import (
    Reach,
    kafka_client_id,
    kafka_failure,
    kafka_forget,
    kafka_refusal,
    named_tls,
    network_failure,
)
from service.sources.spec import DEFAULT_BATCH_BYTES

#: Bound on connecting and on each request to a broker.
TIMEOUT_SECONDS = 5.0
#: How long a broker may take to answer a probe (the topic's id, end offsets) before the
#: source says it does not answer.
ANSWER_SECONDS = 3.0
#: How often a read that found nothing checks that the broker answers; how long end offsets
#: (the lag) are reused.
CHECK_EVERY_SECONDS = 1.0
#: How long one round of the partitions' offsets serves the checks of the others.
ROUND_SECONDS = CHECK_EVERY_SECONDS / 2
#: How often the topic's partitions are asked again (partitions added to it are read).
PARTITIONS_EVERY_SECONDS = 10.0
#: Why a message without a value is set aside.
TOMBSTONE = "no value (a tombstone)"


@dataclass(frozen=True)
class _Offsets:
    """One round of the assigned partitions' first and end offsets, asked between two asks of
    the topic's id that found the same one. ``read`` is, of each partition, the offset after
    the last message read before the round began: a position through there was on the
    partition when its end was asked, so the round can tell whether that position is still
    on it (a position read later, not)."""

    at: float
    topic_id: str | None
    first: dict[int, int]
    end: dict[int, int]
    read: dict[int, int]

    def serves(self, number: int, position: str) -> bool:
        """Whether this round can check ``position`` of partition ``number``."""
        return (
            time.monotonic() - self.at < ROUND_SECONDS
            and number in self.end
            and (not position or int(position) + 1 <= self.read.get(number, 0))
        )


@dataclass(frozen=True)
class KafkaSecurity:
    """How a Kafka source signs in to its brokers: SASL's ``mechanism`` with ``username`` and
    ``password`` (no username: no SASL), and whether over TLS."""

    username: str | None = None
    password: str | None = None
    mechanism: str = "PLAIN"
    tls: bool = False

    def options(self) -> dict[str, Any]:
        """What aiokafka's consumer is given of it."""
        options: dict[str, Any] = {}
        if self.username is not None:
            options = {
                "security_protocol": "SASL_SSL" if self.tls else "SASL_PLAINTEXT",
                "sasl_mechanism": self.mechanism,
                "sasl_plain_username": self.username,
                "sasl_plain_password": self.password or "",
            }
        elif self.tls:
            options = {"security_protocol": "SSL"}
        if self.tls:
            # The system's CAs; the certificate checked against the broker's name although
            # the connection goes to the address it resolved to (``service.sources.reach``).
            options["ssl_context"] = named_tls()
        return options


class KafkaBus:
    """One topic, read by offset from the partitions this process holds."""

    #: Its partitions are shared by the processes running (a lease each), not held by one.
    shared = True

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        group: str,
        security: KafkaSecurity = KafkaSecurity(),
        *,
        reach: Reach,
        name: str = "",
        batch_bytes: int = DEFAULT_BATCH_BYTES,
    ) -> None:
        self.bootstrap = bootstrap
        self.batch_bytes = batch_bytes
        self.topic = topic
        self.group = group
        self.reach = reach
        self.name = name
        self._client_id = ""
        self._security = security.options()
        self._consumer: AIOKafkaConsumer | None = None
        #: The offset each assigned partition's next message has (where reads left off).
        self._next: dict[int, int] = {}
        self._assigned: frozenset[int] = frozenset()
        #: How many times the partitions were assigned (a read across one drops its records).
        self._assignments = 0
        self._checked = 0.0
        #: Of each partition, the last read that left nothing unread: the offset it read
        #: through, and the offset the consumer fetches next (past transaction markers and
        #: aborted messages, which hold offsets but are never read).
        self._through: dict[int, tuple[int, int]] = {}
        self._ends: dict[int, int] = {}
        self._ends_at = 0.0
        #: Of each partition, the offset after the last message a read returned.
        self._read: dict[int, int] = {}
        self._round: _Offsets | None = None
        self._partitions: list[str] = []
        self._partitions_at = 0.0
        #: The topic's id as this connection found it (None: the brokers give none).
        self._topic_id: str | None = None
        self._ids_unsupported = False
        self._committing: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        await self.close()
        # Every broker connection of this client id goes where the reach allows.
        self._client_id = kafka_client_id(self.reach, self.name)
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap.split(","),
            client_id=self._client_id,
            group_id=self.group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            # Only what transactions committed (and what was written outside them): a message
            # of an aborted transaction is never read, one of an open transaction not before
            # its commit (the end offset is then the last stable offset).
            isolation_level="read_committed",
            request_timeout_ms=int(TIMEOUT_SECONDS * 1000),
            metadata_max_age_ms=10_000,
            fetch_max_wait_ms=100,
            # A fetch brings at most a batch's bytes (a record batch larger than that alone:
            # the broker sends it whole), so what is fetched ahead stays within it.
            max_partition_fetch_bytes=self.batch_bytes,
            fetch_max_bytes=self.batch_bytes,
            **self._security,
        )
        try:
            await asyncio.wait_for(consumer.start(), TIMEOUT_SECONDS * 2)
            known = await asyncio.wait_for(consumer.topics(), TIMEOUT_SECONDS)
        except Exception as exc:  # whatever failed, the consumer retries and says why
            with contextlib.suppress(Exception):
                await consumer.stop()
            why = self._why(exc)
            kafka_forget(self._client_id)
            raise BusUnavailable(why) from None
        self._consumer = consumer
        if self.topic not in known:
            await self.close()
            raise BusUnavailable(f"the Kafka brokers have no topic '{self.topic}'")
        await self._refresh_partitions()
        self._topic_id = await self._current_id()

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
            return Start(str(first - 1), first, self._topic_id)
        if start == "latest":
            end = (await self._call(self._client().end_offsets([tp])))[tp]
            return Start(str(end - 1), end, self._topic_id)
        return Start(start, None, self._topic_id)

    async def check(self, partition: str, position: str, epoch: str | None) -> Extent:
        number = int(partition)
        offsets = self._round
        if offsets is None or not offsets.serves(number, position):
            offsets = await self._offsets_round(number)
        now, first, end = offsets.topic_id, offsets.first[number], offsets.end[number]
        start = Start(str(first - 1), first, now)
        reset = changed_epoch("the topic", now, epoch)
        if reset is None and position and end < int(position) + 1:
            reset = (
                f"the partition's end offset {end} is below the position {position} + 1: "
                "the topic was created again"
            )
        if reset is not None:
            self._next.pop(number, None)
            self._through.pop(number, None)
        held = str(first) if end > first else None
        return Extent(now, held, str(end - 1) if end > 0 else None, start, reset)

    async def _offsets_round(self, number: int) -> _Offsets:
        """The first and end offsets of the assigned partitions and ``number``, in one request
        of each, and the topic's id asked before and after them."""
        read = dict(self._read)
        now = await self._current_id()
        if now is None and self._topic_id is not None:
            raise BusUnavailable(f"the Kafka brokers have no topic '{self.topic}'")
        if now != self._topic_id:  # the fetch positions were another topic's
            self._next, self._through, self._read, self._topic_id = {}, {}, {}, now
            read = {}
        numbers = sorted(self._assigned | {number})
        tps = [TopicPartition(self.topic, p) for p in numbers]
        firsts, end = await asyncio.gather(
            self._call(self._client().beginning_offsets(tps)),
            self._ends_of(numbers, TIMEOUT_SECONDS + 1),
        )
        first = {tp.partition: int(offset) for tp, offset in firsts.items()}
        # Offsets and ids about two topics (one deleted, one created): ask again. The id is
        # asked again after the offsets, so that both are the same topic's.
        if any(first[p] > end[p] for p in end) or await self._current_id() != now:
            raise BusUnavailable(f"the topic '{self.topic}' is being created again")
        self._round = _Offsets(self._ends_at, now, first, end, read)
        return self._round

    async def confirm(self, partition: str) -> None:
        """The topic still the one this connection began with (its id), so that what was just
        read from it is its own."""
        if self._topic_id is None:
            return
        now = await self._current_id()
        if now != self._topic_id:
            what = "is gone" if now is None else "was created again"
            raise BusUnavailable(f"the topic '{self.topic}' {what} while it was read")

    async def _current_id(self) -> str | None:
        """The topic's id (None: no such topic, or brokers that give no ids)."""
        if self._ids_unsupported:
            return None
        client = self._client()._client
        try:
            node = client.get_random_node()
            if node is None:
                raise BusUnavailable("no Kafka broker is known")
            # On a connection of its own: a broker answers one connection's requests in
            # order, and the fetches' connection is busy with the fetches.
            response = await asyncio.wait_for(
                client.send(node, _TopicId(self.topic), group=ConnectionGroup.COORDINATION),
                ANSWER_SECONDS,
            )
        except (IncompatibleBrokerVersion, NotImplementedError):
            self._ids_unsupported = True
            return None
        except (KafkaError, OSError, TimeoutError) as exc:
            raise BusUnavailable(self._why(exc)) from None
        for error, name, topic_id, *_rest in response.topics:
            if name == self.topic and error == 0 and any(topic_id):
                return str(uuid.UUID(bytes=bytes(topic_id)))
        return None

    async def read(
        self, partition: str, after: str, max_entries: int, max_bytes: int, max_wait_s: float
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
            raise BusUnavailable(self._why(exc)) from None
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
            await self._skipped(tp, wanted - 1)
            if time.monotonic() - self._checked >= CHECK_EVERY_SECONDS:
                await self._ends_of([number])  # raises BusUnavailable if the broker is away
            return []
        # Each value is parsed with its batch (``EntryShape.convert``); None is a tombstone.
        entries = [
            BusEntry(str(r.offset), None, None, None, r.value, len(r.value))
            if r.value is not None
            else BusEntry(str(r.offset), None, TOMBSTONE)
            for r in records
        ]
        kept = within_bytes(entries, max_bytes)
        self._read[number] = max(self._read.get(number, 0), int(kept[-1].position) + 1)
        if len(kept) < len(entries):  # the rest is the next read's: sought again there
            self._next.pop(number, None)
            return kept
        self._next[number] = records[-1].offset + 1
        if len(records) < max_entries:
            await self._skipped(tp, records[-1].offset)
        return entries

    async def lag(
        self, partition: str, position: str, consumed: int, before: int | None
    ) -> int | None:
        number = int(partition)
        if time.monotonic() - self._ends_at >= CHECK_EVERY_SECONDS or number not in self._ends:
            await self._ends_of(sorted(self._assigned | {number}))
        following = int(position) + 1
        through = self._through.get(number)
        if through is not None and through[0] == int(position):
            following = max(following, through[1])
        return max(0, self._ends[number] - following)

    async def _skipped(self, tp: TopicPartition, through: int) -> None:
        """Note where the consumer fetches next after a read that took everything it had
        fetched through offset ``through``: the offsets between hold no message to read."""
        consumer = self._client()
        try:
            if consumer.assignment() and tp in consumer.assignment():
                fetching = await asyncio.wait_for(consumer.position(tp), ANSWER_SECONDS)
                self._through[tp.partition] = (through, int(fetching))
        except KafkaError:
            return  # the partition was revoked meanwhile
        except TimeoutError as exc:
            raise BusUnavailable(self._why(exc)) from None

    async def committed(self, positions: Mapping[str, str]) -> None:
        """Kafka's committed offsets of the group brought to Sift's positions (the next offset
        of each partition), for Kafka's lag tools. Best effort: Sift never reads them."""
        offsets = {
            TopicPartition(self.topic, int(p)): OffsetAndMetadata(int(position) + 1, "")
            for p, position in positions.items()
            if int(position) >= 0
        }
        if offsets and self._consumer is not None and self._committing is None:
            # In the background: a broker that does not answer is met by the reads, never
            # waited for here.
            self._committing = asyncio.create_task(self._commit(self._consumer, offsets))
            self._committing.add_done_callback(_retrieved)

    async def _commit(self, consumer: AIOKafkaConsumer, offsets: dict[Any, Any]) -> None:
        try:
            await asyncio.wait_for(consumer.commit(offsets), TIMEOUT_SECONDS)
        finally:
            if self._committing is asyncio.current_task():
                self._committing = None

    async def close(self) -> None:
        committing, self._committing = self._committing, None
        if committing is not None:
            committing.cancel()  # not waited for: a commit to a broker away may linger
        consumer, self._consumer = self._consumer, None
        self._next, self._assigned, self._ends, self._through = {}, frozenset(), {}, {}
        if consumer is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(consumer.stop(), TIMEOUT_SECONDS)
        kafka_forget(self._client_id)

    async def _ends_of(
        self, partitions: Sequence[int], timeout_s: float = ANSWER_SECONDS
    ) -> dict[int, int]:
        """The end offsets of ``partitions``, kept for the lag; asking them shows the broker
        answers."""
        tps = [TopicPartition(self.topic, p) for p in partitions]
        ends = await self._call(self._client().end_offsets(tps), timeout_s)
        found = {tp.partition: int(offset) for tp, offset in ends.items()}
        self._ends.update(found)
        self._ends_at = self._checked = time.monotonic()
        return found

    def _why(self, exc: BaseException) -> str:
        return _kafka_why(exc, kafka_refusal(self._client_id), kafka_failure(self._client_id))

    def _client(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            raise BusUnavailable("not connected")
        return self._consumer

    async def _call(self, awaitable: Any, timeout_s: float = TIMEOUT_SECONDS + 1) -> Any:
        try:
            return await asyncio.wait_for(awaitable, timeout_s)
        except (KafkaError, OSError, TimeoutError) as exc:
            raise BusUnavailable(self._why(exc)) from None


def _retrieved(task: asyncio.Task[None]) -> None:
    """A best-effort task's outcome taken, whatever it was (never logged as unretrieved)."""
    if not task.cancelled():
        task.exception()


_CREDENTIALS_REFUSED = (
    "SaslAuthenticationFailedError",
    "AuthenticationFailedError",
    "UnsupportedSaslMechanismError",
    "IllegalSaslStateError",
)


def _kafka_why(exc: BaseException, refused: str | None, failed: BaseException | None = None) -> str:
    """A broker's failure in Sift's words: by the error's kind (aiokafka's class for the
    broker's error code), never its text (a peer's bytes, SASL messages)."""
    if refused is not None:
        return f"the Kafka brokers cannot be reached: {refused}"
    if failed is not None and type(exc).__name__ == "KafkaConnectionError":
        exc = failed  # aiokafka's own error says only that no broker answered: say why
    kind = type(exc).__name__
    if kind in _CREDENTIALS_REFUSED:
        return "the Kafka brokers refused the SASL login (its mechanism or credentials)"
    if isinstance(exc, KafkaError) and getattr(exc, "errno", None) is not None:
        return f"the Kafka brokers refused a request ({kind})"
    if isinstance(exc, KafkaError | OSError | TimeoutError):
        return f"the Kafka brokers do not answer: {network_failure(exc)}"
    return "the bus does not answer as Kafka brokers do"


class _Uuid(AbstractType[bytes]):  # type: ignore[misc]
    """Kafka's UUID: 16 bytes."""

    @classmethod
    def encode(cls, value: bytes) -> bytes:
        return bytes(value)

    @classmethod
    def decode(cls, data: BytesIO) -> bytes:
        return data.read(16)


class _MetadataResponseV12(Response):  # type: ignore[misc]
    API_KEY = 3
    API_VERSION = 12
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        (
            "brokers",
            CompactArray(
                ("node_id", Int32),
                ("host", CompactString("utf-8")),
                ("port", Int32),
                ("rack", CompactString("utf-8")),
                ("tags", TaggedFields),
            ),
        ),
        ("cluster_id", CompactString("utf-8")),
        ("controller_id", Int32),
        (
            "topics",
            CompactArray(
                ("error_code", Int16),
                ("name", CompactString("utf-8")),
                ("topic_id", _Uuid),
                ("is_internal", Boolean),
                (
                    "partitions",
                    CompactArray(
                        ("error_code", Int16),
                        ("partition_index", Int32),
                        ("leader_id", Int32),
                        ("leader_epoch", Int32),
                        ("replica_nodes", CompactArray(Int32)),
                        ("isr_nodes", CompactArray(Int32)),
                        ("offline_replicas", CompactArray(Int32)),
                        ("tags", TaggedFields),
                    ),
                ),
                ("topic_authorized_operations", Int32),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


class _MetadataRequestV12(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = 3
    API_VERSION = 12
    RESPONSE_TYPE = _MetadataResponseV12
    SCHEMA = Schema(
        (
            "topics",
            CompactArray(
                ("topic_id", _Uuid), ("name", CompactString("utf-8")), ("tags", TaggedFields)
            ),
        ),
        ("allow_auto_topic_creation", Boolean),
        ("include_topic_authorized_operations", Boolean),
        ("tags", TaggedFields),
    )


class _TopicId(Request[_MetadataRequestV12]):  # type: ignore[misc]
    """One topic's metadata at version 12, the first to carry topic ids that aiokafka can
    parse with its own types (it sends version 5 and older)."""

    API_KEY = 3

    def __init__(self, topic: str) -> None:
        self.topic = topic

    def build(self, request_struct_class: type[_MetadataRequestV12]) -> _MetadataRequestV12:
        return request_struct_class([(bytes(16), self.topic, {})], False, False, {})
