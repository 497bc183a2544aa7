"""A Kafka topic as a source's bus: its partitions are the bus's ('0', '1', ...), positions are
offsets (a partition's position is the offset of the last message read; '-1' before offset 0).

Read with librdkafka (confluent-kafka). The consumer runs in a thread of its own (``_Reader``):
it takes messages in batches (``consume``), turns them into entries there, and hands each
batch to the event loop whole, where each partition's entries wait in a buffer of about
``batch_bytes`` (a partition over it is paused at the broker until its reads drain it). The
consumer is *assigned* the partitions this process reads, never subscribed: Kafka's group
protocol does not decide who reads what, Sift's leases per partition do
(``service.sources.consumer``), and a read whose position is not where the last read left off
starts the partition again there (unassigned and assigned at that offset), every batch
consumed before that dropped. Kafka's own committed offsets (the group ``sift-<name>`` by
default) are written afterwards, only so that Kafka's tools show the lag: Sift never reads
them.

The questions a source asks besides its messages go through an admin client (its own
connections, so that they never wait behind the fetches), each allowed ``ANSWER_SECONDS``: the
topic's id (``check``, ``confirm``), one round of the first and end offsets of every assigned
partition in one request each (``_Offsets``: it serves the checks of all of them within
``ROUND_SECONDS``, each for a position read before the round began), and a partition's end
offset after a read that found nothing (at most once a second): so a broker away or silent
becomes ``BusUnavailable`` within a few seconds and the consumer's state says so. The lag of a
partition is its end offset less the committed position's next (or, once everything was
read, less where the fetcher reached: transaction markers hold offsets no read returns).

A topic's incarnation is its topic id (Kafka 2.8 and later give one to every topic; a topic
deleted and created again under its name has a new one). Every batch read is confirmed against
the id this connection began with before it is committed, so nothing of a re-created topic is
committed as the old one's continuation. A broker that gives no ids leaves the offsets: a
partition whose end offset is below the position was created again.

Where it connects (``service.sources.reach``): the bootstrap's names are resolved by Sift and
the connection pinned to an allowed address (over TLS the name is kept, for the certificate's
sake); every broker the cluster's metadata names is judged before the consumer is created and
at every refresh of the partitions, and a refused one stops the source with the reason.
librdkafka resolves the brokers' names itself, so the guard against a resolver that answers
differently the second time (DNS rebinding) holds for the bootstrap's names, which Sift
resolves, and not for a broker's name answered otherwise to librdkafka than to Sift.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import (
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

from service.sources.bus import (
    BusEntry,
    BusUnavailable,
    Extent,
    Start,
    changed_epoch,
    within_bytes,
)
from service.sources.endpoints import parse_bootstrap
from service.sources.reach import Reach, Refused, shown_address
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
#: The most messages the consumer's thread takes at once, and how long it waits for them.
CONSUME_MESSAGES = 2000
CONSUME_WAIT_SECONDS = 0.05
#: Why a message without a value is set aside.
TOMBSTONE = "no value (a tombstone)"
#: What an offsets request asks of each partition: its first offset, its end offset.
_FIRST: Any = OffsetSpec.earliest()  # type: ignore[no-untyped-call]
_END: Any = OffsetSpec.latest()  # type: ignore[no-untyped-call]

#: librdkafka's own log, at DEBUG only: its lines may quote a peer's addresses and errors.
_client_log = logging.getLogger("sift.sources.kafka.librdkafka")


class _QuietLogger:
    """Where librdkafka's log lines go: DEBUG of ``_client_log``, whatever their level."""

    def log(self, _level: int, message: str, *args: Any) -> None:
        _client_log.debug(message, *args)


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
        """What librdkafka's clients are given of it."""
        protocol = {
            (False, False): "PLAINTEXT",
            (False, True): "SSL",
            (True, False): "SASL_PLAINTEXT",
            (True, True): "SASL_SSL",
        }[(self.username is not None, self.tls)]
        options: dict[str, Any] = {"security.protocol": protocol}
        if self.username is not None:
            options |= {
                "sasl.mechanism": self.mechanism,
                "sasl.username": self.username,
                "sasl.password": self.password or "",
            }
        if self.tls:
            # The system's CAs, the certificate checked against the broker's name.
            options |= {
                "ssl.ca.location": "probe",
                "ssl.endpoint.identification.algorithm": "https",
            }
        return options


