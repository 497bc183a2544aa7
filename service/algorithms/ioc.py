"""Incremental Orthogonal Centroid (Yan et al., TKDE 2006, section 3.1, Table 1).

IOC learns the ``p`` leading eigenvectors of the inter-class scatter ``S_b`` one labelled
sample at a time, without forming ``S_b``. For sample ``n`` (Table 1):

* update the class counts and means and the overall mean; ``Phi_i^1 = m_i(n) - m(n)``;
* for the vectors ``j = 1 .. min(p, n)``: if ``j = n`` the vector starts as the sample,
  ``v^j(n) = x(n)``; otherwise, with ``alpha_i^j = Phi_i^j . v^j(n-1) / ||v^j(n-1)||``,

      v^j(n) = (n-1)/n v^j(n-1) + 1/n sum_i alpha_i^j p_i(n) Phi_i^j        (the 1/n average)
      Phi_i^{j+1} = Phi_i^j - (Phi_i^j . v^j(n)) v^j(n) / ||v^j(n)||^2       (deflation)

  where ``p_i(n) = N_i(n) / n`` is the class prior.

The solution is ``u^j = v^j / ||v^j||``; ``||v^j||`` estimates the eigenvalue ``lambda_j``
(``v = S_b u = lambda u`` at convergence). A projection ``W = [u^1 .. u^p]`` maps a row ``x``
to ``W^T x`` (section 2.1). Cost per sample O(c m p), as section 3.1.2 says.

Two departures, both documented in docs/methods/ocfs-ioc.md:

* A vector is started by the first sample after its predecessor whose row is not all zero
  (the paper's ``j = n``, which it equals when no row is zero): a zero start would stay zero.
* ``amnesia`` (default 0, the paper) is CCIPCA's amnesic average: weights
  ``(n-1-l)/n`` and ``(1+l)/n`` with ``l = min(amnesia, (n-1)/2)``, which forgets the early
  (poor) estimates faster and converges faster in high dimension.

Feature scores (``weights``): ``score_i = sum_j lambda_j (u_i^j)^2 = sum_j (v_i^j)^2 / ||v^j||``,
the between-class scatter the projection keeps along feature ``i``. With ``p = c - 1`` this is
the diagonal of ``S_b``, i.e. the OCFS score; with fewer vectors it keeps the leading part.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp
from pydantic import Field

from service.algorithms.base import ChunkKind, Projection, State
from service.algorithms.examples import Example
from service.algorithms.labels import (
    CLASSES_FIELD,
    COUNTS_FIELD,
    LabelledRows,
    check_classes,
    describe_classes,
    discover,
    encode_classes,
    grow_rows,
    stored_classes,
)
from service.algorithms.ocfs import (
    SUMS_FIELD,
    add_classes,
    check_spread,
    exact_directions,
    merge_classes,
    remove_classes,
)
from service.algorithms.resampling import ResampledMethod
from service.algorithms.subsamples import ResampledParams, SubsampleRows
from service.errors import Conflict, Inconsistent, InvalidParams


class IOCParams(ResampledParams):
    """Yan et al. 2006, Table 1 (see docs/methods/ocfs-ioc.md)."""

    method: ClassVar[str] = "ioc"

    n_components: int = Field(1, ge=1, description="p, at most n_features.")
    amnesia: float = Field(
        0.0, ge=0, le=100, description="CCIPCA's amnesic average l (0: the plain mean 1/n)."
    )

    def complete(self, size: int, stored: bool) -> None:
        if self.n_components > size:
            raise InvalidParams(
                f"n_components must be an integer in [1, n_features={size}]; "
                f"got {self.n_components}"
            )


class IOC(ResampledMethod[IOCParams]):
    """Incremental Orthogonal Centroid over labelled row chunks, one sample at a time.

    The result does not depend on the chunking (the samples are processed in log order either
    way), so the applier may coalesce chunks.
    """

    name = "ioc"
    paper = (
        'Yan et al., "Effective and Efficient Dimensionality Reduction for Large-Scale and '
        'Streaming Data Preprocessing", TKDE 2006 (Table 1)'
    )
    chunk_kind: ChunkKind = "labelled rows"
    params_model = IOCParams
    examples: tuple[Example, ...] = (Example({"n_features": 5}, {"n_components": 2}, items=10),)
    score_field = "weights"
    describe_fields: tuple[str, ...] = (COUNTS_FIELD,)
    #: ``Projects``: IOC's learned W, or the exact batch OC solution the state determines.
    projection_fields: tuple[str, ...] = ("vectors", "eigenvalues", COUNTS_FIELD, SUMS_FIELD)
    solutions: tuple[str, ...] = ("ioc", "exact")
    stability_estimate = (
        "the between-class-scatter ranking IOC converges to: the class counts and sums of K "
        "interleaved subsamples of the rows (K - 1 stored, the last the whole stream's minus "
        "theirs), each scored by the exact OC solution of its statistics (the n_components "
        "leading eigenvectors of S_b, sum_j lambda_j u_ij^2), their spread scaled to resamples "
        "of every row seen"
    )

    #: Its subsamples are OCFS's statistics: classes (in their own order of discovery),
    #: counts and sums, which add exactly: ``K - 1`` stored, the last the whole stream's minus
    #: theirs.
    subsample_fields: ClassVar[tuple[str, ...]] = (COUNTS_FIELD, SUMS_FIELD)
    derives_last = True
    derived_from: ClassVar[tuple[str, ...]] = (COUNTS_FIELD, SUMS_FIELD)

    def subsample_initial_state(self, params: IOCParams) -> State:
        return {
            CLASSES_FIELD: encode_classes([]),
            COUNTS_FIELD: np.zeros(0, dtype=np.int64),
            SUMS_FIELD: np.zeros((0, params.size)),
        }

    def subsample_state_sizes(self, params: IOCParams) -> dict[str, int]:
        return {}  # counts and sums grow by one row per class found

    def subsample_update(
        self,
        subsample: State,
        params: IOCParams,
        chunk: LabelledRows,
        whole: State,
        dealt: SubsampleRows,
    ) -> State:
        return add_classes(subsample, chunk, dealt.positions)

    def subsample_rows(self, subsample: State) -> int:
        return int(np.asarray(subsample[COUNTS_FIELD]).sum())

    def subsample_check(self, subsample: State, params: IOCParams) -> None:
        check_spread(subsample)

    def subsample_merge(self, subsample: State, params: IOCParams, other: State) -> State:
        return merge_classes(subsample, other)

    def subsample_of_whole(self, whole: State, params: IOCParams) -> State:
        return {f: whole[f] for f in (CLASSES_FIELD, COUNTS_FIELD, SUMS_FIELD)}

    def subsample_unmerge(self, whole: State, params: IOCParams, part: State) -> State:
        return remove_classes(whole, part)

    def core_initial_state(self, params: IOCParams) -> State:
        return {
            CLASSES_FIELD: encode_classes([]),
            COUNTS_FIELD: np.zeros(0, dtype=np.int64),
            SUMS_FIELD: np.zeros((0, params.size)),
            "sample_sum": np.zeros(params.size),
            "samples": 0,
            "vectors": np.zeros((params.n_components, params.size)),
            "vectors_started": 0,
            "eigenvalues": np.zeros(params.n_components),
            "weights": np.zeros(params.size),
        }

    def core_state_sizes(self, params: IOCParams) -> dict[str, int]:
        p = params.n_components
        return {
            "vectors": 8 * p * params.size,
            "eigenvalues": 8 * p,
            "sample_sum": 8 * params.size,
            "weights": 8 * params.size,
        }  # class counts and sums grow by one row per class found

    def core_update(self, state: State, params: IOCParams, rows: LabelledRows) -> State:
        """Table 1 for every row of the chunk, in order."""
        if rows.multiplicity is not None:
            raise ValueError("IOC processes samples one by one: it cannot take class summaries")
        classes, codes = discover(stored_classes(state), rows)
        run = _Run(
            counts=grow_rows(np.asarray(state[COUNTS_FIELD], dtype=np.int64), len(classes)),
            sums=grow_rows(np.asarray(state[SUMS_FIELD], dtype=np.float64), len(classes)),
            total=np.array(state["sample_sum"], dtype=np.float64),
            n=int(np.asarray(state["samples"])),
            vectors=np.array(state["vectors"], dtype=np.float64),
            started=int(np.asarray(state["vectors_started"])),
            amnesia=params.amnesia,
        )
        x = rows.rows
        if sp.issparse(x):
            csr = sp.csr_matrix(x, copy=True)
            csr.sum_duplicates()  # a row's values are added by index: one entry per index
            for i in range(csr.shape[0]):
                lo, hi = csr.indptr[i], csr.indptr[i + 1]
                run.step(codes[i], csr.indices[lo:hi], csr.data[lo:hi])
        else:
            dense = np.asarray(x, dtype=np.float64)
            for i in range(dense.shape[0]):
                run.step(codes[i], None, dense[i])
        lengths = np.linalg.norm(run.vectors, axis=1)
        return {
            CLASSES_FIELD: encode_classes(classes),
            COUNTS_FIELD: run.counts,
            SUMS_FIELD: run.sums,
            "sample_sum": run.total,
            "samples": run.n,
            "vectors": run.vectors,
            "vectors_started": run.started,
            "eigenvalues": lengths,
            "weights": feature_scores(run.vectors),
        }

    def weights(self, state: State, params: IOCParams) -> np.ndarray:
        return np.array(state["weights"], dtype=np.float64)

    def subsample_scores(self, subsample: State, params: IOCParams) -> np.ndarray:
        """The scores IOC converges to on the subsample's rows: ``sum_j lambda_j u_ij^2`` over
        the ``p`` leading eigenpairs of its ``S_b`` (the exact OC solution, ``solution=exact``),
        which its class counts and sums determine. Not IOC's own iterates: those are sequential
        (Table 1 does not merge), and a copy of them per subsample would double the state."""
        counts = np.asarray(subsample[COUNTS_FIELD])
        sums = np.asarray(subsample[SUMS_FIELD], dtype=np.float64)
        p = params.n_components
        if counts.sum() == 0:
            return np.zeros(sums.shape[1])
        vectors, values = exact_directions(counts, sums, p)
        return np.asarray((vectors**2) @ values)

    def describe(self, state: State) -> dict[str, Any]:
        return describe_classes(state)

    def core_check_consistency(
        self,
        state: State,
        params: IOCParams,
        segments: Mapping[str, np.ndarray],
    ) -> None:
        """``ChecksState``: one count and one row of sums per class, as many samples as they
        count, no more eigenvectors started than there are."""
        samples = check_classes(state, SUMS_FIELD)
        started = int(np.asarray(state["vectors_started"]))
        p = params.n_components
        if samples != state["samples"] or not 0 <= started <= p:
            raise Inconsistent(
                f"an ioc state counts as many samples as its classes ({samples}) and starts at "
                f"most n_components={p} vectors; got samples {state['samples']}, "
                f"vectors_started {started}"
            )

    def projections(
        self, arrays: Mapping[str, np.ndarray], params: IOCParams
    ) -> dict[str, Projection]:
        """IOC's ``W`` (Table 1) and the exact batch OC solution, with IOC's agreement.

        ``S_b`` depends on the data only through the class counts and sums, so the exact
        solution is an SVD of the centred class means away. A Conflict until every one of the
        ``p`` vectors has started (at a nonzero row) and while fewer than ``p + 1`` classes have
        been seen: ``S_b`` has rank at most ``c - 1``, so directions beyond that carry no class
        information.
        """
        p = params.n_components
        classes = int(arrays[COUNTS_FIELD].size)
        started = int(np.count_nonzero(arrays["eigenvalues"]))
        if started < p:
            raise Conflict(
                f"{started} of the n_components={p} vectors have started (vector j starts at "
                "the j-th nonzero row): push more rows"
            )
        if classes < p + 1:
            raise Conflict(
                f"{classes} classes seen, so S_b has rank at most {max(classes - 1, 0)} and only "
                f"that many of the n_components={p} directions carry class information; push "
                f"rows of more classes, or create the selector with n_components <= "
                f"{max(classes - 1, 1)}"
            )
        learned = projection(np.asarray(arrays["vectors"]))
        exact, exact_values = exact_directions(arrays[COUNTS_FIELD], arrays[SUMS_FIELD], p)
        # Eigenvectors have no sign: show the exact ones pointing the way IOC's do.
        signs = np.where(np.sum(learned * exact, axis=0) < 0, -1.0, 1.0)
        exact = exact * signs
        agreement = np.abs(np.sum(learned * exact, axis=0))
        eigenvalues = np.asarray(arrays["eigenvalues"], dtype=np.float64)
        return {
            "ioc": Projection(learned, eigenvalues, agreement),
            "exact": Projection(exact, exact_values, agreement),
        }


def feature_scores(vectors: np.ndarray) -> np.ndarray:
    """``sum_j lambda_j (u_i^j)^2 = sum_j (v_i^j)^2 / ||v^j||`` over the started vectors."""
    lengths = np.linalg.norm(vectors, axis=1)
    started = lengths > 0
    return np.asarray((vectors[started] ** 2 / lengths[started, None]).sum(axis=0))


def projection(vectors: np.ndarray) -> np.ndarray:
    """``W = [u^1 .. u^p]`` (``m x p``): the unit vectors of IOC's solution."""
    lengths = np.linalg.norm(vectors, axis=1)
    return np.ascontiguousarray((vectors / np.where(lengths > 0, lengths, 1.0)[:, None]).T)


