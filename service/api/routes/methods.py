"""``GET /v1/methods``: the methods this service runs, as a client discovers them (what a chunk
of each holds and where it goes, what it offers, its parameters with their defaults, its paper).
Clients read this instead of guessing a selector's kind from the fields of its answers."""

from __future__ import annotations

from functools import cache

from fastapi import APIRouter
from starlette.responses import Response

from service.algorithms import METHODS
from service.algorithms.base import AnyMethod, capabilities
from service.api.deps import result_response
from service.api.guard import GuardedRoute
from service.api.request_bodies import documented_params
from service.api.schemas import PROBLEM_RESPONSES
from service.auth import requires
from service.selectors.results import MethodList, MethodOut
from service.wire.kinds import chunk_format

router = APIRouter(prefix="/v1/methods", tags=["methods"], route_class=GuardedRoute)


def method_list() -> MethodList:
    """Every registered method, described once per set of methods registered (the registry
    does not change while serving; the tests register a method of their own for a while)."""
    return _described(tuple(METHODS.items()))


@cache
def _described(methods: tuple[tuple[str, AnyMethod], ...]) -> MethodList:
    described = []
    for name, method in methods:
        kind = chunk_format(method.chunk_kind)
        schema, example_params = documented_params(method, kind)
        example = {"name": f"my-{name}", "method": name, **kind.example()}
        if example_params:
            example["params"] = example_params
        described.append(
            MethodOut(
                name=name,
                paper=method.paper,
                chunk_kind=kind.name,
                route=kind.route,
                counts=kind.seen_field,
                shape=[
                    field
                    for field in kind.create_schema()["properties"]
                    if field != "feature_names"
                ],
                capabilities=capabilities(method),
                coalesces=method.coalesces,
                chunking_invariant=method.chunking_invariant,
                params_schema=schema,
                example=example,
            )
        )
    return MethodList(methods=described)


@router.get("", responses={200: {"model": MethodList}, **PROBLEM_RESPONSES})
@requires("read")
async def list_methods() -> Response:
    """Every method: chunk kind and route, capabilities, parameters with defaults, paper."""
    return result_response(method_list())
