"""API keys, tenants' quotas and the probes."""

from __future__ import annotations

from dataclasses import dataclass, field

from siftstream.results._common import Answer, Json


@dataclass(frozen=True)
class ApiKey(Answer):
    """An API key as listed (never with its secret)."""

    id: str
    scopes: list[str]
    prefix: str
    label: str
    created_at: float


@dataclass(frozen=True)
class CreatedKey(Answer):
    """A new API key: ``key`` is the secret, shown only in this answer."""

    info: ApiKey
    key: str = field(repr=False)

    @classmethod
    def wire_doc(cls, doc: Json) -> Json:
        return {"info": doc, "key": doc["key"]}


@dataclass(frozen=True)
class TenantQuota(Answer):
    """A tenant's quotas (``limits``) and what its names hold (``used``): selectors,
    state_bytes (declared), alerts, streams."""

    tenant: str
    limits: dict[str, int]
    used: dict[str, int]


@dataclass(frozen=True)
class Health(Answer):
    """A probe's answer: ``ok`` (healthz) or ``ready`` (readyz), with readiness's Redis mode."""

    status: str
    redis: str | None = None
