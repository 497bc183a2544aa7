"""The request path against its floor: Sift's small requests as ratios of the same stack's least.

``wrk`` (a C load generator: a Python client burns as much CPU per request as the server, so on
2 cores it would measure itself) drives, in turns, the floor app (``floor_app.py``: FastAPI on
uvicorn, one EVALSHA that appends to a stream and sets a key, on the same Redis) and Sift, on
one redis-server with ``appendfsync always``, and reports for every scenario requests per
second, latency percentiles and the server's CPU per request (its ``/proc`` times over the
requests it answered), each Sift figure next to the floor's of the same round:

* ``post-nowait``, ``post-wait``: one-row JSON chunks (fsds, m = 1000 features) to one selector,
  ``wait=false`` / ``wait=true``; after the load, how long until every chunk is applied;
* ``post-own``: every connection (of 8) its own selector, ``wait=true``;
* ``get-top``: ``GET top?h=10`` of a selector with data, against the floor's constant GET;
* ``replicas-wait``: two Sift processes on the one Redis, half the connections each,
  ``wait=true`` (the topology docker-compose and deploy/ ship);
* ``workers-nowait``, ``workers-wait``: ``sift serve --workers 2``, one-row chunks.

    .venv/bin/python benchmarks/bench_request_path.py            # 3 rounds of 10 s each
    .venv/bin/python benchmarks/bench_request_path.py --quick    # 1 round of 5 s
    .venv/bin/python benchmarks/bench_request_path.py --only post-nowait,get-top
    .venv/bin/python benchmarks/bench_request_path.py --quick --env SIFT_HOT_PATH=false
    .venv/bin/python benchmarks/bench_request_path.py --quick --service-root ../before
    .venv/bin/python benchmarks/bench_request_path.py --quick --only post-wait --profile profiles

Needs ``wrk`` (Debian: ``apt-get install wrk``). ``--profile DIR`` samples the service with
``py-spy`` (``pip install py-spy``) during each Sift run, keeps the raw stacks in DIR and prints
where the server's time went (``cpu_split``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.harness import RedisProcess, ServiceProcess, cpu_seconds  # noqa: E402
from tests.support.redis import free_port  # noqa: E402

#: Features of the fsds selector the chunks go to (the issue's setting).
FEATURES = 1000
CONNECTIONS = 8
THREADS = 2

#: wrk's summary as one JSON line (its ``done`` hook), for this script to read.
_DONE = """
done = function(summary, latency, requests)
  io.write(string.format(
    '{"requests": %d, "seconds": %f, "errors": %d, "non2xx": %d, "p50": %f, "p90": %f, ' ..
    '"p99": %f, "max": %f}\\n',
    summary.requests, summary.duration / 1e6,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    summary.errors.status, latency:percentile(50) / 1e3, latency:percentile(90) / 1e3,
    latency:percentile(99) / 1e3, latency.max / 1e3))
end
"""


def post_script(paths: Sequence[str], body: str) -> str:
    """wrk Lua: POST ``body`` (JSON) to each of ``paths`` in turn."""
    listed = ", ".join(json.dumps(p) for p in paths)
    return (
        f"""
