"""The HTTP machinery of ``Client`` and ``AsyncClient``: one implementation, two drivers.

Everything that decides something is written once, without I/O:

* a ``Call`` describes one request (method, path, query, body, headers), how to parse its
  answer, and how it may be retried;
* ``exchange`` runs the retry policy for one call as a generator: it yields the call (send it
  now) or a ``Sleep`` and receives the response or the transport error; it returns the parsed
  answer or raises the client exception (``errors.problem_error`` for a refusal, with the
  problem+json detail);
* operations that take several requests (pushing in chunks, following pages) are generators
  that yield calls and receive their answers (``Plan``); ``program`` wraps each of their calls
  in ``exchange``.

``SyncDriver`` and ``AsyncDriver`` only do the I/O ``program`` asks for: send with httpx,
sleep with ``time`` or ``asyncio``.

Retries: transport errors (connection refused or reset, timeouts) and 503 (Redis unavailable,
``Retry-After`` honoured), with exponential backoff and jitter, capped, within a total time
budget per call (``RetryPolicy.budget``, 10 s by default): connecting never outlasts what is
left of it (or half a second), so a call to a service that is down fails within the budget, with
``ServiceUnreachableError`` naming the URL. A write carries an ``Idempotency-Key`` chosen
once per logical chunk and kept across its retries, so a retry of a chunk the service did
apply is answered as a duplicate instead of being applied twice. A call whose retry could
apply twice (``replay_safe=False``, e.g. creating an API key) is retried only when the request
cannot have reached the service (connection refused).

Sift answers every refusal as problem+json (``urn:sift:problem:...``) and never answers the
client's routes with HTML. An answer that is neither (a web server's page, another API) raises
``NotSiftError`` in one line, the body left out; the same from a proxy's 502, 503 or 504 is
retried like Sift's 503 (the proxy could not reach the service).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeAlias, TypeVar

import httpx

from siftstream.errors import (
    PROBLEM_TYPE_PREFIX,
    NotSiftError,
    ProblemError,
    ServiceUnreachableError,
    SiftClientError,
    TransportError,
    problem_error,
)

T = TypeVar("T")

#: The default total time a call keeps retrying (``RetryPolicy.budget``, ``retry_budget=``,
#: ``sift --retry-budget``), in seconds.
DEFAULT_RETRY_BUDGET = 10.0
#: The least time an attempt may take to connect, however little is left of the budget (a
#: budget of 0 means no retries, not no time to connect).
MIN_CONNECT_SECONDS = 0.5
#: The least time left of the budget worth one more attempt.
MIN_RETRY_SECONDS = 0.05
#: What a user should check when nothing answers, or something else does.
CHECK_URL = "is that its URL? (Client(url=...), sift --url or SIFT_URL)"

#: Statuses worth another attempt: 503 says so itself; 502 and 504 come from a proxy in front
#: of the service that could not reach it (or gave up waiting).
RETRIED_STATUSES = frozenset({502, 503, 504})
#: Transport errors after which the request certainly did not reach the service.
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
#: Transport errors worth another attempt (others, e.g. an unsupported URL scheme, never pass).
TRANSIENT = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request and what to do with its answer.

    ``parse`` gets every answer below 400, and those in ``done_earlier`` once an earlier
    attempt may have reached the service (a retried create that meets 409 was probably
    created by the first attempt; a retried delete that meets 404 was deleted by it).
    """

    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    params: Mapping[str, str | int | float | bool] | None = None
    content: bytes | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    #: Whether sending it again after it may have been applied is harmless (reads, and writes
    #: with an Idempotency-Key).
    replay_safe: bool = True
    done_earlier: frozenset[int] = frozenset()
    #: False for the readiness probe: its 503 is an answer, not a condition to wait out.
    retry_unavailable: bool = True
    #: Seconds that connecting may take at most: what is left of the retry budget (set by
    #: ``exchange`` on each attempt; None: the client's own timeout).
    connect_within: float | None = None

    def describe(self) -> str:
        return f"{self.method} {self.path}"


@dataclass(frozen=True)
class Sleep:
    """The instruction to wait (between attempts, or between polls of a pending chunk)."""

    seconds: float


