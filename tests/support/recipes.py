"""Recipes of the documentation run as written: a page's section, its code blocks, the shell of
a reader who installed Sift in a folder (``.venv`` there, nothing of Sift on PATH), and the
long-running commands a page starts in a terminal of their own (``Terminal``).

A test substitutes only what a page says the reader chooses (a port), and checks that the page
still names it where the test expects to find it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

from tests.support.harness import REPO_ROOT

README = REPO_ROOT / "README.md"


def section(title: str, document: Path = README) -> str:
    """The ``## title`` section of a Markdown page, up to the next ``## `` heading."""
    text = document.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def blocks(text: str, language: str) -> list[str]:
    """The fenced code blocks of ``language`` in ``text``, in order."""
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.DOTALL)


def chosen(text: str, choices: dict[str, str]) -> str:
    """``text`` with each number the reader chooses (a port, as a whole number) replaced by
    the test's; each must be in ``text``."""
    for written, instead in choices.items():
        pattern = rf"(?<!\d){re.escape(written)}(?!\d)"
        assert re.search(pattern, text), f"the recipe no longer names {written}:\n{text}"
        text = re.sub(pattern, instead, text)
    return text


def reader_folder(folder: Path, checkout: bool = False) -> Path:
    """``folder`` as the reader's: the virtualenv as ``.venv`` and, for a recipe run in a
    checkout of Sift, its ``scripts``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ".venv").symlink_to(Path(sys.prefix))
    if checkout:
        (folder / "scripts").symlink_to(REPO_ROOT / "scripts")
    return folder


def reader_environment(folder: Path) -> dict[str, str]:
    """What a fresh shell has: the system's PATH (no virtualenv on it), no SIFT_* but the
    data and progress folders of the service and client, under ``folder``."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("SIFT_")}
    env.pop("VIRTUAL_ENV", None)
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(
        part for part in env.get("PATH", os.defpath).split(os.pathsep) if part != venv_bin
    )
    env["SIFT_DATA_DIR"] = str(folder / "data")
    env["SIFT_STATE_DIR"] = str(folder / "state")
    env["PYTHONPATH"] = str(REPO_ROOT)
    return env


def run_script(
    script: str, folder: Path, environment: dict[str, str], timeout_s: float = 180
) -> subprocess.CompletedProcess[str]:
    """``script`` in ``bash -euo pipefail`` in ``folder``; it must succeed (its output is in
    the failure message)."""
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=folder,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


class Terminal:
    """A command a page runs in a terminal of its own (a server), started in its own session
    with its output in ``log``; leaving the ``with`` stops it and all it started."""

    def __init__(self, script: str, folder: Path, environment: dict[str, str], name: str):
        self.log = folder / f"{name}.log"
        self._out = self.log.open("wb")
        self.process = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=folder,
            env=environment,
            stdout=self._out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def said(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for_line(self, text: str, timeout_s: float) -> None:
        """Until the terminal shows ``text`` (what the page says to wait for)."""
        deadline = time.monotonic() + timeout_s
        while text not in self.said():
            assert self.process.poll() is None, f"it stopped:\n{self.said()[-3000:]}"
            assert time.monotonic() < deadline, (
                f"no {text!r} in {timeout_s} s:\n{self.said()[-3000:]}"
            )
            time.sleep(0.1)

    def __enter__(self) -> Terminal:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(30)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
        finally:
            self._out.close()
