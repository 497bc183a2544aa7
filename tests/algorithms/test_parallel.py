"""An update's independent parts on several threads (``service.algorithms.parallel``): the
same state to the bit as on one, errors raised as one thread would raise them, and what a
replay would redo counted (the parallel parts' CPU beyond the caller's, less the kept scores
a replay takes instead of computing them).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from service.algorithms import get_method, parallel
from service.algorithms.resampling import (
    PARALLEL_PART_BYTES,
    ResampledMethod,
    replaying,
)
from service.algorithms.subsamples import SCORES_FIELD, SCORES_ROWS_FIELD, group_of


@pytest.fixture
def two_threads() -> Iterator[None]:
    parallel.configure(2)
    try:
        yield
    finally:
        parallel.configure(1)


def burn(seconds: float) -> Callable[[], float]:
    """A part that keeps its thread's CPU busy for about ``seconds`` (numpy releases the GIL
    in the product, so two of them use two cores)."""

    def part() -> float:
        a = np.random.default_rng(0).standard_normal((300, 300))
        started = time.thread_time()
        while time.thread_time() - started < seconds:
            a = np.tanh(a @ a.T / 300.0)
        return time.thread_time() - started

    return part


def test_makespan_is_the_longest_first_schedule() -> None:
    assert parallel.makespan([3.0, 3.0, 2.0, 2.0, 2.0], 2) == 7.0
    assert parallel.makespan([5.0, 1.0, 1.0], 2) == 5.0
    assert parallel.makespan([1.0, 1.0], 1) == 2.0
    assert parallel.makespan([], 2) == 0.0


def test_parts_run_in_order_on_one_thread_and_share_out_on_two(two_threads: None) -> None:
    threads: list[str] = []

    def named(i: int) -> Callable[[], int]:
        def part() -> int:
            import threading

            threads.append(threading.current_thread().name)
            time.sleep(0.05)
            return i

        return part

    assert parallel.run_parts([named(i) for i in range(4)]) == [0, 1, 2, 3]
    assert any(name.startswith("sift-part") for name in threads)
    assert len(set(threads)) == 2
    parallel.configure(1)
    threads.clear()
    assert parallel.run_parts([named(i) for i in range(3)]) == [0, 1, 2]
    assert len(set(threads)) == 1


def test_the_first_parts_error_is_raised_once_every_part_ended(two_threads: None) -> None:
    ended: list[int] = []

    def part(i: int, fails: bool) -> Callable[[], int]:
        def run() -> int:
            time.sleep(0.02 * (4 - i))
            ended.append(i)
            if fails:
                raise ValueError(f"part {i}")
            return i

        return run

    with pytest.raises(ValueError, match="part 1"):
        parallel.run_parts([part(0, False), part(1, True), part(2, False), part(3, True)])
    assert sorted(ended) == [0, 1, 2, 3]


def test_the_ledger_counts_the_parts_beyond_the_callers_share(two_threads: None) -> None:
    started = time.thread_time()
    with parallel.counting_cpu() as ledger:
        costs = parallel.run_parts([burn(0.3), burn(0.3), burn(0.3)])
    own = time.thread_time() - started
    # Two threads take three parts of 0.3 s: 0.6 s of cores busy on one of them.
    counted = own + ledger.adjustment
    # Not the caller's 0.3 or 0.6 s alone, nor the 0.9 s of all three.
    assert parallel.makespan(costs, 2) - 0.02 < counted < 0.85 * sum(costs)
    with parallel.counting_cpu() as ledger:
        parallel.not_replayed(0.25)
    assert ledger.adjustment == -0.25


def fsds_states(params: dict[str, Any], chunks: list[Any]) -> list[dict[str, Any]]:
    method = get_method("fsds")
    assert isinstance(method, ResampledMethod)
    resolved = method.resolve_params(params, chunks[0].shape[1])
    state = method.initial_state(resolved)
    out = []
    for chunk in chunks:
        state = method.update(state, resolved, chunk)
        out.append(state)
    return out


def term_chunks(m: int, rows: int, count: int, seed: int) -> list[sp.csr_matrix]:
    rng = np.random.default_rng(seed)
    return [
        sp.random(rows, m, density=0.02, format="csr", random_state=rng, dtype=np.float64)
        for _ in range(count)
    ]


@pytest.mark.parametrize(
    "params",
    [
        {"ell": 40},
        {"ell": 40, "decay": 0.999},
        {"ell": 40, "kernel": "gaussian", "kernel_components": 16},
    ],
    ids=["linear", "decay", "gaussian"],
)
def test_fsds_on_two_threads_is_fsds_on_one_to_the_bit(params: dict[str, Any]) -> None:
    m = 2000
    chunks = term_chunks(m, 150, 4, seed=7)
    serial = fsds_states(params, chunks)
    stored = group_of(serial[0], 0)
    arrays = sum(v.nbytes for v in stored.values() if isinstance(v, np.ndarray))
    assert arrays >= PARALLEL_PART_BYTES  # the parts do run on two threads
    parallel.configure(2)
    try:
        threaded = fsds_states(params, chunks)
    finally:
        parallel.configure(1)
    for one, two in zip(serial, threaded, strict=True):
        assert sorted(one) == sorted(two)
        for field, value in one.items():
            assert np.array_equal(np.asarray(value), np.asarray(two[field])), field


def test_a_replay_takes_the_kept_scores_the_live_update_says_it_does_not_redo() -> None:
    method = get_method("fsds")
    assert isinstance(method, ResampledMethod)
    m = 300
    resolved = method.resolve_params({"ell": 12}, m)
    chunks = term_chunks(m, 60, 6, seed=3)
    state = method.initial_state(resolved)
    for chunk in chunks[:4]:
        state = method.update(state, resolved, chunk)
    before = int(np.asarray(state[SCORES_ROWS_FIELD]))
    # The next chunk brings the rows past a tenth more: live, the scores are computed again.
    with parallel.counting_cpu() as ledger:
        live = method.update(state, resolved, chunks[4])
    assert int(np.asarray(live[SCORES_ROWS_FIELD])) > before
    assert ledger.not_redone > 0
    with replaying():
        replayed = method.update(state, resolved, chunks[4])
    assert replayed[SCORES_ROWS_FIELD] == before
    assert np.array_equal(np.asarray(replayed[SCORES_FIELD]), np.asarray(state[SCORES_FIELD]))
    taken = {f: live[f] for f in method.replay_takes}
    assert {**replayed, **taken}.keys() == live.keys()
    for field, value in {**replayed, **taken}.items():
        assert np.array_equal(np.asarray(value), np.asarray(live[field])), field
