"""The client commands of ``sift``: create, push, top, watch, drift, baseline, alerts, ls,
describe, delete, export, import, ``sift stream create|push|top|ls|rm`` and
``sift source create|ls|show|rm`` (``sift serve`` is in ``siftstream.cli``). This module owns
their parser (``add_commands``) and their runner (``run``, one function per command); the
resumable push is ``siftstream.push``, the tables and JSON output ``siftstream.render``.

Every command talks to the service at ``--url`` (or ``SIFT_URL``, default
``http://127.0.0.1:8000``) with ``--api-key`` (or ``SIFT_API_KEY``), through ``Client``: transport
errors and 503s are retried within ``--retry-budget`` seconds. A refusal prints the service's
problem detail and exits with status 1.

``sift push`` is resumable (``siftstream.push`` says how).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from siftstream._http import RetryPolicy
from siftstream.clients import DEFAULT_URL, Client
from siftstream.console import CommandError, Console
from siftstream.errors import ProblemError, SiftClientError
from siftstream.files import FileFormatError, open_data
from siftstream.push import run_push, run_stream_push
from siftstream.render import (
    alerts_table,
    drift_lines,
    events_table,
    print_json,
    selector_size,
    source_line,
    source_lines,
    sources_table,
    stream_rankings_table,
    stream_size,
    table,
    top_table,
)
from siftstream.results import Top

#: Seconds between two refreshes of ``sift watch``.
DEFAULT_INTERVAL = 2.0


# -- the parser -----------------------------------------------------------------------------


def connection_options(suppress: bool) -> argparse.ArgumentParser:
    """``--url``, ``--api-key`` and ``--retry-budget``: before the command (``sift --url U ls``)
    and after it (``sift ls --url U``); given after, they win."""
    parent = argparse.ArgumentParser(add_help=False)
    default = argparse.SUPPRESS if suppress else None
    parent.add_argument(
        "--url", default=default, help=f"The service (default $SIFT_URL, else {DEFAULT_URL})."
    )
    parent.add_argument(
        "--api-key", default=default, help="API key (default $SIFT_API_KEY; none if unset)."
    )
    parent.add_argument(
        "--retry-budget",
        type=float,
        default=argparse.SUPPRESS if suppress else 30.0,
        metavar="SECONDS",
        help="How long to keep retrying a request while the service is unreachable or "
        "answers 503 (default 30).",
    )
    return parent


def add_commands(commands: Any) -> None:
    """The client subcommands, on the ``sift`` parser's subparsers."""
    common = [connection_options(suppress=True)]

    create = commands.add_parser(
        "create",
        parents=common,
        help="Create a selector.",
        description="Create a selector. Its shape: --n-features (row methods), --n-samples "
        "(feature-column methods: ofs, iqrp), --views (omvfs), or --like FILE (the width and "
        "feature names of a data file); or --stream NAME: attached to a stream, whose shape it "
        "takes and whose chunks it applies.",
    )
    create.add_argument("name")
    create.add_argument(
        "--method", required=True, help="fsds, variance, ocfs, ... (sift methods lists them)"
    )
    shape = create.add_mutually_exclusive_group(required=True)
    _shape_options(shape)
    shape.add_argument("--stream", metavar="STREAM", help="Attach to this stream.")
    create.add_argument(
        "--from",
        dest="start",
        choices=["start", "now"],
        help="with --stream: every chunk the stream holds (start, the default) or those pushed "
        "from now on",
    )
    create.add_argument(
        "--labels", metavar="COLUMN", help="with --like: the labels column (not a feature)"
    )
    create.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="A hyperparameter (repeatable); VALUE is read as JSON when it parses (10, 0.5, "
        "false), else as a string.",
    )
    create.add_argument("--json", action="store_true", help="Print the service's JSON answer.")

    push = commands.add_parser(
        "push",
        parents=common,
        help="Push a data file in chunks (resumable).",
        description="Push the rows of a CSV (header = feature names), .npy, .npz or Parquet "
        "file in chunks, with a progress bar on a terminal. Resumable: run the same command "
        "again after an interruption and it skips what was acknowledged. For feature-column "
        "selectors (ofs, iqrp) the file's columns are the features, its rows the samples.",
    )
    push.add_argument("name")
    push.add_argument("file")
    push.add_argument(
        "--chunk-rows",
        type=int,
        metavar="N",
        help="Rows per chunk (columns, for feature-column selectors); default about 8 MiB.",
    )
    push.add_argument(
        "--labels",
        metavar="COLUMN",
        help="The column (.npz: array) of labels: never a feature; sent to labelled methods.",
    )
    push.add_argument(
        "--no-resume",
        action="store_true",
        help="Push as new data: fresh Idempotency-Keys and no progress record.",
    )

    # -h is the number of features, as in the API: help is --help only.
    top = commands.add_parser(
        "top", parents=common, add_help=False, help="Print a selector's top features."
    )
    _ranking_options(top, default_h=20)
    top.add_argument("--json", action="store_true", help="Print the service's JSON answer.")

    watch = commands.add_parser(
        "watch",
        parents=common,
        add_help=False,
        help="Show a selector's top features, refreshed live.",
    )
    _ranking_options(watch, default_h=10)
    watch.add_argument(
        "--interval", type=float, default=DEFAULT_INTERVAL, metavar="SECONDS", help="(default 2)"
    )
    watch.add_argument(
        "--count", type=int, metavar="N", help="Stop after N refreshes (default: until Ctrl-C)."
    )
    watch.add_argument(
        "--once", action="store_true", help="Show it once and exit (scripts, tests)."
    )

    drift = commands.add_parser(
        "drift",
        parents=common,
        add_help=False,
        help="How far a selector's top h moved since the previous version and the baseline.",
    )
    drift.add_argument("--help", action="help", help="Show this help and exit.")
    drift.add_argument("name")
    drift.add_argument("-h", type=int, default=10, dest="h", help="How many (default 10).")
    drift.add_argument("--json", action="store_true", help="Print the service's JSON answer.")

    baseline = commands.add_parser(
        "baseline",
        parents=common,
        help="Pin the current version as the baseline drift is measured against.",
    )
    baseline.add_argument("name")
    baseline.add_argument(
        "--forget",
        action="store_true",
        help="Forget the baseline instead: the next stable version becomes it.",
    )

    alerts = commands.add_parser(
        "alerts",
        parents=common,
        help="A selector's alerts: list, add, rotate, rearm, rm, events, redeliver.",
    )
    actions = alerts.add_subparsers(dest="action", required=True, metavar="ACTION")
    listed = actions.add_parser("ls", parents=common, help="List a selector's alerts.")
    listed.add_argument("name")
    listed.add_argument("--json", action="store_true", help="Print JSON, one list.")
    added = actions.add_parser(
        "add",
        parents=common,
        add_help=False,
        help="Add a webhook POSTed when the drift since the baseline reaches a threshold.",
    )
    added.add_argument("--help", action="help", help="Show this help and exit.")
    added.add_argument("name")
    added.add_argument("webhook", help="Where events are POSTed (http or https).")
    added.add_argument(
        "--threshold", type=float, required=True, help="Drift (1 - RBO) at which it fires."
    )
    added.add_argument("-h", type=int, default=10, dest="h", help="The top h (default 10).")
    added.add_argument(
        "--min-stability", type=float, help="Fire only while the top h is this stable."
    )
    added.add_argument("--label", default="", help="Free text, sent with the events.")
    rotated = actions.add_parser(
        "rotate",
        parents=common,
        help="A new secret for an alert; the old one signs beside it for a day.",
    )
    rotated.add_argument("name")
    rotated.add_argument("id")
    rearmed = actions.add_parser(
        "rearm", parents=common, help="Re-arm an alert left firing: the next crossing alerts."
    )
    rearmed.add_argument("name")
    rearmed.add_argument("id")
    redelivered = actions.add_parser(
        "redeliver", parents=common, help="Send an event again (one that failed, say)."
    )
    redelivered.add_argument("name")
    redelivered.add_argument("event", help="The event's id (<alert id>-<crossing>).")
    removed = actions.add_parser("rm", parents=common, help="Delete an alert.")
    removed.add_argument("name")
    removed.add_argument("id")
    events = actions.add_parser("events", parents=common, help="The events the alerts raised.")
    events.add_argument("name")
    events.add_argument("--limit", type=int, default=20, help="(default 20)")
    events.add_argument(
        "--status", choices=["pending", "delivered", "failed"], help="Only events with it."
    )
    events.add_argument("--json", action="store_true", help="Print JSON, one list.")

    methods = commands.add_parser(
        "methods",
        parents=common,
        help="List the methods the service runs: chunks, capabilities, parameters, papers.",
    )
    methods.add_argument("--json", action="store_true", help="Print the service's JSON answer.")

    listing = commands.add_parser("ls", parents=common, help="List the selectors.")
    listing.add_argument("--json", action="store_true", help="Print JSON, one list.")

    describe = commands.add_parser(
        "describe", parents=common, help="Describe a selector (JSON: state, classes, pending)."
    )
    describe.add_argument("name")

    delete = commands.add_parser("delete", parents=common, help="Delete a selector.")
    delete.add_argument("name")

    export = commands.add_parser(
        "export", parents=common, help="Save a selector to an archive file."
    )
    export.add_argument("name")
    export.add_argument("-o", "--output", metavar="FILE", help="(default NAME.sift)")

    load = commands.add_parser(
        "import", parents=common, help="Create a selector from an archive file."
    )
    load.add_argument("file")
    load.add_argument("--name", help="Import under this name (default: the exported one).")

    _add_stream_commands(commands, common)
    _add_source_commands(commands, common)


