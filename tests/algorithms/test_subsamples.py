"""How each row method keeps its subsamples (``service.algorithms.resampling``): within the
issue's bound of at most the state again, and exactly.

* the layout: with the default two resamples a state is at most twice the state without them
  (OMVFS: plus one copy of its factors), so a regression to full copies fails here;
* sums (variance, OCFS, IOC, and FSDS's sketch within its bound): the subsample that is not
  stored, derived from the whole stream's state, is the one computed directly on its rows;
* the inverse of Chan et al.'s pairwise update, on its own, where it is hardest (large means,
  constant features);
* merges keep the derived subsample (the merge of both derived ones), and an imported state
  whose subsamples do not fit its whole stream is refused.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from service.algorithms import METHODS
from service.algorithms.base import check_state
from service.algorithms.fsds import unmerge_sketches
from service.algorithms.fsds.sketches import sketch_of
from service.algorithms.labels import COUNTS_FIELD as CLASS_COUNTS
from service.algorithms.labels import labelled, stored_classes
from service.algorithms.moments import chunk_moments, combine, grouped_moments, separate
from service.algorithms.ocfs import SUMS_FIELD, exact_directions, ocfs_scores
from service.algorithms.resampling import ResampledMethod, summary_fields_of
from service.algorithms.subsamples import (
    COUNTS_FIELD,
    ResampledParams,
    group_field,
    groups_of_rows,
    resample_count,
)
from service.algorithms.targets import TargetRows
from service.applier import state_sizes
from service.errors import Inconsistent
from tests.support.states import array_field

ROW_METHODS = sorted(n for n, m in METHODS.items() if isinstance(m, ResampledMethod))
SIZE = 40
_EPS = float(np.finfo(np.float64).eps)


def resampled(name: str) -> ResampledMethod[Any]:
    method = METHODS[name]
    assert isinstance(method, ResampledMethod)
    return method


def given(name: str, **params: Any) -> dict[str, Any]:
    if METHODS[name].chunk_kind == "views":
        return {"views": {"a": SIZE // 2, "b": SIZE - SIZE // 2}, "n_clusters": 3, **params}
    if name == "ioc":
        return {"n_components": 2, **params}
    return params


def rows_of(rng: np.random.Generator, n: int, shift: float = 0.0) -> np.ndarray:
    """Rows with features of unequal spread, nonnegative (every kind takes them)."""
    rows: np.ndarray = np.abs(rng.standard_normal((n, SIZE)) * np.linspace(3, 0.5, SIZE)) + shift
    return rows


def chunk_of(name: str, rows: np.ndarray, labels: np.ndarray) -> Any:
    if METHODS[name].chunk_kind == "labelled rows":
        return labelled(rows, [int(v) for v in labels])
    if METHODS[name].chunk_kind == "rows with a target":
        first = sp.csr_matrix(rows)[:, [0]].toarray().ravel() if sp.issparse(rows) else rows[:, 0]
        return TargetRows(rows, first + labels.astype(np.float64))
    return rows


def streamed(
    name: str, params: dict[str, Any], sizes: list[int], seed: int = 0
) -> tuple[ResampledParams, Any, np.ndarray, np.ndarray]:
    """The state after chunks of ``sizes`` rows, with every row and label streamed."""
    method = resampled(name)
    rng = np.random.default_rng(seed)
    # Two subsamples unless asked (the layouts below are written for two; K > 2: their own tests).
    resolved = method.resolve_params({"resamples": 2, **params}, SIZE)
    state = method.initial_state(resolved)
    every, labels = [], []
    for n in sizes:
        rows = rows_of(rng, n)
        classes = rng.integers(0, 4, n)
        rows[:, :4] += 2.0 * (classes[:, None] == np.arange(4))
        state = method.update(state, resolved, chunk_of(name, rows, classes))
        every.append(rows)
        labels.append(classes)
    return resolved, state, np.vstack(every), np.concatenate(labels)


# -- the layout: at most the state again ----------------------------------------------------------


def allowance(name: str, params: ResampledParams) -> int:
    """How much more than twice the state without resamples a state with two may hold: the
    subsamples' row counts (8 bytes each) and, for OMVFS, one more copy of what does not grow
    with its buffer, its declared state (``state_sizes``: the factors V and B, A, the feature
    moments and scores): each of its subsamples buffers its own rows (together the whole
    stream's buffer) but needs its own factors (``docs/stability-and-drift.md``)."""
    k = resample_count(params)
    if METHODS[name].chunk_kind != "views":
        return 8 * k
    without = METHODS[name].resolve_params({**params.as_params(), "resamples": 0}, SIZE)
    return sum(METHODS[name].state_sizes(without).values()) + 8 * k


@pytest.mark.parametrize("name", ROW_METHODS)
def test_two_resamples_cost_at_most_the_state_again(name: str) -> None:
    """Declared (``state_sizes``, what a creation is refused by) and reached after a stream:
    at most twice the bytes without resamples. Full copies of the state per subsample (three
    states) fail this."""
    method = resampled(name)
    sizes = [60, 45, 80, 70]
    without, with_two = (method.resolve_params(given(name, resamples=k), SIZE) for k in (0, 2))
    declared = [sum(method.state_sizes(p).values()) for p in (without, with_two)]
    assert declared[1] <= 2 * declared[0] + allowance(name, with_two), declared
    reached = []
    for k in (0, 2):
        _params, state, _rows, _labels = streamed(name, given(name, resamples=k), sizes)
        reached.append(sum(state_sizes(state).values()))
    assert reached[1] <= 2 * reached[0] + allowance(name, with_two), reached
    assert reached[1] > reached[0]  # they are kept


@pytest.mark.parametrize("name", ROW_METHODS)
def test_only_the_stored_subsamples_are_kept_and_each_counts_its_rows(name: str) -> None:
    """Every row goes into the whole stream's state and into at most one stored subsample;
    sums keep K - 1 of the K subsamples (the last is derived), the others all K."""
    method = resampled(name)
    params, state, rows, _labels = streamed(name, given(name), [30, 31, 7])
    counts = array_field(state, COUNTS_FIELD)
    stored = method.stored_subsamples(counts.size)
    assert stored == (1 if method.derives_last else 2)
    assert counts.sum() == rows.shape[0] and abs(int(counts[0]) - int(counts[1])) <= 1
    kept = {f.partition(":")[0] for f in state if f.startswith("resample") and ":" in f}
    assert kept == {group_field(g, "")[:-1] for g in range(stored)}
    seen = [method.subsample_rows(s) for s in method.subsamples(state, params)]
    assert seen == counts.tolist()


# -- the derived subsample is the one computed on its rows ---------------------------------------


def dealt_rows(k: int, n: int) -> list[np.ndarray]:
    """The rows of each subsample, as the stream dealt them."""
    dealt = groups_of_rows(0, n, k)
    return [np.flatnonzero(dealt == g) for g in range(k)]


def separation_error(
    whole: tuple[int, np.ndarray, np.ndarray], part: tuple[int, np.ndarray, np.ndarray], steps: int
) -> tuple[np.ndarray, np.ndarray]:
    """What ``separate(whole, part)`` may be off by, per feature (mean, M2), where ``whole`` and
    ``part`` come from ``steps`` folds of eq. 2.1 each (a few ulps per fold, ``c = 16``):

    * the means are known to ``c steps eps |mean|``, so ``shift = mean - mean_a`` to about
      twice that, which ``mean_b = mean_a + shift n / n_b`` scales by ``n / n_b``;
    * ``M2_b = M2 - M2_a - shift^2 n n_a / n_b``: the rounding of its three terms (``c steps
      eps`` of each) and the shift's error times ``2 |shift| n n_a / n_b``."""
    n, mean, m2 = whole
    n_a, mean_a, m2_a = part
    n_b = n - n_a
    c = 16 * steps * _EPS
    shift = np.abs(mean - mean_a)
    shift_error = c * (np.abs(mean) + np.abs(mean_a))
    term = shift**2 * n * n_a / n_b
    mean_error = c * np.abs(mean_a) + shift_error * n / n_b
    m2_error = c * (m2 + m2_a + term) + 2 * shift * shift_error * n * n_a / n_b
    return mean_error, m2_error


@pytest.mark.parametrize("k", [2, 3])
def test_variance_derives_its_last_subsample_exactly(k: int) -> None:
    """The last subsample's moments, the whole stream's minus the others' (eq. 2.1 solved for
    it), against the moments of its rows computed directly, within the rounding
    ``separation_error`` bounds: rows far from 0 (mean 1000, spread 0.5 to 3, so the means
    share four digits the subtraction loses) and a constant feature, in 12 chunks. The
    subsample's scores are then the variances of its rows."""
    method = resampled("variance")
    params = method.resolve_params({"resamples": k}, SIZE)
    state = method.initial_state(params)
    rng = np.random.default_rng(k)
    rows = rows_of(rng, 601, shift=1000.0)
    rows[:, 7] = 1000.25  # constant: M2 = 0 in every subsample
    for part in np.array_split(rows, 12):
        state = method.update(state, params, part)
    subsamples = method.subsamples(state, params)
    derived = subsamples[-1]
    direct = chunk_moments(rows[dealt_rows(k, 601)[-1]])
    assert derived["count"] == direct[0]
    stored = subsamples[0]
    for other in subsamples[1:-1]:
        stored = method.subsample_merge(stored, params, other)
    moments = [(int(str(s["count"])), array_field(s, "mean"), array_field(s, "m2")) for s in
               (state, stored)]  # fmt: skip
    mean_error, m2_error = separation_error(moments[0], moments[1], 12 + k)
    assert np.all(np.abs(array_field(derived, "mean") - direct[1]) <= mean_error)
    assert np.all(np.abs(array_field(derived, "m2") - direct[2]) <= m2_error)
    assert array_field(derived, "m2")[7] == 0.0
    scores = method.resample_scores(state, params)
    assert scores is not None
    for g, taken in enumerate(dealt_rows(k, 601)):
        np.testing.assert_allclose(scores[g], np.var(rows[taken], axis=0), rtol=1e-9, atol=1e-12)


def test_separate_inverts_chans_update() -> None:
    """``separate(combine(a, b), a) == b`` within ``separation_error``, for shifted, scaled and
    constant features, up to means a million times their spread; and a relative error of the
    order of ``eps`` where the spread is not tiny against the mean."""
    rng = np.random.default_rng(3)
    for shift in (0.0, 1e3, 1e6):
        x = rng.standard_normal((500, 6)) * [1, 2, 1e-3, 5, 0, 1] + shift
        a, b = chunk_moments(x[:230]), chunk_moments(x[230:])
        whole = combine(a, b)
        n_b, mean_b, m2_b = separate(whole, a)
        assert n_b == 270
        mean_error, m2_error = separation_error(whole, a, 2)
        assert np.all(np.abs(mean_b - b[1]) <= mean_error)
        assert np.all(np.abs(m2_b - b[2]) <= m2_error)
        assert np.all(m2_b >= 0) and m2_b[4] == 0.0
        if shift <= 1e3:
            np.testing.assert_allclose(m2_b[[0, 1, 3, 5]], b[2][[0, 1, 3, 5]], rtol=1e-9)
    assert separate((5, np.ones(2), np.ones(2)), (5, np.ones(2), np.ones(2)))[0] == 0
    with pytest.raises(Inconsistent):
        separate((5, np.ones(2), np.ones(2)), (6, np.ones(2), np.ones(2)))


@pytest.mark.parametrize("sparse", [False, True])
def test_grouped_moments_are_each_groups_own(sparse: bool) -> None:
    """The moments of each group of a chunk's rows from the chunk's shared squared deviations
    (``grouped_moments``: what the whole stream's update computes anyway) against each group's
    own two passes; the chunk's are ``chunk_moments`` to the bit. Rows around 50 with spread 1
    (so ``(mean_g - c)^2`` is small against ``M2_g / n_g``, as for interleaved rows), a
    constant column, sparse or not, and a group with no rows."""
    rng = np.random.default_rng(8)
    dense = rng.standard_normal((300, 6)) + 50.0
    dense[rng.random((300, 6)) < 0.3] = 0.0
    dense[:, 2] = 3.0
    groups = rng.integers(0, 3, 300)
    rows: Any = sp.csr_matrix(dense) if sparse else dense
    whole, parts = grouped_moments(rows, groups, 4)
    expected = chunk_moments(rows)
    assert whole[0] == expected[0]
    np.testing.assert_array_equal(whole[1], expected[1])
    np.testing.assert_array_equal(whole[2], expected[2])
    for g, (n_g, mean_g, m2_g) in enumerate(parts):
        own = chunk_moments(dense[groups == g]) if g < 3 else (0, np.zeros(6), np.zeros(6))
        assert n_g == own[0]
        np.testing.assert_allclose(mean_g, own[1], rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(m2_g, own[2], rtol=1e-11, atol=1e-9)


@pytest.mark.parametrize("name", ["ocfs", "ioc"])
def test_class_statistics_derive_their_last_subsample_exactly(name: str) -> None:
    """The last subsample's class counts (exactly) and sums against those of its rows; a class
    the stored subsample never saw still gets its rows; the scores are Table 2's (OCFS) and the
    exact OC solution's (IOC) of those statistics.

    Tolerance of a sum: it is the difference of two sums of up to ``n`` rows each, and a sum of
    ``n`` terms in any order is within ``(n - 1) eps sum |x|`` of the exact one (Higham,
    "Accuracy and Stability of Numerical Algorithms", 2002, eq. 4.4); so ``2 n eps sum |x|``
    over the class's rows."""
    method = resampled(name)
    params, state, rows, labels = streamed(name, given(name), [9, 40, 3, 61, 20], seed=4)
    # A class only the derived subsample sees: of the next two rows, the one dealt to it.
    dealt = groups_of_rows(int(array_field(state, COUNTS_FIELD).sum()), 2, 2)
    lone, lone_labels = rows_of(np.random.default_rng(9), 2), np.where(dealt == 1, 7, 0)
    state = method.update(state, params, chunk_of(name, lone, lone_labels))
    rows, labels = np.vstack([rows, lone]), np.concatenate([labels, lone_labels])
    stored, derived = method.subsamples(state, params)
    assert 7 not in stored_classes(stored) and 7 in stored_classes(derived)
    taken = dealt_rows(2, rows.shape[0])[-1]
    counts = array_field(derived, CLASS_COUNTS)
    sums = array_field(derived, SUMS_FIELD)
    n = rows.shape[0]
    for j, label in enumerate(stored_classes(derived)):
        mine = rows[taken][labels[taken] == label]
        assert counts[j] == mine.shape[0], label
        bound = 2 * n * _EPS * np.abs(rows[labels == label]).sum(axis=0)
        assert np.all(np.abs(sums[j] - mine.sum(axis=0)) <= bound), label
    assert sorted(stored_classes(derived)) == sorted(int(c) for c in np.unique(labels))
    scores = method.resample_scores(state, params)
    assert scores is not None
    if name == "ocfs":
        expected = ocfs_scores(counts, sums)
    else:
        vectors, values = exact_directions(counts, sums, 2)
        expected = (vectors**2) @ values
    np.testing.assert_allclose(scores[-1], expected, rtol=1e-12)


@pytest.mark.parametrize("precision", ["single", "double"])
@pytest.mark.parametrize("decay", [1.0, 0.995])
def test_fsds_derives_a_sketch_of_the_rest_within_both_shrinkages(
    decay: float, precision: str
) -> None:
    """FSDS's stored subsample is a Frequent-Directions sketch of its own rows (``0 <= A_p^T A_p
    - B_p^T B_p <= d_p I``); the last, the whole sketch minus it (``unmerge_sketches``), is one
    of the rest within both shrinkages: ``-(d + d_p) I <= A_r^T A_r - S^T S <= (d + dropped) I``
    (``dropped``: the largest eigenvalue of the difference beyond the ``ell`` it keeps). With
    ``decay`` the rows are weighed as the whole stream weighs them (``decay`` to the rows after
    each), in both. The whole stream's sketch is untouched by any of it (``test_fsds``:
    Algorithm 2 bit for bit)."""
    method = resampled("fsds")
    params, state, rows, _labels = streamed(
        "fsds",
        {"ell": 12, "k": 4, "decay": decay, "resample_precision": precision},
        [150, 90, 210, 33],
    )
    stored, derived = method.subsamples(state, params)
    ages = rows.shape[0] - 1 - np.arange(rows.shape[0])
    unit = rows / np.linalg.norm(rows, axis=1, keepdims=True) * decay ** ages[:, None]
    parts = dealt_rows(2, rows.shape[0])
    d = float(np.asarray(state["shrinkage_total"]))
    d_p = float(np.asarray(stored["shrinkage_total"]))
    assert d > 0 and d_p > 0  # both sketches did shrink
    whole, part = (sketch_of(s) for s in (state, stored))
    difference = np.linalg.eigvalsh(whole.T @ whole - part.T @ part)[::-1]
    dropped = max(float(difference[whole.shape[0]]), 0.0)
    for subsample, taken, low, high in (
        (stored, parts[0], 0.0, d_p),
        (derived, parts[1], -(d + d_p), d + dropped),
    ):
        a = unit[taken]
        sketch = sketch_of(subsample)
        gap = np.linalg.eigvalsh(a.T @ a - sketch.T @ sketch)
        # A stored sketch kept in single precision has its rows rounded by 2^-24 of each entry
        # every update: B^T B moves by at most 2^-23 ||B||_F^2 each time.
        kept = 4 * 2.0**-23 if precision == "single" else 0.0
        rounding = 1e-9 * float(np.linalg.norm(a, 2) ** 2) + kept * float(np.linalg.norm(a) ** 2)
        assert low - rounding <= gap.min() and gap.max() <= high + rounding, (low, gap, high)
        assert subsample["rows_seen"] == taken.size


def test_unmerge_sketches_is_the_eigendecomposition_of_the_difference() -> None:
    """Against ``eigh`` of ``whole^T whole - part^T part`` formed outright: the ``ell`` largest
    eigenvalues (negative ones as 0) and the matrix they make, to rounding."""
    rng = np.random.default_rng(5)
    for width in (30, 8):  # more columns than rows of both sketches, and fewer
        whole = np.linalg.svd(rng.standard_normal((10, width)) * np.linspace(3, 0.2, width))
        part = np.linalg.svd(rng.standard_normal((10, width)) * 0.6)
        a = whole[1][:, None] * whole[2][: whole[1].size]
        b = part[1][:, None] * part[2][: part[1].size]
        rows, values = unmerge_sketches(a, b, 10)
        eigenvalues, vectors = np.linalg.eigh(a.T @ a - b.T @ b)
        top = np.maximum(eigenvalues[::-1][:10], 0.0)
        np.testing.assert_allclose(values[: top.size], np.sqrt(top), atol=1e-12)
        expected = (vectors[:, ::-1][:, :10] * top) @ vectors[:, ::-1][:, :10].T
        np.testing.assert_allclose(rows.T @ rows, expected, atol=1e-11)
        np.testing.assert_allclose(rows @ rows.T, np.diag(values**2), atol=1e-11)


# -- merges and imports ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["variance", "ocfs"])
def test_a_merge_keeps_the_derived_subsample(name: str) -> None:
    """Merging two states merges their stored subsamples; the merged state's derived one is the
    merge of the two derived ones (up to rounding)."""
    method = resampled(name)
    assert hasattr(method, "merge")
    params, a, _rows, _labels = streamed(name, {}, [20, 33], seed=1)
    _params, b, _rows, _labels = streamed(name, {}, [41], seed=2)
    summary = {k: v for k, v in b.items() if not isinstance(v, np.ndarray)}
    summary.update({f: b[f] for f in summary_fields_of(method, params)})
    merged = method.merge(a, params, summary)
    expected = method.subsample_merge(
        method.subsamples(a, params)[-1], params, method.subsamples(b, params)[-1]
    )
    derived = method.subsamples(merged, params)[-1]
    assert method.subsample_rows(derived) == method.subsample_rows(expected)
    np.testing.assert_allclose(
        method.subsample_scores(derived, params),
        method.subsample_scores(expected, params),
        rtol=1e-9,
    )


@pytest.mark.parametrize("name", ROW_METHODS)
def test_an_import_whose_subsamples_do_not_fit_its_stream_is_refused(name: str) -> None:
    """``check_state``: counts that are not the subsamples' rows, or a stored subsample with
    more rows than the whole stream (nothing is left to derive), are refused."""
    method = resampled(name)
    params, state, _rows, _labels = streamed(name, given(name), [25, 30])
    check_state(METHODS[name], state, params)
    counts = array_field(state, COUNTS_FIELD)
    off = dict(state)
    off[COUNTS_FIELD] = counts + np.array([1, -1])
    with pytest.raises(Inconsistent):
        check_state(METHODS[name], off, params)
    if method.derives_last:
        # The stored subsample replaced by the whole stream's own statistics, twice over.
        whole = method.subsample_of_whole(state, params)
        doubled = method.subsample_merge(whole, params, whole)
        crafted = dict(state)
        crafted.update({group_field(0, f): v for f, v in doubled.items()})
        crafted[COUNTS_FIELD] = np.array([2 * counts.sum(), 0])
        with pytest.raises(Inconsistent):
            check_state(METHODS[name], crafted, params)


def test_omvfs_subsamples_are_omvfs_on_their_rows_within_the_whole_streams_iterations() -> None:
    """Each OMVFS subsample is Algorithm 1 on its rows of every chunk (its chunk), for at most
    as many iterations as the whole stream's took on that chunk: recomputed here one chunk at
    a time from its rows alone (its own view split and moments), to rounding (the subsample
    reuses the chunk's scaled views and shares its moments' pass)."""
    method = resampled("omvfs")
    params = method.resolve_params(given("omvfs", tol=1e-2, max_iter=60, resamples=2), SIZE)
    state = method.initial_state(params)
    alone = method.subsample_initial_state(params)
    rng = np.random.default_rng(6)
    first = 0
    capped_somewhere = False
    for n in (40, 25, 60, 33):
        rows = rows_of(rng, n)
        state = method.update(state, params, rows)
        mine = np.flatnonzero(groups_of_rows(first, n, 2) == 0)
        first += n
        done = int(np.asarray(state["last_iterations"]))
        free = method.core_update(alone, params, rows[mine])
        capped = method.resolve_params({**params.as_params(), "max_iter": done}, SIZE)
        alone = method.core_update(alone, capped, rows[mine])
        capped_somewhere |= int(np.asarray(free["last_iterations"])) > done
        stored = method.subsamples(state, params)[0]
        assert int(np.asarray(stored["last_iterations"])) <= done
        for field in ("weights", "A", "V0", "V1", "feature_mean", "feature_m2"):
            np.testing.assert_allclose(
                array_field(stored, field), array_field(alone, field), rtol=1e-9, atol=1e-12
            )
    assert capped_somewhere  # the cap was needed on this stream (else it tests nothing)


@pytest.mark.parametrize("name", ROW_METHODS)
def test_more_resamples_keep_more_subsamples_that_fit_their_stream(name: str) -> None:
    """With K = 4: K - 1 stored (sums) or K, each balanced; the derived one from the merge of
    the stored ones; states pass ``check_state``, merged ones too, and every subsample has
    scores."""
    method = resampled(name)
    params, state, rows, _labels = streamed(name, given(name, resamples=4), [21, 50, 9])
    check_state(METHODS[name], state, params)
    counts = array_field(state, COUNTS_FIELD)
    assert counts.tolist() == [20, 20, 20, 20]
    scores = method.resample_scores(state, params)
    assert scores is not None and scores.shape == (4, SIZE)
    assert np.all(np.isfinite(scores))
    if hasattr(method, "merge"):
        _params, other, _rows, _labels = streamed(name, given(name, resamples=4), [13], seed=3)
        summary = {k: v for k, v in other.items() if not isinstance(v, np.ndarray)}
        summary.update({f: other[f] for f in summary_fields_of(method, params)})
        merged = method.merge(state, params, summary)
        check_state(METHODS[name], merged, params)
        assert array_field(merged, COUNTS_FIELD).sum() == rows.shape[0] + 13
        assert method.resample_scores(merged, params) is not None


@pytest.mark.parametrize("name", ROW_METHODS)
@pytest.mark.parametrize("sparse", [False, True])
def test_the_whole_stream_is_the_same_with_or_without_resamples(name: str, sparse: bool) -> None:
    """The subsamples never feed back: the whole stream's state (every field, to the bit) is the
    one the method reaches without them, whatever they share of its update."""
    method = resampled(name)
    states = []
    for k in (0, 2, 3):
        resolved = method.resolve_params(given(name, resamples=k), SIZE)
        state = method.initial_state(resolved)
        rng = np.random.default_rng(12)
        for n in (17, 1, 40, 9):
            rows = rows_of(rng, n) * (rng.random((n, SIZE)) < 0.5)
            chunk = sp.csr_matrix(rows) if sparse else rows
            state = method.update(state, resolved, chunk_of(name, chunk, rng.integers(0, 3, n)))
        states.append(state)
    plain = states[0]
    for state in states[1:]:
        for field, value in plain.items():
            if isinstance(value, np.ndarray):
                np.testing.assert_array_equal(array_field(state, field), value, err_msg=field)
            else:
                assert state[field] == value, field
