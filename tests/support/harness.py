"""Harness of the fault tests: real service processes over a real redis-server, broken on purpose.

* ``ServiceProcess``: ``python -m service serve`` as a subprocess on its own free port, output in
  a log file; ``start`` waits for ``GET /v1/readyz`` to answer 200; ``kill`` (SIGKILL),
  ``stop`` (SIGTERM), ``pause`` / ``resume`` (SIGSTOP / SIGCONT), ``restart``; ``metric``
  reads one value of its ``/metrics``. Without a Redis URL it runs the embedded default (its
  own redis-server in ``data_dir``).
* ``RedisProcess``: an ``EmbeddedRedis`` with ``appendfsync always`` that keeps its port and data
  directory for its whole life, so it can be SIGKILLed (or stopped) and started again on its
  append-only file.
* ``Producer``: pushes one chunk with an ``Idempotency-Key`` until a service acknowledges it
  (200, or 202 with a ``log_id``), retrying transport errors and 5xx answers with the same key
  and moving to the next service URL meanwhile; ``Traffic`` counts what the producers saw.
* ``LabelledChunk`` and ``tally_ocfs``: ``ocfs`` chunks with one class per chunk whose rows are
  ``[chunk id, row index, 1]``. OCFS keeps exact class counts and sums, so the committed state
  says for every chunk how many times it was applied (0: lost, 2: doubled), and the sums prove
  that the rows counted are the chunk's own.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

import httpx
import numpy as np
import redis

from service.algorithms.labels import COUNTS_FIELD, stored_classes
from service.algorithms.ocfs import SUMS_FIELD
from service.config import Settings
from service.store.codec import decode_state
from service.store.embedded import EmbeddedRedis
from service.store.keys import DEFAULT_PREFIX, WRITER_FIELD, SelectorKeys
from tests.support.redis import free_port, start_embedded

REPO_ROOT = Path(__file__).resolve().parents[2]
#: How long a service may take from exec to a 200 on /v1/readyz.
READY_TIMEOUT_S = 20.0
#: The applier lease the service runs with when SIFT_LEASE_MS is not set (the tests never set it).
DEFAULT_LEASE_MS = int(Settings.model_fields["lease_ms"].default)
#: Text that must never reach a client in a 503's detail (addresses, library messages).
INTERNAL_MARKERS = (
    "127.0.0.1",
    "localhost",
    "redis://",
    "unix://",
    "Errno",
    "Traceback",
    "Exception",
    "Error ",
    "Error:",
    "Connection refused",
    "Connection reset",
    "Connection closed",
    "Timeout reading",
)
#: Columns of an ``LabelledChunk`` row: chunk id, row index within the chunk, 1.
OCFS_FEATURES = 3

T = TypeVar("T")
#: A synchronous client of one redis-server or of a Redis Cluster (the tests' own reads).
SyncRedis = redis.Redis | redis.RedisCluster


def poll(probe: Callable[[], T], timeout_s: float, interval_s: float = 0.05) -> T:
    """Call ``probe`` until it returns a truthy value or ``timeout_s`` passes; its last value."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval_s)


def wait_for(
    probe: Callable[[], T | None], timeout_s: float, what: str, interval_s: float = 0.05
) -> T:
    """Poll ``probe`` until it returns a truthy value (which is returned).

    On timeout: AssertionError naming ``what`` and the last value the probe returned.
    """
    value = poll(probe, timeout_s, interval_s)
    if value is None or not value:
        raise AssertionError(
            f"timed out after {timeout_s:.1f} s waiting for {what} (last probe: {value!r})"
        )
    return value


def metric_value(text: str, name: str) -> float:
    """Sum of every sample of ``name`` (all label sets) in Prometheus text; 0 when absent."""
    total = 0.0
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        sample, _, value = line.rpartition(" ")
        if sample.split("{", 1)[0] == name:
            total += float(value)
    return total


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process ``pid`` (all its threads) so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def internal_text(detail: str, extra: Sequence[str] = ()) -> list[str]:
    """The internal markers (and ``extra`` strings, e.g. a port) that ``detail`` contains."""
    return [marker for marker in (*INTERNAL_MARKERS, *extra) if marker and marker in detail]


# -- processes --------------------------------------------------------------------------------