def _shape_options(shape: Any) -> None:
    """The shape of a selector or a stream, one of four ways."""
    shape.add_argument("--n-features", type=int, metavar="M")
    shape.add_argument("--n-samples", type=int, metavar="N")
    shape.add_argument("--views", metavar="VIEW=M,...", help="e.g. text=35719,image=996")
    shape.add_argument(
        "--like", metavar="FILE", help="n_features and feature names from a data file's header"
    )


def _add_stream_commands(commands: Any, common: list[argparse.ArgumentParser]) -> None:
    """``sift stream create|push|top|ls|rm``."""
    stream = commands.add_parser(
        "stream",
        parents=common,
        help="Streams: push once, every attached selector applies it.",
        description="A stream is one log that several selectors apply, each exactly once: push "
        "a file once and compare how their methods rank it (sift stream top). Attach a "
        "selector with: sift create NAME --method M --stream STREAM.",
    )
    actions = stream.add_subparsers(dest="stream_command", required=True)
    create = actions.add_parser(
        "create",
        parents=common,
        help="Create a stream.",
        description="Create a stream. Its shape, as a selector's: --n-features, --n-samples, "
        "--views, or --like FILE; --labelled (or --like with --labels): rows with a label "
        "each, which feed labelled methods (ocfs, ioc) and row methods (fsds, variance) alike.",
    )
    create.add_argument("name")
    shape = create.add_mutually_exclusive_group(required=True)
    _shape_options(shape)
    create.add_argument(
        "--labels", metavar="COLUMN", help="with --like: the labels column (makes it labelled)"
    )
    create.add_argument("--labelled", action="store_true", help="Rows carry one label each.")
    create.add_argument("--json", action="store_true", help="Print the service's JSON answer.")

    push = actions.add_parser(
        "push",
        parents=common,
        help="Push a data file to a stream in chunks (resumable).",
        description="Push a file as sift push does, once for every selector attached to the "
        "stream.",
    )
    push.add_argument("name")
    push.add_argument("file")
    push.add_argument("--chunk-rows", type=int, metavar="N", help="Rows (or columns) per chunk.")
    push.add_argument("--labels", metavar="COLUMN", help="The labels column (labelled streams).")
    push.add_argument("--no-resume", action="store_true", help="Push as new data.")

    top = actions.add_parser(
        "top",
        parents=common,
        add_help=False,
        help="Print every attached selector's top features side by side, and their agreement.",
    )
    top.add_argument("--help", action="help", help="Show this help and exit.")
    top.add_argument("name")
    top.add_argument("-h", type=int, default=10, dest="h", help="How many (default 10).")
    top.add_argument("--json", action="store_true", help="Print the service's JSON answer.")

    listing = actions.add_parser("ls", parents=common, help="List the streams.")
    listing.add_argument("--json", action="store_true", help="Print JSON, one list.")

    remove = actions.add_parser(
        "rm",
        parents=common,
        help="Delete a stream.",
        description="Delete a stream. With selectors attached it is refused unless --force, "
        "which detaches them (they keep their state and take chunks directly).",
    )
    remove.add_argument("name")
    remove.add_argument("--force", action="store_true", help="Detach the selectors first.")


