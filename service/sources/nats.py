"""A NATS JetStream stream as a source's bus: one partition ('0') per source (its subject
filter), positions are stream sequences.

Each (re)connection creates an ephemeral pull consumer that starts right after the sequence
Sift committed (``DeliverPolicy.BY_START_SEQUENCE``) and acknowledges nothing (``AckPolicy.NONE``):
the position lives with the state it produced (``append.lua``), so the server has nothing
to redeliver and nothing to forget. A read that does not follow the last one (a commit that
moved elsewhere, a retry) creates the consumer again at the right place. The lag is the
consumer's ``num_pending``: messages of the subject after what it delivered.

Each pull asks for at most the batch's rows and bytes (``max_bytes``; nats-py's ``fetch`` has
no such bound, so the pull requests are Sift's own, on an inbox of its own): a message larger
than what is left is pulled alone, so a stream of large messages moves a few at a time and the
server never sends more than the source can take.

A stream's incarnation is its creation time (``created`` in its info; a restart of the server
keeps it, a deletion and creation under the same name does not). A consumer belongs to the
stream it was made on and goes with it, so no read crosses a re-creation: each consumer is
checked against the stream's creation time once made, and the source's checks compare that
time with the one its position was read in.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import nats
import orjson
from nats.errors import Error as NatsError
from nats.js import api
from nats.js import errors as api_errors
from nats.js.errors import Error as JetStreamError

from service.sources.bus import BusEntry, BusUnavailable, Extent, Start, changed_epoch
from service.sources.endpoints import BadUrl, parse_nats
from service.sources.reach import Reach, network_failure, refusal

PARTITION = "0"
#: Bound on connecting and on each request to the server.
TIMEOUT_SECONDS = 5.0
#: An abandoned consumer (its process died) is removed by the server after this long.
INACTIVE_SECONDS = 60.0
#: What a pull's end says (a status message's code): no message now, the request expired, or
#: (409) the next message is larger than the bytes asked for, or the consumer went.
_ENDED = ("404", "408")
#: What the inbox may hold: a pull's bytes at most, and a message as large as a server takes.
PENDING_BYTES = 256 << 20
_CONFLICT = "409"
_HEARTBEAT = "100"


class NatsBus:
    """One JetStream stream (and subject filter), read by sequence."""

    #: One process holds the whole source (one lease).
    shared = False

    def __init__(self, url: str, stream: str, subject: str | None, reach: Reach) -> None:
        self.url = url
        self.reach = reach
        #: What went wrong in the last connection attempt (nats-py reports it to ``error_cb``
        #: and raises NoServersError).
        self._failure: BaseException | None = None
        self.stream = stream
        self.subject = subject
        self._nc: Any = None
        self._js: Any = None
        self._sub: Any = None
        self._consumer: str | None = None
        self._inbox = ""
        #: The sequence the pull consumer's next message follows.
        self._after: str | None = None
        #: The stream's creation time as this connection found it (its incarnation).
        self._epoch: str | None = None

    async def connect(self) -> None:
        await self.close()

        async def quiet(*_: Any) -> None:
            """nats-py logs errors with the server's URL by default; the consumer's state
            says what went wrong instead."""

        async def failed(exc: BaseException) -> None:
            self._failure = exc

        self._failure = None
        try:
            where = parse_nats(self.url)
        except BadUrl as exc:
            raise BusUnavailable(f"the source's URL does not parse: {exc.detail}") from None
        host, port = where.hosts[0]
        try:
            # To the address the reach allows (``service.sources.reach``), TLS checking the
            # name; the credentials as nats-py reads them from the URL.
            address = await self.reach.address(host, port)
            literal = f"[{address}]" if address.version == 6 else str(address)
            token = where.username if where.password is None else None
            self._nc = await nats.connect(
                servers=[f"{where.scheme}://{literal}:{port}"],
                user=None if token is not None else where.username,
                password=where.password,
                token=token,
                tls_hostname=host,
                connect_timeout=TIMEOUT_SECONDS,
                allow_reconnect=False,
                # Two attempts at most (0 would be "forever": the source would stay
                # ``starting``); the consumer retries with its own backoff.
                max_reconnect_attempts=1,
                reconnect_time_wait=0.1,
                error_cb=failed,
                disconnected_cb=quiet,
                closed_cb=quiet,
            )
            self._js = self._nc.jetstream(timeout=TIMEOUT_SECONDS)
            self._epoch = _created(await self._js.stream_info(self.stream))
        except Exception as exc:  # whatever failed, the consumer retries and says why
            await self.close()
            raise BusUnavailable(self._why(self._failure or exc)) from None

    async def partitions(self) -> Sequence[str]:
        return [PARTITION]

    async def start(self, partition: str, start: str) -> Start:
        info = await self._stream_info()
        epoch = _created(info)
        if start == "earliest":
            return Start("0", 0 if self.subject is None else None, epoch)
        if start == "latest":
            return Start(str(info.state.last_seq), None, epoch)
        return Start(start, None, epoch)

    async def check(self, partition: str, position: str, epoch: str | None) -> Extent:
        info = await self._stream_info()
        now = _created(info)
        if now != self._epoch:
            # Made again since this connection began: its consumer went with it. The next
            # read makes another (a read may be under way: the consumer is its to replace).
            self._after = None
            self._epoch = now
        state = info.state
        last = int(state.last_seq or 0)
        first = str(state.first_seq) if int(state.messages or 0) > 0 else None
        start = Start("0", 0 if self.subject is None else None, now)
        reset = changed_epoch("the stream", now, epoch)
        if reset is None and position and last < int(position):
            reset = (
                f"the stream's last sequence {last} is below the position {position}: "
                "it was created again"
            )
        return Extent(now, first, str(last) if last else None, start, reset)

    def keep(self, partitions: Iterable[str]) -> None:
        """Nothing: one process reads every partition."""

    async def committed(self, positions: Mapping[str, str]) -> None:
        """The bus keeps no offsets of Sift's: nothing to tell it."""

    async def confirm(self, partition: str) -> None:
        """Nothing: a consumer is checked against the stream once made, and goes with it."""

    async def read(
        self, partition: str, after: str, max_entries: int, max_bytes: int, max_wait_s: float
    ) -> list[BusEntry]:
        if self._sub is None or self._after != after:
            await self._subscribe(after)
        try:
            messages = await self._pull(max_entries, max_bytes, max(max_wait_s, 0.01))
        except (NatsError, JetStreamError, OSError) as exc:
            await self.close()
            raise BusUnavailable(self._why(exc)) from None
        # Each message's data is decoded with its batch (``EntryShape.convert``).
        out = []
        for message in messages:
            position, data = str(message.metadata.sequence.stream), message.data
            out.append(BusEntry(position, None, None, None, data, len(data)))
        if out:
            self._after = out[-1].position
        return out

    async def _pull(self, batch: int, max_bytes: int, wait_s: float) -> list[Any]:
        """Up to ``batch`` messages and ``max_bytes`` (one larger message alone), waiting up
        to ``wait_s`` for the first."""
        # A message of an earlier pull that ended on this side first (it follows the last).
        messages = self._pending()
        if messages:
            return messages
        messages, status = await self._request(
            {"batch": batch, "max_bytes": max_bytes, "no_wait": True}, batch, TIMEOUT_SECONDS
        )
        if messages:
            return messages
        if status == _CONFLICT:  # the next message is larger than the bytes: alone
            messages, _ = await self._request({"batch": 1, "no_wait": True}, 1, TIMEOUT_SECONDS)
            return messages
        # Nothing now: wait for the next one (of any size), the server ending the wait first.
        expires = int(wait_s * 1e9)
        messages, _ = await self._request(
            {"batch": 1, "expires": expires}, 1, wait_s + TIMEOUT_SECONDS
        )
        return messages

    def _pending(self) -> list[Any]:
        """What the inbox holds already: the messages, the ends of earlier pulls dropped."""
        queue = self._sub._pending_queue
        messages = []
        while not queue.empty():
            message = queue.get_nowait()
            self._sub._pending_size -= len(message.data)
            if _status(message) is None:
                messages.append(message)
        return messages

    async def _request(
        self, request: dict[str, Any], batch: int, timeout_s: float
    ) -> tuple[list[Any], str | None]:
        """One pull request: its messages, and the status that ended it (None: it ended
        full, or on this side's timeout)."""
        nc = self._nc
        if nc is None or self._consumer is None:
            raise BusUnavailable("not connected")
        subject = f"$JS.API.CONSUMER.MSG.NEXT.{self.stream}.{self._consumer}"
        await nc.publish(subject, orjson.dumps(request), reply=self._inbox)
        deadline = asyncio.get_running_loop().time() + timeout_s
        messages: list[Any] = []
        while len(messages) < batch:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                break
            try:
                message = await self._sub.next_msg(timeout=left)
            except (TimeoutError, nats.errors.TimeoutError):
                break
            status = _status(message)
            if status is None:
                messages.append(message)
            elif status == _HEARTBEAT:
                continue
            elif status in _ENDED:
                return messages, status
            elif status == _CONFLICT:
                description = str((message.headers or {}).get("Description", "")).lower()
                if "exceeds maxbytes" in description:
                    return messages, status
                raise BusUnavailable("the NATS server ended the stream's consumer (409)")
            else:
                raise BusUnavailable(f"the NATS server refused a read (status {status})")
        return messages, None

    async def lag(
        self, partition: str, position: str, consumed: int, before: int | None
    ) -> int | None:
        if self._sub is not None and self._after == position and self._consumer is not None:
            info = await self._call(self._js.consumer_info(self.stream, self._consumer))
            return int(info.num_pending or 0)
        info = await self._stream_info()
        if self.subject is None:
            return max(0, int(info.state.last_seq) - int(position or 0))
        return None

    async def close(self) -> None:
        nc, self._nc, self._js, self._sub, self._consumer = self._nc, None, None, None, None
        self._after = self._epoch = None
        if nc is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(nc.close(), TIMEOUT_SECONDS)

    async def _unsubscribe(self) -> None:
        old, consumer, self._sub, self._consumer = self._sub, self._consumer, None, None
        self._after = None
        if old is not None:
            try:
                await asyncio.wait_for(old.unsubscribe(), TIMEOUT_SECONDS)
                if consumer is not None:
                    await self._js.delete_consumer(self.stream, consumer)
            except Exception:
                pass

    async def _subscribe(self, after: str) -> None:
        """A pull consumer whose first message is the one after sequence ``after``, on the
        stream this connection found (BusUnavailable if it was made again since)."""
        await self._unsubscribe()
        if self._js is None:
            raise BusUnavailable("not connected")
        config = api.ConsumerConfig(
            deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=int(after or 0) + 1,
            ack_policy=api.AckPolicy.NONE,
            inactive_threshold=INACTIVE_SECONDS,
            filter_subject=self.subject,
        )
        made = await self._call(self._js.add_consumer(self.stream, config=config))
        self._consumer = str(made.name)
        self._inbox = self._nc.new_inbox()
        # Room for the most a pull brings (the server bounds it: ``_pull``).
        self._sub = await self._call(
            self._nc.subscribe(self._inbox, pending_bytes_limit=PENDING_BYTES)
        )
        self._after = after
        # The stream the consumer was made on existed at this answer, after its making.
        if _created(await self._stream_info()) != self._epoch:
            await self._unsubscribe()
            raise BusUnavailable(f"the stream '{self.stream}' was created again while read")

    async def _stream_info(self) -> Any:
        if self._js is None:  # closed after a failure
            raise BusUnavailable("not connected")
        return await self._call(self._js.stream_info(self.stream))

    async def _call(self, awaitable: Any) -> Any:
        if self._js is None:
            raise BusUnavailable("not connected")
        try:
            return await awaitable
        except (NatsError, JetStreamError, OSError, TimeoutError) as exc:
            await self.close()
            raise BusUnavailable(self._why(exc)) from None

    def _why(self, exc: BaseException) -> str:
        return _why(exc, self.stream, self.subject)