local paths = {{{listed}}}
local turn = 0
wrk.method = "POST"
wrk.body = {json.dumps(body)}
wrk.headers["Content-Type"] = "application/json"
request = function()
  turn = turn + 1
  return wrk.format(nil, paths[(turn % #paths) + 1])
end
"""
        + _DONE
    )


def get_script(path: str) -> str:
    return f'wrk.method = "GET"\nwrk.path = {json.dumps(path)}\n' + _DONE


@dataclass(frozen=True)
class Load:
    """What one wrk run measured, and the server CPU it cost."""

    requests: int
    seconds: float
    errors: int
    non2xx: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    cpu_s: float

    @property
    def rate(self) -> float:
        return self.requests / max(self.seconds, 1e-9)

    @property
    def cpu_ms_per_request(self) -> float:
        return 1000 * self.cpu_s / max(self.requests, 1)


#: Where a stack's time is charged, first match wins (substrings of py-spy's frames): the
#: method's update, the state codec, the rest of the applier, body decoding and validation,
#: the Redis client, Sift's HTTP layer, the HTTP server and event loop.
CPU_PARTS = (
    ("update (compute_update)", ("compute_update",)),
    ("state codec", ("service/store/codec.py",)),
    ("applier, other", ("service/applier/",)),
    ("body decoding and validation", ("service/wire/",)),
    ("redis-py", ("redis/",)),
    ("Sift routes, guard, ingest", ("service/api/", "service/selectors/")),
    ("uvicorn, asyncio", ("uvicorn/", "uvloop", "httptools", "asyncio/")),
)

#: Set by ``--profile``: the folder py-spy's samples go to (None: no profiling).
PROFILE_DIR: Path | None = None


def py_spy() -> str | None:
    """py-spy on PATH, or beside this Python (a virtual environment's bin)."""
    beside = Path(sys.executable).with_name("py-spy")
    return shutil.which("py-spy") or (str(beside) if beside.exists() else None)


@contextmanager
def profiled(pid: int, label: str, seconds: float) -> Iterator[None]:
    """py-spy sampling ``pid`` while the block runs (when ``--profile`` asked for it)."""
    if PROFILE_DIR is None:
        yield
        return
    out = PROFILE_DIR / f"{label}.txt"
    spy = subprocess.Popen(
        [
            *(py_spy() or "py-spy", "record", "-p", str(pid), "-d", str(max(int(seconds) - 1, 1))),
            *("-r", "200", "-f", "raw", "--nonblocking", "-o", str(out)),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield
    finally:
        spy.wait(timeout=seconds + 60)


def cpu_split(raw: Path) -> list[tuple[str, float]]:
    """The share of py-spy's samples (``-f raw``: ``frame;frame;... count`` per line) in each
    of ``CPU_PARTS``, and the rest."""
    totals: dict[str, int] = {}
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        part = next(
            (name for name, marks in CPU_PARTS if any(mark in stack for mark in marks)), "other"
        )
        totals[part] = totals.get(part, 0) + int(count)
    every = max(sum(totals.values()), 1)
    order = [name for name, _ in CPU_PARTS] + ["other"]
    return [(name, totals.get(name, 0) / every) for name in order]


def wrk(url: str, script: str, seconds: float, connections: int, pids: Sequence[int]) -> Load:
    """One wrk run against ``url``; ``pids`` are the server processes whose CPU it costs."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as handle:
        handle.write(script)
    before = sum(cpu_seconds(pid) for pid in pids)
    done = subprocess.run(
        [
            "wrk",
            f"-t{min(THREADS, connections)}",
            f"-c{connections}",
            f"-d{max(int(seconds), 1)}s",
            "--timeout",
            "30s",
            "-s",
            handle.name,
            url,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    cpu = sum(cpu_seconds(pid) for pid in pids) - before
    os.unlink(handle.name)
    line = next(line for line in done.stdout.splitlines() if line.startswith("{"))
    figures = json.loads(line)
    return Load(
        requests=figures["requests"],
        seconds=figures["seconds"],
        errors=figures["errors"],
        non2xx=figures["non2xx"],
        p50_ms=figures["p50"],
        p99_ms=figures["p99"],
        max_ms=figures["max"],
        cpu_s=cpu,
    )


def together(loads: Sequence[Load]) -> Load:
    """Loads run side by side (one per replica) as one."""
    return Load(
        requests=sum(x.requests for x in loads),
        seconds=max(x.seconds for x in loads),
        errors=sum(x.errors for x in loads),
        non2xx=sum(x.non2xx for x in loads),
        p50_ms=max(x.p50_ms for x in loads),
        p99_ms=max(x.p99_ms for x in loads),
        max_ms=max(x.max_ms for x in loads),
        cpu_s=sum(x.cpu_s for x in loads),
    )


def parallel_wrk(
    targets: Sequence[tuple[str, int]], script: str, seconds: float, connections: int
) -> Load:
    """wrk against several replicas at once (``connections`` each), as one load."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(targets)) as pool:
        runs = [pool.submit(wrk, url, script, seconds, connections, [pid]) for url, pid in targets]
        return together([run.result() for run in runs])


def one_row() -> str:
    return json.dumps([np.random.default_rng(0).normal(size=FEATURES).round(6).tolist()])


class Floor:
    """``floor_app.py`` as a subprocess."""

    def __init__(self, redis_url: str, http: str, loop: str) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).with_name("floor_app.py")),
                "--port",
                str(self.port),
                "--redis-url",
                redis_url,
                "--http",
                http,
                "--loop",
                loop,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while True:
            try:
                httpx.get(f"{self.url}/floor/top", timeout=1).raise_for_status()
                return
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.process.kill()
        self.process.wait()


def create(url: str, name: str) -> None:
    body = {"name": name, "method": "fsds", "n_features": FEATURES}
    response = httpx.post(f"{url}/v1/selectors", json=body, timeout=30)
    if response.status_code not in (201, 409):
        raise RuntimeError(response.text)


def settle_seconds(url: str, names: Sequence[str], timeout_s: float = 120.0) -> float:
    """Seconds from now until nothing is pending in ``names``."""
    started = time.monotonic()
    with httpx.Client(base_url=url, timeout=30) as http:
        for name in names:
            while http.get(f"/v1/selectors/{name}").json()["state"]["pending_entries"]:
                if time.monotonic() - started > timeout_s:
                    raise RuntimeError(f"{name} still had pending entries after {timeout_s} s")
                time.sleep(0.01)
    return time.monotonic() - started


@dataclass(frozen=True)
class Checkout:
    """The checkout whose service runs (``--service-root``) and the ``SIFT_*`` it gets."""

    root: Path = ROOT
    env: tuple[tuple[str, str], ...] = ()


@contextmanager
def sift(
    checkout: Checkout, redis_url: str, folder: Path, name: str, args: Sequence[str] = ()
) -> Iterator[ServiceProcess]:
    service = ServiceProcess(
        name,
        redis_url,
        folder,
        dict(checkout.env),
        args=("--log-level", "warning", *args),
        root=checkout.root,
    )
    service.start()
    try:
        yield service
    finally:
        service.kill()


def pids_of(service: ServiceProcess) -> list[int]:
    """The service process and its worker processes (``--workers``)."""
    children = Path(f"/proc/{service.pid}/task/{service.pid}/children")
    found = [int(p) for p in children.read_text().split()] if children.exists() else []
    return [service.pid, *found]


@dataclass
class Row:
    scenario: str
    sift: list[Load]
    floor: list[Load]
    settle_s: list[float]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def report(rows: Sequence[Row]) -> str:
    lines = [
        "| scenario | Sift req/s | floor req/s | ratio | Sift p50 / p99 ms | floor p99 ms "
        "| CPU ms/request Sift / floor | applied after the load (s) | Sift errors / non-2xx |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        rate = median([x.rate for x in row.sift])
        floor_rate = median([x.rate for x in row.floor])
        lines.append(
            f"| {row.scenario} | {rate:,.0f} | {floor_rate:,.0f} | {rate / floor_rate:.2f} "
            f"| {median([x.p50_ms for x in row.sift]):.1f} / "
            f"{median([x.p99_ms for x in row.sift]):.1f} "
            f"| {median([x.p99_ms for x in row.floor]):.1f} "
            f"| {median([x.cpu_ms_per_request for x in row.sift]):.2f} / "
            f"{median([x.cpu_ms_per_request for x in row.floor]):.2f} "
            f"| {max(row.settle_s, default=0.0):.2f} "
            f"| {sum(x.errors for x in row.sift)} / {sum(x.non2xx for x in row.sift)} |"
        )
    errors = sum(x.errors + x.non2xx for row in rows for x in row.sift)
    lines.append(f"\nerrors and non-2xx answers in every Sift run: {errors}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--seconds", type=float)
    parser.add_argument("--only", help="comma-separated scenarios")
    parser.add_argument("--http", default="auto", help="the floor's uvicorn HTTP parser")
    parser.add_argument("--loop", default="auto", help="the floor's uvicorn event loop")
    parser.add_argument(
        "--service-root", type=Path, default=ROOT, help="the checkout whose service runs"
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="SIFT_NAME=VALUE",
        help="a setting of the Sift processes (repeatable), e.g. SIFT_HOT_PATH=false",
    )
    parser.add_argument(
        "--profile", type=Path, help="sample the service with py-spy into this folder"
    )
    args = parser.parse_args(argv)
    if args.profile is not None:
        if py_spy() is None:
            print("--profile needs py-spy (pip install py-spy)", file=sys.stderr)
            return 2
        global PROFILE_DIR
        PROFILE_DIR = args.profile
        args.profile.mkdir(parents=True, exist_ok=True)
    if shutil.which("wrk") is None:
        print("bench_request_path.py needs wrk (apt-get install wrk)", file=sys.stderr)
        return 2
    checkout = Checkout(
        args.service_root.resolve(), tuple(tuple(item.split("=", 1)) for item in args.env)
    )
    rows = measure(
        checkout,
        rounds=args.rounds or (1 if args.quick else 3),
        seconds=args.seconds or (5.0 if args.quick else 10.0),
        chosen=set(args.only.split(",")) if args.only else None,
        http=args.http,
        loop=args.loop,
    )
    print(report(rows))
    for raw in sorted(PROFILE_DIR.glob("*.txt")) if PROFILE_DIR is not None else []:
        shares = ", ".join(f"{name} {share:.0%}" for name, share in cpu_split(raw))
        print(f"\nserver samples, {raw.stem}: {shares}")
    return 0


def measure(
    checkout: Checkout,
    rounds: int,
    seconds: float,
    chosen: set[str] | None = None,
    http: str = "auto",
    loop: str = "auto",
) -> list[Row]:
    """Every chosen scenario (all: None), ``rounds`` times, on a fresh Redis and floor app."""
    if shutil.which("wrk") is None:
        raise RuntimeError("wrk is not installed (Debian: apt-get install wrk)")
    with tempfile.TemporaryDirectory(prefix="sift-path-") as tmp:
        folder = Path(tmp)
        redis_server = RedisProcess(folder / "redis")
        floor = Floor(redis_server.url, http, loop)
        try:
            return run(checkout, redis_server, floor, folder, one_row(), rounds, seconds, chosen)
        finally:
            floor.close()
            redis_server.close()


def post_label(paths: Sequence[str]) -> str:
    """A profile's file name for POSTs to ``paths``."""
    waits = "nowait" if "wait=false" in paths[0] else "wait"
    return f"post-{waits}" if len(paths) == 1 else f"post-own-{waits}"


def run(
    checkout: Checkout,
    redis_server: RedisProcess,
    floor: Floor,
    folder: Path,
    body: str,
    rounds: int,
    seconds: float,
    chosen: set[str] | None,
) -> list[Row]:
    floor_post = post_script(["/floor/chunks"], body)
    floor_get = get_script("/floor/top")

    def floor_load(script: str) -> Load:
        return wrk(floor.url, script, seconds, CONNECTIONS, [floor.process.pid])

    scenarios: dict[str, Callable[[ServiceProcess], tuple[Load, Load, float]]] = {}

    def posting(paths: list[str], names: list[str]) -> Callable[..., tuple[Load, Load, float]]:
        def measure(service: ServiceProcess) -> tuple[Load, Load, float]:
            base = floor_load(floor_post)
            with profiled(service.pid, post_label(paths), seconds):
                load = wrk(
                    service.url, post_script(paths, body), seconds, CONNECTIONS, pids_of(service)
                )
            return load, base, settle_seconds(service.url, names)

        return measure

    scenarios["post-nowait"] = posting(["/v1/selectors/one/chunks?wait=false"], ["one"])
    scenarios["post-wait"] = posting(["/v1/selectors/one/chunks"], ["one"])
    own = [f"own{i}" for i in range(CONNECTIONS)]
    scenarios["post-own"] = posting([f"/v1/selectors/{n}/chunks" for n in own], own)

    def get_top(service: ServiceProcess) -> tuple[Load, Load, float]:
        base = floor_load(floor_get)
        with profiled(service.pid, "get-top", seconds):
            load = wrk(
                service.url,
                get_script("/v1/selectors/one/top?h=10"),
                seconds,
                CONNECTIONS,
                pids_of(service),
            )
        return load, base, 0.0

    scenarios["get-top"] = get_top
    wanted = [s for s in scenarios if chosen is None or s in chosen]
    multi = [
        s
        for s in ("replicas-wait", "workers-nowait", "workers-wait")
        if chosen is None or s in chosen
    ]
    rows = {name: Row(name, [], [], []) for name in [*wanted, *multi]}
    for round_ in range(rounds):
        with sift(checkout, redis_server.url, folder, f"solo{round_}") as service:
            for name in ["one", *own]:
                create(service.url, name)
            httpx.post(f"{service.url}/v1/selectors/one/chunks", content=body, timeout=30)
            for name in wanted:
                load, base, settled = scenarios[name](service)
                rows[name].sift.append(load)
                rows[name].floor.append(base)
                rows[name].settle_s.append(settled)
                print(
                    f"round {round_ + 1} {name}: {load.rate:,.0f} req/s vs floor {base.rate:,.0f}"
                )
        if "replicas-wait" in multi:
            with (
                sift(checkout, redis_server.url, folder, f"a{round_}") as a,
                sift(checkout, redis_server.url, folder, f"b{round_}") as b,
            ):
                create(a.url, "pair")
                base = floor_load(floor_post)
                load = parallel_wrk(
                    [(a.url, a.pid), (b.url, b.pid)],
                    post_script(["/v1/selectors/pair/chunks"], body),
                    seconds,
                    CONNECTIONS // 2,
                )
                row = rows["replicas-wait"]
                row.sift.append(load)
                row.floor.append(base)
                row.settle_s.append(settle_seconds(a.url, ["pair"]))
                print(
                    f"round {round_ + 1} replicas-wait: {load.rate:,.0f} req/s "
                    f"p99 {load.p99_ms:.1f}"
                )
        for name, query in (("workers-nowait", "?wait=false"), ("workers-wait", "")):
            if name not in multi:
                continue
            with sift(
                checkout, redis_server.url, folder, f"w{round_}", ("--workers", "2")
            ) as service:
                create(service.url, "workers")
                base = floor_load(floor_post)
                load = wrk(
                    service.url,
                    post_script([f"/v1/selectors/workers/chunks{query}"], body),
                    seconds,
                    CONNECTIONS,
                    pids_of(service),
                )
                row = rows[name]
                row.sift.append(load)
                row.floor.append(base)
                row.settle_s.append(settle_seconds(service.url, ["workers"]))
                print(f"round {round_ + 1} {name}: {load.rate:,.0f} req/s p99 {load.p99_ms:.1f}")
    return list(rows.values())


if __name__ == "__main__":
    sys.exit(main())
