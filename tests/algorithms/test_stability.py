"""The stability index, its interval and the bands (``service.algorithms.stability``), and the
subsamples they come from (``service.algorithms.resampling``).

* the index and its interval against the paper's own formulas, written out again here over the
  binary selection matrix (Nogueira, Sechidis & Brown 2018, section 4 and 5);
* the subsamples: balanced, disjoint, dealt by position (so any chunking deals alike), blind to
  a period in the stream (how each method keeps them: ``test_subsamples.py``);
* the online estimate against the truth: the spread of the rankings of independently
  resampled streams of the same real data (bootstrap, seeded), for variance, OCFS, IOC and
  FSDS, within the tolerances the test states (and says why);
* a stationary stream's index is high and rises with the rows; a stream of noise has none.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from scipy.stats import t as student_t
from sklearn.datasets import load_digits

from service.algorithms import METHODS
from service.algorithms.base import order_by_score
from service.algorithms.labels import labelled
from service.algorithms.ocfs import exact_directions
from service.algorithms.resampling import ResampledMethod
from service.algorithms.stability import (
    BAND_SCALE,
    Assessment,
    assess,
    bands,
    ranks_of,
    replicate_scores,
    stability_index,
)
from service.algorithms.subsamples import DEFAULT_RESAMPLES, groups_of_rows
from tests.support.datasets import load_mat

# -- the index and its interval ------------------------------------------------------------------


def estimate(method: Any, state: Any, params: dict[str, Any], h: int) -> Assessment:
    """What ``GET .../top`` would say of a state's top ``h`` (its method's correction)."""
    resampled = method.resample_scores(state, params)
    assert resampled is not None
    assessed = assess(method.weights(state, params), resampled, h, method.stability_corrected)
    assert assessed is not None
    return assessed


def reference_index(z: np.ndarray) -> float:
    """The paper's measure as its authors' Python code writes it: ``1 - mean(var(Z, ddof=1)) /
    (k̄/d (1 - k̄/d))`` on the binary matrix."""
    d = z.shape[1]
    k_bar = z.sum(axis=1).mean()
    return float(1 - z.var(axis=0, ddof=1).mean() / ((k_bar / d) * (1 - k_bar / d)))


def reference_variance(z: np.ndarray, index: float) -> float:
    """The paper's variance estimate of the index (section 5), on the binary matrix."""
    m, d = z.shape
    k = z.sum(axis=1)
    k_bar = k.mean()
    p_hat = z.mean(axis=0)
    share = k_bar / d
    p_e = 1 - 2 * share * (1 - share)
    phi = []
    for i in range(m):
        p_a = 1 - k[i] / d - share + 2 / d * np.sum(z[i] * p_hat)
        p_e_i = (1 - index) * (share * k[i] / d + (1 - share) * (1 - k[i] / d))
        phi.append((p_a - p_e_i) / (1 - p_e))
    phi_arr = np.array(phi)
    return float(4 / m**2 * np.sum((phi_arr - phi_arr.mean()) ** 2))


def binary(selections: list[list[int]], d: int) -> np.ndarray:
    z = np.zeros((len(selections), d))
    for i, chosen in enumerate(selections):
        z[i, chosen] = 1
    return z


@pytest.mark.parametrize("m", [3, 5, 12])
def test_the_index_and_its_interval_are_the_papers(m: int) -> None:
    rng = np.random.default_rng(m)
    d = 40
    for trial in range(20):
        # Selections of varying sizes around a common core (some agreement, some not).
        selections = [
            sorted(set(rng.choice(8, 5, replace=False)) | set(rng.choice(d, rng.integers(1, 6))))
            for _ in range(m)
        ]
        stability = stability_index(selections, d)
        z = binary([list(s) for s in selections], d)
        expected = reference_index(z)
        assert stability.index == pytest.approx(expected, abs=1e-12), trial
        if len({len(s) for s in selections}) == 1:
            continue  # one size: Wilson's interval (below)
        # Unequal sizes: the paper's variance, with Student's t quantile of m - 1 freedoms.
        t = float(student_t.ppf(0.975, m - 1))
        half = t * math.sqrt(reference_variance(z, expected))
        assert stability.low == pytest.approx(max(-1, expected - half), abs=1e-12)
        assert stability.high == pytest.approx(min(1, expected + half), abs=1e-12)


