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
            ]
        },
    )

    name: str = Field(description="1-128 letters, digits, '.', '_' or '-'.")
    method: str = Field(description="Streaming method, e.g. 'fsds'.")
    n_features: StrictInt = Field(description="Number of columns of every row chunk.")
    feature_names: list[str] | None = Field(
        default=None, description="Optional unique names, one per feature."
    )
    params: dict[str, Any] | None = Field(
        default=None, description="Method hyperparameters; omitted ones take their defaults."
    )


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


class RankedFeature(BaseModel):
    rank: int
    index: int
    name: str
    score: float


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


class WeightsOut(BaseModel):
    name: str
    version: int
    rows_seen: int
    weights: list[float]


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
