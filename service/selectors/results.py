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

from typing import Annotated, Any, ClassVar, Literal, TypeAlias

import numpy as np
import orjson
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    PrivateAttr,
    WithJsonSchema,
)


def _checked(ndim: int, dtype: type) -> Any:
    def check(value: Any) -> np.ndarray:
        array: np.ndarray = np.asarray(value, dtype=dtype)
        if array.ndim != ndim:
            raise ValueError(f"expected a {ndim}-D array; got {array.ndim}-D")
        return array

    return PlainValidator(check)


_AS_LIST = PlainSerializer(lambda a: a.tolist(), when_used="json")
_NUMBER = {"type": "number"}

#: A vector of floats, a matrix of floats, a vector of integers: carried as numpy arrays.
Floats: TypeAlias = Annotated[
    np.ndarray, _checked(1, float), _AS_LIST, WithJsonSchema({"type": "array", "items": _NUMBER})
]
FloatMatrix: TypeAlias = Annotated[
    np.ndarray,
    _checked(2, float),
    _AS_LIST,
    WithJsonSchema({"type": "array", "items": {"type": "array", "items": _NUMBER}}),
]
Integers: TypeAlias = Annotated[
    np.ndarray,
    _checked(1, int),
    _AS_LIST,
    WithJsonSchema({"type": "array", "items": {"type": "integer"}}),
]


class Result(BaseModel):
    """Base of every answer: rendered without the optional fields it does not have (unless it
    ``shows_nulls``: every field said, null where there is nothing)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    shows_nulls: ClassVar[bool] = False

    def render(self) -> bytes:
        return orjson.dumps(
            self.model_dump(exclude_none=not self.shows_nulls, by_alias=True),
            option=orjson.OPT_SERIALIZE_NUMPY,
        )


class ClassCount(Result):
    label: int | str = Field(description="The class label as sent.")
    count: int


class SelectorOut(Result):
    """A selector: what it is, and (describe) what its state holds. Methods may add fields."""

    model_config = ConfigDict(extra="allow")

    name: str
    method: str
    chunk_kind: str = Field(
        description="What one chunk holds: 'rows', 'labelled rows', 'views' (POST .../chunks) "
        "or 'columns' (POST .../features); GET /v1/methods says it of every method."
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
    classes: list[ClassCount] | None = Field(
        default=None, description="Labelled methods (describe only): classes seen, in order."
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


class MethodOut(Result):
    """A method a selector may run, as a client discovers it."""

    name: str
    paper: str = Field(description="The publication it implements, and where in it.")
    chunk_kind: str = Field(
        description="What one chunk holds: 'rows', 'labelled rows', 'views' or 'columns'."
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


class ClusterOut(Result):
    name: str
    version: int
    features_seen: int
    features_used: int = Field(description="Kept columns the samples were clustered on.")
    k: int
    seed: int
    objective: float = Field(description="k-means objective (inertia).")
    labels: Integers = Field(description="Cluster of each of the n_samples samples.")


class RankedFeature(Result):
    rank: int
    view: str | None = Field(default=None, description="Multi-view selectors: the feature's view.")
    index: int
    name: str
    score: float = Field(description="The method's score, or the pivot |R_jj| for pivoted-qr.")
    band: list[int] | None = Field(
        default=None,
        min_length=2,
        max_length=2,
        description="The lowest and highest rank (1 is the best) the feature takes in this "
        "ranking and in the resampled ones (top answers with a stability).",
    )


class StabilityOut(Result):
    """How settled the top h is: the selection-stability index of Nogueira, Sechidis & Brown
    (JMLR 2018) over the top h of the resampled rankings."""

    index: float = Field(
        description="1 when every resample selects the same h features; about 0 for "
        "selections at random; below 0 when they disagree more than chance."
    )
    interval: list[float] = Field(
        min_length=2,
        max_length=2,
        description="The 95% interval of the index (wide with few resamples: with 2, two "
        "identical selections of 10 give about [0.72, 1]).",
    )
    level: float = Field(description="The interval's confidence level (0.95).")
    resamples: int = Field(description="The resampled rankings compared (the params' resamples).")
    h: int = Field(
        description="The top h assessed (multi-view selectors: per view; the index is of every "
        "view's top h together)."
    )
    estimated_by: str = Field(description="How the method keeps its resamples.")
    corrected: bool = Field(
        description="true: the resamples' spread is scaled to that of resamples of every row "
        "seen (methods whose scores are smooth in the rows: variance, ocfs, ioc); false: the "
        "index is that of subsamples of 1/resamples of the rows (fsds, omvfs), lower than the "
        "whole stream's while the ranking still settles."
    )


class PassAccount(Result):
    """What IQRP's passes cost (Maung & Schweitzer, section 4.3)."""

    l: int = Field(description="Length of the candidate list.")  # noqa: E741 (the paper's l)
    passes: int
    io_passes: float = Field(description="q = 1 + sum_j n_j / n: the data actually read.")
    columns_read: list[int] = Field(description="n_j: columns not skipped in each pass.")
    blocks_read: int
    blocks_total: int
    flops: float
    flops_per_kmn: float


