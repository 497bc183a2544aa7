"""Client and CLI test helpers: the bootstrap admin key, and ``sift`` run in-process."""

from __future__ import annotations

import pytest

from siftstream.cli import main

#: The bootstrap admin key of the ``secured`` service.
ADMIN_TOKEN = "test-admin-token-0123456789abcdef"


def sift(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run ``sift argv`` in this process: exit status, stdout, stderr."""
    try:
        status = main(list(argv))
    except SystemExit as exit_:
        status = int(exit_.code or 0)
    captured = capsys.readouterr()
    return status, captured.out, captured.err
