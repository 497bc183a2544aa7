"""Typed answers of the Sift API, as the client returns them.

Each is a frozen dataclass built from the service's JSON by ``from_json``, one converter for
every answer that reads the fields by their type hints (``_common.convert``), or, for arrays
sent as ``.npy``, from the array and its ``Sift-*`` headers. Arrays (weights, projections,
cluster labels, transformed rows) are numpy arrays. Every answer keeps the JSON it came from in
``raw`` (empty for ``.npy`` answers), so fields a newer service adds are not lost.

Row streams count ``rows_seen``, feature streams (``ofs``, ``iqrp``) ``features_seen``: the
other one is ``None``; ``seen`` gives whichever the selector counts.

The wire is declared once, by the service's response models (their order, descriptions,
examples and validation make its OpenAPI schema); these dataclasses are the client's typed
reading of it, with Python's names and types where the JSON cannot have them (``Merged.source``
for ``from``, tuples, numpy arrays, a created key as the key it describes plus its secret). The
client's tests hold every field to the live schema's property of that name: its JSON types,
and whether it may be missing or null, so either side drifting fails there.

A listing answers in pages (``Page``: ``items`` and ``next``, the ``after`` of the following
page); ``SelectorPage`` and ``StreamPage`` are its pages of selectors and of streams, whose
items are also ``selectors`` and ``streams``, as the answers name them.
"""

from __future__ import annotations

from siftstream.results._common import Json, Page
from siftstream.results.keys import (
    ApiKey,
    CreatedKey,
    Health,
    TenantQuota,
)
from siftstream.results.monitoring import (
    Alert,
    AlertEvent,
    Baseline,
    BaselineRule,
    CreatedAlert,
    Drift,
    FeatureRef,
    Moved,
    RotatedSecret,
)
from siftstream.results.pushes import (
    PushSummary,
)
from siftstream.results.rankings import (
    Clustering,
    History,
    HistoryVersion,
    Projection,
    RankedFeature,
    Stability,
    Top,
    Transformed,
    Weights,
)
from siftstream.results.selectors import (
    ChunkReceipt,
    ChunkStatus,
    ClassCount,
    Decision,
    DeletedSelectors,
    FeaturePage,
    FeaturesReceipt,
    Merged,
    MethodInfo,
    Receipt,
    SelectorInfo,
    SelectorPage,
    TargetSummary,
)
from siftstream.results.sources import (
    RejectedEntry,
    ResetEvent,
    Source,
)
from siftstream.results.streams import (
    Agreement,
    StreamInfo,
    StreamOutcome,
    StreamPage,
    StreamRankings,
    StreamReceipt,
    StreamSelectorInfo,
)

__all__ = [
    "Agreement",
    "Alert",
    "AlertEvent",
    "ApiKey",
    "Baseline",
    "BaselineRule",
    "ChunkReceipt",
    "ChunkStatus",
    "ClassCount",
    "Clustering",
    "CreatedAlert",
    "CreatedKey",
    "Decision",
    "DeletedSelectors",
    "Drift",
    "FeaturePage",
    "FeatureRef",
    "FeaturesReceipt",
    "Health",
    "History",
    "HistoryVersion",
    "Json",
    "Merged",
    "MethodInfo",
    "Moved",
    "Page",
    "Projection",
    "PushSummary",
    "RankedFeature",
    "Receipt",
    "RejectedEntry",
    "ResetEvent",
    "RotatedSecret",
    "SelectorInfo",
    "SelectorPage",
    "Source",
    "Stability",
    "StreamInfo",
    "StreamOutcome",
    "StreamPage",
    "StreamRankings",
    "StreamReceipt",
    "StreamSelectorInfo",
    "TargetSummary",
    "TenantQuota",
    "Top",
    "Transformed",
    "Weights",
]
