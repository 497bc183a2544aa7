"""The ``iqrp`` selector's stream: feature columns stored in blocks for IQRP to read in passes.

IQRP (``service.algorithms.pivoted_qr``, Maung & Schweitzer, NIPS 2013) is not incremental: it reads
the columns in passes and skips what it can (Figure 4). So this selector's job on ingest is to
store the columns so that a pass can fetch them block by block and skip whole blocks. The ``m``
objects (samples) are fixed at creation; columns arrive in order. Every full block of
``block_columns`` columns becomes the immutable segment ``colblock:<b>`` (its own Redis key,
written once: ``service.algorithms.base.SEGMENT_PREFIX``); the columns of the block being filled
stay in the state (``tail``). A commit therefore writes at most one block's worth of columns
besides the new ones, never the whole matrix.

The per-feature score kept alongside is ``|x_i|^2``, the ``v_i(0)`` of IQRP's initial pass
(Figure 4, step 1.1): ``GET .../weights`` and the first pivot come from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from numbers import Integral
from typing import Any

import numpy as np

from service.algorithms.base import SEGMENT_PREFIX, State, Stream
from service.errors import InvalidInput, InvalidParams

DEFAULT_BLOCK_COLUMNS = 256
MAX_BLOCK_COLUMNS = 65_536
#: A block should stay a reasonable Redis value: at most this many bytes (m x block x 8).
MAX_BLOCK_BYTES = 64 * 2**20


def block_id(block: int) -> str:
    """The segment id of full block ``block`` (columns ``block * B`` to ``(block + 1) * B``)."""
    return f"colblock:{block}"


def block_bounds(state: State, params: Mapping[str, Any]) -> list[tuple[int, int]]:
    """``[start, stop)`` of every stored block in column order; the last one may be the tail."""
    width = int(params["block_columns"])
    full = int(np.asarray(state["full_blocks"]))
    seen = int(np.asarray(state["features_seen"]))
    bounds = [(b * width, (b + 1) * width) for b in range(full)]
    if seen > full * width:
        bounds.append((full * width, seen))
    return bounds


class ColumnBlocks:
    """Feature columns over ``n_samples`` fixed objects, stored in blocks (see module docstring).

    State: ``n_samples``, ``features_seen``, ``full_blocks`` (blocks written as segments),
    ``tail`` (``m x t``, ``t < block_columns``: the columns of the block being filled) and
    ``column_norms`` (``|x_i|^2`` of every column).
    """

    name = "iqrp"
    stream: Stream = "columns"
    score_field = "column_norms"
    coalesces = True
    labelled = False

    def resolve_params(self, params: Mapping[str, Any], n_samples: int) -> dict[str, Any]:
        if not isinstance(params, Mapping):
            raise InvalidParams(f"params must be an object; got {type(params).__name__}")
        unknown = sorted(str(key) for key in params if key != "block_columns")
        if unknown:
            raise InvalidParams(
                f"unknown parameter(s) for iqrp: {', '.join(repr(u) for u in unknown)}; "
                "expected some of: block_columns (k and l are chosen per query at GET .../top)"
            )
        # Blocks of about 2 MiB by default, so a skipped block saves a real read.
        fitting = max(1, MAX_BLOCK_BYTES // (8 * max(n_samples, 1)))
        default = min(DEFAULT_BLOCK_COLUMNS, fitting)
        width = params.get("block_columns", default)
        upper = min(MAX_BLOCK_COLUMNS, fitting)
        if (
            isinstance(width, bool)
            or not isinstance(width, Integral)
            or not 1 <= int(width) <= upper
        ):
            raise InvalidParams(
                f"block_columns must be an integer in [1, {upper}] (blocks of at most "
                f"{MAX_BLOCK_BYTES // 2**20} MiB with n_samples={n_samples}); got {width!r}"
            )
        return {"block_columns": int(width)}

    def initial_state(self, params: Mapping[str, Any], n_samples: int) -> State:
        return {
            "n_samples": int(n_samples),
            "features_seen": 0,
            "full_blocks": 0,
            "tail": np.zeros((int(n_samples), 0)),
            "column_norms": np.zeros(0),
        }

    def update(self, state: State, params: Mapping[str, Any], rows: np.ndarray) -> State:
        """Append columns (``m x c``); emit each block that becomes full as a segment."""
        m = int(np.asarray(state["n_samples"]))
        columns = np.asarray(rows, dtype=np.float64)
        if columns.ndim != 2 or columns.shape[0] != m:
            raise InvalidInput(
                f"columns must be a 2-D array of shape (n_samples={m}, c); got {columns.shape}"
            )
        width = int(params["block_columns"])
        full = int(np.asarray(state["full_blocks"]))
        pending = np.hstack([np.asarray(state["tail"], dtype=np.float64), columns])
        new: State = dict(state)
        filled = pending.shape[1] // width
        for j in range(filled):
            new[SEGMENT_PREFIX + block_id(full + j)] = np.ascontiguousarray(
                pending[:, j * width : (j + 1) * width]
            )
        new["tail"] = np.ascontiguousarray(pending[:, filled * width :])
        new["full_blocks"] = full + filled
        new["features_seen"] = int(np.asarray(state["features_seen"])) + columns.shape[1]
        norms = np.einsum("ij,ij->j", columns, columns)
        new["column_norms"] = np.concatenate([np.asarray(state["column_norms"]), norms])
        return new

    def weights(self, state: State, params: Mapping[str, Any]) -> np.ndarray:
        """``|x_i|^2`` of every column (IQRP's ``v_i(0)``)."""
        return np.array(state["column_norms"], dtype=np.float64)
