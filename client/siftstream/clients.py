"""``Client`` and ``AsyncClient``: the Sift API from Python, on httpx.

Both expose the same operations with the same signatures and typed results
(``siftstream.results``); ``AsyncClient``'s are coroutines. Each operation is written once,
in a module of ``siftstream._api`` (a function of the ``Api`` settings and its
arguments); ``Operation`` makes it a method of both clients that runs it
with the client's driver (``siftstream._http``), which does the requests, the retries and
the waiting.

    with Client("http://127.0.0.1:8000", api_key=...) as sift:   # or SIFT_URL, SIFT_API_KEY
        sift.create("news", "fsds", n_features=X.shape[1], params={"k": 20})
        sift.push("news", X)                      # chunks of about 8 MiB, retried safely
        print(sift.top("news", h=20).names)
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Coroutine, Mapping
from types import TracebackType
from typing import Any, Concatenate, Generic, ParamSpec, TypedDict, TypeVar, Unpack, overload

import httpx

from siftstream import _connection
from siftstream._api import Api, keys, monitoring, selectors, sources, streams
from siftstream._api.core import _only
from siftstream._connection import DEFAULT_URL as DEFAULT_URL
from siftstream._http import AsyncDriver, Plan, RetryPolicy, SyncDriver
from siftstream._inputs import DEFAULT_CHUNK_BYTES

P = ParamSpec("P")
T = TypeVar("T")

#: A chunk's POST waits until it is applied (``SIFT_APPLY_WAIT_SECONDS``, 60 s by default)
#: before answering 202: the read timeout stays above that.
DEFAULT_TIMEOUT = httpx.Timeout(90.0, connect=5.0)


def _headers(api_key: str | None, extra: Mapping[str, str] | None) -> dict[str, str]:
    headers = {"user-agent": f"sift-client/{client_version()}"}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    headers.update(extra or {})
    return headers


def _policy(retry: RetryPolicy | None, retry_budget: float | None) -> RetryPolicy:
    """The client's retry policy: ``retry`` (default ``RetryPolicy()``) with ``retry_budget``
    as its budget when given."""
    policy = retry or RetryPolicy()
    if retry_budget is None:
        return policy
    if not retry_budget >= 0:
        raise ValueError(f"retry_budget must be a number of seconds >= 0; got {retry_budget}")
    return dataclasses.replace(policy, budget=float(retry_budget))


class ClientOptions(TypedDict, total=False):
    """A client's options besides its URL, key and transport (``Client`` tells each one)."""

    retry_budget: float | None
    timeout: httpx.Timeout | float
    retry: RetryPolicy | None
    chunk_bytes: int
    headers: Mapping[str, str] | None


def _settings(
    client: Operations, url: str | None, api_key: str | None, options: ClientOptions
) -> tuple[dict[str, Any], RetryPolicy]:
    """Set the client's ``url`` and ``_api``; its httpx client's settings and retry policy."""
    _only(options, ClientOptions, f"{type(client).__name__}.__init__")
    client.url = _connection.service_url(url)
    client._api = Api(options.get("chunk_bytes", DEFAULT_CHUNK_BYTES))
    headers = _headers(_connection.api_key(api_key), options.get("headers"))
    policy = _policy(options.get("retry"), options.get("retry_budget"))
    settings = {"base_url": client.url, "headers": headers}
    return settings | {"timeout": options.get("timeout", DEFAULT_TIMEOUT)}, policy


