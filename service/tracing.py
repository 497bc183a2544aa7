"""OpenTelemetry traces of the write path and the reads, off unless the standard ``OTEL_*``
variables ask for them (docs/operations/tracing.md).

Off (the default), no tracer provider exists and every helper here returns at its first line,
on one module-level test (``_tracer is None``): a shared ``nullcontext`` whose span is the
API's invalid, non-recording one. On, this module holds the tracer of the provider
``start`` made from the environment (an OTLP/HTTP exporter behind a batch processor), or of the
global provider someone else configured (``opentelemetry-instrument``, say).

What a trace holds, and how the applier's spans find the requests they apply:

* the request's server span (``service.api.tracing``), continuing the producer's
  ``traceparent``; under it ``sift.validate``, ``sift.append`` (the APPEND script) or
  ``sift.direct`` (the chunk handed to the drain), and ``sift.wait`` (a waited POST's wait);
  reads get ``sift.read``;
* ``sift.apply`` (children ``sift.compute``, ``sift.commit``): the applier runs in its own
  task and folds chunks of several requests into one update, so its span starts a trace of its
  own, *linked* to the server span of every request whose chunk it applies. A request's
  context is remembered when it appends (``appended``, by log id, bounded) or travels with its
  direct chunk (``here``).

The SDK and the exporter are the ``otel`` extra; only the API (a dependency of the server) is
imported unless tracing is on.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanContext, SpanKind, Tracer
from opentelemetry.util.types import AttributeValue

log = logging.getLogger("sift.tracing")

#: A span's attributes.
Attributes = dict[str, AttributeValue]

#: The instrumentation scope of Sift's spans.
SCOPE = "sift"
#: ``service.name`` when neither ``OTEL_SERVICE_NAME`` nor ``OTEL_RESOURCE_ATTRIBUTES`` names it.
DEFAULT_SERVICE_NAME = "sift"
#: The instrumentation scope's version (the server's).
VERSION = "0.1.0"
#: Request contexts remembered by log id for the applier's links (the oldest go first: a chunk
#: that waits longer than this many appends gets an apply span without its link).
REMEMBERED_APPENDS = 4096

_tracer: Tracer | None = None
_OFF: AbstractContextManager[Span] = contextlib.nullcontext(trace.INVALID_SPAN)
#: (selector, log id) -> the context of the request that appended it.
_appended: OrderedDict[tuple[str, str], SpanContext] = OrderedDict()


def enabled() -> bool:
    """Whether spans are recorded (the one test every helper makes first)."""
    return _tracer is not None


def install(tracer_provider: trace.TracerProvider) -> None:
    """Record Sift's spans with ``tracer_provider`` (``start`` does this; tests pass theirs)."""
    global _tracer
    _tracer = tracer_provider.get_tracer(SCOPE, VERSION)


def uninstall() -> None:
    """Back to off: no spans, nothing remembered."""
    global _tracer
    _tracer = None
    _appended.clear()


