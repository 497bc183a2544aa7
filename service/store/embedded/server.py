"""The ``redis-server`` child process of the service's default mode (no external Redis): its
configuration, its start (and restart, for the supervisor) and its stop.

Durability comes from the append-only file in ``data_dir`` (``--appendonly yes``, no RDB
snapshots). By default the server listens on a unix socket only (``--port 0``), so nothing else
on the machine can reach it over TCP; with an explicit port it binds 127.0.0.1. ``start`` first
makes this process the directory's one owner and clears what an earlier run left
(``directory``); the lock is held until ``stop``.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import subprocess
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import redis
from redis import exceptions as rexc
from redis.backoff import NoBackoff
from redis.retry import Retry

from service.errors import SiftError
from service.store.embedded.binary import RedisBinary, locate_redis_server
from service.store.embedded.directory import (
    CONSOLE,
    DBFILENAME,
    LOGFILE,
    PIDFILE,
    SOCKET,
    DirectoryLock,
    clear_stale,
)

_APPENDFSYNC = ("always", "everysec", "no")
log = logging.getLogger("sift.embedded")

#: sun_path is 108 bytes on Linux (104 on macOS), including the trailing NUL.
_MAX_SOCKET_PATH = 103


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
        #: The ``redis-server`` the last start chose, and why.
        self.binary: RedisBinary | None = None
        self._lock = DirectoryLock(self.data_dir)
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

    def abandon(self) -> None:
        """Forget the server without stopping it, as a crash of the owning process would."""
        self.process = None
        self.url = None
        self._lock.release()

    def _clear_stale(self) -> None:
        clear_stale(self.data_dir, self.socket_path if self.port is None else None)

    def start(self, timeout_s: float = 15) -> str:
        """Start the server and wait until it answers PING; returns its URL."""
        with self._mutex:
            if self.running:
                assert self.url is not None
                return self.url
            self.binary = locate_redis_server(self.executable)
            log.info("embedded Redis: %s", self.binary.describe())
            executable = self.binary.path
            self.data_dir.mkdir(parents=True, exist_ok=True)
            if self.port is None and len(str(self.socket_path)) > _MAX_SOCKET_PATH:
                raise SiftError(
                    f"unix socket path {self.socket_path} is longer than {_MAX_SOCKET_PATH} "
                    "bytes; use a shorter data directory or a TCP port"
                )
            self._lock.take()
            try:
                self._clear_stale()
                self._spawn(executable, timeout_s)
            except BaseException:
                self._lock.release()
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
            if not self._lock.held:
                raise SiftError(f"{self.data_dir} is not ours: restart only follows a start")
            if self.running:
                assert self.url is not None
                return self.url
            if self.process is not None:
                self.process.wait()  # reaped: its pidfile and socket are leftovers now
            self.process = None
            self.url = None
            executable = locate_redis_server(self.executable).path
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
                self._lock.release()
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
            self._lock.release()

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
