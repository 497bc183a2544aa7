"""Routes of monitoring: how far the ranking moved (drift), the baseline it is measured against,
and the alerts raised when it moves (``Selectors.drift``, ``Selectors.alerts``).

Reading drift, alerts and events takes scope ``read``; pinning or forgetting the baseline and
creating or deleting alerts change what a selector's watchers are told, which is managing the
selector: scope ``admin``, as creating and deleting it.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import Response

from service.api.deps import (
    AlertEventId,
    AlertId,
    SelectorName,
    get_principal,
    get_quotas,
    get_selectors,
    result_response,
)
from service.api.guard import GuardedRoute
from service.api.schemas import PROBLEM_RESPONSES, AlertIn, at_most_setting
from service.auth import Principal, requires
from service.selectors import Selectors
from service.selectors.alerts import DeliveryStatus
from service.selectors.results import (
    AlertCreated,
    AlertEventList,
    AlertList,
    AlertOut,
    AlertSecret,
    BaselineOut,
    DriftOut,
    Redelivery,
)

router = APIRouter(prefix="/v1/selectors", tags=["monitoring"], route_class=GuardedRoute)
Service = Annotated[Selectors, Depends(get_selectors)]
Caller = Annotated[Principal, Depends(get_principal)]


@router.get("/{name}/drift", responses={200: {"model": DriftOut}, **PROBLEM_RESPONSES})
@requires("read")
async def ranking_drift(
    name: SelectorName,
    service: Service,
    h: Annotated[
        int | None,
        Query(
            ge=1,
            description="Features compared: default 10, at most SIFT_HISTORY_TOP.",
            json_schema_extra=at_most_setting("history_top"),
        ),
    ] = None,
) -> Response:
    """How far the top h moved since the previous version and since the baseline: rank-biased
    overlap, Jaccard, drift (1 - RBO) and the features that entered and left it.

    The baseline is the first version whose ranking was stable (its top 10 at least
    SIFT_BASELINE_STABILITY stable, or, without a stability estimate, agreeing with the version
    before), unless one is pinned (POST .../baseline)."""
    return result_response(await service.drift.drift(name, h))


@router.post("/{name}/baseline", responses={200: {"model": BaselineOut}, **PROBLEM_RESPONSES})
@requires("admin")
async def pin_baseline(name: SelectorName, service: Service) -> Response:
    """Pin the current version as the baseline drift and alerts are measured against."""
    return result_response(await service.drift.pin(name))


@router.delete("/{name}/baseline", status_code=204, responses=PROBLEM_RESPONSES)
@requires("admin")
async def forget_baseline(name: SelectorName, service: Service) -> Response:
    """Forget the baseline: the next version whose ranking is stable becomes it."""
    await service.drift.forget(name)
    return Response(status_code=204)


@router.post(
    "/{name}/alerts",
    status_code=201,
    responses={201: {"model": AlertCreated}, **PROBLEM_RESPONSES},
)
@requires("admin")
async def create_alert(
    name: SelectorName, body: AlertIn, service: Service, request: Request, caller: Caller
) -> Response:
    """A webhook POSTed, once per crossing, when a committed version's drift since the baseline
    reaches the threshold: a JSON event (selector, versions, drift, entered and left features)
    signed per Standard Webhooks under the alert's secret (`webhook-id`, `webhook-timestamp`,
    `webhook-signature`), retried with backoff. The secret is in this answer only."""
    quotas = get_quotas(request)
    tenancy = await quotas.tenancy(caller)
    async with quotas.locked(tenancy):
        await tenancy.admit(name, alerts=1)
        created = await service.alerts.create(
            name, body.url, body.h, body.threshold, body.min_stability, body.label, body.kind
        )
    return result_response(created, 201, {"Location": f"/v1/selectors/{name}/alerts/{created.id}"})


@router.get("/{name}/alerts", responses={200: {"model": AlertList}, **PROBLEM_RESPONSES})
@requires("read")
async def list_alerts(name: SelectorName, service: Service) -> Response:
    """The selector's alerts (without their secrets), with their last judgement."""
    return result_response(await service.alerts.all(name))


@router.get(
    "/{name}/alerts/events", responses={200: {"model": AlertEventList}, **PROBLEM_RESPONSES}
)
@requires("read")
async def alert_events(
    name: SelectorName,
    service: Service,
    limit: Annotated[
        int | None, Query(ge=1, le=100, description="Events, newest first (default 20).")
    ] = None,
    status: Annotated[
        DeliveryStatus | None,
        Query(description="Only events whose delivery has this status (failed: given up)."),
    ] = None,
) -> Response:
    """The events the alerts raised (one per crossing), newest first, with their delivery."""
    return result_response(await service.alerts.events(name, limit, status))


@router.post(
    "/{name}/alerts/events/{event_id}/redeliver",
    responses={200: {"model": Redelivery}, **PROBLEM_RESPONSES},
)
@requires("admin")
async def redeliver_alert_event(
    name: SelectorName, event_id: AlertEventId, service: Service
) -> Response:
    """Send a kept event again: back in the outbox, due now, its attempts counted afresh (an
    event that failed while its receiver was down). Its id stays the same, so a receiver that
    had it drops the repeat."""
    return result_response(await service.alerts.redeliver(name, event_id))


@router.post(
    "/{name}/alerts/{alert_id}/rearm", responses={200: {"model": AlertOut}, **PROBLEM_RESPONSES}
)
@requires("admin")
async def rearm_alert(name: SelectorName, alert_id: AlertId, service: Service) -> Response:
    """Re-arm an alert left firing: the next version over its threshold is a crossing again,
    with a new event (the drift need not fall below the threshold first)."""
    return result_response(await service.alerts.rearm(name, alert_id))


@router.post(
    "/{name}/alerts/{alert_id}/secret",
    responses={200: {"model": AlertSecret}, **PROBLEM_RESPONSES},
)
@requires("admin")
async def rotate_alert_secret(name: SelectorName, alert_id: AlertId, service: Service) -> Response:
    """A new secret for the alert, in this answer only. The previous one goes on signing every
    delivery beside it for a day (`previous_valid_until`), so that receivers switch at their
    own pace."""
    return result_response(await service.alerts.rotate_secret(name, alert_id))


@router.delete("/{name}/alerts/{alert_id:alert_id}", status_code=204, responses=PROBLEM_RESPONSES)
@requires("admin")
async def delete_alert(name: SelectorName, alert_id: AlertId, service: Service) -> Response:
    await service.alerts.delete(name, alert_id)
    return Response(status_code=204)
