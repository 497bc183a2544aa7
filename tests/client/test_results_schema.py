"""The client's typed answers (``siftstream.results``) held to the service's OpenAPI schema:
every field a result reads is a property of the response model it parses, and every property a
model requires is read by its result or named here as left out on purpose. A field renamed or
added on either side fails here, not in a user's program."""

from __future__ import annotations

import dataclasses
import types
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import numpy as np
import pytest

import siftstream.results as results
from service.api.app import create_app
from service.config import Settings
from siftstream.results import _common

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
    "TargetSummary": ("TargetSummary",),
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
    "ResetEvent": ("ResetEvent",),
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


@dataclasses.dataclass(frozen=True)
class SourceLags:
    partition_lag: dict[str, int | None]
    lag: int | None


def test_one_converter_reads_every_kind_of_field() -> None:
    """``from_json`` reads by the type hints alone: nested answers, lists, dicts, tuples,
    unions, numpy arrays, a field the answer names differently, defaults for absent and null
    fields, ``raw``."""
    doc = {
        "status": "applied",
        "log_id": "1-0",
        "duplicate": False,
        "version": 4,
        "rows": 3,
        "rows_seen": 9,
        "merged": {"from": "other", "version": 2, "rows": 3},
    }
    receipt = results.ChunkReceipt.from_json(doc)
    assert receipt == results.ChunkReceipt(
        status="applied",
        log_id="1-0",
        duplicate=False,
        version=4,
        rows=3,
        rows_seen=9,
        merged=results.Merged("other", 2, 3),
    )
    assert receipt.raw is doc
    pending = results.ChunkReceipt.from_json({**doc, "status": "pending", "merged": None})
    assert (pending.status, pending.version, pending.rows_seen, pending.merged) == (
        "pending",
        None,
        None,
        None,
    )
    top = results.Top.from_json(
        {
            "name": "s",
            "method": "variance",
            "version": 1,
            "rows_seen": 5,
            "features": [{"rank": 1, "index": 0, "name": "a", "score": 2, "band": [1, 2]}],
            "stability": None,
        }
    )
    assert top.features[0].band == (1, 2) and isinstance(top.features[0].score, float)
    assert (top.stability, top.features_seen, top.features[0].view) == (None, None, None)
    labels = results.Clustering.from_json(
        {
            "name": "s",
            "version": 1,
            "features_seen": 3,
            "features_used": 2,
            "k": 2,
            "seed": 0,
            "objective": 1,
            "labels": [0, 1, 1],
        }
    ).labels
    assert labels.dtype.kind == "i" and labels.tolist() == [0, 1, 1]
    counts = [
        results.ClassCount.from_json({"label": label, "count": 1}).label for label in (3, "x")
    ]
    assert counts == [3, "x"]
    deleted = results.DeletedSelectors.from_json({"deleted": ["a"], "failed": None})
    assert (deleted.failed, deleted.next) == ([], None)
    source = {"partition_lag": {"0": 3, "1": None}, "lag": None}
    assert results.Source.wire_doc(source) is source  # read as it is
    assert _common.convert(SourceLags, source) == SourceLags({"0": 3, "1": None}, None)
    page = results.SelectorPage.from_json({"selectors": [], "next": "b"})
    assert page == results.SelectorPage([], "b")


def test_an_answer_without_a_required_field_is_refused() -> None:
    with pytest.raises(ValueError, match="'version'"):
        results.Merged.from_json({"from": "other", "rows": 3})


#: Fields whose answer the result's ``wire_doc`` reshapes before reading, and how.
RESHAPED: dict[str, set[str]] = {
    # A write's status is "applied" unless the answer says "pending".
    "ChunkReceipt": {"status"},
    "FeaturesReceipt": {"status", "columns", "first_index"},  # or from the decisions
    "StreamReceipt": {"status", "duplicate"},
    # The unranked selectors, listed, read as each one's detail by name.
    "StreamRankings": {"unranked"},
}


def json_types(hint: Any) -> set[str] | None:
    """The JSON types a field of type ``hint`` reads (None: any), with "null" if it may be."""
    if hint is Any:
        return None
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        found: set[str] = set()
        for arg in args:
            kinds = {"null"} if arg is type(None) else json_types(arg)
            if kinds is None:
                return None
            found |= kinds
        return found
    if origin is Literal:
        return {"string"}
    if origin in (list, tuple) or hint is np.ndarray:
        return {"array"}
    if origin is dict or dataclasses.is_dataclass(hint):
        return {"object"}
    return {int: {"integer"}, float: {"number", "integer"}, str: {"string"}, bool: {"boolean"}}[
        hint
    ]


def schema_types(prop: dict[str, Any]) -> set[str] | None:
    """The JSON types a property of the schema may hold (None: any)."""
    options: list[dict[str, Any]] | None = prop.get("anyOf", prop.get("oneOf"))
    if options is not None:
        found: set[str] = set()
        for option in options:
            kinds = schema_types(option)
            if kinds is None:
                return None
            found |= kinds
        return found
    if "$ref" in prop or "allOf" in prop:
        return {"object"}
    if "enum" in prop or "const" in prop:
        return {
            type(v).__name__.replace("str", "string") for v in prop.get("enum", [prop.get("const")])
        }
    if "type" not in prop:
        return None
    return {prop["type"]} if isinstance(prop["type"], str) else set(prop["type"])


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_result_reads_its_models_types(name: str, components: dict[str, Any]) -> None:
    """Every field a result reads takes the JSON types its models give that property, and may
    be missing (a default) or null (optional) wherever a model may leave it out or null."""
    cls = getattr(results, name)
    skipped = DERIVED.get(name, set()) | RESHAPED.get(name, set())
    for field in _common._plan(cls):
        if field.name == "raw" or field.name in skipped or field.key in skipped:
            continue
        reads = json_types(get_type_hints(cls)[field.name])
        for model in MODELS[name]:
            schema = components[model]
            prop = schema.get("properties", {}).get(field.key)
            if prop is None:
                continue
            held = schema_types(prop)
            if reads is not None and held is not None:
                assert held - {"null"} <= reads, (
                    f"{name}.{field.name} reads {sorted(reads)}; {model} holds {sorted(held)}"
                )
                if "null" in held:
                    assert field.optional or field.has_default, (
                        f"{name}.{field.name}: {model} may hold null"
                    )
            if field.key not in schema.get("required", []):
                assert field.optional or field.has_default, (
                    f"{name}.{field.name}: {model} may leave it out"
                )