class TopOut(Result):
    """The top features of a version; frozen, and rendered once: the same answer is served
    to every reader of that version (``Rankings``)."""

    model_config = ConfigDict(
        frozen=True,
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
        },
    )
    name: str
    method: str
    version: int
    rows_seen: int | None = Field(default=None, description="Row streams.")
    features_seen: int | None = Field(default=None, description="Feature streams.")
    features: list[RankedFeature]
    strategy: str | None = Field(default=None, description="'pivoted-qr' for IQRP answers.")
    account: PassAccount | None = None
    versions: list[int] | None = Field(
        default=None, description="Partitioned selectors: each partition's version (summed)."
    )
    stability: StabilityOut | None = Field(
        default=None,
        description="How settled the top h is (row methods, ranked by score); null for "
        "feature-column methods and pivoted selections, for selectors created before "
        "resamples existed or with resamples 0, and until every resample has seen a row.",
    )
    _rendered: bytes | None = PrivateAttr(default=None)

    def render(self) -> bytes:
        if self._rendered is None:
            body = self.model_dump(exclude_none=True, by_alias=True)
            body.setdefault("stability", None)  # always said, null when there is none
            self._rendered = orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY)
        return self._rendered


class WeightsOut(Result):
    name: str
    version: int
    rows_seen: int | None = Field(default=None, description="Row streams.")
    features_seen: int | None = Field(default=None, description="Feature streams.")
    weights: Floats
    versions: list[int] | None = Field(
        default=None, description="Partitioned selectors: each partition's version (summed)."
    )


class ProjectionOut(Result):
    name: str
    version: int
    rows_seen: int
    n_components: int
    solution: str = Field(description="'ioc' (learned) or 'exact' (batch OC from the state).")
    eigenvalues: Floats = Field(
        description="||v^j|| (ioc: IOC's estimates) or the exact eigenvalues of S_b."
    )
    agreement: Floats = Field(
        description="|u^j . e_j|: IOC's vector against the exact eigenvector, 1 when converged."
    )
    projection: FloatMatrix = Field(description="W, n_features x n_components.")


class TransformOut(Result):
    name: str
    version: int
    rows_seen: int
    n_components: int
    solution: str
    rows: FloatMatrix = Field(description="W^T x for every row sent, in order.")


class HistoryVersion(Result):
    """One committed version in the ranking history: its top features then."""

    version: int
    rows_seen: int | None = Field(default=None, description="Row streams.")
    features_seen: int | None = Field(default=None, description="Feature streams.")
    updated_at: float = Field(description="When the version was committed (seconds, epoch).")
    top: list[RankedFeature] = Field(
        description="The h best features of the version (of every view, for multi-view ones)."
    )


class HistoryOut(Result):
    """How the ranking moved: the top h of the newest versions, newest first."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "name": "news",
                    "method": "fsds",
                    "h": 1,
                    "versions": [
                        {
                            "version": 12,
                            "rows_seen": 1200,
                            "updated_at": 1732258800.0,
                            "top": [{"rank": 1, "index": 3, "name": "f3", "score": 0.5}],
                        }
                    ],
                }
            ]
        }
    )
    name: str
    method: str
    h: int
    versions: list[HistoryVersion]


# -- streams ---------------------------------------------------------------------------------


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
        description="What one chunk holds: 'rows', 'labelled rows', 'views' or 'columns'."
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


class FeatureRef(Result):
    """A feature, as answers about rankings name it."""

    index: int = Field(description="Its index (within its view, for multi-view selectors).")
    name: str
    view: str | None = Field(default=None, description="Multi-view selectors: its view.")


class VersionDrift(Result):
    """How the top h moved since an earlier version (``version``)."""

    version: int = Field(description="The earlier version.")
    rows_seen: int | None = Field(default=None, description="Row streams: then.")
    features_seen: int | None = Field(default=None, description="Feature streams: then.")
    rbo: float = Field(
        description="Rank-biased overlap (RBO_ext, Webber, Moffat & Zobel 2010, p = 0.9) of the "
        "two tops: 1 for the same ranking, 0 for disjoint ones (multi-view: the views' mean)."
    )
    jaccard: float = Field(description="Shared features over all features of the two tops.")
    drift: float = Field(description="1 - rbo: how far the ranking moved (0 to 1).")
    entered: list[FeatureRef] = Field(description="In the current top h, not in the earlier.")
    left: list[FeatureRef] = Field(description="In the earlier top h, not in the current.")


class BaselineDrift(VersionDrift):
    how: Literal["auto", "pinned"] = Field(
        description="auto: the first version whose ranking was stable; pinned: POST .../baseline."
    )
    pinned_at: float = Field(description="When it became the baseline (seconds, epoch).")


class DriftOut(Result):
    """How far the top h moved since the previous version and since the baseline."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "name": "news",
                    "method": "fsds",
                    "h": 3,
                    "version": 12,
                    "rows_seen": 12000,
                    "previous": {
                        "version": 11,
                        "rows_seen": 11000,
                        "rbo": 1.0,
                        "jaccard": 1.0,
                        "drift": 0.0,
                        "entered": [],
                        "left": [],
                    },
                    "baseline": None,
                }
            ]
        }
    )
    name: str
    method: str
    h: int
    version: int = Field(description="The newest version in the history (0: none yet).")
    rows_seen: int | None = Field(default=None, description="Row streams.")
    features_seen: int | None = Field(default=None, description="Feature streams.")
    previous: VersionDrift | None = Field(
        default=None, description="Since the version before (null: no earlier version kept)."
    )
    baseline: BaselineDrift | None = Field(
        default=None,
        description="Since the baseline (null: none yet, until a version's ranking is stable "
        "or one is pinned).",
    )

    def render(self) -> bytes:
        body = self.model_dump(exclude_none=True, by_alias=True)
        body.setdefault("previous", None)
        body.setdefault("baseline", None)
        return orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY)


