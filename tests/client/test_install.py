"""The client distribution installs alone: a fresh virtual environment with only ``client/``
installed imports ``siftstream``, runs ``sift`` against a live service, and holds nothing of the
server (no FastAPI, uvicorn, redis or scikit-learn)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.harness import REPO_ROOT, ServiceProcess

pytestmark = pytest.mark.slow

SERVER_ONLY = {"fastapi", "uvicorn", "redis", "scikit-learn", "siftstream-server", "starlette"}


def test_the_client_installs_and_works_without_the_server(
    tmp_path: Path, service: ServiceProcess
) -> None:
    env_dir = tmp_path / "client-only"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True)
    pip = env_dir / "bin" / "pip"
    subprocess.run(
        [str(pip), "install", "-q", str(REPO_ROOT / "client")],
        check=True,
        capture_output=True,
        timeout=600,
    )
    listed = subprocess.run(
        [str(pip), "list", "--format", "json"], check=True, capture_output=True, text=True
    )
    installed = {package["name"].lower() for package in json.loads(listed.stdout)}
    assert {"siftstream", "httpx", "numpy", "scipy"} <= installed
    assert not installed & SERVER_ONLY, installed & SERVER_ONLY

    sift = env_dir / "bin" / "sift"
    helped = subprocess.run([str(sift), "--help"], capture_output=True, text=True, check=True)
    assert "push" in helped.stdout and "{create," in helped.stdout
    assert ",serve}" not in helped.stdout  # the server's command is not there without it
    created = subprocess.run(
        [
            str(sift),
            "--url",
            service.url,
            "create",
            "client-only",
            "--method",
            "fsds",
            "--n-features",
            "3",
        ],
        capture_output=True,
        text=True,
    )
    assert created.returncode == 0, created.stderr
    listed_selectors = subprocess.run(
        [str(sift), "--url", service.url, "ls", "--json"], capture_output=True, text=True
    )
    assert listed_selectors.returncode == 0, listed_selectors.stderr
    assert "client-only" in listed_selectors.stdout
