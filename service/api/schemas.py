"""Request and answer shapes of the HTTP API, with the examples shown at ``/docs``.

Answers are rendered directly (orjson); these models document them in the OpenAPI schema.
Field names are fixed by DESIGN.md so that clients and dashboards can rely on them.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt


class CreateSelector(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "name": "news",
                    "method": "fsds",
                    "n_features": 4862,
                    "params": {"k": 20, "alpha_exponent": 3},
                },
                {
                    "name": "faces",
                    "method": "fsds",
                    "n_features": 4,
                    "feature_names": ["a", "b", "c", "d"],
                    "params": {"kernel": "gaussian", "kernel_components": 256, "seed": 7},
                },
                {"name": "mail", "method": "ocfs", "n_features": 3289},
                {
                    "name": "faces",
                    "method": "ioc",
                    "n_features": 1024,
                    "params": {"n_components": 19, "amnesia": 2},
                },
                {
                    "name": "patients",
                    "method": "ofs",
                    "n_samples": 1440,
                    "params": {"epsilon": 0.5, "seed": 0},
                },
            ]
        },
    )

    name: str = Field(description="1-128 letters, digits, '.', '_' or '-'.")
    method: str = Field(
        description="Streaming method: 'fsds' (rows), 'ocfs' or 'ioc' (labelled rows), 'omvfs' "
        "(multi-view rows), 'ofs' or 'iqrp' (feature columns)."
    )
    n_features: StrictInt | None = Field(
        default=None, description="Row methods: number of columns of every row chunk."
    )
    n_samples: StrictInt | None = Field(
        default=None, description="Feature-column methods: number of values of every column."
    )
    n_objects: StrictInt | None = Field(default=None, description="Same as n_samples.")
    views: dict[str, StrictInt] | None = Field(
        default=None, description="Multi-view methods (omvfs): features per view, in order."
    )
    feature_names: list[str] | dict[str, list[str]] | None = Field(
        default=None,
        description="Row methods: optional unique names, one per feature ({view: [...]} for "
        "multi-view selectors).",
    )
    params: dict[str, Any] | None = Field(
        default=None, description="Method hyperparameters; omitted ones take their defaults."
    )


class ClassCount(BaseModel):
    label: int | str = Field(description="The class label as sent.")
    count: int


class SelectorOut(BaseModel):
    name: str
    method: str
    n_features: int
    params: dict[str, Any]
    version: int
    rows_seen: int
    created_at: float
    updated_at: float
    has_feature_names: bool
    views: dict[str, int] | None = Field(default=None, description="Multi-view methods only.")
    n_samples: int | None = Field(default=None, description="Feature-column methods only.")
    features_seen: int | None = Field(default=None, description="Feature-column methods only.")
    classes: list[ClassCount] | None = Field(
        default=None, description="Labelled methods (describe only): classes seen, in order."
    )
    features_kept: int | None = Field(
        default=None, description="OFS: columns kept in A~ (describe only)."
    )
    state: dict[str, Any] | None = Field(
        default=None, description="Scalars of the committed state (describe only)."
    )


class SelectorList(BaseModel):
    selectors: list[SelectorOut]


class ChunkOut(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "version": 7,
                    "rows_seen": 7000,
                    "rows": 1000,
                    "duplicate": False,
                    "log_id": "1732258800000-0",
                }
            ]
        }
    )
    version: int = Field(description="First selector version whose state contains this chunk.")
    rows_seen: int
    rows: int
    duplicate: bool = Field(description="True when answered from an earlier identical request.")
    log_id: str


class ChunkPending(BaseModel):
    log_id: str
    status: str = "pending"
    rows: int
    duplicate: bool


class Decision(BaseModel):
    """What OFS decided for one feature column (Algorithm 1, steps 3-5)."""

    index: int = Field(description="0-based position of the feature in the stream.")
    name: str = Field(description="The name sent with the column, else 'f<index>'.")
    kept: bool
    leverage: float = Field(description="Online leverage score l~_i, eq. (3.3).")
    probability: float = Field(description="Sampling probability p_i = min(c l~_i, 1), eq. (3.4).")
    scale: float = Field(description="1/sqrt(p_i) if kept (the column enters A~ scaled), else 0.")


class FeaturesOut(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "version": 3,
                    "features_seen": 130,
                    "rows_seen": 130,
                    "duplicate": False,
                    "log_id": "1732258800000-0",
                    "decisions": [
                        {
                            "index": 129,
                            "name": "age",
                            "kept": True,
                            "leverage": 0.41,
                            "probability": 1.0,
                            "scale": 1.0,
                        }
                    ],
                }
            ]
        }
    )
    version: int = Field(description="First selector version whose state contains the columns.")
    features_seen: int
    rows_seen: int = Field(description="Same as features_seen for feature-column methods.")
    duplicate: bool
    log_id: str
    decisions: list[Decision]


class FeaturesPending(BaseModel):
    log_id: str
    status: str = "pending"
    columns: int
    first_index: int = Field(description="Index of the first column: look it up later at GET.")
    duplicate: bool


class FeaturePage(BaseModel):
    name: str
    version: int
    features_seen: int
    offset: int
    features: list[Decision]


class ClusterIn(BaseModel):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"k": 20, "seed": 0}]}
    )
    k: StrictInt = Field(description="Number of clusters, 1 <= k <= n_samples.")
    seed: StrictInt = Field(default=0, description="k-means seed (scikit-learn random_state).")


class ClusterOut(BaseModel):
    name: str
    version: int
    features_seen: int
    features_used: int = Field(description="Kept columns of A~ the samples were clustered on.")
    k: int
    seed: int
    objective: float = Field(description="k-means objective (inertia) on the rows of A~.")
    labels: list[int] = Field(description="Cluster of each of the n_samples samples.")


class RankedFeature(BaseModel):
    rank: int
    view: str | None = Field(default=None, description="Multi-view selectors: the feature's view.")
    index: int
    name: str
    score: float = Field(description="The method's score, or the pivot |R_jj| for pivoted-qr.")


class PassAccount(BaseModel):
    """What IQRP's passes cost (Maung & Schweitzer, section 4.3)."""

    l: int = Field(description="Length of the candidate list.")  # noqa: E741 (the paper's l)
    passes: int
    io_passes: float = Field(description="q = 1 + sum_j n_j / n: the data actually read.")
    columns_read: list[int] = Field(description="n_j: columns not skipped in each pass.")
    blocks_read: int
    blocks_total: int
    flops: float
    flops_per_kmn: float


