"""The parser of the client commands (``add_commands``) and their shared options."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from siftstream._connection import DEFAULT_URL, KEY_VARIABLES
from siftstream._http import DEFAULT_RETRY_BUDGET
from siftstream.console import CommandError
from siftstream.files import open_data

#: Seconds between two refreshes of ``sift watch``.
DEFAULT_INTERVAL = 2.0


def connection_options(suppress: bool) -> argparse.ArgumentParser:
    """``--url``, ``--api-key`` and ``--retry-budget``: before the command (``sift --url U ls``)
    and after it (``sift ls --url U``); given after, they win."""
    parent = argparse.ArgumentParser(add_help=False)
    default = argparse.SUPPRESS if suppress else None
    parent.add_argument(
        "--url", default=default, help=f"The service (default $SIFT_URL, else {DEFAULT_URL})."
    )
    parent.add_argument(
        "--api-key",
        default=default,
        help=f"API key (default ${KEY_VARIABLES[0]}, else ${KEY_VARIABLES[1]}, the service's "
        "admin token; none if both are unset).",
    )
    parent.add_argument(
        "--retry-budget",
        type=float,
        default=argparse.SUPPRESS if suppress else DEFAULT_RETRY_BUDGET,
        metavar="SECONDS",
        help="How long to keep retrying a request while the service is unreachable or "
        f"answers 503 (default {DEFAULT_RETRY_BUDGET:g}).",
    )
    return parent


def add_commands(commands: Any) -> None:
    """The client subcommands, on the ``sift`` parser's subparsers."""
    common = [connection_options(suppress=True)]
    for add in (
        _add_create_command,
        _add_push_command,
        _add_ranking_commands,
        _add_alert_commands,
        _add_listing_commands,
        _add_lifecycle_commands,
        _add_stream_commands,
        _add_source_commands,
    ):
        add(commands, common)


def _json_option(parser: Any, help: str = "Print the service's JSON answer.") -> None:
    parser.add_argument("--json", action="store_true", help=help)


def _add_create_command(commands: Any, common: list[argparse.ArgumentParser]) -> None:
    """``sift create``."""
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
    carried = create.add_mutually_exclusive_group()
    carried.add_argument(
        "--labels", metavar="COLUMN", help="with --like: the labels column (not a feature)"
    )
    carried.add_argument(
        "--target", metavar="COLUMN", help="with --like: the target column (not a feature)"
    )
    create.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="A hyperparameter (repeatable); VALUE is read as JSON when it parses (10, 0.5, "
        "false), else as a string.",
    )
    _json_option(create)


def _add_push_command(commands: Any, common: list[argparse.ArgumentParser]) -> None:
    """``sift push``."""
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
    carried = push.add_mutually_exclusive_group()
    carried.add_argument(
        "--labels",
        metavar="COLUMN",
        help="The column (.npz: array) of labels: never a feature; sent to labelled methods.",
    )
    carried.add_argument(
        "--target",
        metavar="COLUMN",
        help="The column (.npz: array) of a numeric target: never a feature; sent to methods "
        "of rows with a target (f_regression, correlation).",
    )
    push.add_argument(
        "--no-resume",
        action="store_true",
        help="Push as new data: fresh Idempotency-Keys and no progress record.",
    )


def _add_ranking_commands(commands: Any, common: list[argparse.ArgumentParser]) -> None:
    """``sift top|watch|drift|baseline``."""
    top = _counted(commands, "top", common, "Print a selector's top features.", default_h=20)
    _ranking_options(top)
    _significance_options(top)
    _json_option(top)

    watch = _counted(commands, "watch", common, "Show a selector's top features, refreshed live.")
    _ranking_options(watch)
    watch.add_argument(
        "--interval", type=float, default=DEFAULT_INTERVAL, metavar="SECONDS", help="(default 2)"
    )
    watch.add_argument(
        "--count", type=int, metavar="N", help="Stop after N refreshes (default: until Ctrl-C)."
    )
    watch.add_argument(
        "--once", action="store_true", help="Show it once and exit (scripts, tests)."
    )

    drift = _counted(
        commands,
        "drift",
        common,
        "How far a selector's top h moved since the previous version and the baseline.",
    )
    _json_option(drift)

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


