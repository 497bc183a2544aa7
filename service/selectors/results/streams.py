"""Answers about streams: descriptions, pushes, the side-by-side rankings and their agreement."""

from __future__ import annotations

from typing import Literal

import orjson
from pydantic import (
    ConfigDict,
    Field,
)

from service.selectors.results.core import Result
from service.selectors.results.rankings import TopOut


class StreamSelector(Result):
    """A selector attached to a stream, as its stream describes it."""

    name: str
    method: str
    version: int
    rows_seen: int | None = Field(default=None, description="Row streams.")
    features_seen: int | None = Field(default=None, description="Feature streams.")
    pending_entries: int = Field(description="The stream's entries it has not applied yet.")
    start: str = Field(description="The stream log id it applies the entries after.")
    checkpoint: str = Field(
        description="The log id its last checkpoint covers, as it reported it: the stream keeps "
        "its log after the lowest of these."
    )


class StreamOut(Result):
    """A stream: its shape, its log, and (describe) the selectors attached to it."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "name": "clicks",
                    "chunk_kind": "labelled rows",
                    "n_features": 4862,
                    "has_feature_names": False,
                    "created_at": 1732258800.0,
                    "entries": 12,
                    "items": 12000,
                    "last_id": "1732258800000-0",
                    "log_entries": 3,
                    "trimmed_through": "1732258700000-0",
                    "methods": ["fsds", "ioc", "ocfs", "variance"],
                    "selectors": [],
                }
            ]
        }
    )
    name: str
    chunk_kind: str = Field(
        description="What one chunk holds: 'rows', 'labelled rows', 'rows with a target', "
        "'views' or 'columns'."
    )
    n_features: int | None = Field(default=None, description="Row streams: the width.")
    n_samples: int | None = Field(default=None, description="Feature-column streams.")
    views: dict[str, int] | None = Field(default=None, description="Multi-view streams.")
    has_feature_names: bool
    created_at: float
    entries: int = Field(description="Chunks ever pushed.")
    items: int = Field(description="Rows (or feature columns) ever pushed.")
    last_id: str = Field(description="The newest chunk's log id ('0-0': none yet).")
    log_entries: int = Field(description="Chunks the log holds now.")
    trimmed_through: str = Field(
        description="The log holds the chunks after this id: every attached selector's "
        "checkpoint covers those before."
    )
    methods: list[str] = Field(description="The methods that may attach to it.")
    selectors: list[StreamSelector] | None = Field(
        default=None, description="The attached selectors the key may see (describe)."
    )


class StreamList(Result):
    """One page of streams, sorted by name."""

    streams: list[StreamOut]
    next: str | None = Field(
        default=None,
        description="The name to pass as `after` for the following page; null on the last page.",
    )

    def render(self) -> bytes:
        """As every answer, but with ``next`` always present (null on the last page)."""
        body = {
            "streams": [s.model_dump(exclude_none=True, by_alias=True) for s in self.streams],
            "next": self.next,
        }
        return orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY)


class StreamChunkSelector(Result):
    """What became of one pushed chunk in one attached selector."""

    name: str
    method: str
    status: Literal["applied", "pending", "rejected"]
    version: int | None = Field(
        default=None,
        description="applied: a version of the selector that contains the chunk (the first "
        "that did when this request waited for it; its current one for a repeated key).",
    )
    rows_seen: int | None = Field(default=None, description="Row streams.")
    features_seen: int | None = Field(default=None, description="Feature streams.")
    reason: str | None = Field(
        default=None, description="rejected: why this selector set the chunk aside."
    )


class StreamChunkOut(Result):
    """A chunk pushed to a stream: its place in the stream's log and, for each selector that
    applies it, what became of it."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "stream": "clicks",
                    "log_id": "1732258800000-0",
                    "status": "applied",
                    "items": 1000,
                    "first_index": 7000,
                    "duplicate": False,
                    "selectors": [
                        {
                            "name": "clicks-ocfs",
                            "method": "ocfs",
                            "status": "applied",
                            "version": 8,
                            "rows_seen": 8000,
                        }
                    ],
                }
            ]
        }
    )
    stream: str
    log_id: str
    status: Literal["applied", "pending"] = Field(
        description="applied: every selector below applied the chunk or set it aside; "
        "pending: some have not yet (the answer is then a 202)."
    )
    items: int | None = Field(
        default=None, description="Pushes: rows (or feature columns) the chunk holds."
    )
    first_index: int | None = Field(
        default=None, description="Pushes: the stream's index of its first row (or column)."
    )
    duplicate: bool | None = Field(
        default=None, description="Pushes: true when answered from an earlier identical request."
    )
    selectors: list[StreamChunkSelector] = Field(
        description="The selectors attached when the chunk was pushed (those the key may see)."
    )


class Agreement(Result):
    """How much two selectors' top h agree (``service.algorithms.agreement``)."""

    a: str
    b: str
    view: str | None = Field(default=None, description="Multi-view streams: the view compared.")
    jaccard: float = Field(description="|A and B| / |A or B| of the two top-h sets.")
    rbo: float = Field(
        description="Rank-biased overlap (Webber et al. 2010, RBO_ext, eq. 32): 1 for the "
        "same order, 0 for disjoint lists; the top ranks weigh most."
    )
    shared: int = Field(description="Features in both top h.")


class Unranked(Result):
    """An attached selector whose top h could not be had, and why."""

    name: str
    detail: str


class StreamRankings(Result):
    """Every attached selector's top h side by side, and how much they agree pairwise."""

    stream: str
    h: int
    p: float = Field(description="RBO's persistence: the top 1/(1-p) ranks weigh most.")
    selectors: list[TopOut] = Field(
        description="Each selector's top h at its current version; a feature's index is the "
        "stream's (for feature-column streams: the selector's own index + its stream_base)."
    )
    agreement: list[Agreement] = Field(description="Every pair of the selectors above.")
    unranked: list[Unranked] = Field(
        default_factory=list, description="Selectors whose top h could not be had."
    )