@dataclass
class _Partition:
    """What the event loop holds of one assigned partition: the entries consumed and not yet
    read (``entries`` from ``taken`` on), where the reads left off (``served``: the offset
    after the last entry a read returned), the offset the next entry may have at the least
    (``next``), the first assignment whose batches may fill it (``since``), and where the
    fetcher was when it last reached the partition's end (``eof``)."""

    served: int
    next: int
    since: int
    entries: list[BusEntry] = field(default_factory=list)
    taken: int = 0
    bytes: int = 0
    paused: bool = False
    eof: int | None = None
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    def take(self, max_entries: int, max_bytes: int) -> list[BusEntry]:
        """Up to ``max_entries`` entries of about ``max_bytes`` (the first one always)."""
        end = min(len(self.entries), self.taken + max_entries)
        out = within_bytes(self.entries[self.taken : end], max_bytes)
        self.taken += len(out)
        self.bytes -= sum(entry.size for entry in out)
        if self.taken == len(self.entries):
            self.entries, self.taken = [], 0
        elif self.taken > 4096:
            del self.entries[: self.taken]
            self.taken = 0
        if out:
            self.served = int(out[-1].position) + 1
        return out

    def empty(self) -> bool:
        return self.taken == len(self.entries)


#: A batch as the consumer's thread hands it over: the assignment it was consumed under, the
#: entries by partition, the offsets where partitions reached their end, and the errors met.
_Consumed = tuple[int, dict[int, list[BusEntry]], dict[int, int], list[KafkaError]]


