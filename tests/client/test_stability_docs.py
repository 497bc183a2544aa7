"""The Python client's example in docs/stability-and-drift.md ("Python client"), taken from the
page and run as written, in its own interpreter, against a real ``sift serve``: on a selector
whose top 10 has a stability (20 features) and on ones where it has none (10 features: the top
10 holds every feature; 3 features), each pushed until it has versions."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from siftstream import Client
from tests.client.test_quickstart import blocks, section
from tests.support.harness import REPO_ROOT, ServiceProcess

PAGE = REPO_ROOT / "docs" / "stability-and-drift.md"
#: Where the example's client connects, and the selector it reads.
PAGE_URL = "http://127.0.0.1:8000"
PAGE_SELECTOR = '"news"'


def example() -> str:
    (code,) = blocks(section("Python client", PAGE), "python")
    assert PAGE_URL in code and PAGE_SELECTOR in code
    return code


@pytest.mark.parametrize("features", [3, 10, 20])
def test_the_python_example_runs_on_any_selector(
    features: int, service: ServiceProcess, selector_name: str, tmp_path: Path
) -> None:
    rng = np.random.default_rng(features)
    scales = np.arange(features, 0, -1, dtype=np.float64)
    with Client(service.url) as client:
        client.create(selector_name, "variance", n_features=features)
        for _ in range(3):
            client.push(selector_name, rng.standard_normal((300, features)) * scales)
    code = example().replace(PAGE_URL, service.url).replace(PAGE_SELECTOR, f'"{selector_name}"')
    script = tmp_path / "example.py"
    script.write_text(code)
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    # The stability line (index, interval, bands) comes exactly where the top 10 has one: more
    # than 10 features; the drift line after it, whatever the selector.
    stability = [line for line in lines if ") [(1, " in line]
    assert len(stability) == (1 if features > 10 else 0), lines
    assert len(lines) == len(stability) + 1, lines
    with Client(service.url) as client:
        assert client.list_alerts(selector_name) == []  # the example deletes what it made
        pinned = client.drift(selector_name).baseline
        assert pinned is not None and pinned.how == "pinned"