def test_the_index_is_one_for_one_selection_and_about_zero_at_random() -> None:
    assert stability_index([[1, 2, 3], [3, 2, 1], [2, 1, 3]], 10).index == 1.0
    # Two disjoint halves of the features: the least stable two selections can be.
    assert stability_index([[0, 1], [2, 3]], 4).index == -1.0
    rng = np.random.default_rng(0)
    random = [
        stability_index([rng.choice(50, 10, replace=False) for _ in range(4)], 50).index
        for _ in range(400)
    ]
    assert abs(np.mean(random)) < 0.02  # E[index] = 0 for random selections of one size
    with pytest.raises(ValueError):
        stability_index([[1, 2]], 5)


def test_two_selections_get_wilsons_interval_of_their_disagreement() -> None:
    """For M = 2 the paper's variance is identically 0; the interval is Wilson's for the share
    q of the h features one selection lacks, through index = 1 - q / (1 - h/d)."""
    same = stability_index([list(range(10)), list(range(10))], 1000)
    assert same.index == 1.0 and same.high == 1.0
    assert same.low == pytest.approx(1 - (3.8415 / 13.8415) / 0.99, abs=2e-4)  # about 0.72
    two_differ = stability_index([list(range(10)), [*range(8), 50, 51]], 1000)
    assert two_differ.index == pytest.approx(1 - 0.2 / 0.99)
    assert two_differ.low < two_differ.index < two_differ.high
    # With many resamples the interval covers the index of the population it came from.


def wilson(share: float, trials: float) -> tuple[float, float]:
    """Wilson's score interval of a binomial share (Wilson 1927), written out."""
    z = 1.959963984540054
    centre = (share + z * z / (2 * trials)) / (1 + z * z / trials)
    half = (
        z
        / (1 + z * z / trials)
        * math.sqrt(share * (1 - share) / trials + z * z / (4 * trials * trials))
    )
    return centre - half, centre + half


@pytest.mark.parametrize("m", [2, 3, 4, 8])
def test_selections_of_one_size_get_wilsons_interval_of_their_pairs_disagreement(m: int) -> None:
    """M selections of h: the share q̄ of its h features a selection lacks of another, averaged
    over the ordered pairs, as if seen over h M / 2 trials; mapped through 1 - q / (1 - h/d)."""
    rng = np.random.default_rng(40 + m)
    d, h = 60, 7
    for trial in range(20):
        selections = [
            rng.choice(np.r_[np.arange(h), rng.choice(d, 3)], h, replace=False).tolist()
            if trial % 2
            else rng.choice(d, h, replace=False).tolist()
            for _ in range(m)
        ]
        if any(len(set(s)) < h for s in selections):
            continue
        lacking = [len(set(a) - set(b)) for a, b in itertools.permutations(selections, 2)]
        share = float(np.mean(lacking)) / h
        low_q, high_q = wilson(share, h * m / 2)
        got = stability_index(selections, d)
        assert got.index == pytest.approx(1 - share / (1 - h / d), abs=1e-12)
        assert got.low == pytest.approx(max(-1, 1 - high_q / (1 - h / d)), abs=1e-12), trial
        assert got.high == pytest.approx(min(1, 1 - low_q / (1 - h / d)), abs=1e-12), trial


def test_the_interval_narrows_with_more_resamples_and_is_wide_on_noise() -> None:
    """A settled top (every resample agrees) reads narrower the more resamples; selections at
    random read about 0 with a wide interval."""
    settled = [stability_index([list(range(10))] * m, 1000) for m in (2, 4, 8)]
    assert [round(s.low, 2) for s in settled] == [0.72, 0.84, 0.91]
    rng = np.random.default_rng(5)
    noise = stability_index([rng.choice(50, 10, replace=False) for _ in range(4)], 50)
    assert noise.low < 0.0 < noise.high and noise.high - noise.low > 0.3


def test_the_interval_covers_the_population_index() -> None:
    """Selections drawn from a known population (each a noisy ranking of fixed scores): the
    95% interval of 12 selections (and of 4, the default's) covers the population's index (from
    4000 of them) in at least 95% of draws: Wilson's interval over h M / 2 trials is
    conservative (module docstring of ``stability``; 100% of these draws)."""
    rng = np.random.default_rng(1)
    d, h = 60, 8
    scores = np.linspace(3, 0, d)

    def draw(count: int) -> list[np.ndarray]:
        return [order_by_score(scores + rng.normal(0, 0.4, d), h) for _ in range(count)]

    population = stability_index(draw(4000), d).index
    for m in (4, 12):
        covered = [
            (s := stability_index(draw(m), d)).low <= population <= s.high for _ in range(300)
        ]
        assert np.mean(covered) >= 0.95, (m, np.mean(covered))


