"""Quotas per tenant: what the names of one API key prefix may hold in Redis.

A **tenant** is a name prefix that API keys are limited to (``t1-``): the shortest prefix of a
key that the caller's own prefix starts with, so that a tenant's admin cannot escape its quotas
by making a key of a longer prefix (``t1-a-`` stays within ``t1-``). The root (a key without a
prefix, the bootstrap token, or no authentication at all) is the operator: it has no quotas.

What a tenant may hold (``Limits``): selectors, the state bytes they declare (their methods'
``state_sizes`` for their sizes and parameters, resamples and partitions included: what the
state takes once learned, though a new selector's zeros take a header each in Redis), alerts
and streams. The defaults come from the settings (``SIFT_TENANT_*``); by default one tenant's
declared state may take ``SIFT_TENANT_MEMORY_SHARE`` (a quarter) of Redis's memory over 3 (a
state is kept as its current version and a checkpoint, with room for the log), so that no
tenant can fill Redis alone. The root sets other limits per tenant (``PUT /v1/quotas/{prefix}``).

Usage is counted from what exists (``Inventory.tenant_usage``) whenever something is created,
never kept as a counter that a crash could leave wrong. Creations of one tenant are checked one
at a time in a process; two replicas creating for one tenant at the same moment may each see
the other's selector missing, so a quota may be passed by one creation per replica at most.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict, dataclass, replace

from service.auth import Principal
from service.config import Settings
from service.errors import QuotaExceeded
from service.store.api_keys import ApiKeyStore
from service.store.inventory import Inventory, TenantUsage
from service.updates import readable_bytes

#: How long the size of Redis's memory (for the default state quota) is trusted.
MEMORY_READ_SECONDS = 60.0
#: A state is kept as its version and a checkpoint, with room for the log.
STATE_COPIES = 3


@dataclass(frozen=True)
class Limits:
    selectors: int
    state_bytes: int
    alerts: int
    streams: int
    sources: int


class Quotas:
    """The quotas of tenants, and the checks before a creation (module docstring)."""

    def __init__(self, inventory: Inventory, keys: ApiKeyStore, settings: Settings) -> None:
        self.inventory = inventory
        self.keys = keys
        self.settings = settings
        self._locks: dict[str, asyncio.Lock] = {}
        self._memory: tuple[float, int] | None = None

    async def tenant_of(self, caller: Principal) -> str:
        """The tenant whose quotas bind ``caller`` ("" for the root: none)."""
        if not caller.prefix:
            return ""
        prefixes = {key.prefix for key in await self.keys.all() if key.prefix}
        enclosing = [p for p in prefixes if caller.prefix.startswith(p)]
        return min(enclosing, key=len) if enclosing else caller.prefix

    async def limits(self, tenant: str) -> Limits:
        """``tenant``'s quotas: those set for it, else the settings' defaults."""
        state_bytes = self.settings.tenant_max_state_bytes
        if state_bytes is None:
            state_bytes = int(
                self.settings.tenant_memory_share * await self._redis_memory() / STATE_COPIES
            )
        defaults = Limits(
            selectors=self.settings.tenant_max_selectors,
            state_bytes=state_bytes,
            alerts=self.settings.tenant_max_alerts,
            streams=self.settings.tenant_max_streams,
            sources=self.settings.tenant_max_sources,
        )
        return replace(defaults, **await self.keys.quota_overrides(tenant))

    async def usage(self, tenant: str) -> TenantUsage:
        return await self.inventory.tenant_usage(tenant)

    async def set_limits(self, tenant: str, overrides: dict[str, int]) -> None:
        """Set ``tenant``'s quotas (only those given; the others take the defaults)."""
        await self.keys.set_quota_overrides(tenant, overrides)

    def lock(self, tenant: str) -> asyncio.Lock:
        """Held from a creation's check to its write, per tenant, in this process."""
        return self._locks.setdefault(tenant, asyncio.Lock())

    async def admit(self, tenant: str, **adding: int) -> None:
        """QuotaExceeded unless ``tenant`` may hold ``adding`` more (``selectors=1``,
        ``state_bytes=...``): the answer names the quota, its limit and what is used. Call it
        holding ``lock(tenant)``."""
        if not tenant:
            return
        limits = asdict(await self.limits(tenant))
        used = asdict(await self.usage(tenant))
        for quota, more in adding.items():
            if used[quota] + more > limits[quota]:
                raise QuotaExceeded(
                    f"tenant '{tenant}' may hold {_shown(quota, limits[quota])}; it holds "
                    f"{_shown(quota, used[quota])} and this would add {_shown(quota, more)}",
                    quota=quota,
                    limit=limits[quota],
                    used=used[quota],
                    requested=more,
                    tenant=tenant,
                )

    async def _redis_memory(self) -> int:
        """Redis's ``maxmemory``, else the machine's memory as Redis reports it."""
        now = time.monotonic()
        if self._memory is not None and now - self._memory[0] < MEMORY_READ_SECONDS:
            return self._memory[1]
        info = await self.inventory.store.redis.info("memory")
        memory = int(info.get("maxmemory") or 0) or int(info.get("total_system_memory") or 0)
        self._memory = (now, memory)
        return memory


def _shown(quota: str, amount: int) -> str:
    if quota == "state_bytes":
        return f"{readable_bytes(amount)} of declared state"
    return f"{amount} {quota}"