def _add_source_commands(commands: Any, common: list[argparse.ArgumentParser]) -> None:
    """``sift source create|ls|show|rm``."""
    source = commands.add_parser(
        "source",
        parents=common,
        help="Sources: the service reads a Redis stream or a JetStream stream into a selector.",
        description="A source is a bus the service reads by itself: a Redis stream (one field "
        "per feature name in each entry) or a NATS JetStream stream (each message a JSON "
        "object keyed by feature name), appended to a selector (or a stream) exactly once. "
        "Entries that cannot be rows are set aside with their position and reason "
        "(sift source show).",
    )
    actions = source.add_subparsers(dest="source_command", required=True)
    create = actions.add_parser(
        "create",
        parents=common,
        help="Create a source.",
        description="Create a source reading the bus at URL into a selector (--into-selector) "
        "or a stream (--into-stream). --kind redis-stream reads the Redis stream --key; "
        "--kind nats reads the JetStream stream --stream (only the messages on --subject, if "
        "given). Credentials in URL are kept by the service and never shown.",
    )
    create.add_argument("name")
    create.add_argument(
        "bus",
        metavar="URL",
        help="The bus: redis://, rediss:// or unix:// (redis-stream), nats:// or tls:// (nats). "
        "(--url is the Sift service, as for every command.)",
    )
    create.add_argument(
        "--kind",
        required=True,
        choices=["redis-stream", "nats"],
        help="redis-stream: a Redis stream (--key); nats: a JetStream stream (--stream).",
    )
    into = create.add_mutually_exclusive_group(required=True)
    into.add_argument("--into-selector", metavar="SELECTOR", help="Append to this selector.")
    into.add_argument(
        "--into-stream",
        metavar="STREAM",
        help="Append to this Sift stream (every selector attached to it applies the rows).",
    )
    create.add_argument("--key", help="redis-stream: the Redis stream's key.")
    create.add_argument("--stream", metavar="JS_STREAM", help="nats: the JetStream stream.")
    create.add_argument(
        "--subject", help="nats: only the stream's messages on this subject (wildcards allowed)."
    )
    create.add_argument(
        "--batch-rows", type=int, metavar="N", help="Most rows per chunk appended (default 1000)."
    )
    create.add_argument(
        "--batch-ms",
        type=int,
        metavar="MS",
        help="Most milliseconds a chunk gathers entries after its first (default 200).",
    )
    create.add_argument(
        "--start",
        metavar="POSITION",
        help="Where the first read begins: earliest (the default), latest, or after this "
        "position (a Redis entry id, a JetStream sequence).",
    )
    create.add_argument(
        "--label-field",
        metavar="FIELD",
        help="The field holding each entry's label (labelled selectors and streams).",
    )
    create.add_argument("--json", action="store_true", help="Print the service's JSON answer.")

    listing = actions.add_parser("ls", parents=common, help="List the sources.")
    listing.add_argument("--json", action="store_true", help="Print JSON, one list.")

    show = actions.add_parser(
        "show",
        parents=common,
        help="Show a source: state, last error, positions, lag, rows, rejected entries.",
    )
    show.add_argument("name")
    show.add_argument("--json", action="store_true", help="Print the service's JSON answer.")

    remove = actions.add_parser(
        "rm",
        parents=common,
        help="Delete a source.",
        description="Delete a source: its consumer stops within a second; what it appended "
        "stays in its target.",
    )
    remove.add_argument("name")


