"""Answers about selectors: descriptions, listings, methods, chunks and features received."""

from __future__ import annotations

from typing import Any, Literal

import orjson
from pydantic import (
    ConfigDict,
    Field,
)

from service.selectors.results.core import Result


class ClassCount(Result):
    label: int | str = Field(description="The class label as sent.")
    count: int


class TargetSummary(Result):
    mean: float = Field(description="The mean of the targets seen.")
    variance: float = Field(description="Their population variance.")


class SelectorOut(Result):
    """A selector: what it is, and (describe) what its state holds. Methods may add fields."""

    model_config = ConfigDict(extra="allow")

    name: str
    method: str
    chunk_kind: str = Field(
        description="What one chunk holds: 'rows', 'labelled rows', 'rows with a target', "
        "'views' (POST .../chunks) or 'columns' (POST .../features); GET /v1/methods says it "
        "of every method."
    )
    n_features: int = Field(
        description="Features: fixed for row streams, seen so far for feature streams."
    )
    params: dict[str, Any]
    version: int
    rows_seen: int | None = Field(default=None, description="Row streams: rows folded in.")
    features_seen: int | None = Field(default=None, description="Feature streams only.")
    n_samples: int | None = Field(default=None, description="Feature streams: the fixed samples.")
    views: dict[str, int] | None = Field(default=None, description="Multi-view selectors.")
    partitions: int | None = Field(
        default=None, description="Partitioned selectors: how many partitions learn in parallel."
    )
    versions: list[int] | None = Field(
        default=None,
        description="Partitioned selectors: the version of each partition the answer is made of "
        "(version is their sum).",
    )
    created_at: float
    updated_at: float
    has_feature_names: bool
    expires_after: float | None = Field(
        default=None,
        description="Seconds without a commit after which the service deletes this selector.",
    )
    temporary: bool | None = Field(
        default=None,
        description="True for a selector created temporary (a job's, such as a scikit-learn "
        "fit, that deletes it when done): listings mark it and `temporary=false` leaves it "
        "out. Absent otherwise.",
    )
    classes: list[ClassCount] | None = Field(
        default=None, description="Labelled methods (describe only): classes seen, in order."
    )
    target: TargetSummary | None = Field(
        default=None,
        description="Methods of rows with a target (describe only): the targets seen.",
    )
    features_kept: int | None = Field(
        default=None, description="OFS: columns kept in A~ (describe only)."
    )
    state: dict[str, Any] | None = Field(
        default=None, description="Scalars of the committed state and pending_entries (describe)."
    )
    stream: str | None = Field(
        default=None,
        description="The stream this selector is attached to: it applies the stream's chunks "
        "(and takes none directly).",
    )
    stream_base: int | None = Field(
        default=None,
        description="Attached selectors: the stream's items before its first chunk (for a "
        "stream of feature columns, feature i of the selector is the stream's feature "
        "stream_base + i).",
    )
    detached_at: str | None = Field(
        default=None,
        description="The answer to a detach: the stream's log id the selector was detached "
        "at. Its state is exactly the stream's entries through it; none after it is its.",
    )


class MethodOut(Result):
    """A method a selector may run, as a client discovers it."""

    name: str
    paper: str = Field(description="The publication it implements, and where in it.")
    chunk_kind: str = Field(
        description="What one chunk holds: 'rows', 'labelled rows', 'rows with a target', "
        "'views' or 'columns'."
    )
    route: str = Field(
        description="Where its chunks go: POST /v1/selectors/{name}/<route> ('chunks' or "
        "'features')."
    )
    counts: str = Field(description="What its answers count: 'rows_seen' or 'features_seen'.")
    shape: list[str] = Field(
        description="The fields of a creation body that fix its shape (n_features, n_samples "
        "or views), besides feature_names."
    )
    capabilities: list[str] = Field(
        description="What it offers besides top and weights: decisions, cluster, pivoted "
        "(strategy=diverse, or its own ranking), merge, partitions, projection, stability "
        "(its top answers say how settled the ranking is)."
    )
    coalesces: bool = Field(description="Whether pending chunks may be applied as one update.")
    chunking_invariant: bool = Field(
        description="Whether its state does not depend on how the stream was cut into chunks."
    )
    params_schema: dict[str, Any] = Field(
        description="JSON Schema of its params, with 'default' on every parameter whose default "
        "does not depend on the selector's size (the others say it in their description)."
    )
    example: dict[str, Any] = Field(description="A creation body for it.")


