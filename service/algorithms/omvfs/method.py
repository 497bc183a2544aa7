"""OMVFS as a method of the service: the state between chunks (section III-C, Fig. 2), one
chunk's update (steps 5-19), and the rules of a state that came from elsewhere (imports)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import ClassVar

import numpy as np
import scipy.sparse as sp

from service.algorithms.base import ChunkKind, Matrix, State
from service.algorithms.examples import Example
from service.algorithms.moments import Moments, chunk_moments, combine, grouped_moments
from service.algorithms.omvfs.graph import (
    buffer_rows,
    median_distance,
    new_similarities,
    similarity_blocks,
    similarity_fields,
    split_views,
)
from service.algorithms.omvfs.params import OMVFSParams
from service.algorithms.omvfs.scores import feature_scores, moments_so_far
from service.algorithms.omvfs.solver import chunk_buffer, solve
from service.algorithms.resampling import ResampledMethod
from service.errors import Inconsistent


class OMVFS(ResampledMethod[OMVFSParams]):
    """Online multi-view feature selection (Algorithm 1) over chunks of rows of every view.

    A chunk is the views side by side (``m x sum_v D_v``, in the order of ``params.views``);
    the applier gives one log entry at a time (``coalesces = False``): the buffer holds chunks
    as the producers sent them.
    """

    name = "omvfs"
    paper = (
        'Shao, He, Lu, Wei & Yu, "Online Unsupervised Multi-view Feature Selection" (Algorithm 1)'
    )
    chunk_kind: ChunkKind = "views"
    params_model = OMVFSParams
    examples: tuple[Example, ...] = (
        Example(
            {
                "views": {"text": 4, "image": 3},
                "feature_names": {"text": ["w0", "w1", "w2", "w3"], "image": ["p0", "p1", "p2"]},
            },
            {"n_clusters": 2, "buffer_chunks": 2, "max_iter": 5},
            items=6,
            low=0.0,
        ),
    )
    score_field = "weights"
    coalesces = False
    chunking_invariant = False
    stability_estimate = (
        "OMVFS (Algorithm 1) run on each of K interleaved subsamples of the rows, each chunk's "
        "rows of a subsample as its chunk, for at most as many iterations as the whole "
        "stream's on that chunk; compared as they are: the index is that of n/K rows"
    )
    #: A subsample's scores are kept with it (they need its factors and moments).
    subsample_fields: ClassVar[tuple[str, ...]] = ("weights",)
    #: Not scaled to the whole stream: the scores come from a factorisation started anew at
    #: random for every chunk, not smooth in the rows (``stability.replicate_scores``); the
    #: index is that of n/K rows.
    stability_corrected = False

    def core_initial_state(self, params: OMVFSParams) -> State:
        k = params.n_clusters
        rng = np.random.default_rng([params.seed, 0])
        state: State = {
            "chunks_seen": 0,
            "A": np.zeros((k, k)),
            "U_buffer": np.zeros((0, k)),
            "buffer_chunk_rows": np.zeros(0, dtype=np.int64),
            "last_iterations": 0,
            "last_objective": 0.0,
            # The running moments of every feature as the factorisation sees it (rows scaled),
            # which the scale-free scores divide by.
            "feature_rows": 0,
            "feature_mean": np.zeros(params.size),
            "feature_m2": np.zeros(params.size),
        }
        factors = []
        for j, (_, dim) in enumerate(params.view_dims):
            v = rng.random((dim, k))  # step 1: V initialised randomly (nonnegative)
            factors.append(v)
            state[f"V{j}"] = v
            state[f"B{j}"] = np.zeros((dim, k))
            empty = np.zeros((0, 0))
            state.update(
                similarity_fields(empty if params.neighbours is None else sp.csr_matrix(empty), j)
            )
            state[f"X{j}_data"] = np.zeros(0)
            state[f"X{j}_indices"] = np.zeros(0, dtype=np.int64)
            state[f"X{j}_indptr"] = np.zeros(1, dtype=np.int64)
            state[f"bandwidth{j}"] = 0.0 if params.bandwidths is None else params.bandwidths[j]
        no_rows = (0, np.zeros(params.size), np.zeros(params.size))
        sums = [np.zeros_like(v) for v in factors]
        state["weights"] = feature_scores(factors, np.zeros((k, k)), sums, no_rows, params.score)
        return state

    def core_state_sizes(self, params: OMVFSParams) -> dict[str, int]:
        k = params.n_clusters
        sizes = {
            "A": 8 * k * k,
            "weights": 8 * params.size,
            "feature_mean": 8 * params.size,
            "feature_m2": 8 * params.size,
        }
        for j, (_, dim) in enumerate(params.view_dims):
            sizes[f"V{j}"] = sizes[f"B{j}"] = 8 * dim * k
            sizes[f"X{j}_indptr"] = 8  # the empty buffer's CSR row pointers
            if params.neighbours is not None:
                sizes[f"W{j}_indptr"] = 8
        return sizes  # the buffer (rows, U, similarities) grows with the chunks

    def core_update(self, state: State, params: OMVFSParams, rows: Matrix) -> State:
        """Steps 5-19 of Algorithm 1 for one chunk."""
        views = split_views(rows, params)
        return self._update(state, params, views, chunk_moments(sp.hstack(views, "csr")))

    def _update(
        self, state: State, cfg: OMVFSParams, views: list[sp.csr_matrix], chunk: Moments
    ) -> State:
        """Steps 5-19 for one chunk, split into its ``views`` (``split_views``), whose rows'
        feature moments are ``chunk``."""
        m, k = views[0].shape[0], cfg.n_clusters
        t = int(np.asarray(state["chunks_seen"])) + 1
        sizes = [int(s) for s in np.asarray(state["buffer_chunk_rows"])]
        drop = sizes[0] if len(sizes) == cfg.buffer_chunks else 0
        sizes = (sizes[1:] if drop else sizes) + [m]

        x_buffer: list[sp.csr_matrix] = []
        w: list[np.ndarray | sp.csr_matrix] = []
        widths: list[float] = []
        for j, view in enumerate(views):
            old = buffer_rows(state, j, cfg.view_dims[j][1])[drop:]
            sigma = float(np.asarray(state[f"bandwidth{j}"])) or median_distance(view)
            widths.append(sigma)
            to_old, among = new_similarities(view, old, sigma, cfg.neighbours)
            w_old = similarity_blocks(state, j, sparse=cfg.neighbours is not None)[drop:, drop:]
            if isinstance(w_old, np.ndarray):
                w.append(np.block([[w_old, to_old.T], [to_old, among]]))
            else:  # the kNN graph stays sparse: no (s m)^2 matrix is ever formed
                new_to_old = sp.csr_matrix(to_old)
                w.append(
                    sp.bmat([[w_old, new_to_old.T], [new_to_old, sp.csr_matrix(among)]], "csr")
                )
            x_buffer.append(sp.vstack([old, view], format="csr"))

        moments = combine(moments_so_far(state, cfg), chunk)

        # Step 6: U_t initialised randomly (seeded per chunk), the rest of the buffer warm.
        u_new = np.random.default_rng([cfg.seed, t]).random((m, k)) / math.sqrt(sum(sizes))
        u = np.vstack([np.asarray(state["U_buffer"])[drop:], u_new])
        buffer = chunk_buffer(x_buffer, w, m, cfg)
        solution = solve(
            buffer,
            u,
            buffer.stack([np.asarray(state[f"V{j}"], dtype=np.float64) for j in range(len(views))]),
            np.asarray(state["A"]),
            buffer.stack([np.asarray(state[f"B{j}"]) for j in range(len(views))]),
            m,
            cfg,
        )

        # Steps 16-17: A^ and B^ of the last iteration are A_t and B_t (U_t is final).
        v, b = buffer.unstack(solution.v), buffer.unstack(solution.b)
        new: State = dict(state)
        new["chunks_seen"] = t
        new["A"] = solution.a
        new["U_buffer"] = solution.u
        new["buffer_chunk_rows"] = np.asarray(sizes, dtype=np.int64)
        new["last_iterations"] = solution.iterations
        new["last_objective"] = solution.objective
        for j in range(len(views)):
            new[f"V{j}"] = v[j]
            new[f"B{j}"] = b[j]
            for field in (f"W{j}", f"W{j}_data", f"W{j}_indices", f"W{j}_indptr"):
                new.pop(field, None)  # an older layout's fields do not linger
            new.update(similarity_fields(w[j], j))
            new[f"X{j}_data"] = x_buffer[j].data
            new[f"X{j}_indices"] = x_buffer[j].indices.astype(np.int64)
            new[f"X{j}_indptr"] = x_buffer[j].indptr.astype(np.int64)
            new[f"bandwidth{j}"] = widths[j]
        new["feature_rows"], new["feature_mean"], new["feature_m2"] = moments
        new["weights"] = feature_scores(v, solution.a, b, moments, cfg.score)  # step 19
        return new

    def weights(self, state: State, params: OMVFSParams) -> np.ndarray:
        """Every feature's score (``feature_scores``), the views side by side."""
        return np.array(state["weights"], dtype=np.float64)

    # -- the subsamples: Algorithm 1 on each one's rows, as many iterations as the whole ----

    def subsample_initial_state(self, params: OMVFSParams) -> State:
        return self.core_initial_state(params)

    def subsample_state_sizes(self, params: OMVFSParams) -> dict[str, int]:
        return self.core_state_sizes(params)

    def update_with_subsamples(
        self,
        state: State,
        subsamples: list[State],
        params: OMVFSParams,
        chunk: Matrix,
        dealt: np.ndarray,
    ) -> tuple[State, list[State]]:
        """Steps 5-19 for the whole stream, then for each subsample on its rows of the chunk
        (its chunk), for at most as many iterations as the whole stream's took on it
        (``last_iterations``). The subsamples reuse what does not depend on which rows are
        together: the chunk's views with their rows scaled (``split_views``, per row), and the
        feature moments of their rows, from one pass over the chunk (``grouped_moments``)."""
        views = split_views(chunk, params)
        moments, parts = grouped_moments(sp.hstack(views, "csr"), dealt, len(subsamples))
        new = self._update(state, params, views, moments)
        done = int(np.asarray(new["last_iterations"]))
        capped = params.model_copy(update={"max_iter": max(1, min(done, params.max_iter))})
        out = []
        for g, subsample in enumerate(subsamples):
            rows = np.flatnonzero(dealt == g)
            if rows.size:
                subsample = self._update(subsample, capped, [v[rows] for v in views], parts[g])
            out.append(subsample)
        return new, out

    def subsample_scores(self, subsample: State, params: OMVFSParams) -> np.ndarray:
        return np.array(subsample["weights"], dtype=np.float64)

    def subsample_rows(self, subsample: State) -> int:
        return int(np.asarray(subsample["feature_rows"]))

    def subsample_check(self, subsample: State, params: OMVFSParams) -> None:
        self.core_check_consistency(subsample, params, {})

    def subsample_growing_axes(self, params: OMVFSParams) -> dict[str, tuple[int, ...]]:
        return self.core_growing_axes(params)

    def core_growing_axes(self, params: OMVFSParams) -> dict[str, tuple[int, ...]]:
        """``ChecksState``: the buffer's CSR row pointers grow from their one initial entry."""
        views = params.views
        return {f"{part}{j}_indptr": (0,) for j in range(len(views)) for part in ("X", "W")}

    def core_check_consistency(
        self,
        state: State,
        params: OMVFSParams,
        segments: Mapping[str, np.ndarray],
    ) -> None:
        """``ChecksState``: the buffer's parts (U, W and the rows of every view) hold the same
        buffered rows, at most ``buffer_chunks`` chunks of them."""
        sizes = np.asarray(state["buffer_chunk_rows"])
        rows = int(sizes.sum())
        if (
            sizes.shape[0] > params.buffer_chunks
            or np.any(sizes < 1)
            or int(np.asarray(state["chunks_seen"])) < sizes.shape[0]
            or np.asarray(state["U_buffer"]).shape[0] != rows
        ):
            raise Inconsistent(
                f"an omvfs buffer holds at most buffer_chunks={params.buffer_chunks} chunks of at "
                f"least one row, U for each of its rows; got chunk sizes {sizes.tolist()[:10]} "
                f"and U of shape {np.asarray(state['U_buffer']).shape}"
            )
        # The buffered rows were counted into the moments (the views are nonnegative).
        if (
            int(np.asarray(state["feature_rows"])) < rows
            or np.any(np.asarray(state["feature_mean"]) < 0)
            or np.any(np.asarray(state["feature_m2"]) < 0)
        ):
            raise Inconsistent(
                "the feature moments count at least the buffered rows, with nonnegative means "
                f"and squared deviations; got {int(np.asarray(state['feature_rows']))} rows for "
                f"a buffer of {rows}"
            )
        for j, (view, dim) in enumerate(params.view_dims):
            check_csr(state, f"X{j}", rows, dim, f"view '{view}': the buffer's rows")
            if f"W{j}_indptr" in state:
                check_csr(state, f"W{j}", rows, rows, f"view '{view}': the similarities W")
            elif np.asarray(state[f"W{j}"]).shape != (rows, rows):
                raise Inconsistent(f"view '{view}': the similarities W must be {rows} x {rows}")
            if float(np.asarray(state[f"bandwidth{j}"])) < 0:
                raise Inconsistent(f"view '{view}': the bandwidth must not be negative")


def check_csr(state: State, prefix: str, rows: int, columns: int, what: str) -> None:
    """``Inconsistent`` unless ``<prefix>_data``, ``_indices`` and ``_indptr`` make a CSR
    matrix of ``rows x columns``."""
    indptr = np.asarray(state[f"{prefix}_indptr"])
    data, indices = np.asarray(state[f"{prefix}_data"]), np.asarray(state[f"{prefix}_indices"])
    if (
        indptr.shape[0] != rows + 1
        or indptr[0] != 0
        or np.any(np.diff(indptr) < 0)
        or not indptr[-1] == data.shape[0] == indices.shape[0]
        or np.any((indices < 0) | (indices >= columns))
    ):
        raise Inconsistent(f"{what} must be a CSR matrix of {rows} x {columns}")
