"""OFS: online leverage scores for feature selection (Wang, Shen & Li, "Provable Variable
Selection for Streaming Features", Algorithm 1).

The ``n`` samples are fixed; feature columns ``a_i`` (length ``n``) arrive one at a time and each
is kept or discarded at once. With ``A~_{i-1}`` the kept, rescaled columns so far (steps 3-5)::

    s_i  = a_i^T (A~_{i-1} A~_{i-1}^T + ridge I)^+ a_i      (eq. (3.2); with ridge > 0, eq. (2.1))
    l~_i = min((1 + epsilon) s_i, 1)                         (eq. (3.3), step 3)
    p_i  = min(c l~_i, 1)                                    (eq. (3.4), step 4)
    keep with probability p_i and append a_i / sqrt(p_i)     (step 5)

The selected matrix ``A~`` then goes to k-means on its ``n`` rows (section 3.2 / section 4,
``cluster_samples``): with a probability that grows with ``c``,
``(1 - eps) A A^T <= A~ A~^T <= (1 + eps) A A^T`` (Theorem 1), so the k-means cost of every
partition is kept within ``1 +- eps`` (Lemma 3) and the optimum within ``(1+eps)/(1-eps)``
(Theorem 2).

Start of the stream (``ridge = 0``). The paper assumes an initial ``A~_0``; without one the bare
pseudo-inverse gives ``s = 0`` to every column outside ``span(A~_{i-1})`` (the pseudo-inverse
ignores that part), nothing would ever be kept and the stream would never start. Such a column gets
``l~ = 1`` (kept for sure when ``c >= 1``). That is its exact leverage inside ``[A~_{i-1}, a_i]``: a
column with a direction no other column has is needed to reproduce the row space, so its hat
matrix diagonal is 1; equivalently it is the limit ``lambda -> 0`` of the clipped ridge score (the
ridge score of the new part is ``||residual||^2 / lambda -> infinity``). A column counts as new when
the residual of its projection on the span has relative norm above ``SPAN_TOL``. A zero column has
``s = 0``, ``p = 0`` and is never kept.

Incremental state, no pseudo-inverse per column (``O(n r)`` / ``O(n^2)`` per column, never
``O(n^3)``):

* ``ridge = 0``: an orthonormal basis ``Q`` (``n x r``) of ``span(A~)`` (extended by Gram-Schmidt,
  re-orthogonalised, whenever a new direction is kept) and the lower Cholesky factor ``L`` of the
  ``r x r`` Gram ``Q^T A~ A~^T Q = L L^T``; ``s = ||L^-1 Q^T a||^2`` for a column in the span.
* ``ridge > 0``: the lower Cholesky factor of ``A~ A~^T + ridge I`` (``n x n``), starting at
  ``sqrt(ridge) I``; ``s = ||L^-1 a||^2``. No span test is needed: a new direction simply gets a
  large score (``||residual||^2 / ridge``), clipped to 1. Memory is ``O(n^2)`` here.

Columns are handled in blocks of ``BLOCK`` (one matrix product and one triangular solve per block
instead of one per column) but strictly in order, each decision using exactly the factor left by
the previous column: a kept column updates the other columns' solves through the closed form of
``chol(I + p p^T)^-1`` (``service.algorithms.leverage``) and the factor itself is updated once per
block by a rank-k Householder (``dtpqrt``) update. Batching therefore changes rounding only (scores
agree to ~1e-12 relative): decisions are identical unless a uniform falls within rounding of its
``p_i``.

Randomness is counter-based: the uniform of feature ``i`` (0-based over the whole stream) is
``np.random.default_rng([seed, i]).random()`` and the feature is kept iff it is ``< p_i``. It does
not depend on how columns are batched or on restarts, so the persisted state needs no generator,
only ``features_seen``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Integral
from typing import Any, ClassVar

import numpy as np
from pydantic import Field
from scipy.linalg import solve_triangular

from service.algorithms.base import ChunkKind, Decision, MethodBase, State
from service.algorithms.examples import Example
from service.algorithms.leverage import (
    batch_leverage_scores,
    cholesky_add_columns,
    rank_one_factor,
    rank_one_solve,
)
from service.algorithms.params import MethodParams, computed
from service.errors import Conflict, Inconsistent, InvalidInput, InvalidParams

__all__ = [
    "OFS",
    "SPAN_TOL",
    "Decision",
    "batch_leverage_scores",
    "cluster_samples",
    "recorded_decisions",
]

DEFAULT_EPSILON = 0.5
#: Relative residual ``||a - Q Q^T a|| / ||a||`` above which a column is a new direction. It is
#: ~sqrt(machine eps): the residual of a column that lies in the span, computed against ``Q``
#: (orthonormal to rounding: every new vector is orthogonalised twice), is at rounding level
#: (~1e-13 for n <= 1e4), far below; and a part below
#: it has squared relative size < 1e-16, below the float64 resolution of ``a^T a`` itself, so it
#: would be invisible in ``A~ A~^T`` anyway. Such a part is dropped from the factor.
SPAN_TOL = 1e-8
#: Columns per block: the per-block products are BLAS-3, and a kept column costs O(r * BLOCK) on
#: the rest of its block, below the O(r^2) factor update it causes anyway.
BLOCK = 128


# -- parameters -----------------------------------------------------------------------------


class OFSParams(MethodParams):
    """Wang, Shen & Li, Algorithm 1 (see docs/methods/ofs.md)."""

    method: ClassVar[str] = "ofs"

    epsilon: float = Field(DEFAULT_EPSILON, gt=0, lt=1, description="Approximation error.")
    c: float = computed("Sampling rate (default 8 epsilon^-2 log n).", gt=0)
    ridge: float = Field(0.0, ge=0, description="Ridge lambda (0: the paper's pseudo-inverse).")
    seed: int = Field(0, ge=0, lt=2**63, description="Seed of the keep/discard draws.")

    def complete(self, size: int, stored: bool) -> None:
        if self.c is not None:
            return
        # Algorithm 1's sampling rate c = 8 eps^-2 log n (natural log).
        # A tiny epsilon makes it overflow: a float's range is a parameter's range too.
        squared = self.epsilon * self.epsilon
        self.c = 8.0 * math.log(size) / squared if squared > 0 else math.inf
        if not math.isfinite(self.c):
            raise InvalidParams(
                f"the default c = 8 epsilon^-2 log(n_samples) overflows for epsilon = "
                f"{self.epsilon}; pass a larger epsilon, or c explicitly"
            )
        if self.c <= 0:
            raise InvalidParams(
                f"the default c = 8 epsilon^-2 log(n_samples) is 0 for n_samples = {size}; "
                "pass c > 0 explicitly"
            )


# -- state helpers --------------------------------------------------------------------------


def _array(state: State, key: str) -> np.ndarray:
    if key not in state:
        raise InvalidInput(f"state has no {key!r}; expected an OFS state")
    return np.asarray(state[key])


def _int(state: State, key: str) -> int:
    value = state.get(key)
    if value is None:
        raise InvalidInput(f"state has no {key!r}; expected an OFS state")
    return int(np.asarray(value))


def _uniform(seed: int, index: int) -> float:
    """The uniform of feature ``index``: counter-based, see the module docstring."""
    return float(np.random.default_rng([seed, index]).random())


@dataclass
class _Factor:
    """Working copy of the factor (never aliases a state array that is written)."""

    ridge: bool
    lower: np.ndarray  # r x r (r = n when ridge)
    basis: np.ndarray  # n x capacity; columns [:rank] are Q (unused when ridge)
    rank: int
    #: The state's own basis array, never written (the buffer replaces it on first growth).
    shared: np.ndarray | None = None

    @classmethod
    def from_state(cls, state: State, cfg: OFSParams, n: int) -> _Factor:
        stored_ridge = float(np.asarray(state.get("ridge", 0.0)))
        if stored_ridge != cfg.ridge:
            raise InvalidInput(
                f"state was built with ridge={stored_ridge}; params say ridge={cfg.ridge}"
            )
        lower = np.asarray(_array(state, "cholesky"), dtype=np.float64)
        basis = np.asarray(_array(state, "basis"), dtype=np.float64)
        r = basis.shape[1] if basis.ndim == 2 else -1
        expected_r = n if cfg.ridge > 0 else r
        if (
            basis.ndim != 2
            or basis.shape[0] != n
            or r > n
            or (cfg.ridge > 0 and r != 0)
            or lower.shape != (expected_r, expected_r)
        ):
            expected = "(n, 0) and (n, n)" if cfg.ridge > 0 else "(n, r) and (r, r), r <= n"
            raise InvalidInput(
                f"state factor has basis {basis.shape} and cholesky {lower.shape}; with "
                f"n_samples={n} and ridge={cfg.ridge} expected shapes {expected}"
            )
        rank = n if cfg.ridge > 0 else r
        return cls(ridge=cfg.ridge > 0, lower=lower, basis=basis, rank=rank, shared=basis)

    def basis_now(self) -> np.ndarray:
        return self.basis[:, : self.rank] if not self.ridge else self.basis

    def grow(self, room: int) -> None:
        """Make room for one more basis vector (and ``room - 1`` after it) in an own buffer.

        The state's basis is only copied when a new direction is actually kept, so calls that
        keep none (or only columns in the span) never copy the ``n x r`` array.
        """
        n, r = self.basis.shape[0], self.rank
        if self.basis is not self.shared and self.basis.shape[1] > r:
            return
        buffer = np.empty((n, min(n, r + max(room, 1))))
        buffer[:, :r] = self.basis[:, :r]
        self.basis = buffer

    def project(self, block: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Coefficients ``Q^T a`` and residuals ``a - Q Q^T a`` (None when nothing can be new)."""
        if self.ridge:
            return block, None
        q = self.basis_now()
        if self.rank == 0:
            return np.zeros((0, block.shape[1])), block.copy()
        coef = q.T @ block
        if self.rank == block.shape[0]:
            return coef, None  # Q spans R^n: no column can bring a new direction
        # One classical Gram-Schmidt pass: its rounding error (~sqrt(r) eps ||a||) is far below
        # SPAN_TOL ||a||, so the span test is unaffected; the direction of a column that is kept
        # as new is orthogonalised a second time in _block.
        return coef, block - q @ coef

    def solve(self, coef: np.ndarray) -> np.ndarray:
        if self.lower.shape[0] == 0:
            return np.zeros_like(coef)
        return np.asarray(solve_triangular(self.lower, coef, lower=True, check_finite=False))


