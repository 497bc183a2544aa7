"""README's Quickstart and the client guide's Python client section (docs/client.md), run as
written against a real ``sift serve``.

The commands are taken from README.md itself: the first ``bash`` block of "Quickstart" starts
the service (its port, 8765 in the README, is swapped for a free one, as a reader would pick
another port if 8765 were taken), the other ``bash`` blocks run in one shell in order, and
what ``sift top`` prints is compared with the ``text`` block the README shows. Then the
``python`` blocks of "Python client" (docs/client.md) run in one interpreter in the same
folder, and each ``print(...)  # <output>`` line must print what its comment says.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.harness import REPO_ROOT, wait_for
from tests.support.redis import free_port

README = REPO_ROOT / "README.md"
#: The Python client's guide, whose first example continues the quickstart.
CLIENT_GUIDE = REPO_ROOT / "docs" / "client.md"
README_PORT = "8765"


def section(title: str, document: Path = README) -> str:
    text = document.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.DOTALL)


def table_columns(lines: list[str]) -> list[list[str]]:
    """Rank, index and name of a ``sift top`` table's rows (scores may differ in the last digit
    across BLAS builds)."""
    return [line.split()[:3] for line in lines]


def run_as_user(
    argv: list[str], folder: Path, environment: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` in ``folder``; it must succeed (its output is in the failure message)."""
    done = subprocess.run(
        argv, cwd=folder, env=environment, capture_output=True, text=True, timeout=180, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.fixture
def environment(tmp_path: Path) -> dict[str, str]:
    """What a user's shell has: the venv's ``sift`` and ``python3`` on PATH; no SIFT_* but the
    data and progress folders of this test."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("SIFT_")}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["SIFT_DATA_DIR"] = str(tmp_path / "data")
    env["SIFT_STATE_DIR"] = str(tmp_path / "state")
    env["PYTHONPATH"] = str(REPO_ROOT)
    return env


@pytest.fixture
def served(tmp_path: Path, environment: dict[str, str]) -> Iterator[str]:
    """The Quickstart's ``sift serve`` command, run as written on a free port; its URL."""
    serve, *_ = blocks(section("Quickstart"), "bash")
    assert serve.strip() == f"sift serve --port {README_PORT}"
    port = str(free_port())
    log = open(tmp_path / "serve.log", "wb")  # noqa: SIM115 (closed below)
    process = subprocess.Popen(
        ["bash", "-c", serve.replace(README_PORT, port)],
        cwd=tmp_path,
        env=environment,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        assert process.poll() is None, (tmp_path / "serve.log").read_text()
        try:
            return httpx.get(f"{url}/v1/readyz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for(ready, 30, "sift serve to be ready")
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)  # its own session: the service and its Redis
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(5)
        log.close()


@pytest.mark.slow
def test_quickstart_and_python_client_as_written(
    served: str, tmp_path: Path, environment: dict[str, str]
) -> None:
    port = served.rsplit(":", 1)[1]
    quickstart = section("Quickstart")
    _, *commands = blocks(quickstart, "bash")
    script = "\n".join(commands).replace(README_PORT, port)
    shell = run_as_user(["bash", "-euo", "pipefail", "-c", script], tmp_path, environment)
    out = shell.stdout.splitlines()

    (shown,) = blocks(quickstart, "text")
    title, header, *ranked = shown.strip().splitlines()
    tables = [i for i, line in enumerate(out) if line.startswith("rank  index  name")]
    assert len(tables) == 2, shell.stdout  # quick, then the imported copy
    for position in tables:
        assert out[position] == header
        printed = out[position + 1 : position + 1 + len(ranked)]
        assert table_columns(printed) == table_columns(ranked)
    assert out[tables[0] - 1] == title
    assert "quick-copy  fsds  version 2  20,000 rows seen" in out
    assert re.search(r"pushed 20,000 rows in \d+ chunks? to quick", shell.stderr), shell.stderr
    assert (tmp_path / "quick.sift").stat().st_size > 0

    page = httpx.get(f"{served}/ui", timeout=10)
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]

    client_guide = section("Python client", CLIENT_GUIDE)
    code = "\n".join(blocks(client_guide, "python")).replace(README_PORT, port)
    python = run_as_user([sys.executable, "-c", code], tmp_path, environment)
    expected = [
        line.split("  # ", 1)[1].strip()
        for line in code.splitlines()
        if line.lstrip().startswith("print(") and "  # " in line
    ]
    assert python.stdout.splitlines() == expected
