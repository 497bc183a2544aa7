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
positional, as ever. Until it has names, a selector's features are its positions, which its
answers call ``f0``, ``f1``, ...: a named chunk of another width is refused saying how many
columns it lacks (or has too many), and, if its names are those (a header ``f0,...,f19``
written for the selector's features), which ones; names of its own cannot be matched to
positions, and the refusal says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from service.algorithms.base import Matrix
from service.errors import Inconsistent, InvalidInput, SelectorMismatch, shown
from service.store.records import default_name

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
            raise SelectorMismatch(unnamed_mismatch(given, n_features, where))
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


def unnamed_mismatch(given: Sequence[str], n_features: int, where: str = "") -> str:
    """Why a chunk naming ``given`` columns does not fit a selector of ``n_features`` features
    without names (module docstring): what was expected, what came, and which of the names
    its answers show (``f<position>``) the chunk lacks or does not know, when it uses them."""
    count = len(given)
    short = n_features - count
    by = f"{short} fewer" if short > 0 else f"{-short} more"
    shown_as = default_name(0)
    if n_features > 1:
        shown_as += f" to {default_name(n_features - 1)}"
    text = (
        f"{where}expected {n_features} features per row; the chunk names {count} columns "
        f"({by}). The selector has no feature names: its features are its positions, "
        f"{shown_as} in its answers"
    )
    positions = [default_name(i) for i in range(n_features)]
    known, named = set(positions), set(given)
    if named & known:
        missing = [name for name in positions if name not in named]
        unexpected = [name for name in given if name not in known]
        return (
            f"{text}; by those names the chunk's columns are missing {_listed(missing)}, "
            f"unexpected {_listed(unexpected)}; nothing of it was applied"
        )
    return (
        f"{text}, which the chunk's names ({_listed(list(given))}) are not, so no column can be "
        f"told missing: send all {n_features} columns in the selector's order (the first chunk "
        f"naming {n_features} gives the selector its names); nothing of it was applied"
    )


class WidthMismatch(SelectorMismatch):
    """A chunk's rows of another width than the selector's, found before its names were read
    (``refuse_by_names``)."""


def refuse_by_names(
    raw: Any, selector: Sequence[str] | None, n_features: int, where: str = ""
) -> None:
    """For a chunk whose rows were found of another width than the selector's before its
    names were read (a sparse shape is checked before anything is built): the refusal by
    its names (``column_order``: which are missing), if it names another number of columns;
    else nothing, and the caller's refusal stands."""
    try:
        given = names_given(raw, where)
    except InvalidInput:
        return
    if given is not None and len(given) != n_features:
        column_order(given, selector, n_features, where)


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
