"""The shared benchmark matrices (``shared/data/*.mat`` beside the repository).

Tests that use them fail, never skip, when the data is missing: CI has it beside the clone,
and a skipped quality test would be a test that cannot fail.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import scipy.io
import scipy.sparse as sp

CANDIDATES = (
    Path(os.environ.get("SIFT_SHARED_DATA", "")),
    Path(__file__).resolve().parents[2] / "shared" / "data",
    Path("/work/shared/data"),
)


def data_path(name: str) -> Path:
    for folder in CANDIDATES:
        if str(folder) and (folder / name).exists():
            return folder / name
    raise FileNotFoundError(
        f"{name} not found in {[str(c) for c in CANDIDATES if str(c)]}; "
        "set SIFT_SHARED_DATA to the folder holding the shared .mat files"
    )


def load_mat(name: str, dense: bool = True) -> tuple[np.ndarray | sp.csr_matrix, np.ndarray]:
    """``X`` as float64 (dense, or CSR when ``dense`` is false) and the labels ``Y`` as 1-D."""
    data = scipy.io.loadmat(data_path(name))
    x = data["X"]
    if sp.issparse(x):
        matrix = x.toarray() if dense else sp.csr_matrix(x, dtype=np.float64)
    else:
        matrix = np.asarray(x, dtype=np.float64) if dense else sp.csr_matrix(x, dtype=np.float64)
    return matrix, np.asarray(data["Y"]).ravel()