def requested() -> bool:
    """Whether the standard variables ask for traces: an OTLP endpoint
    (``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) or an
    ``OTEL_TRACES_EXPORTER`` other than ``none``; never with ``OTEL_SDK_DISABLED=true``."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = _exporters()
    if exporters is not None:
        return bool(exporters)
    return any(
        os.environ.get(variable, "").strip()
        for variable in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def _exporters() -> list[str] | None:
    """``OTEL_TRACES_EXPORTER`` as a list (``none`` dropped); None when it is unset."""
    value = os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if not value:
        return None
    return [
        name for name in (part.strip() for part in value.split(",")) if name not in ("", "none")
    ]


def _configured_elsewhere() -> trace.TracerProvider | None:
    """The global provider when someone configured one (not the API's proxy or no-op)."""
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    return provider


def provider_from_environment() -> Any:
    """An SDK ``TracerProvider`` exporting as the ``OTEL_*`` variables say (its sampler and
    batch limits too: the SDK reads ``OTEL_TRACES_SAMPLER``, ``OTEL_BSP_*``); None when they do
    not ask for traces, or when the ``otel`` extra is not installed (said in the log)."""
    if not requested():
        return None
    try:
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            ConsoleSpanExporter,
            SpanExporter,
        )
    except ImportError:
        log.warning(
            "OTEL_* variables ask for traces but the OpenTelemetry SDK is not installed "
            "(pip install 'siftstream-server[otel]'): no traces"
        )
        return None
    resource = Resource.create()  # OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME
    named = os.environ.get("OTEL_SERVICE_NAME", "").strip()
    if not named and str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}))
    exporters: list[SpanExporter] = []
    for name in _exporters() or ["otlp"]:
        if name == "otlp":
            exporters.append(_otlp_exporter())
        elif name == "console":
            exporters.append(ConsoleSpanExporter())
        else:
            log.warning("OTEL_TRACES_EXPORTER=%s: Sift exports otlp or console only", name)
    if not exporters:
        return None
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def _otlp_exporter() -> Any:
    """OTLP over HTTP (protobuf), its endpoint, headers, timeout and TLS from the standard
    variables (the exporter reads them)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    protocol = (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    ).strip()
    if protocol != "http/protobuf":
        log.warning(
            "OTEL_EXPORTER_OTLP_PROTOCOL=%s: Sift exports OTLP over http/protobuf only "
            "(a collector's port 4318)",
            protocol,
        )
    return OTLPSpanExporter()


@contextlib.contextmanager
def started() -> Iterator[None]:
    """Tracing for the life of a serving process (the app's lifespan): a provider made from the
    environment, flushed and shut down at the end; or the global one configured elsewhere; or
    nothing. Leaves a provider installed before (a test's) as it is."""
    if _tracer is not None:
        yield
        return
    provider = _configured_elsewhere()
    owned = None
    if provider is None:
        provider = owned = provider_from_environment()
    if provider is None:
        yield
        return
    install(provider)
    log.info("traces on (OpenTelemetry)")
    try:
        yield
    finally:
        uninstall()
        if owned is not None:
            owned.shutdown()


def span(name: str, attributes: Attributes | None = None) -> AbstractContextManager[Span]:
    """A child span of the current one (a no-op when tracing is off)."""
    if _tracer is None:
        return _OFF
    return _tracer.start_as_current_span(name, attributes=attributes)


def server_span(name: str, parent: otel_context.Context, attributes: Attributes) -> Span:
    """The server span of a request (``service.api.tracing``; only called when on)."""
    assert _tracer is not None
    return _tracer.start_span(name, parent, SpanKind.SERVER, attributes)


def applying(
    selector: str, method: str, rows: int, links: Iterable[SpanContext | None], path: str
) -> AbstractContextManager[Span]:
    """``sift.apply``: a trace of its own (whatever task started the drain), linked to the
    requests whose chunks it applies."""
    if _tracer is None:
        return _OFF
    return _tracer.start_as_current_span(
        "sift.apply",
        otel_context.Context(),
        links=[Link(context) for context in links if context is not None],
        attributes={
            "sift.selector": selector,
            "sift.method": method,
            "sift.rows": rows,
            "sift.path": path,
        },
    )


def here() -> SpanContext | None:
    """The current span's context, to link to later (None when off)."""
    if _tracer is None:
        return None
    context = trace.get_current_span().get_span_context()
    return context if context.is_valid else None


def appended(selector: str, log_id: str) -> None:
    """Remember the current request's context as the one that appended ``log_id``."""
    if _tracer is None:
        return
    context = here()
    if context is None:
        return
    _appended[(selector, log_id)] = context
    while len(_appended) > REMEMBERED_APPENDS:
        _appended.popitem(last=False)


def appenders(selector: str, log_ids: Iterable[str]) -> list[SpanContext | None]:
    """The contexts of the requests that appended ``log_ids`` (forgotten once asked for)."""
    if _tracer is None:
        return []
    return [_appended.pop((selector, log_id), None) for log_id in log_ids]


def annotate(target: Span, attributes: Attributes) -> None:
    """Attributes learnt while a span runs (nothing when off)."""
    if _tracer is not None:
        target.set_attributes(attributes)
