"""What the selector service answers: typed results, which are also the documented answers.

Every room of ``service.selectors`` returns one of these models; the routes render them with
``render`` (orjson, numpy arrays as they are) and document them in the OpenAPI schema, so an
answer that drifts from its documentation fails where it is built. Arrays (weights,
projections, labels) are numpy arrays checked for their shape, not lists of Python floats:
validating and rendering a million weights stays as cheap as encoding them.

Feature streams (chunk kind ``"columns"``) count ``features_seen``; row streams ``rows_seen``:
one name, one meaning.
"""

from __future__ import annotations

from service.selectors.results.core import (
    FloatMatrix,
    Floats,
    Integers,
    Result,
)
from service.selectors.results.monitoring import (
    AlertCreated,
    AlertEventList,
    AlertEventOut,
    AlertList,
    AlertOut,
    AlertSecret,
    BaselineDrift,
    BaselineOut,
    BaselineRule,
    DeliveryOut,
    DriftOut,
    FeatureRef,
    Redelivery,
    VersionDrift,
)
from service.selectors.results.rankings import (
    ClusterOut,
    HistoryOut,
    HistoryVersion,
    PassAccount,
    ProjectionOut,
    RankedFeature,
    StabilityOut,
    TopOut,
    TransformOut,
    WeightsOut,
)
from service.selectors.results.selectors import (
    ChunkOut,
    ChunkPending,
    ChunkStatus,
    ClassCount,
    ColumnsStored,
    Decision,
    FeaturePage,
    FeaturesOut,
    FeaturesPending,
    Merged,
    MergeOut,
    MethodList,
    MethodOut,
    SelectorList,
    SelectorOut,
    SelectorsDeleted,
)
from service.selectors.results.streams import (
    Agreement,
    StreamChunkOut,
    StreamChunkSelector,
    StreamList,
    StreamOut,
    StreamRankings,
    StreamSelector,
    Unranked,
)

__all__ = [
    "Agreement",
    "AlertCreated",
    "AlertEventList",
    "AlertEventOut",
    "AlertList",
    "AlertOut",
    "AlertSecret",
    "BaselineDrift",
    "BaselineOut",
    "BaselineRule",
    "ChunkOut",
    "ChunkPending",
    "ChunkStatus",
    "ClassCount",
    "ClusterOut",
    "ColumnsStored",
    "Decision",
    "DeliveryOut",
    "DriftOut",
    "FeaturePage",
    "FeatureRef",
    "FeaturesOut",
    "FeaturesPending",
    "FloatMatrix",
    "Floats",
    "HistoryOut",
    "HistoryVersion",
    "Integers",
    "MergeOut",
    "Merged",
    "MethodList",
    "MethodOut",
    "PassAccount",
    "ProjectionOut",
    "RankedFeature",
    "Redelivery",
    "Result",
    "SelectorList",
    "SelectorOut",
    "SelectorsDeleted",
    "StabilityOut",
    "StreamChunkOut",
    "StreamChunkSelector",
    "StreamList",
    "StreamOut",
    "StreamRankings",
    "StreamSelector",
    "TopOut",
    "TransformOut",
    "Unranked",
    "VersionDrift",
    "WeightsOut",
]
