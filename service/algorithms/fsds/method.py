"""``FSDS``, the method: a chunk folded into the sketch, the weights derived again (the
package's docstring says how)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import ClassVar

import numpy as np
import scipy.sparse as sp

from service.algorithms.base import ChunkKind, Matrix, State
from service.algorithms.examples import Example
from service.algorithms.fsds.params import BANDWIDTH_SAMPLE_ROWS, FSDSParams
from service.algorithms.fsds.sketches import (
    _SKETCH_SCALARS,
    _check_sketch,
    _merge_sketches,
    _state_float,
    kept_subsample,
    known_values,
    sketch_of,
    subsample_config,
    subsample_dtype,
    unmerge_sketches,
)
from service.algorithms.fsds.weights import (
    _dense,
    _kernel_sketch_weights,
    _sketch_weights,
    normalize_rows,
)
from service.algorithms.kernels import RandomFourierFeatures, median_pairwise_distance
from service.algorithms.pivoted_qr import ColumnSource, MatrixSource
from service.algorithms.resampling import ResampledMergeable
from service.algorithms.sketching import (
    SketchUpdate,
    decay_weights,
    frequent_directions_update,
)
from service.algorithms.subsamples import SubsampleRows
from service.errors import Inconsistent, InvalidInput


def _weights_of(upd: SketchUpdate, cfg: FSDSParams, m: int) -> tuple[float, np.ndarray]:
    """Steps 5-7 on an updated sketch: alpha and the ``m`` feature weights (cosine, or the
    gaussian mode's regression onto the random features' directions)."""
    if cfg.gaussian:
        return _kernel_sketch_weights(upd.sketch_rows, m, cfg.k, cfg.alpha_exponent)
    return _sketch_weights(upd.sketch_rows, upd.singular_values, cfg.k, cfg.alpha_exponent)


def _fold(
    state: State, cfg: FSDSParams, m: int, rows: Matrix, dealt: SubsampleRows | None = None
) -> tuple[SketchUpdate, State]:
    """Algorithm 2, steps 1-4: ``rows`` folded into the sketch of ``state`` (of ``m`` features,
    with ``cfg``), and the sketch's fields after it (everything but alpha and the weights).

    ``dealt`` (a subsample's rows of a chunk, with ``decay``): the rows are weighed as in the
    whole stream, ``decay^(rows of the chunk after it)``, and what the state carries over ages
    by every row of the chunk, so that the subsample's sketch is of its rows exactly as the
    whole stream's sketch holds them (what ``subsample_unmerge`` subtracts)."""
    sketch = sketch_of(state)
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

    values = known_values(state)
    if not cfg.gaussian:
        upd = frequent_directions_update(
            sketch,
            rows,
            block,
            normalize_rows=cfg.normalize_rows,
            decay=cfg.decay,
            singular_values=values,
        )
        squared_norm = upd.squared_norm
    else:
        y = _dense(normalize_rows(rows) if cfg.normalize_rows else rows)
        bandwidth = _bandwidth(cfg, bandwidth, y)
        joint = _joint(cfg, m, bandwidth, y)
        upd = frequent_directions_update(
            sketch, joint, block, decay=cfg.decay, singular_values=values
        )
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
    dealt: SubsampleRows,
    block: int,
    bandwidth: float,
) -> tuple[SketchUpdate, State]:
    """``_fold`` of a subsample's rows with ``decay``: each row (normalised) weighed by
    ``decay^(rows of the chunk after it)``, the sketch, shrinkage and squared norm aged by the
    chunk's ``dealt.rows`` rows, then steps 1-4 without forgetting (rows are rows: the
    Frequent-Directions bound holds for the weighed ones)."""
    n = dealt.rows
    weights = cfg.decay ** (n - 1 - np.asarray(dealt.positions, dtype=np.float64))
    sketch = sketch_of(state) * cfg.decay**n
    values = known_values(state)
    values = None if values is None else values * cfg.decay**n
    if cfg.gaussian:
        y = _dense(normalize_rows(rows) if cfg.normalize_rows else rows)
        bandwidth = _bandwidth(cfg, bandwidth, y)
        joint = _joint(cfg, m, bandwidth, y) * weights[:, None]
        upd = frequent_directions_update(sketch, joint, block, singular_values=values)
        squared_norm = float(np.einsum("ij,ij,i->", y, y, weights**2))
    else:
        unit = normalize_rows(rows) if cfg.normalize_rows else rows
        weighed: Matrix = (
            sp.csr_matrix(sp.diags(weights) @ unit)
            if sp.issparse(unit)
            else np.asarray(unit, dtype=np.float64) * weights[:, None]
        )
        upd = frequent_directions_update(sketch, weighed, block, singular_values=values)
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


