"""The ``sift`` command line: the client commands (create, push, top, watch, ls, describe,
delete, export, import; ``siftstream.commands``), ``sift --version``, and the commands other
installed distributions register (the server's ``sift serve``)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from typing import Any

from siftstream.clients import client_version
from siftstream.commands import add_commands, connection_options, run

#: Where other distributions add subcommands to ``sift``: a callable taking the subparsers
#: (the server's ``siftstream-server`` adds ``serve``). A command sets ``handler`` (args -> exit
#: status) as its parser default.
COMMANDS_GROUP = "sift.commands"


def registered_commands() -> list[Callable[[Any], None]]:
    """The subcommands other installed distributions register (``COMMANDS_GROUP``)."""
    return [point.load() for point in entry_points(group=COMMANDS_GROUP)]


def build_parser(extra_commands: Sequence[Callable[[Any], None]] = ()) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sift",
        description="Streaming feature selection: use a Sift service (against --url or "
        "$SIFT_URL). `sift serve` runs one: it comes with the server distribution "
        "(siftstream-server).",
        parents=[connection_options(suppress=False)],
    )
    parser.add_argument("--version", action="version", version=f"sift {client_version()}")
    commands = parser.add_subparsers(dest="command", required=True)
    add_commands(commands)
    added = {id(add) for add in extra_commands}
    for add in [*extra_commands, *(a for a in registered_commands() if id(a) not in added)]:
        add(commands)
    return parser


def innermost(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)command parser that ``args`` were parsed by: ``sift top``'s for ``sift top``,
    ``sift alerts add``'s for ``sift alerts add``."""
    while True:
        chosen = None
        for action in parser._actions:  # argparse keeps its subparsers here, and nowhere public
            if isinstance(action, argparse._SubParsersAction):
                chosen = action.choices.get(getattr(args, action.dest, None) or "")
        if chosen is None:
            return parser
        parser = chosen


def main(
    argv: Sequence[str] | None = None,
    extra_commands: Sequence[Callable[[Any], None]] = (),
) -> int:
    """``sift``: the client commands, and those other distributions register (``serve``)."""
    parser = build_parser(extra_commands)
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # said with the usage of the command they were given to, not sift's
        innermost(parser, args).error(f"unrecognized arguments: {' '.join(unknown)}")
    handler = getattr(args, "handler", None)
    try:
        if handler is not None:  # a command registered by another distribution
            return int(handler(args))
        return run(args)
    except BrokenPipeError:  # `sift ls | head`: the reader has gone, and that is no error
        # Python flushes stdout again at exit; point it at nothing so that flush is quiet too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
