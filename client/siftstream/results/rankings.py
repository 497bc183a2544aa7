"""What a selector ranks: the top (with its stability), every score, the history; and the
capabilities' answers (projections, transforms, clusterings)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from siftstream.results._common import Json, _int_or_none, _seen


@dataclass(frozen=True)
class RankedFeature:
    """One feature of a ranking: its rank (1 = best), index, name, score (and view)."""

    rank: int
    index: int
    name: str
    score: float
    view: str | None = None
    #: The lowest and highest rank the feature takes in this ranking and in the resampled ones
    #: (``Top.stability``); None when the answer has no stability.
    band: tuple[int, int] | None = None

    @classmethod
    def from_json(cls, doc: Json) -> RankedFeature:
        view = doc.get("view")
        band = doc.get("band")
        return cls(
            int(doc["rank"]),
            int(doc["index"]),
            str(doc["name"]),
            float(doc["score"]),
            None if view is None else str(view),
            None if band is None else (int(band[0]), int(band[1])),
        )


@dataclass(frozen=True)
class Stability:
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

    @classmethod
    def from_json(cls, doc: Json) -> Stability:
        low, high = doc["interval"]
        return cls(
            float(doc["index"]),
            (float(low), float(high)),
            int(doc["resamples"]),
            int(doc["h"]),
            str(doc.get("estimated_by", "")),
            bool(doc.get("corrected", True)),
            float(doc.get("level", 0.95)),
        )


@dataclass(frozen=True)
class Top:
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

    @classmethod
    def from_json(cls, doc: Json) -> Top:
        return cls(
            name=str(doc["name"]),
            method=str(doc["method"]),
            version=int(doc["version"]),
            features=[RankedFeature.from_json(f) for f in doc["features"]],
            rows_seen=_int_or_none(doc.get("rows_seen")),
            features_seen=_int_or_none(doc.get("features_seen")),
            strategy=doc.get("strategy"),
            account=doc.get("account"),
            stability=None
            if doc.get("stability") is None
            else Stability.from_json(doc["stability"]),
            raw=doc,
        )


@dataclass(frozen=True)
class Weights:
    """Every feature's score at one version."""

    version: int
    weights: np.ndarray
    rows_seen: int | None = None
    features_seen: int | None = None


@dataclass(frozen=True)
class Projection:
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
    def from_json(cls, doc: Json) -> Projection:
        return cls(
            name=str(doc["name"]),
            version=int(doc["version"]),
            rows_seen=int(doc["rows_seen"]),
            n_components=int(doc["n_components"]),
            solution=str(doc["solution"]),
            eigenvalues=np.asarray(doc["eigenvalues"], dtype=np.float64),
            agreement=np.asarray(doc["agreement"], dtype=np.float64),
            projection=np.asarray(doc["projection"], dtype=np.float64).reshape(
                -1, int(doc["n_components"])
            ),
            raw=doc,
        )


@dataclass(frozen=True)
class Transformed:
    """Rows mapped by a projection (``W^T x`` per row), at one version."""

    version: int
    rows_seen: int
    rows: np.ndarray


@dataclass(frozen=True)
class Clustering:
    """k-means of an OFS selector's samples on its kept columns."""

    name: str
    version: int
    features_seen: int
    features_used: int
    k: int
    seed: int
    objective: float
    labels: np.ndarray

    @classmethod
    def from_json(cls, doc: Json) -> Clustering:
        return cls(
            str(doc["name"]),
            int(doc["version"]),
            int(doc["features_seen"]),
            int(doc["features_used"]),
            int(doc["k"]),
            int(doc["seed"]),
            float(doc["objective"]),
            np.asarray(doc["labels"], dtype=np.int64),
        )


@dataclass(frozen=True)
class HistoryVersion:
    """The top features of one past version."""

    version: int
    updated_at: float
    top: list[RankedFeature]
    rows_seen: int | None = None
    features_seen: int | None = None

    @property
    def seen(self) -> int:
        return _seen(self.rows_seen, self.features_seen)

    @classmethod
    def from_json(cls, doc: Json) -> HistoryVersion:
        return cls(
            version=int(doc["version"]),
            updated_at=float(doc["updated_at"]),
            top=[RankedFeature.from_json(f) for f in doc["top"]],
            rows_seen=_int_or_none(doc.get("rows_seen")),
            features_seen=_int_or_none(doc.get("features_seen")),
        )


@dataclass(frozen=True)
class History:
    """How a selector's top h changed: versions newest first."""

    name: str
    method: str
    h: int
    versions: list[HistoryVersion]
    raw: Json = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: Json) -> History:
        return cls(
            str(doc["name"]),
            str(doc["method"]),
            int(doc["h"]),
            [HistoryVersion.from_json(v) for v in doc["versions"]],
            raw=doc,
        )
