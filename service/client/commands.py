"""The client commands of ``sift``: create, push, top, watch, ls, describe, delete, export,
import (``sift serve`` is in ``service.client.cli``).

Every command talks to the service at ``--url`` (or ``SIFT_URL``, default
``http://127.0.0.1:8000``) with ``--api-key`` (or ``SIFT_API_KEY``), through ``Client``: transport
errors and 503s are retried within ``--retry-budget`` seconds. A refusal prints the service's
problem detail and exits with status 1.

``sift push`` is resumable. Chunk i of a file carries an Idempotency-Key made of the selector's
identity (its creation), i and the chunk's content (``Piece.key``), and a small progress record
(under ``SIFT_STATE_DIR``, default ``~/.local/state/sift/pushes``) notes the chunks
acknowledged. Run again after an interruption, or after correcting the file where a push
stopped, it skips exactly the chunks that are in without sending them; a chunk that was applied
but whose answer was lost is sent again and answered as a duplicate, never applied twice.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import scipy.sparse as sp

from service.client import _inputs as inputs
from service.client._api import new_key
from service.client._http import RetryPolicy
from service.client.clients import DEFAULT_URL, Client
from service.client.errors import ProblemError, SiftClientError
from service.client.files import DataFile, FileFormatError, open_data
from service.client.progress import Progress, duration
from service.client.results import (
    ChunkReceipt,
    FeaturesReceipt,
    SelectorInfo,
    Top,
)

#: Rows per chunk ``sift push`` sends by default: about 8 MiB of values, and at most this many
#: rows, so that a progress bar moves on narrow files too.
MAX_DEFAULT_CHUNK_ROWS = 10_000
#: Seconds between two refreshes of ``sift watch``.
DEFAULT_INTERVAL = 2.0


class CommandError(Exception):
    """A command that cannot do what was asked (the message says why); exit status 1."""


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
        "feature names of a data file).",
    )
    create.add_argument("name")
    create.add_argument(
        "--method", required=True, help="fsds, variance, ocfs, ... (sift methods lists them)"
    )
    shape = create.add_mutually_exclusive_group(required=True)
    shape.add_argument("--n-features", type=int, metavar="M")
    shape.add_argument("--n-samples", type=int, metavar="N")
    shape.add_argument("--views", metavar="VIEW=M,...", help="e.g. text=35719,image=996")
    shape.add_argument(
        "--like", metavar="FILE", help="n_features and feature names from a data file's header"
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


@dataclass
class Console:
    out: TextIO
    err: TextIO


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
    shape: dict[str, Any] = {}
    if args.like:
        data = open_data(args.like, args.labels)
        shape.update(n_features=data.n_features, feature_names=data.feature_names)
    elif args.views:
        shape["views"] = dict(_view(text) for text in args.views.split(","))
    else:
        shape.update(n_features=args.n_features, n_samples=args.n_samples)
    info = client.create(args.name, args.method, params=params or None, **shape)
    if args.json:
        _print_json(console.out, info.raw)
        return 0
    resolved = ", ".join(f"{key}={json.dumps(value)}" for key, value in info.params.items())
    console.out.write(
        f"created {info.name}: {info.method}, {_size(info)}"
        + (f"; {resolved}" if resolved else "")
        + "\n"
    )
    return 0


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


def _size(info: SelectorInfo) -> str:
    if info.is_feature_stream:
        return f"{info.n_samples} samples, {info.n_features} features so far"
    if info.views is not None:
        return ", ".join(f"{view} {width}" for view, width in info.views.items()) + " features"
    return f"{info.n_features} features"


# -- push -----------------------------------------------------------------------------------


def state_dir() -> Path:
    """Where ``sift push`` keeps its progress records."""
    configured = os.environ.get("SIFT_STATE_DIR")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(base) / "sift" / "pushes"


@dataclass
class PushRecord:
    """What a push of one file to one selector got acknowledged so far (a JSON file): the
    Idempotency-Keys of the chunks the service acknowledged.

    A chunk's key is a digest of the selector it goes to (its creation: a name deleted and
    created again is another selector), its position and its content (``Piece.key``). So a
    push resumed after an interruption skips exactly the chunks acknowledged, and one resumed
    after the file was corrected (a bad value at row 150,001, say) skips exactly the chunks
    that did not change: none is applied twice, whatever happened between the two runs.
    """

    url: str
    name: str
    file: str
    selector: str
    done: list[str] = field(default_factory=list)

    @staticmethod
    def path_for(url: str, name: str, file: str, selector: str) -> Path:
        where = f"{url}\n{name}\n{Path(file).resolve()}\n{selector}"
        return state_dir() / f"{hashlib.sha256(where.encode()).hexdigest()[:32]}.json"

    @classmethod
    def load(cls, url: str, name: str, file: str, selector: str) -> PushRecord:
        path = cls.path_for(url, name, file, selector)
        try:
            return cls(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            return cls(url, name, file, selector)

    def save(self) -> None:
        path = self.path_for(self.url, self.name, self.file, self.selector)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(asdict(self)))
        os.replace(temporary, path)  # a killed push leaves the old record or the new, whole


@dataclass(frozen=True)
class Piece:
    """One chunk of a push: how many items, a digest of its content, and how to send it under
    an Idempotency-Key."""

    items: int
    digest: str
    send: Callable[[str], ChunkReceipt | FeaturesReceipt]

    def key(self, selector: str, unit: str, index: int) -> str:
        """The chunk's Idempotency-Key: the same for the same content at the same place of a
        push to the same selector, and for nothing else."""
        identity = f"{selector}\n{unit}\n{index}\n{self.digest}"
        return "push-" + hashlib.sha256(identity.encode()).hexdigest()[:40]


def content_digest(*parts: Any) -> str:
    """A digest of a chunk's content: its values (dense or CSR), labels and names."""
    hasher = hashlib.sha256()
    for part in parts:
        if isinstance(part, np.ndarray):
            hasher.update(repr((part.dtype.str, part.shape)).encode())
            hasher.update(np.ascontiguousarray(part).tobytes())
        elif sp.issparse(part):
            csr = sp.csr_matrix(part)
            for array in (csr.indptr, csr.indices, csr.data):
                hasher.update(np.ascontiguousarray(array).tobytes())
            hasher.update(repr(csr.shape).encode())
        else:
            hasher.update(json.dumps(part).encode())
        hasher.update(b"\0")
    return hasher.hexdigest()