#: A generator that yields calls (each answered with its parsed answer, or with the client
#: error thrown in) and sleeps, and returns a result.
Steps: TypeAlias = Generator[Call[Any] | Sleep, Any, T]
#: An operation: one call, or steps.
Plan: TypeAlias = Call[T] | Steps[T]


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter, capped, within a total budget per call.

    The n-th retry waits ``min(max_delay, first_delay * 2**(n-1))`` times a random factor in
    [0.5, 1] (producers that failed together do not come back together), and at least what a
    ``Retry-After`` header asked for. A call gives up when the next attempt would start after
    ``budget`` seconds from its first one, or after ``max_attempts`` attempts if set.
    """

    first_delay: float = 0.2
    max_delay: float = 5.0
    budget: float = DEFAULT_RETRY_BUDGET
    max_attempts: int | None = None
    #: Until the service has answered once, a refused connection or an unknown host fails at
    #: once instead of being retried: a command line pointed at the wrong URL says so now.
    #: (The library's default keeps retrying: a producer started before its service, or one
    #: whose connection breaks mid-stream, waits it out within the budget.)
    fail_fast_unreached: bool = False

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        backoff: float = min(self.max_delay, self.first_delay * 2.0 ** (retry - 1))
        return max(backoff * random.uniform(0.5, 1.0), retry_after or 0.0)

    def next_delay(
        self, attempts: int, elapsed: float, retry_after: float | None = None
    ) -> float | None:
        """How long to wait before attempt ``attempts + 1``, or None to give up.

        The backoff is cut short to end with the budget, so the last attempt is made when the
        budget runs out rather than when the next full delay would overrun it: a call keeps
        trying for its whole budget. A ``Retry-After`` longer than what is left is not waited
        for (the service said it will not be ready in time)."""
        if self.max_attempts is not None and attempts >= self.max_attempts:
            return None
        left = self.budget - elapsed
        delay = self.delay(attempts, retry_after)
        if left < MIN_RETRY_SECONDS or (retry_after is not None and retry_after > left):
            return None
        return min(delay, left)


#: No retries at all (each call is attempted once).
NO_RETRIES = RetryPolicy(max_attempts=1)


Outcome = httpx.Response | httpx.TransportError | None


def retry_after(response: httpx.Response) -> float | None:
    """Seconds a ``Retry-After`` header asks for (the HTTP-date form is not used by Sift)."""
    value = response.headers.get("retry-after", "").strip()
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


def content_type(response: httpx.Response) -> str:
    return str(response.headers.get("content-type", "")).split(";")[0].strip().lower()


def sift_problem(response: httpx.Response) -> dict[str, Any] | None:
    """The problem+json body of one of Sift's refusals; None for any other answer."""
    with contextlib.suppress(ValueError):
        document = response.json()
        if isinstance(document, dict) and (
            content_type(response) == "application/problem+json"
            or str(document.get("type", "")).startswith(PROBLEM_TYPE_PREFIX)
        ):
            return document
    return None


def stand_in(response: httpx.Response) -> dict[str, Any]:
    """A problem for a refusal that is not Sift's (a proxy's page): one line, no body."""
    what = content_type(response) or "no content type"
    return {
        "title": response.reason_phrase,
        "status": response.status_code,
        "detail": f"{response.status_code} {response.reason_phrase} with {what}, not Sift's "
        "problem+json: a proxy in front of the service, or another server, answered",
    }


def origin(url: httpx.URL) -> str:
    return f"{url.scheme}://{url.netloc.decode('ascii', 'replace')}"


def not_sift(call: Call[Any], response: httpx.Response) -> NotSiftError:
    url = response.request.url
    what = content_type(response) or "no content type"
    return NotSiftError(
        f"{origin(url)} did not answer as a Sift service: {call.method} {url} got "
        f"{response.status_code} {response.reason_phrase} with {what}, not Sift's JSON (another "
        f"server, or a proxy in front of Sift refusing the request); {CHECK_URL}"
    )


