"""What the rest of the service waits on: an entry applied (``wait_applied``), everything
appended so far applied (``settle``), the checkpoint brought to the current version
(``checkpoint_now``), and every replica's commits heard for this process's waiters and
hand-over (``listen_forever``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from service.applier.basis import Basis
from service.applier.checkpoints import Checkpointer
from service.applier.drain import DrainLoop
from service.applier.scheduling import Scheduler
from service.applier.waiting import FALLBACK_SECONDS, Settled
from service.errors import NotFound, Unavailable
from service.store.records import DeletionNotice, Head

log = logging.getLogger("sift.applier")

#: How long a reader waits to bring a checkpoint up to date before using the last one.
CHECKPOINT_NOW_SECONDS = 10.0


class Waits:
    """Waiting on commits and checkpoints (see the module)."""

    def __init__(
        self, basis: Basis, scheduler: Scheduler, checkpoints: Checkpointer, drains: DrainLoop
    ) -> None:
        self.store, self.settings = basis.store, basis.settings
        self._running = basis.running
        self._waiters = basis.waiters
        self._heads = basis.heads
        self._handed = basis.handed
        self.scheduler = scheduler
        self.checkpoints = checkpoints
        self.drains = drains

    async def checkpoint_now(self, name: str, timeout_s: float = CHECKPOINT_NOW_SECONDS) -> Head:
        """Apply what is pending and make the checkpoint the current version's; the head.

        For readers of fields served from checkpoints and for exports. When the lease stays
        taken for ``timeout_s`` (another replica busy applying), gives up and returns the head
        as it is: its checkpoint is then a version or a few behind, which its answer says.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            head = await self.store.registry.get_head(name)
            if head.recovery_point.version == head.version and not await self.store.log.pending(
                name, head.cursor, 1
            ):
                return head
            running = self._running.live(name)
            if running is not None:
                # This process holds the lease (maybe lingering): ask its drain to checkpoint.
                self.checkpoints.wanted.add(name)
                await asyncio.wait({running.task}, timeout=max(deadline - time.monotonic(), 0.0))
                if time.monotonic() >= deadline:
                    return await self.store.registry.get_head(name)
                continue
            lease = await self.store.leases.acquire_lease(name, self.settings.lease_ms)
            if lease is not None:
                return await self.drains.apply_all_owned(name, lease, force_checkpoint=True)
            if time.monotonic() >= deadline:
                return head
            await asyncio.sleep(0.02)

    async def wait_applied(
        self, name: str, log_id: str, timeout_s: float, incarnation: str | None = None
    ) -> Settled | None:
        """Wait until a commit of ``name`` covers entry ``log_id``; where it got to (None on
        timeout).

        Resolved by the commit itself (``Waiters``): this process's, or another replica's as
        announced. Only when nothing was heard for ``FALLBACK_SECONDS`` (a notice lost) is the
        head read, and a drain kicked again. With the ``incarnation`` the entry was appended
        to, NotFound once the name holds another selector (deleted and created again while the
        entry waited: it was never applied, and never will be).
        """
        known = self._waiters.known(name, log_id, incarnation)
        if known is not None:
            return known
        future = self._waiters.wait(name, log_id, incarnation)
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                with contextlib.suppress(TimeoutError):
                    return await asyncio.wait_for(
                        asyncio.shield(future), min(FALLBACK_SECONDS, remaining)
                    )
                head = await self.store.registry.get_head(name)
                if incarnation is not None and head.incarnation != incarnation:
                    raise NotFound(
                        f"selector '{name}' was deleted (and created anew) before the chunk "
                        f"with log id {log_id} was applied"
                    )
                self._waiters.committed(name, head)
                if future.done():
                    return future.result()
                self.scheduler.kick(name, incarnation)
        finally:
            self._waiters.discard(name, future)

    async def listen_forever(self) -> None:
        """Hear every replica's commits (``Commits.commit_notices``) for the waiters of
        this process, and for its hand-over (chunks another replica applied are let go), until
        ``close``. While Redis is away, listen again every second."""
        while not self._running.closing:
            try:
                async for notice in self.store.commits.commit_notices(
                    subscribed=lambda: self._heads.listening(True),
                    until=lambda: self._running.closing,
                ):
                    if isinstance(notice, DeletionNotice):
                        self._heads.heard(notice.name, notice.incarnation, None)
                        continue
                    # Heads first: a waiter answered below may be read right after.
                    self._heads.heard(notice.name, notice.incarnation, notice.version)
                    self._waiters.committed(notice.name, notice, rejected_any=notice.rejected)
                    self._handed.applied(notice.name, notice.cursor)
                    if self._running.closing:
                        return
            except Unavailable:
                pass  # the sweeper says it; waiters read heads meanwhile
            except Exception:
                log.exception("listening for commits failed")
            finally:
                self._heads.listening(False)
            await asyncio.sleep(1.0)

    async def settle(self, name: str, timeout_s: float) -> bool:
        """Wait (bounded) until everything appended to ``name`` so far is applied; False if
        ``timeout_s`` passed first. NotFound for a selector that does not exist."""
        last = await self.store.log.last_log_id(name)
        if last is None:
            await self.store.registry.get_head(name)
            return True
        return await self.wait_applied(name, last, timeout_s) is not None