def client_version() -> str:
    """The installed package's version (``unknown`` when run from an uninstalled tree)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("siftstream")
    except PackageNotFoundError:
        return "unknown"


class Operation(Generic[P, T]):
    """One operation of ``siftstream._api`` as a method of both clients (a descriptor).

    On a ``Client`` it is a function with the operation's signature that runs the plan to its
    result; on an ``AsyncClient`` a coroutine function with the same signature. The operation
    is written once, as a function taking the ``Api`` settings first; the overloads give
    each client its exact type.
    """

    def __init__(self, plan: Callable[Concatenate[Api, P], Plan[T]]) -> None:
        self.plan = plan
        # What help() and IDEs show of a bound operation: its signature without the Api.
        signature = inspect.signature(plan)
        self.signature = signature.replace(parameters=list(signature.parameters.values())[1:])

    @overload
    def __get__(self, client: None, owner: type) -> Operation[P, T]: ...

    @overload
    def __get__(self, client: Client, owner: type) -> Callable[P, T]: ...

    @overload
    def __get__(self, client: AsyncClient, owner: type) -> Callable[P, Coroutine[Any, Any, T]]: ...

    def __get__(self, client: Client | AsyncClient | None, owner: type) -> Any:
        if client is None:
            return self
        plan = self.plan
        if isinstance(client, AsyncClient):
            driver = client._driver

            @functools.wraps(plan)
            async def awaited(*args: Any, **kwargs: Any) -> Any:
                return await driver.run(plan(client._api, *args, **kwargs))

            bound: Callable[..., Any] = awaited
        else:

            @functools.wraps(plan)
            def blocking(*args: Any, **kwargs: Any) -> Any:
                return client._driver.run(plan(client._api, *args, **kwargs))

            bound = blocking
        setattr(bound, "__signature__", self.signature)  # noqa: B010 (functions take it)
        return bound


class Operations:
    """Every operation of the API (``siftstream._api``), for ``Client`` and ``AsyncClient``
    alike."""

    #: The service's base URL, and the settings the operations run with.
    url: str
    _api: Api

    health = Operation(keys.health)
    ready = Operation(keys.ready)
    metrics = Operation(keys.metrics)
    methods = Operation(selectors.methods)
    create = Operation(selectors.create)
    describe = Operation(selectors.describe)
    list_page = Operation(selectors.list_page)
    list_selectors = Operation(selectors.list_selectors)
    delete = Operation(selectors.delete)
    delete_selectors = Operation(selectors.delete_selectors)
    detach = Operation(selectors.detach)
    create_stream = Operation(streams.create_stream)
    describe_stream = Operation(streams.describe_stream)
    stream_page = Operation(streams.stream_page)
    list_streams = Operation(streams.list_streams)
    delete_stream = Operation(streams.delete_stream)
    push_stream = Operation(streams.push_stream)
    push_stream_chunk = Operation(streams.push_stream_chunk)
    push_stream_columns = Operation(streams.push_stream_columns)
    stream_chunk_status = Operation(streams.stream_chunk_status)
    stream_rankings = Operation(streams.stream_rankings)
    create_source = Operation(sources.create_source)
    describe_source = Operation(sources.describe_source)
    list_sources = Operation(sources.list_sources)
    restart_source = Operation(sources.restart_source)
    delete_source = Operation(sources.delete_source)
    push = Operation(selectors.push)
    push_chunk = Operation(selectors.push_chunk)
    chunk_status = Operation(selectors.chunk_status)
    push_features = Operation(selectors.push_features)
    push_feature_chunk = Operation(selectors.push_feature_chunk)
    features = Operation(selectors.features)
    top = Operation(selectors.top)
    weights = Operation(selectors.weights)
    history = Operation(selectors.history)
    drift = Operation(monitoring.drift)
    set_baseline = Operation(monitoring.set_baseline)
    forget_baseline = Operation(monitoring.forget_baseline)
    create_alert = Operation(monitoring.create_alert)
    list_alerts = Operation(monitoring.list_alerts)
    rotate_alert_secret = Operation(monitoring.rotate_alert_secret)
    delete_alert = Operation(monitoring.delete_alert)
    alert_events = Operation(monitoring.alert_events)
    redeliver_alert_event = Operation(monitoring.redeliver_alert_event)
    rearm_alert = Operation(monitoring.rearm_alert)
    merge = Operation(selectors.merge)
    projection = Operation(selectors.projection)
    transform = Operation(selectors.transform)
    cluster = Operation(selectors.cluster)
    export = Operation(selectors.export)
    import_selector = Operation(selectors.import_selector)
    create_key = Operation(keys.create_key)
    list_keys = Operation(keys.list_keys)
    revoke_key = Operation(keys.revoke_key)
    quota = Operation(keys.quota)
    set_quota = Operation(keys.set_quota)


class Client(Operations):
    """A blocking client of one Sift service.

    ``url``: the service's base URL (default ``$SIFT_URL``, else ``http://127.0.0.1:8000``;
    ``127.0.0.1:8765`` means ``http://``, a trailing ``/v1`` is dropped: ``_connection``);
    ``api_key``: sent as a bearer token (default ``$SIFT_API_KEY``, else ``$SIFT_API_TOKEN``;
    ``""`` sends none); ``retry_budget``: seconds a call keeps retrying transport errors and
    503s before it gives up (default 10; the budget of ``retry``, the ``RetryPolicy``, which
    sets the backoff too; writes keep their Idempotency-Key across retries); ``chunk_bytes``:
    the size that ``push`` cuts large inputs to; ``transport``: an httpx transport (tests,
    proxies).
    """

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        transport: httpx.BaseTransport | None = None,
        **options: Unpack[ClientOptions],
    ) -> None:
        settings, policy = _settings(self, url, api_key, options)
        self._http = httpx.Client(**settings, transport=transport)
        self._driver = SyncDriver(self._http, policy)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client({self.url!r})"


class AsyncClient(Operations):
    """The asyncio client: ``Client``'s operations as coroutines (same arguments, results,
    URL, key and retry budget)."""

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        **options: Unpack[ClientOptions],
    ) -> None:
        settings, policy = _settings(self, url, api_key, options)
        self._http = httpx.AsyncClient(**settings, transport=transport)
        self._driver = AsyncDriver(self._http, policy)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"AsyncClient({self.url!r})"
