"""OMVFS: online unsupervised multi-view feature selection (Shao et al., Algorithm 1).

The package: ``params`` (the parameters, declared once), ``graph`` (views, kernel, kNN graph),
``solver`` (the iterations of one chunk), ``scores`` (the rankings), ``method`` (the state and
the update, as the service calls them).

Every chunk ``X_t`` has the same rows in every view ``v`` (``m x D_v``, nonnegative). The state
between chunks (section III-C, Fig. 2), all small and all persisted:

* ``A_t = sum_i U_i^T U_i`` (``K x K``, eq. (16)) and ``B_t^(v) = sum_i X_i^(v)T U_i``
  (``D_v x K``, eq. (17)): everything the past contributes to the V update;
* ``V^(v)`` (``D_v x K``), warm-started from chunk to chunk (step 1 initialises it once);
* the buffer of the last ``s`` chunks: their rows ``X_[s,t]^(v)`` (kept sparse), their cluster
  indicators ``U_[s,t]`` and their similarity blocks ``W_[s,t]^(v)``, so that a new chunk only
  adds the ``m x sm`` new similarities (Fig. 2). A kNN graph is stored as CSR parts
  (``W{j}_data``, ``W{j}_indices``, ``W{j}_indptr``: at most about ``2 k s m`` entries per
  view), the dense kernel as one ``sm x sm`` array ``W{j}``; states stored before the graph
  was kept sparse (dense ``W{j}`` with ``neighbours`` set) are read and rewritten sparse.

Per chunk (steps 5-17): slide the buffer, initialise ``U_t`` (seeded, nonnegative), then
alternate until U and every V^(v) settle (below) or ``max_iter``:

* eq. (20): ``U <- U * sqrt((sum_v X^(v) V^(v) + gamma U + M^- U) /
  (U sum_v V^(v)T V^(v) + gamma U U^T U + M^+ U))`` over the buffer, with
  ``M = sum_v alpha_v L^(v)``, ``L = D - W``, ``M^+ = (|M| + M) / 2``, ``M^- = (|M| - M) / 2``.
  The paper's lambda in the numerator is gamma: it is the ``-2 gamma U`` of the gradient (11).
  ``W`` is nonnegative with a zero diagonal, so ``M^+`` is the diagonal ``sum_v alpha_v D^(v)``
  and ``M^-`` is ``sum_v alpha_v W^(v)`` (no n x n absolute values are formed);
* eq. (19) per view: ``V <- V * sqrt((B_{t-1} + X_t^T U_t) /
  (V (A_{t-1} + U_t^T U_t) + beta / 2 D V))`` with ``D = diag(1 / |v_j|)``; a zero row gets
  ``D_jj = 1 / ZERO_ROW`` (it stays zero, the multiplicative update cannot revive it anyway).

Then ``A_t``, ``B_t`` fold in the chunk with its final ``U_t`` (steps 16-17) and the features of
each view are ranked by the row norms of ``V^(v)`` (step 19).

How one iteration is computed (the iterates are those of the formulas above, up to the order of
floating-point sums): what does not change within a chunk is formed once (``_Buffer``: the
views side by side, mostly-dense views as plain arrays since BLAS beats a CSR product from about
10 % nonzeros on, ``M^-`` and ``M^+``, ``|X|_F^2``); the products ``sum_v X^(v) V^(v)``,
``sum_v V^(v)T V^(v)``, ``U^T U``, ``M^- U`` and the row norms of V are formed once per
iteration (``_Iterate``) and serve the next U and V updates, the stopping rule and the
objective; eq. (19) runs on all views at once (``A^`` is shared, ``beta_v`` is per row).

Stopping rule: after each iteration, the relative change ``max(|U' - U|_F / |U|_F,
max_v |V'^(v) - V^(v)|_F / |V^(v)|_F) <= tol`` (default 1e-3), not the relative change of the
objective: the orthogonality penalty dominates the objective and keeps creeping down long after
the rankings stopped moving (EVALUATION.md, "How OMVFS's defaults were chosen").

The objective (reported as ``last_objective``) is the sum of the two sub-problems each update
descends (eq. (10) on the buffer for U, eq. (13)-(14) through A and B for V)::

    sum_v ( |X_[s,t] - U V^T|_F^2 + alpha_v tr(U^T L U) + tr(V A^ V^T) - 2 tr(V^T B^)
            + beta_v |V|_{2,1} ) + gamma |U^T U - I|_F^2

with ``A^ = A_{t-1} + U_t^T U_t`` and ``B^ = B_{t-1} + X_t^T U_t``, formed from the cached
products (``|X - U V^T|_F^2 = |X|_F^2 - 2 tr(V^T X^T U) + tr(V^T V U^T U)``).

Similarity (the paper: "we used the Gaussian kernel", no bandwidth given): ``W_ij =
exp(-|x_i - x_j|^2 / (2 sigma^2))`` with ``sigma`` per view, by default the median distance
between the rows of the first chunk (stored with the state, so every chunk uses the same
kernel: a data-driven scale, not a silent constant). By default (``neighbours = 10``) each new
row keeps only its 10 most similar buffer rows (symmetrically): the Gaussian-weighted kNN graph
of graph-regularised NMF (Cai et al., the paper's reference [21]); ``neighbours: null`` keeps
the dense kernel, whose blocks cost ``(s m)^2`` doubles per view of state for the same NMI
(EVALUATION.md).
Rows are scaled to unit L2 norm per view by default (``normalize_rows``), so that no view
dominates the shared U by its scale alone.

Ranking (``score``). Step 19 ranks by the row norm of ``V^(v)``. On nonnegative data that norm
follows each feature's column mean: ``V`` must reproduce the magnitude of a feature before
anything else, so the paper's ranking favours large-valued features (EVALUATION.md measures it).
Two scale-free scores use a few running numbers per feature kept in the state (its count, mean
and M2 as the factorisation sees it, Welford/Chan as in ``service.algorithms.variance``):

* ``explained`` (default): the share of a feature's variance that the cluster model explains,
  ``var_j / (var_j + r_j)`` with ``r_j = |x_j - U V_j^T|^2 / n`` the mean squared residual over
  all rows seen, each chunk with its final ``U_t``, computed from ``A_t`` and ``B_t`` (steps
  16-17) without the rows: ``r_j = (|x_j|^2 - 2 B_j . V_j + V_j A_t V_j^T) / n``;
* ``scaled``: the row norm of ``V^(v)`` over the feature's root mean square;
* ``paper``: the row norm of ``V^(v)`` (step 19), kept for fidelity.

Orthogonality weight (``gamma``). At the paper's gamma = 1e7 the penalty ``gamma |U^T U -
I|_F^2`` dwarfs the fit term (``|X|_F^2`` is the number of rows with unit rows), so U hardly
leaves its random start and the clusters barely inform V. ``gamma: "auto"`` (default) ties it
to the scale of the fit term of each chunk: ``0.1 |X_[s,t]|_F^2 / K`` (``GAMMA_SCALE``).
Selectors created before these defaults keep the ``gamma`` their params were resolved to and
rank by ``paper`` (their params have no ``score``).
"""

from service.algorithms.omvfs.graph import median_distance, new_similarities, split_views
from service.algorithms.omvfs.method import OMVFS
from service.algorithms.omvfs.params import GAMMA_SCALE, SCORES, OMVFSParams
from service.algorithms.omvfs.solver import TINY, ZERO_ROW

__all__ = [
    "GAMMA_SCALE",
    "OMVFS",
    "SCORES",
    "TINY",
    "ZERO_ROW",
    "OMVFSParams",
    "median_distance",
    "new_similarities",
    "split_views",
]
