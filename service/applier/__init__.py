"""The applier: folds a selector's pending log entries into its state, exactly once.

The log of accepted chunks is the truth (ARCHITECTURE.md, "The write path"). One applier per
selector at a time, across every replica, holds the selector's lease and a fencing token. It
keeps the selector's state in memory (``Hot``), reads the entries after the committed cursor,
coalesces them into one update computed off the event loop, and commits with one script: the
next version's head, what readers need of it (the published fields: scores, decisions,
projections, scalars), its place in the ranking history, and a commit record saying which
entries it applied, all behind a compare-and-set that rejects a stale applier. The whole state
is written only as a checkpoint, in pieces, when one is due (``Applier._checkpoint_due``). An
applier that does not hold a selector's state (after a crash, a lease handover, a restart)
loads the last checkpoint and replays the log after it batch by batch as the commit records
say, so it continues exactly where the last commit left off.

An entry that cannot be applied is rejected (dead-lettered) instead of retried forever: see
``Applier``.

One module per part (``Applier`` composes them; this package re-exports what others import):

- ``state``: what is held in memory (``Hot``, ``Batch``, ``Drain``, ``Backoff``,
  ``CheckpointWork``) and ``is_applied``;
- ``checkpoint_policy``: when a checkpoint is due, and why (pure);
- ``keepalive``: the lease renewed while a drain computes;
- ``core``: what the parts share;
- ``scheduling``: kicks, back-off, forgiveness, shutdown, the sweeper;
- ``checkpoints``: checkpoints written in the background or at a drain's end, and planned;
- ``drain``: the drain loop (take, batch, compute, commit, reject, rebuild, linger);
- ``waits``: waiting for an entry, for the log to settle, for a current checkpoint; commits
  heard from every replica;
- ``applier``: ``Applier``.
"""

from service.applier.applier import Applier
from service.applier.scheduling import NOT_THE_ENTRYS_FAULT
from service.applier.state import Backoff, Batch, CheckpointWork, Drain, Hot, is_applied

__all__ = [
    "NOT_THE_ENTRYS_FAULT",
    "Applier",
    "Backoff",
    "Batch",
    "CheckpointWork",
    "Drain",
    "Hot",
    "is_applied",
]
