"""The method protocol: what every streaming method provides, and what some of them offer.

A method is pure numpy/scipy: no Redis, no HTTP, no globals. Its learned state is a flat mapping
of named arrays and scalars (``State``) that the store encodes without pickle. The service never
asks a method's name what to do; it reads what the method declares:

* ``chunk_kind``: what one pushed chunk holds (``ChunkKind``); ``service.wire.kinds`` knows each
  kind's request bodies, log payload, how pending chunks of it join into one update and what a
  rejected chunk leaves behind;
* ``coalesces``: whether pending chunks may be joined into one update (river's ``learn_many``):
  a method whose result depends on chunk boundaries says no;
* ``score_field``, ``describe``: where the ranking and the description come from;
* capabilities, each a protocol below that a method implements or not (the service checks with
  ``isinstance``): ``DecidesOnArrival`` (OFS), ``Clusters`` (OFS), ``SelectsColumns`` (IQRP,
  and FSDS on its sketch), ``Mergeable`` (OCFS, variance, FSDS), ``Projects`` (IOC),
  ``EstimatesStability`` (the row methods, ``service.algorithms.resampling``), and for states
  that come from elsewhere (imports) ``StoresSegments`` (IQRP) and ``ChecksState``, which
  ``check_state`` uses.

Adding a method is one module that implements this protocol (with its ``examples``), one line
in the registry (``service.algorithms.METHODS``) and its docs page; the test suite runs every
registered method with its examples (``tests/algorithms/test_conformance.py`` and the HTTP
tests of ``tests/support/archive.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import (
    TYPE_CHECKING,
    Any,
    Generic,
    Literal,
    Protocol,
    TypeAlias,
    TypeGuard,
    TypeVar,
    runtime_checkable,
)

import numpy as np
import scipy.sparse as sp

from service.algorithms.examples import Example
from service.algorithms.params import MethodParams
from service.errors import Inconsistent

if TYPE_CHECKING:
    from service.algorithms.pivoted_qr import ColumnSource

#: A chunk of rows (samples x features): dense float array or CSR matrix.
Matrix: TypeAlias = np.ndarray | sp.csr_matrix | sp.csr_array
#: Scalars a state may hold next to its arrays (all JSON-representable).
Scalar: TypeAlias = int | float | str | bool | None
#: The learned state of one selector: named arrays and scalars, nothing else.
State: TypeAlias = dict[str, np.ndarray | Scalar]
#: State fields named ``segment:<id>`` are immutable blobs (a full block of stored columns,
#: say): the applier writes each once as its own Redis key and never again, and they are not
#: part of the state a method receives back. ``<id>`` must always name the same bytes, which a
#: method guarantees by deriving both from the log order. This keeps a commit from rewriting
#: data that only grows.
SEGMENT_PREFIX = "segment:"

#: The largest magnitude of a value in a chunk (``service.wire`` refuses anything larger): the
#: methods form sums of squares over up to 10^7 features (FSDS Gram matrices, OCFS and OMVFS
#: squares) and, in IOC, products of four values, and every intermediate stays below about
#: 1e214, far from float64's 1.8e308 (``tests/algorithms/test_magnitude_limit.py`` runs every
#: method at the limit).
MAX_ABS_VALUE = 1e50
#: The largest magnitude of a value in any method's state that chunks within ``MAX_ABS_VALUE``
#: can reach: sums of squares over 2^53 rows and 10^7 features stay below 1e123. An imported
#: state beyond it did not come from chunks (``check_state``).
MAX_STATE_MAGNITUDE = 1e130
#: The largest count (rows, features, classes seen...) a state may hold: 2^53 - 1, counted
#: exactly by every JSON client and by Redis's scripts.
MAX_STATE_COUNT = 2**53 - 1

#: What one pushed chunk holds:
#:
#: * ``"rows"``: new samples over the selector's ``n_features`` features (``POST .../chunks``);
#: * ``"labelled rows"``: the same, with one class label per row;
#: * ``"rows with a target"``: the same, with one numeric target value per row;
#: * ``"views"``: the rows of every view side by side (multi-view selectors);
#: * ``"columns"``: new feature columns over the selector's ``n_samples`` fixed samples
#:   (``POST .../features``); features are counted (and may be named) as they arrive.
ChunkKind: TypeAlias = Literal["rows", "labelled rows", "rows with a target", "views", "columns"]

#: The chunk type a method's ``update`` takes (``Matrix``, ``LabelledRows`` or ``TargetRows``).
C = TypeVar("C", contravariant=True)
#: A method's resolved parameters (its ``MethodParams``, resolved for one stream's size).
P = TypeVar("P", bound=MethodParams)


class Method(Protocol[C, P]):
    """What the service asks of every method."""

    #: The name users pass as ``"method"`` when creating a selector.
    name: str
    #: The publication it implements (authors, title, venue, and the algorithm or equation).
    paper: str
    chunk_kind: ChunkKind
    #: The JSON Schema of its ``params``, derived from its ``MethodParams`` (``MethodBase``):
    #: the OpenAPI create body, ``GET /v1/methods`` and ``sift methods`` document it,
    #: ``resolve_params`` enforces it and more.
    params_schema: dict[str, Any]
    #: The state field holding the score of every feature (read alone for rankings).
    score_field: str
    #: Whether the applier may join pending chunks into one update.
    coalesces: bool
    #: Whether the state after a stream does not depend on how it was chunked (up to rounding).
    #: FSDS's sketch does (its Frequent-Directions bound holds for any chunking), OMVFS's buffer
    #: holds whole chunks.
    chunking_invariant: bool
    #: State fields ``describe`` reads (the scalars always come with them).
    describe_fields: tuple[str, ...]
    #: Fields some reader needs that are too large to publish with every version (a sketch, the
    #: kept columns): readers get them from a checkpoint brought up to date on demand, and
    #: every other field a reader needs is published per version (``published_fields``).
    served_from_checkpoints: tuple[str, ...]
    #: Small selectors of it, as its tests create them (``service.algorithms.examples``): the
    #: test suite runs every registered method with these, the first one over HTTP too.
    examples: tuple[Example, ...]

    def resolve_params(self, params: Mapping[str, Any], size: int, stored: bool = False) -> P:
        """Validate user parameters and fill in defaults (``stored``: params resolved before,
        which resolve as they did when they were stored, ``MethodParams.complete``).

        ``size`` is the fixed dimension of the stream: features per row for row kinds, samples
        per column for ``"columns"``, all views' features together for ``"views"``; the result
        carries it (``MethodParams.size``).

        Raises ``service.errors.InvalidParams`` with a detail saying what was expected and what
        came; unknown names are an error too (a typo must not silently use a default). The
        result's ``as_params()`` is JSON-serialisable, echoed back to the user and stored, and
        resolves to itself. Every other call takes the result: a selector's stored params are
        resolved once, where its description is read (``service.applier.resolved``), never
        per update.
        """
        ...

    def initial_state(self, params: P) -> State:
        """The state of a selector that has seen no data (of ``params.size``)."""
        ...

    def state_sizes(self, params: P) -> dict[str, int]:
        """Bytes of every array ``initial_state`` holds, computed without allocating them.

        The service refuses a selector whose state would not fit before anything is allocated;
        what a state grows to later is checked at every commit.
        """
        ...

    def update(self, state: State, params: P, chunk: C) -> State:
        """Fold a chunk into the state; returns a new state, never mutates the input.

        The chunk is already validated by its kind: finite, not empty, of the selector's shape.
        """
        ...

    def weights(self, state: State, params: P) -> np.ndarray:
        """The current score of every feature seen, higher is better."""
        ...

    def describe(self, state: State) -> dict[str, Any]:
        """What a description of the selector shows of its state beyond the scalars (JSON).

        ``state`` holds the scalars and the ``describe_fields``.
        """
        ...


class MethodBase(Generic[P]):
    """The defaults of the method protocol (and of ``ChecksState``'s ``growing_axes``), declared
    once: a method inherits this and declares only what differs.

    A method declares its parameters once, as ``params_model`` (a ``MethodParams``); its
    ``params_schema`` and ``resolve_params`` are derived from it here. Every other call takes
    the resolved model (``P``), never a dict to resolve again.
    """

    params_model: type[P]
    params_schema: dict[str, Any]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        model = cls.__dict__.get("params_model")
        if model is not None:
            cls.params_schema = model.documented_schema()

    def resolve_params(self, params: Mapping[str, Any], size: int, stored: bool = False) -> P:
        return self.params_model.resolve(params, size, stored=stored)

    coalesces = True
    chunking_invariant = True
    describe_fields: tuple[str, ...] = ()
    served_from_checkpoints: tuple[str, ...] = ()
    examples: tuple[Example, ...] = ()

    def describe(self, state: State) -> dict[str, Any]:
        return {}

    def growing_axes(self, params: P) -> dict[str, tuple[int, ...]]:
        """No axis beyond those of length 0 in the initial state grows."""
        return {}


@dataclass(frozen=True)
class Decision:
    """What a method decided for one arriving item (OFS: Algorithm 1, steps 3-5)."""

    #: 0-based position of the feature in the whole stream.
    index: int
    #: ``l~_i`` of step 3 (eq. (3.3)).
    leverage: float
    #: ``p_i`` of step 4 (eq. (3.4)).
    probability: float
    kept: bool
    #: ``1 / sqrt(p_i)`` if kept (the column enters ``A~`` times this), else 0.0.
    scale: float


@runtime_checkable
class DecidesOnArrival(Protocol):
    """Decides on every item as it arrives and records the decision in the state, so a request,
    its retry and any later reader get the very same answer (OFS keeps or discards columns)."""

    decision_fields: tuple[str, ...]

    def decisions(
        self, arrays: Mapping[str, np.ndarray], first: int, count: int
    ) -> Sequence[Decision]:
        """The recorded decisions on items ``first .. first + count - 1`` (all decided)."""
        ...


@runtime_checkable
class Clusters(Protocol):
    """Clusters the fixed samples on what the method kept (OFS: k-means on the rows of A~)."""

    cluster_fields: tuple[str, ...]

    def cluster(
        self, arrays: Mapping[str, np.ndarray], k: int, seed: int
    ) -> tuple[np.ndarray, float, int]:
        """Labels of the samples, the objective, and how many features were used.

        Raises ``service.errors.Conflict`` while there is nothing to cluster on.
        """
        ...


@runtime_checkable
class SelectsColumns(Protocol):
    """Selects h features that together span the data, by pivoted QR (IQRP, Maung &
    Schweitzer 2013) over columns it holds or sketches."""

    #: True: every ranking is this selection (iqrp). False: on request (fsds's
    #: ``strategy=diverse``, on the columns of its sketch).
    pivoted_by_default: bool
    #: State fields ``pivot_source`` needs.
    pivot_fields: tuple[str, ...]

    def pivot_source(
        self,
        state: State,
        params: MethodParams,
        read_segment: Callable[[str], np.ndarray],
    ) -> ColumnSource:
        """The columns to select from; ``read_segment(id)`` fetches a stored segment.

        Raises ``service.errors.Conflict`` while there are no columns.
        """
        ...


@runtime_checkable
class Mergeable(Protocol):
    """Adds another selector's state: the result is the state one selector would have after
    seeing both streams, exactly (OCFS: class counts and sums add; variance: Chan's update) or
    within a stated bound (FSDS: two Frequent-Directions sketches stacked and shrunk)."""

    #: The fields of the other selector's state that ``merge`` needs (its summary).
    summary_fields: tuple[str, ...]

    def merge(self, state: State, params: MethodParams, summary: State) -> State:
        """``state`` with ``summary`` (another state's ``summary_fields``) added; a new state."""
        ...

    def summary_samples(self, summary: State) -> int:
        """How many samples a summary stands for (they count as rows seen)."""
        ...

    def merge_refusal(self, params: MethodParams) -> str | None:
        """Why states of selectors with these (resolved) params cannot be merged, or None."""
        ...


@dataclass(frozen=True)
class Projection:
    """A learned projection ``W`` (``n_features x p``) and how it was obtained."""

    projection: np.ndarray
    eigenvalues: np.ndarray
    #: ``|u^j . e_j|`` against the exact solution, 1 when converged.
    agreement: np.ndarray


@runtime_checkable
class Projects(Protocol):
    """Learns a projection of rows onto a few directions (IOC's ``W``) and applies it."""

    projection_fields: tuple[str, ...]
    #: The projections offered (the first is the default).
    solutions: tuple[str, ...]

    def projections(
        self, arrays: Mapping[str, np.ndarray], params: MethodParams
    ) -> dict[str, Projection]:
        """Every solution's projection of this state.

        Raises ``service.errors.Conflict`` while the state cannot define one yet.
        """
        ...


@runtime_checkable
class StoresSegments(Protocol):
    """Keeps part of its state as immutable segments (``SEGMENT_PREFIX``): IQRP's full blocks of
    columns. Says which segments a state refers to, so that a copy of the state (an export)
    carries exactly those, and none an unfinished update wrote ahead of its commit."""

    def segment_ids(self, state: State, params: MethodParams) -> list[str]:
        """The ids of every segment ``state`` refers to."""
        ...


@runtime_checkable
class ChecksState(Protocol):
    """States obey rules that ``check_state`` cannot read off the initial state: counts that
    match array lengths, buffers whose parts agree, axes that grow although they do not start
    empty. ``check_state`` asks a method that offers this capability for them."""

    def growing_axes(self, params: MethodParams) -> dict[str, tuple[int, ...]]:
        """Axes (by field) that may differ from the initial state's although it is not empty
        there (``check_state`` lets every axis of length 0 grow anyway)."""
        ...

    def check_consistency(
        self,
        state: State,
        params: MethodParams,
        segments: Mapping[str, np.ndarray],
    ) -> None:
        """``service.errors.Inconsistent`` unless the fields (and segments) agree."""
        ...


@runtime_checkable
class EstimatesStability(Protocol):
    """Keeps interleaved subsamples of itself beside its state (``ResampledMethod``), whose
    rankings say how settled the top h is (``service.algorithms.stability``): the row methods.
    A feature-column method has none: its features arrive once each (OFS decides on each column
    as it comes, IQRP selects among stored columns), so there is no stream of rows to resample;
    its answers carry ``stability: null``."""

    #: How the subsamples are kept for this method, and what they estimate.
    stability_estimate: str
    #: Whether the subsamples' spread is scaled to that of resamples of every row seen (scores
    #: smooth in the rows); else the index is that of subsamples of ``1/K`` of the rows
    #: (``service.algorithms.stability.replicate_scores``).
    stability_corrected: bool

    def stability_estimate_for(self, params: MethodParams) -> str:
        """``stability_estimate`` as it holds for a selector of these (resolved) params."""
        ...

    def resample_scores(self, state: State, params: MethodParams) -> np.ndarray | None:
        """The subsamples' scores (``K x d``); None if the state keeps none (a selector created
        before resamples existed, or with ``resamples: 0``) or one has seen no row yet."""
        ...

    @property
    def replay_takes(self) -> tuple[str, ...]:
        """Fields a replay takes from the version it rebuilds instead of computing them on the
        way (``resampling.replaying``): scores of the subsamples that cost an update."""
        ...


@runtime_checkable
class TestsSignificance(Protocol):
    """Scores that are a statistical test's statistics, with every feature's p-value in the
    state (``service.algorithms.univariate``): answers carry them and can select by them
    (``GET .../top?alpha=``). Both are NaN where the test is undefined (scikit-learn's
    answer), the only state values that need not be finite; the method's own check
    (``ChecksState``) holds them to the test of the statistics."""

    #: The state field of the p-values.
    p_value_field: str
    #: What its readers read (the p-values).
    p_value_fields: tuple[str, ...]


@runtime_checkable
class RefusesValues(Protocol):
    """Refuses values its maths does not take (chi-squared: negative ones), when a chunk is
    validated, before anything is written."""

    def refuse_values(self, chunk: Any) -> None:
        """``InvalidInput`` saying which value of ``chunk`` (a decoded chunk) is refused."""
        ...


def not_always_finite(method: Method[Any, Any]) -> frozenset[str]:
    """The state fields of ``method`` that may hold NaN or infinity: a test's scores, p-values
    and what else it derives (``TestsSignificance``), afresh from the statistics by every
    update."""
    score_field = method.score_field
    if offers(method, TestsSignificance):
        derived = getattr(method, "derived_fields", ())
        return frozenset({score_field, method.p_value_field, *derived})
    return frozenset()


#: What each capability is called where clients discover it (``GET /v1/methods``), and what it
#: serves; ``Mergeable`` also makes partitioned selectors. (``StoresSegments`` and
#: ``ChecksState`` are how a method is stored and imported, not what it offers.)
CAPABILITIES: tuple[tuple[type, str], ...] = (
    (DecidesOnArrival, "decisions"),
    (Clusters, "cluster"),
    (SelectsColumns, "pivoted"),
    (Mergeable, "merge"),
    (Projects, "projection"),
    (EstimatesStability, "stability"),
    (TestsSignificance, "p-values"),
)


_OFFERS: dict[tuple[type, type], bool] = {}
_Capability = TypeVar("_Capability")


def offers(method: object, capability: type[_Capability]) -> TypeGuard[_Capability]:
    """``isinstance(method, capability)`` for the protocols above, remembered per class: a
    runtime protocol check inspects every member each time (~10 us), and the request path
    asks on every request. (Protocol members are methods and class attributes: every
    instance of a class answers alike.)"""
    key = (type(method), capability)
    known = _OFFERS.get(key)
    if known is None:
        known = _OFFERS[key] = isinstance(method, capability)
    return known


def capabilities(method: Method[Any, Any]) -> list[str]:
    """The capabilities ``method`` offers, by the names clients discover them under."""
    offered = [name for protocol, name in CAPABILITIES if offers(method, protocol)]
    if offers(method, Mergeable):
        offered.append("partitions")
    return offered


#: Each capability and the attribute naming the state fields its readers read.
_READER_FIELDS: tuple[tuple[type, str], ...] = (
    (DecidesOnArrival, "decision_fields"),
    (Clusters, "cluster_fields"),
    (SelectsColumns, "pivot_fields"),
    (Mergeable, "summary_fields"),
    (Projects, "projection_fields"),
    (TestsSignificance, "p_value_fields"),
)


def check_state(
    method: Method[Any, Any],
    state: State,
    params: MethodParams,
    segments: Mapping[str, np.ndarray] | None = None,
) -> None:
    """``Inconsistent`` unless ``state`` could be one of ``method``'s states for ``params``
    (resolved, for the stream's size).

    For a state that did not come from the method itself (an imported archive): the applier and
    the readers assume what this checks, so a crafted state must never get in. Derived from
    ``initial_state``: the same fields; every scalar of the same JSON type (an integer may stand
    for a float); every array of the same dtype and number of axes, finite (but a test's scores
    and p-values, ``TestsSignificance``), and as long as the
    initial one on every axis that is not empty there (those grow with the stream) unless the
    method says it grows (``ChecksState.growing_axes``). Then the method's own rules
    (``ChecksState``) and its segments (``StoresSegments``): exactly the ones it refers to.
    """
    initial = method.initial_state(params)
    growing = method.growing_axes(params) if isinstance(method, ChecksState) else {}
    loose = not_always_finite(method)
    missing = sorted(set(initial) - set(state))
    unexpected = sorted(set(state) - set(initial))
    if missing or unexpected:
        raise Inconsistent(
            f"a {method.name} state has the fields {sorted(initial)}; this one lacks {missing} "
            f"and has {unexpected} besides"
        )
    for field, expected in initial.items():
        value = state[field]
        if isinstance(expected, np.ndarray):
            _check_array(field, value, expected, growing.get(field, ()), field not in loose)
        elif not _same_scalar_type(value, expected):
            raise Inconsistent(
                f"state scalar '{field}' must be of type {type(expected).__name__}; got "
                f"{type(value).__name__}"
            )
        elif isinstance(value, float) and not abs(value) <= MAX_STATE_MAGNITUDE:
            raise Inconsistent(
                f"state scalar '{field}' must be finite and at most {MAX_STATE_MAGNITUDE:g} in "
                f"magnitude (what chunks can reach); got {value}"
            )
        elif isinstance(value, int) and not 0 <= value <= MAX_STATE_COUNT:
            raise Inconsistent(
                f"state scalar '{field}' (a count) must be an integer from 0 to "
                f"{MAX_STATE_COUNT}; got {value}"
            )
    given = dict(segments or {})
    wanted = method.segment_ids(state, params) if isinstance(method, StoresSegments) else []
    if sorted(wanted) != sorted(given):
        lacking = sorted(set(wanted) - set(given))
        extra = sorted(set(given) - set(wanted))
        raise Inconsistent(
            f"the state refers to {len(wanted)} segments; {len(lacking)} of them are missing "
            f"{lacking[:3]} and {len(extra)} are not referred to {extra[:3]}"
        )
    for segment_id, array in given.items():
        if array.dtype.kind == "f" and not np.isfinite(array).all():
            raise Inconsistent(f"segment '{segment_id}' holds NaN or infinity")
    if isinstance(method, ChecksState):
        method.check_consistency(state, params, given)


def _check_array(
    field: str, value: object, expected: np.ndarray, growing: tuple[int, ...], finite: bool
) -> None:
    if not isinstance(value, np.ndarray):
        raise Inconsistent(f"state field '{field}' must be an array; got {type(value).__name__}")
    if value.dtype != expected.dtype or value.ndim != expected.ndim:
        raise Inconsistent(
            f"state field '{field}' must be a {expected.ndim}-D {expected.dtype} array; got a "
            f"{value.ndim}-D {value.dtype} one"
        )
    for axis, (got, want) in enumerate(zip(value.shape, expected.shape, strict=True)):
        if want and got != want and axis not in growing:
            raise Inconsistent(
                f"state field '{field}' must have {want} entries on axis {axis} (shape "
                f"{expected.shape}, axes of length 0 grow); got shape {value.shape}"
            )
    # In double precision: the bound does not fit a float32 (whose finite values are all in it).
    # Fields that need not be finite are a test's, derived from the statistics and held to
    # them by the method's own check: any float (F of a perfect fit is the largest one).
    magnitudes = (
        np.abs(value).astype(np.float64, copy=False) if value.dtype.kind == "f" and finite else None
    )
    if magnitudes is not None and not (magnitudes <= MAX_STATE_MAGNITUDE).all():
        raise Inconsistent(
            f"state field '{field}' holds NaN, infinity or values beyond "
            f"{MAX_STATE_MAGNITUDE:g} in magnitude (more than chunks can reach)"
        )


def _same_scalar_type(value: object, expected: object) -> bool:
    """JSON types: bool is not a number, an int may stand for a float, None only for None."""
    if isinstance(expected, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(expected, bool)
    if isinstance(expected, float):
        return isinstance(value, int | float)
    if isinstance(expected, int):
        return isinstance(value, int)
    if isinstance(expected, str):
        return isinstance(value, str)
    return value is None and expected is None


def published_fields(method: Method[Any, Any]) -> tuple[str, ...]:
    """The state fields every version publishes for its readers, besides the scalars.

    What the rankings (``score_field``), ``describe`` and each capability the method offers
    read, except what the method serves from checkpoints. Everything else in the state (the
    working matrices of an update) stays with the applier and its checkpoints, so a commit
    writes what readers need, not the whole state.
    """
    fields = [method.score_field, *method.describe_fields]
    for capability, attribute in _READER_FIELDS:
        if offers(method, capability):
            fields.extend(getattr(method, attribute))
    skipped = set(method.served_from_checkpoints)
    return tuple(dict.fromkeys(f for f in fields if f not in skipped))


def order_by_score(scores: np.ndarray, h: int) -> np.ndarray:
    """The ``h`` highest scores' indices, ties broken by the lower index (deterministic, where
    argpartition would pick arbitrarily among ties at the cut), NaN scores last. Every ranking
    of ``weights`` (the top h, the ranking history) orders this way."""
    h = max(0, min(h, scores.size))
    if 0 < h < scores.size // 4:
        # Sort only the candidates at or above the h-th largest score (every tie at the cut
        # included, so the answer is the same): O(n) instead of O(n log n) for a short top.
        threshold = np.partition(scores, scores.size - h)[scores.size - h]
        candidates = np.flatnonzero(scores >= threshold)
        if candidates.size >= h:  # else NaN scores (undefined tests) took places: sort all
            return candidates[np.lexsort((candidates, -scores[candidates]))][:h]
    return np.lexsort((np.arange(scores.size), -scores))[:h]


def top_per_view(
    scores: np.ndarray, views: Sequence[tuple[str, int]], h: int
) -> list[tuple[str, int, np.ndarray]]:
    """The top ``h`` of every view of a multi-view score vector (the views side by side):
    ``(view, offset of its first feature, indices within the view in rank order)``."""
    ranked = []
    start = 0
    for view, dim in views:
        ranked.append((view, start, order_by_score(scores[start : start + dim], h)))
        start += dim
    return ranked


#: Any registered method.
AnyMethod: TypeAlias = Method[Any, Any]