class ServiceProcess:
    """One ``python -m service serve`` process on a fixed port for its whole life."""

    def __init__(
        self,
        name: str,
        redis_url: str | None,
        log_dir: Path,
        env: Mapping[str, str] | None = None,
        root: Path = REPO_ROOT,
        *,
        data_dir: Path | None = None,
        args: Sequence[str] = ("--log-level", "warning"),
    ) -> None:
        """``redis_url`` None: the embedded mode, the service's own redis-server keeping its
        data in ``data_dir`` (keep it short: its unix socket lives there). ``args`` follow
        ``serve --port N``."""
        if (redis_url is None) == (data_dir is None):
            raise ValueError("give a redis_url, or a data_dir for the embedded Redis")
        self.name = name
        self.redis_url = redis_url
        self.data_dir = data_dir
        self.args = list(args)
        #: The checkout whose ``service`` package runs (the benchmarks may run another one's).
        self.root = root
        self.port = free_port()
        self.log_path = log_dir / f"service-{name}.log"
        self.env_overrides = dict(env or {})
        self.process: subprocess.Popen[bytes] | None = None
        self.paused = False
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        if self.process is None:
            raise AssertionError(f"service {self.name} is not running")
        return self.process.pid

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _env(self) -> dict[str, str]:
        # Only what the test says: no SIFT_* of the calling shell (a lease, a token) leaks in.
        env = {key: value for key, value in os.environ.items() if not key.startswith("SIFT_")}
        if self.redis_url is not None:
            env.update(SIFT_REDIS_URL=self.redis_url, PYTHONUNBUFFERED="1")
        else:
            env.update(SIFT_DATA_DIR=str(self.data_dir), PYTHONUNBUFFERED="1")
        if self.root != REPO_ROOT:  # its ``service`` first, before the installed editable one
            env["PYTHONPATH"] = os.pathsep.join(
                [str(self.root), *filter(None, [os.environ.get("PYTHONPATH")])]
            )
        env.update(self.env_overrides)
        return env

    def start(self, timeout_s: float = READY_TIMEOUT_S) -> float:
        """Start the process and wait until /v1/readyz answers 200; returns the seconds taken."""
        if self.alive:
            raise AssertionError(f"service {self.name} is already running (pid {self.pid})")
        started = time.monotonic()
        with open(self.log_path, "ab") as log:
            log.write(f"--- start #{self.starts + 1} on port {self.port}\n".encode())
            log.flush()
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "service",
                    "serve",
                    "--port",
                    str(self.port),
                    *self.args,
                ],
                cwd=self.root,
                env=self._env(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.starts += 1
        self.paused = False
        deadline = started + timeout_s
        with httpx.Client(timeout=1.0) as client:
            while True:
                assert self.process is not None
                code = self.process.poll()
                if code is not None:
                    self.process = None
                    raise AssertionError(
                        f"service {self.name} exited with status {code} while starting; "
                        f"log tail:\n{self.log_tail()}"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(f"{self.url}/v1/readyz").status_code == 200:
                        return time.monotonic() - started
                if time.monotonic() > deadline:
                    self.kill()
                    raise AssertionError(
                        f"service {self.name} was not ready within {timeout_s:.0f} s; "
                        f"log tail:\n{self.log_tail()}"
                    )
                time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL and reap (a paused process is resumed first); a no-op when not running.

        The whole process group goes: the process and, with ``--workers``, its workers (an
        embedded Redis runs in a session of its own and outlives it, as after a real crash)."""
        if self.process is None:
            return
        if self.process.poll() is None:
            if self.paused:
                self.resume()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)  # its own session: group = pid
        self.process.wait(timeout=10)
        self.process = None
        self.paused = False

    def stop(self, timeout_s: float = 15.0) -> int | None:
        """SIGTERM and wait (SIGKILL after ``timeout_s``); returns the exit status."""
        if self.process is None:
            return None
        if self.paused:
            self.resume()
        self.process.terminate()
        try:
            code = self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait(timeout=10)
        self.process = None
        return code

    def pause(self) -> None:
        """SIGSTOP: the process and all its threads freeze (sockets stay open)."""
        os.kill(self.pid, signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        os.kill(self.pid, signal.SIGCONT)
        self.paused = False

    def restart(self, timeout_s: float = READY_TIMEOUT_S) -> float:
        """SIGKILL, then start again on the same port; returns the seconds to ready."""
        self.kill()
        return self.start(timeout_s)

    def metrics_text(self, timeout_s: float = 5.0) -> str:
        response = httpx.get(f"{self.url}/metrics", timeout=timeout_s)
        response.raise_for_status()
        return response.text

    def metric(self, name: str) -> float:
        """One metric of this process summed over its labels (``sift_stale_commits_total``)."""
        return metric_value(self.metrics_text(), name)

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def __repr__(self) -> str:
        pid = self.process.pid if self.process is not None else None
        return f"ServiceProcess({self.name!r}, url={self.url!r}, pid={pid})"


class RedisProcess:
    """A redis-server (``appendfsync always``) keeping one port and data directory for its life."""

    def __init__(self, data_dir: Path) -> None:
        self.server: EmbeddedRedis = start_embedded(data_dir, appendfsync="always")
        assert self.server.port is not None
        self.port: int = self.server.port
        self.kills = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def running(self) -> bool:
        return self.server.running

    def kill(self) -> None:
        """SIGKILL redis-server (whatever is not yet in the AOF is gone)."""
        self.server.kill()
        self.kills += 1

    def stop(self) -> None:
        """SHUTDOWN: a clean stop."""
        self.server.stop()

    def start(self) -> None:
        """Start again on the same port and data directory (replays the AOF)."""
        self.server.start()

    def pause(self) -> None:
        """SIGSTOP: Redis freezes, its clients' connections stay open (as in a stall of its
        machine, or a long fork for an AOF rewrite); keys' TTLs run on meanwhile."""
        assert self.server.pid is not None
        os.kill(self.server.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.server.pid is not None
        os.kill(self.server.pid, signal.SIGCONT)

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5.0)

    def close(self) -> None:
        if self.server.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                self.resume()  # a stopped redis-server would never shut down
        self.server.stop()


@contextlib.contextmanager
def live_service(folder: Path, name: str, env: Mapping[str, str]) -> Iterator[ServiceProcess]:
    """A started service process over its own redis-server in ``folder``; both stopped after."""
    redis_server = RedisProcess(folder / "redis")
    service = ServiceProcess(name, redis_server.url, folder, env)
    try:
        service.start()
        yield service
    finally:
        service.kill()
        redis_server.close()


# -- producers --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """One 5xx answer a producer got (kept to check its form)."""

    url: str
    status: int
    headers: dict[str, str]
    body: str

    @property
    def problem(self) -> dict[str, Any] | None:
        try:
            parsed = json.loads(self.body)
        except ValueError:
            return None
        return parsed if isinstance(parsed, dict) else None

    def defects(self, extra_internal: Sequence[str] = ()) -> list[str]:
        """What is wrong with this answer as a 503 of an unavailable Redis (empty: nothing)."""
        found: list[str] = []
        if self.status != 503:
            found.append(f"status {self.status}, expected 503")
        if not self.headers.get("content-type", "").startswith("application/problem+json"):
            found.append(f"content-type {self.headers.get('content-type')!r}")
        retry_after = self.headers.get("retry-after", "")
        if not retry_after.isdigit() or int(retry_after) < 1:
            found.append(f"Retry-After {retry_after!r}, expected a positive number of seconds")
        problem = self.problem
        detail = str(problem.get("detail", "")) if problem else ""
        if not detail:
            found.append("no problem detail")
        leaked = internal_text(detail, extra_internal)
        if leaked:
            found.append(f"internal text {leaked} in detail {detail!r}")
        return found

    def __str__(self) -> str:
        return f"{self.status} from {self.url}: {self.body[:300]}"


@dataclass
class Traffic:
    """What every producer saw, counted across threads."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    requests: int = 0
    transport_errors: int = 0
    server_errors: list[Answer] = field(default_factory=list)

    def count(self, transport_error: bool = False, answer: Answer | None = None) -> None:
        with self.lock:
            self.requests += 1
            if transport_error:
                self.transport_errors += 1
            if answer is not None:
                self.server_errors.append(answer)

    def statuses(self) -> dict[int, int]:
        with self.lock:
            out: dict[int, int] = {}
            for answer in self.server_errors:
                out[answer.status] = out.get(answer.status, 0) + 1
            return out


@dataclass(frozen=True)
class Ack:
    """A chunk acknowledged by the service: 200 (applied) or 202 (appended, with a log id)."""

    key: str
    status: int
    body: dict[str, Any]
    url: str
    attempts: int
    wait: bool
    seconds: float

    @property
    def log_id(self) -> str:
        return str(self.body["log_id"])


def retry_after_seconds(response: httpx.Response, default: float = 1.0) -> float:
    value = response.headers.get("retry-after", "")
    return float(value) if value.isdigit() else default


class Producer:
    """Pushes chunks to one of several service URLs until acknowledged (one per thread)."""

    def __init__(
        self,
        urls: Sequence[str],
        traffic: Traffic,
        *,
        request_timeout_s: float = 30.0,
        give_up_s: float = 120.0,
        max_pause_s: float = 1.0,
        abort: threading.Event | None = None,
    ) -> None:
        if not urls:
            raise ValueError("a producer needs at least one service URL")
        self.urls = list(urls)
        self.traffic = traffic
        self.give_up_s = give_up_s
        self.max_pause_s = max_pause_s
        self.abort = abort or threading.Event()
        self.client = httpx.Client(timeout=httpx.Timeout(request_timeout_s, connect=2.0))

    def close(self) -> None:
        self.client.close()

    def push(
        self, path: str, body: bytes, content_type: str, key: str, *, wait: bool, first: int = 0
    ) -> Ack:
        """POST ``body`` with ``Idempotency-Key: key`` until a 200 or 202 comes back.

        Starts at ``urls[first]``; after a transport error or a 5xx it waits (Retry-After,
        bounded by ``max_pause_s``) and tries the next URL with the same key. Any 4xx is a
        failure of the test; so is ``abort`` being set (the test is failing anyway).
        """
        started = time.monotonic()
        deadline = started + self.give_up_s
        target, attempts = first, 0
        headers = {"content-type": content_type, "idempotency-key": key}
        params = {"wait": "true" if wait else "false"}
        while True:
            url = self.urls[target % len(self.urls)]
            attempts += 1
            try:
                response = self.client.post(
                    url + path, params=params, content=body, headers=headers
                )
            except httpx.TransportError:
                self.traffic.count(transport_error=True)
                pause = 0.05
            else:
                status = response.status_code
                if status in (200, 202):
                    self.traffic.count()
                    answer = response.json()
                    if not answer.get("log_id"):
                        raise AssertionError(f"{status} without a log_id for {key}: {answer}")
                    return Ack(key, status, answer, url, attempts, wait, time.monotonic() - started)
                if status < 500:
                    raise AssertionError(
                        f"POST {url}{path} (Idempotency-Key {key}) answered {status}: "
                        f"{response.text[:500]}"
                    )
                self.traffic.count(
                    answer=Answer(url, status, dict(response.headers), response.text)
                )
                pause = min(retry_after_seconds(response), self.max_pause_s)
            if time.monotonic() + pause > deadline:
                raise AssertionError(
                    f"chunk {key} was not acknowledged within {self.give_up_s:.0f} s "
                    f"({attempts} attempts)"
                )
            if self.abort.wait(pause):
                raise AssertionError(f"chunk {key} abandoned: the test is failing")
            target += 1


class Workers:
    """Background threads that run until told to stop; their first failure is re-raised."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        #: Set when the test fails: producers give up instead of retrying to the end.
        self.abort = threading.Event()
        self.threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []

    def spawn(self, name: str, target: Callable[[threading.Event], None]) -> None:
        def run() -> None:
            try:
                target(self.stop)
            except BaseException as exc:
                self.errors.append(exc)
                self.stop.set()

        thread = threading.Thread(target=run, name=name, daemon=True)
        self.threads.append(thread)
        thread.start()

    def check(self) -> None:
        """Re-raise the first failure of a worker, if any (call it while they run)."""
        if self.errors:
            raise self.errors[0]

    def join(self, timeout_s: float) -> None:
        """Stop every worker, wait for them (each finishes its current chunk), re-raise."""
        self.stop.set()
        deadline = time.monotonic() + timeout_s
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        stuck = [thread.name for thread in self.threads if thread.is_alive()]
        self.check()
        if stuck:
            raise AssertionError(f"workers {stuck} did not finish within {timeout_s:.0f} s")

    def abandon(self, timeout_s: float = 10.0) -> None:
        """Stop every worker now, without waiting for acknowledgements (the test failed)."""
        self.abort.set()
        self.stop.set()
        deadline = time.monotonic() + timeout_s
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))


