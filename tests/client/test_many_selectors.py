"""Many selectors from the client: listings filtered on the service, ``delete_selectors`` by
prefix, and ``sift ls`` / ``sift delete --prefix`` (asking on a terminal, refusing elsewhere
without ``--yes``)."""

from __future__ import annotations

import asyncio
import os
import pty
import select
import subprocess
import sys
import time

import pytest

from siftstream import AsyncClient, Client
from tests.support.client import sift
from tests.support.harness import REPO_ROOT, ServiceProcess


def make(url: str, names: list[str], temporary: bool = False) -> float:
    """Create ``names`` (variance, 2 features), 32 at a time; the seconds it took."""

    async def create_all() -> None:
        gate = asyncio.Semaphore(32)
        async with AsyncClient(url) as client:

            async def one(name: str) -> None:
                async with gate:
                    await client.create(name, "variance", n_features=2, temporary=temporary)

            await asyncio.gather(*(one(n) for n in names))

    started = time.perf_counter()
    asyncio.run(create_all())
    return time.perf_counter() - started


def test_filters_and_delete_by_prefix(service: ServiceProcess, selector_name: str) -> None:
    """224 temporary selectors of a grid search go in one call (one request: the service
    deletes up to 1,000 per request, side by side)."""
    stem = selector_name
    made = make(service.url, [f"{stem}-gs-{i:03d}" for i in range(224)], temporary=True)
    make(service.url, [f"{stem}-main", f"{stem}-Other"])
    with Client(service.url) as client:
        assert [s.name for s in client.list_selectors(prefix=stem, temporary=False)] == [
            f"{stem}-Other",
            f"{stem}-main",
        ]
        found = client.list_selectors(q=f"{stem}-gs-017".upper())
        assert [s.name for s in found] == [f"{stem}-gs-017"] and found[0].temporary
        assert len(client.list_selectors(prefix=stem, temporary=True, page_size=50)) == 224
        started = time.perf_counter()
        done = client.delete_selectors(f"{stem}-gs-")
        took = time.perf_counter() - started
        assert done.deleted == [f"{stem}-gs-{i:03d}" for i in range(224)] and not done.failed
        assert [s.name for s in client.list_selectors(prefix=stem)] == [
            f"{stem}-Other",
            f"{stem}-main",
        ]
        small = client.delete_selectors(stem, batch=1)  # followed batch by batch
        assert small.deleted == [f"{stem}-Other", f"{stem}-main"]
    print(f"created 224 selectors in {made:.2f} s; deleted them in {took:.2f} s")
    assert took < 10


def test_sift_ls_marks_and_filters(
    service: ServiceProcess,
    selector_name: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SIFT_URL", service.url)
    make(service.url, [f"{selector_name}-fit"], temporary=True)
    make(service.url, [f"{selector_name}-kept"])
    status, out, _ = sift(capsys, "ls", "--prefix", selector_name)
    rows = {line.split()[0]: line for line in out.splitlines()}
    assert status == 0 and rows[f"{selector_name}-fit"].rstrip().endswith("temporary")
    assert not rows[f"{selector_name}-kept"].rstrip().endswith("temporary")
    assert "1 temporary" in out and "--no-temporary" in out
    status, out, _ = sift(capsys, "ls", "--prefix", selector_name, "--no-temporary")
    assert [line.split()[0] for line in out.splitlines()[1:]] == [f"{selector_name}-kept"]
    status, out, _ = sift(capsys, "ls", "--search", "FIT", "--temporary", "--method", "variance")
    assert f"{selector_name}-fit" in out and f"{selector_name}-kept" not in out


def test_sift_delete_prefix_needs_yes_off_a_terminal(
    service: ServiceProcess,
    selector_name: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SIFT_URL", service.url)
    make(service.url, [f"{selector_name}-{i}" for i in range(5)], temporary=True)
    make(service.url, [f"{selector_name}-kept"])
    status, _, err = sift(capsys, "delete", "--prefix", selector_name)
    assert status == 1 and "delete 6 selectors" in err and "add --yes" in err, err
    status, _, err = sift(capsys, "delete", "x", "--prefix", selector_name)
    assert status == 1 and "not both" in err
    status, _, err = sift(capsys, "delete")
    assert status == 1 and "--prefix PREFIX or --all" in err
    status, out, err = sift(capsys, "delete", "--prefix", selector_name, "--temporary", "--yes")
    assert status == 0 and out.startswith("deleted 5 selectors in "), err
    with Client(service.url) as client:
        assert [s.name for s in client.list_selectors(prefix=selector_name)] == [
            f"{selector_name}-kept"
        ]


def ask_on_a_terminal(url: str, answer: bytes, *argv: str) -> tuple[int, str]:
    """Run ``sift delete argv`` with a terminal as its stdin and stderr, answer the question;
    the exit status and what the terminal showed."""
    controller, terminal = pty.openpty()
    env = {
        **os.environ,
        "SIFT_URL": url,
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT / "client"), str(REPO_ROOT)]),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "service", "delete", *argv],
        cwd=REPO_ROOT,
        env=env,
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
    )
    os.close(terminal)
    shown = b""
    deadline = time.monotonic() + 60
    answered = False
    while time.monotonic() < deadline:
        ready, _, _ = select.select([controller], [], [], 0.5)
        if ready:
            try:
                piece = os.read(controller, 4096)
            except OSError:  # the process closed the terminal
                break
            if not piece:
                break
            shown += piece
            if not answered and b"[y/N]" in shown:
                os.write(controller, answer)
                answered = True
        elif process.poll() is not None:
            break
    process.wait(10)
    os.close(controller)
    return process.returncode, shown.decode()


def test_sift_delete_prefix_asks_on_a_terminal(service: ServiceProcess, selector_name: str) -> None:
    make(service.url, [f"{selector_name}-{i}" for i in range(3)])
    status, shown = ask_on_a_terminal(service.url, b"n\n", "--prefix", selector_name)
    assert status == 1 and "delete 3 selectors" in shown and "nothing deleted" in shown, shown
    status, shown = ask_on_a_terminal(service.url, b"y\n", "--prefix", selector_name)
    assert status == 0 and "deleted 3 selectors" in shown, shown
    with Client(service.url) as client:
        assert client.list_selectors(prefix=selector_name) == []