def _ranking_options(parser: argparse.ArgumentParser, default_h: int) -> None:
    parser.add_argument("--help", action="help", help="Show this help and exit.")
    parser.add_argument("name")
    parser.add_argument(
        "-h", type=int, default=default_h, dest="h", help=f"How many (default {default_h})."
    )
    parser.add_argument("--strategy", choices=["score", "diverse"], help="fsds: diverse = IQRP")
    parser.add_argument("--l", type=int, metavar="L", help="IQRP's candidate list length.")
    parser.add_argument("--view", help="Multi-view selectors: this view only.")


# -- running --------------------------------------------------------------------------------


def run(args: argparse.Namespace, console: Console | None = None) -> int:
    """Run a client command; the exit status."""
    console = console or Console(sys.stdout, sys.stderr)
    url = args.url or os.environ.get("SIFT_URL") or DEFAULT_URL
    api_key = args.api_key or os.environ.get("SIFT_API_KEY") or None
    handler = _COMMANDS[args.command]
    try:
        policy = RetryPolicy(budget=args.retry_budget, fail_fast_unreached=True)
        with Client(url, api_key, retry=policy) as client:
            return handler(args, client, console)
    except ProblemError as exc:  # the service's own words, and its status
        console.err.write(f"sift {args.command}: {exc.detail} ({exc.status} {exc.title})\n")
        return 1
    except (SiftClientError, CommandError, FileFormatError) as exc:
        console.err.write(f"sift {args.command}: {exc}\n")
        return 1


