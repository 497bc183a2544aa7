"""``sift stream create|push|top|ls|rm``."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from siftstream.clients import Client
from siftstream.commands.parser import shape_of
from siftstream.console import CommandError, Console
from siftstream.push import run_stream_push
from siftstream.render import (
    print_json,
    stream_rankings_table,
    stream_size,
    table,
)


def run_stream(args: argparse.Namespace, client: Client, console: Console) -> int:
    return _STREAM_COMMANDS[args.stream_command](args, client, console)


def _stream_create(args: argparse.Namespace, client: Client, console: Console) -> int:
    labelled = args.labelled or (args.like is not None and args.labels is not None)
    targets = args.targets or (args.like is not None and args.target is not None)
    if args.labels is not None and args.like is None:
        raise CommandError("--labels applies with --like (the labels column of the file)")
    if args.target is not None and args.like is None:
        raise CommandError("--target applies with --like (the target column of the file)")
    if labelled and targets:
        raise CommandError("a stream's rows carry labels or a target, not both")
    info = client.create_stream(args.name, labelled=labelled, targets=targets, **shape_of(args))
    if args.json:
        print_json(console.out, info.raw)
        return 0
    console.out.write(
        f"created stream {info.name}: {info.chunk_kind}, {stream_size(info)}; methods that may "
        f"attach: {', '.join(info.methods)}\n"
    )
    return 0


def _stream_top(args: argparse.Namespace, client: Client, console: Console) -> int:
    rankings = client.stream_rankings(args.name, args.h)
    if args.json:
        print_json(console.out, rankings.raw)
    else:
        console.out.write(stream_rankings_table(rankings) + "\n")
    return 0


def _stream_ls(args: argparse.Namespace, client: Client, console: Console) -> int:
    streams = client.list_streams()
    if args.json:
        print_json(console.out, [s.raw for s in streams])
        return 0
    if not streams:
        console.out.write("no streams\n")
        return 0
    rows = []
    for s in streams:
        attached = client.describe_stream(s.name).selectors or []
        rows.append(
            [
                s.name,
                s.chunk_kind,
                stream_size(s),
                f"{s.entries:,}",
                f"{s.items:,}",
                ", ".join(f"{a.name} ({a.method})" for a in attached) or "-",
            ]
        )
    headers = ["name", "kind", "shape", "chunks", "items", "selectors"]
    console.out.write(table(headers, rows, {3, 4}) + "\n")
    return 0


def _stream_rm(args: argparse.Namespace, client: Client, console: Console) -> int:
    client.delete_stream(args.name, force=args.force)
    console.out.write(f"deleted stream {args.name}\n")
    return 0


_STREAM_COMMANDS: dict[str, Callable[[argparse.Namespace, Client, Console], int]] = {
    "create": _stream_create,
    "push": run_stream_push,
    "top": _stream_top,
    "ls": _stream_ls,
    "rm": _stream_rm,
}