class BaselineOut(Result):
    """The version a selector's drift is measured against."""

    name: str
    version: int
    rows_seen: int | None = Field(default=None, description="Row streams.")
    features_seen: int | None = Field(default=None, description="Feature streams.")
    how: Literal["auto", "pinned"]
    pinned_at: float


class AlertOut(Result):
    """An alert: a webhook called when a committed version's drift since the baseline crosses
    the threshold."""

    shows_nulls = True

    id: str
    url: str
    h: int
    threshold: float
    min_stability: float | None = Field(
        default=None, description="Fires only while the top h is at least this stable."
    )
    label: str
    created_at: float
    kind: Literal["webhook", "alertmanager"] = Field(
        default="webhook",
        description="webhook: the event as JSON; alertmanager: Alertmanager's API v2.",
    )
    firing: bool = Field(description="Whether the last version judged was over the threshold.")
    crossings: int = Field(description="Times it crossed (one event each).")
    judged_version: int | None = Field(
        default=None, description="The last version judged (null: none yet)."
    )


class AlertCreated(AlertOut):
    secret: str = Field(
        description="The Standard Webhooks secret (`whsec_...`) that signs every delivery "
        "(`webhook-signature`), shown only in this answer: store it now."
    )


class AlertSecret(Result):
    """An alert's new secret, after a rotation."""

    shows_nulls = True

    id: str
    secret: str = Field(
        description="The new Standard Webhooks secret (`whsec_...`), shown only in this answer."
    )
    previous_valid_until: float = Field(
        description="Until then (Unix seconds) the previous secret signs every delivery too "
        "(`webhook-signature` carries both), so that receivers can switch at their own pace."
    )


class AlertList(Result):
    shows_nulls = True
    name: str
    alerts: list[AlertOut]


class DeliveryOut(Result):
    status: Literal["pending", "delivered", "failed"] = Field(
        description="pending: in the outbox, not yet acknowledged (being attempted or retried); "
        "delivered: a 2xx came back; failed: given up after SIFT_ALERT_ATTEMPTS attempts, a "
        "destination the settings forbid, or its alert deleted (POST "
        ".../alerts/events/{id}/redeliver sends it again)."
    )
    attempts: int
    outcome: str | None = Field(
        default=None,
        description="How the last attempt went, in Sift's words (never the receiver's): "
        "delivered, status, timeout, refused, reset, unreachable, dns, tls, not-http, "
        "forbidden, dropped.",
    )
    last_status: int | None = Field(default=None, description="The last HTTP status received.")
    last_error: str | None = Field(default=None, description="Why the last attempt failed.")
    updated_at: float | None = None


class AlertEventOut(Result):
    """One crossing of an alert: what was POSTed to its webhook, and how that went."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(description="<alert id>-<crossing>: the webhook-id header of the delivery.")
    type: str
    alert: str
    crossing: int
    selector: str
    method: str
    h: int
    threshold: float
    version: int
    baseline_version: int
    drift: float
    rbo: float
    jaccard: float
    stability: float | None = None
    entered: list[FeatureRef]
    left: list[FeatureRef]
    at: float
    delivery: DeliveryOut | None = None


class AlertEventList(Result):
    name: str
    events: list[AlertEventOut]


class Redelivery(Result):
    """An event put back in its selector's outbox."""

    shows_nulls = True

    id: str
    queued: bool = Field(
        description="true: put back in the outbox, due now, its attempts counted afresh; "
        "false: it was in the outbox already (being attempted or retried)."
    )
