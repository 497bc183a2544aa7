"""The client's typed answers (``siftstream.results``) held to the service's OpenAPI schema:
every field a result reads is a property of the response model it parses, and every property a
model requires is read by its result or named here as left out on purpose. A field renamed or
added on either side fails here, not in a user's program."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import siftstream.results as results
from service.api.app import create_app
from service.config import Settings

#: Each result and the response models it parses (a receipt parses the applied and the pending
#: answer of its route).
MODELS: dict[str, tuple[str, ...]] = {
    "Agreement": ("Agreement",),
    "Alert": ("AlertCreated",),
    "AlertEvent": ("AlertEventOut",),
    "ApiKey": ("KeyInfo",),
    "Baseline": ("BaselineOut",),
    "BaselineRule": ("BaselineRule",),
    "ChunkReceipt": ("ChunkOut", "ChunkPending", "MergeOut"),
    "ChunkStatus": ("ChunkStatus",),
    "ClassCount": ("ClassCount",),
    "Clustering": ("ClusterOut",),
    "CreatedAlert": ("AlertCreated",),
    "CreatedKey": ("KeyOut",),
    "Decision": ("Decision",),
    "DeletedSelectors": ("SelectorsDeleted",),
    "Drift": ("DriftOut",),
    "FeaturePage": ("FeaturePage",),
    "FeatureRef": ("FeatureRef",),
    "FeaturesReceipt": ("FeaturesOut", "FeaturesPending", "ColumnsStored"),
    "History": ("HistoryOut",),
    "HistoryVersion": ("HistoryVersion",),
    "Merged": ("Merged",),
    "MethodInfo": ("MethodOut",),
    "Moved": ("BaselineDrift",),
    "Projection": ("ProjectionOut",),
    "RankedFeature": ("RankedFeature",),
    "RejectedEntry": ("RejectedEntry",),
    "RotatedSecret": ("AlertSecret",),
    "SelectorInfo": ("SelectorOut",),
    "SelectorPage": ("SelectorList",),
    "Source": ("SourceOut",),
    "Stability": ("StabilityOut",),
    "StreamInfo": ("StreamOut",),
    "StreamOutcome": ("StreamChunkSelector",),
    "StreamPage": ("StreamList",),
    "StreamRankings": ("StreamRankings",),
    "StreamReceipt": ("StreamChunkOut",),
    "StreamSelectorInfo": ("StreamSelector",),
    "TenantQuota": ("QuotaOut",),
    "Top": ("TopOut",),
    "Transformed": ("TransformOut",),
    "Weights": ("WeightsOut",),
}
#: Results that parse no JSON model: a probe's text, a summary the client makes itself, the
#: bases of the receipts and of the listings' pages.
NOT_PARSED = {"Health", "Page", "PushSummary", "Receipt"}
#: Fields a result derives rather than reads under their own name, and why.
DERIVED: dict[str, set[str]] = {
    # The same answer, parsed as the alert (or key) it describes.
    "CreatedAlert": {"alert"},
    "CreatedKey": {"info"},
    # "from" is a Python keyword.
    "Merged": {"source"},
    # A stream has no version of its own; its items are the answer's "items".
    "StreamReceipt": {"version", "chunk_items"},
}
#: Properties a model requires that its result leaves out on purpose (kept in ``raw``).
UNREAD: dict[str, set[str]] = {
    # The secret is shown once, by the answer to the creation (CreatedAlert).
    "Alert": {"secret"},
    # What the event says of its alert and selector: the alert and its events are read
    # through the selector's routes, which name them already.
    "AlertEvent": {"h", "jaccard", "method", "rbo", "selector", "threshold", "type"},
    "CreatedAlert": {"created_at", "crossings", "firing", "h", "id", "label", "threshold", "url"},
    "CreatedKey": {"created_at", "id", "label", "prefix", "scopes"},
    "Merged": {"from"},
    "Transformed": {"n_components", "name", "solution"},
    "Weights": {"name"},
}


@pytest.fixture(scope="module")
def components() -> dict[str, Any]:
    schema = create_app(Settings(redis_url="redis://127.0.0.1:1")).openapi()
    found: dict[str, Any] = schema["components"]["schemas"]
    return found


def fields_of(name: str) -> set[str]:
    """The answer's properties a result reads: its fields, a page's ``items`` under the key
    the answer gives them."""
    cls = getattr(results, name)
    fields = {f.name for f in dataclasses.fields(cls) if f.name != "raw"}
    if issubclass(cls, results.Page):
        fields = fields - {"items"} | {cls.items_key}
    return fields


def test_every_result_is_mapped() -> None:
    parsed = {
        name for name in results.__all__ if dataclasses.is_dataclass(getattr(results, name, None))
    }
    assert parsed == set(MODELS) | NOT_PARSED


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_result_reads_what_its_models_hold(name: str, components: dict[str, Any]) -> None:
    models = MODELS[name]
    properties: set[str] = set()
    required: set[str] = set()
    for model in models:
        assert model in components, f"{name}: no model {model} in the schema"
        properties |= set(components[model].get("properties", {}))
        required |= set(components[model].get("required", []))
    fields = fields_of(name)
    invented = fields - properties - DERIVED.get(name, set())
    assert not invented, f"{name} reads fields no model of {models} has: {sorted(invented)}"
    unread = required - fields - UNREAD.get(name, set())
    assert not unread, f"{name} does not read what {models} require: {sorted(unread)}"


@pytest.mark.parametrize("name", ["SelectorPage", "StreamPage"])
def test_a_page_reads_its_listing(name: str, components: dict[str, Any]) -> None:
    """Every cursor listing is a ``Page``: its items under the key its model names, and
    ``next``, the ``after`` of the following page (null on the last)."""
    page = getattr(results, name)
    model = components[MODELS[name][0]]
    assert issubclass(page, results.Page)
    assert {page.items_key, "next"} <= set(model["properties"])
    assert page.from_json({page.items_key: [], "next": None}) == page([], None)
    assert page.from_json({page.items_key: [], "next": "b"}).next == "b"
