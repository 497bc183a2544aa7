"""OpenTelemetry traces (service/tracing.py, service/api/tracing.py): a real app on the test
Redis, its spans recorded by the SDK's in-memory exporter; off by default, and then no provider
and no span; on from the standard ``OTEL_*`` variables, exported over OTLP/HTTP to a collector
that is a real HTTP server here."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from service import tracing
from tests.support.api import create_selector

pytestmark = pytest.mark.asyncio

TRACE_ID = 0x4BF92F3577B34DA6A3CE929D0E0E4736
PARENT_ID = 0x00F067AA0BA902B7
CHUNKS = "POST /v1/selectors/{name}/chunks"
#: The applier's drain keeps the state (and the lease) between chunks: chunks may go direct.
LINGERING = {"applier_linger_seconds": 30.0}


def traceparent(trace_id: int, parent_id: int = PARENT_ID) -> dict[str, str]:
    return {"traceparent": f"00-{trace_id:032x}-{parent_id:016x}-01", "tracestate": "vendor=x"}


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Tracing on, every span ended kept in memory."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(provider)
    try:
        yield exporter
    finally:
        tracing.uninstall()
        provider.shutdown()


def named(recorded: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [span for span in recorded if span.name == name]


def children(recorded: Sequence[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    return [
        span
        for span in recorded
        if span.parent is not None and span.parent.span_id == parent.context.span_id
    ]


async def ended(exporter: InMemorySpanExporter, predicate: Any) -> list[ReadableSpan]:
    """The spans once ``predicate`` holds of them (the applier's end after the answer)."""
    for _ in range(200):
        recorded = list(exporter.get_finished_spans())
        if predicate(recorded):
            return recorded
        await asyncio.sleep(0.02)
    raise AssertionError(f"spans never matched: {[s.name for s in exporter.get_finished_spans()]}")


def linked_to(span: ReadableSpan, target: ReadableSpan) -> bool:
    return any(link.context.span_id == target.context.span_id for link in span.links)


@pytest.mark.parametrize("hot_path", [True, False])
async def test_a_post_continues_the_producers_trace_and_the_apply_links_to_it(
    app_factory, spans, hot_path
):
    async with app_factory(hot_path=hot_path) as (_app, http):
        await create_selector(http, "t", 3, method="variance")
        spans.clear()
        answer = await http.post(
            "/v1/selectors/t/chunks", json=[[1, 2, 3], [4, 5, 7]], headers=traceparent(TRACE_ID)
        )
        assert answer.status_code == 200, answer.text
        recorded = await ended(spans, lambda r: named(r, "sift.commit"))
    servers = [s for s in recorded if s.kind == SpanKind.SERVER]
    assert [s.name for s in servers] == [CHUNKS]  # one server span, named by its route
    server = servers[0]
    assert server.context.trace_id == TRACE_ID
    assert server.parent is not None and server.parent.span_id == PARENT_ID
    assert server.parent.is_remote
    assert server.context.trace_state.to_header() == "vendor=x"
    attributes = dict(server.attributes or {})
    assert attributes["http.route"] == "/v1/selectors/{name}/chunks"
    assert attributes["http.request.method"] == "POST"
    assert attributes["http.response.status_code"] == 200
    assert attributes["sift.selector"] == "t"
    assert attributes["sift.request_id"] == answer.headers["x-request-id"]
    # The first chunk finds no drain: validated, appended to the log, waited for.
    under = {s.name: s for s in children(recorded, server)}
    assert set(under) == {"sift.validate", "sift.append", "sift.wait"}
    append = under["sift.append"]
    assert append.attributes is not None
    assert append.attributes["sift.log_id"] == answer.json()["log_id"]
    assert append.attributes["sift.rows"] == 2
    assert under["sift.wait"].attributes == {
        "sift.selector": "t",
        "sift.method": "variance",
        "sift.rows": 2,
        "sift.version": 1,
    }
    # The applier's span: a trace of its own, linked to the append that brought the chunk.
    (apply,) = named(recorded, "sift.apply")
    assert apply.context.trace_id != TRACE_ID and apply.parent is None
    assert linked_to(apply, append)
    assert dict(apply.attributes or {}) == {
        "sift.selector": "t",
        "sift.method": "variance",
        "sift.rows": 2,
        "sift.path": "log",
    }
    assert {s.name for s in children(recorded, apply)} == {"sift.compute", "sift.commit"}
    (commit,) = named(recorded, "sift.commit")
    assert commit.attributes is not None and commit.attributes["sift.version"] == 1


async def test_a_direct_chunk_is_linked_from_the_drain_that_applied_it(app_factory, spans):
    async with app_factory(**LINGERING) as (_app, http):
        await create_selector(http, "d", 3, method="variance")
        first = await http.post("/v1/selectors/d/chunks", json=[[1, 2, 3]])
        assert first.status_code == 200
        # The drain now lingers with the state: the next waited chunks go direct (most of them:
        # one may meet the drain between its reads).
        for i in range(10):
            trace_id = TRACE_ID + 1 + i
            posted = await http.post(
                "/v1/selectors/d/chunks", json=[[i, 1, 2]], headers=traceparent(trace_id)
            )
            assert posted.status_code == 200, posted.text
            direct = [
                s
                for s in named(spans.get_finished_spans(), "sift.direct")
                if s.context.trace_id == trace_id
                and s.attributes is not None
                and s.attributes["sift.applied"]
            ]
            if direct:
                break
        assert direct, "no chunk went direct"
        recorded = await ended(
            spans, lambda r: any(linked_to(s, direct[0]) for s in named(r, "sift.apply"))
        )
    (apply,) = [s for s in named(recorded, "sift.apply") if linked_to(s, direct[0])]
    assert apply.attributes is not None and apply.attributes["sift.path"] == "direct"
    assert {s.name for s in children(recorded, apply)} == {"sift.compute", "sift.commit"}
    # The direct chunk was neither appended by its request nor waited for.
    (server,) = [s for s in recorded if s.kind == SpanKind.SERVER and s.context == direct[0].parent]
    assert {s.name for s in children(recorded, server)} == {"sift.validate", "sift.direct"}


async def test_reads_get_their_span_and_the_redis_read_under_it(app_factory, spans):
    async with app_factory() as (_app, http):
        await create_selector(http, "r", 3, method="variance")
        assert (await http.post("/v1/selectors/r/chunks", json=[[1, 2, 3], [2, 2, 5]])).is_success
        spans.clear()
        assert (await http.get("/v1/selectors/r/top?h=2")).status_code == 200
        assert (await http.get("/v1/selectors/r")).status_code == 200
        assert (await http.get("/v1/healthz")).status_code == 200
        recorded = list(spans.get_finished_spans())
    servers = [s for s in recorded if s.kind == SpanKind.SERVER]
    # A new trace each (no traceparent came); the probe is not traced.
    assert [s.name for s in servers] == [
        "GET /v1/selectors/{name}/top",
        "GET /v1/selectors/{name}",
    ]
    assert all(s.parent is None for s in servers)
    top, described = servers
    reads = children(recorded, top)
    assert {s.name for s in reads} == {"sift.read"}
    assert {(s.attributes or {})["sift.read"] for s in reads} == {"head", "top"}
    head = next(s for s in reads if (s.attributes or {})["sift.read"] == "head")
    assert dict(head.attributes or {}) == {
        "sift.selector": "r",
        "sift.read": "head",
        "sift.method": "variance",
        "sift.version": 1,
    }
    (state,) = children(recorded, described)
    assert state.name == "sift.read" and (state.attributes or {})["sift.read"] == "state"


async def test_an_error_answer_marks_its_span(app_factory, spans):
    async with app_factory() as (_app, http):
        assert (await http.get("/v1/selectors/missing/top")).status_code == 404
        await create_selector(http, "e", 3, method="variance")
        refused = await http.post("/v1/selectors/e/chunks", json=[[1, 2]])
        assert refused.status_code == 422
    recorded = list(spans.get_finished_spans())
    servers = {s.name: s for s in recorded if s.kind == SpanKind.SERVER}
    missing = servers["GET /v1/selectors/{name}/top"]
    assert (missing.attributes or {})["http.response.status_code"] == 404
    post = servers[CHUNKS]
    assert (post.attributes or {})["http.response.status_code"] == 422
    (validate,) = children(recorded, post)
    assert validate.name == "sift.validate" and not validate.status.is_ok
    assert any(event.name == "exception" for event in validate.events)


async def test_off_by_default_no_provider_and_no_span(app_factory):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(provider)
    tracing.uninstall()  # as a process without OTEL_* variables is: never installed
    assert not tracing.enabled()
    async with app_factory() as (_app, http):
        assert not tracing.enabled()  # the lifespan found no OTEL_* variable
        await create_selector(http, "o", 3, method="variance")
        posted = await http.post(
            "/v1/selectors/o/chunks", json=[[1, 2, 3]], headers=traceparent(TRACE_ID)
        )
        assert posted.status_code == 200
        assert (await http.get("/v1/selectors/o/top")).status_code == 200
    assert exporter.get_finished_spans() == ()
    # No provider was installed anywhere, and a span is the shared no-op.
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    with tracing.span("sift.anything") as span:
        assert span is trace.INVALID_SPAN and not span.is_recording()
    assert tracing.span("sift.other") is tracing.span("sift.anything")
    assert tracing.here() is None and tracing.appenders("o", ["1-0"]) == []
    provider.shutdown()


@pytest.mark.parametrize(
    ("variables", "on"),
    [
        ({}, False),
        ({"OTEL_SERVICE_NAME": "sift-a"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "console"}, True),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, False),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, False),
    ],
)
async def test_the_standard_variables_turn_it_on(monkeypatch, variables, on):
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    provider = tracing.provider_from_environment()
    assert tracing.requested() is on
    assert (provider is not None) is on
    if provider is not None:
        assert isinstance(provider, TracerProvider)
        assert provider.resource.attributes["service.name"] == "sift"
        provider.shutdown()


