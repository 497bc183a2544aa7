"""The checkpoint policy (``service.applier.checkpoint_policy``): every trigger at its
threshold, just below it and just above it, their order, and the applier's use of it.

Pure: no Redis, no event loop, the time given.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import numpy as np
import pytest

from service.applier import HeldState
from service.applier.checkpoint_policy import (
    CheckpointFacts,
    Thresholds,
    checkpoint_due,
    due_by_age_at,
)
from service.config import Settings
from service.store.records import Head

THRESHOLDS = Thresholds(replay_seconds=4.0, log_ratio=2.0, interval_seconds=5.0)
NOW = 1_000.0

#: A state one version past its checkpoint, due by nothing: no computing, no log, a commit
#: just now, neither forced nor idle.
QUIET = CheckpointFacts(
    version=8,
    checkpoint_version=7,
    compute_seconds=0.0,
    log_bytes=0,
    state_bytes=100,
    last_commit=NOW,
)


def below(x: float) -> float:
    return math.nextafter(x, -math.inf)


def above(x: float) -> float:
    return math.nextafter(x, math.inf)


def due(now: float = NOW, **changes: Any) -> str | None:
    return checkpoint_due(dataclasses.replace(QUIET, **changes), THRESHOLDS, now)


def test_nothing_due_by_default() -> None:
    assert due() is None
    assert due(idle=True) is None


@pytest.mark.parametrize("checkpoint_version", [8, 9])
def test_nothing_new_since_the_checkpoint_is_never_due(checkpoint_version: int) -> None:
    """A state no newer than its checkpoint: not even forced, whatever accrued."""
    assert (
        due(
            checkpoint_version=checkpoint_version,
            force=True,
            idle=True,
            compute_seconds=100.0,
            log_bytes=10**9,
            last_commit=NOW - 100.0,
        )
        is None
    )


def test_one_version_past_the_checkpoint_is_enough() -> None:
    assert due(checkpoint_version=7, force=True) == "request"


def test_forced() -> None:
    assert due(force=True) == "request"
    # A request is a request, whatever else would have made it due.
    assert due(force=True, compute_seconds=100.0, log_bytes=10**9, idle=True) == "request"


def test_replay_budget_boundary() -> None:
    assert due(compute_seconds=below(4.0)) is None
    assert due(compute_seconds=4.0) == "replay"
    assert due(compute_seconds=above(4.0)) == "replay"


def test_log_against_the_state_boundary() -> None:
    """The log since the checkpoint against ``log_ratio`` times the state's bytes (2 x 100)."""
    assert due(log_bytes=199) is None
    assert due(log_bytes=200) == "log"
    assert due(log_bytes=201) == "log"


def test_log_of_an_empty_state_counts_against_one_byte() -> None:
    assert due(state_bytes=0, log_bytes=1) is None  # 1 < 2 x max(0, 1)
    assert due(state_bytes=0, log_bytes=2) == "log"


def test_idle_boundary() -> None:
    """At rest (the drain ending): due once nothing was committed for the interval."""
    last = NOW - 5.0
    assert due(idle=True, last_commit=last, now=below(NOW)) is None
    assert due(idle=True, last_commit=last, now=NOW) == "idle"
    assert due(idle=True, last_commit=last, now=above(NOW)) == "idle"


def test_age_alone_is_not_enough_while_not_idle() -> None:
    assert due(idle=False, last_commit=NOW - 100.0) is None


def test_triggers_in_order() -> None:
    """replay before log before idle (the first one that holds names the checkpoint)."""
    everything = {"compute_seconds": 4.0, "log_bytes": 200, "idle": True, "last_commit": 0.0}
    assert due(**everything) == "replay"
    assert due(**{**everything, "compute_seconds": 0.0}) == "log"
    assert due(**{**everything, "compute_seconds": 0.0, "log_bytes": 0}) == "idle"


def test_due_by_age_at_is_when_idle_becomes_due() -> None:
    last = 123.25
    at = due_by_age_at(last, THRESHOLDS)
    assert at == last + 5.0
    assert due(idle=True, last_commit=last, now=below(at)) is None
    assert due(idle=True, last_commit=last, now=at) == "idle"


def test_thresholds_of_settings() -> None:
    settings = Settings(
        checkpoint_replay_seconds=1.5, checkpoint_log_ratio=0.25, checkpoint_interval_seconds=9.0
    )
    assert Thresholds.of(settings) == Thresholds(
        replay_seconds=1.5, log_ratio=0.25, interval_seconds=9.0
    )


# -- the applier's use of the policy ---------------------------------------------------------


def hot(**changes: Any) -> HeldState:
    head = Head(version=8, cursor="5-0", items_seen=10, state_key="s", updated_at=0.0)
    values: dict[str, Any] = {
        "meta": None,
        "head": head,
        "state": {"x": np.zeros(3)},
        "state_bytes": 100,
        "checkpoint_version": 7,
        "last_commit": time.monotonic(),
        **changes,
    }
    return HeldState(**values)


def test_the_applier_asks_the_policy_with_what_its_state_says() -> None:
    """``HeldState.checkpoint_facts`` hands each of its figures to its own field (what
    ``Checkpointer.due`` asks the policy), and ``checkpoint_work`` each to the checkpoint."""
    settings = Settings(
        checkpoint_replay_seconds=4.0, checkpoint_log_ratio=2.0, checkpoint_interval_seconds=5.0
    )

    def due(held: HeldState, force: bool = False, idle: bool = False) -> str | None:
        facts = held.checkpoint_facts(force, idle)
        return checkpoint_due(facts, Thresholds.of(settings), time.monotonic())

    assert due(hot()) is None
    assert due(hot(), force=True) == "request"
    assert due(hot(checkpoint_version=8), force=True) is None
    assert due(hot(compute_seconds=4.0)) == "replay"
    assert due(hot(compute_seconds=below(4.0))) is None
    assert due(hot(log_bytes=200)) == "log"
    assert due(hot(log_bytes=199)) is None
    assert due(hot(log_bytes=199, state_bytes=99)) == "log"
    long_ago = time.monotonic() - 60.0
    assert due(hot(last_commit=long_ago)) is None
    assert due(hot(last_commit=long_ago), idle=True) == "idle"
    assert due(hot(), idle=True) is None
    work = hot(log_bytes=5, compute_seconds=0.5).checkpoint_work("log")
    assert (work.version, work.cursor, work.items_seen) == (8, "5-0", 10)
    assert (work.log_bytes, work.compute_seconds, work.trigger) == (5, 0.5, "log")