class MethodList(Result):
    """Every method this service runs."""

    methods: list[MethodOut]


class SelectorList(Result):
    """One page of selectors, sorted by name."""

    selectors: list[SelectorOut]
    next: str | None = Field(
        default=None,
        description="The name to pass as `after` for the following page; null on the last page.",
    )
    unreadable: list[str] = Field(
        default_factory=list,
        description=(
            "Selectors of this page that could not be described (their stored records are "
            "damaged; the server log says why): listed by name so that a listing never fails "
            "because of one of them. Absent when there are none."
        ),
    )

    def render(self) -> bytes:
        """As every answer, but with ``next`` always present (null on the last page)."""
        body: dict[str, object] = {
            "selectors": [
                selector.model_dump(exclude_none=True, by_alias=True) for selector in self.selectors
            ],
            "next": self.next,
        }
        if self.unreadable:
            body["unreadable"] = self.unreadable
        return orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY)


class SelectorsDeleted(Result):
    """What one ``DELETE /v1/selectors?prefix=`` deleted: a bounded batch, in name order."""

    deleted: list[str] = Field(description="The selectors deleted, sorted by name.")
    next: str | None = Field(
        default=None,
        description="More may match: pass it as `after` to delete the next batch; null when "
        "this batch was the last.",
    )
    failed: list[str] = Field(
        default_factory=list,
        description="Selectors that matched and could not be deleted (the server log says "
        "why); absent when there are none.",
    )

    def render(self) -> bytes:
        """As every answer, but with ``next`` always present (null on the last batch)."""
        body: dict[str, object] = {"deleted": self.deleted, "next": self.next}
        if self.failed:
            body["failed"] = self.failed
        return orjson.dumps(body)


class ChunkOut(Result):
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
    partition: int | None = Field(
        default=None,
        description="Partitioned selectors: the partition that took the chunk (its log_id and "
        "version are that partition's).",
    )


class Merged(Result):
    model_config = ConfigDict(populate_by_name=True)
    source: str = Field(alias="from")
    version: int = Field(description="The source's version that was read.")
    rows: int = Field(description="Samples the merge adds (the source's rows).")


class MergeOut(ChunkOut):
    merged: Merged


class ChunkPending(Result):
    log_id: str
    status: Literal["pending"] = "pending"
    rows: int
    duplicate: bool
    merged: Merged | None = Field(default=None, description="Merges only.")
    partition: int | None = Field(
        default=None, description="Partitioned selectors: the partition that took the chunk."
    )


class ChunkStatus(Result):
    log_id: str
    status: Literal["pending", "applied", "rejected"] = Field(
        description="rejected: the chunk could not be applied and was set aside (see reason)."
    )
    applied: bool
    version: int = Field(description="The selector's current version.")
    rows_seen: int | None = Field(default=None, description="Row streams.")
    features_seen: int | None = Field(default=None, description="Feature streams.")
    reason: str | None = Field(default=None, description="Why a rejected chunk was rejected.")


class Decision(Result):
    """What OFS decided for one feature column (Algorithm 1, steps 3-5)."""

    index: int = Field(description="0-based position of the feature in the stream.")
    name: str = Field(description="The name sent with the column, else 'f<index>'.")
    kept: bool
    leverage: float = Field(description="Online leverage score l~_i, eq. (3.3).")
    probability: float = Field(description="Sampling probability p_i = min(c l~_i, 1), eq. (3.4).")
    scale: float = Field(description="1/sqrt(p_i) if kept (the column enters A~ scaled), else 0.")


class FeaturesOut(Result):
    """Columns a method decides on as they arrive (OFS): one decision per column."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "version": 3,
                    "features_seen": 130,
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
    duplicate: bool
    log_id: str
    decisions: list[Decision]


class ColumnsStored(Result):
    """Columns a method stores (iqrp): it selects at read time."""

    version: int
    features_seen: int
    duplicate: bool
    log_id: str
    columns: int
    first_index: int = Field(description="Index of the first column.")


class FeaturesPending(Result):
    log_id: str
    status: Literal["pending"] = "pending"
    columns: int
    first_index: int = Field(description="Index of the first column: look it up later at GET.")
    duplicate: bool


class FeaturePage(Result):
    name: str
    version: int
    features_seen: int
    offset: int
    features: list[Decision]
