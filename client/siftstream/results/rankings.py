"""What a selector ranks: the top (with its stability), every score, the history; and the
capabilities' answers (projections, transforms, clusterings)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from siftstream.results._common import Answer, Json, _seen, array


@dataclass(frozen=True)
class RankedFeature(Answer):
    """One feature of a ranking: its rank (1 = best), index, name, score (and view, and the
    p-value for methods with p-values)."""

    rank: int
    index: int
    name: str
    #: NaN where the service answers null: a test's statistic that is not a finite number
    #: (anova, chi2: a feature with no spread; or infinite, with ``p_value`` 0).
    score: float = math.nan
    view: str | None = None
    #: The test's p-value (anova, chi2); None for other methods and where the test is undefined.
    p_value: float | None = None
    #: The lowest and highest rank the feature takes in this ranking and in the resampled ones
    #: (``Top.stability``); None when the answer has no stability.
    band: tuple[int, int] | None = None


@dataclass(frozen=True)
class Stability(Answer):
    """How settled a top h is: the selection-stability index of Nogueira, Sechidis & Brown
    (JMLR 2018) over the resampled rankings, 1 when they agree, about 0 at random; its 95%
    interval; how many resamples it compares and how the method keeps them. ``corrected``: the
    resamples' spread is scaled to every row seen (else it is the index of 1/resamples of them).
    """

    index: float
    interval: tuple[float, float]
    resamples: int
    h: int
    estimated_by: str
    corrected: bool
    level: float = 0.95


@dataclass(frozen=True)
class Top(Answer):
    """The h best features of a committed version (``account``: IQRP's pass account)."""

    name: str
    method: str
    version: int
    features: list[RankedFeature]
    rows_seen: int | None = None
    features_seen: int | None = None
    strategy: str | None = None
    account: dict[str, Any] | None = None
    #: How settled this top is (row methods ranked by score); None otherwise.
    stability: Stability | None = None
    raw: Json = field(default_factory=dict, repr=False, compare=False)

    @property
    def seen(self) -> int:
        return _seen(self.rows_seen, self.features_seen)

    @property
    def bands(self) -> list[tuple[int, int] | None]:
        """Each feature's band, best first (None where the answer has none)."""
        return [f.band for f in self.features]

    @property
    def indices(self) -> np.ndarray:
        """The features' indices, best first (within their view for multi-view selectors)."""
        return np.array([f.index for f in self.features], dtype=np.int64)

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.features]


@dataclass(frozen=True)
class Weights(Answer):
    """Every feature's score at one version."""

    version: int
    weights: np.ndarray
    rows_seen: int | None = None
    features_seen: int | None = None


@dataclass(frozen=True)
class Projection(Answer):
    """IOC's W (n_features x n_components), its eigenvalue estimates and their agreement."""

    name: str
    version: int
    rows_seen: int
    n_components: int
    solution: str
    eigenvalues: np.ndarray
    agreement: np.ndarray
    projection: np.ndarray
    raw: Json = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def wire_doc(cls, doc: Json) -> Json:
        # W as a matrix even when it has no rows.
        matrix = np.asarray(doc["projection"], dtype=np.float64)
        return {**doc, "projection": matrix.reshape(-1, int(doc["n_components"]))}


@dataclass(frozen=True)
class Transformed(Answer):
    """Rows mapped by a projection (``W^T x`` per row), at one version."""

    version: int
    rows_seen: int
    rows: np.ndarray


@dataclass(frozen=True)
class Clustering(Answer):
    """k-means of an OFS selector's samples on its kept columns."""

    name: str
    version: int
    features_seen: int
    features_used: int
    k: int
    seed: int
    objective: float
    labels: np.ndarray = field(metadata=array(np.int64))


@dataclass(frozen=True)
class HistoryVersion(Answer):
    """The top features of one past version."""

    version: int
    updated_at: float
    top: list[RankedFeature]
    rows_seen: int | None = None
    features_seen: int | None = None

    @property
    def seen(self) -> int:
        return _seen(self.rows_seen, self.features_seen)


@dataclass(frozen=True)
class History(Answer):
    """How a selector's top h changed: versions newest first."""

    name: str
    method: str
    h: int
    versions: list[HistoryVersion]
    raw: Json = field(default_factory=dict, repr=False, compare=False)
