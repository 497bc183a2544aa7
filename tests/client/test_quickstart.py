"""README's Quickstart and the client guide's Python client section (docs/client.md), run as
written against a real ``sift serve``.

The commands are taken from README.md itself and run in a fresh shell: a PATH without the
virtualenv, in a folder holding it as ``.venv`` (where a reader who installed as "Run it" says
stands). The first ``bash`` block of "Quickstart" starts the service (its port, 8765 in the
README, is swapped for a free one, as a reader would pick another port if 8765 were taken),
the other ``bash`` blocks run in one shell in order, and what ``sift top`` prints, scores
included, is the ``text`` block the README shows, line for line: piped, and on a terminal. Then the
``python`` blocks of "Python client" (docs/client.md) run in one interpreter in the same
folder, and each ``print(...)  # <output>`` line must print what its comment says.
"""

from __future__ import annotations

import os
import pty
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


def on_a_terminal(command: str, folder: Path, environment: dict[str, str]) -> str:
    """What ``command`` (a bash line) prints when its output is a terminal."""
    main, secondary = pty.openpty()
    with subprocess.Popen(
        ["bash", "-c", command],
        cwd=folder,
        env=environment,
        stdin=subprocess.DEVNULL,
        stdout=secondary,
        stderr=secondary,
        start_new_session=True,
    ) as process:
        os.close(secondary)
        said = b""
        while True:
            try:
                piece = os.read(main, 65536)
            except OSError:  # the terminal closed: the command is done
                break
            if not piece:
                break
            said += piece
        assert process.wait(60) == 0, said.decode(errors="replace")
    os.close(main)
    return said.decode().replace("\r\n", "\n")


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
    """What a fresh shell has, in the folder a reader installed in: the system's PATH (no
    virtualenv on it) and the virtualenv as ``.venv``; no SIFT_* but the data and progress
    folders of this test."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("SIFT_")}
    env.pop("VIRTUAL_ENV", None)
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(
        folder for folder in env.get("PATH", os.defpath).split(os.pathsep) if folder != venv_bin
    )
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    env["SIFT_DATA_DIR"] = str(tmp_path / "data")
    env["SIFT_STATE_DIR"] = str(tmp_path / "state")
    env["PYTHONPATH"] = str(REPO_ROOT)
    return env


@pytest.fixture
def served(tmp_path: Path, environment: dict[str, str]) -> Iterator[str]:
    """The Quickstart's ``sift serve`` command, run as written on a free port; its URL."""
    serve, *_ = blocks(section("Quickstart"), "bash")
    assert serve.strip().endswith(f"sift serve --port {README_PORT}")
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
    expected = shown.rstrip("\n").splitlines()
    starts = [i for i, line in enumerate(out) if line.startswith("quick  fsds  version")]
    assert len(starts) == 1, shell.stdout
    assert out[starts[0] : starts[0] + len(expected)] == expected, shell.stdout
    # The imported copy ranks the same, under its own name.
    copy = [line.replace("quick", "quick-copy", 1) for line in expected[:1]] + expected[1:]
    starts = [i for i, line in enumerate(out) if line.startswith("quick-copy  fsds  version")]
    assert len(starts) == 1 and out[starts[0] : starts[0] + len(copy)] == copy, shell.stdout
    assert re.search(r"pushed 20,000 rows in \d+ chunks? to quick", shell.stdout), shell.stdout
    assert (tmp_path / "quick.sift").stat().st_size > 0
    # On a terminal, the same lines.
    top = next(line for line in script.splitlines() if line.startswith("sift top quick "))
    terminal = on_a_terminal(
        f"source .venv/bin/activate && {top}", tmp_path, {**environment, "SIFT_URL": served}
    )
    assert terminal.rstrip("\n").splitlines() == expected

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