@dataclass
class _Run:
    """The mutable working copy of the state while one chunk's samples are folded in."""

    counts: np.ndarray
    sums: np.ndarray
    total: np.ndarray
    n: int
    vectors: np.ndarray
    started: int
    amnesia: float

    def step(self, k: int, indices: np.ndarray | None, values: np.ndarray) -> None:
        """One sample of class ``k`` (a dense row, or a sparse row's indices and values)."""
        if indices is None:
            self.sums[k] += values
            self.total += values
        else:
            self.sums[k, indices] += values
            self.total[indices] += values
        self.counts[k] += 1
        self.n += 1
        n = self.n
        present = self.counts > 0
        priors = self.counts[present] / n
        phi = self.sums[present] / self.counts[present, None] - self.total / n  # Phi^1
        # Amnesia only once the old estimate keeps at least half its weight: an early vector
        # must not be wiped out by a sample that carries no class information yet.
        forget = min(self.amnesia, (n - 1) / 2)
        keep, learn = (n - 1 - forget) / n, (1 + forget) / n
        for j in range(self.started):
            v = self.vectors[j]
            length = np.linalg.norm(v)
            if length == 0:  # cancelled out exactly; the next samples restart it
                continue
            alpha = phi @ v / length
            v = keep * v + learn * ((alpha * priors) @ phi)
            self.vectors[j] = v
            squared = v @ v
            if squared > 0:
                phi = phi - np.outer(phi @ v, v / squared)  # deflate for vector j + 1
        if self.started < self.vectors.shape[0] and values.any():
            # Table 1's "if j = n then v^j(n) = x(n)": the next vector starts at this sample.
            row = self.vectors[self.started]
            row[:] = 0.0
            if indices is None:
                row += values
            else:
                row[indices] = values
            self.started += 1