#: What a 401 to a request without a key adds to the service's words: how this client sends one.
SEND_A_KEY = (
    "no API key was sent: set SIFT_API_KEY (or SIFT_API_TOKEN), or pass --api-key KEY to sift "
    "or api_key=KEY to Client"
)


def refusal(call: Call[Any], response: httpx.Response) -> ProblemError:
    problem = sift_problem(response) or stand_in(response)
    if response.status_code == 401 and "authorization" not in response.request.headers:
        problem = {**problem, "detail": f"{problem.get('detail') or 'unauthorized'}; {SEND_A_KEY}"}
    return problem_error(response.status_code, problem, call.method, str(response.request.url))


def parsed(call: Call[T], response: httpx.Response) -> T:
    """The call's answer, or a client error for an answer that is not what Sift sends."""
    if content_type(response) == "text/html":  # Sift answers no client route with a page
        raise not_sift(call, response)
    try:
        return call.parse(response)
    except (ValueError, KeyError, TypeError) as exc:
        if "x-request-id" not in response.headers:  # every answer of Sift's carries one
            raise not_sift(call, response) from None
        raise SiftClientError(
            f"unexpected answer to {call.describe()} ({response.status_code}, "
            f"{response.headers.get('content-type', 'no content type')}): {exc!r}"
        ) from exc


def unreachable_error(
    call: Call[Any], exc: httpx.TransportError, attempts: int, elapsed: float
) -> ServiceUnreachableError:
    """Nothing answered: where, why, and what to check."""
    try:
        where = origin(exc.request.url)
    except RuntimeError:  # pragma: no cover - httpx sets the request of what it raises
        where = "the service's URL"
    tried = f"{attempts} attempts in {elapsed:.1f} s" if attempts > 1 else "1 attempt"
    return ServiceUnreachableError(
        f"cannot reach the service at {where}: nothing answered {call.describe()} "
        f"({type(exc).__name__}: {exc or 'no detail'}; {tried}). Is it running, and "
        f"{CHECK_URL}",
        attempts,
    )


def exchange(
    call: Call[T], policy: RetryPolicy, clock: Callable[[], float] = time.monotonic
) -> Generator[Call[T] | Sleep, Outcome, T]:
    """Attempt ``call`` until it is answered, or refused for good, or the budget runs out.

    Yields the call each time it is to be sent (the response or transport error comes back)
    and a ``Sleep`` between attempts."""
    started = clock()
    attempts = 0
    maybe_applied = False  # whether an attempt may have reached the service
    while True:
        attempts += 1
        left = max(policy.budget - (clock() - started), MIN_CONNECT_SECONDS)
        outcome = yield replace(call, connect_within=left)
        if isinstance(outcome, httpx.Response):
            status = outcome.status_code
            if status < 400 or (maybe_applied and status in call.done_earlier):
                return parsed(call, outcome)
            if status not in RETRIED_STATUSES and sift_problem(outcome) is None:
                raise not_sift(call, outcome)
            failure: SiftClientError = refusal(call, outcome)
            if status not in RETRIED_STATUSES or (status == 503 and not call.retry_unavailable):
                raise failure
            waited = retry_after(outcome)
            maybe_applied = True  # the service (or a proxy) got the request
        elif isinstance(outcome, httpx.TransportError):
            not_sent = isinstance(outcome, NOT_SENT)
            if not_sent:  # nothing answered
                failure = unreachable_error(call, outcome, attempts, clock() - started)
            else:
                failure = TransportError(
                    f"{call.describe()} failed after {attempts} attempt(s) in "
                    f"{clock() - started:.1f} s: {type(outcome).__name__}: {outcome}",
                    attempts,
                )
            if not isinstance(outcome, TRANSIENT) or not (not_sent or call.replay_safe):
                raise failure from outcome
            waited = None
            maybe_applied = maybe_applied or not not_sent
        else:  # pragma: no cover - the drivers always send an outcome back
            raise AssertionError("exchange resumed without an outcome")
        delay = policy.next_delay(attempts, clock() - started, waited)
        if delay is None:
            raise failure
        yield Sleep(delay)


