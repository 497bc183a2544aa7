"""Quotas per tenant: what the names under one name prefix may hold in Redis.

A **tenant** is a name prefix (``t1-``). Two kinds bind a creation:

* the caller's **home tenant**: the tenant its API key belongs to (``ApiKey.tenant``: its own
  prefix when the root made it, else the home tenant of the key that made it, kept when that
  key is revoked), or the prefix of any existing key that encloses the caller's, whichever is
  shortest. A tenant's admin cannot leave it by making a key of a longer prefix (``t1-a-``),
  nor by then revoking its own key: the new key's home stays ``t1-``.
* every tenant the root **set quotas for** (``PUT /v1/quotas/{prefix}``) whose prefix encloses
  the name created, whichever key creates it.

Each binding tenant is held to its limits over every name under its prefix, whoever made
them. The root (a key without a prefix, the bootstrap token, or no authentication at all) is
the operator: its own creations have no quotas, and count against the tenants they fall under.

What a tenant may hold (``Limits``): selectors, the state bytes they declare (their methods'
``state_sizes`` for their sizes and parameters, resamples and partitions included: what the
state takes once learned, though a new selector's zeros take a header each in Redis), alerts,
streams and sources. The limits are those the root set for the tenant, each one left out
taking its default from the settings (``SIFT_TENANT_*``); by default one tenant's declared
state may take ``SIFT_TENANT_MEMORY_SHARE`` (a quarter) of Redis's memory over 3 (a state is
kept as its current version and a checkpoint, with room for the log), so that no tenant can
fill Redis alone.

Usage is counted from what exists (``Inventory.tenant_usages``) whenever something is
created, never kept as a counter that a crash could leave wrong. Creations bound by one tenant
are checked one at a time in a process; two replicas creating for one tenant at the same
moment may each see the other's selector missing, so a quota may be passed by one creation per
replica at most.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass, replace

from service.applier import readable_bytes
from service.auth import Principal
from service.config import Settings
from service.errors import QuotaExceeded
from service.store.api_keys import ApiKeyStore
from service.store.inventory import Inventory, TenantUsage

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


@dataclass(frozen=True)
class Tenancy:
    """The tenants that bind one caller's creations (module docstring), read once per
    request."""

    quotas: Quotas
    #: The caller's name prefix.
    prefix: str
    #: Its home tenant ("" for the root: nothing binds it).
    home: str
    #: Every tenant the root set quotas for.
    with_quotas: tuple[str, ...]

    def binding(self, name: str | None = None) -> list[str]:
        """The tenants whose quotas bind a creation of ``name`` (default: of any name within
        the caller's prefix), outermost first."""
        if not self.home:
            return []
        within = name if name is not None and name.startswith(self.prefix) else self.prefix
        set_for = (tenant for tenant in self.with_quotas if within.startswith(tenant))
        return sorted({self.home, *set_for}, key=lambda tenant: (len(tenant), tenant))

    def reads(self, tenant: str) -> bool:
        """Whether the caller may read ``tenant``'s quotas: one that binds it, or one within
        its own names."""
        return not self.home or tenant in self.binding() or tenant.startswith(self.prefix)

    async def admit(self, name: str | None, **adding: int) -> None:
        """QuotaExceeded unless every tenant binding a creation of ``name`` may hold
        ``adding`` more (``Quotas.admit``). Call it within ``Quotas.locked(self)``."""
        await self.quotas.admit(self.binding(name), **adding)


class Quotas:
    """The quotas of tenants, and the checks before a creation (module docstring)."""

    def __init__(self, inventory: Inventory, keys: ApiKeyStore, settings: Settings) -> None:
        self.inventory = inventory
        self.keys = keys
        self.settings = settings
        self._locks: dict[str, asyncio.Lock] = {}
        self._memory: tuple[float, int] | None = None

    async def tenancy(self, caller: Principal) -> Tenancy:
        """What binds ``caller``'s creations: its home tenant, and the tenants with quotas."""
        with_quotas = tuple(await self.keys.tenants_with_quotas())
        if not caller.prefix:
            return Tenancy(self, "", "", with_quotas)
        homes = {caller.tenant or caller.prefix}
        homes |= {
            key.prefix
            for key in await self.keys.all()
            if key.prefix and caller.prefix.startswith(key.prefix)
        }
        home = min(homes, key=lambda tenant: (len(tenant), tenant))
        return Tenancy(self, caller.prefix, home, with_quotas)

    async def tenant_of(self, caller: Principal) -> str:
        """The home tenant of ``caller`` ("" for the root)."""
        return (await self.tenancy(caller)).home

    @contextlib.asynccontextmanager
    async def locked(self, tenancy: Tenancy) -> AsyncIterator[None]:
        """Held from a creation's check to its write: the locks of every tenant that binds the
        caller, in one order (a name's own tenants are within the caller's prefix, so within
        those)."""
        async with contextlib.AsyncExitStack() as stack:
            for tenant in sorted(tenancy.binding()):
                await stack.enter_async_context(self._locks.setdefault(tenant, asyncio.Lock()))
            yield

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

    async def admit(self, tenants: list[str], **adding: int) -> None:
        """QuotaExceeded unless each of ``tenants`` may hold ``adding`` more (``selectors=1``,
        ``state_bytes=...``): the answer names the tenant, the quota, its limit and what is
        used. Call it holding ``locked``."""
        if not tenants:
            return
        usages = await self.inventory.tenant_usages(tenants)
        for tenant in tenants:
            limits = asdict(await self.limits(tenant))
            used = asdict(usages[tenant])
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