def _push(args: argparse.Namespace, client: Client, console: Console) -> int:
    data = open_data(args.file, args.labels)
    info = client.describe(args.name)
    if info.views is not None:
        raise CommandError(
            f"{args.name} is a multi-view selector: push its views with the Python client "
            "(Client.push(name, {view: rows}))"
        )
    if args.chunk_rows is not None and args.chunk_rows < 1:
        raise CommandError(f"--chunk-rows must be at least 1; got {args.chunk_rows}")
    if info.is_feature_stream:
        unit, total, pieces = _column_pieces(args, client, info, data)
    else:
        unit, total, pieces = _row_pieces(args, client, info, data)
    # The selector's creation identifies it: a name deleted and created again is another one.
    selector = f"{info.name}@{info.created_at!r}"
    record = None if args.no_resume else PushRecord.load(client.url, args.name, args.file, selector)
    done = set(record.done) if record is not None else set()
    fresh = new_key() if args.no_resume else ""
    progress = Progress(console.err, total, unit)
    last: ChunkReceipt | FeaturesReceipt | None = None
    chunks = duplicates = skipped = 0
    try:
        for index, piece in enumerate(pieces):
            key = piece.key(selector + fresh, unit, index)
            if key in done:
                progress.skip(piece.items)
                skipped += 1
                continue
            last = piece.send(key)
            chunks += 1
            duplicates += last.duplicate
            progress.advance(piece.items)
            if record is not None:
                record.done.append(key)
                record.save()
    except KeyboardInterrupt:
        progress.finish(
            f"interrupted after {progress.done:,} {unit}; run the same command again to resume"
        )
        return 130
    except (FileFormatError, ProblemError):
        if progress.done:
            progress.finish(
                f"stopped: the first {progress.done:,} {unit} of {args.file} are in "
                f"{args.name} ({_count(chunks + skipped, 'chunk')}); correct what follows and "
                "push again: the chunks that are in are skipped"
            )
        else:
            progress.finish(f"stopped: nothing of {args.file} was applied to {args.name}")
        raise
    if chunks == 0 and skipped:
        console.out.write(
            f"nothing to push: every chunk of {args.file} is in {args.name} already "
            f"({progress.skipped:,} {unit} in {_count(skipped, 'chunk')}); --no-resume pushes "
            "it again as new data\n"
        )
        return 0
    progress.finish(_push_summary(args, unit, progress, chunks, skipped, duplicates, last))
    return 0


