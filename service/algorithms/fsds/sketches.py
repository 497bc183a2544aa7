"""FSDS's sketches merged and taken apart (the subsamples of ``ResampledMergeable``), and what
a state's sketch must be."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from service.algorithms.base import State
from service.algorithms.fsds.params import FSDSParams
from service.algorithms.fsds.weights import _EPS
from service.algorithms.sketching import (
    SketchUpdate,
    frequent_directions_update,
)
from service.algorithms.subsamples import resample_count
from service.errors import Inconsistent, InvalidInput


def _state_float(state: State, key: str) -> float:
    """A scalar of the state as float (a decoded state may hold numpy scalars or 0-d arrays)."""
    value = state.get(key)
    return 0.0 if value is None else float(np.asarray(value))


def _merge_sketches(
    state: State, summary: State, cfg: FSDSParams, samples: int
) -> tuple[SketchUpdate, State]:
    """Another sketch of the same features folded in as rows, with one shrink (``merge``);
    ``samples``: the rows it stands for. The sketch's fields after it (no alpha, no weights)."""
    sketch = sketch_of(state)
    other = sketch_of(summary)
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
    upd = frequent_directions_update(
        sketch, other, block_rows=max(other.shape[0], 1), singular_values=known_values(state)
    )
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


def known_values(fields: State) -> np.ndarray | None:
    """The singular values of a sketch kept in double precision, whose Gram is ``diag(s^2)``
    to rounding (``frequent_directions_update``'s ``singular_values``: no product over m to
    find it); None for one kept in single precision, whose rows' rounding its Gram must see
    (``kept_subsample``), or given without them (``FSDS.subsample_of_whole``)."""
    if "singular_values" not in fields or np.asarray(fields["sketch_rows"]).dtype != np.float64:
        return None
    return np.asarray(fields["singular_values"], dtype=np.float64)


def _check_sketch(state: State, cfg: FSDSParams) -> None:
    """What steps 1-4 leave behind (``FSDS.core_check_consistency``)."""
    kept = np.asarray(state["sketch_rows"])
    sketch = sketch_of(state)
    sigma = np.asarray(state["singular_values"], dtype=np.float64)
    seen = _state_float(state, "squared_norm_seen")
    # Rows kept in single precision (``kept_subsample``) hold their Gram to its rounding.
    eps = float(np.finfo(kept.dtype).eps) if kept.dtype.kind == "f" else 0.0
    rounding = max(1e-9, 64 * eps)
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
    if not np.allclose(gram, np.diag(sigma**2), rtol=0.0, atol=rounding * scale):
        raise Inconsistent(
            "an fsds sketch is S V^T (Algorithm 2, step 3): its rows are orthogonal with "
            "the singular values as norms; this one's are not"
        )
    energy = float(np.trace(gram))
    if int(np.asarray(state["rows_seen"])) == 0 and (energy > 0 or seen > 0):
        raise Inconsistent("an fsds state that has seen no rows has an empty sketch")
    if not cfg.gaussian and energy > seen * (1 + rounding) + 1e-300:
        raise Inconsistent(
            f"an fsds sketch holds at most the squared norm of the rows it saw ({seen:g}); "
            f"this one holds {energy:g}"
        )


def subsample_config(params: FSDSParams) -> FSDSParams:
    """A stored subsample's sketch (``resamples``): ``resample_ell`` rows (``k`` directions, the
    whole stream's forgetting, in ``_fold_weighed``), shrunk every ``ceil(block_rows / K)`` of
    its rows, i.e. at about the same stream positions as the whole sketch (``block_rows =
    null``: once per update, as the whole's)."""
    k = max(resample_count(params), 1)
    block = None if params.block_rows is None else max(1, math.ceil(params.block_rows / k))
    return params.model_copy(update={"block_rows": block, "ell": params.resample_ell})


def subsample_dtype(params: FSDSParams) -> type[np.floating[Any]]:
    """The dtype a stored subsample's sketch rows are kept in (``resample_precision``)."""
    return np.float32 if params.resample_precision == "single" else np.float64


def kept_subsample(fields: State, params: FSDSParams) -> State:
    """A subsample's sketch fields as the state keeps them, once an update or merge (computed
    in double) has made them: in single precision (``resample_precision``) the rows are kept
    as their directions, each row ``s_j v_j^T`` over its singular value ``s_j`` (unit rows, so
    no magnitude a stream may reach overflows them; a zero row stays zero); ``sketch_of``
    multiplies them back.

    Single precision rounds each entry by at most ``2^-24`` of it, which moves ``B^T B`` by at
    most ``2^-23 ||B||_F^2 <= 2^-23 ||A||_F^2`` in spectral norm: at ell = 142 about 1/59,000 of
    the Frequent-Directions bound ``||A||_F^2 / ell`` per update (adding up, in the worst case,
    to 1/59 of it after a thousand updates), on a sketch read only for its ranking's agreement
    with the others'."""
    if subsample_dtype(params) is np.float64:
        return fields
    rows = np.asarray(fields["sketch_rows"], dtype=np.float64)
    sigma = np.asarray(fields["singular_values"], dtype=np.float64)
    inverse = np.zeros_like(sigma)
    np.divide(1.0, sigma, out=inverse, where=sigma > 0)
    return {**fields, "sketch_rows": (rows * inverse[:, None]).astype(np.float32)}


def sketch_of(fields: State) -> np.ndarray:
    """The sketch rows of a state or a subsample in double precision: as kept, or, kept in
    single precision (``kept_subsample``), their directions times the singular values."""
    rows = np.asarray(fields["sketch_rows"])
    if rows.dtype == np.float64:
        return rows
    sigma = np.asarray(fields["singular_values"], dtype=np.float64)
    if rows.ndim != 2 or sigma.shape != rows.shape[:1]:
        raise Inconsistent(
            f"a sketch kept in single precision has a singular value per row; got rows of "
            f"shape {rows.shape} and {sigma.shape[0] if sigma.ndim else 0} values"
        )
    return np.asarray(rows, dtype=np.float64) * sigma[:, None]


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