def _add_alert_commands(commands: Any, common: list[argparse.ArgumentParser]) -> None:
    """``sift alerts ls|add|rotate|rearm|redeliver|rm|events``."""
    alerts = commands.add_parser(
        "alerts",
        parents=common,
        help="A selector's alerts: list, add, rotate, rearm, rm, events, redeliver.",
    )
    actions = alerts.add_subparsers(dest="action", required=True, metavar="ACTION")
    listed = actions.add_parser("ls", parents=common, help="List a selector's alerts.")
    listed.add_argument("name")
    _json_option(listed, "Print JSON, one list.")
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
    top_count(
        added,
        default=None,
        what="The top h",
        default_text="10, or the selector's features less one if fewer",
    )
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
    _json_option(events, "Print JSON, one list.")


def _add_listing_commands(commands: Any, common: list[argparse.ArgumentParser]) -> None:
    """``sift methods|ls|describe``."""
    methods = commands.add_parser(
        "methods",
        parents=common,
        help="List the methods the service runs: chunks, capabilities, parameters, papers.",
    )
    _json_option(methods)

    listing = commands.add_parser(
        "ls",
        parents=common,
        help="List the selectors (temporary ones, a job's such as a scikit-learn fit's, are "
        "marked).",
    )
    _json_option(listing, "Print JSON, one list.")
    listing.add_argument("--prefix", help="Only the names that start with this.")
    listing.add_argument(
        "--search", metavar="TEXT", help="Only the names that contain this (ignoring case)."
    )
    listing.add_argument("--method", help="Only the selectors of this method.")
    _temporary_options(listing, "only the temporary selectors", "leave the temporary ones out")

    describe = commands.add_parser(
        "describe", parents=common, help="Describe a selector (JSON: state, classes, pending)."
    )
    describe.add_argument("name")


def _add_lifecycle_commands(commands: Any, common: list[argparse.ArgumentParser]) -> None:
    """``sift delete|export|import``."""
    delete = commands.add_parser(
        "delete",
        parents=common,
        help="Delete a selector, or every selector whose name starts with a prefix.",
        description="sift delete NAME deletes one selector; sift delete --prefix PREFIX every "
        "one whose name starts with PREFIX (--all: every one the API key may see), in batches "
        "on the service, after asking on a terminal (--yes: without asking; required when not "
        "on a terminal).",
    )
    delete.add_argument("name", nargs="?")
    delete.add_argument("--prefix", help="Delete every selector whose name starts with this.")
    delete.add_argument(
        "--all",
        dest="everything",
        action="store_true",
        help="Delete every selector the API key may see.",
    )
    delete.add_argument(
        "--temporary",
        action="store_true",
        help="With --prefix or --all: only the temporary selectors.",
    )
    delete.add_argument("-y", "--yes", action="store_true", help="Do not ask.")

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