def resume(
    generator: Generator[Any, Any, Any], value: Any, error: BaseException | None = None
) -> tuple[bool, Any]:
    """Resume ``generator`` with ``value`` (or throw ``error`` into it): ``(True, its return
    value)`` once it has finished, else ``(False, what it yielded next)``."""
    try:
        return False, (generator.throw(error) if error is not None else generator.send(value))
    except StopIteration as done:
        return True, done.value


def program(plan: Plan[T], policy: RetryPolicy) -> Generator[Call[Any] | Sleep, Outcome, T]:
    """A plan with the retry policy around each of its calls, as the steps a driver performs:
    a ``Call`` to send now (answered with the response or the transport error) or a
    ``Sleep``. A call's parsed answer goes back to the plan, or its client error is thrown into
    it (a plan may handle a 404 before a create); the plan's result is returned."""
    if isinstance(plan, Call):
        return (yield from exchange(plan, policy))
    answer: Any = None
    error: SiftClientError | None = None
    while True:
        finished, step = resume(plan, answer, error)
        if finished:
            return step  # type: ignore[no-any-return]
        answer, error = None, None
        if isinstance(step, Sleep):
            yield step
            continue
        try:
            answer = yield from exchange(step, policy)
        except SiftClientError as exc:
            error = exc


def unreachable(
    call: Call[Any], policy: RetryPolicy, reached: bool, exc: httpx.TransportError
) -> TransportError | None:
    """The error to raise at once for ``exc`` (``RetryPolicy.fail_fast_unreached``): the
    service never answered and the connection was refused or the host is unknown."""
    if reached or not policy.fail_fast_unreached or not isinstance(exc, httpx.ConnectError):
        return None
    return unreachable_error(call, exc, 1, 0.0)


def build_request(http: httpx.Client | httpx.AsyncClient, call: Call[Any]) -> httpx.Request:
    timeout = http.timeout
    if call.connect_within is not None:
        within = call.connect_within
        timeout = httpx.Timeout(
            connect=within if timeout.connect is None else min(timeout.connect, within),
            read=timeout.read,
            write=timeout.write,
            pool=within if timeout.pool is None else min(timeout.pool, within),
        )
    return http.build_request(
        call.method,
        call.path,
        params=call.params,
        content=call.content,
        headers=call.headers,
        timeout=timeout,
    )


class SyncDriver:
    """Runs plans with an ``httpx.Client``: sends and sleeps as ``program`` says."""

    def __init__(self, http: httpx.Client, policy: RetryPolicy) -> None:
        self.http = http
        self.policy = policy
        #: Whether the service has answered once (``RetryPolicy.fail_fast_unreached``).
        self.reached = False

    def run(self, plan: Plan[T]) -> T:
        steps: Generator[Call[Any] | Sleep, Outcome, T] = program(plan, self.policy)
        outcome: Outcome = None
        while True:
            finished, step = resume(steps, outcome)
            if finished:
                return step  # type: ignore[no-any-return]
            outcome = None
            if isinstance(step, Sleep):
                time.sleep(step.seconds)
                continue
            try:
                outcome = self.http.send(build_request(self.http, step))
                self.reached = True
            except httpx.TransportError as exc:
                failure = unreachable(step, self.policy, self.reached, exc)
                if failure is not None:
                    raise failure from exc
                outcome = exc


class AsyncDriver:
    """Runs plans with an ``httpx.AsyncClient``: the same steps as ``SyncDriver``, awaited."""

    def __init__(self, http: httpx.AsyncClient, policy: RetryPolicy) -> None:
        self.http = http
        self.policy = policy
        self.reached = False

    async def run(self, plan: Plan[T]) -> T:
        steps: Generator[Call[Any] | Sleep, Outcome, T] = program(plan, self.policy)
        outcome: Outcome = None
        while True:
            finished, step = resume(steps, outcome)
            if finished:
                return step  # type: ignore[no-any-return]
            outcome = None
            if isinstance(step, Sleep):
                await asyncio.sleep(step.seconds)
                continue
            try:
                outcome = await self.http.send(build_request(self.http, step))
                self.reached = True
            except httpx.TransportError as exc:
                failure = unreachable(step, self.policy, self.reached, exc)
                if failure is not None:
                    raise failure from exc
                outcome = exc
