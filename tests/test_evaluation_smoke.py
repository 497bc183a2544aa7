"""The evaluation command runs end to end: ``python -m evaluation --smoke`` runs every task at
tiny sizes (every method through the registry, every peer library) and writes a report whose
every section has measured numbers in its tables, a summary, and the plots it links to.
Numbers, not their values: nothing here is judged against the papers.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
#: Every task's section heading, as the report writes it.
SECTIONS = (
    "FSDS (Huang et al., CIKM 2015; Figs. 3-6)",
    "OFS (Wang, Shen & Li; Fig. 1, Table 3)",
    "IQRP (Maung & Schweitzer, NIPS 2013; Fig. 7)",
    "OMVFS (Shao et al.; Figs. 3-4, 7)",
    "OCFS and IOC (Yan et al., TKDE 2006; Table 4, Figs. 4-5)",
    "f_regression and correlation (scikit-learn's f_regression and r_regression)",
    "Stability and drift",
)
NUMBER = re.compile(r"\d+\.\d{2,3}")


def section(text: str, heading: str) -> str:
    """The text under ``## heading`` up to the next ``## `` heading."""
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def table_cells(body: str) -> list[str]:
    """Every cell of every markdown table row (header and rule lines excluded)."""
    cells = []
    for block in re.split(r"\n\s*\n", body):
        lines = [line for line in block.splitlines() if line.startswith("|")]
        for line in lines[2:]:
            cells += [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
    return cells


@pytest.mark.slow
@pytest.mark.smoke
def test_smoke_run_reports_numbers_in_every_section(tmp_path: Path) -> None:
    output = tmp_path / "EVALUATION.md"
    done = subprocess.run(
        [sys.executable, "-m", "evaluation", "--smoke", "--output", str(output)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert done.returncode == 0, (
        f"evaluation --smoke exited {done.returncode}\n--- stdout (tail):\n"
        f"{done.stdout[-4000:]}\n--- stderr (tail):\n{done.stderr[-4000:]}"
    )
    text = output.read_text()
    assert "python -m evaluation --smoke --output" in text, "the report names its command"
    assert "(mode: **smoke**)" in text
    assert "## Defaults in force" in text and "`fsds` (size 1024)" in text

    for heading in SECTIONS:
        body = section(text, heading)
        numbers = [cell for cell in table_cells(body) if NUMBER.search(cell)]
        assert len(numbers) >= 6, f"{heading}: too few measured cells ({numbers})"
        summary = body.split("**Summary.**", 1)[1].split("\n| ", 1)[0]
        assert NUMBER.search(summary) or re.search(r"\d+ of \d+", summary), (
            f"{heading}: the summary quotes no measured number"
        )
        links = re.findall(r"!\[[^]]*\]\(([^)]+\.png)\)", body)
        assert links, f"{heading}: no plot"
        for link in links:
            plot = (output.parent / link).resolve()
            assert plot.is_file() and plot.stat().st_size > 1000, f"{heading}: {link} missing"
        # Each summary also appears at the top of the report.
        assert f"### {heading}" in text.split("## Defaults in force", 1)[0]