def _temporary_options(parser: Any, only: str, without: str) -> None:
    """``--temporary`` (only them) and ``--no-temporary`` (without them)."""
    marked = parser.add_mutually_exclusive_group()
    marked.add_argument(
        "--temporary", dest="temporary", action="store_const", const=True, help=only
    )
    marked.add_argument(
        "--no-temporary", dest="temporary", action="store_const", const=False, help=without
    )


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
        "each, which feed labelled methods (ocfs, ioc) and row methods (fsds, variance) alike; "
        "--targets (or --like with --target): rows with a numeric target each, which feed "
        "f_regression, correlation and the row methods.",
    )
    create.add_argument("name")
    shape = create.add_mutually_exclusive_group(required=True)
    _shape_options(shape)
    column = create.add_mutually_exclusive_group()
    column.add_argument(
        "--labels", metavar="COLUMN", help="with --like: the labels column (makes it labelled)"
    )
    column.add_argument(
        "--target",
        metavar="COLUMN",
        help="with --like: the target column (makes its rows carry targets)",
    )
    carried = create.add_mutually_exclusive_group()
    carried.add_argument("--labelled", action="store_true", help="Rows carry one label each.")
    carried.add_argument(
        "--targets", action="store_true", help="Rows carry one numeric target each."
    )
    _json_option(create)

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
    carried = push.add_mutually_exclusive_group()
    carried.add_argument("--labels", metavar="COLUMN", help="The labels column (labelled streams).")
    carried.add_argument(
        "--target", metavar="COLUMN", help="The target column (streams of rows with a target)."
    )
    push.add_argument("--no-resume", action="store_true", help="Push as new data.")

    top = _counted(
        actions,
        "top",
        common,
        "Print every attached selector's top features side by side, and their agreement.",
    )
    _json_option(top)

    listing = actions.add_parser("ls", parents=common, help="List the streams.")
    _json_option(listing, "Print JSON, one list.")

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
    """``sift source create|ls|show|restart|rm``."""
    source = commands.add_parser(
        "source",
        parents=common,
        help="Sources: the service reads a Redis stream, a JetStream stream or a Kafka topic "
        "into a selector.",
        description="A source is a bus the service reads by itself: a Redis stream (one field "
        "per feature name in each entry), a NATS JetStream stream or a Kafka topic (each "
        "message a JSON object keyed by feature name), appended to a selector (or a stream) "
        "exactly once. "
        "Entries that cannot be rows are set aside with their position and reason "
        "(sift source show).",
    )
    actions = source.add_subparsers(dest="source_command", required=True)
    _add_source_create(actions, common)
    listing = actions.add_parser("ls", parents=common, help="List the sources.")
    _json_option(listing, "Print JSON, one list.")

    show = actions.add_parser(
        "show",
        parents=common,
        help="Show a source: state, last error, positions, lag, rows, rejected entries.",
    )
    show.add_argument("name")
    _json_option(show)

    restart = actions.add_parser(
        "restart",
        parents=common,
        help="Restart a source stopped at a reset of its bus.",
        description="Restart a source whose state is reset (its stream or topic was created "
        "again below its position): each partition it stopped reads again from --start.",
    )
    restart.add_argument("name")
    restart.add_argument(
        "--start",
        default="earliest",
        metavar="POSITION",
        help="earliest (the default: the bus's first entry), latest, or after this position.",
    )
    _json_option(restart)

    remove = actions.add_parser(
        "rm",
        parents=common,
        help="Delete a source.",
        description="Delete a source: its consumer stops within a second; what it appended "
        "stays in its target.",
    )
    remove.add_argument("name")


def _add_source_create(actions: Any, common: list[argparse.ArgumentParser]) -> None:
    """``sift source create``."""
    create = actions.add_parser(
        "create",
        parents=common,
        help="Create a source.",
        description="Create a source reading the bus at URL into a selector (--into-selector) "
        "or a stream (--into-stream). --kind redis-stream reads the Redis stream --key; "
        "--kind nats reads the JetStream stream --stream (only the messages on --subject, if "
        "given); --kind kafka reads the topic --topic of the brokers URL (host:port, "
        "comma-separated). Credentials are kept by the service and never shown.",
    )
    create.add_argument("name")
    create.add_argument(
        "bus",
        metavar="URL",
        help="The bus: redis://, rediss:// or unix:// (redis-stream), nats:// or tls:// (nats), "
        "host:port[,host:port...] (kafka). "
        "(--url is the Sift service, as for every command.)",
    )
    create.add_argument(
        "--kind",
        required=True,
        choices=["redis-stream", "nats", "kafka"],
        help="redis-stream: a Redis stream (--key); nats: a JetStream stream (--stream); kafka: "
        "a Kafka topic (--topic).",
    )
    into = create.add_mutually_exclusive_group(required=True)
    into.add_argument("--into-selector", metavar="SELECTOR", help="Append to this selector.")
    into.add_argument(
        "--into-stream",
        metavar="STREAM",
        help="Append to this Sift stream (every selector attached to it applies the rows).",
    )
    _source_read_options(create)
    _json_option(create)