# -- the subsamples ------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [2, 3, 5])
def test_rows_are_dealt_by_position_balanced_and_blind_to_periods(k: int) -> None:
    dealt = groups_of_rows(0, 6000, k)
    for block in dealt.reshape(-1, k):
        assert sorted(block) == list(range(k))  # every block of K rows: one row to each
    # Any cut of the stream deals the same rows the same way (replays, coalescing).
    pieces = [groups_of_rows(start, 700, k) for start in range(0, 6000, 700)]
    np.testing.assert_array_equal(np.concatenate(pieces)[:6000], dealt)
    np.testing.assert_array_equal(groups_of_rows(13, 29, k), dealt[13:42])
    # A stream that alternates two classes (or any period) is not split by class.
    for period in (2, 3, k):
        phase = np.arange(6000) % period
        for g in range(k):
            shares = np.bincount(phase[dealt == g], minlength=period) / np.sum(dealt == g)
            np.testing.assert_allclose(shares, 1 / period, atol=0.05)


def test_a_state_without_resamples_keeps_working_without_an_estimate() -> None:
    """Params stored before resamples existed resolve (as stored) to none; such a state has
    no subsample fields, updates as before and has no resample scores."""
    method = METHODS["fsds"]
    resolved = method.resolve_params({}, 6).as_params()
    stored = {k: v for k, v in resolved.items() if k != "resamples"}
    assert method.resolve_params(stored, 6, stored=True).as_params() == stored
    params = method.resolve_params(stored, 6, stored=True)
    state = method.initial_state(params)
    assert not [f for f in state if f.startswith("resample")]
    state = method.update(state, params, np.random.default_rng(3).standard_normal((9, 6)))
    assert isinstance(method, ResampledMethod)
    assert method.resample_scores(state, params) is None
    # ... and a state with resamples, given params of the old kind, updates its own fields.
    fresh = method.resolve_params({}, 6)
    assert fresh.as_params()["resamples"] == DEFAULT_RESAMPLES == 4


def test_the_band_scales_are_the_monte_carlo_ratios() -> None:
    rng = np.random.default_rng(11)
    n = 200_000
    for k, scale in BAND_SCALE.items():
        x = np.hstack([np.zeros((n, 1)), rng.standard_normal((n, k))])
        g = rng.standard_normal((n, k))
        e = np.hstack([np.zeros((n, 1)), g - g.mean(axis=1, keepdims=True)])
        ratio = np.ptp(x, axis=1).mean() / (math.sqrt(k) * np.ptp(e, axis=1).mean())
        assert ratio == pytest.approx(scale, rel=0.01), k


def test_replicates_scale_the_subsamples_deviations_to_the_whole_stream() -> None:
    """r_g = ŝ + (ŝ_g - mean ŝ_j) / sqrt(K) on unit-length scores (BAND_SCALE for the bands);
    the subsamples' own rankings where the method's scores are not scaled."""
    scores = np.array([3.0, 4.0])  # unit: (0.6, 0.8)
    resampled = np.array([[5.0, 0.0], [0.0, 2.0]])  # unit: (1, 0) and (0, 1); mean (0.5, 0.5)
    replicates = replicate_scores(scores, resampled)
    assert replicates is not None
    deviation = np.array([0.5, -0.5])
    np.testing.assert_allclose(replicates[0], [0.6, 0.8] + deviation / math.sqrt(2))
    np.testing.assert_allclose(replicates[1], [0.6, 0.8] - deviation / math.sqrt(2))
    for_bands = replicate_scores(scores, resampled, for_bands=True)
    assert for_bands is not None
    np.testing.assert_allclose(for_bands[0], [0.6, 0.8] + deviation * BAND_SCALE[2])
    as_they_are = replicate_scores(scores, resampled, corrected=False)
    assert as_they_are is not None
    np.testing.assert_allclose(as_they_are, [[1.0, 0.0], [0.0, 1.0]])


def test_replicates_of_agreeing_subsamples_are_the_ranking_itself() -> None:
    scores = np.array([3.0, 1.0, 2.0, 0.5])
    same = np.vstack([scores * 2, scores * 5])  # one ranking, any scale
    replicates = replicate_scores(scores, same)
    assert replicates is not None
    for row in replicates:
        np.testing.assert_allclose(row, scores / np.linalg.norm(scores))
    assert replicate_scores(scores, np.vstack([scores, np.zeros(4)])) is None  # not yet
    answer = assess(scores, same, 2)
    assert answer is not None and answer.stability.index == 1.0
    np.testing.assert_array_equal(answer.bands, [[1, 1], [2, 2]])


# -- against the truth: independently resampled streams --------------------------------------------


