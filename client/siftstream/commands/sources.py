"""``sift source create|ls|show|restart|rm``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import cast

from siftstream._api.sources import SourceOptions
from siftstream.clients import Client
from siftstream.console import CommandError, Console
from siftstream.render import (
    print_json,
    source_line,
    source_lines,
    sources_table,
)


def run_source(args: argparse.Namespace, client: Client, console: Console) -> int:
    return _SOURCE_COMMANDS[args.source_command](args, client, console)


#: The options of ``source create`` that only one kind of bus takes.
_KIND_OPTIONS = {
    "redis-stream": ("key", "value_field"),
    "nats": ("stream", "subject"),
    "kafka": ("topic", "group", "username", "password_stdin", "mechanism", "tls"),
}


def _source_create(args: argparse.Namespace, client: Client, console: Console) -> int:
    for kind, options in _KIND_OPTIONS.items():
        for option in options:
            if kind != args.kind and getattr(args, option) is not None:
                raise CommandError(f"--{option} applies to --kind {kind}")
    read = {
        field: getattr(args, field)
        for field in SourceOptions.__annotations__
        if field != "password"
    }
    # Read from stdin, never from the command line (where ps and the history would see it).
    read["password"] = sys.stdin.readline().rstrip("\r\n") if args.password_stdin else None
    created = client.create_source(
        args.name,
        args.kind,
        args.bus,
        into_selector=args.into_selector,
        into_stream=args.into_stream,
        **cast(SourceOptions, read),
    )
    if args.json:
        print_json(console.out, created.raw)
        return 0
    console.out.write(f"created source {source_line(created)}; start {created.start}\n")
    return 0


def _source_ls(args: argparse.Namespace, client: Client, console: Console) -> int:
    sources = client.list_sources()
    if args.json:
        print_json(console.out, [s.raw for s in sources])
    else:
        console.out.write(sources_table(sources) + "\n")
    return 0


def _source_show(args: argparse.Namespace, client: Client, console: Console) -> int:
    source = client.describe_source(args.name)
    if args.json:
        print_json(console.out, source.raw)
    else:
        console.out.write(source_lines(source) + "\n")
    return 0


def _source_restart(args: argparse.Namespace, client: Client, console: Console) -> int:
    source = client.restart_source(args.name, args.start)
    if args.json:
        print_json(console.out, source.raw)
    else:
        console.out.write(f"restarted source {args.name} from {args.start}\n")
    return 0


def _source_rm(args: argparse.Namespace, client: Client, console: Console) -> int:
    client.delete_source(args.name)
    console.out.write(f"deleted source {args.name}\n")
    return 0


_SOURCE_COMMANDS: dict[str, Callable[[argparse.Namespace, Client, Console], int]] = {
    "create": _source_create,
    "ls": _source_ls,
    "show": _source_show,
    "restart": _source_restart,
    "rm": _source_rm,
}
