"""The probes (liveness, readiness, metrics); API keys and tenants' quotas."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import quote

from siftstream._api.core import (
    JSON_HEADERS,
    Api,
    _json,
    _nothing,
    json_body,
)
from siftstream._http import Call
from siftstream.results import (
    ApiKey,
    CreatedKey,
    Health,
    TenantQuota,
)


def health(api: Api) -> Call[Health]:
    """Liveness: the process serves (says nothing about Redis)."""
    return Call("GET", "/v1/healthz", lambda r: Health.from_json(_json(r)))


def ready(api: Api) -> Call[Health]:
    """Readiness (Redis answers); raises ``UnavailableError`` at once when not ready."""
    return Call("GET", "/v1/readyz", lambda r: Health.from_json(_json(r)), retry_unavailable=False)


def metrics(api: Api) -> Call[str]:
    """The Prometheus text of ``/metrics`` (the client's key must be the metrics token when
    the service has one)."""
    return Call("GET", "/metrics", lambda r: r.text)


def create_key(
    api: Api, scopes: Sequence[str], prefix: str = "", label: str = ""
) -> Call[CreatedKey]:
    """A new API key (admin). Its secret (``CreatedKey.key``) is in this answer only."""
    return Call(
        "POST",
        "/v1/keys",
        lambda r: CreatedKey.from_json(_json(r)),
        content=json_body({"scopes": list(scopes), "prefix": prefix, "label": label}),
        headers=JSON_HEADERS,
        replay_safe=False,  # a replay would make a second key, never shown to anyone
    )


def list_keys(api: Api) -> Call[list[ApiKey]]:
    """The API keys this key may manage, without secrets."""
    return Call("GET", "/v1/keys", lambda r: [ApiKey.from_json(k) for k in _json(r)["keys"]])


def revoke_key(api: Api, key_id: str) -> Call[None]:
    """Revoke a key on every replica at once."""
    return Call(
        "DELETE", f"/v1/keys/{quote(key_id, safe='')}", _nothing, done_earlier=frozenset({404})
    )


def quota(api: Api, tenant: str) -> Call[TenantQuota]:
    """A tenant's quotas and what its names hold (the root, or the tenant's own admin)."""
    return Call(
        "GET",
        f"/v1/quotas/{quote(tenant, safe='')}",
        lambda r: TenantQuota.from_json(_json(r)),
    )


def set_quota(
    api: Api,
    tenant: str,
    *,
    selectors: int | None = None,
    state_bytes: int | None = None,
    alerts: int | None = None,
    streams: int | None = None,
) -> Call[TenantQuota]:
    """Set a tenant's quotas (the root only); those left out (None) take the defaults
    again."""
    given = {"selectors": selectors, "state_bytes": state_bytes, "alerts": alerts}
    limits = {k: v for k, v in {**given, "streams": streams}.items() if v is not None}
    return Call(
        "PUT",
        f"/v1/quotas/{quote(tenant, safe='')}",
        lambda r: TenantQuota.from_json(_json(r)),
        content=json_body(limits),
        headers=JSON_HEADERS,
    )
