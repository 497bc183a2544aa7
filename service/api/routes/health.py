"""Probes and metrics for operators: the pod's probe, Redis's readiness, Prometheus.

``/v1/healthz`` is what an orchestrator asks, for liveness and for readiness alike: it answers
once the app has started and until it shuts down, whatever Redis does. ``/v1/readyz`` says
whether Redis answers, for operators, alerts and scripts: with one Redis shared by every
replica, a readiness probe on it would take them all out of their Service at once, and
clients would get connection errors instead of the 503 with ``Retry-After`` each replica
answers while Redis is down (docs/operations/deployment.md, "Probes").
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from starlette.responses import Response

from service.api.deps import get_runtime, get_settings, json_response
from service.api.guard import GuardedRoute
from service.api.schemas import PROBLEM_RESPONSES
from service.auth import PUBLIC, bearer_token, requires, same_secret
from service.errors import Unauthorized, Unavailable
from service.metrics import CONTENT_TYPE_LATEST, GAUGED_SELECTORS_MAX

router = APIRouter(tags=["operations"], route_class=GuardedRoute)

#: How long ``/v1/readyz`` waits for Redis before it answers 503: a slow or paused Redis is
#: not ready, and a probe that hangs as long as Redis does tells its caller nothing.
READY_TIMEOUT_SECONDS = 1.0


@router.get("/v1/healthz")
@requires(PUBLIC)
async def healthz() -> Response:
    """This process serves: its app has started and is not shutting down. Says nothing about
    Redis: while Redis is down the process still answers, requests with 503 and Retry-After.
    The liveness and the readiness probe of deploy/kubernetes."""
    return json_response({"status": "ok"})


@router.get("/v1/readyz", responses={503: PROBLEM_RESPONSES[503]})
@requires(PUBLIC)
async def readyz(request: Request) -> Response:
    """Redis answers and the write-path scripts are loaded: requests that need Redis succeed.

    For operators, alerts and scripts; not an orchestrator's readiness probe, which asks
    ``/v1/healthz`` (a shared Redis down would take every replica out of its Service at once).

    On a Redis Cluster (``"redis": "cluster"``) every master is PINGed and the cluster's state
    read: ready while the state is ``ok`` and a master answers, with how many of them do
    (``cluster.masters_answering`` of ``cluster.masters``).

    With the embedded Redis, the answer also says how often it was restarted and the last
    incident; while it is being restarted, a 503 says so (``"redis": "restarting"``, the exit
    status or signal, since when) with the time the restart should still take.

    A Redis that does not answer within ``READY_TIMEOUT_SECONDS`` (paused, swapping, stuck in a
    slow command) is not ready: 503 then, not an answer as late as Redis's.
    """
    runtime = get_runtime(request)
    supervisor = runtime.supervisor
    if supervisor is not None and not supervisor.healthy:
        incident = supervisor.incident
        how = "exited"
        if incident is not None:
            how = (
                f"was killed by {incident.signal}"
                if incident.signal
                else f"exited with status {incident.exit_code}"
            )
        raise Unavailable(
            f"not ready: the embedded Redis {how} and is being restarted",
            retry_after=supervisor.retry_after(),
            redis="restarting",
            **supervisor.status(),
        )
    store = runtime.store
    body: dict[str, object] = {"status": "ready", "redis": runtime.redis_mode}
    try:
        async with asyncio.timeout(READY_TIMEOUT_SECONDS):
            cluster = await store.cluster_status()
            if cluster is None:
                await store.ping()
                if not await store.scripts_loaded():
                    await store.ensure_scripts()
    except TimeoutError:
        raise Unavailable(
            f"not ready: Redis did not answer within {READY_TIMEOUT_SECONDS:g} s", retry_after=1
        ) from None
    except Unavailable as exc:
        raise Unavailable(f"not ready: {exc.detail}", retry_after=exc.retry_after) from None
    if cluster is not None:
        if not cluster.serving:
            raise Unavailable(
                f"not ready: the Redis Cluster's state is '{cluster.state}'", retry_after=1
            )
        # Ready while a master is down: its slots answer 503 until a replica takes over, the
        # other selectors are served (an unready replica would serve none of them).
        body["cluster"] = cluster.as_dict()
    if supervisor is not None:
        body.update(supervisor.status())
    return json_response(body)


@router.get("/metrics", include_in_schema=False)
@requires(PUBLIC)
async def metrics(request: Request) -> Response:
    """Prometheus text. Open only when no token is configured at all; with ``SIFT_API_TOKEN``
    or ``SIFT_METRICS_TOKEN`` set, for a bearer of ``SIFT_METRICS_TOKEN``, of the API token, or
    of a key with scope ``metrics`` or ``admin`` and no name prefix."""
    settings = get_settings(request)
    runtime = get_runtime(request)
    auth = runtime.auth
    authorization = request.headers.get("authorization")
    expected = settings.metrics_token
    token = bearer_token(authorization)
    if expected and token is not None and same_secret(token, expected):
        pass
    elif auth.enabled:
        (await auth.authenticate(authorization)).require_metrics()
    elif expected:
        raise Unauthorized("expected header 'Authorization: Bearer <SIFT_METRICS_TOKEN>'")
    metrics, inventory = runtime.metrics, runtime.inventory
    # The selector gauges come from Redis: read again at most every few seconds (bounded).
    await metrics.selector_gauges.refresh(
        lambda: inventory.usage(GAUGED_SELECTORS_MAX), settings.metrics_refresh_seconds
    )
    return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)