def _create(args: argparse.Namespace, client: Client, console: Console) -> int:
    params = dict(_param(text) for text in args.param)
    if args.stream is None and args.start is not None:
        raise CommandError("--from applies to selectors attached to a stream (--stream)")
    if args.stream is not None:
        info = client.create(
            args.name, args.method, params=params or None, stream=args.stream, from_=args.start
        )
    else:
        info = client.create(args.name, args.method, params=params or None, **_shape(args))
    if args.json:
        print_json(console.out, info.raw)
        return 0
    resolved = ", ".join(f"{key}={json.dumps(value)}" for key, value in info.params.items())
    attached = f", attached to stream {info.stream}" if info.stream else ""
    console.out.write(
        f"created {info.name}: {info.method}, {selector_size(info)}{attached}"
        + (f"; {resolved}" if resolved else "")
        + "\n"
    )
    return 0


def _shape(args: argparse.Namespace) -> dict[str, Any]:
    """The shape options of ``create`` (and ``stream create``) as creation fields."""
    if args.like:
        data = open_data(args.like, args.labels)
        return {"n_features": data.n_features, "feature_names": data.feature_names}
    if args.views:
        return {"views": dict(_view(text) for text in args.views.split(","))}
    return {"n_features": args.n_features, "n_samples": args.n_samples}


