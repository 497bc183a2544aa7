"""FSDS's parameters (``FSDSParams``) and its default shrink schedule."""

from __future__ import annotations

import math
from typing import ClassVar, Literal

from pydantic import Field, PrivateAttr

from service.algorithms.params import computed
from service.algorithms.subsamples import ResampledParams
from service.errors import InvalidParams

#: Parameters of the gaussian kernel only (refused, and not stored, with the cosine kernel).
_GAUSSIAN_ONLY = ("kernel_components", "kernel_bandwidth", "seed")


#: Default shrink schedule, ``max(BLOCK_ELLS * ell, MIN_BLOCK_ROWS)`` rows (``default_block_rows``).
BLOCK_ELLS = 4


MIN_BLOCK_ROWS = 200


#: Random features D (the paper's ceil(n / k) needs n, which a stream does not know). With D = 512
#: each kernel entry is estimated with standard deviation <= 1/sqrt(D) ~ 0.044, while the sketch
#: width m + D (memory and time) grows linearly in D. On COIL20 (k = 20, top-200 features, k-means
#: NMI) streaming gave 0.76 at D = 128 and 256, 0.78 at 512 and 0.77-0.80 at 1024 (run-to-run
#: spread about 0.02): 512 is the smallest D past the plateau.
DEFAULT_KERNEL_COMPONENTS = 512


#: Rows used for the median-distance bandwidth heuristic (first chunk only).
BANDWIDTH_SAMPLE_ROWS = 1000


class FSDSParams(ResampledParams):
    """Huang et al. 2015, Algorithm 2 (see docs/methods/fsds.md)."""

    method: ClassVar[str] = "fsds"

    k: int = computed("Singular directions, fewer than ell (default min(10, m)).", ge=1)
    ell: int = computed("Sketch rows, more than k (default max(ceil(sqrt(m)), k + 1)).", ge=2)
    alpha_exponent: float = Field(3.0, ge=0, description="i in alpha = 2^i sigma_k.")
    normalize_rows: bool = Field(True, description="Scale every row to unit norm first.")
    block_rows: int | None = computed(
        "Rows per shrink (default max(4 ell, 200)); null: one per update (coalesced).", ge=1
    )
    resample_ell: int | None = computed(
        "Sketch rows of each stored subsample (resamples), more than k and at most ell "
        "(default ell: fewer make each update cheaper and the stability index lower).",
        ge=2,
    )
    resample_precision: Literal["single", "double"] | None = computed(
        "Precision the stored subsamples' sketches are kept in: single (default; half the "
        "bytes, computed in double) or double."
    )
    decay: float = Field(
        1.0,
        gt=0,
        le=1,
        description="Forgetting: a row's weight is decay^(rows after it); 1 forgets nothing.",
    )
    kernel: Literal["cosine", "gaussian"] = Field(
        "cosine", description="cosine, or gaussian (random Fourier features)."
    )
    kernel_components: int = Field(
        DEFAULT_KERNEL_COMPONENTS, ge=1, description="gaussian: random features D."
    )
    kernel_bandwidth: float | None = Field(
        None, gt=0, description="gaussian: sigma (null: the median distance of the first chunk)."
    )
    seed: int = Field(0, ge=0, lt=2**63, description="gaussian: seed of the random features.")

    #: The parameters stored params were resolved without (``complete``).
    _before: set[str] = PrivateAttr(default_factory=set)

    def complete(self, size: int, stored: bool) -> None:
        if not self.gaussian:
            given = [name for name in _GAUSSIAN_ONLY if name in self.model_fields_set]
            if given:
                raise InvalidParams(
                    f"{', '.join(given)} only apply to kernel='gaussian'; got kernel='cosine'"
                )
        k_given = self.k is not None
        if self.k is None:
            self.k = min(10, size)
        if self.k > size:
            raise InvalidParams(f"k must be at most n_features={size}; got k={self.k}")
        if self.ell is None:
            self.ell = max(math.ceil(math.sqrt(size)), self.k + 1)
        if self.k >= self.ell:
            raise InvalidParams(
                f"k must be smaller than ell (got k={self.k}, ell={self.ell})"
                + ("" if k_given else f"; k defaults to min(10, n_features) = {self.k}")
            )
        if "block_rows" not in self.model_fields_set:
            self.block_rows = default_block_rows(self.ell)
        # Params stored before these existed describe subsample sketches of ell rows in double
        # precision (and are described as they were stored: ``omitted``).
        if self.resample_ell is None:
            self._before.add("resample_ell")
            self.resample_ell = self.ell
        if not self.k < self.resample_ell <= self.ell:
            raise InvalidParams(
                f"resample_ell must be more than k={self.k} and at most ell={self.ell}; "
                f"got resample_ell={self.resample_ell}"
            )
        if self.resample_precision is None:
            self._before.add("resample_precision")
            self.resample_precision = "double" if stored else "single"
        if not stored:
            self._before.clear()

    def omitted(self) -> set[str]:
        # decay only when forgetting: params stored (and exported) before decay existed resolve
        # to themselves, and a selector that does not forget is described exactly as before.
        left_out: set[str] = set() if self.decay != 1.0 else {"decay"}
        # resample_ell and resample_precision for params stored before they existed: they
        # resolve to themselves.
        left_out |= self._before
        return left_out if self.gaussian else left_out | set(_GAUSSIAN_ONLY)

    @property
    def gaussian(self) -> bool:
        return self.kernel == "gaussian"

    def width(self, n_features: int) -> int:
        return n_features + (self.kernel_components if self.gaussian else 0)


def default_block_rows(ell: int) -> int:
    """Rows per shrink when ``block_rows`` is not given: ``max(4 ell, 200)``.

    A schedule in rows, not the paper's "once per chunk": the service coalesces pending chunks
    into one update of up to 64 entries / 20,000 rows, so "per chunk" would mean "per however
    the producers' chunks happened to coalesce". An update call shrinks every ``B`` rows and
    once more at its end (a partial block is not carried over: the state is the sketch alone).

    Why these numbers (the curve: ``benchmarks/bench_fsds_schedule.py``, its table in
    ``BENCHMARKS.md``):

    * Fidelity. Shrinking more often discards more of the stream's directions: fewer rows per
      shrink keep less of the paper's per-chunk ranking, most visibly where k is close to ell
      (Isolet), and more rows per shrink move towards the exact batch GFW-p2 ranking.
      ``MIN_BLOCK_ROWS`` = 200 is the paper's reference chunk: with small ell the default
      shrinks exactly where 200-row chunks do, also when the service coalesces them.
    * Speed. A shrink's eigenproblem costs about ``(ell + B)**2`` per row; on sparse text that
      is most of the update, so one shrink per large chunk is several times slower than
      ``B <= 4 ell``, while dense rows are fast for every ``B`` up to a chunk.
    """
    return max(BLOCK_ELLS * ell, MIN_BLOCK_ROWS)
