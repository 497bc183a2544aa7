"""What a selector ranks and computes: the top with its stability, every score, projections,
transforms, clusterings, the history."""

from __future__ import annotations

import orjson
from pydantic import (
    ConfigDict,
    Field,
    PrivateAttr,
)

from service.selectors.results.core import FloatMatrix, Floats, Integers, Result


class ClusterOut(Result):
    name: str
    version: int
    features_seen: int
    features_used: int = Field(description="Kept columns the samples were clustered on.")
    k: int
    seed: int
    objective: float = Field(description="k-means objective (inertia).")
    labels: Integers = Field(description="Cluster of each of the n_samples samples.")


class RankedFeature(Result):
    rank: int
    view: str | None = Field(default=None, description="Multi-view selectors: the feature's view.")
    index: int
    name: str
    score: float = Field(
        description="The method's score, or the pivot |R_jj| for pivoted-qr; null where the "
        "method's test is not a finite number (anova, chi2: NaN for a feature with no spread or "
        "one class seen, ranked last; infinite for a feature that separates the classes "
        "perfectly, ranked first, p-value 0)."
    )
    p_value: float | None = Field(
        default=None,
        description="Methods with p-values (anova, chi2): the test's p-value of the feature "
        "(null where its score is).",
    )
    band: list[int] | None = Field(
        default=None,
        min_length=2,
        max_length=2,
        description="The lowest and highest rank (1 is the best) the feature takes in this "
        "ranking and in the resampled ones (top answers with a stability).",
    )


class StabilityOut(Result):
    """How settled the top h is: the selection-stability index of Nogueira, Sechidis & Brown
    (JMLR 2018) over the top h of the resampled rankings."""

    index: float = Field(
        description="1 when every resample selects the same h features; about 0 for "
        "selections at random; below 0 when they disagree more than chance."
    )
    interval: list[float] = Field(
        min_length=2,
        max_length=2,
        description="The 95% interval of the index (wide with few resamples: with 2, two "
        "identical selections of 10 give about [0.72, 1]).",
    )
    level: float = Field(description="The interval's confidence level (0.95).")
    resamples: int = Field(description="The resampled rankings compared (the params' resamples).")
    h: int = Field(
        description="The top h assessed (multi-view selectors: per view; the index is of every "
        "view's top h together)."
    )
    estimated_by: str = Field(description="How the method keeps its resamples.")
    corrected: bool = Field(
        description="true: the resamples' spread is scaled to that of resamples of every row "
        "seen (methods whose scores are smooth in the rows: variance, ocfs, ioc); false: the "
        "index is that of subsamples of 1/resamples of the rows (fsds, omvfs), lower than the "
        "whole stream's while the ranking still settles."
    )


class PassAccount(Result):
    """What IQRP's passes cost (Maung & Schweitzer, section 4.3)."""

    l: int = Field(description="Length of the candidate list.")  # noqa: E741 (the paper's l)
    passes: int
    io_passes: float = Field(description="q = 1 + sum_j n_j / n: the data actually read.")
    columns_read: list[int] = Field(description="n_j: columns not skipped in each pass.")
    blocks_read: int
    blocks_total: int
    flops: float
    flops_per_kmn: float


class TopOut(Result):
    """The top features of a version; frozen, and rendered once: the same answer is served
    to every reader of that version (``Rankings``)."""

    model_config = ConfigDict(
        frozen=True,
        json_schema_extra={
            "examples": [
                {
                    "name": "news",
                    "method": "fsds",
                    "version": 7,
                    "rows_seen": 7000,
                    "features": [{"rank": 1, "index": 17, "name": "hockey", "score": 0.42}],
                }
            ]
        },
    )
    name: str
    method: str
    version: int
    rows_seen: int | None = Field(default=None, description="Row streams.")
    features_seen: int | None = Field(default=None, description="Feature streams.")
    features: list[RankedFeature]
    strategy: str | None = Field(default=None, description="'pivoted-qr' for IQRP answers.")
    account: PassAccount | None = None
    versions: list[int] | None = Field(
        default=None, description="Partitioned selectors: each partition's version (summed)."
    )
    stability: StabilityOut | None = Field(
        default=None,
        description="How settled the top h is (row methods, ranked by score); null for "
        "feature-column methods and pivoted selections, for selectors created before "
        "resamples existed or with resamples 0, and until every resample has seen a row.",
    )
    _rendered: bytes | None = PrivateAttr(default=None)

    def render(self) -> bytes:
        if self._rendered is None:
            body = self.model_dump(exclude_none=True, by_alias=True)
            body.setdefault("stability", None)  # always said, null when there is none
            self._rendered = orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY)
        return self._rendered


class WeightsOut(Result):
    name: str
    version: int
    rows_seen: int | None = Field(default=None, description="Row streams.")
    features_seen: int | None = Field(default=None, description="Feature streams.")
    weights: Floats
    versions: list[int] | None = Field(
        default=None, description="Partitioned selectors: each partition's version (summed)."
    )


class ProjectionOut(Result):
    name: str
    version: int
    rows_seen: int
    n_components: int
    solution: str = Field(description="'ioc' (learned) or 'exact' (batch OC from the state).")
    eigenvalues: Floats = Field(
        description="||v^j|| (ioc: IOC's estimates) or the exact eigenvalues of S_b."
    )
    agreement: Floats = Field(
        description="|u^j . e_j|: IOC's vector against the exact eigenvector, 1 when converged."
    )
    projection: FloatMatrix = Field(description="W, n_features x n_components.")


class TransformOut(Result):
    name: str
    version: int
    rows_seen: int
    n_components: int
    solution: str
    rows: FloatMatrix = Field(description="W^T x for every row sent, in order.")


class HistoryVersion(Result):
    """One committed version in the ranking history: its top features then."""

    version: int
    rows_seen: int | None = Field(default=None, description="Row streams.")
    features_seen: int | None = Field(default=None, description="Feature streams.")
    updated_at: float = Field(description="When the version was committed (seconds, epoch).")
    top: list[RankedFeature] = Field(
        description="The h best features of the version (of every view, for multi-view ones)."
    )


class HistoryOut(Result):
    """How the ranking moved: the top h of the newest versions, newest first."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "name": "news",
                    "method": "fsds",
                    "h": 1,
                    "versions": [
                        {
                            "version": 12,
                            "rows_seen": 1200,
                            "updated_at": 1732258800.0,
                            "top": [{"rank": 1, "index": 3, "name": "f3", "score": 0.5}],
                        }
                    ],
                }
            ]
        }
    )
    name: str
    method: str
    h: int
    versions: list[HistoryVersion]
