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

``Applier`` is the door: the rest of the service imports this package only (never one of its
modules) and asks the applier through its verbs. Its parts are private, each given only what it
needs of the state ``Applier`` owns. One module per part:

- ``basis``: what every part is built on (``Basis``: the store, the settings, the metrics and
  the state ``Applier`` owns);
- ``state``: what is held in memory (``HeldState``, ``Batch``, ``Drain``, ``Running``,
  ``Backoff``, ``CheckpointWork``) and ``is_applied``;
- ``checkpoint_policy``: when a checkpoint is due, and why (pure);
- ``keepalive``: the lease renewed while a drain computes;
- ``scheduling``: kicks, back-off, forgiveness, the sweeper (``Scheduler``);
- ``checkpoints``: checkpoints written in the background or at a drain's end, and planned
  (``Checkpointer``);
- ``committing``: updates computed and committed, entries rejected, states rebuilt, commit
  observers told (``Committer``);
- ``direct``: waited chunks handed to a drain, computed before anything is written
  (``DirectPath``);
- ``drain``: the drain loop: take, batch, apply, linger (``DrainLoop``);
- ``waits``: waiting for an entry, for the log to settle, for a current checkpoint; commits
  heard from every replica (``Waits``);
- ``applier``: ``Applier``, the door, and the state it owns.

And what the applier computes and knows, which readers share (re-exported here):

- ``updates``: updates, replays, what a version publishes, the ranking (pure functions);
- ``waiting``: waiters, the heads known, the chunks handed over;
- ``resolved``: a selector's params as its method takes them, resolved once.
"""

from service.applier.applier import Applier
from service.applier.resolved import resolved_params
from service.applier.scheduling import NOT_THE_ENTRYS_FAULT
from service.applier.state import Backoff, Batch, CheckpointWork, Drain, HeldState, is_applied
from service.applier.updates import (
    RANKING_INDEX_FIELD,
    RANKING_SCORE_FIELD,
    RESAMPLE_RANKS_FIELD,
    RESAMPLE_TOP_FIELD,
    Update,
    UpdateFailed,
    assess_resamples,
    compute_update,
    publish,
    readable_bytes,
    state_size_problem,
    state_sizes,
    top_of,
)
from service.applier.waiting import KnownHeads, Settled

__all__ = [
    "NOT_THE_ENTRYS_FAULT",
    "RANKING_INDEX_FIELD",
    "RANKING_SCORE_FIELD",
    "RESAMPLE_RANKS_FIELD",
    "RESAMPLE_TOP_FIELD",
    "Applier",
    "Backoff",
    "Batch",
    "CheckpointWork",
    "Drain",
    "HeldState",
    "KnownHeads",
    "Settled",
    "Update",
    "UpdateFailed",
    "assess_resamples",
    "compute_update",
    "is_applied",
    "publish",
    "readable_bytes",
    "resolved_params",
    "state_size_problem",
    "state_sizes",
    "top_of",
]
