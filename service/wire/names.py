"""Feature names a chunk carries, matched to the selector's: columns land on the right feature.

A chunk that names its columns (``"feature_names"`` in a JSON chunk, a ``feature_names`` array in
an ``.npz``; ``{"<view>": [...]}`` for the views of a multi-view chunk) is matched by name, as
scikit-learn matches ``feature_names_in_`` and a feature store matches its schema:

* the selector's names in its order: taken as they are;
* the same names in another order: the columns are put in the selector's order;
* anything else: refused (422 ``selector-mismatch``) naming the missing and the unexpected
  names; nothing of the chunk is applied.

A selector created without names takes the names of the first chunk that carries them (its
chunk kind says ``adopt``; ``Registry.adopt_feature_names`` sets them once, atomically);
from then on, the same rule. A chunk without names (a ``.npy``, a JSON list of rows) is
positional, as ever.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from service.algorithms.base import Matrix
from service.errors import Inconsistent, InvalidInput, SelectorMismatch, shown

#: Longest feature name accepted (names end up in Redis hashes and in every ranking).
MAX_NAME_LENGTH = 256
#: Where a chunk names its columns: the JSON key, and the ``.npz`` array.
FEATURE_NAMES = "feature_names"
#: Names listed in full in a refusal; beyond that, a count.
NAMES_SHOWN = 10


def names_given(raw: Any, where: str = "") -> list[str] | None:
    """The names a chunk gives its columns (None: it gives none), validated: a list (or a 1-D
    string array) of unique names of 1-256 characters. ``require_width`` checks their number
    against the columns once the matrix is read."""
    if raw is None:
        return None
    if isinstance(raw, np.ndarray):
        if raw.ndim != 1 or raw.dtype.kind not in "SU":
            raise InvalidInput(
                f"{where}{FEATURE_NAMES} must be a 1-D array of strings; got "
                f"{raw.ndim}-D {raw.dtype}"
            )
        raw = [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in raw]
    if not isinstance(raw, list):
        raise InvalidInput(f"{where}{FEATURE_NAMES} must be a list of strings")
    return validate_names(raw, len(raw), f"{where}{FEATURE_NAMES}", "column")


def require_width(names: Sequence[str] | None, rows: Matrix, where: str = "") -> None:
    """Inconsistent unless a chunk names as many columns as its rows have."""
    if names is not None and len(names) != rows.shape[1]:
        raise Inconsistent(
            f"{where}the chunk names {len(names)} columns; its rows have {rows.shape[1]}"
        )


def column_order(
    given: Sequence[str] | None, selector: Sequence[str] | None, n_features: int, where: str = ""
) -> np.ndarray | None:
    """Which of the chunk's columns goes to each of the selector's features (None: keep them
    where they are: the chunk names none, the selector has none yet, or the orders agree).

    SelectorMismatch listing the missing and unexpected names when the chunk's names are not
    the selector's; or, for a selector without names, when the chunk names another number of
    features than it has.
    """
    if given is None:
        return None
    if selector is None:
        if len(given) != n_features:
            raise SelectorMismatch(
                f"{where}expected {n_features} features per row; the chunk names {len(given)}"
            )
        return None
    if list(given) == list(selector):
        return None
    position = {name: index for index, name in enumerate(given)}
    missing = [name for name in selector if name not in position]
    unexpected = [name for name in given if name not in set(selector)]
    if missing or unexpected:
        raise SelectorMismatch(
            f"{where}the chunk's feature names are not the selector's: missing "
            f"{_listed(missing)}, unexpected {_listed(unexpected)}; nothing of it was applied"
        )
    return np.array([position[name] for name in selector], dtype=np.intp)


def in_selector_order(rows: Matrix, order: np.ndarray | None) -> Matrix:
    """``rows`` with their columns in the selector's order (``column_order``)."""
    if order is None:
        return rows
    if sp.issparse(rows):
        reordered = sp.csr_matrix(sp.csr_matrix(rows)[:, order])
        reordered.sort_indices()
        return reordered
    return np.ascontiguousarray(np.asarray(rows)[:, order])


def _listed(names: list[str]) -> str:
    if len(names) <= NAMES_SHOWN:
        return str(names)
    return f"{names[:NAMES_SHOWN]} and {len(names) - NAMES_SHOWN} more"


def validate_names(names: Any, count: int, field: str, item: str) -> list[str] | None:
    """Optional names of ``count`` features (one per ``item``): unique, non-empty strings."""
    if names is None:
        return None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise InvalidInput(f"{field} must be a list of strings")
    if len(names) != count:
        raise Inconsistent(f"expected {count} {field} (one per {item}); got {len(names)}")
    for name in names:
        if not name or len(name) > MAX_NAME_LENGTH:
            raise InvalidInput(
                f"{field} must have 1-{MAX_NAME_LENGTH} characters each; "
                f"got {shown(name)} ({len(name)} characters)"
            )
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise InvalidInput(f"{field} must be unique; '{name}' appears more than once")
        seen.add(name)
    return names