def _check_columns(columns: np.ndarray, n: int) -> np.ndarray:
    cols = np.asarray(columns, dtype=np.float64)
    if cols.ndim != 2 or cols.shape[0] != n:
        raise InvalidInput(
            f"columns must be a 2-D array of shape (n_samples={n}, c); got shape {cols.shape}"
        )
    return cols


# -- the method -----------------------------------------------------------------------------


class OFS(MethodBase[OFSParams]):
    """Online leverage-score feature selection (Algorithm 1) over a stream of feature columns.

    State (flat; arrays float64 unless said): ``n_samples``, ``features_seen``, ``ridge`` (the
    mode the factor was built for), ``basis`` (``Q``, ``n x r``; ``n x 0`` when ``ridge > 0``),
    ``cholesky`` (lower ``L``: ``r x r`` with ``L L^T = Q^T A~ A~^T Q``, or ``n x n`` with
    ``L L^T = A~ A~^T + ridge I``), ``kept_columns`` (``A~``, ``n x kept``, rescaled),
    ``kept_indices`` (int64), ``kept_scales`` (``1 / sqrt(p)``), ``leverage`` and ``probability``
    (one entry per feature seen). Nothing else grows with discarded features.

    States are values: ``add_features`` never writes into the arrays of its input; arrays that did
    not change are shared with the returned state. A call that keeps something therefore copies
    ``kept_columns`` (``O(n kept)``) and the factor (``O(r^2)``) once per call, which dominates
    when columns come one per call (see ``BENCHMARKS.md``, OFS).
    """

    name = "ofs"
    paper = 'Wang, Shen & Li, "Provable Variable Selection for Streaming Features" (Algorithm 1)'
    chunk_kind: ChunkKind = "columns"
    params_model = OFSParams
    examples: tuple[Example, ...] = (
        Example({"n_samples": 6}, {"epsilon": 0.5, "seed": 3}, items=2),
    )
    score_field = "leverage"
    #: The kept columns (n x kept) are read only by ``cluster``: from a checkpoint.
    served_from_checkpoints: tuple[str, ...] = ("kept_columns",)
    #: ``DecidesOnArrival``: the decisions are read back from these.
    decision_fields: tuple[str, ...] = ("leverage", "probability", "kept_indices", "kept_scales")
    #: ``Clusters``: k-means runs on the kept, rescaled columns.
    cluster_fields: tuple[str, ...] = ("kept_columns",)

    def update(self, state: State, params: OFSParams, rows: np.ndarray) -> State:
        """The service's entry point: ``rows`` holds new feature columns (``n x c``).

        The decisions are not returned here: they are recorded in the state (``leverage``,
        ``probability``, ``kept_indices``, ``kept_scales``) and read back with
        ``recorded_decisions``, so any later reader gets exactly what Algorithm 1 decided.
        """
        new_state, _decisions = self.add_features(state, params, rows)
        return new_state

    def initial_state(self, params: OFSParams) -> State:
        n = int(params.size)
        lower = math.sqrt(params.ridge) * np.eye(n) if params.ridge > 0 else np.zeros((0, 0))
        return {
            "n_samples": n,
            "features_seen": 0,
            "features_kept": 0,
            "ridge": params.ridge,
            "basis": np.zeros((n, 0)),
            "cholesky": lower,
            "kept_columns": np.zeros((n, 0)),
            "kept_indices": np.zeros(0, dtype=np.int64),
            "kept_scales": np.zeros(0),
            "leverage": np.zeros(0),
            "probability": np.zeros(0),
        }

    def state_sizes(self, params: OFSParams) -> dict[str, int]:
        # Only the ridge factor is there from the start; the rest grows with kept columns.
        return {"cholesky": 8 * int(params.size) ** 2 if params.ridge > 0 else 0}

    def add_features(
        self, state: State, params: OFSParams, columns: np.ndarray
    ) -> tuple[State, list[Decision]]:
        """Steps 2-5 for each column of ``columns`` (``n x c``), in order, as if sent one by one."""
        n = _int(state, "n_samples")
        cols = _check_columns(columns, n)
        seen = _int(state, "features_seen")
        total = cols.shape[1]
        factor = _Factor.from_state(state, params, n)
        rank_before = factor.rank
        lower_before = factor.lower

        decisions: list[Decision] = []
        for start in range(0, total, BLOCK):
            block = cols[:, start : start + BLOCK]
            decisions += self._block(factor, params, block, seen + start, total - start)
        leverage = np.array([d.leverage for d in decisions], dtype=np.float64)
        probability = np.array([d.probability for d in decisions], dtype=np.float64)
        kept_idx = [d.index for d in decisions if d.kept]
        kept_scale = [d.scale for d in decisions if d.kept]

        new: State = dict(state)
        new["features_seen"] = seen + total
        new["leverage"] = np.concatenate([_array(state, "leverage"), leverage])
        new["probability"] = np.concatenate([_array(state, "probability"), probability])
        if kept_idx:
            local = np.asarray(kept_idx, dtype=np.int64) - seen
            scales = np.asarray(kept_scale)
            new["kept_columns"] = np.hstack(
                [_array(state, "kept_columns"), cols[:, local] * scales]
            )
            kept_indices = np.concatenate(
                [_array(state, "kept_indices").astype(np.int64), local + seen]
            )
            new["kept_indices"] = kept_indices
            new["kept_scales"] = np.concatenate([_array(state, "kept_scales"), scales])
            new["features_kept"] = int(kept_indices.size)
        if factor.lower is not lower_before:
            new["cholesky"] = factor.lower
        if factor.rank != rank_before:
            new["basis"] = factor.basis[:, : factor.rank].copy()
        return new, decisions

    @staticmethod
    def _block(
        factor: _Factor, cfg: OFSParams, block: np.ndarray, first: int, remaining: int
    ) -> list[Decision]:
        """One block of columns, strictly in order (see the module docstring).

        Invariant before column ``j``: ``w[:r, k] = L^-1 coef[:r, k]`` for every later ``k``, where
        ``L`` is the factor after all kept columns before ``j`` and ``coef[:r, k]`` the coordinates
        of column ``k`` in the current basis (its residual ``resid[:, k]`` is orthogonal to it).
        """
        n, b = block.shape
        coef0, resid = factor.project(block)
        r = factor.rank
        rows = n if factor.ridge else min(n, r + b)
        coef = np.zeros((rows, b))
        coef[:r] = coef0
        w = np.zeros((rows, b))
        w[:r] = factor.solve(coef0)
        norms = np.linalg.norm(block, axis=0)
        updates = np.zeros((rows, b))  # coordinates of the kept, rescaled columns
        decisions: list[Decision] = []
        kept = 0
        for j in range(b):
            rho = 0.0
            is_new = False
            score = 0.0
            if norms[j] > 0:
                if resid is not None:
                    rho = float(np.linalg.norm(resid[:, j]))
                    is_new = rho > SPAN_TOL * norms[j] and r < n
                if not is_new:
                    score = float(w[:r, j] @ w[:r, j])
            decision = _decide(cfg, first + j, score, exact=is_new)
            decisions.append(decision)
            if not decision.kept:
                continue
            scale = decision.scale
            # G <- G + x x^T with x = scale * coef[:, j]; p = L^-1 x = scale * w[:, j].
            m = rank_one_factor(w[:r, j] * scale)
            updates[:r, kept] = coef[:r, j] * scale
            rest = slice(j + 1, b)
            if j + 1 < b and r:
                w[:r, rest] = rank_one_solve(m, w[:r, rest])
            if is_new and resid is not None:
                # Gram-Schmidt with re-orthogonalisation against the whole current basis.
                q = resid[:, j] / rho
                basis = factor.basis[:, :r]
                q -= basis @ (basis.T @ q)
                q /= np.linalg.norm(q)
                factor.grow(room=remaining - j)
                factor.basis[:, r] = q
                # New Gram [[G + x1 x1^T, x1 x2], [x2 x1^T, x2^2]]: its factor is
                # [[L M, 0], [x2 beta^T, x2 / sqrt(t_r)]] since M^-1 p = beta and
                # 1 - p^T (I + p p^T)^-1 p = 1 / t_r (no cancellation).
                x2 = float(q @ resid[:, j]) * scale
                delta = x2 / math.sqrt(m.t_last)
                updates[r, kept] = x2
                if j + 1 < b:
                    along = q @ resid[:, rest]
                    resid[:, rest] -= np.outer(q, along)
                    coef[r, rest] = along
                    w[r, rest] = (along - x2 * (m.beta @ w[:r, rest])) / delta
                r += 1
                factor.rank = r
            kept += 1
        if kept:
            factor.lower = cholesky_add_columns(factor.lower, updates[:r, :kept])
        return decisions

    def weights(self, state: State, params: OFSParams) -> np.ndarray:
        """The online leverage ``l~_i`` (eq. (3.3)) of every feature seen so far."""
        return np.array(_array(state, "leverage"), dtype=np.float64)

    def describe(self, state: State) -> dict[str, Any]:
        return {"features_kept": int(np.asarray(state.get("features_kept") or 0))}

    def check_consistency(
        self,
        state: State,
        params: OFSParams,
        segments: Mapping[str, np.ndarray],
    ) -> None:
        """``ChecksState``: one decision per feature seen, the kept ones in order, a factor of
        the shapes ``_Factor`` expects."""
        seen, kept = _int(state, "features_seen"), _int(state, "features_kept")
        indices = _array(state, "kept_indices")
        counts_agree = (
            _int(state, "n_samples") == params.size
            and _array(state, "leverage").shape[0] == seen
            and _array(state, "probability").shape[0] == seen
            and indices.shape[0] == kept
            and _array(state, "kept_scales").shape[0] == kept
            and _array(state, "kept_columns").shape[1] == kept
        )
        if not counts_agree:
            raise Inconsistent(
                f"an ofs state over {params.size} samples has n_samples = that, one leverage and "
                "probability per feature seen, and kept_indices, kept_scales and kept_columns "
                f"for each of the features_kept; got n_samples {state['n_samples']}, "
                f"features_seen {seen}, features_kept {kept}"
            )
        if kept and (np.any(np.diff(indices) <= 0) or indices[0] < 0 or indices[-1] >= seen):
            raise Inconsistent(f"kept_indices must increase strictly within [0, {seen})")
        probability = _array(state, "probability")
        if np.any((probability < 0) | (probability > 1)):
            raise Inconsistent("probabilities must lie in [0, 1]")
        _Factor.from_state(
            state, params, params.size
        )  # the factor's shapes, as every update checks them

    def decisions(self, arrays: Mapping[str, np.ndarray], first: int, count: int) -> list[Decision]:
        return recorded_decisions(
            arrays["leverage"],
            arrays["probability"],
            arrays["kept_indices"],
            arrays["kept_scales"],
            first,
            count,
        )

    def cluster(
        self, arrays: Mapping[str, np.ndarray], k: int, seed: int
    ) -> tuple[np.ndarray, float, int]:
        """k-means of the samples on the kept, rescaled columns (section 4's pipeline)."""
        kept = arrays["kept_columns"]
        if kept.shape[1] == 0:
            raise Conflict("no feature has been kept yet: push feature columns first")
        labels, objective = cluster_samples(kept, k, seed)
        return labels, objective, int(kept.shape[1])

    def kept_matrix(self, state: State) -> np.ndarray:
        """``A~``: the kept columns, already rescaled by ``1 / sqrt(p_i)`` (``n x kept``)."""
        return np.array(_array(state, "kept_columns"), dtype=np.float64)

    def scores(self, state: State, params: OFSParams, columns: np.ndarray) -> np.ndarray:
        """Raw online scores ``s = a^T (A~ A~^T + ridge I)^+ a`` (before step 3's factor and clip)
        of probe columns against the current state, without adding them.

        ``inf`` for a column with a new direction (``ridge = 0``; it would get ``l~ = 1``), 0 for a
        zero column.
        """
        n = _int(state, "n_samples")
        cols = _check_columns(columns, n)
        factor = _Factor.from_state(state, params, n)
        coef, resid = factor.project(cols)
        w = factor.solve(coef)
        out = np.einsum("ij,ij->j", w, w)
        norms = np.linalg.norm(cols, axis=0)
        out[norms == 0] = 0.0
        if resid is not None:
            out[np.linalg.norm(resid, axis=0) > SPAN_TOL * norms] = np.inf
        return np.asarray(out)


