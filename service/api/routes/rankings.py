"""Routes of rankings: the top h features, every feature's score, and the ranking history."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import Response

from service.algorithms.univariate import Correction
from service.api.deps import (
    SelectorName,
    get_selectors,
    npy_response,
    result_response,
    version_headers,
    wants_npy,
)
from service.api.guard import GuardedRoute
from service.api.schemas import NAME_PATTERN, PROBLEM_RESPONSES, at_most_setting
from service.auth import requires
from service.selectors import Selectors
from service.selectors.rankings import Significance
from service.selectors.results import HistoryOut, TopOut, WeightsOut

router = APIRouter(prefix="/v1/selectors", tags=["rankings"], route_class=GuardedRoute)
Service = Annotated[Selectors, Depends(get_selectors)]


@router.get("/{name}/top", responses={200: {"model": TopOut}, **PROBLEM_RESPONSES})
@requires("read")
async def top_features(
    name: SelectorName,
    service: Service,
    h: Annotated[int, Query(ge=1, description="How many features (capped at n_features).")] = 10,
    strategy: Annotated[
        Literal["score", "diverse"],
        Query(
            description="score: the h highest scores. diverse (fsds): the h features pivoted "
            "QR (IQRP) selects on the sketch, which together span the data."
        ),
    ] = "score",
    candidates: Annotated[
        int | None,
        Query(alias="l", ge=1, description="IQRP's candidate list length (default h)."),
    ] = None,
    view: Annotated[
        str | None,
        Query(pattern=NAME_PATTERN, description="Multi-view selectors: rank this view only."),
    ] = None,
    alpha: Annotated[
        float | None,
        Query(
            gt=0,
            le=1,
            description="Methods with p-values (anova, chi2): only the features a test at this "
            "level selects, the h best of them by score (no stability).",
        ),
    ] = None,
    correction: Annotated[
        Correction,
        Query(
            description="How alpha selects, as scikit-learn's selectors: none (SelectFpr: p < "
            "alpha), fdr (SelectFdr: Benjamini-Hochberg), fwe (SelectFwe: p < alpha / "
            "n_features)."
        ),
    ] = "none",
) -> Response:
    """The h best features of the committed state (rank, index, name, score; and the p-value
    for methods with p-values).

    For ``iqrp`` selectors (and ``strategy=diverse``) the answer is the exact pivoted-QR order
    with the pivots as scores and the pass account (passes, IO-passes, blocks read, flops).
    """
    test = None if alpha is None else Significance(alpha, correction)
    return result_response(await service.rankings.top(name, h, strategy, candidates, view, test))


@router.get(
    "/{name}/weights",
    responses={
        200: {
            "model": WeightsOut,
            "content": {"application/x-npy": {"schema": {"type": "string", "format": "binary"}}},
        },
        **PROBLEM_RESPONSES,
    },
)
@requires("read")
async def feature_weights(name: SelectorName, request: Request, service: Service) -> Response:
    """The score of every feature: JSON, or ``.npy`` with ``Accept: application/x-npy``."""
    npy = wants_npy(request)
    scores = await service.rankings.scores(name)
    headers = version_headers(scores.head.version, scores.counts.as_dict())
    if npy:
        return npy_response(scores.weights, headers)
    return result_response(scores.answer(), headers=headers)


@router.get("/{name}/history", responses={200: {"model": HistoryOut}, **PROBLEM_RESPONSES})
@requires("read")
async def ranking_history(
    name: SelectorName,
    service: Service,
    h: Annotated[
        int | None,
        Query(
            ge=1,
            description="Features per version: default 10, at most SIFT_HISTORY_TOP.",
            json_schema_extra=at_most_setting("history_top"),
        ),
    ] = None,
    limit: Annotated[
        int | None,
        Query(
            ge=1,
            description="Versions, newest first: default 20, at most SIFT_HISTORY_VERSIONS.",
            json_schema_extra=at_most_setting("history_versions"),
        ),
    ] = None,
) -> Response:
    """The top h features of the newest versions, newest first, with the rows (or features)
    seen and the time of each: how the ranking drifts. Recorded after every commit, best effort
    (per view for multi-view selectors); an imported selector starts with its import's version.
    """
    return result_response(await service.history.versions(name, h, limit))
