"""Class labels of labelled row streams (OCFS, IOC): chunks that carry them, classes as found.

A label is an integer or a string, taken as sent: ``1`` and ``"1"`` are different classes.
Classes get their index in the order the stream first shows them (log order, then row order
within a chunk), so a selector's class list and every per-class array line up whatever the
chunking. The list is kept in the state as a JSON string (``classes``), next to the per-class
arrays the method needs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from service.algorithms.base import Matrix, State
from service.errors import Inconsistent

#: A class label as a user sends it.
Label = int | str
#: The state field holding the classes seen, in order of discovery (a JSON list).
CLASSES_FIELD = "classes"
#: The state field holding the number of samples of every class (int64, one per class).
COUNTS_FIELD = "class_counts"


@dataclass(frozen=True)
class LabelledRows:
    """A chunk of rows with one class label each.

    ``classes`` are the chunk's distinct labels in order of first appearance and ``codes`` the
    index into ``classes`` of every row. ``multiplicity`` (optional) says how many samples a
    row stands for: a merge sends one row per class holding the class *sum*, with the class
    count as its multiplicity, and a method that keeps only counts and sums (OCFS) folds it in
    exactly as it would the samples themselves.
    """

    rows: Matrix
    classes: tuple[Label, ...]
    codes: np.ndarray
    multiplicity: np.ndarray | None = None

    @property
    def n_rows(self) -> int:
        return int(self.rows.shape[0])

    @property
    def samples(self) -> int:
        """The samples this chunk stands for (rows, or the sum of the multiplicities)."""
        return self.n_rows if self.multiplicity is None else int(self.multiplicity.sum())

    def take(self, positions: np.ndarray) -> LabelledRows:
        """The rows at ``positions`` (in that order), their classes again in order of first
        appearance among them."""
        classes, codes = self.labels_of(positions)
        rows = self.rows[positions] if sp.issparse(self.rows) else np.asarray(self.rows)[positions]
        return LabelledRows(
            rows,
            classes,
            codes,
            None if self.multiplicity is None else self.multiplicity[positions],
        )

    def labels_of(self, positions: np.ndarray) -> tuple[tuple[Label, ...], np.ndarray]:
        """The classes of the rows at ``positions`` in order of first appearance among them,
        and each of those rows' index among them (what ``take`` gives, without the rows)."""
        codes = self.codes[positions]
        present, first = np.unique(codes, return_index=True)
        order = present[np.argsort(first, kind="stable")]
        remap = np.full(len(self.classes), -1, dtype=np.int64)
        remap[order] = np.arange(order.size)
        return tuple(self.classes[int(c)] for c in order), remap[codes]


def labelled(rows: Matrix, labels: Sequence[Label]) -> LabelledRows:
    """Rows with their labels (one per row, already validated) as a ``LabelledRows``."""
    index: dict[tuple[type, Label], int] = {}
    codes = np.empty(len(labels), dtype=np.int64)
    for row, label in enumerate(labels):
        codes[row] = index.setdefault((type(label), label), len(index))
    return LabelledRows(rows, tuple(label for _, label in index), codes)


def join(chunks: Sequence[LabelledRows]) -> LabelledRows:
    """Chunks in log order as one: classes keep their order of first appearance.

    A method that processes the joined chunk discovers the same classes in the same order as
    one that processes the chunks one by one.
    """
    if len(chunks) == 1:
        return chunks[0]
    index: dict[tuple[type, Label], int] = {}
    codes = []
    for chunk in chunks:
        remap = np.array(
            [index.setdefault((type(c), c), len(index)) for c in chunk.classes], dtype=np.int64
        )
        codes.append(remap[chunk.codes])
    if any(sp.issparse(chunk.rows) for chunk in chunks):
        rows: Matrix = sp.vstack([sp.csr_matrix(c.rows) for c in chunks], format="csr")
    else:
        rows = np.vstack([np.asarray(c.rows) for c in chunks])
    multiplicity = None
    if any(chunk.multiplicity is not None for chunk in chunks):
        multiplicity = np.concatenate(
            [
                np.ones(c.n_rows, dtype=np.int64) if c.multiplicity is None else c.multiplicity
                for c in chunks
            ]
        )
    return LabelledRows(
        rows, tuple(label for _, label in index), np.concatenate(codes), multiplicity
    )


def describe_classes(state: State) -> dict[str, Any]:
    """The classes a state has seen, as sent, in order of discovery, with their counts."""
    counts = np.asarray(state.get(COUNTS_FIELD, np.zeros(0)))
    return {
        "classes": [
            {"label": label, "count": int(count)}
            for label, count in zip(stored_classes(state), counts, strict=True)
        ]
    }


