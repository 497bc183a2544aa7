"""Rows with a numeric target (F-regression, correlation): chunks that carry one target value
per row, as scikit-learn's ``f_regression(X, y)`` takes them.

A target is a finite number, validated like every value of a row (``service.wire.rows``); the
chunk keeps them as float64 next to its rows, in row order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from service.algorithms.base import Matrix

__all__ = ["TargetRows", "join_targets"]


@dataclass(frozen=True)
class TargetRows:
    """A chunk of rows with one target value each (``targets``: float64, one per row)."""

    rows: Matrix
    targets: np.ndarray

    @property
    def n_rows(self) -> int:
        return int(self.rows.shape[0])

    @property
    def samples(self) -> int:
        """The samples this chunk stands for: its rows."""
        return self.n_rows

    def take(self, positions: np.ndarray) -> TargetRows:
        """The rows at ``positions`` (in that order) with their targets."""
        rows = self.rows[positions] if sp.issparse(self.rows) else np.asarray(self.rows)[positions]
        return TargetRows(rows, self.targets[positions])


def join_targets(chunks: Sequence[TargetRows]) -> TargetRows:
    """Chunks in log order as one: rows stacked (CSR if any is sparse), targets with them."""
    if len(chunks) == 1:
        return chunks[0]
    if any(sp.issparse(chunk.rows) for chunk in chunks):
        rows: Matrix = sp.vstack([sp.csr_matrix(c.rows) for c in chunks], format="csr")
    else:
        rows = np.vstack([np.asarray(c.rows) for c in chunks])
    return TargetRows(rows, np.concatenate([c.targets for c in chunks]))