class _Reader:
    """The consumer in a thread of its own: what the event loop asks of it (assignments,
    pauses, commits) is queued and done between two ``consume`` calls, in order; every batch
    consumed goes to ``deliver`` on the loop, tagged with the number of the last assignment
    done before it was consumed."""

    def __init__(
        self,
        consumer: Consumer,
        loop: asyncio.AbstractEventLoop,
        deliver: Callable[[_Consumed], None],
        keep_alive: Any,
    ) -> None:
        self._consumer = consumer
        self._loop = loop
        self._deliver = deliver
        # Dropped in the thread, not on the loop: librdkafka's destructors may wait.
        self._keep_alive = keep_alive
        self._asked: queue.SimpleQueue[tuple[int, Callable[[Consumer], None]]] = queue.SimpleQueue()
        self._stopping = threading.Event()
        #: How many assignments were asked (the loop's count) and done (the thread's).
        self.asked = 0
        self._done = 0
        self._thread = threading.Thread(target=self._run, name="sift-kafka", daemon=True)
        self._thread.start()

    def ask(self, call: Callable[[Consumer], None], *, assignment: bool = False) -> int:
        """Queue ``call`` for the thread; an assignment gets a number (returned): batches
        tagged with it or later were consumed after it."""
        if assignment:
            self.asked += 1
        self._asked.put((self.asked if assignment else 0, call))
        return self.asked

    def stop(self) -> None:
        """Stop consuming, and close the consumer in the thread (never waited for)."""
        self._stopping.set()

    def _run(self) -> None:
        consumer = self._consumer
        try:
            while not self._stopping.is_set():
                self._do_asked(consumer)
                messages = consumer.consume(CONSUME_MESSAGES, CONSUME_WAIT_SECONDS)
                if messages and not self._stopping.is_set():
                    self._loop.call_soon_threadsafe(self._deliver, self._split(messages))
        except RuntimeError:
            pass  # the event loop closed
        finally:
            with contextlib.suppress(Exception):
                consumer.close()
            self._consumer = self._keep_alive = None  # type: ignore[assignment]

    def _do_asked(self, consumer: Consumer) -> None:
        while True:
            try:
                number, call = self._asked.get_nowait()
            except queue.Empty:
                return
            try:
                call(consumer)
            except KafkaException as exc:
                failed: _Consumed = (self._done, {}, {}, [exc.args[0]])
                self._loop.call_soon_threadsafe(self._deliver, failed)
            if number:
                self._done = number

    def _split(self, messages: list[Any]) -> _Consumed:
        """A batch of messages as entries by partition (each value parsed later, with its
        batch: ``EntryShape.convert``; None is a tombstone)."""
        entries: dict[int, list[BusEntry]] = {}
        ends: dict[int, int] = {}
        errors: list[KafkaError] = []
        for message in messages:
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    ends[message.partition()] = message.offset()
                else:
                    errors.append(error)
                continue
            value = message.value()
            offset = str(message.offset())
            entry = (
                BusEntry(offset, None, None, None, value, len(value))
                if value is not None
                else BusEntry(offset, None, TOMBSTONE)
            )
            number = message.partition()
            found = entries.get(number)
            if found is None:
                entries[number] = [entry]
            else:
                found.append(entry)
        return self._done, entries, ends, errors


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
        self._security = security
        self._reader: _Reader | None = None
        self._admin: AdminClient | None = None
        #: The partitions this process reads (``keep``), and those being consumed.
        self._kept: frozenset[int] = frozenset()
        self._parts: dict[int, _Partition] = {}
        #: Why reads fail now (an error the consumer met), and the last error it reported.
        self._failure: str | None = None
        self._last_error: KafkaError | None = None
        #: Why a broker may not be connected to (``Reach``), if one may not.
        self._refused: str | None = None
        self._judged: set[tuple[str, int]] = set()
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

    # -- the connection -------------------------------------------------------------------

    async def connect(self) -> None:
        await self.close()
        self._failure = self._refused = self._last_error = None
        self._judged = set()
        common: dict[str, Any] = {
            "bootstrap.servers": await self._bootstrap(),
            "client.id": f"sift-source-{self.name[:64]}",
            "socket.timeout.ms": int(TIMEOUT_SECONDS * 1000),
            "socket.connection.setup.timeout.ms": int(TIMEOUT_SECONDS * 1000),
            "reconnect.backoff.max.ms": 1000,
            "topic.metadata.refresh.interval.ms": int(PARTITIONS_EVERY_SECONDS * 1000),
            "logger": _QuietLogger(),
            "error_cb": self._reported,
            **self._security.options(),
        }
        consumer_options = {
            "group.id": self.group,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            # Only what transactions committed (and what was written outside them): a message
            # of an aborted transaction is never read, one of an open transaction not before
            # its commit (the end offset is then the last stable offset).
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 100,
            # What librdkafka fetches ahead, beside what waits in the partitions' buffers;
            # and how soon it fetches again once that is taken (its default, 1 s, left the
            # fetcher idle for most of each second while the partitions' batches waited).
            "queued.max.messages.kbytes": max(1024, 2 * self.batch_bytes // 1024),
            "fetch.queue.backoff.ms": 10,
        }
        try:
            consumer = Consumer(common | consumer_options)
            admin = AdminClient(common)
        except (KafkaException, ValueError, TypeError) as exc:
            why = f"the Kafka client refused its options ({type(exc).__name__})"
            raise BusUnavailable(why) from None
        self._admin = admin
        self._reader = _Reader(consumer, asyncio.get_running_loop(), self._deliver, admin)
        try:
            await self._refresh_partitions()
            self._topic_id = await self._current_id()
        except BusUnavailable:
            await self.close()
            raise

    async def _bootstrap(self) -> str:
        """The bootstrap's brokers, each at the address its name resolves to that the reach
        allows (over TLS, by name: the certificate is checked against it)."""
        servers = []
        for host, port in parse_bootstrap(self.bootstrap):
            address = await self._allowed(host, port)
            servers.append(shown_address(host if self._security.tls else address, port))
        return ",".join(servers)

    async def _allowed(self, host: str, port: int) -> str:
        try:
            return str(await self.reach.address(host, port))
        except Refused as exc:
            self._refused = f"broker {shown_address(host, port)}: {exc}"
            raise BusUnavailable(self._why(None)) from None

    async def _judge(self, brokers: Iterable[Any]) -> None:
        """Every broker the metadata names, judged by the reach once per connection."""
        for broker in brokers:
            where = (str(broker.host), int(broker.port))
            if where not in self._judged:
                await self._allowed(*where)
                self._judged.add(where)

    async def partitions(self) -> Sequence[str]:
        if time.monotonic() - self._partitions_at >= PARTITIONS_EVERY_SECONDS:
            await self._refresh_partitions()
        return self._partitions

    async def _refresh_partitions(self) -> None:
        """The topic's partitions, from the cluster's metadata; its brokers judged."""
        admin = self._client()
        metadata = await self._blocking(lambda: admin.list_topics(timeout=TIMEOUT_SECONDS))
        await self._judge(metadata.brokers.values())
        found = metadata.topics.get(self.topic)
        if found is None or found.error is not None or not found.partitions:
            raise BusUnavailable(f"the Kafka brokers have no topic '{self.topic}'")
        self._partitions = [str(p) for p in sorted(found.partitions)]
        self._partitions_at = time.monotonic()

    def keep(self, partitions: Iterable[str]) -> None:
        """Read only ``partitions`` (those this process holds): the others are unassigned;
        a kept one is assigned at its first read, at the position it is read from."""
        self._kept = frozenset(int(p) for p in partitions)
        for number in [p for p in self._parts if p not in self._kept]:
            self._forget(number)

    # -- reading --------------------------------------------------------------------------

    async def read(
        self, partition: str, after: str, max_entries: int, max_bytes: int, max_wait_s: float
    ) -> list[BusEntry]:
        self._fail_if_failed()
        number = int(partition)
        if number not in self._kept:
            self._kept = self._kept | {number}
        wanted = int(after) + 1
        part = self._parts.get(number)
        if part is None or part.served != wanted:
            part = self._seek(number, wanted)
        if part.empty():
            part.arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(part.arrived.wait(), max(max_wait_s, 0.001))
            self._fail_if_failed()
            if self._parts.get(number) is not part:
                return []  # sought again or let go meanwhile
        entries = part.take(max_entries, max_bytes)
        if part.paused and part.bytes <= self.batch_bytes // 2:
            part.paused = False
            tp = TopicPartition(self.topic, number)
            self._client_reader().ask(lambda consumer: consumer.resume([tp]))
        if not entries:
            if time.monotonic() - self._ends_at >= CHECK_EVERY_SECONDS:
                await self._ends_of([number])  # raises BusUnavailable if the broker is away
            return []
        self._read[number] = max(self._read.get(number, 0), part.served)
        return entries

    def _seek(self, number: int, wanted: int) -> _Partition:
        """Consume partition ``number`` from offset ``wanted``: (re)assigned there, what was
        consumed of it before dropped."""
        reader = self._client_reader()
        at = TopicPartition(self.topic, number, wanted)
        if number in self._parts:
            plain = TopicPartition(self.topic, number)

            def again(consumer: Consumer) -> None:
                consumer.incremental_unassign([plain])
                consumer.incremental_assign([at])

            since = reader.ask(again, assignment=True)
        else:
            since = reader.ask(lambda consumer: consumer.incremental_assign([at]), assignment=True)
        part = self._parts[number] = _Partition(served=wanted, next=wanted, since=since)
        return part

    def _forget(self, number: int) -> None:
        """Stop consuming partition ``number`` (its next read assigns it again)."""
        part = self._parts.pop(number, None)
        if part is None or self._reader is None:
            return
        part.arrived.set()
        plain = TopicPartition(self.topic, number)
        self._reader.ask(lambda consumer: consumer.incremental_unassign([plain]), assignment=True)

    def _deliver(self, consumed: _Consumed) -> None:
        """A batch the consumer's thread took, into the partitions' buffers (on the loop)."""
        done, entries, ends, errors = consumed
        reader = self._reader
        for number, got in entries.items():
            part = self._parts.get(number)
            if part is None or done < part.since:
                continue  # consumed before the partition was sought again
            if int(got[0].position) < part.next:
                got = [entry for entry in got if int(entry.position) >= part.next]
                if not got:
                    continue
            part.entries += got
            part.next = int(got[-1].position) + 1
            part.bytes += sum(entry.size for entry in got)
            part.eof = None
            part.arrived.set()
            if part.bytes > self.batch_bytes and not part.paused and reader is not None:
                part.paused = True
                reader.ask(functools.partial(_pause, TopicPartition(self.topic, number)))
        for number, offset in ends.items():
            part = self._parts.get(number)
            if part is not None and done >= part.since:
                part.eof = offset
        if errors:
            self._failure = self._why(errors[-1])
            for part in self._parts.values():
                part.arrived.set()

    def _reported(self, error: KafkaError) -> None:
        """librdkafka's report of an error of the client's (in the consumer's thread): kept
        as the reason a request fails; a refused login or every broker down fails the reads."""
        self._last_error = error
        if error.fatal() or error.code() in _FAILING:
            self._failure = self._why(error)

    def _fail_if_failed(self) -> None:
        if self._failure is not None:
            raise BusUnavailable(self._failure)

    # -- what the partitions hold -----------------------------------------------------------

    async def start(self, partition: str, start: str) -> Start:
        number = int(partition)
        if start in ("earliest", "latest"):
            spec = _FIRST if start == "earliest" else _END
            offset = (await self._offsets_of([number], spec))[number]
            return Start(str(offset - 1), offset, self._topic_id)
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
            self._forget(number)
        held = str(first) if end > first else None
        return Extent(now, held, str(end - 1) if end > 0 else None, start, reset)

    async def _offsets_round(self, number: int) -> _Offsets:
        """The first and end offsets of the assigned partitions and ``number``, in one request
        of each, and the topic's id asked before and after them."""
        read = dict(self._read)
        now = await self._current_id()
        if now is None and self._topic_id is not None:
            raise BusUnavailable(f"the Kafka brokers have no topic '{self.topic}'")
        if now != self._topic_id:  # what was consumed was another topic's
            for part in list(self._parts):
                self._forget(part)
            self._read, self._topic_id, read = {}, now, {}
        numbers = sorted(self._kept | {number})
        first, end = await asyncio.gather(self._offsets_of(numbers, _FIRST), self._ends_of(numbers))
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
        described = self._client().describe_topics(
            TopicCollection([self.topic]), request_timeout=ANSWER_SECONDS
        )
        try:
            description = await self._answer(described[self.topic], ANSWER_SECONDS + 1)
        except KafkaException as exc:
            code = exc.args[0].code()
            if code == KafkaError.UNKNOWN_TOPIC_OR_PART:
                return None
            if code in (KafkaError.UNSUPPORTED_VERSION, KafkaError._UNSUPPORTED_FEATURE):
                self._ids_unsupported = True
                return None
            raise BusUnavailable(self._why(exc.args[0])) from None
        topic_id = description.topic_id
        if topic_id is None:
            return None
        mask = (1 << 64) - 1
        most = topic_id.get_most_significant_bits() & mask
        least = topic_id.get_least_significant_bits() & mask
        return str(uuid.UUID(int=(most << 64) | least)) if most or least else None

    async def lag(
        self, partition: str, position: str, consumed: int, before: int | None
    ) -> int | None:
        number = int(partition)
        if time.monotonic() - self._ends_at >= CHECK_EVERY_SECONDS or number not in self._ends:
            await self._ends_of(sorted(self._kept | {number}))
        following = int(position) + 1
        part = self._parts.get(number)
        # Everything consumed was read: the offsets up to where the fetcher reached the end
        # (transaction markers, aborted messages) hold nothing to read.
        if part is not None and part.empty() and part.served == following and part.eof:
            following = max(following, part.eof)
        return max(0, self._ends[number] - following)

    async def committed(self, positions: Mapping[str, str]) -> None:
        """Kafka's committed offsets of the group brought to Sift's positions (the next offset
        of each partition), for Kafka's lag tools. Best effort: Sift never reads them."""
        offsets = [
            TopicPartition(self.topic, int(p), int(position) + 1)
            for p, position in positions.items()
            if int(position) >= 0
        ]
        if offsets and self._reader is not None:
            self._reader.ask(lambda consumer: _commit(consumer, offsets))

    async def close(self) -> None:
        reader, self._reader, self._admin = self._reader, None, None
        for part in self._parts.values():
            part.arrived.set()
        self._parts, self._kept, self._ends, self._round = {}, frozenset(), {}, None
        if reader is not None:
            reader.stop()

    # -- asking the brokers -----------------------------------------------------------------

    async def _ends_of(
        self, partitions: Sequence[int], timeout_s: float = ANSWER_SECONDS
    ) -> dict[int, int]:
        """The end offsets of ``partitions``, kept for the lag; asking them shows the broker
        answers."""
        found = await self._offsets_of(partitions, _END, timeout_s)
        self._ends.update(found)
        self._ends_at = time.monotonic()
        return found

    async def _offsets_of(
        self, partitions: Sequence[int], spec: Any, timeout_s: float = ANSWER_SECONDS
    ) -> dict[int, int]:
        """The offsets ``spec`` names (the first, the end) of ``partitions``, in one request."""
        asked = {TopicPartition(self.topic, p): spec for p in partitions}
        futures = self._client().list_offsets(
            asked, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=timeout_s
        )
        try:
            answers = await asyncio.wait_for(
                asyncio.gather(*map(asyncio.wrap_future, futures.values())), timeout_s + 1
            )
        except KafkaException as exc:
            raise BusUnavailable(self._why(exc.args[0])) from None
        except TimeoutError:
            raise BusUnavailable(self._why(None, timed_out=True)) from None
        return {
            tp.partition: int(answer.offset) for tp, answer in zip(futures, answers, strict=True)
        }

    async def _answer(self, future: Future[Any], timeout_s: float) -> Any:
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), timeout_s)
        except TimeoutError:
            raise BusUnavailable(self._why(None, timed_out=True)) from None

    async def _blocking(self, call: Callable[[], Any]) -> Any:
        """A blocking call of librdkafka's, in a thread."""
        try:
            return await asyncio.wait_for(asyncio.to_thread(call), TIMEOUT_SECONDS + 1)
        except KafkaException as exc:
            raise BusUnavailable(self._why(exc.args[0])) from None
        except TimeoutError:
            raise BusUnavailable(self._why(None, timed_out=True)) from None

    def _why(self, error: KafkaError | None, *, timed_out: bool = False) -> str:
        """A broker's failure in Sift's words: by its code (never its text, which may quote
        a peer), else by the last error the client reported."""
        if self._refused is not None:
            return f"the Kafka brokers cannot be reached: {self._refused}"
        if error is None or error.code() in (KafkaError._TIMED_OUT, KafkaError._TRANSPORT):
            error = self._last_error or error
        return _kafka_why(error, timed_out)

    def _client(self) -> AdminClient:
        if self._admin is None:
            raise BusUnavailable("not connected")
        return self._admin

    def _client_reader(self) -> _Reader:
        if self._reader is None:
            raise BusUnavailable("not connected")
        return self._reader


