"""When a checkpoint of a state the applier holds is due, and why: a pure policy.

No Redis, no asyncio, no clock: the applier says what it knows of the state since its last
checkpoint (``CheckpointFacts``) and what time it is, and gets the trigger back (None: not
due). The trigger labels the ``checkpoints`` metric.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from service.config import Settings

#: Why a checkpoint is written: a reader (or an export) asked for it, the replay budget, the
#: log against the state's bytes, the selector at rest.
Trigger = Literal["request", "replay", "log", "idle"]


@dataclass(frozen=True)
class Thresholds:
    """The settings a checkpoint is due by (``SIFT_CHECKPOINT_*``)."""

    replay_seconds: float
    log_ratio: float
    interval_seconds: float

    @classmethod
    def of(cls, settings: Settings) -> Thresholds:
        return cls(
            replay_seconds=settings.checkpoint_replay_seconds,
            log_ratio=settings.checkpoint_log_ratio,
            interval_seconds=settings.checkpoint_interval_seconds,
        )


@dataclass(frozen=True)
class CheckpointFacts:
    """What the applier knows of a state it holds (``HeldState``), and what it asks."""

    #: The committed version the state is of, and the version of its last checkpoint.
    version: int
    checkpoint_version: int
    #: CPU seconds of the updates after the checkpoint (what a replay would redo), and the
    #: log payload bytes of those versions.
    compute_seconds: float
    log_bytes: int
    #: Bytes of the state's arrays.
    state_bytes: int
    #: Monotonic time of the last commit (or of the rebuild).
    last_commit: float
    #: A reader (or an export) wants the checkpoint brought to the current version.
    force: bool = False
    #: The drain is ending (nothing pending): a selector at rest may be checkpointed by age.
    idle: bool = False


def checkpoint_due(facts: CheckpointFacts, thresholds: Thresholds, now: float) -> Trigger | None:
    """What makes a checkpoint due at monotonic time ``now`` (None: not due).

    ``replay``: the updates since the last checkpoint took ``SIFT_CHECKPOINT_REPLAY_SECONDS``
    of CPU (a takeover would redo them; the waits of a busy machine, which it would not
    redo, do not count); ``log``: the log since holds ``SIFT_CHECKPOINT_LOG_RATIO`` times the
    state's bytes (so checkpoints cost at most that share of what producers send, and the
    log's memory stays bounded); ``idle``: nothing was committed for
    ``SIFT_CHECKPOINT_INTERVAL_SECONDS`` (a selector at rest gets its log trimmed and restarts
    without replay; under load the first two bound the cost).
    """
    if facts.version <= facts.checkpoint_version:
        return None
    if facts.force:
        return "request"
    if facts.compute_seconds >= thresholds.replay_seconds:
        return "replay"
    if facts.log_bytes >= thresholds.log_ratio * max(facts.state_bytes, 1):
        return "log"
    if facts.idle and now - facts.last_commit >= thresholds.interval_seconds:
        return "idle"
    return None


def due_by_age_at(last_commit: float, thresholds: Thresholds) -> float:
    """The monotonic time at which a state last committed at ``last_commit`` is due for its
    checkpoint by age (``idle``) if nothing else comes."""
    return last_commit + thresholds.interval_seconds
