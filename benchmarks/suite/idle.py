"""``idle``: ``bench_idle``'s idle cost of many idle selectors (CPU of one service process) and
how soon a forgotten chunk is picked up."""

from __future__ import annotations

from bench_idle import measure_idle
from report import table

from suite.context import Context


def bench_idle(ctx: Context) -> None:
    sizes = ctx.sizes
    idle = measure_idle(sizes.idle_selectors, sizes.idle_seconds, ctx.service_root)
    ctx.report.section(
        f"idle: {idle.selectors:,} idle fsds selectors (4 features), one service process",
        table(
            [
                "selectors",
                "created in s",
                "idle CPU (% of a core)",
                "seconds measured",
                "forgotten chunk applied after s",
            ],
            [
                [
                    f"{idle.selectors:,}",
                    f"{idle.create_s:.1f}",
                    f"{100 * idle.cpu_fraction:.2f}",
                    f"{idle.seconds:.0f}",
                    f"{idle.pickup_s:.2f}",
                ]
            ],
        ),
    )
    ctx.report.figure(
        "idle",
        f"{100 * idle.cpu_fraction:.2f}% of a core at {idle.selectors:,} selectors; picked up "
        f"after {idle.pickup_s:.2f} s",
        idle.cpu_fraction < 0.02 and idle.pickup_s <= 1.0,
    )