def stream_through(method_name: str, x: np.ndarray, y: np.ndarray, params: dict[str, Any]) -> Any:
    method = METHODS[method_name]
    resolved = method.resolve_params(params, x.shape[1])
    state = method.initial_state(resolved)
    for start in range(0, x.shape[0], 100):
        rows = x[start : start + 100]
        chunk = (
            labelled(rows, [int(v) for v in y[start : start + 100]])
            if method.chunk_kind == "labelled rows"
            else rows
        )
        state = method.update(state, resolved, chunk)
    return method, resolved, state


def truth_and_estimate(
    method_name: str,
    x: np.ndarray,
    y: np.ndarray,
    h: int,
    params: dict[str, Any],
    truth_of: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
) -> tuple[float, float, float, float]:
    """The index over 20 bootstrap resamples of the rows, each streamed through the method
    (or scored by ``truth_of``: what the estimate estimates, where that is not the method's
    own stream), and the mean band width over pairs of them (the current ranking and two
    resamples: what a band of K = 2 is); then the mean of the online estimate and band width
    over 8 stream orders. With two subsamples, as the bands' truth (pairs of resamples) is
    written: the default's interval is validated in EVALUATION.md (``evaluation/intervals``)."""
    n, d = x.shape
    params = {"resamples": 2, **params}
    method, resolved, state = stream_through(method_name, x, y, params)

    def scored(rows: np.ndarray) -> np.ndarray:
        if truth_of is not None:
            return truth_of(x[rows], y[rows])
        _, _, replicate = stream_through(method_name, x[rows], y[rows], params)
        return np.asarray(method.weights(replicate, resolved))

    current = order_by_score(scored(np.arange(n)), h)
    resampled = []
    for r in range(20):
        resampled.append(scored(np.asarray(np.random.default_rng(100 + r).integers(0, n, n))))
    weights = np.array(resampled)
    truth = stability_index([order_by_score(w, h) for w in weights], d).index
    ranks = ranks_of(weights, current)
    widths = [
        np.ptp(bands(np.arange(1, h + 1), ranks[[a, b]]), axis=1).mean()
        for a, b in itertools.combinations(range(20), 2)
    ]
    estimates, online_widths = [], []
    for r in range(8):
        order = np.random.default_rng(200 + r).permutation(n)
        method, resolved, state = stream_through(method_name, x[order], y[order], params)
        assessed = estimate(method, state, resolved, h)
        estimates.append(assessed.stability.index)
        online_widths.append(np.ptp(assessed.bands, axis=1).mean())
    return truth, float(np.mean(estimates)), float(np.mean(widths)), float(np.mean(online_widths))


#: (method, data, h, params, how far below and above the truth the mean estimate may be).
#: Why these tolerances: one stream's estimate compares two resamples, so it takes a few
#: discrete values (0.89 for one feature of ten exchanged) and varies (standard deviation
#: 0.04-0.09 on these sets); the mean of 8 orders has a standard error of 0.015-0.035. For the
#: methods whose scores are smooth functions of class or feature means (variance, OCFS, IOC's
#: OC solution) the scaled subsamples, one of them derived from the whole stream's statistics
#: (exactly: ``test_subsamples``), are unbiased to that precision: 0.08 either way, about 2.5
#: standard errors (seen: within 0.025 here, 0.07 in EVALUATION.md with other seeds). FSDS
#: compares its subsamples as they are (``stability.replicate_scores``; one sketch derived as the
#: whole sketch minus the other, within both shrinkages): the index of n/2 rows, below the truth
#: of n rows while the ranking still settles (0.09 and 0.07 below on digits, its kept scores of
#: up to a tenth fewer rows; 0.07 on COIL20; 0.12 with sketches of their own in the first
#: implementation), and never much above it: 0.2
#: below, 0.05 above.
VALIDATED: list[tuple[str, str, int, dict[str, Any], tuple[float, float]]] = [
    ("variance", "COIL20", 10, {}, (0.08, 0.08)),
    ("variance", "COIL20", 20, {}, (0.08, 0.08)),
    ("ocfs", "COIL20", 10, {}, (0.08, 0.08)),
    ("variance", "digits", 10, {}, (0.08, 0.08)),
    ("fsds", "digits", 10, {}, (0.2, 0.05)),
    ("fsds", "digits", 20, {}, (0.2, 0.05)),
]


def dataset(name: str) -> tuple[np.ndarray, np.ndarray]:
    if name == "digits":
        x, y = load_digits(return_X_y=True)
    else:
        x, y = load_mat(f"{name}.mat")
    return np.asarray(x, dtype=np.float64), np.asarray(y)