def recorded_decisions(
    leverage: np.ndarray,
    probability: np.ndarray,
    kept_indices: np.ndarray,
    kept_scales: np.ndarray,
    first: int,
    count: int,
) -> list[Decision]:
    """The decisions of features ``first .. first + count - 1`` as recorded in a state.

    Algorithm 1 never revisits a decision, so every later state answers the same: this is how a
    request learns what happened to its columns however its entry was batched or retried.
    """
    stop = first + count
    if first < 0 or count < 0 or stop > leverage.size:
        raise InvalidInput(
            f"features {first}..{stop - 1} are not all decided; {leverage.size} seen so far"
        )
    where = np.searchsorted(kept_indices, np.arange(first, stop))
    decisions = []
    for offset, index in enumerate(range(first, stop)):
        slot = int(where[offset])
        kept = slot < kept_indices.size and int(kept_indices[slot]) == index
        decisions.append(
            Decision(
                index=index,
                leverage=float(leverage[index]),
                probability=float(probability[index]),
                kept=kept,
                scale=float(kept_scales[slot]) if kept else 0.0,
            )
        )
    return decisions


def cluster_samples(kept: np.ndarray, k: int, seed: int) -> tuple[np.ndarray, float]:
    """k-means on the ``n`` rows of ``A~`` (section 3.2 and the pipeline of section 4).

    scikit-learn ``KMeans(n_clusters=k, n_init=10, random_state=seed)``; returns the labels of
    the samples and the objective (3.5) (inertia) on ``A~``.
    """
    from sklearn.cluster import KMeans

    x = np.asarray(kept, dtype=np.float64)
    if x.ndim != 2:
        raise InvalidInput(f"kept must be a 2-D matrix (samples x kept features); got {x.shape}")
    n, width = x.shape
    if width == 0:
        raise InvalidInput("no features kept: A~ has 0 columns; expected at least one")
    if isinstance(k, bool) or not isinstance(k, Integral) or not 1 <= int(k) <= n:
        raise InvalidInput(f"k must be an integer in [1, n_samples={n}]; got {k!r}")
    if isinstance(seed, bool) or not isinstance(seed, Integral) or not 0 <= int(seed) < 2**32:
        raise InvalidInput(f"seed must be an integer in [0, 2**32); got {seed!r}")
    if not np.all(np.isfinite(x)):
        raise InvalidInput("kept contains non-finite values; expected finite numbers")
    model = KMeans(n_clusters=int(k), n_init=10, random_state=int(seed)).fit(x)
    return np.asarray(model.labels_, dtype=np.int64), float(model.inertia_)


def _decide(cfg: OFSParams, index: int, score: float, exact: bool) -> Decision:
    """Steps 3-5 for one column: its leverage (eq. (3.3)), probability (eq. (3.4)) and draw.

    A column outside the current span (``exact``) has leverage 1; p = 0 is never kept.
    """
    lev = 1.0 if exact else min((1.0 + cfg.epsilon) * score, 1.0)  # eq. (3.3)
    prob = min(cfg.c * lev, 1.0)  # eq. (3.4)
    keep = _uniform(cfg.seed, index) < prob  # step 5
    scale = 1.0 / math.sqrt(prob) if keep else 0.0
    return Decision(index=index, leverage=lev, probability=prob, kept=keep, scale=scale)
