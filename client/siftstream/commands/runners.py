"""Running a client command (``run``): one function per command of selectors, and the table
of them all (streams' and sources' in their modules)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from siftstream._http import RetryPolicy
from siftstream.clients import Client
from siftstream.commands.parser import parse_param, shape_of
from siftstream.commands.sources import run_source
from siftstream.commands.streams import run_stream
from siftstream.console import CommandError, Console
from siftstream.errors import ProblemError, SiftClientError
from siftstream.files import FileFormatError
from siftstream.push import run_push
from siftstream.render import (
    alerts_table,
    drift_lines,
    events_table,
    print_json,
    selector_size,
    table,
    top_table,
)
from siftstream.results import Top


def run(args: argparse.Namespace, console: Console | None = None) -> int:
    """Run a client command; the exit status."""
    console = console or Console(sys.stdout, sys.stderr)
    handler = _COMMANDS[args.command]
    try:
        # The URL and the key as Client reads them: --url, else $SIFT_URL; --api-key, else
        # $SIFT_API_KEY, else $SIFT_API_TOKEN (siftstream._connection).
        policy = RetryPolicy(fail_fast_unreached=True)
        with Client(
            args.url or None, args.api_key, retry=policy, retry_budget=args.retry_budget
        ) as client:
            return handler(args, client, console)
    except ProblemError as exc:  # the service's own words, and its status
        console.err.write(f"sift {args.command}: {exc.detail} ({exc.status} {exc.title})\n")
        return 1
    except (SiftClientError, CommandError, FileFormatError) as exc:
        console.err.write(f"sift {args.command}: {exc}\n")
        return 1


def _create(args: argparse.Namespace, client: Client, console: Console) -> int:
    params = dict(parse_param(text) for text in args.param)
    if args.stream is None and args.start is not None:
        raise CommandError("--from applies to selectors attached to a stream (--stream)")
    if args.stream is not None:
        info = client.create(
            args.name, args.method, params=params or None, stream=args.stream, from_=args.start
        )
    else:
        info = client.create(args.name, args.method, params=params or None, **shape_of(args))
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


def _fetch_top(
    args: argparse.Namespace,
    client: Client,
    alpha: float | None = None,
    correction: str | None = None,
) -> Top:
    return client.top(
        args.name,
        args.h,
        strategy=args.strategy,
        l=args.l,
        view=args.view,
        alpha=alpha,
        correction=correction,
    )


def _significance(args: argparse.Namespace) -> tuple[float | None, str | None]:
    """``sift top``'s ``--alpha`` and ``--correction``, checked. The service ignores a
    correction without a level, and answers ``strategy=diverse`` (pivoted QR, of methods
    without p-values) without the test: both are refused here rather than printed as if they
    applied."""
    if args.alpha is None:
        if args.correction is not None:
            raise CommandError(
                f"--correction {args.correction} corrects the level of --alpha: give --alpha "
                "too (without it every feature is ranked by score, with no test)"
            )
        return None, None
    if not 0 < args.alpha <= 1:
        raise CommandError(f"--alpha must be in (0, 1]; got {args.alpha:g}")
    if args.strategy == "diverse":
        raise CommandError(
            "--alpha selects by p-value among the features ranked by score: it does not "
            "apply with --strategy diverse"
        )
    return args.alpha, args.correction


def _top(args: argparse.Namespace, client: Client, console: Console) -> int:
    alpha, correction = _significance(args)
    top = _fetch_top(args, client, alpha, correction)
    if args.json:
        print_json(console.out, top.raw)
    else:
        # Without --correction the service corrects nothing (SelectFpr's p < alpha).
        test = None if alpha is None else (alpha, correction or "none")
        console.out.write(top_table(top, test) + "\n")
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
    selectors = client.list_selectors(
        prefix=args.prefix, q=args.search, method=args.method, temporary=args.temporary
    )
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
            "temporary" if s.temporary else "",
        ]
        for s in selectors
    ]
    headers = ["name", "method", "features", "seen", "version", "updated", ""]
    console.out.write(table(headers, rows, {2, 3, 4}) + "\n")
    temporary = sum(s.temporary for s in selectors)
    if temporary and args.temporary is None:
        console.out.write(
            f"{temporary} temporary (a job's, such as a scikit-learn fit's): --no-temporary "
            "leaves them out; sift delete --prefix PREFIX --temporary deletes them\n"
        )
    return 0


def _describe(args: argparse.Namespace, client: Client, console: Console) -> int:
    print_json(console.out, client.describe(args.name).raw)
    return 0


def _delete(args: argparse.Namespace, client: Client, console: Console) -> int:
    many = args.prefix is not None or args.everything
    if args.name is not None:
        if many or args.temporary:
            raise CommandError("give a NAME, or --prefix PREFIX (or --all), not both")
        client.delete(args.name)
        console.out.write(f"deleted {args.name}\n")
        return 0
    if not many:
        raise CommandError("give a NAME, --prefix PREFIX or --all")
    if args.prefix is not None and args.everything:
        raise CommandError("give --prefix PREFIX or --all, not both")
    if args.prefix == "":
        raise CommandError("an empty --prefix would delete every selector: use --all")
    temporary = True if args.temporary else None
    if not args.yes:
        _confirm_deletion(args, client, console, temporary)
    started = time.monotonic()
    done = client.delete_selectors(args.prefix, all_=args.everything, temporary=temporary)
    console.out.write(
        f"deleted {len(done.deleted):,} selectors in {time.monotonic() - started:.1f} s\n"
    )
    if done.failed:
        console.err.write(f"sift delete: could not delete {', '.join(done.failed)}\n")
        return 1
    return 0


def _confirm_deletion(
    args: argparse.Namespace, client: Client, console: Console, temporary: bool | None
) -> None:
    """Ask on a terminal before deleting many selectors; refuse elsewhere (``--yes`` skips)."""
    matching = [s.name for s in client.list_selectors(prefix=args.prefix, temporary=temporary)]
    what = "every selector" if args.everything else f"the selectors starting with '{args.prefix}'"
    if temporary:
        what = f"the temporary ones of {what}"
    if not matching:
        raise CommandError(f"nothing to delete: no selectors match ({what})")
    shown = ", ".join(matching[:3]) + (", ..." if len(matching) > 3 else "")
    question = f"delete {len(matching):,} selectors, {what} ({shown})?"
    stdin = console.input if console.input is not None else sys.stdin
    if not stdin.isatty():
        raise CommandError(f"{question} Not on a terminal: add --yes to delete them")
    console.err.write(f"{question} [y/N] ")
    console.err.flush()
    if stdin.readline().strip().lower() not in ("y", "yes"):
        raise CommandError("nothing deleted")


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
    "stream": run_stream,
    "source": run_source,
}


#: The subcommands ``add_commands`` adds (``siftstream.cli`` dispatches them to ``run``).
CLIENT_COMMANDS = frozenset(_COMMANDS)
