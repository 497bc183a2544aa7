"""Orthogonal Centroid Feature Selection (Yan et al., TKDE 2006, section 3.2, Table 2).

OCFS picks the ``p`` features that maximise ``J(W~) = trace(W~^T S_b W~)`` over 0/1 selection
matrices (eq. 2), i.e. the ``p`` largest scores

    s(i) = sum_j n_j / n * (m_j^i - m^i)^2,

with ``m_j`` the mean of class ``j`` and ``m`` the mean of all samples (Table 2, steps 1-3).
The scores depend on the data only through the class counts ``n_j`` and the class sums, so the
state is exactly those: any chunking gives the same scores (up to the rounding of the sums),
and two selectors over disjoint data merge exactly by adding their counts and sums. The sum
of all scores is ``trace(S_b)``.

``standardize`` (default off, the paper) divides every score by the feature's pooled
within-class variance, ``S_b^ii / S_w^ii``: the OCFS score of the feature scaled by its pooled
within-class standard deviation, which no rescaling of a feature changes. It needs every
class's sum of squared deviations too (``service.algorithms.class_moments``), kept (field
``class_m2``) only by selectors created with it; they merge exactly as well.

The batch references ``between_class_scatter`` and ``oc_directions`` (the eigenvectors of
``S_b``, the batch Orthogonal Centroid solution) serve the tests and IOC's convergence curve.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp
from pydantic import Field

from service.algorithms.base import ChunkKind, Matrix, State
from service.algorithms.class_moments import (
    M2_FIELD,
    check_class_m2,
    chunk_class_m2,
    combine_m2,
    separate_m2,
    standardized_scores,
)
from service.algorithms.examples import Example
from service.algorithms.labels import (
    CLASSES_FIELD,
    COUNTS_FIELD,
    Label,
    LabelledRows,
    Tally,
    check_classes,
    class_totals_of,
    describe_classes,
    discover,
    encode_classes,
    grow_rows,
    stored_classes,
)
from service.algorithms.resampling import RP
from service.algorithms.statistics import StatisticsMethod
from service.algorithms.subsamples import ResampledParams
from service.errors import Inconsistent, InvalidInput

#: The state field holding every class's row sum (``c x m``).
SUMS_FIELD = "class_sums"


def ocfs_scores(counts: np.ndarray, sums: np.ndarray) -> np.ndarray:
    """Table 2, steps 1-3: ``s(i) = sum_j n_j/n (m_j^i - m^i)^2`` from counts and class sums."""
    counts = np.asarray(counts, dtype=np.float64)
    n = counts.sum()
    if n == 0:
        return np.zeros(sums.shape[1])
    present = counts > 0
    means = sums[present] / counts[present, None]  # step 1: class centroids m_j
    overall = sums.sum(axis=0) / n  # step 2: the centroid m of all samples
    return np.asarray(((counts[present] / n)[:, None] * (means - overall) ** 2).sum(axis=0))


def add_classes(state: State, rows: LabelledRows, among: np.ndarray | None = None) -> State:
    """Class statistics (classes, counts, sums: Table 2's only data) with ``rows`` folded in
    (or the rows at positions ``among``, read in place)."""
    classes, tally = class_tally(state, rows, among)
    counts, sums = class_totals_of(rows.rows, [tally], rows.multiplicity)[0]
    return fold_classes(state, classes, counts, sums, spread_of(state, rows, tally, counts, sums))


def spread_of(
    state: State, rows: LabelledRows, tally: Tally, counts: np.ndarray, sums: np.ndarray
) -> np.ndarray | None:
    """The chunk's per-class ``M2`` where ``state`` keeps it (``standardize``), else None."""
    if M2_FIELD not in state:
        return None
    if rows.multiplicity is not None:
        raise ValueError("class summaries carry no spread: merge them with merge_classes")
    return chunk_class_m2(rows.rows, tally, counts, sums)


def class_tally(
    state: State, rows: LabelledRows, among: np.ndarray | None = None
) -> tuple[list[Label], Tally]:
    """The classes of ``state`` with those of ``rows`` (or of its rows at ``among``) found
    after them, and the tally of those rows by them (``class_totals_of``)."""
    if among is not None and not among.size:
        classes = stored_classes(state)
        return classes, Tally(among, np.zeros(rows.n_rows, dtype=np.int64), len(classes))
    if among is not None:
        labels, codes = rows.labels_of(among)
        placed = np.zeros(rows.n_rows, dtype=np.int64)
        placed[among] = codes
        rows = LabelledRows(rows.rows, labels, placed, rows.multiplicity)
    classes, codes = discover(stored_classes(state), rows)
    return classes, Tally(among, codes, len(classes))


def fold_classes(
    state: State,
    classes: list[Label],
    counts: np.ndarray,
    sums: np.ndarray,
    m2: np.ndarray | None = None,
) -> State:
    """``state``'s class counts and sums with a chunk's added (``classes``: all of them now),
    and, where the state keeps them, its per-class ``M2`` by Chan's update (``m2``: the
    chunk's)."""
    before_counts = grow_rows(np.asarray(state[COUNTS_FIELD], dtype=np.int64), len(classes))
    before_sums = grow_rows(np.asarray(state[SUMS_FIELD], dtype=np.float64), len(classes))
    out: State = {
        CLASSES_FIELD: encode_classes(classes),
        COUNTS_FIELD: counts + before_counts,
        SUMS_FIELD: sums + before_sums,
    }
    if M2_FIELD in state:
        if m2 is None:
            raise ValueError(f"a state that keeps {M2_FIELD} takes a chunk's with its sums")
        before = grow_rows(np.asarray(state[M2_FIELD], dtype=np.float64), len(classes))
        out[M2_FIELD] = combine_m2(before_counts, before_sums, before, counts, sums, m2)
    return out


def merge_classes(state: State, summary: State) -> State:
    """``state``'s class statistics with another state's (``summary``: its classes, counts,
    sums and, where ``state`` keeps it, ``M2``) added class by class, matched by label, new
    classes appended in the summary's order: those of one state that saw both streams."""
    if M2_FIELD in state and M2_FIELD not in summary:
        raise InvalidInput(
            "this selector standardizes (it keeps every class's spread); the merged one does "
            "not: merge selectors created with the same standardize"
        )
    classes, codes = discover(stored_classes(state), summary_rows(summary))
    m = np.asarray(summary[SUMS_FIELD]).shape[1]
    counts = np.zeros(len(classes), dtype=np.int64)
    sums, m2 = np.zeros((len(classes), m)), np.zeros((len(classes), m))
    counts[codes] = np.asarray(summary[COUNTS_FIELD], dtype=np.int64)
    sums[codes] = np.asarray(summary[SUMS_FIELD], dtype=np.float64)
    if M2_FIELD in state:
        m2[codes] = np.asarray(summary[M2_FIELD], dtype=np.float64)
    return fold_classes(state, classes, counts, sums, m2 if M2_FIELD in state else None)


def class_scores(state: State) -> np.ndarray:
    """Table 2's scores of a state's class statistics, standardized where it keeps ``M2``."""
    counts, sums = np.asarray(state[COUNTS_FIELD]), np.asarray(state[SUMS_FIELD])
    if M2_FIELD in state:
        return standardized_scores(counts, sums, np.asarray(state[M2_FIELD]))
    return ocfs_scores(counts, sums)


def remove_classes(whole: State, part: State) -> State:
    """The class statistics of the rows of ``whole`` that ``part`` has not seen: counts and
    sums subtracted class by class (matched by label, in ``whole``'s order). Counts are exact;
    a sum is exact up to a few ulps of the larger of the two sums (``Inconsistent`` if ``part``
    holds a class or more rows of one than ``whole``). A class left with no rows has zero sums,
    as a state that never saw it would (not the rounding residue of the subtraction)."""
    classes = stored_classes(whole)
    index = {(type(c), c): i for i, c in enumerate(classes)}
    counts = np.array(whole[COUNTS_FIELD], dtype=np.int64)
    sums = np.array(whole[SUMS_FIELD], dtype=np.float64)
    part_counts = np.asarray(part[COUNTS_FIELD], dtype=np.int64)
    part_sums = np.asarray(part[SUMS_FIELD], dtype=np.float64)
    # The part's statistics in the whole's class order (zero for classes it has not seen).
    taken_counts = np.zeros_like(counts)
    taken_sums = np.zeros_like(sums)
    taken_m2 = np.zeros_like(sums)
    for j, label in enumerate(stored_classes(part)):
        at = index.get((type(label), label))
        if at is None:
            raise Inconsistent(f"a subsample holds class {label!r}, which the whole stream lacks")
        taken_counts[at] = part_counts[j]
        taken_sums[at] = part_sums[j]
        if M2_FIELD in whole:
            taken_m2[at] = np.asarray(part[M2_FIELD], dtype=np.float64)[j]
    rest: State = {CLASSES_FIELD: encode_classes(classes)}
    if M2_FIELD in whole:
        m2 = np.asarray(whole[M2_FIELD], dtype=np.float64)
        rest[M2_FIELD] = separate_m2(counts, sums, m2, taken_counts, taken_sums, taken_m2)
    counts -= taken_counts
    sums -= taken_sums
    if np.any(counts < 0):
        raise Inconsistent("a subsample holds more rows of a class than the whole stream")
    sums[counts == 0] = 0.0
    return {**rest, COUNTS_FIELD: counts, SUMS_FIELD: sums}


def check_spread(state: State) -> None:
    """``check_classes``, and the per-class ``M2`` where the state keeps it."""
    check_classes(state, SUMS_FIELD)
    if M2_FIELD in state:
        sums = np.asarray(state[SUMS_FIELD])
        check_class_m2(np.asarray(state[COUNTS_FIELD]), np.asarray(state[M2_FIELD]), sums.shape)


class OCFSParams(ResampledParams):
    """OCFS's scores are exact (Table 2, eq. 2); ``standardize`` scales every feature by its
    pooled within-class deviation first."""

    method: ClassVar[str] = "ocfs"
    unknown_hint: ClassVar[str] = " (the scores are exact)"

    standardize: bool = Field(
        False,
        description=(
            "Scale every feature by its pooled within-class standard deviation before scoring: "
            "the score becomes between-class scatter / pooled within-class variance "
            "(S_b_ii / S_w_ii), which rescaling a feature does not change. false: the paper's "
            "score, which grows with the square of a feature's scale."
        ),
    )


class ClassStatisticsMethod(StatisticsMethod[RP]):
    """A labelled row method whose statistics are the class counts and class sums, and, where
    ``keeps_spread``, every class's ``M2`` (``class_moments``): a subclass says its scores.
    Counts and sums add exactly, ``M2`` by Chan's update; both merge and take a subsample out of
    the whole stream."""

    chunk_kind: ChunkKind = "labelled rows"
    describe_fields: tuple[str, ...] = (COUNTS_FIELD,)
    #: Class counts and sums add exactly (``plus``, ``minus``) ...
    statistics_fields: ClassVar[tuple[str, ...]] = (COUNTS_FIELD, SUMS_FIELD)
    #: ... and, where kept, every class's M2 (Chan's update).
    optional_fields: ClassVar[tuple[str, ...]] = (M2_FIELD,)

    def keeps_spread(self, params: RP) -> bool:
        """Whether the statistics hold every class's ``M2``."""
        raise NotImplementedError

    def keeps_optional(self, params: RP) -> bool:
        return self.keeps_spread(params)

    def empty(self, params: RP) -> State:
        spread = {M2_FIELD: np.zeros((0, params.size))} if self.keeps_spread(params) else {}
        return {
            CLASSES_FIELD: encode_classes([]),
            COUNTS_FIELD: np.zeros(0, dtype=np.int64),
            SUMS_FIELD: np.zeros((0, params.size)),
            **spread,
        }

    def empty_sizes(self, params: RP) -> dict[str, int]:
        return {}  # counts and sums (and M2) grow by one row per class found

    def fold(self, statistics: State, params: RP, chunk: LabelledRows) -> State:
        """The chunk's class counts and sums (and M2) folded in."""
        return add_classes(statistics, chunk)

    def fold_dealt(
        self,
        statistics: list[State],
        params: RP,
        chunk: LabelledRows,
        dealt: np.ndarray,
    ) -> list[State]:
        """The chunk's class counts and sums for the whole stream and for each subsample's rows
        in one product (``class_totals_of``: the chunk is read once); where kept, each one's M2
        around its own class means (a second pass)."""
        plans = [class_tally(statistics[0], chunk)]
        for g, subsample in enumerate(statistics[1:]):
            plans.append(class_tally(subsample, chunk, np.flatnonzero(dealt == g)))
        totals = class_totals_of(chunk.rows, [tally for _, tally in plans], chunk.multiplicity)
        return [
            fold_classes(
                before, classes, counts, sums, spread_of(before, chunk, tally, counts, sums)
            )
            for before, (classes, tally), (counts, sums) in zip(
                statistics, plans, totals, strict=True
            )
        ]

    def plus(self, statistics: State, params: RP, other: State) -> State:
        """Counts and sums added, and M2 by Chan's update (classes matched by label, new ones
        appended in the other's order)."""
        return merge_classes(statistics, other)

    def minus(self, whole: State, params: RP, part: State) -> State:
        return remove_classes(whole, part)

    def rows_of(self, statistics: State) -> int:
        return int(np.asarray(statistics[COUNTS_FIELD]).sum())

    def check(self, state: State, params: RP) -> None:
        """One count and one row of sums (and of M2) per class."""
        check_spread(state)

    def describe(self, state: State) -> dict[str, Any]:
        return describe_classes(state)


class OCFS(ClassStatisticsMethod[OCFSParams]):
    """OCFS over labelled row chunks: the statistics are the class counts and class sums (and,
    with ``standardize``, every class's ``M2``), scored by Table 2, steps 1-3.

    >>> import numpy as np
    >>> from service.algorithms.labels import labelled
    >>> method = OCFS()
    >>> params = method.resolve_params({}, size=2)
    >>> rows = labelled(np.array([[1.0, 5], [3, 5], [5, 5]]), ["a", "a", "b"])
    >>> method.weights(method.update(method.initial_state(params), params, rows), params)
    array([2., 0.])
    """

    name = "ocfs"
    paper = (
        'Yan et al., "Effective and Efficient Dimensionality Reduction for Large-Scale and '
        'Streaming Data Preprocessing", TKDE 2006 (Table 2, eq. 2)'
    )
    params_model = OCFSParams
    examples: tuple[Example, ...] = (
        Example({"n_features": 4}, items=10),
        Example({"n_features": 4}, {"standardize": True}, items=10),
    )
    score_field = "scores"
    stability_estimate = (
        "the class counts and sums of K interleaved subsamples of the rows (K - 1 stored, the "
        "last the whole stream's minus theirs), scored by Table 2, their spread scaled to "
        "resamples of every row seen"
    )

    def keeps_spread(self, params: OCFSParams) -> bool:
        return params.standardize

    def scores(self, statistics: State, params: OCFSParams) -> np.ndarray:
        """Table 2, steps 1-3 (standardized where the statistics keep M2), O(cm)."""
        return class_scores(statistics)


def summary_rows(state: State) -> LabelledRows:
    """The state as a chunk to merge elsewhere: one row per class holding its sum, with the
    class count as multiplicity (so the receiver adds counts and sums, exactly)."""
    classes = stored_classes(state)
    return LabelledRows(
        rows=np.array(state[SUMS_FIELD], dtype=np.float64),
        classes=tuple(classes),
        codes=np.arange(len(classes), dtype=np.int64),
        multiplicity=np.array(state[COUNTS_FIELD], dtype=np.int64),
    )


# -- batch references (the Orthogonal Centroid criterion computed from all the data) -----------


def centred_class_means(x: Matrix, labels: Sequence[Label]) -> tuple[np.ndarray, np.ndarray]:
    """``Phi`` (``c x m``, rows ``m_j - m``) and the class priors ``n_j / n``, from all rows."""
    keys = [(type(label), label) for label in labels]
    classes = list(dict.fromkeys(keys))
    codes = np.array([classes.index(key) for key in keys])
    dense = sp.csr_matrix(x).toarray() if sp.issparse(x) else np.asarray(x, dtype=np.float64)
    means = np.stack([dense[codes == j].mean(axis=0) for j in range(len(classes))])
    priors = np.bincount(codes) / len(codes)
    return means - dense.mean(axis=0), priors


def exact_directions(counts: np.ndarray, sums: np.ndarray, p: int) -> tuple[np.ndarray, np.ndarray]:
    """The batch OC solution from class counts and sums alone: ``S_b`` depends on the data only
    through them, so the exact leading eigenvectors (``m x p``) and eigenvalues of ``S_b`` come
    from the SVD of ``diag(sqrt(n_j/n)) Phi`` (``c x m``) at O(c^2 m), whatever was seen."""
    counts = np.asarray(counts, dtype=np.float64)
    n = counts.sum()
    present = counts > 0
    priors = counts[present] / n
    phi = sums[present] / counts[present, None] - sums.sum(axis=0) / n
    _, singular, vt = np.linalg.svd(np.sqrt(priors)[:, None] * phi, full_matrices=False)
    vectors = np.zeros((sums.shape[1], p))
    values = np.zeros(p)
    k = min(p, singular.size)
    vectors[:, :k], values[:k] = vt[:k].T, singular[:k] ** 2
    return vectors, values


def between_class_scatter(x: Matrix, labels: Sequence[Label]) -> np.ndarray:
    """``S_b = sum_j n_j/n (m_j - m)(m_j - m)^T`` (section 2.1), ``m x m``."""
    phi, priors = centred_class_means(x, labels)
    return np.asarray(phi.T @ (priors[:, None] * phi))


def oc_directions(x: Matrix, labels: Sequence[Label], p: int) -> tuple[np.ndarray, np.ndarray]:
    """The batch OC solution: the ``p`` leading unit eigenvectors of ``S_b`` (``m x p``) and
    their eigenvalues, from the SVD of ``diag(sqrt(n_j/n)) Phi`` (``c x m``, cheap for big m)."""
    phi, priors = centred_class_means(x, labels)
    _, singular, vt = np.linalg.svd(np.sqrt(priors)[:, None] * phi, full_matrices=False)
    return vt[:p].T, singular[:p] ** 2
