"""API keys, tenants' quotas and the probes."""

from __future__ import annotations

from dataclasses import dataclass, field

from siftstream.results._common import Json


@dataclass(frozen=True)
class ApiKey:
    """An API key as listed (never with its secret)."""

    id: str
    scopes: list[str]
    prefix: str
    label: str
    created_at: float

    @classmethod
    def from_json(cls, doc: Json) -> ApiKey:
        return cls(
            str(doc["id"]),
            [str(s) for s in doc["scopes"]],
            str(doc.get("prefix", "")),
            str(doc.get("label", "")),
            float(doc["created_at"]),
        )


@dataclass(frozen=True)
class CreatedKey:
    """A new API key: ``key`` is the secret, shown only in this answer."""

    info: ApiKey
    key: str = field(repr=False)

    @classmethod
    def from_json(cls, doc: Json) -> CreatedKey:
        return cls(ApiKey.from_json(doc), str(doc["key"]))


@dataclass(frozen=True)
class TenantQuota:
    """A tenant's quotas (``limits``) and what its names hold (``used``): selectors,
    state_bytes (declared), alerts, streams."""

    tenant: str
    limits: dict[str, int]
    used: dict[str, int]

    @classmethod
    def from_json(cls, doc: Json) -> TenantQuota:
        return cls(
            str(doc["tenant"]),
            {str(k): int(v) for k, v in doc["limits"].items()},
            {str(k): int(v) for k, v in doc["used"].items()},
        )


@dataclass(frozen=True)
class Health:
    """A probe's answer: ``ok`` (healthz) or ``ready`` (readyz), with readiness's Redis mode."""

    status: str
    redis: str | None = None

    @classmethod
    def from_json(cls, doc: Json) -> Health:
        redis = doc.get("redis")
        return cls(str(doc["status"]), None if redis is None else str(redis))