def _source_read_options(create: Any) -> None:
    """``sift source create``'s options on what to read and how."""
    create.add_argument("--key", help="redis-stream: the Redis stream's key.")
    create.add_argument(
        "--value-field",
        metavar="FIELD",
        help="redis-stream: the one field of each entry holding its message (JSON, or "
        "--format's), as `XADD key * data '{...}'` writes it; without it, one field per "
        "feature name.",
    )
    create.add_argument("--stream", metavar="JS_STREAM", help="nats: the JetStream stream.")
    create.add_argument(
        "--subject", help="nats: only the stream's messages on this subject (wildcards allowed)."
    )
    create.add_argument("--topic", help="kafka: the topic.")
    create.add_argument(
        "--group", help="kafka: the consumer group whose offsets follow Sift's (sift-NAME)."
    )
    create.add_argument("--username", help="kafka: the SASL user.")
    create.add_argument(
        "--password-stdin",
        action="store_true",
        default=None,
        help="kafka: read the SASL password from the first line of standard input.",
    )
    create.add_argument(
        "--mechanism",
        choices=["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"],
        help="kafka: the SASL mechanism (default PLAIN).",
    )
    create.add_argument("--tls", action="store_true", default=None, help="kafka: connect over TLS.")
    create.add_argument(
        "--batch-rows", type=int, metavar="N", help="Most rows per chunk appended (default 2000)."
    )
    create.add_argument(
        "--batch-bytes",
        type=int,
        metavar="BYTES",
        help="Most bytes of entries per batch read (default 8388608, 8 MiB; 65536 to 67108864).",
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
        "position (a Redis entry id, a JetStream sequence, a Kafka offset).",
    )
    create.add_argument(
        "--label-field",
        metavar="FIELD",
        help="The field holding each entry's label (labelled selectors and streams).",
    )
    create.add_argument(
        "--target-field",
        metavar="FIELD",
        help="The field holding each entry's numeric target (selectors and streams of rows "
        "with a target).",
    )
    create.add_argument(
        "--format",
        choices=["json", "msgpack"],
        help="What each message is written in (default json; a Redis stream's --value-field).",
    )
    create.add_argument(
        "--on-reset",
        choices=["stop", "restart"],
        help="When the bus is reset (a stream or topic created again below the position): "
        "stop (the default; sift source restart reads again) or restart (read the new one "
        "from its start).",
    )


class TopCount(argparse.Action):
    """``-h N`` (or ``-n N``): how many features, as the API's ``h``. Given without a number
    (``sift top NAME -h``) it shows the command's help, as ``-h`` does elsewhere."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs="?", metavar="N", **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        text = "" if values is None else str(values).strip()
        if not text.lstrip("-").isdigit():
            parser.print_help()
            parser.exit()
        setattr(namespace, self.dest, int(text))


def top_count(
    parser: argparse.ArgumentParser,
    default: int | None,
    what: str = "How many",
    default_text: str | None = None,
) -> None:
    shown = default_text if default_text is not None else default
    parser.add_argument(
        "-h", "-n", action=TopCount, default=default, dest="h", help=f"{what} (default {shown})."
    )


def _counted(
    commands: Any,
    command: str,
    common: list[argparse.ArgumentParser],
    help: str,
    default_h: int = 10,
) -> argparse.ArgumentParser:
    """A command on a selector (or a stream) NAME whose -h is the number of features, as the
    API's h: its help is --help only."""
    parser: argparse.ArgumentParser = commands.add_parser(
        command, parents=common, add_help=False, help=help
    )
    parser.add_argument("--help", action="help", help="Show this help and exit.")
    parser.add_argument("name")
    top_count(parser, default=default_h)
    return parser


def _ranking_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--strategy", choices=["score", "diverse"], help="fsds: diverse = IQRP")
    parser.add_argument("--l", type=int, metavar="L", help="IQRP's candidate list length.")
    parser.add_argument("--view", help="Multi-view selectors: this view only.")


def _significance_options(parser: argparse.ArgumentParser) -> None:
    """``--alpha`` and ``--correction``: a selection by p-value, as the API's."""
    parser.add_argument(
        "--alpha",
        type=float,
        metavar="A",
        help="Methods with p-values (anova, chi2): only the features a test at level A "
        "(0 < A <= 1) selects, the h best of them by score.",
    )
    parser.add_argument(
        "--correction",
        choices=["none", "fdr", "fwe"],
        help="With --alpha: how A selects, as scikit-learn's SelectFpr (none, the default: "
        "p < A), SelectFdr (fdr: Benjamini-Hochberg) or SelectFwe (fwe: p < A / n_features).",
    )


def shape_of(args: argparse.Namespace) -> dict[str, Any]:
    """The shape options of ``create`` (and ``stream create``) as creation fields."""
    if args.like:
        data = open_data(args.like, args.labels, args.target)
        return {"n_features": data.n_features, "feature_names": data.feature_names}
    if args.views:
        return {"views": dict(parse_view(text) for text in args.views.split(","))}
    return {"n_features": args.n_features, "n_samples": args.n_samples}


def parse_param(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise CommandError(f"--param expects KEY=VALUE; got {text!r}")
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value


def parse_view(text: str) -> tuple[str, int]:
    view, sep, width = text.partition("=")
    if not sep or not width.strip().isdigit():
        raise CommandError(f"--views expects VIEW=FEATURES,...; got {text!r}")
    return view.strip(), int(width)
