"""Every registered method keeps the method protocol (``service.algorithms.base``).

Parametrised over ``METHODS`` and each method's ``examples``: a method added to the registry
is checked here without a line of this file changing, as the test suite's own method
(``tests/support/added_method.py``, registered for its tests) shows. Chunks are made per chunk
kind (``service.wire.kinds``), so the same checks drive row, labelled, multi-view and column
methods.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import jsonschema
import numpy as np
import pytest
import scipy.sparse as sp

from service.algorithms import METHODS
from service.algorithms.base import (
    MAX_ABS_VALUE,
    SEGMENT_PREFIX,
    AnyMethod,
    Clusters,
    DecidesOnArrival,
    Mergeable,
    Projects,
    SelectsColumns,
    check_state,
    published_fields,
)
from service.algorithms.labels import labelled
from service.algorithms.params import MethodParams
from service.algorithms.resampling import ResampledMethod, summary_fields_of
from service.algorithms.subsamples import COUNTS_FIELD
from service.algorithms.targets import TargetRows
from service.errors import Inconsistent, InvalidParams
from service.store.codec import decode_state, encode_state
from service.wire.kinds import chunk_format
from tests.support.added_method import NAME as ADDED
from tests.support.added_method import MeanAbs, registered
from tests.support.states import array_field

#: Every registered method, and the test suite's own (registered while its tests run).
NAMES = [*sorted(METHODS), ADDED]


def method_named(name: str) -> AnyMethod:
    """The method ``name`` when tests are collected (the added one is not registered yet)."""
    return MeanAbs() if name == ADDED else METHODS[name]


@pytest.fixture(autouse=True)
def _added_method_registered(request: pytest.FixtureRequest) -> Iterator[None]:
    """The test suite's own method in the registry while a test of it runs."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and callspec.params.get("name") == ADDED:
        with registered():
            yield
    else:
        yield


#: Features per row (row kinds, both views together) or samples per column (columns).
SIZE = 8
VIEWS = {"a": 5, "b": 3}


def params_for(method: AnyMethod) -> dict[str, Any]:
    """What a creation would pass (the views of a multi-view method come from its shape)."""
    return {"views": VIEWS} if method.chunk_kind == "views" else {}


def make_chunk(method: AnyMethod, rng: np.random.Generator, items: int, sparse: bool) -> Any:
    """A valid chunk of ``items`` rows (or columns) of the method's kind."""
    if method.chunk_kind == "columns":
        return rng.standard_normal((SIZE, items))
    rows = rng.random((items, SIZE)) * (rng.random((items, SIZE)) < 0.6)
    if method.examples[0].low < 0:  # else a method of nonnegative values (omvfs, chi2)
        rows = rows * rng.choice([-1.0, 1.0], size=rows.shape)
    matrix: Any = sp.csr_matrix(rows) if sparse else rows
    if method.chunk_kind == "labelled rows":
        return labelled(matrix, [int(label) for label in rng.integers(0, 4, size=items)])
    if method.chunk_kind == "rows with a target":
        return TargetRows(matrix, rows @ rng.standard_normal(SIZE) + rng.standard_normal(items))
    return matrix


def stream(method: AnyMethod, seed: int = 0, sizes: tuple[int, ...] = (7, 5, 9)) -> list[Any]:
    rng = np.random.default_rng(seed)
    return [make_chunk(method, rng, n, sparse=i % 2 == 1) for i, n in enumerate(sizes)]


def run(method: AnyMethod, chunks: list[Any]) -> tuple[MethodParams, dict[str, Any]]:
    params = method.resolve_params(params_for(method), SIZE)
    state = method.initial_state(params)
    for chunk in chunks:
        state = method.update(state, params, chunk)
    return params, state


def assert_states_equal(a: dict[str, Any], b: dict[str, Any], exact: bool) -> None:
    assert set(a) == set(b)
    for key in a:
        if isinstance(a[key], np.ndarray):
            if exact:
                np.testing.assert_array_equal(a[key], b[key], err_msg=key)
            else:
                np.testing.assert_allclose(a[key], b[key], rtol=1e-9, atol=1e-12, err_msg=key)
        elif isinstance(a[key], float) and not exact:
            assert a[key] == pytest.approx(b[key], rel=1e-9, abs=1e-12), key
        else:
            assert a[key] == b[key], key


def kept(state: dict[str, Any]) -> dict[str, Any]:
    """The state without the immutable segments a method emits beside it."""
    return {k: v for k, v in state.items() if not k.startswith(SEGMENT_PREFIX)}


@pytest.mark.parametrize("name", NAMES)
def test_unknown_parameters_are_refused(name: str) -> None:
    method = METHODS[name]
    with pytest.raises(InvalidParams):
        method.resolve_params({**params_for(method), "no_such_parameter": 1}, SIZE)


