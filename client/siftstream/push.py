"""``sift push`` (and ``sift stream push``): a data file sent to a selector (or a stream) in
chunks, resumably.

Chunk i of a file carries an Idempotency-Key made of the selector's identity (its creation), i
and the chunk's content (``Piece.key``), and a small progress record (``PushRecord``, under
``SIFT_STATE_DIR``, default ``~/.local/state/sift/pushes``) notes the chunks acknowledged. Run
again after an interruption, or after correcting the file where a push stopped, it skips
exactly the chunks that are in without sending them; a chunk that was applied but whose answer
was lost is sent again and answered as a duplicate, never applied twice.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import scipy.sparse as sp

from siftstream import _inputs as inputs
from siftstream._api import new_key
from siftstream.clients import Client
from siftstream.console import CommandError, Console
from siftstream.errors import ProblemError, ServerError, SiftClientError, UnavailableError
from siftstream.files import DataFile, FileFormatError, open_data
from siftstream.progress import Progress, duration
from siftstream.render import count
from siftstream.results import Receipt

#: Rows per chunk ``sift push`` sends by default: about 8 MiB of values, and at most this many
#: rows, so that a progress bar moves on narrow files too.
MAX_DEFAULT_CHUNK_ROWS = 10_000


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
    send: Callable[[str], Receipt]

    def key(self, selector: str, unit: str, index: int) -> str:
        """The chunk's Idempotency-Key: the same for the same content at the same place of a
        push to the same selector, and for nothing else."""
        identity = f"{selector}\n{unit}\n{index}\n{self.digest}"
        return "push-" + hashlib.sha256(identity.encode()).hexdigest()[:40]


def content_digest(*parts: Any) -> str:
    """A digest of a chunk's content: its values (dense or CSR), labels or targets, and
    names."""
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


class Target(Protocol):
    """What a file is pushed to, as described (``SelectorInfo`` or ``StreamInfo``)."""

    @property
    def name(self) -> str: ...

    @property
    def created_at(self) -> float: ...

    @property
    def n_features(self) -> int | None: ...

    @property
    def n_samples(self) -> int | None: ...

    @property
    def views(self) -> dict[str, int] | None: ...

    @property
    def labelled(self) -> bool: ...

    @property
    def takes_targets(self) -> bool: ...

    @property
    def is_feature_stream(self) -> bool: ...


#: Sends one chunk under an Idempotency-Key: rows (with their labels or targets, as
#: ``push_chunk`` takes them, and the file's column names), or feature columns (with their
#: names).
SendRows = Callable[[Any, dict[str, Any], str, Any], Receipt]
SendColumns = Callable[[Any, Any, str], Receipt]


def run_push(args: argparse.Namespace, client: Client, console: Console) -> int:
    """``sift push``: a file to a selector."""
    info = client.describe(args.name)

    def rows(rows: Any, carried: dict[str, Any], key: str, names: Any) -> Receipt:
        return client.push_chunk(
            args.name, rows, **carried, idempotency_key=key, feature_names=names
        )

    def columns(columns: Any, names: Any, key: str) -> Receipt:
        return client.push_feature_chunk(args.name, columns, names, idempotency_key=key)

    return push_file(args, client.url, console, info, info.name, rows, columns)


def run_stream_push(args: argparse.Namespace, client: Client, console: Console) -> int:
    """``sift stream push``: a file to a stream, once for every selector attached to it."""
    info = client.describe_stream(args.name)

    def rows(rows: Any, carried: dict[str, Any], key: str, names: Any) -> Receipt:
        return client.push_stream_chunk(
            args.name, rows, **carried, idempotency_key=key, feature_names=names
        )

    def columns(columns: Any, names: Any, key: str) -> Receipt:
        return client.push_stream_columns(args.name, columns, names, idempotency_key=key)

    return push_file(args, client.url, console, info, f"stream:{info.name}", rows, columns)


def push_file(
    args: argparse.Namespace,
    url: str,
    console: Console,
    info: Target,
    identity: str,
    send_rows: SendRows,
    send_columns: SendColumns,
) -> int:
    """Push ``args.file`` to ``info`` (named ``identity`` in progress records) in chunks,
    resumably (the module says how)."""
    if info.views is not None:
        raise CommandError(
            f"{args.name} takes multi-view chunks: push its views with the Python client "
            "(Client.push(name, {view: rows}))"
        )
    if args.chunk_rows is not None and args.chunk_rows < 1:
        raise CommandError(f"--chunk-rows must be at least 1; got {args.chunk_rows}")
    # What the rows send beside them is settled before the file is read.
    side = None if info.is_feature_stream else _side(args, info)
    data = open_data(args.file, args.labels, args.target)
    if info.is_feature_stream:
        unit, total, pieces = _column_pieces(args, info, data, send_columns)
    else:
        unit, total, pieces = _row_pieces(args, info, data, side, send_rows)
    # The creation identifies it: a name deleted and created again is another one.
    selector = f"{identity}@{info.created_at!r}"
    record = None if args.no_resume else PushRecord.load(url, args.name, args.file, selector)
    done = set(record.done) if record is not None else set()
    fresh = new_key() if args.no_resume else ""
    progress = Progress(console.err, total, unit)
    last: Receipt | None = None
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
    except (UnavailableError, ServerError):
        progress.finish(_resume_hint(args, unit, progress, chunks + skipped, record is not None))
        raise
    except (FileFormatError, ProblemError):
        if progress.done:
            progress.finish(
                f"stopped: the first {progress.done:,} {unit} of {args.file} are in "
                f"{args.name} ({count(chunks + skipped, 'chunk')}); correct what follows and "
                "push again: the chunks that are in are skipped"
            )
        else:
            progress.finish(f"stopped: nothing of {args.file} was applied to {args.name}")
        raise
    except SiftClientError:  # the service stopped answering: what is in stays in
        progress.finish(_resume_hint(args, unit, progress, chunks + skipped, record is not None))
        raise
    if chunks == 0 and skipped:
        console.out.write(
            f"nothing to push: every chunk of {args.file} is in {args.name} already "
            f"({progress.skipped:,} {unit} in {count(skipped, 'chunk')}); --no-resume pushes "
            "it again as new data\n"
        )
        return 0
    progress.finish(
        _push_summary(args, unit, progress, chunks, skipped, duplicates, last), out=console.out
    )
    return 0


def _resume_hint(
    args: argparse.Namespace, unit: str, progress: Progress, chunks: int, resumable: bool
) -> str:
    """What a push the service stopped answering left, and how to go on."""
    kept = (
        f"the first {progress.done:,} {unit} of {args.file} are in {args.name} "
        f"({count(chunks, 'chunk')})"
        if progress.done
        else f"nothing of {args.file} was applied to {args.name}"
    )
    if not resumable:
        return f"stopped: {kept}; pushing again with --no-resume sends everything again"
    return (
        f"stopped: {kept}; run the same command again once the service answers: it resumes, "
        "skipping the chunks that are in"
    )


def _push_summary(
    args: argparse.Namespace,
    unit: str,
    progress: Progress,
    chunks: int,
    skipped: int,
    duplicates: int,
    last: Receipt | None,
) -> str:
    sent = progress.done - progress.skipped
    parts = [
        f"pushed {sent:,} {unit} in {count(chunks, 'chunk')} to {args.name} in "
        f"{duration(progress.elapsed)} ({progress.rate:,.0f} {unit}/s)"
    ]
    if skipped:
        parts.append(f"skipped {count(skipped, 'chunk')} ({progress.skipped:,} {unit}) sent before")
    if duplicates:
        parts.append(f"{count(duplicates, 'chunk')} already applied (answered as duplicates)")
    if last is not None and last.version is not None:
        parts.append(f"{args.name}: version {last.version}, {last.seen or 0:,} {unit} seen")
    for outcome in getattr(last, "selectors", ()):  # a stream's: each selector's
        if outcome.status == "applied":
            parts.append(f"{outcome.name}: version {outcome.version}, {outcome.seen:,} {unit} seen")
        else:
            parts.append(f"{outcome.name}: {outcome.status}")
    return "; ".join(parts)


def default_chunk_rows(width: int) -> int:
    """About 8 MiB of float64 values per chunk, at most ``MAX_DEFAULT_CHUNK_ROWS`` rows."""
    return max(1, min(MAX_DEFAULT_CHUNK_ROWS, inputs.DEFAULT_CHUNK_BYTES // (8 * max(width, 1))))


def _row_pieces(
    args: argparse.Namespace,
    info: Target,
    data: DataFile,
    side: inputs.Side | None,
    send_rows: SendRows,
) -> tuple[str, int, Iterator[Piece]]:
    if data.feature_names is None and data.n_features != info.n_features:
        raise CommandError(
            f"{args.file} has {data.n_features} feature columns; {args.name} takes "
            f"{info.n_features}"
            + (
                " (is --labels or --target missing?)"
                if data.n_features == (info.n_features or 0) + 1
                else ""
            )
        )
    chunk = args.chunk_rows or default_chunk_rows(data.n_features)
    # The file's column names go with every chunk: the service puts each column on the feature
    # of its name, or refuses the first chunk (nothing applied) when the names are not its own.
    names = data.feature_names

    def pieces() -> Iterator[Piece]:
        for block in data.blocks(chunk):
            values = block.values if side is not None else None
            carried = {} if side is None else {side.key: values}

            def send(key: str, rows: Any = block.rows, carried: Any = carried) -> Receipt:
                return send_rows(rows, carried, key, names)

            digest = content_digest(block.rows, values, names)
            yield Piece(int(block.rows.shape[0]), digest, send)

    return "rows", data.n_rows, pieces()


def _side(args: argparse.Namespace, info: Target) -> inputs.Side | None:
    """What the file's rows send beside them: the labels column for a labelled selector, the
    target column for one of rows with a target, nothing for the others (the column, named,
    is never a feature: methods without classes or a target do not take it)."""
    if info.labelled:
        if args.target is not None:
            raise CommandError(
                f"{args.name} takes labelled rows (class labels), not a target: name the labels "
                "column with --labels"
            )
        if args.labels is None:
            raise CommandError(
                f"{args.name} takes labelled rows: name the labels column with --labels"
            )
        return inputs.LABELS
    if info.takes_targets:
        if args.labels is not None:
            raise CommandError(
                f"{args.name} takes rows with a target (a number per row), not labels: name the "
                "target column with --target"
            )
        if args.target is None:
            raise CommandError(
                f"{args.name} takes rows with a target: name the target column with --target"
            )
        return inputs.TARGETS
    return None


def _column_pieces(
    args: argparse.Namespace, info: Target, data: DataFile, send_columns: SendColumns
) -> tuple[str, int, Iterator[Piece]]:
    if args.labels is not None or args.target is not None:
        raise CommandError(f"{args.name} takes feature columns, which carry no labels or target")
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

            def send(key: str, columns: Any = columns, chunk_names: Any = chunk_names) -> Receipt:
                return send_columns(columns, chunk_names, key)

            digest = content_digest(columns, chunk_names)
            yield Piece(int(columns.shape[1]), digest, send)

    return "columns", int(matrix.shape[1]), pieces()