# -- chunks and their verification ---------------------------------------------------------


@dataclass(frozen=True)
class LabelledChunk:
    """``rows`` rows ``[cid, i, 1]`` of the chunk's own class ``c<cid>``: its applied count
    and sums say exactly how many times it was applied."""

    cid: int
    rows: int
    key: str
    body: bytes
    content_type: str

    @property
    def label(self) -> str:
        return f"c{self.cid}"

    def sums(self) -> np.ndarray:
        r = self.rows
        return np.array([self.cid * r, r * (r - 1) // 2, r], dtype=np.float64)


def ocfs_chunk(cid: int, rows: int, key: str, npz: bool = False) -> LabelledChunk:
    """A chunk of ``LabelledChunk`` rows, as JSON or as a ``numpy.savez`` .npz."""
    label = f"c{cid}"
    matrix = [[cid, i, 1] for i in range(rows)]
    if npz:
        buffer = io.BytesIO()
        np.savez(buffer, rows=np.array(matrix, dtype=np.float64), labels=np.array([label] * rows))
        return LabelledChunk(cid, rows, key, buffer.getvalue(), "application/x-npz")
    body = json.dumps({"rows": matrix, "labels": [label] * rows}).encode()
    return LabelledChunk(cid, rows, key, body, "application/json")


def ocfs_producer(
    index: int,
    urls: list[str],
    path: str,
    ledger: Ledger,
    traffic: Traffic,
    abort: threading.Event,
    seed: int,
    wait_share: float = 0.75,
) -> Callable[[threading.Event], None]:
    """A producer thread for ``Workers``: distinct ``ocfs`` chunks (1-8 rows, a quarter as
    .npz) POSTed to ``path`` (a selector's or a stream's chunks), most with wait=true, each
    pushed until acknowledged, with a short random pause in between."""

    def run(stop: threading.Event) -> None:
        rng = np.random.default_rng([seed, index])
        producer = Producer(urls, traffic, abort=abort)
        try:
            sequence = 0
            while not stop.is_set():
                chunk = ocfs_chunk(
                    cid=index * 1_000_000 + sequence,
                    rows=int(rng.integers(1, 9)),
                    key=f"p{index}-{sequence}",
                    npz=bool(rng.random() < 0.25),
                )
                ledger.send(chunk)
                ack = producer.push(
                    path,
                    chunk.body,
                    chunk.content_type,
                    chunk.key,
                    wait=bool(rng.random() < wait_share),
                    first=int(rng.integers(len(urls))),
                )
                ledger.ack(ack)
                sequence += 1
                stop.wait(float(rng.uniform(0.02, 0.1)))
        finally:
            producer.close()

    return run


def labelled_npz(rows: np.ndarray, labels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, rows=rows, labels=labels)
    return buffer.getvalue()


def selector_keys(name: str) -> SelectorKeys:
    return SelectorKeys(DEFAULT_PREFIX, name)


def lease_holder(client: SyncRedis, name: str) -> str | None:
    """The holder id (``hostname:pid:nonce``) of the selector's applier lease, if held."""
    value = client.get(selector_keys(name).lease)
    return None if value is None else as_text(value)


def as_text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def holder_pid(holder: str | None) -> int | None:
    if not holder:
        return None
    parts = holder.rsplit(":", 2)
    return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else None


@dataclass(frozen=True)
class Committed:
    """The committed head of a selector and its decoded state, read straight from Redis."""

    head: dict[str, str]
    state: dict[str, Any]
    writer: str

    @property
    def version(self) -> int:
        return int(self.head["version"])

    @property
    def rows_seen(self) -> int:
        return int(self.head["rows_seen"])


def read_committed(client: SyncRedis, name: str, attempts: int = 20) -> Committed:
    """The head and its state, read again if a commit replaces the state in between."""
    keys = selector_keys(name)
    for _ in range(attempts):
        head = {as_text(k): as_text(v) for k, v in client.hgetall(keys.head).items()}
        if not head:
            raise AssertionError(f"selector '{name}' has no head in Redis")
        raw = cast(dict[bytes, bytes], client.hgetall(head["state_key"]))
        if raw:
            writer = as_text(raw.get(WRITER_FIELD.encode(), b""))
            return Committed(head, decode_state(raw), writer)
    raise AssertionError(f"the state of '{name}' kept changing while it was read")


def class_counts(state: Mapping[str, Any]) -> dict[Any, int]:
    """Label -> samples of a labelled method's committed state."""
    counts = np.asarray(state[COUNTS_FIELD], dtype=np.int64)
    return {label: int(c) for label, c in zip(stored_classes(dict(state)), counts, strict=True)}


@dataclass
class Tally:
    """How many times every chunk was applied, from the committed OCFS state."""

    acknowledged: int = 0
    exactly_once: int = 0
    lost: list[str] = field(default_factory=list)
    doubled: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)
    unknown_classes: list[str] = field(default_factory=list)
    unacknowledged_applied: int = 0
    rows_seen: int = 0
    rows_expected: int = 0
    version: int = 0

    def problems(self) -> list[str]:
        found = []
        if self.lost:
            found.append(f"{len(self.lost)} acknowledged chunks lost: {self.lost[:10]}")
        if self.doubled:
            found.append(f"{len(self.doubled)} chunks applied more than once: {self.doubled[:10]}")
        if self.wrong:
            found.append(f"{len(self.wrong)} chunks with wrong counts or sums: {self.wrong[:10]}")
        if self.unknown_classes:
            found.append(f"classes nobody sent: {self.unknown_classes[:10]}")
        if self.rows_seen != self.rows_expected:
            found.append(
                f"rows_seen is {self.rows_seen}, expected {self.rows_expected} (the rows of the "
                "chunks applied once)"
            )
        return found

    def plus(self, other: Tally) -> Tally:
        """This tally and ``other``'s (of another partition) together; acknowledged chunks are
        counted once, by whoever made this one."""
        return Tally(
            acknowledged=self.acknowledged,
            exactly_once=self.exactly_once + other.exactly_once,
            lost=self.lost + other.lost,
            doubled=self.doubled + other.doubled,
            wrong=self.wrong + other.wrong,
            unknown_classes=self.unknown_classes + other.unknown_classes,
            unacknowledged_applied=self.unacknowledged_applied + other.unacknowledged_applied,
            rows_seen=self.rows_seen + other.rows_seen,
            rows_expected=self.rows_expected + other.rows_expected,
            version=self.version + other.version,
        )

    def figures(self) -> dict[str, int]:
        return {
            "chunks_acknowledged": self.acknowledged,
            "applied_exactly_once": self.exactly_once,
            "lost": len(self.lost),
            "doubled": len(self.doubled),
            "wrong": len(self.wrong),
            "unacknowledged_but_applied": self.unacknowledged_applied,
            "rows_seen": self.rows_seen,
            "rows_expected": self.rows_expected,
            "version": self.version,
        }


def tally_ocfs(
    client: SyncRedis,
    name: str,
    acknowledged: Sequence[LabelledChunk],
    unacknowledged: Sequence[LabelledChunk] = (),
) -> Tally:
    """Check every chunk against the committed class counts and sums of selector ``name``.

    An acknowledged chunk must be there exactly once; one that was never acknowledged (its
    producer gave up) may be there once or not at all, never twice.
    """
    committed = read_committed(client, name)
    state = committed.state
    classes = stored_classes(state)
    counts = np.asarray(state[COUNTS_FIELD], dtype=np.int64)
    sums = np.asarray(state[SUMS_FIELD], dtype=np.float64)
    if sums.shape != (len(classes), OCFS_FEATURES):
        raise AssertionError(f"class sums have shape {sums.shape}, {len(classes)} classes")
    found = {str(label): (int(counts[i]), sums[i]) for i, label in enumerate(classes)}
    tally = Tally(
        acknowledged=len(acknowledged), rows_seen=committed.rows_seen, version=committed.version
    )
    for chunk, acked in [(c, True) for c in acknowledged] + [(c, False) for c in unacknowledged]:
        count, chunk_sums = found.pop(chunk.label, (0, np.zeros(OCFS_FEATURES)))
        times, remainder = divmod(count, chunk.rows)
        if count == 0:
            if acked:
                tally.lost.append(chunk.key)
        elif remainder or not np.array_equal(chunk_sums, times * chunk.sums()):
            tally.wrong.append(
                f"{chunk.key}: count {count} of {chunk.rows} rows, sums {chunk_sums}"
            )
        elif times > 1:
            tally.doubled.append(f"{chunk.key} applied {times} times")
        else:
            tally.rows_expected += chunk.rows
            if acked:
                tally.exactly_once += 1
            else:
                tally.unacknowledged_applied += 1
    tally.unknown_classes = sorted(found)
    return tally


def create_selector(url: str, body: dict[str, Any]) -> dict[str, Any]:
    response = httpx.post(f"{url}/v1/selectors", json=body, timeout=30)
    assert response.status_code == 201, (
        f"creating {body} answered {response.status_code}: {response.text}"
    )
    return dict(response.json())


def wait_all_applied(
    url: str, name: str, timeout_s: float, rows: int | None = None
) -> dict[str, Any]:
    """Poll the description until no log entry is pending (and ``rows`` rows were seen)."""

    def applied() -> dict[str, Any] | None:
        body = describe(url, name)
        if body is None or body["state"]["pending_entries"] != 0:
            return None
        if rows is not None and body["rows_seen"] != rows:
            return None
        return body

    return wait_for(applied, timeout_s, f"every pending entry of '{name}' to be applied")


def report(
    record_property: Callable[[str, object], None], test: str, figures: dict[str, Any]
) -> None:
    """Print the figures (quotable) and keep them in the junit report."""
    print(f"\nFAULT FIGURES {test}: {json.dumps(figures, sort_keys=True)}")
    for key, value in figures.items():
        record_property(key, value)


@dataclass
class Ledger:
    """Every chunk the producers sent and the acknowledgement each one got (thread-safe)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    sent: dict[str, LabelledChunk] = field(default_factory=dict)
    acks: dict[str, Ack] = field(default_factory=dict)

    def send(self, chunk: LabelledChunk) -> None:
        with self.lock:
            self.sent[chunk.key] = chunk

    def ack(self, ack: Ack) -> None:
        with self.lock:
            self.acks[ack.key] = ack

    def acknowledged(self) -> int:
        with self.lock:
            return len(self.acks)

    def split(self) -> tuple[list[LabelledChunk], list[LabelledChunk]]:
        """The acknowledged chunks and those whose producer never got an answer."""
        with self.lock:
            acked = [self.sent[key] for key in self.acks]
            unacked = [chunk for key, chunk in self.sent.items() if key not in self.acks]
        return acked, unacked

    def figures(self) -> dict[str, Any]:
        with self.lock:
            acks = list(self.acks.values())
        return {
            "chunks_sent": len(self.sent),
            "acknowledged_200": sum(ack.status == 200 for ack in acks),
            "acknowledged_202": sum(ack.status == 202 for ack in acks),
            "acknowledged_after_retry": sum(ack.attempts > 1 for ack in acks),
            "acknowledged_as_duplicate": sum(bool(ack.body.get("duplicate")) for ack in acks),
            "slowest_acknowledgement_s": round(max((ack.seconds for ack in acks), default=0), 2),
        }


def describe(url: str, name: str) -> dict[str, Any] | None:
    """The selector's description, or None if the service does not answer it right now."""
    try:
        response = httpx.get(f"{url}/v1/selectors/{name}", timeout=10)
    except httpx.TransportError:
        return None
    return dict(response.json()) if response.status_code == 200 else None


def modules_imported(statements: str, prefixes: tuple[str, ...]) -> list[str]:
    """The modules named by (or under) ``prefixes`` that a fresh interpreter has imported
    after running ``statements`` in this checkout: what a start or an import pulls in."""
    probe = (
        f"import sys\n{statements}\n"
        f"print('\\n'.join(sorted(m for m in sys.modules if m.startswith({prefixes!r}))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=REPO_ROOT
    )
    return done.stdout.split()
