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

from service.algorithms.fsds.method import FSDS
from service.algorithms.fsds.params import (
    BLOCK_ELLS,
    DEFAULT_KERNEL_COMPONENTS,
    MIN_BLOCK_ROWS,
    FSDSParams,
    default_block_rows,
)
from service.algorithms.fsds.reference import gfw_p2_kernel_weights, gfw_p2_weights
from service.algorithms.fsds.sketches import unmerge_sketches
from service.algorithms.fsds.weights import normalize_rows

__all__ = [
    "BLOCK_ELLS",
    "DEFAULT_KERNEL_COMPONENTS",
    "FSDS",
    "MIN_BLOCK_ROWS",
    "FSDSParams",
    "default_block_rows",
    "gfw_p2_kernel_weights",
    "gfw_p2_weights",
    "normalize_rows",
    "unmerge_sketches",
]