class TopOut(BaseModel):
    model_config = ConfigDict(
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
        }
    )
    name: str
    method: str
    version: int
    rows_seen: int
    features: list[RankedFeature]
    strategy: str | None = Field(default=None, description="'pivoted-qr' for IQRP answers.")
    account: PassAccount | None = None


class WeightsOut(BaseModel):
    name: str
    version: int
    rows_seen: int
    weights: list[float]


class MergeIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"from": "east"}]})
    source: str = Field(alias="from", description="The ocfs selector whose data to add.")


class Merged(BaseModel):
    source: str = Field(alias="from")
    version: int = Field(description="The source's version that was read.")
    rows: int = Field(description="Samples the merge adds (the source's rows).")


class MergeOut(ChunkOut):
    merged: Merged


class ProjectionOut(BaseModel):
    name: str
    version: int
    rows_seen: int
    n_components: int
    solution: str = Field(description="'ioc' (learned) or 'exact' (batch OC from the state).")
    eigenvalues: list[float] = Field(
        description="||v^j|| (ioc: IOC's estimates) or the exact eigenvalues of S_b."
    )
    agreement: list[float] = Field(
        description="|u^j . e_j|: IOC's vector against the exact eigenvector, 1 when converged."
    )
    projection: list[list[float]] = Field(description="W, n_features x n_components.")


class TransformOut(BaseModel):
    name: str
    version: int
    rows_seen: int
    n_components: int
    solution: str
    rows: list[list[float]] = Field(description="W^T x for every row sent, in order.")


class Problem(BaseModel):
    """RFC 9457 problem details."""

    type: str
    title: str
    status: int
    detail: str
    instance: str


PROBLEM_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": Problem, "content": {"application/problem+json": {}}}
    for status in (400, 401, 404, 409, 413, 415, 422, 503)
}
