"""The live parts of ``benchmarks/run.py``: a service over its own Redis, and what watches them.

* ``Stack``: a redis-server (AOF on, ``appendfsync always``, a temporary directory, a free port)
  and one ``python -m service serve`` process on it, started from any checkout
  (``--service-root``), with the process helpers of the fault tests (``tests/support/harness.py``);
* ``RedisCounters``: what ``INFO`` says of the bytes Redis received and the memory it uses;
* ``PingProbe``: another client's ``PING`` every few milliseconds, in a thread, with latencies;
* ``Poller``: one GET repeated in a thread (``GET .../top?h=100`` while a producer ingests);
* ``Latencies``: percentiles of a list of seconds, in milliseconds.

Only the HTTP API and Redis ``INFO`` are used, never the key layout, so the same benchmark runs
unchanged against any version of the write path.
"""

from __future__ import annotations

import contextlib
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import httpx
import numpy as np
import redis

from tests.support.harness import RedisProcess, ServiceProcess

#: How often the probe PINGs Redis (the issue: "every ~5-10 ms").
PING_INTERVAL_S = 0.005


@dataclass
class Latencies:
    """Seconds of a series of calls, summarised in milliseconds."""

    seconds: list[float] = field(default_factory=list)

    def add(self, value: float) -> None:
        self.seconds.append(value)

    def __len__(self) -> int:
        return len(self.seconds)

    def ms(self, q: float) -> float:
        """The ``q``-th percentile in ms (NaN when nothing was measured)."""
        if not self.seconds:
            return float("nan")
        return float(np.percentile(self.seconds, q)) * 1e3

    @property
    def max_ms(self) -> float:
        return max(self.seconds) * 1e3 if self.seconds else float("nan")

    def text(self) -> str:
        return (
            f"p50 {self.ms(50):.1f} ms, p99 {self.ms(99):.1f} ms, max {self.max_ms:.1f} ms "
            f"({len(self)} calls)"
        )


@dataclass(frozen=True)
class RedisCounters:
    """One reading of ``INFO``: bytes received so far and memory in use."""

    net_input_bytes: int
    used_memory: int

    @classmethod
    def read(cls, client: redis.Redis) -> RedisCounters:
        stats: dict[str, Any] = client.info("stats")
        memory: dict[str, Any] = client.info("memory")
        return cls(int(stats["total_net_input_bytes"]), int(memory["used_memory"]))


class _Repeater:
    """A daemon thread calling ``once`` until stopped; ``once`` returns the seconds it took."""

    interval_s: float = 0.0

    def __init__(self, name: str) -> None:
        self.latencies = Latencies()
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def once(self) -> float:
        raise NotImplementedError

    def close(self) -> None:
        """Release what ``once`` used (called in the thread, after the last call)."""

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                started = time.perf_counter()
                try:
                    self.latencies.add(self.once())
                except Exception as exc:  # counted and shown, never hidden
                    self.failures.append(f"{type(exc).__name__}: {exc}")
                pause = self.interval_s - (time.perf_counter() - started)
                self._stop.wait(max(pause, 0.0))
        finally:
            self.close()

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)


class PingProbe(_Repeater):
    """Another Redis client sending ``PING`` every ``PING_INTERVAL_S``: how long Redis makes a
    bystander wait while the service writes (Redis runs one command at a time)."""

    interval_s = PING_INTERVAL_S

    def __init__(self, port: int) -> None:
        super().__init__("ping-probe")
        self.client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=30)

    def once(self) -> float:
        started = time.perf_counter()
        self.client.ping()
        return time.perf_counter() - started

    def close(self) -> None:
        self.client.close()


class Poller(_Repeater):
    """``GET url`` repeated every ``interval_s``; a status other than 200 is a failure."""

    def __init__(self, url: str, interval_s: float = 0.02) -> None:
        super().__init__("poller")
        self.url = url
        self.interval_s = interval_s
        self.client = httpx.Client(timeout=60)

    def once(self) -> float:
        started = time.perf_counter()
        response = self.client.get(self.url)
        elapsed = time.perf_counter() - started
        if response.status_code != 200:
            raise RuntimeError(f"GET {self.url} answered {response.status_code}")
        return elapsed

    def close(self) -> None:
        self.client.close()


