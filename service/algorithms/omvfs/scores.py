"""OMVFS's rankings (``score``): the paper's row norms of V (step 19) and the two scale-free
scores, from the running moments of every feature (the package docstring says why)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from service.algorithms.base import State
from service.algorithms.moments import chunk_moments
from service.algorithms.omvfs.graph import buffer_rows
from service.algorithms.omvfs.params import OMVFSParams


def feature_scores(
    v: list[np.ndarray],
    a: np.ndarray,
    b: list[np.ndarray],
    moments: tuple[int, np.ndarray, np.ndarray],
    score: str,
) -> np.ndarray:
    """The ranking of step 19 by ``score`` (module docstring), the views side by side.

    ``v`` are the ``V^(v)``, ``a`` and ``b`` are ``A_t`` and the ``B_t^(v)``, ``moments`` the
    running ``(n, mean, M2)`` of every feature; the scale-free scores are 0 while no row was
    seen and for a feature that has been constant.
    """
    norms = np.concatenate([np.linalg.norm(vj, axis=1) for vj in v])
    if score == "paper":
        return norms
    rows, mean, m2 = moments
    scores = np.zeros_like(norms)
    if rows == 0:
        return scores
    if score == "scaled":
        rms = np.sqrt(mean * mean + m2 / rows)
        return np.asarray(np.divide(norms, rms, out=scores, where=rms > 0))
    # The mean squared residual of every feature over all rows seen, each chunk's rows with its
    # final U_t: |x_j - U V_j^T|^2 / n = (|x_j|^2 - 2 B_j . V_j + V_j A V_j^T) / n.
    stacked, sums = np.vstack(v), np.vstack(b)
    fitted = np.einsum("ij,jk,ik->i", stacked, a, stacked)
    crossed = np.einsum("ij,ij->i", stacked, sums)
    variance = m2 / rows
    residual = np.maximum(mean * mean + variance + (fitted - 2 * crossed) / rows, 0.0)
    total = variance + residual
    return np.asarray(np.divide(variance, total, out=scores, where=total > 0))


def moments_so_far(state: State, cfg: OMVFSParams) -> tuple[int, np.ndarray, np.ndarray]:
    """The running ``(n, mean, M2)`` of every feature before this chunk.

    A state stored before they were kept (a selector created before ``score`` existed, whose
    params say nothing of it and so rank by the paper's score) has none: they start from the
    rows its buffer holds, the last chunks of what it saw.
    """
    if "feature_m2" in state:
        return (
            int(np.asarray(state["feature_rows"])),
            np.asarray(state["feature_mean"], dtype=np.float64),
            np.asarray(state["feature_m2"], dtype=np.float64),
        )
    held = sp.hstack(
        [buffer_rows(state, j, dim) for j, (_, dim) in enumerate(cfg.view_dims)], format="csr"
    )
    if held.shape[0] == 0:
        return 0, np.zeros(held.shape[1]), np.zeros(held.shape[1])
    return chunk_moments(held)