@pytest.mark.parametrize("name", NAMES)
def test_resolved_params_resolve_to_themselves_and_keep_the_documented_schema(name: str) -> None:
    method = METHODS[name]
    resolved = method.resolve_params(params_for(method), SIZE).as_params()
    assert method.resolve_params(resolved, SIZE).as_params() == resolved
    jsonschema.Draft202012Validator.check_schema(method.params_schema)
    shape_given = set(params_for(method))
    documented = {k: v for k, v in resolved.items() if k not in shape_given}
    jsonschema.validate(documented, method.params_schema)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("size", [SIZE, 3 * SIZE])
def test_documented_defaults_are_what_resolution_fills_in(name: str, size: int) -> None:
    """Passing a documented default changes nothing (or is refused, for a parameter that
    does not apply to the configuration, such as FSDS's gaussian-only ones)."""
    method = METHODS[name]
    base = {"views": {"a": size - 3, "b": 3}} if method.chunk_kind == "views" else {}
    resolved = method.resolve_params(base, size).as_params()
    defaults = {
        key: prop["default"]
        for key, prop in method.params_schema["properties"].items()
        if "default" in prop
    }
    for key, default in defaults.items():
        try:
            explicit = method.resolve_params({**base, key: default}, size).as_params()
        except InvalidParams:
            assert key not in resolved, key  # refused only where it does not apply
            continue
        assert explicit == resolved, key
    # ... and every parameter without one is computed (from the size, or other parameters).
    computed = set(method.params_schema["properties"]) - set(defaults)
    assert computed <= set(resolved), computed - set(resolved)


@pytest.mark.parametrize("name", NAMES)
def test_state_sizes_are_what_the_initial_state_holds(name: str) -> None:
    method = METHODS[name]
    resolved = method.resolve_params(params_for(method), SIZE)
    state = method.initial_state(resolved)
    arrays = {k: v.nbytes for k, v in state.items() if isinstance(v, np.ndarray)}
    predicted = method.state_sizes(resolved)
    assert sum(predicted.values()) == sum(arrays.values())
    for field, nbytes in predicted.items():
        assert arrays[field] == nbytes, field


@pytest.mark.parametrize("name", NAMES)
def test_state_encodes_and_decodes_bit_exactly(name: str) -> None:
    method = METHODS[name]
    _params, state = run(method, stream(method))
    decoded = decode_state(encode_state(kept(state)))
    assert_states_equal(kept(state), decoded, exact=True)
    for key, value in kept(state).items():
        if isinstance(value, np.ndarray):
            assert decoded[key].dtype == value.dtype and decoded[key].shape == value.shape, key


@pytest.mark.parametrize("name", NAMES)
def test_update_never_writes_into_its_input(name: str) -> None:
    """The applier hands a method read-only arrays decoded from Redis: writing would raise."""
    method = METHODS[name]
    params, state = run(method, stream(method, sizes=(6,)))
    frozen = decode_state(encode_state(kept(state)))
    before = copy.deepcopy(frozen)
    chunk = make_chunk(method, np.random.default_rng(9), 5, sparse=False)
    chunk_before = copy.deepcopy(chunk)
    method.update(frozen, params, chunk)
    assert_states_equal(frozen, before, exact=True)
    rows = chunk.rows if hasattr(chunk, "rows") else chunk
    rows_before = chunk_before.rows if hasattr(chunk_before, "rows") else chunk_before
    np.testing.assert_array_equal(np.asarray(rows), np.asarray(rows_before))


@pytest.mark.parametrize("name", [n for n in NAMES if method_named(n).chunking_invariant])
def test_the_state_does_not_depend_on_the_chunking(name: str) -> None:
    method = METHODS[name]
    assert method.coalesces, "a chunking-invariant method may let the applier coalesce"
    chunks = stream(method, seed=4, sizes=(3, 8, 1, 6))
    _params, one_by_one = run(method, chunks)
    _params, joined = run(method, [chunk_format(method.chunk_kind).join(chunks)])
    assert_states_equal(kept(one_by_one), kept(joined), exact=False)
    np.testing.assert_allclose(
        method.weights(one_by_one, _params), method.weights(joined, _params), rtol=1e-9
    )


@pytest.mark.parametrize("name", [n for n in NAMES if isinstance(method_named(n), Mergeable)])
def test_a_merge_equals_the_union_of_the_streams(name: str) -> None:
    method = METHODS[name]
    assert isinstance(method, Mergeable)
    left, right = stream(method, seed=1), stream(method, seed=2, sizes=(4, 6))
    params, a = run(method, left)
    _params, b = run(method, right)
    _params, union = run(method, left + right)
    summary = {k: v for k, v in b.items() if not isinstance(v, np.ndarray)}
    summary.update({field: b[field] for field in summary_fields_of(method, params)})
    merged = method.merge(a, params, decode_state(encode_state(summary)))
    assert method.summary_samples(summary) == sum(
        chunk_format(method.chunk_kind).items_of(c) for c in right
    )
    np.testing.assert_allclose(
        method.weights(merged, params), method.weights(union, params), rtol=1e-9, atol=1e-12
    )
    # The resamples merge too: as many rows, each subsample with its own of both sides.
    assert isinstance(method, ResampledMethod)
    np.testing.assert_array_equal(merged[COUNTS_FIELD], a[COUNTS_FIELD] + b[COUNTS_FIELD])
    assert array_field(merged, COUNTS_FIELD).sum() == array_field(union, COUNTS_FIELD).sum()
    assert method.resample_scores(merged, params) is not None


