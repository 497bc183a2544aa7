"""FSDS: unsupervised feature selection on data streams (Huang et al., CIKM 2015).

Each chunk ``Y_t`` (rows = samples) is normalised row-wise (section 3.1), folded into a
Frequent-Directions sketch (Algorithm 2 STREAMFEATWEIGHT, steps 1-4; see
``service.algorithms.sketching``), and the feature weights are re-derived from the sketch by
ridge regression onto the top-``k`` singular directions (steps 5-7, eq. (5), Lemma 3.3)::

    alpha = 2**i * s_k                                   (section 5.1, default i = 3)
    w_f   = max_{j <= k} |u_fj| s_j / (s_j^2 + alpha)    (eq. (4) on Lemma 3.3's solution)
          = max_{j <= k} |sketch_rows[j, f]| / (s_j^2 + alpha)

with the term defined as 0 where ``s_j = 0``. When the stream so far has rank < ``ell`` nothing
is shrunk and the weights equal the batch GENFEATWEIGHT with p = 2 (``gfw_p2_weights``).

Gaussian kernel (``kernel="gaussian"``; the paper's image experiments use random Fourier
features [24], section 5.1). The cosine affinity ``Y^T Y`` of section 3.2 (paper orientation,
``Y`` is ``m x n``) is replaced by ``K ~ Z^T Z`` with ``Z = rff(Y)`` (``D x n``), so the
regression target becomes the top-``k`` right singular vectors ``V_k(Z)``, while the design
matrix stays the original features (weights must be over the ``m`` input features)::

    X = argmin ||Y^T X - V_k(Z)||_F^2 + alpha ||X||_F^2 = (Y Y^T + alpha I)^-1 Y V_k(Z).

Streaming: sketch the stacked samples ``[y | z]`` jointly, ``S = [S_Y | S_Z]`` (``ell x (m+D)``)
with ``S^T S ~ [Y; Z] [Y; Z]^T`` (paper orientation). Then ``Y Y^T ~ S_Y^T S_Y`` and
``Y Z^T ~ S_Y^T S_Z``; writing ``S_Z = P Sigma_Z Q^T``, ``V_k(Z)`` corresponds to ``P_k`` (top-``k``
left singular vectors of ``S_Z``, ``ell x k``) and, by the push-through identity,

    X = S_Y^T (S_Y S_Y^T + alpha I)^-1 P_k,   alpha = 2**i * sigma_k(S_Y),   w_f = max_j |X_fj|.

With ``Z = Y`` (so ``S_Z = S_Y = diag(s) U^T``): ``P_k = [e_1..e_k]`` and
``X = U_k diag(s_j / (s_j^2 + alpha))`` -- exactly eq. (5). When nothing was shrunk,
``S = Q [Y; Z]^T`` for an isometry ``Q`` and ``X`` equals the batch ``gfw_p2_kernel_weights``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Literal, cast

import numpy as np
import scipy.sparse as sp
from pydantic import Field

from service.algorithms.base import ChunkKind, Matrix, State
from service.algorithms.kernels import RandomFourierFeatures, median_pairwise_distance
from service.algorithms.params import computed
from service.algorithms.pivoted_qr import ColumnSource, MatrixSource
from service.algorithms.resampling import (
    Dealt,
    ResampledMergeable,
    ResampledParams,
    resample_count,
)
from service.algorithms.sketching import (
    SketchUpdate,
    decay_weights,
    frequent_directions_update,
    normalize_sparse_rows,
)
from service.errors import Inconsistent, InvalidInput, InvalidParams

__all__ = [
    "FSDS",
    "default_block_rows",
    "gfw_p2_kernel_weights",
    "gfw_p2_weights",
    "normalize_rows",
]

_EPS = float(np.finfo(np.float64).eps)
#: Parameters of the gaussian kernel only (refused, and not stored, with the cosine kernel).
_GAUSSIAN_ONLY = ("kernel_components", "kernel_bandwidth", "seed")
#: Default shrink schedule, ``max(BLOCK_ELLS * ell, MIN_BLOCK_ROWS)`` rows (``default_block_rows``).
BLOCK_ELLS = 4
MIN_BLOCK_ROWS = 200
#: Random features D (the paper's ceil(n / k) needs n, which a stream does not know). With D = 512
#: each kernel entry is estimated with standard deviation <= 1/sqrt(D) ~ 0.044, while the sketch
#: width m + D (memory and time) grows linearly in D. On COIL20 (k = 20, top-200 features, k-means
#: NMI) streaming gave 0.76 at D = 128 and 256, 0.78 at 512 and 0.77-0.80 at 1024 (run-to-run
#: spread about 0.02): 512 is the smallest D past the plateau.
DEFAULT_KERNEL_COMPONENTS = 512
#: Rows used for the median-distance bandwidth heuristic (first chunk only).
BANDWIDTH_SAMPLE_ROWS = 1000


# -- parameters -----------------------------------------------------------------------------


class FSDSParams(ResampledParams):
    """Huang et al. 2015, Algorithm 2 (see docs/methods/fsds.md)."""

    method: ClassVar[str] = "fsds"

    k: int = computed("Singular directions, fewer than ell (default min(10, m)).", ge=1)
    ell: int = computed("Sketch rows, more than k (default max(ceil(sqrt(m)), k + 1)).", ge=2)
    alpha_exponent: float = Field(3.0, ge=0, description="i in alpha = 2^i sigma_k.")
    normalize_rows: bool = Field(True, description="Scale every row to unit norm first.")
    block_rows: int | None = computed(
        "Rows per shrink (default max(4 ell, 200)); null: one per update (coalesced).", ge=1
    )
    decay: float = Field(
        1.0,
        gt=0,
        le=1,
        description="Forgetting: a row's weight is decay^(rows after it); 1 forgets nothing.",
    )
    kernel: Literal["cosine", "gaussian"] = Field(
        "cosine", description="cosine, or gaussian (random Fourier features)."
    )
    kernel_components: int = Field(
        DEFAULT_KERNEL_COMPONENTS, ge=1, description="gaussian: random features D."
    )
    kernel_bandwidth: float | None = Field(
        None, gt=0, description="gaussian: sigma (null: the median distance of the first chunk)."
    )
    seed: int = Field(0, ge=0, lt=2**63, description="gaussian: seed of the random features.")

    def complete(self, size: int, stored: bool) -> None:
        if not self.gaussian:
            given = [name for name in _GAUSSIAN_ONLY if name in self.model_fields_set]
            if given:
                raise InvalidParams(
                    f"{', '.join(given)} only apply to kernel='gaussian'; got kernel='cosine'"
                )
        k_given = self.k is not None
        if self.k is None:
            self.k = min(10, size)
        if self.k > size:
            raise InvalidParams(f"k must be at most n_features={size}; got k={self.k}")
        if self.ell is None:
            self.ell = max(math.ceil(math.sqrt(size)), self.k + 1)
        if self.k >= self.ell:
            raise InvalidParams(
                f"k must be smaller than ell (got k={self.k}, ell={self.ell})"
                + ("" if k_given else f"; k defaults to min(10, n_features) = {self.k}")
            )
        if "block_rows" not in self.model_fields_set:
            self.block_rows = default_block_rows(self.ell)

    def omitted(self) -> set[str]:
        # decay only when forgetting: params stored (and exported) before decay existed resolve
        # to themselves, and a selector that does not forget is described exactly as before.
        left_out = set() if self.decay != 1.0 else {"decay"}
        return left_out if self.gaussian else left_out | set(_GAUSSIAN_ONLY)

    @property
    def gaussian(self) -> bool:
        return self.kernel == "gaussian"

    def width(self, n_features: int) -> int:
        return n_features + (self.kernel_components if self.gaussian else 0)


def default_block_rows(ell: int) -> int:
    """Rows per shrink when ``block_rows`` is not given: ``max(4 ell, 200)``.

    A schedule in rows, not the paper's "once per chunk": the service coalesces pending chunks
    into one update of up to 64 entries / 20,000 rows, so "per chunk" would mean "per however
    the producers' chunks happened to coalesce". An update call shrinks every ``B`` rows and
    once more at its end (a partial block is not carried over: the state is the sketch alone).

    Why these numbers (the curve: ``benchmarks/bench_fsds_schedule.py``, its table in
    ``benchmarks/README.md``):

    * Fidelity. Shrinking more often discards more of the stream's directions: fewer rows per
      shrink keep less of the paper's per-chunk ranking, most visibly where k is close to ell
      (Isolet), and more rows per shrink move towards the exact batch GFW-p2 ranking.
      ``MIN_BLOCK_ROWS`` = 200 is the paper's reference chunk: with small ell the default
      shrinks exactly where 200-row chunks do, also when the service coalesces them.
    * Speed. A shrink's eigenproblem costs about ``(ell + B)**2`` per row; on sparse text that
      is most of the update, so one shrink per large chunk is several times slower than
      ``B <= 4 ell``, while dense rows are fast for every ``B`` up to a chunk.
    """
    return max(BLOCK_ELLS * ell, MIN_BLOCK_ROWS)


# -- helpers shared with the batch references --------------------------------------------------


def normalize_rows(rows: Matrix) -> Matrix:
    """Every row scaled to unit L2 norm, zero rows left zero (section 3.1). Same kind as input."""
    if sp.issparse(rows):
        out = normalize_sparse_rows(sp.csr_matrix(rows))
        return out if isinstance(rows, sp.csr_matrix) else sp.csr_array(out)
    dense = np.array(rows, dtype=np.float64, copy=True)
    norms = np.sqrt(np.einsum("ij,ij->i", dense, dense))
    nonzero = norms > 0
    dense[nonzero] /= norms[nonzero, None]
    return dense


# The batch references take a ``normalize_rows`` flag, which shadows the function inside them.
_normalize = normalize_rows


def _dense(rows: Matrix) -> np.ndarray:
    if sp.issparse(rows):
        return np.asarray(cast(sp.csr_matrix, rows).toarray(), dtype=np.float64)
    return np.asarray(rows, dtype=np.float64)


def _ridge_terms(values: np.ndarray, sigma: np.ndarray, alpha: float) -> np.ndarray:
    """``|values_j| / (sigma_j^2 + alpha)`` row-wise, and 0 where ``sigma_j = 0`` (no 0/0)."""
    scale = np.zeros_like(sigma)
    positive = sigma > 0
    scale[positive] = 1.0 / (sigma[positive] ** 2 + alpha)
    return np.asarray(np.abs(values) * scale[:, None])


def _sketch_weights(
    sketch: np.ndarray, s_values: np.ndarray, k: int, exponent: float
) -> tuple[float, np.ndarray]:
    """Steps 5-7 on the sketch (Lemma 3.3 applied to eq. (5))."""
    alpha = float(2.0**exponent * s_values[k - 1])
    terms = _ridge_terms(sketch[:k], s_values[:k], alpha)
    return alpha, terms.max(axis=0)


def _top_left_vectors(mat: np.ndarray, k: int) -> np.ndarray:
    """Top-``k`` left singular vectors of ``mat``; columns with singular value ~0 are set to 0.

    A zero singular value has no well-defined vector (any null direction would do), so both the
    streaming and the batch kernel weights drop it instead of picking an arbitrary one.
    """
    gram = mat @ mat.T
    lam, vec = np.linalg.eigh(gram)
    lam, vec = lam[::-1][:k], vec[:, ::-1][:, :k]
    floor = _EPS * max(gram.shape[0], 1) * max(float(lam[0]) if lam.size else 0.0, 0.0)
    out = np.zeros((mat.shape[0], k))
    live = lam > floor
    out[:, : lam.size][:, live] = vec[:, live]
    return out


def _kernel_sketch_weights(
    sketch: np.ndarray, m: int, k: int, exponent: float
) -> tuple[float, np.ndarray]:
    """``X = S_Y^T (S_Y S_Y^T + alpha I)^+ P_k``, ``alpha = 2**i sigma_k(S_Y)``; ``w = max|X|``."""
    s_y, s_z = sketch[:, :m], sketch[:, m:]
    gram = s_y @ s_y.T
    lam, vec = np.linalg.eigh(gram)
    lam = np.maximum(lam[::-1], 0.0)
    vec = vec[:, ::-1]
    alpha = float(2.0**exponent * math.sqrt(lam[k - 1]))
    floor = _EPS * gram.shape[0] * max(float(lam[0]), 0.0)
    inv = np.zeros_like(lam)
    # Pseudo-inverse: with alpha = 0 (fewer than k rows seen) null directions are dropped.
    live = lam + alpha > floor
    inv[live] = 1.0 / (lam[live] + alpha)
    targets = _top_left_vectors(s_z, k)
    coef = vec @ (inv[:, None] * (vec.T @ targets))
    return alpha, np.abs(s_y.T @ coef).max(axis=1)


# -- batch references (Algorithm 1 GENFEATWEIGHT with p = 2) ------------------------------------


def gfw_p2_weights(
    rows: Matrix, k: int, alpha_exponent: float = 3.0, normalize_rows: bool = True
) -> np.ndarray:
    """GFW-p2: Algorithm 1 with p = 2 on all rows at once (exact SVD; Lemma 3.3).

    ``alpha = 2**i * sigma_k(Y)``; ``w_f = max_{j<=k} |u_fj| sigma_j / (sigma_j^2 + alpha)``.
    """
    y = _dense(_normalize(rows) if normalize_rows else rows)
    _, sigma, vt = np.linalg.svd(y, full_matrices=False)
    sigma = np.where(sigma > _EPS * max(y.shape) * (sigma[0] if sigma.size else 0.0), sigma, 0.0)
    sig_k = np.zeros(k)
    sig_k[: min(k, sigma.size)] = sigma[:k]
    top = np.zeros((k, y.shape[1]))
    top[: min(k, vt.shape[0])] = vt[:k]
    alpha = float(2.0**alpha_exponent * sig_k[k - 1])
    terms = _ridge_terms(top * sig_k[:, None], sig_k, alpha)
    return np.asarray(terms.max(axis=0))


def gfw_p2_kernel_weights(
    rows: Matrix,
    k: int,
    alpha_exponent: float,
    rff: RandomFourierFeatures,
    normalize_rows: bool = True,
) -> np.ndarray:
    """Exact batch Gaussian-kernel GFW-p2 (see the module docstring) on all rows.

    ``X = (Y Y^T + alpha I)^-1 Y V_k(Z)`` (paper orientation), ``Z = rff(Y)``,
    ``alpha = 2**i * sigma_k(Y)``, ``w = max_j |X_fj|``. Computed from the SVD ``Y = U S W^T``
    (rows orientation) as ``W diag(s / (s^2 + alpha)) U^T V_k(Z)``.
    """
    y = _dense(_normalize(rows) if normalize_rows else rows)
    z = rff.transform(y)
    u, sigma, vt = np.linalg.svd(y, full_matrices=False)
    sigma = np.where(sigma > _EPS * max(y.shape) * (sigma[0] if sigma.size else 0.0), sigma, 0.0)
    sig_k = float(sigma[k - 1]) if sigma.size >= k else 0.0
    alpha = 2.0**alpha_exponent * sig_k
    scale = np.zeros_like(sigma)
    positive = sigma > 0
    scale[positive] = sigma[positive] / (sigma[positive] ** 2 + alpha)
    targets = _top_left_vectors(z, k)  # V_k(Z) in the paper's orientation
    x = vt.T @ (scale[:, None] * (u.T @ targets))
    return np.asarray(np.abs(x).max(axis=1))


# -- the method --------------------------------------------------------------------------------


def _weights_of(upd: SketchUpdate, cfg: FSDSParams, m: int) -> tuple[float, np.ndarray]:
    """Steps 5-7 on an updated sketch: alpha and the ``m`` feature weights (cosine, or the
    gaussian mode's regression onto the random features' directions)."""
    if cfg.gaussian:
        return _kernel_sketch_weights(upd.sketch_rows, m, cfg.k, cfg.alpha_exponent)
    return _sketch_weights(upd.sketch_rows, upd.singular_values, cfg.k, cfg.alpha_exponent)


def _state_float(state: State, key: str) -> float:
    """A scalar of the state as float (a decoded state may hold numpy scalars or 0-d arrays)."""
    value = state.get(key)
    return 0.0 if value is None else float(np.asarray(value))


def _fold(
    state: State, cfg: FSDSParams, m: int, rows: Matrix, dealt: Dealt | None = None
) -> tuple[SketchUpdate, State]:
    """Algorithm 2, steps 1-4: ``rows`` folded into the sketch of ``state`` (of ``m`` features,
    with ``cfg``), and the sketch's fields after it (everything but alpha and the weights).

    ``dealt`` (a subsample's rows of a chunk, with ``decay``): the rows are weighed as in the
    whole stream, ``decay^(rows of the chunk after it)``, and what the state carries over ages
    by every row of the chunk, so that the subsample's sketch is of its rows exactly as the
    whole stream's sketch holds them (what ``subsample_unmerge`` subtracts)."""
    sketch = np.asarray(state["sketch_rows"], dtype=np.float64)
    if sketch.shape != (cfg.ell, cfg.width(m)):
        raise InvalidInput(
            f"state sketch_rows has shape {sketch.shape}; these params expect "
            f"{(cfg.ell, cfg.width(m))}"
        )
    if rows.ndim != 2 or rows.shape[1] != m:
        raise InvalidInput(f"rows must be 2-D with {m} columns; got shape {rows.shape}")
    n = rows.shape[0]
    # block_rows = null is the paper's single shrink per chunk.
    block = cfg.block_rows if cfg.block_rows is not None else max(n, 1)
    bandwidth = _state_float(state, "kernel_bandwidth")
    # What the state carries over ages by the n rows of this chunk (1.0 without decay).
    aged = cfg.decay ** (2 * n) if cfg.decay != 1.0 else 1.0
    if dealt is not None and cfg.decay != 1.0:
        return _fold_weighed(state, cfg, m, rows, dealt, block, bandwidth)

    if not cfg.gaussian:
        upd = frequent_directions_update(
            sketch, rows, block, normalize_rows=cfg.normalize_rows, decay=cfg.decay
        )
        squared_norm = upd.squared_norm
    else:
        y = _dense(normalize_rows(rows) if cfg.normalize_rows else rows)
        bandwidth = _bandwidth(cfg, bandwidth, y)
        joint = _joint(cfg, m, bandwidth, y)
        upd = frequent_directions_update(sketch, joint, block, decay=cfg.decay)
        if cfg.decay != 1.0:
            row_weights = decay_weights(cfg.decay, n)
            squared_norm = float(np.einsum("ij,ij,i->", y, y, row_weights**2))
        else:
            squared_norm = float(np.einsum("ij,ij->", y, y))

    return upd, {
        "sketch_rows": upd.sketch_rows,
        "singular_values": upd.singular_values,
        "rows_seen": int(np.asarray(state.get("rows_seen") or 0)) + n,
        "shrinkage_total": aged * _state_float(state, "shrinkage_total") + upd.shrinkage,
        "squared_norm_seen": aged * _state_float(state, "squared_norm_seen") + squared_norm,
        "kernel_bandwidth": bandwidth if cfg.gaussian else 0.0,
    }


def _bandwidth(cfg: FSDSParams, bandwidth: float, y: np.ndarray) -> float:
    """The gaussian kernel's sigma: given, or kept, or the median heuristic on the first chunk,
    then frozen: the map must not change between chunks (section 5.1). Fewer than two distinct
    rows give no distance; sqrt(2) is the distance of two orthogonal unit rows."""
    if cfg.kernel_bandwidth is not None:
        return cfg.kernel_bandwidth
    if bandwidth <= 0.0 and y.shape[0] > 0:
        return median_pairwise_distance(y, BANDWIDTH_SAMPLE_ROWS) or math.sqrt(2.0)
    return bandwidth


def _joint(cfg: FSDSParams, m: int, bandwidth: float, y: np.ndarray) -> np.ndarray:
    """The stacked samples ``[y | z]`` the gaussian mode sketches (module docstring)."""
    if y.shape[0] == 0:
        return np.zeros((0, cfg.width(m)))
    rff = RandomFourierFeatures(m, cfg.kernel_components, bandwidth, cfg.seed)
    return np.hstack([y, rff.transform(y)])


def _fold_weighed(
    state: State,
    cfg: FSDSParams,
    m: int,
    rows: Matrix,
    dealt: Dealt,
    block: int,
    bandwidth: float,
) -> tuple[SketchUpdate, State]:
    """``_fold`` of a subsample's rows with ``decay``: each row (normalised) weighed by
    ``decay^(rows of the chunk after it)``, the sketch, shrinkage and squared norm aged by the
    chunk's ``dealt.rows`` rows, then steps 1-4 without forgetting (rows are rows: the
    Frequent-Directions bound holds for the weighed ones)."""
    n = dealt.rows
    weights = cfg.decay ** (n - 1 - np.asarray(dealt.positions, dtype=np.float64))
    sketch = np.asarray(state["sketch_rows"], dtype=np.float64) * cfg.decay**n
    if cfg.gaussian:
        y = _dense(normalize_rows(rows) if cfg.normalize_rows else rows)
        bandwidth = _bandwidth(cfg, bandwidth, y)
        joint = _joint(cfg, m, bandwidth, y) * weights[:, None]
        upd = frequent_directions_update(sketch, joint, block)
        squared_norm = float(np.einsum("ij,ij,i->", y, y, weights**2))
    else:
        unit = normalize_rows(rows) if cfg.normalize_rows else rows
        weighed: Matrix = (
            sp.csr_matrix(sp.diags(weights) @ unit)
            if sp.issparse(unit)
            else np.asarray(unit, dtype=np.float64) * weights[:, None]
        )
        upd = frequent_directions_update(sketch, weighed, block)
        squared_norm = upd.squared_norm
    aged = cfg.decay ** (2 * n)
    return upd, {
        "sketch_rows": upd.sketch_rows,
        "singular_values": upd.singular_values,
        "rows_seen": int(np.asarray(state.get("rows_seen") or 0)) + rows.shape[0],
        "shrinkage_total": aged * _state_float(state, "shrinkage_total") + upd.shrinkage,
        "squared_norm_seen": aged * _state_float(state, "squared_norm_seen") + squared_norm,
        "kernel_bandwidth": bandwidth if cfg.gaussian else 0.0,
    }


def _with_weights(upd: SketchUpdate, folded: State, cfg: FSDSParams, m: int) -> State:
    """A state of the whole stream: the sketch's fields with steps 5-7's alpha and weights."""
    alpha, weights = _weights_of(upd, cfg, m)
    return {
        "sketch_rows": folded["sketch_rows"],
        "singular_values": folded["singular_values"],
        "weights": weights,
        "alpha": alpha,
        **{f: v for f, v in folded.items() if f not in ("sketch_rows", "singular_values")},
    }


def _merge_sketches(
    state: State, summary: State, cfg: FSDSParams, samples: int
) -> tuple[SketchUpdate, State]:
    """Another sketch of the same features folded in as rows, with one shrink (``merge``);
    ``samples``: the rows it stands for. The sketch's fields after it (no alpha, no weights)."""
    sketch = np.asarray(state["sketch_rows"], dtype=np.float64)
    other = np.asarray(summary["sketch_rows"], dtype=np.float64)
    if other.ndim != 2 or other.shape[1] != sketch.shape[1]:
        raise InvalidInput(
            f"the merged sketch must have {sketch.shape[1]} columns; got shape {other.shape}"
        )
    bandwidth = _state_float(state, "kernel_bandwidth")
    other_bandwidth = _state_float(summary, "kernel_bandwidth")
    if cfg.gaussian and bandwidth > 0 and other_bandwidth > 0 and bandwidth != other_bandwidth:
        raise InvalidInput(
            f"the merged sketch's random features use bandwidth {other_bandwidth}, this "
            f"selector's {bandwidth}: the sketches describe different feature maps"
        )
    upd = frequent_directions_update(sketch, other, block_rows=max(other.shape[0], 1))
    return upd, {
        "sketch_rows": upd.sketch_rows,
        "singular_values": upd.singular_values,
        "rows_seen": int(np.asarray(state.get("rows_seen") or 0)) + samples,
        "shrinkage_total": _state_float(state, "shrinkage_total")
        + _state_float(summary, "shrinkage_total")
        + upd.shrinkage,
        "squared_norm_seen": _state_float(state, "squared_norm_seen")
        + _state_float(summary, "squared_norm_seen"),
        "kernel_bandwidth": (bandwidth or other_bandwidth) if cfg.gaussian else 0.0,
    }


def _check_sketch(state: State, cfg: FSDSParams) -> None:
    """What steps 1-4 leave behind (``FSDS.core_check_consistency``)."""
    sketch = np.asarray(state["sketch_rows"], dtype=np.float64)
    sigma = np.asarray(state["singular_values"], dtype=np.float64)
    seen = _state_float(state, "squared_norm_seen")
    if (
        np.any(sigma < 0)
        or np.any(np.diff(sigma) > 0)
        or min(_state_float(state, "shrinkage_total"), seen) < 0
    ):
        raise Inconsistent(
            "an fsds state has non-negative singular values in non-increasing order and "
            "non-negative shrinkage and squared norm"
        )
    gram = sketch @ sketch.T
    scale = max(float(sigma[0]) ** 2 if sigma.size else 0.0, 1e-300)
    if not np.allclose(gram, np.diag(sigma**2), rtol=0.0, atol=1e-9 * scale):
        raise Inconsistent(
            "an fsds sketch is S V^T (Algorithm 2, step 3): its rows are orthogonal with "
            "the singular values as norms; this one's are not"
        )
    energy = float(np.trace(gram))
    if int(np.asarray(state["rows_seen"])) == 0 and (energy > 0 or seen > 0):
        raise Inconsistent("an fsds state that has seen no rows has an empty sketch")
    if not cfg.gaussian and energy > seen * (1 + 1e-9) + 1e-300:
        raise Inconsistent(
            f"an fsds sketch holds at most the squared norm of the rows it saw ({seen:g}); "
            f"this one holds {energy:g}"
        )


def subsample_config(params: Mapping[str, Any], m: int) -> FSDSParams:
    """A stored subsample's sketch (``resamples``): as the whole stream's (``ell`` rows, ``k``
    directions, its forgetting, in ``_fold_weighed``), shrunk every ``ceil(block_rows / K)``
    of its rows, i.e. at about the same stream positions as the whole sketch
    (``block_rows = null``: once per update, as the whole's)."""
    cfg = FSDSParams.resolve(params, m, stored=True)
    k = max(resample_count(params), 1)
    block = None if cfg.block_rows is None else max(1, math.ceil(cfg.block_rows / k))
    return cfg.model_copy(update={"block_rows": block})


def unmerge_sketches(
    whole: np.ndarray, part: np.ndarray, ell: int
) -> tuple[np.ndarray, np.ndarray]:
    """A sketch (``ell`` rows ``s_j v_j^T``, and the ``s_j``) of the rows of the stream that
    ``whole`` sketches that ``part`` does not: the leading eigenpairs of
    ``D = whole^T whole - part^T part``, negative ones dropped.

    Frequent Directions gives ``A^T A - d I <= B^T B <= A^T A`` for a sketch ``B`` of ``A`` with
    shrinkage ``d`` (Liberty 2013; Ghashami et al. 2016), so with ``A^T A = A_p^T A_p + A_r^T
    A_r`` (the part's rows and the rest)::

        A_r^T A_r - d I  <=  D  <=  A_r^T A_r + d_p I:

    ``D`` sketches the rest within both shrinkages; dropping its negative eigenvalues (at least
    ``-d``) and all but the ``ell`` largest keeps it within ``d + d_p`` and the largest dropped.

    ``D = M^T J M`` for ``M = [whole; part]`` (``r <= 2 ell`` nonzero rows) and ``J = diag(I,
    -I)``: with the Gram ``M M^T = U S U^T`` and ``L = U S^(1/2)``, the nonzero eigenpairs of
    ``D`` are ``L^T J L = P Lambda P^T`` with vectors ``M^T U S^(-1/2) P`` (unit, orthogonal).
    Two ``r``-square eigenproblems and products with ``M``: a fraction of one shrink's work.
    Rounding: the Gram loses what lies below ``eps * |M|_2^2``, far below the shrinkages."""
    stacked = np.vstack([whole, part])
    live = np.einsum("ij,ij->i", stacked, stacked) > 0
    stacked = stacked[live]
    signs = np.concatenate([np.ones(whole.shape[0]), -np.ones(part.shape[0])])[live]
    rows = np.zeros((ell, whole.shape[1]))
    values = np.zeros(ell)
    if not stacked.shape[0]:
        return rows, values
    spread, basis = np.linalg.eigh(stacked @ stacked.T)
    kept = spread > _EPS * stacked.shape[0] * spread[-1]
    spread, basis = spread[kept], basis[:, kept]
    root = basis * np.sqrt(spread)
    eigenvalues, vectors = np.linalg.eigh(root.T @ (signs[:, None] * root))
    order = np.argsort(eigenvalues)[::-1][:ell]
    order = order[eigenvalues[order] > 0]
    values[: order.size] = np.sqrt(eigenvalues[order])
    directions = stacked.T @ ((basis / np.sqrt(spread)) @ vectors[:, order])
    rows[: order.size] = values[: order.size, None] * directions.T
    return rows, values


#: The scalars of a sketch (a subsample's state: the whole stream's but alpha and the weights).
_SKETCH_SCALARS = ("rows_seen", "shrinkage_total", "squared_norm_seen", "kernel_bandwidth")


def _features(subsample: State, params: Mapping[str, Any]) -> int:
    """The features of a subsample's sketch (its width, less the random features)."""
    width = int(np.asarray(subsample["sketch_rows"]).shape[1])
    if params.get("kernel") == "gaussian":
        return width - int(params.get("kernel_components", DEFAULT_KERNEL_COMPONENTS))
    return width


class FSDS(ResampledMergeable):
    """Feature Selection on Data Streams (Algorithm 2 STREAMFEATWEIGHT) over row chunks.

    Capability: ``SelectsColumns`` on request (``strategy=diverse``): pivoted QR on the feature
    columns of the sketch ``B`` (``ell x m``) picks h features that together span the sketched
    data, where the weights rank each feature alone.

    State (flat, arrays float64): ``sketch_rows`` (``ell x m'``, ``m' = m`` or ``m + D`` in
    gaussian mode), ``singular_values`` (``ell``), ``weights`` (``m``), ``alpha``, ``rows_seen``,
    ``shrinkage_total`` (``||Y^T Y - B B^T||_2`` is at most this), ``squared_norm_seen``
    (``||Y||_F^2`` of the normalised rows), ``kernel_bandwidth`` (0.0 until set / cosine).

    Forgetting (``decay`` gamma < 1; the paper's section 3.2 leaves "higher weights on the recent
    inputs" to a change of the sketch): ``Y`` above becomes ``A_w``, the normalised rows each
    weighted by ``gamma**(rows after it)``, and ``shrinkage_total`` and ``squared_norm_seen``
    are of ``A_w`` (both decay by ``gamma**2`` per row). The sketch keeps the Frequent-Directions
    guarantee for ``A_w`` (derived in ``service.algorithms.sketching``)::

        0 <= A_w^T A_w - B^T B <= shrinkage_total I,
        shrinkage_total <= ||A_w - [A_w]_k||_F^2 / (ell - k)   for every k < ell,

    and the weights are Algorithm 2's on that sketch, so below rank ``ell`` they equal the batch
    GFW-p2 of ``A_w``. A row's contribution to ``A_w^T A_w`` halves after
    ``ln 2 / (2 ln(1 / gamma))`` rows (gamma = 0.999: 346 rows); the rows' total weight tends to
    ``1 / (1 - gamma**2)`` (~500 rows at 0.999). ``decay = 1`` runs exactly the code without it.
    """

    name = "fsds"
    paper = (
        'Huang et al., "Unsupervised Feature Selection on Data Streams", CIKM 2015 (Algorithm 2)'
    )
    chunk_kind: ChunkKind = "rows"
    params_model = FSDSParams
    score_field = "weights"
    chunking_invariant = False
    #: The sketch (2 ell x m) is read only by ``strategy=diverse``: from a checkpoint.
    served_from_checkpoints: tuple[str, ...] = ("sketch_rows",)
    pivoted_by_default = False
    pivot_fields: tuple[str, ...] = ("sketch_rows",)
    #: ``Mergeable``: another sketch of the same features (with the state's scalars).
    summary_fields: tuple[str, ...] = ("sketch_rows",)
    stability_estimate = (
        "a Frequent-Directions sketch (Algorithm 2, ell rows) of each of K interleaved "
        "subsamples of the rows: K - 1 stored, their rows weighed as the whole stream weighs "
        "them, the last the whole stream's sketch minus theirs (within both shrinkages); steps "
        "5-7 on each, in gaussian mode with the whole stream's bandwidth; compared as they are: "
        "the index is that of n/K rows (conservative); their scores computed again once the "
        "rows grew by a tenth (as of at most a tenth of the rows ago)"
    )
    #: A stored subsample's sketch (``subsample_config``): what its scores and merges read,
    #: served from checkpoints as the whole stream's. The last subsample's is derived from the
    #: whole stream's sketch (``unmerge_sketches``).
    subsample_fields: ClassVar[tuple[str, ...]] = ("sketch_rows", "singular_values")
    derives_last = True
    derived_from: ClassVar[tuple[str, ...]] = ("sketch_rows",)
    #: Not scaled to the whole stream: the scores are not smooth in the rows where singular
    #: values are close (``stability.replicate_scores``); the index is that of n/K rows.
    stability_corrected = False
    #: A subsample's scores cost a derived sketch and two decompositions (ell^2 m each): 0.8 of
    #: an update at m = 20,000 if computed every version, so they are kept and refreshed as
    #: the rows grow (``resampling.SCORES_REFRESH_GROWTH``).
    caches_resample_scores = True

    def core_initial_state(self, params: Mapping[str, Any], n_features: int) -> State:
        cfg = FSDSParams.resolve(params, n_features, stored=True)
        return {
            "sketch_rows": np.zeros((cfg.ell, cfg.width(n_features))),
            "singular_values": np.zeros(cfg.ell),
            "weights": np.zeros(n_features),
            "alpha": 0.0,
            "rows_seen": 0,
            "shrinkage_total": 0.0,
            "squared_norm_seen": 0.0,
            "kernel_bandwidth": float(cfg.kernel_bandwidth or 0.0),
        }

    def core_state_sizes(self, params: Mapping[str, Any], n_features: int) -> dict[str, int]:
        cfg = FSDSParams.resolve(params, n_features, stored=True)
        return {
            "sketch_rows": 8 * cfg.ell * cfg.width(n_features),
            "singular_values": 8 * cfg.ell,
            "weights": 8 * n_features,
        }

    def core_update(self, state: State, params: Mapping[str, Any], rows: Matrix) -> State:
        m = np.asarray(state["weights"]).shape[0]
        cfg = FSDSParams.resolve(params, m, stored=True)
        upd, folded = _fold(state, cfg, m, rows)
        return _with_weights(upd, folded, cfg, m)

    def core_merge(self, state: State, params: Mapping[str, Any], summary: State) -> State:
        """Add another sketch of the same features: its rows are folded in as rows, with one
        shrink (Algorithm 2, steps 1-4 on ``[B_1; B_2]``), then steps 5-7 on the result.

        Frequent Directions is mergeable (Ghashami et al., "Frequent Directions: simple and
        deterministic matrix sketching", SIAM J. Comput. 2016, section 3; Agarwal et al.,
        "Mergeable summaries", 2012): if ``B_i`` sketches ``A_i`` with shrinkage ``d_i``, the
        shrink of ``[B_1; B_2]`` (shrinkage ``d``) sketches ``[A_1; A_2]`` with
        ``0 <= A^T A - B^T B <= (d_1 + d_2 + d) I``, and that total is still at most
        ``||A - [A]_k||_F^2 / (ell - k)`` because every shrink removes at least ``ell - k``
        times its ``delta`` of squared Frobenius norm. So ``shrinkage_total`` adds up and the
        weights keep the paper's guarantee for all rows of both streams.

        The summary's rows are already normalised (and weighted, with ``decay``: each stream
        ages by its own rows). In gaussian mode both sketches must use the same random feature
        map: same seed (the params) and the same bandwidth.
        """
        m = np.asarray(state["weights"]).shape[0]
        cfg = FSDSParams.resolve(params, m, stored=True)
        upd, folded = _merge_sketches(state, summary, cfg, self.summary_samples(summary))
        return _with_weights(upd, folded, cfg, m)

    # -- the subsamples: K - 1 sketches stored, the last the whole's minus theirs ----------

    def subsample_initial_state(self, params: Mapping[str, Any], size: int) -> State:
        state = self.core_initial_state(params, size)
        return {f: v for f, v in state.items() if f not in ("weights", "alpha")}

    def subsample_state_sizes(self, params: Mapping[str, Any], size: int) -> dict[str, int]:
        sizes = self.core_state_sizes(params, size)
        return {f: n for f, n in sizes.items() if f != "weights"}

    def subsample_update(
        self, subsample: State, params: Mapping[str, Any], chunk: Matrix, whole: State, dealt: Dealt
    ) -> State:
        """Steps 1-4 on the subsample's rows (``subsample_config``), each weighed as in the
        whole stream; in gaussian mode with the whole stream's bandwidth (the median heuristic
        on its own first rows would pick another feature map)."""
        m = int(chunk.shape[1])
        cfg = subsample_config(params, m)
        bandwidth = _state_float(whole, "kernel_bandwidth")
        if cfg.gaussian and cfg.kernel_bandwidth is None and bandwidth > 0:
            cfg = cfg.model_copy(update={"kernel_bandwidth": bandwidth})
        return _fold(subsample, cfg, m, dealt.of(chunk), dealt)[1]

    def subsample_scores(self, subsample: State, params: Mapping[str, Any]) -> np.ndarray:
        """Steps 5-7 on the subsample's sketch, as on the whole stream's."""
        m = _features(subsample, params)
        cfg = FSDSParams.resolve(params, m, stored=True)
        sketch = np.asarray(subsample["sketch_rows"], dtype=np.float64)
        sigma = np.asarray(subsample["singular_values"], dtype=np.float64)
        return _weights_of(SketchUpdate(sketch, sigma, 0.0), cfg, m)[1]

    def subsample_rows(self, subsample: State) -> int:
        return int(np.asarray(subsample["rows_seen"]))

    def subsample_check(self, subsample: State, params: Mapping[str, Any], size: int) -> None:
        _check_sketch(subsample, subsample_config(params, size))

    def subsample_merge(self, subsample: State, params: Mapping[str, Any], other: State) -> State:
        cfg = subsample_config(params, _features(subsample, params))
        return _merge_sketches(subsample, other, cfg, self.subsample_rows(other))[1]

    def subsample_of_whole(self, whole: State, params: Mapping[str, Any]) -> State:
        """The whole stream's sketch and its scalars (``derived_from``: what a reader reads)."""
        return {f: whole[f] for f in ("sketch_rows", *_SKETCH_SCALARS)}

    def subsample_unmerge(self, whole: State, params: Mapping[str, Any], part: State) -> State:
        """The rest of the stream's sketch: ``unmerge_sketches``, with the rows, shrinkage
        (the bound of the difference: both shrinkages) and squared norms of the rest."""
        rows = self.subsample_rows(whole) - self.subsample_rows(part)
        if rows < 0:
            raise Inconsistent("a subsample cannot have seen more rows than the whole stream")
        sketch = np.asarray(whole["sketch_rows"], dtype=np.float64)
        other = np.asarray(part["sketch_rows"], dtype=np.float64)
        if other.shape != sketch.shape:
            raise Inconsistent(f"a subsample's sketch has the whole stream's shape {sketch.shape}")
        rest, sigma = unmerge_sketches(sketch, other, sketch.shape[0])
        return {
            "sketch_rows": rest,
            "singular_values": sigma,
            "rows_seen": rows,
            "shrinkage_total": _state_float(whole, "shrinkage_total")
            + _state_float(part, "shrinkage_total"),
            "squared_norm_seen": max(
                _state_float(whole, "squared_norm_seen") - _state_float(part, "squared_norm_seen"),
                0.0,
            ),
            "kernel_bandwidth": whole["kernel_bandwidth"],
        }

    def summary_samples(self, summary: State) -> int:
        return int(np.asarray(summary.get("rows_seen") or 0))

    def merge_refusal(self, params: Mapping[str, Any]) -> str | None:
        """Partitions each choose a gaussian bandwidth from their first chunk unless it is fixed;
        sketches of different feature maps do not merge."""
        if params.get("kernel") == "gaussian" and params.get("kernel_bandwidth") is None:
            return "fsds with kernel gaussian merges only with a fixed kernel_bandwidth"
        return None

    def weights(self, state: State, params: Mapping[str, Any]) -> np.ndarray:
        return np.asarray(state["weights"], dtype=np.float64)

    def core_check_consistency(
        self,
        state: State,
        params: Mapping[str, Any],
        size: int,
        segments: Mapping[str, np.ndarray],
    ) -> None:
        """``ChecksState``: what Algorithm 2 leaves behind. Steps 1-4 leave ``B = S V^T``, so
        ``B B^T = diag(sigma^2)`` with ``sigma`` non-increasing and non-negative; Frequent
        Directions never adds energy (``||B||_F^2 <= ||Y||_F^2`` of the rows seen, in the
        cosine mode), nothing before the first row; and steps 5-7 give exactly the stored
        ``alpha`` and weights."""
        cfg = FSDSParams.resolve(params, size, stored=True)
        _check_sketch(state, cfg)
        sketch = np.asarray(state["sketch_rows"], dtype=np.float64)
        sigma = np.asarray(state["singular_values"], dtype=np.float64)
        alpha, weights = _weights_of(SketchUpdate(sketch, sigma, 0.0, 0.0), cfg, size)
        stored = np.asarray(state["weights"], dtype=np.float64)
        if not (
            math.isclose(alpha, _state_float(state, "alpha"), rel_tol=1e-9, abs_tol=1e-300)
            and np.allclose(stored, weights, rtol=1e-9, atol=1e-300)
        ):
            raise Inconsistent(
                "an fsds state's alpha and weights are steps 5-7 of its sketch; this one's disagree"
            )

    def pivot_source(
        self,
        state: State,
        params: Mapping[str, Any],
        n_features: int,
        read_segment: Callable[[str], np.ndarray],
    ) -> ColumnSource:
        """The feature columns of the sketch (in gaussian mode, without the random features)."""
        return MatrixSource(np.asarray(state["sketch_rows"])[:, :n_features])
