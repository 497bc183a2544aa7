"""The applier: folds a selector's pending log entries into its state, exactly once.

The log of accepted chunks is the truth (ARCHITECTURE.md, "The write path"). One applier per
selector at a time, across every replica, holds the selector's lease and a fencing token. It
keeps the selector's state in memory (``HeldState``), reads the entries after the committed cursor,
coalesces them into one update computed off the event loop, and commits with one script: the
next version's head, what readers need of it (the published fields: scores, decisions,
projections, scalars), its place in the ranking history, and a commit record saying which
entries it applied, all behind a compare-and-set that rejects a stale applier. The whole state
is written only as a checkpoint, in pieces, when one is due (``Checkpointer.due``). An
applier that does not hold a selector's state (after a crash, a lease handover, a restart)
loads the last checkpoint and replays the log after it batch by batch as the commit records
say, so it continues exactly where the last commit left off.

An entry that cannot be applied is rejected (dead-lettered) instead of retried forever: see
``Applier``.

One module per part (``Applier`` composes them, each an attribute owning its state; this
package re-exports what others import):

- ``state``: what is held in memory (``HeldState``, ``Batch``, ``Drain``, ``Backoff``,
  ``CheckpointWork``) and ``is_applied``;
- ``checkpoint_policy``: when a checkpoint is due, and why (pure);
- ``keepalive``: the lease renewed while a drain computes;
- ``shared``: what the parts share (``ApplierShared``);
- ``scheduling``: kicks, back-off, forgiveness, the sweeper (``Scheduler``);
- ``checkpoints``: checkpoints written in the background or at a drain's end, and planned
  (``Checkpointer``);
- ``committing``: updates computed and committed, entries rejected, states rebuilt
  (``Committer``);
- ``direct``: waited chunks handed to a drain, computed before anything is written
  (``DirectPath``);
- ``drain``: the drain loop: take, batch, apply, linger (``DrainLoop``);
- ``waits``: waiting for an entry, for the log to settle, for a current checkpoint; commits
  heard from every replica (``Waits``);
- ``applier``: ``Applier``, the parts composed.
"""

from service.applier.applier import Applier
from service.applier.scheduling import NOT_THE_ENTRYS_FAULT
from service.applier.state import Backoff, Batch, CheckpointWork, Drain, HeldState, is_applied

__all__ = [
    "NOT_THE_ENTRYS_FAULT",
    "Applier",
    "Backoff",
    "Batch",
    "CheckpointWork",
    "Drain",
    "HeldState",
    "is_applied",
]
