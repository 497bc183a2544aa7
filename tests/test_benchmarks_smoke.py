"""The benchmark command runs end to end: ``benchmarks/run.py --smoke`` starts its own
redis-server and service processes, measures every row of the target tables at tiny sizes and
writes a report with a number in each row. Numbers, not targets: nothing here is timed.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
#: Every row of the issue's target table, by the key the report's first column shows.
TARGET_ROWS = (
    "fsds-bytes",
    "ofs-bytes",
    "ping",
    "top-latency",
    "many-clients",
    "fsds-http",
    "ofs-http",
    "ocfs-http",
    "omvfs",
    "takeover",
    "memory",
    "path-nowait",
    "path-wait",
    "path-top",
    "path-workers",
    "path-replicas",
    "idle",
    "streams",
    "big-chunk",
    "many-clients-wrk",
    "sources",
    "sources-kafka",
)
#: Peers measured in the same run whatever is installed (River's needs the ``bench`` extra).
PEERS = ("paper's SVD update", "IncrementalPCA", "naive pinv", "batch OCFS")


def cells(line: str) -> list[str]:
    """The cells of one markdown table line (``\\|`` is a pipe inside a cell)."""
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def section(text: str, heading: str) -> list[list[str]]:
    """The table rows (header and rule excluded) of the section under ``## heading``."""
    body = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in body.splitlines() if line.startswith("|")]
    return [cells(line) for line in lines[2:]]


@pytest.mark.slow
@pytest.mark.smoke
def test_smoke_run_reports_a_number_in_every_row(tmp_path: Path) -> None:
    output = tmp_path / "BENCHMARKS.md"
    done = subprocess.run(
        [sys.executable, "benchmarks/run.py", "--smoke", "--output", str(output)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, (
        f"run.py --smoke exited {done.returncode}\n--- stdout (tail):\n{done.stdout[-4000:]}\n"
        f"--- stderr (tail):\n{done.stderr[-4000:]}"
    )
    text = output.read_text()
    assert "benchmarks/run.py --smoke --output" in text, "the report names its command"
    assert "mode: **smoke**" in text

    targets = {row[0]: row for row in section(text, "Targets")}
    assert set(targets) == set(TARGET_ROWS), f"target rows: {sorted(targets)}"
    for key in TARGET_ROWS:
        _, _what, _now, measured, _target, verdict = targets[key]
        assert re.search(r"\d", measured), f"row {key} has no number: {measured!r}"
        assert verdict in ("OK", "MISSED"), f"row {key}: verdict {verdict!r}"

    peers = section(text, "Peers, same run")
    for peer in PEERS:
        found = [row for row in peers if peer in row[4]]
        assert found, f"no peer {peer!r} in {[row[4] for row in peers]}"
        for row in found:
            sift, theirs = row[2], row[5]
            assert re.fullmatch(r"[\d,.]+", sift) and re.fullmatch(r"[\d,.]+", theirs), row
