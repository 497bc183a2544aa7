"""How long a checkpoint of a wide state keeps the rest of the process waiting: a worker thread
cuts an FSDS state into its pieces (``cut_state``, as the applier does before writing them) and
joins them back (``join_fields``, as a rebuild does after reading them) while the main thread
asks for the GIL every millisecond, as the event loop does for its requests; the longest and
the 99th-percentile wait of the main thread, beside a thread that copies nothing and beside
the same bytes made by one copy each (``cut_fields(encode_state(...))``: an array encoded into
a blob of its own, then cut; one ``bytes`` join of a field's pieces).

    .venv/bin/python benchmarks/bench_checkpoint_stall.py              # m = 20,000 and 50,000
    .venv/bin/python benchmarks/bench_checkpoint_stall.py --m 50000

The state is FSDS's at its defaults (four sketches of ell x m doubles, ``state_sizes``),
filled with random numbers, in the service's GIL switch interval.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from service.algorithms import get_method  # noqa: E402
from service.runtime import GIL_SWITCH_INTERVAL_SECONDS  # noqa: E402
from service.store.codec import (  # noqa: E402
    PIECES_FIELD,
    cut_fields,
    cut_state,
    encode_state,
    join_fields,
    piece_name,
)

#: How often the main thread wakes, as an event loop serving requests would.
TICK_SECONDS = 0.001


def wide_state(m: int) -> dict[str, Any]:
    """An FSDS state of ``m`` features at the defaults, its arrays random."""
    method = get_method("fsds")
    params = method.resolve_params({}, m)
    rng = np.random.default_rng(m)
    state = method.initial_state(params)
    return {
        field: rng.standard_normal(value.shape) if isinstance(value, np.ndarray) else value
        for field, value in state.items()
    }


def waits_during(work: Callable[[], object]) -> tuple[float, float, float]:
    """``work`` in a thread while this one sleeps ``TICK_SECONDS`` at a time: the seconds the
    work took, and this thread's longest and 99th-percentile lateness in ms."""
    late: list[float] = []
    done = threading.Event()
    took: list[float] = []

    def run() -> None:
        started = time.perf_counter()
        work()
        took.append(time.perf_counter() - started)
        done.set()

    worker = threading.Thread(target=run)
    worker.start()
    while not done.is_set():
        asked = time.perf_counter()
        time.sleep(TICK_SECONDS)
        late.append(time.perf_counter() - asked - TICK_SECONDS)
    worker.join()
    waits = np.asarray(late) * 1e3
    return took[0], float(waits.max()), float(np.percentile(waits, 99))


def one_join_each(pieces: dict[str, Any]) -> dict[str, bytes]:
    """The fields of ``pieces`` (``cut_state``), each one ``bytes`` join of its pieces."""
    counts = json.loads(bytes(pieces[PIECES_FIELD]))
    return {
        field: b"".join(pieces[piece_name(field, i)] for i in range(count))
        for field, count in counts.items()
    }


def report(m: int) -> None:
    """The waits of each case at ``m`` features, printed."""
    state = wide_state(m)
    size = sum(v.nbytes for v in state.values() if isinstance(v, np.ndarray))
    pieces = cut_state(state)
    cases: list[tuple[str, Callable[[], object]]] = [
        ("nothing (a thread that sleeps 0.2 s)", lambda: time.sleep(0.2)),
        ("cut_state: the pieces to write", lambda: cut_state(state)),
        ("a blob per array, then cut (one copy each)", lambda: cut_fields(encode_state(state))),
        ("join_fields: the pieces read back", lambda: join_fields(pieces)),
        ("one bytes join per field", lambda: one_join_each(pieces)),
    ]
    print(f"fsds m = {m:,}: state {size / 2**20:,.1f} MiB", flush=True)
    for name, work in cases:
        took, longest, p99 = waits_during(work)
        print(f"  {name}: {took * 1e3:,.0f} ms; waits max {longest:.1f} ms, p99 {p99:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, action="append", help="features (repeatable)")
    options = parser.parse_args()
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_SECONDS)
    for m in options.m or [20_000, 50_000]:
        report(m)


if __name__ == "__main__":
    main()