def _pause(tp: TopicPartition, consumer: Consumer) -> None:
    consumer.pause([tp])


def _commit(consumer: Consumer, offsets: list[TopicPartition]) -> None:
    with contextlib.suppress(KafkaException):
        consumer.commit(offsets=offsets, asynchronous=True)


#: Errors the client reports that fail the reads at once (the others fail a request).
_FAILING = frozenset({KafkaError._AUTHENTICATION, KafkaError._ALL_BROKERS_DOWN})
_REFUSED_LOGIN = frozenset(
    {
        KafkaError._AUTHENTICATION,
        KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError.UNSUPPORTED_SASL_MECHANISM,
        KafkaError.ILLEGAL_SASL_STATE,
    }
)


def _kafka_why(error: KafkaError | None, timed_out: bool = False) -> str:
    """A librdkafka error in Sift's words, by its code; its text only told apart among a few
    of librdkafka's own phrases (never shown)."""
    code = None if error is None else error.code()
    text = "" if error is None else str(error.str()).lower()
    if code in _REFUSED_LOGIN:
        return "the Kafka brokers refused the SASL login (its mechanism or credentials)"
    if code == KafkaError._RESOLVE:
        return "the Kafka brokers do not answer: the host name does not resolve"
    if code == KafkaError._SSL:
        return "the Kafka brokers do not answer: the TLS handshake or the certificate failed"
    if error is not None and code is not None and code > 0:
        return f"the Kafka brokers refused a request ({error.name()})"
    if code == KafkaError._BAD_MSG or "invalid response" in text or "protocol parse" in text:
        return "the bus does not answer as Kafka brokers do"
    if "connection refused" in text:
        return "the Kafka brokers do not answer: the connection was refused"
    if timed_out or code in (KafkaError._TIMED_OUT, KafkaError._MSG_TIMED_OUT):
        return "the Kafka brokers do not answer: no answer in time"
    return "the Kafka brokers do not answer: the connection failed or was closed"
