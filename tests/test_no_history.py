"""Code and documents say what is, not what was: no tracked file of the code, the tests, the
benchmarks, the evaluation or the documents names a tracker issue (``issue 21``, ``issues 14
and 25``, ``#21``). The history of a change lives in git; a figure's in BENCHMARKS.md, by the
commit it was measured at."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Where an issue number has no place.
CHECKED = [
    "service",
    "client",
    "docs",
    "tests",
    "benchmarks",
    "evaluation",
    "README.md",
    "ARCHITECTURE.md",
    "BENCHMARKS.md",
    "EVALUATION.md",
]
#: ``issue 21``, ``Issue 21's``, ``issues 14, 21``, ``issue #21``, ``issue-21``, or ``(#21)`` as
#: a changelog writes one (a seed's ``#0``, a colour or an anchor is not one).
ISSUE = re.compile(r"\bissues?[ \-]*#?\d+|[(\[]#\d+[)\]]", re.IGNORECASE)
TEXT = (".py", ".md", ".txt", ".toml", ".yml", ".yaml", ".html", ".js", ".css", ".cfg", ".ini")


def tracked() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--", *CHECKED], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [ROOT / name for name in listed if (name.endswith(TEXT) or "." not in Path(name).name)]


def mentions(text: str) -> list[str]:
    """Each line of ``text`` naming an issue, as ``line: text``."""
    return [
        f"{number}: {line.strip()}"
        for number, line in enumerate(text.splitlines(), 1)
        if ISSUE.search(line)
    ]


def test_no_file_names_an_issue() -> None:
    paths = tracked()
    assert len(paths) > 300 and ROOT / "tests" / "test_structure.py" in paths
    found = [
        f"{path.relative_to(ROOT)}:{mention}"
        for path in paths
        if path != Path(__file__).resolve() and path.is_file()
        for mention in mentions(path.read_text(errors="replace"))
    ]
    assert found == []


def test_the_rule_finds_an_issue_number() -> None:
    """The check can fail: each way of naming an issue is found; a seed's number, colours,
    anchors and the word alone are not."""
    planted = [
        "measured before issue 21",
        "after Issue 35's changes",
        "(issues 14, 21 and 25)",
        "see issue #7",
        "the issue-21 run",
        "(#12)",
    ]
    kept = [
        "digits shuffled #0",
        "color: #fff",
        "[a](page.md#section-2)",
        "the issue is the cost",
        "&#39;",
    ]
    assert [bool(mentions(line)) for line in planted] == [True] * len(planted)
    assert [bool(mentions(line)) for line in kept] == [False] * len(kept)