def stored_classes(state: State) -> list[Label]:
    """The classes a state has seen, in order of discovery."""
    raw = state.get(CLASSES_FIELD) or "[]"
    return list(json.loads(str(raw)))


def check_classes(state: State, sums_field: str) -> int:
    """``Inconsistent`` unless the class list, counts and sums of ``state`` agree (one count and
    one row of sums per distinct class, counts not negative); returns the number of samples."""
    try:
        classes = stored_classes(state)
    except ValueError as exc:
        raise Inconsistent(f"the state's classes are not a JSON list: {exc}") from exc
    if not isinstance(classes, list) or not all(
        isinstance(c, int | str) and not isinstance(c, bool) for c in classes
    ):
        raise Inconsistent("the state's classes must be a list of integer or string labels")
    counts = np.asarray(state[COUNTS_FIELD])
    sums = np.asarray(state[sums_field])
    distinct = {(type(c), c) for c in classes}
    if len(distinct) != len(classes) or not counts.shape[0] == sums.shape[0] == len(classes):
        raise Inconsistent(
            f"a labelled state has one count and one row of sums per distinct class; got "
            f"{len(classes)} classes ({len(distinct)} distinct), {counts.shape[0]} counts and "
            f"{sums.shape[0]} rows of sums"
        )
    if np.any(counts < 0):
        raise Inconsistent("class counts must not be negative")
    return int(counts.sum())


def encode_classes(classes: Sequence[Label]) -> str:
    return json.dumps(list(classes), separators=(",", ":"), ensure_ascii=False)


def discover(known: Sequence[Label], chunk: LabelledRows) -> tuple[list[Label], np.ndarray]:
    """All classes after this chunk (new ones appended) and every row's index among them."""
    index = {(type(c), c): i for i, c in enumerate(known)}
    classes = list(known)
    remap = np.empty(len(chunk.classes), dtype=np.int64)
    for local, label in enumerate(chunk.classes):
        key = (type(label), label)
        if key not in index:
            index[key] = len(classes)
            classes.append(label)
        remap[local] = index[key]
    return classes, remap[chunk.codes]


@dataclass(frozen=True)
class Tally:
    """Rows of a chunk to total by class (``class_totals_of``): their positions (None: every
    row), the class index of every row of the chunk (read at those positions), and how many
    classes there are."""

    among: np.ndarray | None
    codes: np.ndarray
    classes: int


def class_totals(
    rows: Matrix,
    codes: np.ndarray,
    n_classes: int,
    multiplicity: np.ndarray | None = None,
    among: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-class sample counts and row sums of one chunk (or of its rows at positions
    ``among``, read in place): ``(c,)`` int64 and ``c x m``."""
    return class_totals_of(rows, [Tally(among, codes, n_classes)], multiplicity)[0]


def class_totals_of(
    rows: Matrix, tallies: Sequence[Tally], multiplicity: np.ndarray | None = None
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per-class sample counts and row sums of each tally of one chunk: ``(c,)`` int64 and
    ``c x m`` each.

    The sums are ``G^T X`` with ``G`` the sparse ``rows x c`` class indicator: O(nnz(X)) for
    sparse and O(rows * m) for dense rows, never O(c * rows * m). Every tally's indicator sits
    side by side in one ``G``, so the chunk is read once however many tallies (a class's sum
    adds its rows in the same order as alone, so it is the same to the bit).
    """
    n = rows.shape[0]
    weights = np.ones(n, dtype=np.int64) if multiplicity is None else multiplicity
    positions, columns, spans = [], [], []
    offset = 0
    for tally in tallies:
        at = np.arange(n) if tally.among is None else np.asarray(tally.among, dtype=np.int64)
        positions.append(at)
        columns.append(np.asarray(tally.codes)[at] + offset)
        spans.append((offset, tally.classes))
        offset += tally.classes
    where, which = np.concatenate(positions), np.concatenate(columns)
    indicator = sp.csr_matrix(
        (np.ones(where.size), (where, which)), shape=(n, offset), dtype=np.float64
    )
    sums = indicator.T @ rows
    sums = sums.toarray() if sp.issparse(sums) else np.asarray(sums, dtype=np.float64)
    counts = np.rint(np.bincount(which, weights=weights[where], minlength=offset))
    return [
        (counts[start : start + size].astype(np.int64), sums[start : start + size])
        for start, size in spans
    ]


def grow_rows(array: np.ndarray, rows: int) -> np.ndarray:
    """``array`` with zero rows appended up to ``rows`` (new classes start empty)."""
    extra = rows - array.shape[0]
    if extra <= 0:
        return np.array(array)
    return np.concatenate([array, np.zeros((extra, *array.shape[1:]), dtype=array.dtype)])