class Stalled(RuntimeError):
    """A selector stopped applying chunks (its benchmark records that and goes no further)."""


def rss_bytes(pid: int) -> int:
    """Resident memory of process ``pid`` now (``VmRSS``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


class Stack:
    """A redis-server and a service process on it, in one temporary folder, for one run."""

    def __init__(
        self,
        folder: Path,
        service_root: Path,
        env: Mapping[str, str],
        args: Sequence[str] = ("--log-level", "warning"),
    ) -> None:
        self.folder = folder
        self.redis = RedisProcess(folder / "redis")
        self.service = ServiceProcess(
            "bench", self.redis.url, folder, env, root=service_root, args=args
        )
        self.client = self.redis.client()
        self.http = httpx.Client(base_url=self.service.url, timeout=600)

    @property
    def url(self) -> str:
        return self.service.url

    def counters(self) -> RedisCounters:
        return RedisCounters.read(self.client)

    def ping_probe(self) -> PingProbe:
        return PingProbe(self.redis.port)

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        response = self.http.post("/v1/selectors", json=body)
        if response.status_code != 201:
            raise RuntimeError(f"creating {body['name']}: {response.status_code} {response.text}")
        return dict(response.json())

    def describe(self, name: str) -> dict[str, Any]:
        response = self.http.get(f"/v1/selectors/{name}")
        response.raise_for_status()
        return dict(response.json())

    def post(
        self,
        path: str,
        body: bytes,
        content_type: str,
        key: str,
        wait: bool = True,
        client: httpx.Client | None = None,
    ) -> tuple[httpx.Response, float]:
        """POST one chunk; the answer and its seconds.

        Raises on anything but 200 (or 202 with ``wait=False``); ``Stalled`` on a 202 to a
        waiting POST: the service did not apply the chunk within its own bounded wait.
        """
        started = time.perf_counter()
        response = (client or self.http).post(
            path,
            params=None if wait else {"wait": "false"},
            content=body,
            headers={"content-type": content_type, "idempotency-key": key},
        )
        elapsed = time.perf_counter() - started
        if response.status_code == 202 and wait:
            raise Stalled(
                f"POST {path} (Idempotency-Key {key}) was still not applied when the service "
                f"stopped waiting ({elapsed:.0f} s): 202 {response.text[:200]}"
            )
        if response.status_code not in (200, 202):
            raise RuntimeError(f"POST {path} answered {response.status_code}: {response.text}")
        return response, elapsed

    def wait_applied(
        self,
        name: str,
        items: int,
        timeout_s: float,
        key: str = "rows_seen",
        every_s: float = 0.01,
    ) -> None:
        """Poll until the selector has seen ``items`` rows (or features) with nothing pending,
        every ``every_s`` (a describe costs the service about a millisecond of CPU)."""
        deadline = time.monotonic() + timeout_s
        while True:
            with contextlib.suppress(httpx.TransportError):
                body = self.describe(name)
                if body[key] >= items and body["state"].get("pending_entries", 0) == 0:
                    return
            if time.monotonic() > deadline:
                raise Stalled(f"'{name}' did not reach {key} = {items} in {timeout_s:.0f} s")
            time.sleep(every_s)

    def close(self) -> None:
        self.http.close()
        self.client.close()
        self.service.kill()
        self.redis.close()


@contextlib.contextmanager
def stack(
    service_root: Path,
    env: Mapping[str, str] | None = None,
    args: Sequence[str] = ("--log-level", "warning"),
) -> Iterator[Stack]:
    """A started ``Stack`` in a fresh temporary folder (``args`` follow ``serve --port N``);
    everything stopped and removed after."""
    with tempfile.TemporaryDirectory(prefix="sift-bench-") as folder:
        running = Stack(Path(folder), service_root, env or {}, args)
        try:
            running.service.start()
            yield running
        except BaseException:
            print(f"service log tail:\n{running.service.log_tail()}")
            raise
        finally:
            running.close()
