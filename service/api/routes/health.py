"""Probes and metrics for operators: liveness, readiness, Prometheus."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from service.api.deps import json_response
from service.errors import Unavailable
from service.metrics import CONTENT_TYPE_LATEST

router = APIRouter(tags=["operations"])


@router.get("/v1/healthz")
async def healthz() -> Response:
    """The process is alive and serving (says nothing about Redis)."""
    return json_response({"status": "ok"})


@router.get("/v1/readyz")
async def readyz(request: Request) -> Response:
    """Redis answers and the write-path scripts are loaded: safe to send traffic here."""
    store = request.app.state.service.store
    try:
        await store.ping()
        if not await store.scripts_loaded():
            await store.ensure_scripts()
    except Unavailable as exc:
        raise Unavailable(f"not ready: {exc.detail}", retry_after=exc.retry_after) from None
    return json_response({"status": "ready", "redis": request.app.state.redis_mode})


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    return Response(request.app.state.metrics.render(), media_type=CONTENT_TYPE_LATEST)
