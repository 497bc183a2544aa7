"""API keys in Redis: created with scopes and an optional name prefix, stored hashed.

A key is ``sift_<id>_<secret>`` (16 and 48 hex digits). Redis keeps, per key, only the SHA-256
of the secret next to its description::

    {prefix}:apikey:<id>   hash: secret_sha256, scopes (JSON list), prefix, label, created_at,
                           tenant (the tenant whose quotas the key's creations count against)
    {prefix}:apikeys       set of every id (listing)
    {prefix}:quotas        hash: tenant (a key prefix) -> JSON of the quotas set for it

The secret is 192 random bits, so an unsalted hash is enough: nothing short of the secret
itself maps to the stored digest. Every request reads the record afresh, so a deleted key is
refused at once by every replica. Each key lives in its own slot (plain commands, no script),
which Redis Cluster accepts.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import time
from dataclasses import dataclass

from service.errors import CodecError
from service.store.connection import RedisClient
from service.store.redis_errors import map_redis_errors

#: Scopes a key may hold; each one implies those before it.
SCOPES = ("read", "write", "admin", "metrics")
_KEY_FORMAT = re.compile(r"sift_([0-9a-f]{16})_([0-9a-f]{48})")


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def split_key(key: str) -> tuple[str, str] | None:
    """``(id, secret)`` of a well-formed key, None for anything else."""
    match = _KEY_FORMAT.fullmatch(key)
    return (match.group(1), match.group(2)) if match else None


@dataclass(frozen=True)
class ApiKey:
    """What a key may do; never its secret."""

    id: str
    scopes: tuple[str, ...]
    prefix: str
    label: str
    created_at: float
    secret_sha256: str
    #: The tenant the key belongs to (``service.selectors.quotas``): its own prefix when the
    #: root made it, else the tenant of the key that made it, kept when that key is revoked.
    tenant: str = ""

    def public(self) -> dict[str, object]:
        return {
            "id": self.id,
            "scopes": list(self.scopes),
            "prefix": self.prefix,
            "label": self.label,
            "created_at": self.created_at,
        }

    def matches(self, secret: str) -> bool:
        """Constant-time comparison of ``secret``'s digest with the stored one."""
        return hmac.compare_digest(digest(secret), self.secret_sha256)


def _text(value: bytes | str | None) -> str:
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else value


class ApiKeyStore:
    """Create, read, list and revoke API keys (the service's Redis client, raw bytes)."""

    def __init__(self, redis: RedisClient, prefix: str) -> None:
        self.redis = redis
        self.prefix = prefix

    def _record(self, key_id: str) -> str:
        return f"{self.prefix}:apikey:{key_id}"

    @property
    def _registry(self) -> str:
        return f"{self.prefix}:apikeys"

    @map_redis_errors
    async def create(
        self, scopes: tuple[str, ...], prefix: str, label: str, tenant: str = ""
    ) -> tuple[ApiKey, str]:
        """A new key and its full text (shown to the creator once, never stored); ``tenant``
        (default: ``prefix``) is the tenant it belongs to."""
        key_id, secret = secrets.token_hex(8), secrets.token_hex(24)
        tenant = tenant or prefix
        record = ApiKey(key_id, scopes, prefix, label, time.time(), digest(secret), tenant)
        pipe = self.redis.pipeline(transaction=False)
        pipe.hset(
            self._record(key_id),
            mapping={
                "secret_sha256": record.secret_sha256,
                "scopes": json.dumps(list(scopes)),
                "prefix": prefix,
                "label": label,
                "created_at": repr(record.created_at),
                "tenant": tenant,
            },
        )
        pipe.sadd(self._registry, key_id)
        await pipe.execute()
        return record, f"sift_{key_id}_{secret}"

    @map_redis_errors
    async def get(self, key_id: str) -> ApiKey | None:
        raw = await self.redis.hgetall(self._record(key_id))
        if not raw:
            return None
        fields = {_text(k): _text(v) for k, v in raw.items()}
        try:
            return ApiKey(
                id=key_id,
                scopes=tuple(str(s) for s in json.loads(fields["scopes"])),
                prefix=fields.get("prefix", ""),
                label=fields.get("label", ""),
                created_at=float(fields["created_at"]),
                secret_sha256=fields["secret_sha256"],
                tenant=fields.get("tenant") or fields.get("prefix", ""),
            )
        except (KeyError, ValueError, TypeError) as exc:
            raise CodecError(f"stored API key {key_id} does not parse: {exc}") from exc

    @map_redis_errors
    async def all(self) -> list[ApiKey]:
        ids = sorted(_text(i) for i in await self.redis.smembers(self._registry))
        keys = [await self.get(key_id) for key_id in ids]
        return [key for key in keys if key is not None]

    @map_redis_errors
    async def delete(self, key_id: str) -> bool:
        pipe = self.redis.pipeline(transaction=False)
        pipe.delete(self._record(key_id))
        pipe.srem(self._registry, key_id)
        removed, _ = await pipe.execute()
        return bool(removed)

    # -- quotas set per tenant (``service.selectors.quotas``) ------------------------------------

    @property
    def _quotas(self) -> str:
        return f"{self.prefix}:quotas"

    @map_redis_errors
    async def quota_overrides(self, tenant: str) -> dict[str, int]:
        """The quotas set for ``tenant`` (those not set take the settings' defaults)."""
        raw = await self.redis.hget(self._quotas, tenant)
        if raw is None:
            return {}
        try:
            return {str(k): int(v) for k, v in json.loads(raw).items()}
        except (ValueError, TypeError, AttributeError) as exc:
            raise CodecError(f"stored quotas of tenant {tenant!r} do not parse: {exc}") from exc

    @map_redis_errors
    async def tenants_with_quotas(self) -> list[str]:
        """Every tenant whose quotas the root set."""
        return sorted(_text(t) for t in await self.redis.hkeys(self._quotas))

    @map_redis_errors
    async def set_quota_overrides(self, tenant: str, overrides: dict[str, int]) -> None:
        """Set ``tenant``'s quotas to ``overrides`` (empty: the defaults again)."""
        if overrides:
            await self.redis.hset(self._quotas, tenant, json.dumps(overrides))
        else:
            await self.redis.hdel(self._quotas, tenant)