def _created(info: Any) -> str | None:
    """A stream's incarnation: its creation time (None from a server that does not say)."""
    created = getattr(info, "created", None)
    return None if created is None else created.isoformat()


def _status(message: Any) -> str | None:
    """A status message's code (a pull's end, a heartbeat); None for a stream's message."""
    if message.data or not message.headers:
        return None
    status = message.headers.get("Status")
    return None if status is None else str(status)


#: JetStream's error codes: no such stream.
STREAM_NOT_FOUND = 10059


def _why(exc: BaseException, stream: str = "", subject: str | None = None) -> str:
    """The server's failure in Sift's words (never the peer's text: a service that is not
    NATS would have its banner shown), reading ``stream`` (on ``subject``)."""
    refused = refusal(exc)
    if refused is not None:
        return str(refused)
    if isinstance(exc, api_errors.NotFoundError) and exc.err_code == STREAM_NOT_FOUND:
        subjects = subject or f"{stream}.>"
        return (
            f"the NATS server has no JetStream stream '{stream}': create it, e.g. "
            f"`nats stream add {stream} --subjects '{subjects}' --defaults` (the nats CLI) or "
            f'`await nc.jetstream().add_stream(name="{stream}", subjects=["{subjects}"])` '
            "(nats-py); the source reads it once it exists"
        )
    if isinstance(exc, api_errors.ServiceUnavailableError):
        return "the NATS server has no JetStream enabled (nats-server -js enables it)"
    if isinstance(
        exc, nats.errors.AuthorizationError | nats.errors.InvalidUserCredentialsError
    ) or any(  # what nats-py raises while connecting: the server's -ERR (matched, not shown)
        phrase in str(exc).lower() for phrase in ("authorization violation", "authentication")
    ):
        return "the NATS server refused the credentials"
    if isinstance(
        exc,
        nats.errors.SecureConnRequiredError
        | nats.errors.SecureConnWantedError
        | nats.errors.SecureConnFailedError,
    ):
        return "the NATS server and the source disagree on TLS (nats:// or tls://)"
    if isinstance(exc, api_errors.APIError):
        code = exc.err_code if isinstance(exc.err_code, int) else exc.code
        return f"the NATS server refused a JetStream request (error {int(code or 0)})"
    if isinstance(
        exc,
        OSError
        | TimeoutError
        | nats.errors.TimeoutError
        | nats.errors.NoServersError
        | nats.errors.ConnectionClosedError
        | nats.errors.UnexpectedEOF
        | nats.errors.StaleConnectionError,
    ):
        return f"the NATS server does not answer: {network_failure(exc)}"
    return "the bus does not answer as a NATS server does"
