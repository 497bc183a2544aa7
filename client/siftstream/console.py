"""What every ``sift`` client command is given and how it refuses: the ``Console`` it writes to
and ``CommandError`` (shared by the runner, ``siftstream.commands``, and the push,
``siftstream.push``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TextIO


class CommandError(Exception):
    """A command that cannot do what was asked (the message says why); exit status 1."""


@dataclass
class Console:
    out: TextIO
    err: TextIO
    #: Where a question's answer is read (None: ``sys.stdin``).
    input: TextIO | None = None