def _param(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise CommandError(f"--param expects KEY=VALUE; got {text!r}")
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value


def _view(text: str) -> tuple[str, int]:
    view, sep, width = text.partition("=")
    if not sep or not width.strip().isdigit():
        raise CommandError(f"--views expects VIEW=FEATURES,...; got {text!r}")
    return view.strip(), int(width)


# -- reading --------------------------------------------------------------------------------


def _fetch_top(args: argparse.Namespace, client: Client) -> Top:
    return client.top(args.name, args.h, strategy=args.strategy, l=args.l, view=args.view)


def _top(args: argparse.Namespace, client: Client, console: Console) -> int:
    top = _fetch_top(args, client)
    if args.json:
        print_json(console.out, top.raw)
    else:
        console.out.write(top_table(top) + "\n")
    return 0


def _methods(args: argparse.Namespace, client: Client, console: Console) -> int:
    methods = client.methods()
    if args.json:
        print_json(console.out, [method.raw for method in methods])
        return 0
    for method in methods:
        route = f"POST .../{method.route}"
        offers = ", ".join(method.capabilities) or "-"
        console.out.write(f"{method.name}: {method.paper}\n")
        console.out.write(f"  chunks: {method.chunk_kind} ({route}); also: {offers}\n")
        for name, schema in method.parameters.items():
            default = f" (default {json.dumps(schema['default'])})" if "default" in schema else ""
            console.out.write(f"  --param {name}=...{default}: {schema.get('description', '')}\n")
    return 0


def _watch(args: argparse.Namespace, client: Client, console: Console) -> int:
    live = console.out.isatty() and not args.once
    count = 1 if args.once else args.count
    shown = 0
    previous: tuple[float, int] | None = None
    try:
        while count is None or shown < count:
            if shown:
                time.sleep(args.interval)
            top = _fetch_top(args, client)
            now = time.monotonic()
            rate = ""
            if previous is not None and now > previous[0]:
                per_second = (top.seen - previous[1]) / (now - previous[0])
                rate = f"  (+{per_second:,.0f}/s)"
            previous = (now, top.seen)
            stamp = time.strftime("%H:%M:%S")
            moved = _drift_text(client, args.name, args.h)
            screen = f"{top_table(top)}\n{moved}\n\nat {stamp}{rate}, every {args.interval:g} s"
            if live:
                # Home the cursor and clear the screen: the table refreshes in place.
                console.out.write("\x1b[H\x1b[2J" + screen + "  (Ctrl-C to stop)\n")
            else:
                console.out.write(("\n" if shown else "") + screen + "\n")
            console.out.flush()
            shown += 1
    except KeyboardInterrupt:
        console.out.write("\n")
    return 0


def _drift_text(client: Client, name: str, h: int) -> str:
    """The drift lines of ``sift watch``, or why there are none (a partitioned selector)."""
    try:
        return drift_lines(client.drift(name, h))
    except ProblemError as exc:
        if exc.status == 422:
            return f"drift: none ({exc.detail})"
        raise


def _drift(args: argparse.Namespace, client: Client, console: Console) -> int:
    drift = client.drift(args.name, args.h)
    if args.json:
        print_json(console.out, drift.raw)
    else:
        console.out.write(drift_lines(drift) + "\n")
    return 0


def _baseline(args: argparse.Namespace, client: Client, console: Console) -> int:
    if args.forget:
        client.forget_baseline(args.name)
        console.out.write(
            f"forgot the baseline of {args.name}: the next stable version becomes it\n"
        )
        return 0
    pinned = client.set_baseline(args.name)
    console.out.write(f"version {pinned.version} of {args.name} is the baseline (pinned)\n")
    return 0


def _alerts(args: argparse.Namespace, client: Client, console: Console) -> int:
    if args.action == "add":
        created = client.create_alert(
            args.name,
            args.webhook,
            args.threshold,
            h=args.h,
            min_stability=args.min_stability,
            label=args.label,
        )
        console.out.write(
            f"alert {created.alert.id} on {args.name}: POST {created.alert.url} when the drift "
            f"of the top {created.alert.h} reaches {created.alert.threshold:g}\n"
            f"secret (shown once; it signs every delivery): {created.secret}\n"
        )
    elif args.action == "rotate":
        rotated = client.rotate_alert_secret(args.name, args.id)
        until = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(rotated.previous_valid_until))
        console.out.write(
            f"alert {rotated.id} of {args.name}: new secret (shown once): {rotated.secret}\n"
            f"the previous secret signs every delivery beside it until {until}\n"
        )
    elif args.action == "rearm":
        rearmed = client.rearm_alert(args.name, args.id)
        console.out.write(
            f"alert {rearmed.id} of {args.name} re-armed: its next crossing raises an event\n"
        )
    elif args.action == "redeliver":
        queued = client.redeliver_alert_event(args.name, args.event)
        console.out.write(
            f"event {args.event} of {args.name}: "
            + ("back in the outbox, due now\n" if queued else "in the outbox already\n")
        )
    elif args.action == "rm":
        client.delete_alert(args.name, args.id)
        console.out.write(f"deleted alert {args.id} of {args.name}\n")
    elif args.action == "events":
        events = client.alert_events(args.name, args.limit, args.status)
        if args.json:
            print_json(console.out, [e.raw for e in events])
        else:
            console.out.write(events_table(events) + "\n")
    else:
        alerts = client.list_alerts(args.name)
        if args.json:
            print_json(console.out, [alert.__dict__ for alert in alerts])
        else:
            console.out.write(alerts_table(alerts) + "\n")
    return 0


def _ls(args: argparse.Namespace, client: Client, console: Console) -> int:
    selectors = client.list_selectors()
    if args.json:
        print_json(console.out, [s.raw for s in selectors])
        return 0
    if not selectors:
        console.out.write("no selectors\n")
        return 0
    rows = [
        [
            s.name,
            s.method,
            str(s.n_features),
            f"{s.seen:,} {'features' if s.is_feature_stream else 'rows'}",
            str(s.version),
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(s.updated_at)),
        ]
        for s in selectors
    ]
    headers = ["name", "method", "features", "seen", "version", "updated"]
    console.out.write(table(headers, rows, {2, 3, 4}) + "\n")
    return 0