def _push_summary(
    args: argparse.Namespace,
    unit: str,
    progress: Progress,
    chunks: int,
    skipped: int,
    duplicates: int,
    last: ChunkReceipt | FeaturesReceipt | None,
) -> str:
    sent = progress.done - progress.skipped
    parts = [
        f"pushed {sent:,} {unit} in {_count(chunks, 'chunk')} to {args.name} in "
        f"{duration(progress.elapsed)} ({progress.rate:,.0f} {unit}/s)"
    ]
    if skipped:
        parts.append(
            f"skipped {_count(skipped, 'chunk')} ({progress.skipped:,} {unit}) sent before"
        )
    if duplicates:
        parts.append(f"{_count(duplicates, 'chunk')} already applied (answered as duplicates)")
    if last is not None and last.version is not None:
        parts.append(f"{args.name}: version {last.version}, {last.seen or 0:,} {unit} seen")
    return "; ".join(parts)


def _count(n: int, thing: str) -> str:
    return f"{n:,} {thing}" + ("" if n == 1 else "s")


def default_chunk_rows(width: int) -> int:
    """About 8 MiB of float64 values per chunk, at most ``MAX_DEFAULT_CHUNK_ROWS`` rows."""
    return max(1, min(MAX_DEFAULT_CHUNK_ROWS, inputs.DEFAULT_CHUNK_BYTES // (8 * max(width, 1))))


def _row_pieces(
    args: argparse.Namespace, client: Client, info: SelectorInfo, data: DataFile
) -> tuple[str, int, Iterator[Piece]]:
    if data.feature_names is None and data.n_features != info.n_features:
        raise CommandError(
            f"{args.file} has {data.n_features} feature columns; {args.name} takes "
            f"{info.n_features}"
            + (" (is --labels missing?)" if data.n_features == info.n_features + 1 else "")
        )
    if info.labelled and args.labels is None:
        raise CommandError(
            f"{args.name} ({info.method}) learns from labelled rows: name the labels column "
            "with --labels"
        )
    chunk = args.chunk_rows or default_chunk_rows(data.n_features)
    # The labels column is never a feature; methods without classes do not take the labels.
    labelled = info.labelled
    # The file's column names go with every chunk: the service puts each column on the feature
    # of its name, or refuses the first chunk (nothing applied) when the names are not its own.
    names = data.feature_names

    def pieces() -> Iterator[Piece]:
        for block in data.blocks(chunk):
            labels = block.labels if labelled else None

            def send(key: str, rows: Any = block.rows, labels: Any = labels) -> ChunkReceipt:
                return client.push_chunk(
                    args.name, rows, labels, idempotency_key=key, feature_names=names
                )

            digest = content_digest(block.rows, labels, names)
            yield Piece(int(block.rows.shape[0]), digest, send)

    return "rows", data.n_rows, pieces()


def _column_pieces(
    args: argparse.Namespace, client: Client, info: SelectorInfo, data: DataFile
) -> tuple[str, int, Iterator[Piece]]:
    if args.labels is not None:
        raise CommandError(f"{args.name} takes feature columns, which carry no labels")
    whole = data.read_all().rows
    matrix = whole.toarray() if not isinstance(whole, np.ndarray) else whole
    if matrix.shape[0] != info.n_samples:
        raise CommandError(
            f"{args.name} takes feature columns of {info.n_samples} samples (the file's rows); "
            f"{args.file} has {matrix.shape[0]} rows"
        )
    names = data.feature_names
    chunk = args.chunk_rows or inputs.columns_per_chunk(matrix.shape[0], names is not None)

    def pieces() -> Iterator[Piece]:
        for part in inputs.row_slices(int(matrix.shape[1]), chunk):
            columns = matrix[:, part]
            chunk_names = None if names is None else names[part]

            def send(
                key: str, columns: Any = columns, chunk_names: Any = chunk_names
            ) -> FeaturesReceipt:
                return client.push_feature_chunk(
                    args.name, columns, chunk_names, idempotency_key=key
                )

            digest = content_digest(columns, chunk_names)
            yield Piece(int(columns.shape[1]), digest, send)

    return "columns", int(matrix.shape[1]), pieces()


# -- reading --------------------------------------------------------------------------------


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: set[int]) -> str:
    """Rows under headers in aligned columns (those in ``right`` aligned right)."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        aligned = [
            cell.rjust(width) if column in right else cell.ljust(width)
            for column, (cell, width) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(aligned).rstrip()

    return "\n".join([line(headers), *(line(row) for row in rows)])


def top_table(top: Top) -> str:
    seen = (
        f"{top.rows_seen:,} rows seen"
        if top.rows_seen is not None
        else f"{top.features_seen or 0:,} features seen"
    )
    title = f"{top.name}  {top.method}  version {top.version}  {seen}"
    if top.version == 0:  # a ranking of zeros would mean nothing
        where = "features" if top.features_seen is not None else "chunks"
        return f"{title}\nno data yet: push to {top.name} (POST /v1/selectors/{top.name}/{where})"
    if top.strategy:
        title += f"  ({top.strategy})"
    multi_view = any(f.view is not None for f in top.features)
    headers = ["rank", *(["view"] if multi_view else []), "index", "name", "score"]
    rows = [
        [
            str(f.rank),
            *([f.view or ""] if multi_view else []),
            str(f.index),
            f.name,
            f"{f.score:.6g}",
        ]
        for f in top.features
    ]
    first_numbers = {0, len(headers) - 1, len(headers) - 3}
    return title + "\n" + table(headers, rows, first_numbers)


def _fetch_top(args: argparse.Namespace, client: Client) -> Top:
    return client.top(args.name, args.h, strategy=args.strategy, l=args.l, view=args.view)


def _top(args: argparse.Namespace, client: Client, console: Console) -> int:
    top = _fetch_top(args, client)
    if args.json:
        _print_json(console.out, top.raw)
    else:
        console.out.write(top_table(top) + "\n")
    return 0


def _methods(args: argparse.Namespace, client: Client, console: Console) -> int:
    methods = client.methods()
    if args.json:
        _print_json(console.out, [method.raw for method in methods])
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
    live = console.out.isatty()
    shown = 0
    previous: tuple[float, int] | None = None
    try:
        while args.count is None or shown < args.count:
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
            screen = f"{top_table(top)}\n\nat {stamp}{rate}, every {args.interval:g} s"
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


def _ls(args: argparse.Namespace, client: Client, console: Console) -> int:
    selectors = client.list_selectors()
    if args.json:
        _print_json(console.out, [s.raw for s in selectors])
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
    _print_json(console.out, client.describe(args.name).raw)
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
        f"imported {info.name}: {info.method}, {_size(info)}, version {info.version}, "
        f"{info.seen:,} {unit} seen\n"
    )
    return 0


def _print_json(out: TextIO, document: Any) -> None:
    out.write(json.dumps(document, indent=2) + "\n")


_COMMANDS: dict[str, Callable[[argparse.Namespace, Client, Console], int]] = {
    "create": _create,
    "push": _push,
    "top": _top,
    "methods": _methods,
    "watch": _watch,
    "ls": _ls,
    "describe": _describe,
    "delete": _delete,
    "export": _export,
    "import": _import,
}
#: The subcommands ``add_commands`` adds (``service.client.cli`` dispatches them to ``run``).
CLIENT_COMMANDS = frozenset(_COMMANDS)
