"""The embedded server's data directory: the files in it, its one owner, what a run left there.

One owner per data directory: :class:`DirectoryLock` takes an exclusive ``flock`` on
``data_dir/sift.lock`` and holds it until released; a second service on the same directory is
refused with an error naming the owner's pid instead of taking over its Redis. The kernel drops
the lock when the owner dies, however it dies, so a crashed run never blocks the next one.

Stale runs: if ``data_dir`` holds the pidfile of a live ``redis-server`` whose working directory
is ``data_dir`` while we hold the lock, its owner is gone (an orphan of a crashed earlier run):
:func:`clear_stale` **stops** it (SIGTERM, which makes Redis flush its AOF and exit; SIGKILL
after a timeout) so that a fresh server can start. It is never reused: its configuration (port,
fsync policy) is unknown, and two servers must never share one AOF directory. A pidfile or
socket of a dead process is simply removed.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import time
from pathlib import Path

from service.errors import SiftError

PIDFILE = "redis.pid"
LOCKFILE = "sift.lock"
LOGFILE = "redis.log"
SOCKET = "redis.sock"
CONSOLE = "redis.console"
DBFILENAME = "dump.rdb"


class DirectoryLock:
    """The exclusive ``flock`` that makes this process the one owner of ``data_dir``."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def take(self) -> None:
        """Become the owner, or say which process is (see the module docstring)."""
        if self._fd is not None:
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
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = None


def clear_stale(data_dir: Path, socket_path: Path | None) -> None:
    """Deal with leftovers of an earlier run in ``data_dir`` (see the module docstring);
    ``socket_path`` is the unix socket the server is about to listen on, if any."""
    pidfile = data_dir / PIDFILE
    try:
        pid = int(pidfile.read_text().strip())
    except (FileNotFoundError, ValueError):
        pid = 0
    if pid > 0 and pid != os.getpid() and _pid_alive(pid):
        ours = _is_our_redis(pid, data_dir)
        if ours is None:
            raise SiftError(
                f"{pidfile} names process {pid}, which is alive; stop it if it is a "
                f"redis-server of {data_dir}, or remove the pidfile"
            )
        if ours:
            os.kill(pid, signal.SIGTERM)  # Redis flushes the AOF and exits on SIGTERM.
            if not _wait_exit(pid, 30.0):
                os.kill(pid, signal.SIGKILL)
                _wait_exit(pid, 5.0)
    pidfile.unlink(missing_ok=True)
    if socket_path is not None:
        socket_path.unlink(missing_ok=True)


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