CAPABILITY_FIELDS: dict[type, Callable[[Any], tuple[str, ...]]] = {
    DecidesOnArrival: lambda m: m.decision_fields,
    Clusters: lambda m: m.cluster_fields,
    SelectsColumns: lambda m: m.pivot_fields,
    Mergeable: lambda m: m.summary_fields,
    Projects: lambda m: m.projection_fields,
}


@pytest.mark.parametrize("name", NAMES)
def test_capabilities_read_fields_the_state_has(name: str) -> None:
    method = METHODS[name]
    _params, state = run(method, stream(method))
    assert method.score_field in state
    fields = set(method.describe_fields)
    for capability, fields_of in CAPABILITY_FIELDS.items():
        if isinstance(method, capability):
            fields |= set(fields_of(method))
    missing = fields - set(state)
    assert not missing, f"{name} declares fields its state does not have: {missing}"
    described = method.describe(state)
    assert isinstance(described, dict)


@pytest.mark.parametrize("name", NAMES)
def test_what_a_version_publishes_is_in_the_state_and_small_fields_are_not_held_back(
    name: str,
) -> None:
    """Every published field exists; fields served from checkpoints are ones a reader reads
    (and are left out of what each version publishes)."""
    method = METHODS[name]
    _params, state = run(method, stream(method))
    published = set(published_fields(method))
    assert method.score_field in published
    assert published <= set(state), f"{name} publishes fields it lacks: {published - set(state)}"
    readers = set(method.describe_fields) | {method.score_field}
    for capability, fields_of in CAPABILITY_FIELDS.items():
        if isinstance(method, capability):
            readers |= set(fields_of(method))
    held_back = set(method.served_from_checkpoints)
    assert held_back <= readers, f"{name} serves from checkpoints what no reader reads"
    assert not held_back & published


@pytest.mark.parametrize("name", NAMES)
def test_every_method_carries_an_example_that_it_accepts(name: str) -> None:
    """Its examples are what the test suite runs it with (``service.algorithms.examples``)."""
    method = METHODS[name]
    assert method.examples, f"{name} declares no examples"
    kind = chunk_format(method.chunk_kind)
    for example in method.examples:
        shape = kind.shape(dict(example.shape), name)
        method.resolve_params({**example.params, **shape.params}, shape.size)


@pytest.mark.parametrize(
    "name, extra",
    [(name, {}) for name in NAMES]
    + [(n, dict(e.params)) for n in NAMES for e in method_named(n).examples if e.params],
)
def test_states_the_method_reaches_pass_its_own_check(name: str, extra: dict[str, Any]) -> None:
    """``check_state`` (what an import must pass) accepts every state the method reaches,
    after any number of chunks, dense or sparse, and with values at the limit chunks may hold
    (``MAX_ABS_VALUE``): the magnitude bound and each method's invariants hold for them."""
    method = METHODS[name]
    params = method.resolve_params({**params_for(method), **extra}, SIZE)
    state = method.initial_state(params)
    segments: dict[str, Any] = {}
    check_state(method, state, params, segments)
    rng = np.random.default_rng(7)
    for i, n in enumerate((6, 1, 9, 4)):
        chunk = make_chunk(method, rng, n, sparse=i % 2 == 1)
        if i == 3 and method.chunk_kind != "columns":
            chunk = scaled(chunk, MAX_ABS_VALUE)  # values at the limit chunks may hold
        state = method.update(state, params, chunk)
        segments |= {
            k.removeprefix(SEGMENT_PREFIX): np.asarray(v)
            for k, v in state.items()
            if k.startswith(SEGMENT_PREFIX)
        }
        state = {k: v for k, v in state.items() if not k.startswith(SEGMENT_PREFIX)}
        check_state(method, state, params, segments)


def scaled(chunk: Any, factor: float) -> Any:
    """A chunk with its values multiplied by ``factor`` (labels and targets kept)."""
    if hasattr(chunk, "rows"):
        return dataclasses.replace(chunk, rows=chunk.rows * factor)
    return chunk * factor


def test_fsds_states_that_algorithm_2_cannot_leave_are_refused() -> None:
    method = METHODS["fsds"]
    params, state = run(method, stream(method))
    rotation = np.linalg.qr(np.random.default_rng(3).standard_normal((SIZE, SIZE)))[0]
    crafted = {
        "weights not steps 5-7": {"weights": np.asarray(state["weights"]) * 2},
        "rows not orthogonal": {
            "sketch_rows": np.asarray(state["sketch_rows"]) @ rotation[:1].T * np.ones((1, SIZE))
        },
        "more energy than the rows": {"squared_norm_seen": 1e-3},
        "singular values increasing": {"singular_values": np.sort(state["singular_values"])},
    }
    for what, change in crafted.items():
        with pytest.raises(Inconsistent):
            check_state(method, {**state, **change}, params)
            pytest.fail(what)