#: How FSDS keeps its resamples (``stability_estimate``), naming the selector's kernel mode.
_ESTIMATE = (
    "a Frequent-Directions sketch (Algorithm 2, resample_ell rows) of each of K interleaved "
    "subsamples of the rows: K - 1 stored, their rows weighed as the whole stream weighs "
    "them, the last the whole stream's sketch minus theirs (within both shrinkages); steps "
    "5-7 on each, {kernel}; compared as they are: the index is that of n/K rows "
    "(conservative); their scores computed again once the rows grew by a tenth (as of at "
    "most a tenth of the rows ago)"
)


class FSDS(ResampledMergeable[FSDSParams]):
    """Feature Selection on Data Streams (Algorithm 2 STREAMFEATWEIGHT) over row chunks.

    Capability: ``SelectsColumns`` on request (``strategy=diverse``): pivoted QR on the feature
    columns of the sketch ``B`` (``ell x m``) picks h features that together span the sketched
    data, where the weights rank each feature alone.

    State (flat, arrays float64; ``resamples`` add the stored subsamples' sketches,
    ``kept_subsample``): ``sketch_rows`` (``ell x m'``, ``m' = m`` or ``m + D`` in
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
    examples: tuple[Example, ...] = (
        Example({"n_features": 6, "feature_names": [f"g{i}" for i in range(6)]}, {"k": 2}, items=7),
        Example({"n_features": 6}, {"kernel": "gaussian", "kernel_components": 16}),
        Example({"n_features": 6}, {"decay": 0.9}),
        Example({"n_features": 6}, {"normalize_rows": False}),
        Example({"n_features": 6}, {"block_rows": None}),
    )
    score_field = "weights"
    chunking_invariant = False
    #: The sketch (2 ell x m) is read only by ``strategy=diverse``: from a checkpoint.
    served_from_checkpoints: tuple[str, ...] = ("sketch_rows",)
    pivoted_by_default = False
    pivot_fields: tuple[str, ...] = ("sketch_rows",)
    #: ``Mergeable``: another sketch of the same features (with the state's scalars).
    summary_fields: tuple[str, ...] = ("sketch_rows",)
    stability_estimate = _ESTIMATE.format(kernel="in the selector's kernel mode")
    #: A stored subsample's sketch (``subsample_config``, ``resample_ell`` rows): what its
    #: scores and merges read, served from checkpoints as the whole stream's. The last
    #: subsample's is derived from the whole stream's sketch (``unmerge_sketches``).
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

    def stability_estimate_for(self, params: FSDSParams) -> str:
        """``stability_estimate`` in this selector's kernel mode: the gaussian mode scores each
        subsample with the whole stream's bandwidth, the cosine mode has none."""
        if params.gaussian:
            return _ESTIMATE.format(kernel="in gaussian mode with the whole stream's bandwidth")
        return _ESTIMATE.format(kernel="in cosine mode")

    def core_initial_state(self, params: FSDSParams) -> State:
        return {
            "sketch_rows": np.zeros((params.ell, params.width(params.size))),
            "singular_values": np.zeros(params.ell),
            "weights": np.zeros(params.size),
            "alpha": 0.0,
            "rows_seen": 0,
            "shrinkage_total": 0.0,
            "squared_norm_seen": 0.0,
            "kernel_bandwidth": float(params.kernel_bandwidth or 0.0),
        }

    def core_state_sizes(self, params: FSDSParams) -> dict[str, int]:
        return {
            "sketch_rows": 8 * params.ell * params.width(params.size),
            "singular_values": 8 * params.ell,
            "weights": 8 * params.size,
        }

    def core_update(self, state: State, params: FSDSParams, rows: Matrix) -> State:
        upd, folded = _fold(state, params, params.size, rows)
        return _with_weights(upd, folded, params, params.size)

    def core_merge(self, state: State, params: FSDSParams, summary: State) -> State:
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
        upd, folded = _merge_sketches(state, summary, params, self.summary_samples(summary))
        return _with_weights(upd, folded, params, params.size)

    # -- the subsamples: K - 1 sketches stored, the last the whole's minus theirs ----------

    def subsample_initial_state(self, params: FSDSParams) -> State:
        state = self.core_initial_state(subsample_config(params))
        fields = {f: v for f, v in state.items() if f not in ("weights", "alpha")}
        return kept_subsample(fields, params)

    def subsample_state_sizes(self, params: FSDSParams) -> dict[str, int]:
        sizes = self.core_state_sizes(subsample_config(params))
        itemsize = np.dtype(subsample_dtype(params)).itemsize
        return {
            "sketch_rows": sizes["sketch_rows"] // 8 * itemsize,
            "singular_values": sizes["singular_values"],
        }

    def subsample_update(
        self,
        subsample: State,
        params: FSDSParams,
        chunk: Matrix,
        whole: State,
        dealt: SubsampleRows,
    ) -> State:
        """Steps 1-4 on the subsample's rows (``subsample_config``), each weighed as in the
        whole stream; in gaussian mode with the whole stream's bandwidth: kept, or the one the
        whole stream takes from this chunk, its first (the median heuristic on the
        subsample's own first rows would pick another feature map)."""
        cfg = subsample_config(params)
        if cfg.gaussian and cfg.kernel_bandwidth is None:
            bandwidth = _state_float(whole, "kernel_bandwidth")
            if bandwidth <= 0.0:
                head = chunk[:BANDWIDTH_SAMPLE_ROWS]
                bandwidth = _bandwidth(
                    cfg, 0.0, _dense(normalize_rows(head) if cfg.normalize_rows else head)
                )
            cfg = cfg.model_copy(update={"kernel_bandwidth": bandwidth})
        folded = _fold(subsample, cfg, params.size, dealt.of(chunk), dealt)[1]
        return kept_subsample(folded, params)

    def subsample_scores(self, subsample: State, params: FSDSParams) -> np.ndarray:
        """Steps 5-7 on the subsample's sketch, as on the whole stream's."""
        sketch = sketch_of(subsample)
        sigma = np.asarray(subsample["singular_values"], dtype=np.float64)
        return _weights_of(SketchUpdate(sketch, sigma, 0.0), params, params.size)[1]

    def subsample_rows(self, subsample: State) -> int:
        return int(np.asarray(subsample["rows_seen"]))

    def subsample_check(self, subsample: State, params: FSDSParams) -> None:
        _check_sketch(subsample, subsample_config(params))

    def subsample_merge(self, subsample: State, params: FSDSParams, other: State) -> State:
        cfg = subsample_config(params)
        merged = _merge_sketches(subsample, other, cfg, self.subsample_rows(other))[1]
        return kept_subsample(merged, params)

    def subsample_of_whole(self, whole: State, params: FSDSParams) -> State:
        """The whole stream's sketch and its scalars (``derived_from``: what a reader reads)."""
        return {f: whole[f] for f in ("sketch_rows", *_SKETCH_SCALARS)}

    def subsample_unmerge(self, whole: State, params: FSDSParams, part: State) -> State:
        """The rest of the stream's sketch (of the whole's ``ell`` rows): ``unmerge_sketches``,
        with the rows, shrinkage (the bound of the difference: both shrinkages) and squared
        norms of the rest."""
        rows = self.subsample_rows(whole) - self.subsample_rows(part)
        if rows < 0:
            raise Inconsistent("a subsample cannot have seen more rows than the whole stream")
        sketch = sketch_of(whole)
        other = sketch_of(part)
        if other.ndim != 2 or other.shape[1] != sketch.shape[1]:
            raise Inconsistent(
                f"a subsample's sketch has the whole stream's {sketch.shape[1]} columns; got "
                f"shape {other.shape}"
            )
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

    def merge_refusal(self, params: FSDSParams) -> str | None:
        """Partitions each choose a gaussian bandwidth from their first chunk unless it is fixed;
        sketches of different feature maps do not merge."""
        if params.gaussian and params.kernel_bandwidth is None:
            return "fsds with kernel gaussian merges only with a fixed kernel_bandwidth"
        return None

    def weights(self, state: State, params: FSDSParams) -> np.ndarray:
        return np.asarray(state["weights"], dtype=np.float64)

    def core_check_consistency(
        self,
        state: State,
        params: FSDSParams,
        segments: Mapping[str, np.ndarray],
    ) -> None:
        """``ChecksState``: what Algorithm 2 leaves behind. Steps 1-4 leave ``B = S V^T``, so
        ``B B^T = diag(sigma^2)`` with ``sigma`` non-increasing and non-negative; Frequent
        Directions never adds energy (``||B||_F^2 <= ||Y||_F^2`` of the rows seen, in the
        cosine mode), nothing before the first row; and steps 5-7 give exactly the stored
        ``alpha`` and weights."""
        _check_sketch(state, params)
        sketch = np.asarray(state["sketch_rows"], dtype=np.float64)
        sigma = np.asarray(state["singular_values"], dtype=np.float64)
        alpha, weights = _weights_of(SketchUpdate(sketch, sigma, 0.0, 0.0), params, params.size)
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
        params: FSDSParams,
        read_segment: Callable[[str], np.ndarray],
    ) -> ColumnSource:
        """The feature columns of the sketch (in gaussian mode, without the random features)."""
        return MatrixSource(np.asarray(state["sketch_rows"])[:, : params.size])
