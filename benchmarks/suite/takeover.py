"""``takeover``: SIGKILL the service while its applier holds a pending chunk, restart it, time
until that chunk is applied."""

from __future__ import annotations

import time

from report import table

from suite.context import NPZ, SEED, Context, TermRows, npz
from tests.support.harness import holder_pid, lease_holder, poll


def bench_takeover(ctx: Context) -> None:
    sizes = ctx.sizes
    m, prior = sizes.takeover_features, sizes.takeover_prior_chunks
    terms = TermRows(m, sizes.big_terms, SEED + 1)
    bodies = [npz(terms.chunk(sizes.big_chunk_rows)) for _ in range(prior + 1)]
    with ctx.stack() as s:
        name = "takeover"
        s.create({"name": name, "method": "fsds", "n_features": m})
        path = f"/v1/selectors/{name}/chunks"
        for i in range(prior):
            s.post(path, bodies[i], NPZ, f"{name}-{i}")
        response, _ = s.post(path, bodies[prior], NPZ, f"{name}-{prior}", wait=False)
        log_id = response.json()["log_id"]
        pid = s.service.pid
        # Kill the applier itself: once it holds the lease (as far as the key layout tells).
        holding = poll(lambda: holder_pid(lease_holder(s.client, name)) == pid, 3.0, 0.002)
        killed = time.monotonic()
        s.service.kill()
        restarted = time.monotonic()
        s.service.start()
        ready = time.monotonic()
        s.wait_applied(name, (prior + 1) * sizes.big_chunk_rows, timeout_s=120)
        applied = time.monotonic()
        status = s.http.get(f"{path}/{log_id}").json().get("status")
    if status != "applied":
        raise RuntimeError(f"takeover: chunk {log_id} is {status!r} after the restart")
    took = applied - restarted
    ctx.report.section(
        f"takeover: fsds m = {m:,}, {prior} chunks applied, one more pending (`wait=false`), "
        "the service SIGKILLed and started again",
        table(
            [
                "applier held the lease when killed",
                "kill -> ready s",
                "ready -> pending chunk applied s",
                "restart -> pending chunk applied s",
            ],
            [
                [
                    "yes" if holding else "not seen within 3 s (killed anyway)",
                    f"{ready - killed:.2f}",
                    f"{applied - ready:.2f}",
                    f"{took:.2f}",
                ]
            ],
        ),
    )
    ctx.report.figure(
        "takeover", f"{took:.2f} s from restart to the pending chunk applied", took <= 5.0
    )