def _describe(args: argparse.Namespace, client: Client, console: Console) -> int:
    print_json(console.out, client.describe(args.name).raw)
    return 0


def _delete(args: argparse.Namespace, client: Client, console: Console) -> int:
    client.delete(args.name)
    console.out.write(f"deleted {args.name}\n")
    return 0


def _export(args: argparse.Namespace, client: Client, console: Console) -> int:
    archive = client.export(args.name)
    output = Path(args.output or f"{args.name}.sift")
    temporary = output.with_name(output.name + ".part")
    temporary.write_bytes(archive)
    os.replace(temporary, output)
    console.out.write(f"exported {args.name} to {output} ({len(archive):,} bytes)\n")
    return 0


def _import(args: argparse.Namespace, client: Client, console: Console) -> int:
    try:
        archive = Path(args.file).read_bytes()
    except OSError as exc:
        raise CommandError(f"cannot read {args.file}: {exc.strerror}") from None
    info = client.import_selector(archive, args.name)
    unit = "features" if info.is_feature_stream else "rows"
    console.out.write(
        f"imported {info.name}: {info.method}, {selector_size(info)}, version {info.version}, "
        f"{info.seen:,} {unit} seen\n"
    )
    return 0


# -- streams --------------------------------------------------------------------------------


def _stream(args: argparse.Namespace, client: Client, console: Console) -> int:
    return _STREAM_COMMANDS[args.stream_command](args, client, console)


def _stream_create(args: argparse.Namespace, client: Client, console: Console) -> int:
    labelled = args.labelled or (args.like is not None and args.labels is not None)
    if args.labels is not None and args.like is None:
        raise CommandError("--labels applies with --like (the labels column of the file)")
    info = client.create_stream(args.name, labelled=labelled, **_shape(args))
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


# -- sources --------------------------------------------------------------------------------


def _source(args: argparse.Namespace, client: Client, console: Console) -> int:
    return _SOURCE_COMMANDS[args.source_command](args, client, console)


#: The options of ``source create`` that only one kind of bus takes.
_KIND_OPTIONS = {"redis-stream": ("key",), "nats": ("stream", "subject")}


def _source_create(args: argparse.Namespace, client: Client, console: Console) -> int:
    for kind, options in _KIND_OPTIONS.items():
        for option in options:
            if kind != args.kind and getattr(args, option) is not None:
                raise CommandError(f"--{option} applies to --kind {kind}")
    created = client.create_source(
        args.name,
        args.kind,
        args.bus,
        into_selector=args.into_selector,
        into_stream=args.into_stream,
        key=args.key,
        stream=args.stream,
        subject=args.subject,
        batch_rows=args.batch_rows,
        batch_ms=args.batch_ms,
        start=args.start,
        label_field=args.label_field,
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


def _source_rm(args: argparse.Namespace, client: Client, console: Console) -> int:
    client.delete_source(args.name)
    console.out.write(f"deleted source {args.name}\n")
    return 0


_SOURCE_COMMANDS: dict[str, Callable[[argparse.Namespace, Client, Console], int]] = {
    "create": _source_create,
    "ls": _source_ls,
    "show": _source_show,
    "rm": _source_rm,
}

_STREAM_COMMANDS: dict[str, Callable[[argparse.Namespace, Client, Console], int]] = {
    "create": _stream_create,
    "push": run_stream_push,
    "top": _stream_top,
    "ls": _stream_ls,
    "rm": _stream_rm,
}

_COMMANDS: dict[str, Callable[[argparse.Namespace, Client, Console], int]] = {
    "create": _create,
    "push": run_push,
    "top": _top,
    "methods": _methods,
    "watch": _watch,
    "drift": _drift,
    "baseline": _baseline,
    "alerts": _alerts,
    "ls": _ls,
    "describe": _describe,
    "delete": _delete,
    "export": _export,
    "import": _import,
    "stream": _stream,
    "source": _source,
}
#: The subcommands ``add_commands`` adds (``siftstream.cli`` dispatches them to ``run``).
CLIENT_COMMANDS = frozenset(_COMMANDS)
