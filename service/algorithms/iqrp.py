"""IQRP selectors: feature columns stored in blocks, selected by IQRP reading them in passes.

IQRP (``service.algorithms.pivoted_qr``, Maung & Schweitzer, NIPS 2013) is not incremental: it reads
the columns in passes and skips what it can (Figure 4). So this selector's job on ingest is to
store the columns so that a pass can fetch them block by block and skip whole blocks, and its
ranking is always IQRP's selection over those blocks (``SelectsColumns``): ``StoredColumns``
hands IQRP the tail from the state and every full block through ``read_segment``, and a block a
pass skips is never fetched. The ``m``
objects (samples) are fixed at creation; columns arrive in order. Every full block of
``block_columns`` columns becomes the immutable segment ``colblock:<b>`` (its own Redis key,
written once: ``service.algorithms.base.SEGMENT_PREFIX``); the columns of the block being filled
stay in the state (``tail``). A commit therefore writes at most one block's worth of columns
besides the new ones, never the whole matrix.

The per-feature score kept alongside is ``|x_i|^2``, the ``v_i(0)`` of IQRP's initial pass
(Figure 4, step 1.1): ``GET .../weights`` and the first pivot come from it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import ClassVar

import numpy as np

from service.algorithms.base import SEGMENT_PREFIX, ChunkKind, MethodBase, State
from service.algorithms.examples import Example
from service.algorithms.params import MethodParams, computed
from service.errors import Conflict, Inconsistent, InvalidInput, InvalidParams

DEFAULT_BLOCK_COLUMNS = 256
MAX_BLOCK_COLUMNS = 65_536
#: A block should stay a reasonable Redis value: at most this many bytes (m x block x 8).
MAX_BLOCK_BYTES = 64 * 2**20


class IQRPParams(MethodParams):
    """Maung & Schweitzer 2013; k and l are chosen per query at GET .../top."""

    method: ClassVar[str] = "iqrp"
    unknown_hint: ClassVar[str] = " (k and l are chosen per query at GET .../top)"

    block_columns: int = computed(
        f"Columns per stored block (default {DEFAULT_BLOCK_COLUMNS}, fewer when that would "
        f"exceed {MAX_BLOCK_BYTES // 2**20} MiB).",
        ge=1,
        le=MAX_BLOCK_COLUMNS,
    )

    def complete(self, size: int, stored: bool) -> None:
        # Blocks of about 2 MiB by default, so a skipped block saves a real read.
        fitting = max(1, MAX_BLOCK_BYTES // (8 * size))
        if self.block_columns is None:
            self.block_columns = min(DEFAULT_BLOCK_COLUMNS, fitting)
        if self.block_columns > fitting:
            raise InvalidParams(
                f"block_columns must be an integer in [1, {min(MAX_BLOCK_COLUMNS, fitting)}] "
                f"(blocks of at most {MAX_BLOCK_BYTES // 2**20} MiB with n_samples={size}); "
                f"got {self.block_columns}"
            )


def block_id(block: int) -> str:
    """The segment id of full block ``block`` (columns ``block * B`` to ``(block + 1) * B``)."""
    return f"colblock:{block}"


def block_bounds(state: State, params: IQRPParams) -> list[tuple[int, int]]:
    """``[start, stop)`` of every stored block in column order; the last one may be the tail."""
    width = params.block_columns
    full = int(np.asarray(state["full_blocks"]))
    seen = int(np.asarray(state["features_seen"]))
    bounds = [(b * width, (b + 1) * width) for b in range(full)]
    if seen > full * width:
        bounds.append((full * width, seen))
    return bounds


class IQRP(MethodBase[IQRPParams]):
    """Feature columns over ``n_samples`` fixed objects, stored in blocks (see module docstring).

    State: ``n_samples``, ``features_seen``, ``full_blocks`` (blocks written as segments),
    ``tail`` (``m x t``, ``t < block_columns``: the columns of the block being filled) and
    ``column_norms`` (``|x_i|^2`` of every column).
    """

    name = "iqrp"
    paper = (
        'Maung & Schweitzer, "Pass-Efficient Unsupervised Feature Selection", NIPS 2013 '
        "(Figures 3-6)"
    )
    chunk_kind: ChunkKind = "columns"
    params_model = IQRPParams
    #: Blocks of 2 columns: chunks of 3 columns fill segments and leave a tail.
    examples: tuple[Example, ...] = (Example({"n_samples": 5}, {"block_columns": 2}, items=3),)
    score_field = "column_norms"
    pivoted_by_default = True
    pivot_fields: tuple[str, ...] = ("tail",)

    def initial_state(self, params: IQRPParams) -> State:
        return {
            "n_samples": int(params.size),
            "features_seen": 0,
            "full_blocks": 0,
            "tail": np.zeros((int(params.size), 0)),
            "column_norms": np.zeros(0),
        }

    def state_sizes(self, params: IQRPParams) -> dict[str, int]:
        return {"tail": 0, "column_norms": 0}  # both grow with the columns pushed

    def update(self, state: State, params: IQRPParams, rows: np.ndarray) -> State:
        """Append columns (``m x c``); emit each block that becomes full as a segment."""
        m = int(np.asarray(state["n_samples"]))
        columns = np.asarray(rows, dtype=np.float64)
        if columns.ndim != 2 or columns.shape[0] != m:
            raise InvalidInput(
                f"columns must be a 2-D array of shape (n_samples={m}, c); got {columns.shape}"
            )
        width = params.block_columns
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

    def weights(self, state: State, params: IQRPParams) -> np.ndarray:
        """``|x_i|^2`` of every column (IQRP's ``v_i(0)``)."""
        return np.array(state["column_norms"], dtype=np.float64)

    def segment_ids(self, state: State, params: IQRPParams) -> list[str]:
        """``StoresSegments``: every full block is a segment."""
        return [block_id(b) for b in range(int(np.asarray(state["full_blocks"])))]

    def check_consistency(
        self,
        state: State,
        params: IQRPParams,
        segments: Mapping[str, np.ndarray],
    ) -> None:
        """``ChecksState``: the counts agree with the blocks, the tail and the norms."""
        width = params.block_columns
        full, seen = int(np.asarray(state["full_blocks"])), int(np.asarray(state["features_seen"]))
        tail, norms = np.asarray(state["tail"]), np.asarray(state["column_norms"])
        if (
            state["n_samples"] != params.size
            or full < 0
            or tail.shape[1] >= width
            or seen != full * width + tail.shape[1]
            or norms.shape[0] != seen
        ):
            raise Inconsistent(
                f"an iqrp state over {params.size} samples with blocks of {width} columns has "
                "n_samples = that, features_seen = full_blocks * block_columns + the tail's "
                f"columns (fewer than {width}) and one norm per column; got n_samples "
                f"{state['n_samples']}, features_seen {seen}, full_blocks {full}, tail "
                f"{tail.shape}, {norms.shape[0]} norms"
            )
        for segment_id, block in segments.items():
            shape = (params.size, width)
            if block.dtype != np.float64 or block.shape != shape:
                raise Inconsistent(
                    f"segment '{segment_id}' must be a float64 block of shape {shape}; "
                    f"got {block.dtype} {block.shape}"
                )

    def pivot_source(
        self,
        state: State,
        params: IQRPParams,
        read_segment: Callable[[str], np.ndarray],
    ) -> StoredColumns:
        bounds = block_bounds(state, params)
        if not bounds:
            raise Conflict("no columns yet: push feature columns first")
        tail = np.asarray(state["tail"])
        return StoredColumns(bounds, int(np.asarray(state["full_blocks"])), tail, read_segment)


class StoredColumns:
    """A ``ColumnSource`` over an iqrp selector's blocks: full blocks are read on demand
    through ``read_segment``, the block being filled (``tail``) came with the state.

    ``reads`` lists the blocks fetched, in order.
    """

    def __init__(
        self,
        bounds: list[tuple[int, int]],
        full_blocks: int,
        tail: np.ndarray,
        read_segment: Callable[[str], np.ndarray],
    ) -> None:
        self.block_bounds = bounds
        self.full_blocks = full_blocks
        self.tail = tail
        self.read_segment = read_segment
        self.n_rows = int(tail.shape[0])
        self.n_columns = bounds[-1][1] if bounds else 0
        self.reads: list[int] = []

    def read_block(self, block: int) -> np.ndarray:
        self.reads.append(block)
        if block >= self.full_blocks:  # the block being filled: it came with the state
            return self.tail
        return self.read_segment(block_id(block))