@pytest.mark.parametrize(("method", "data", "h", "params", "tolerance"), VALIDATED)
def test_the_online_estimate_agrees_with_resampled_streams(
    method: str, data: str, h: int, params: dict[str, Any], tolerance: tuple[float, float]
) -> None:
    x, y = dataset(data)
    truth, estimate, truth_width, width = truth_and_estimate(method, x, y, h, params)
    below, above = tolerance
    assert truth - below <= estimate <= truth + above, (truth, estimate)
    # Bands: the current ranking and two replicates against the current ranking and two
    # resamples. Ranks are whole numbers and the top features barely move (widths of one to
    # four ranks), so the discreteness alone costs a fifth: within 0.6 to 1.3 of the truth
    # where the subsamples are scaled; half-samples as they are spread wider (up to 2.5).
    widest = 1.3 if METHODS[method].stability_corrected else 2.5  # type: ignore[attr-defined]
    assert 0.6 * truth_width <= width <= widest * truth_width, (truth_width, width)


@pytest.mark.slow
def test_ioc_agrees_with_resamples_of_the_solution_it_converges_to() -> None:
    """IOC's subsamples are ranked by the exact OC solution of their class statistics (the
    ranking IOC converges to), so the truth is that solution on bootstrap resamples of the rows
    (0.91 on digits; the estimate 0.93). IOC's own iterates on resampled streams of digits'
    1797 rows have not settled and agree less (0.82): the index is not theirs."""
    x, y = dataset("digits")

    def converged(rows: np.ndarray, labels: np.ndarray) -> np.ndarray:
        classes = np.unique(labels)
        counts = np.array([np.sum(labels == c) for c in classes])
        sums = np.stack([rows[labels == c].sum(axis=0) for c in classes])
        vectors, values = exact_directions(counts, sums, 3)
        return np.asarray((vectors**2) @ values)

    truth, estimate, truth_width, width = truth_and_estimate(
        "ioc", x, y, 10, {"n_components": 3}, converged
    )
    assert abs(estimate - truth) <= 0.08, (truth, estimate)
    assert 0.6 * truth_width <= width <= 1.3 * truth_width, (truth_width, width)


# -- what users see: settled streams high, noise low ------------------------------------------


def synthetic(rng: np.random.Generator, n: int, signal: float) -> np.ndarray:
    """100 features; the first 10 vary ``1 + signal`` times more than the rest."""
    scale = np.ones(100)
    scale[:10] = 1 + signal * np.linspace(1.5, 1.0, 10)
    return rng.standard_normal((n, 100)) * scale


@pytest.mark.parametrize("method_name", ["variance", pytest.param("fsds", marks=pytest.mark.slow)])
def test_a_stationary_stream_gets_a_high_index_that_rises_with_rows(method_name: str) -> None:
    method = METHODS[method_name]
    assert isinstance(method, ResampledMethod)
    params = method.resolve_params({}, 100)
    rng = np.random.default_rng(5)
    x = synthetic(rng, 40_000, 0.5)
    indices = []
    for stop in (400, 4000, 40_000):
        means = []
        for seed in range(4):  # four stream orders each
            state = method.initial_state(params)
            order = np.random.default_rng(seed).permutation(stop)
            for start in range(0, stop, 2000):
                state = method.update(state, params, x[:stop][order[start : start + 2000]])
            assessed = estimate(method, state, params, 10)
            means.append(assessed.stability.index)
        indices.append(float(np.mean(means)))
    # It rises, then settles: past a few thousand rows the top 10 is as settled as the
    # subsamples can tell, and four stream orders scatter by a few hundredths.
    assert indices[0] < min(indices[1:]) or indices[0] == 1.0, indices
    assert indices[2] >= indices[1] - 0.05, indices
    assert indices[2] >= 0.85, indices


@pytest.mark.parametrize("method_name", ["variance", "fsds"])
def test_noise_and_few_rows_get_a_low_index(method_name: str) -> None:
    method = METHODS[method_name]
    assert isinstance(method, ResampledMethod)
    params = method.resolve_params({}, 100)
    for n, signal in (
        (20_000, 0.0),
        (60, 0.1),
    ):  # nothing stands out; too few rows for a weak signal
        values = []
        for seed in range(6):
            state = method.update(
                method.initial_state(params),
                params,
                synthetic(np.random.default_rng(seed), n, signal),
            )
            assessed = estimate(method, state, params, 10)
            values.append(assessed.stability.index)
        assert np.mean(values) < 0.35, (n, signal, values)