class Collector(BaseHTTPRequestHandler):
    """An OTLP/HTTP receiver: keeps what is POSTed to /v1/traces."""

    received: ClassVar[list[tuple[str, bytes]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        Collector.received.append((self.path, body))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


async def test_exported_over_otlp_when_an_endpoint_is_set(app_factory, monkeypatch):
    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Collector.received = []
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{server.server_port}")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "sift-test")
    try:
        async with app_factory() as (_app, http):
            assert tracing.enabled()
            await create_selector(http, "x", 3, method="variance")
            posted = await http.post(
                "/v1/selectors/x/chunks", json=[[1, 2, 3]], headers=traceparent(TRACE_ID)
            )
            assert posted.status_code == 200
        assert not tracing.enabled()  # the lifespan's end flushed and shut it down
    finally:
        server.shutdown()
        server.server_close()
    assert Collector.received and {path for path, _ in Collector.received} == {"/v1/traces"}
    exported = []
    for _path, body in Collector.received:
        request = ExportTraceServiceRequest.FromString(body)
        for resource in request.resource_spans:
            service = {a.key: a.value.string_value for a in resource.resource.attributes}
            assert service["service.name"] == "sift-test"
            for scope in resource.scope_spans:
                exported += [(s.name, s.trace_id.hex()) for s in scope.spans]
    assert (CHUNKS, f"{TRACE_ID:032x}") in exported
    assert ("sift.append", f"{TRACE_ID:032x}") in exported
    assert "sift.apply" in {name for name, _ in exported}
