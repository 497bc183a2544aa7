"""Routes of the selector resource: create, list, describe, delete (``Selectors.lifecycle``),
and list or delete many at once (``service.selectors.listing``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import Response

from service.api.deps import (
    DEFAULT_PAGE,
    MAX_PAGE,
    SelectorName,
    get_principal,
    get_quotas,
    get_selectors,
    result_response,
)
from service.api.guard import GuardedRoute, read_json
from service.api.schemas import NAME_PATTERN, PROBLEM_RESPONSES
from service.auth import Principal, requires
from service.errors import Forbidden, NotFound
from service.selectors import Selectors, listing
from service.selectors.listing import SelectorFilter
from service.selectors.results import SelectorList, SelectorOut, SelectorsDeleted

router = APIRouter(prefix="/v1/selectors", tags=["selectors"], route_class=GuardedRoute)
Service = Annotated[Selectors, Depends(get_selectors)]
Caller = Annotated[Principal, Depends(get_principal)]


@router.post(
    "",
    status_code=201,
    responses={201: {"model": SelectorOut}, **PROBLEM_RESPONSES},
)
@requires("admin")
async def create_selector(request: Request, service: Service, caller: Caller) -> Response:
    """Create a selector; the answer echoes the resolved parameters (defaults filled in).

    The body depends on the method: ``n_features`` for row methods (fsds, ocfs, ioc,
    variance), ``n_samples`` for feature-column methods (ofs, iqrp), ``views`` for omvfs; or
    ``stream`` (and ``from``): attached to a stream, whose shape and names it takes and whose
    chunks it applies.
    """
    document = await read_json(request)
    name = document.get("name") if isinstance(document, dict) else None
    if isinstance(name, str) and not caller.sees(name):
        raise Forbidden(
            f"this API key may only create selectors whose names start with '{caller.prefix}'; "
            f"got '{name}'"
        )
    stream = document.get("stream") if isinstance(document, dict) else None
    if isinstance(stream, str) and not caller.sees(stream):
        raise NotFound(f"stream '{stream}' does not exist")
    quotas = get_quotas(request)
    tenancy = await quotas.tenancy(caller)
    async with quotas.locked(tenancy):
        created = await service.lifecycle.create(document, tenancy.admit)
    return result_response(created, 201, {"Location": f"/v1/selectors/{created.name}"})


#: A part of a name, as the filters take it (a prefix, or a part to search for).
NAME_PART = r"^[A-Za-z0-9._-]{0,128}$"
#: Selectors one ``DELETE /v1/selectors`` deletes at most (``limit``'s default and bound).
MAX_DELETED = 1000

Prefix = Annotated[
    str,
    Query(pattern=NAME_PART, description="Only the selectors whose names start with this."),
]
Temporary = Annotated[
    bool | None,
    Query(
        description="true: only temporary selectors (a job's, such as a scikit-learn fit's); "
        "false: none of them; absent: both."
    ),
]
After = Annotated[
    str | None,
    Query(
        pattern=NAME_PATTERN,
        description="Start after this name: the `next` of the previous page.",
    ),
]


@dataclass
class Listing:
    """The query of ``GET /v1/selectors``: a page (``limit`` after ``after``) of the
    selectors the filters take."""

    limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="At most this many selectors.")] = (
        DEFAULT_PAGE
    )
    after: After = None
    prefix: Prefix = ""
    q: Annotated[
        str,
        Query(
            pattern=NAME_PART,
            description="Only the selectors whose names contain this (ignoring case).",
        ),
    ] = ""
    method: Annotated[
        str | None, Query(max_length=64, description="Only the selectors of this method.")
    ] = None
    temporary: Temporary = None

    @property
    def chosen(self) -> SelectorFilter:
        return SelectorFilter(
            prefix=self.prefix, q=self.q, method=self.method, temporary=self.temporary
        )


@router.get("", responses={200: {"model": SelectorList}, **PROBLEM_RESPONSES})
@requires("read")
async def list_selectors(
    service: Service, caller: Caller, query: Annotated[Listing, Depends()]
) -> Response:
    """The selectors this API key may see (all of them without a name prefix), sorted by name,
    a page at a time: ``next`` is the ``after`` of the following page, null on the last.

    The filters apply on the server before paging. ``method`` and ``temporary`` read the
    descriptions: a page of them looks at 10,000 selectors at most, and may then hold fewer
    than ``limit`` (even none) with ``next`` set: follow ``next`` until it is null."""
    page = await listing.page(
        service.lifecycle, query.limit, query.after, caller.sees, query.chosen
    )
    return result_response(page)


@router.delete("", responses={200: {"model": SelectorsDeleted}, **PROBLEM_RESPONSES})
@requires("admin")
async def delete_selectors(
    service: Service,
    caller: Caller,
    prefix: Prefix = "",
    all_: Annotated[
        bool,
        Query(
            alias="all",
            description="Delete every selector this API key may see (without a prefix).",
        ),
    ] = False,
    temporary: Temporary = None,
    limit: Annotated[
        int, Query(ge=1, le=MAX_DELETED, description="Delete at most this many.")
    ] = MAX_DELETED,
    after: After = None,
) -> Response:
    """Delete the selectors whose names start with ``prefix`` (or, with ``all=true`` and no
    prefix, every one), among those this API key may see: a key limited to the prefix ``a-``
    deletes none of ``b-*``. An empty prefix without ``all=true`` is refused (422).

    At most ``limit`` per request, in name order, deleted side by side on the server; ``next``
    set means more may match: call again with ``after=next`` until it is null. A selector
    deleted meanwhile is skipped; one that could not be deleted is named in ``failed``."""
    chosen = SelectorFilter(prefix=prefix, temporary=temporary)
    deleted = await listing.delete_matching(
        service.lifecycle, limit, after, caller.sees, chosen, everything=all_
    )
    return result_response(deleted)


#: The query parameters of ``DELETE /v1/selectors``, stated as one object
#: (``state_deletion_rules``).
DELETION_PARAMETERS = ("prefix", "all", "temporary", "limit", "after")


def state_deletion_rules(operation: dict[str, Any]) -> None:
    """State in the OpenAPI operation of ``DELETE /v1/selectors`` (in place) the rule its
    parameters follow together: a ``prefix``, or ``all=true``, not both. OpenAPI states rules
    across query parameters on one object parameter (``style: form``, ``explode: true``: its
    properties are the query's parameters, as FastAPI reads them)."""
    given = {p["name"]: p for p in operation.get("parameters", [])}
    properties = {}
    for name in DELETION_PARAMETERS:
        parameter = given[name]
        properties[name] = {
            **_never_null(parameter["schema"]),
            "description": parameter["description"],
        }
    some_prefix = {"required": ["prefix"], "properties": {"prefix": {"minLength": 1}}}
    everything = {"required": ["all"], "properties": {"all": {"const": True}}}
    operation["parameters"] = [
        p for name, p in given.items() if name not in DELETION_PARAMETERS
    ] + [
        {
            "name": "selection",
            "in": "query",
            "style": "form",
            "explode": True,
            "required": True,
            "description": "Which selectors: those whose names start with `prefix`, or with "
            "`all=true` every one this API key may see; not both.",
            "schema": {
                "type": "object",
                "properties": properties,
                "anyOf": [some_prefix, everything],
                "not": {"allOf": [some_prefix, everything]},
            },
        }
    ]


def _never_null(schema: dict[str, Any]) -> dict[str, Any]:
    """An optional query parameter's schema without its ``null`` branch: a query has no
    null (the parameter is left out)."""
    branches = [b for b in schema.get("anyOf", ()) if b.get("type") != "null"]
    if len(branches) != 1:
        return schema
    return {**{k: v for k, v in schema.items() if k != "anyOf"}, **branches[0]}


@router.get("/{name}", responses={200: {"model": SelectorOut}, **PROBLEM_RESPONSES})
@requires("read")
async def describe_selector(name: SelectorName, service: Service) -> Response:
    """The selector, the scalars of its state, what its method shows of it, what is pending."""
    return result_response(await service.lifecycle.describe(name))


@router.delete("/{name}", status_code=204, responses=PROBLEM_RESPONSES)
@requires("admin")
async def delete_selector(name: SelectorName, service: Service) -> Response:
    await service.lifecycle.delete(name)
    return Response(status_code=204)


@router.post("/{name}/detach", responses={200: {"model": SelectorOut}, **PROBLEM_RESPONSES})
@requires("admin")
async def detach_selector(name: SelectorName, service: Service) -> Response:
    """Detach a selector from its stream: it keeps its state and version, applies what the
    stream had given it, then takes chunks directly; the stream keeps nothing more for it."""
    return result_response(await service.lifecycle.detach(name))
