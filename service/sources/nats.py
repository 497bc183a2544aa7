"""A NATS JetStream stream as a source's bus: one partition ('0') per source (its subject
filter), positions are stream sequences.

Each (re)connection creates an ephemeral pull consumer that starts right after the sequence
Sift committed (``DeliverPolicy.BY_START_SEQUENCE``) and acknowledges nothing (``AckPolicy.NONE``):
the position lives with the state it produced (``source_append.lua``), so the server has nothing
to redeliver and nothing to forget. A read that does not follow the last one (a commit that
moved elsewhere, a retry) creates the consumer again at the right place. The lag is the
consumer's ``num_pending``: messages of the subject after what it delivered.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

import nats
import orjson
from nats.errors import Error as NatsError
from nats.js import api
from nats.js.errors import Error as JetStreamError

from service.sources.bus import BusEntry, BusUnavailable, Start

PARTITION = "0"
#: Bound on connecting and on each request to the server.
TIMEOUT_SECONDS = 5.0
#: An abandoned consumer (its process died) is removed by the server after this long.
INACTIVE_SECONDS = 60.0


class NatsBus:
    """One JetStream stream (and subject filter), read by sequence."""

    def __init__(self, url: str, stream: str, subject: str | None) -> None:
        self.url = url
        self.stream = stream
        self.subject = subject
        self._nc: Any = None
        self._js: Any = None
        self._sub: Any = None
        self._consumer: str | None = None
        #: The sequence the pull consumer's next message follows.
        self._after: str | None = None

    async def connect(self) -> None:
        await self.close()

        async def quiet(*_: Any) -> None:
            """nats-py logs errors with the server's URL by default; the consumer's state
            says what went wrong instead."""

        try:
            self._nc = await nats.connect(
                servers=[self.url],
                connect_timeout=TIMEOUT_SECONDS,
                allow_reconnect=False,
                max_reconnect_attempts=0,
                error_cb=quiet,
                disconnected_cb=quiet,
                closed_cb=quiet,
            )
            self._js = self._nc.jetstream(timeout=TIMEOUT_SECONDS)
            await self._js.stream_info(self.stream)
        except (NatsError, JetStreamError, OSError, TimeoutError) as exc:
            await self.close()
            raise BusUnavailable(_why(exc)) from None

    async def partitions(self) -> Sequence[str]:
        return [PARTITION]

    async def start(self, partition: str, start: str) -> Start:
        info = await self._call(self._js.stream_info(self.stream))
        if start == "earliest":
            return Start("0", 0 if self.subject is None else None)
        if start == "latest":
            return Start(str(info.state.last_seq), None)
        return Start(start, None)

    async def read(
        self, partition: str, after: str, max_entries: int, max_wait_s: float
    ) -> list[BusEntry]:
        if self._sub is None or self._after != after:
            await self._subscribe(after)
        try:
            messages = await self._sub.fetch(max_entries, timeout=max(max_wait_s, 0.01))
        except (TimeoutError, nats.errors.TimeoutError):
            return []
        except (NatsError, JetStreamError, OSError) as exc:
            await self.close()
            raise BusUnavailable(_why(exc)) from None
        out = []
        for message in messages:
            sequence = message.metadata.sequence.stream
            out.append(_entry(str(sequence), message.data))
            self._after = str(sequence)
        return out

    async def lag(
        self, partition: str, position: str, consumed: int, before: int | None
    ) -> int | None:
        if self._sub is not None and self._after == position and self._consumer is not None:
            info = await self._call(self._sub.consumer_info())
            return int(info.num_pending or 0)
        info = await self._call(self._js.stream_info(self.stream))
        if self.subject is None:
            return max(0, int(info.state.last_seq) - int(position or 0))
        return None

    async def close(self) -> None:
        nc, self._nc, self._js, self._sub, self._consumer = self._nc, None, None, None, None
        self._after = None
        if nc is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(nc.close(), TIMEOUT_SECONDS)

    async def _subscribe(self, after: str) -> None:
        """A pull consumer whose first message is the one after sequence ``after``."""
        if self._js is None:
            raise BusUnavailable("not connected")
        if self._sub is not None:
            old, self._sub = self._sub, None
            try:
                await old.unsubscribe()
                if self._consumer is not None:
                    await self._js.delete_consumer(self.stream, self._consumer)
            except Exception:
                pass
        config = api.ConsumerConfig(
            deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=int(after or 0) + 1,
            ack_policy=api.AckPolicy.NONE,
            inactive_threshold=INACTIVE_SECONDS,
            filter_subject=self.subject,
        )
        subject = self.subject or ">"
        self._sub = await self._call(
            self._js.pull_subscribe(subject, stream=self.stream, config=config)
        )
        self._consumer = getattr(self._sub, "_consumer", None)
        self._after = after

    async def _call(self, awaitable: Any) -> Any:
        if self._js is None:
            raise BusUnavailable("not connected")
        try:
            return await awaitable
        except (NatsError, JetStreamError, OSError, TimeoutError) as exc:
            await self.close()
            raise BusUnavailable(_why(exc)) from None


def _entry(position: str, data: bytes) -> BusEntry:
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError:
        return BusEntry(position, None, "not JSON: expected an object keyed by feature name")
    if not isinstance(document, dict):
        return BusEntry(
            position,
            None,
            f"expected a JSON object keyed by feature name; got {type(document).__name__}",
        )
    return BusEntry(position, document)


def _why(exc: BaseException) -> str:
    return f"the NATS server does not answer or refused ({type(exc).__name__}: {exc})"
