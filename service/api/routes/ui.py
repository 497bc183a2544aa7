"""Pages for people: the live dashboard (``/ui``) and the API docs (``/docs``), with their assets,
and ``/``: a browser (a request whose ``Accept`` names ``text/html``) is sent on to the
dashboard; any other client is told, as JSON, where the API, its docs and the pages are.

Nothing these pages load comes from another origin, so they work offline and behind a firewall:

* the dashboard is one HTML file with its own script and stylesheet (``service/api/static/``,
  shipped as package data); it draws its charts as SVG itself and reads the ``/v1`` API like any
  other client;
* Swagger UI's files come from the ``swagger-ui-py`` package, which ships Swagger UI's
  distribution (and its licence) as package data: only the few files the page needs are served,
  from an allowlist. ReDoc is not offered (no package ships it without pulling in a framework).

Every route here is public: the pages hold no data. The dashboard sends the API key it is given
as ``Authorization: Bearer`` on its own API calls, and asks for one when the API answers 401.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_swagger_ui_html
from starlette.responses import FileResponse, JSONResponse, RedirectResponse, Response

from service.api.guard import GuardedRoute
from service.auth import PUBLIC, requires
from service.errors import NotFound
from service.wire.media import media_type_of

router = APIRouter(tags=["pages"], route_class=GuardedRoute, include_in_schema=False)

#: The dashboard's files (package data of ``service.api``).
STATIC_DIR = Path(__file__).resolve().parent.parent / "static"
DASHBOARD_PAGE = STATIC_DIR / "dashboard.html"
#: Assets of the dashboard, by the name the page asks for, with their media types.
DASHBOARD_ASSETS = {
    "dashboard.js": "text/javascript; charset=utf-8",
    "dashboard.css": "text/css; charset=utf-8",
}
#: The files of Swagger UI's distribution that ``/docs`` needs (and its licence).
SWAGGER_ASSETS = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "favicon-32x32.png": "image/png",
    "LICENSE": "text/plain; charset=utf-8",
}
DOCS_ASSETS_PATH = "/docs/assets"
#: Pages and files answer HEAD too, as a static file server would.
READ_METHODS = ["GET", "HEAD"]
#: The dashboard may load and call nothing but its own origin; no inline script or style, so
#: a feature name that slipped into the DOM as markup could still not run anything.
DASHBOARD_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
#: Revalidate on every load: the files change with the installed version, not their URL.
REVALIDATE = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}


def swagger_ui_dist() -> Path:
    """The folder of Swagger UI's distribution files inside the ``swagger-ui-py`` package.

    Found without importing the package (its Python side serves other frameworks).
    """
    spec = importlib.util.find_spec("swagger_ui")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise RuntimeError("the swagger-ui-py package is not installed: /docs needs its files")
    return Path(locations[0]) / "static"


def asset_response(folder: Path, name: str, allowed: dict[str, str]) -> Response:
    """``folder/name`` if ``name`` is on the allowlist (no path is ever built from a request)."""
    media_type = allowed.get(name)
    if media_type is None:
        raise NotFound(f"no asset named '{name}'")
    return FileResponse(folder / name, media_type=media_type, headers=REVALIDATE)


def wants_a_page(request: Request) -> bool:
    """Whether the request's ``Accept`` names ``text/html`` (with a quality above 0): a
    browser's does, an API client's (``*/*``, ``application/json``) does not."""
    for part in request.headers.get("accept", "").split(","):
        if media_type_of(part) != "text/html":
            continue
        quality = [p.strip() for p in part.split(";")[1:] if p.strip().startswith("q=")]
        try:
            return not quality or float(quality[0][2:]) > 0
        except ValueError:
            return True
    return False


@router.api_route("/", methods=READ_METHODS)
@requires(PUBLIC)
async def root(request: Request) -> Response:
    """A browser is sent to the dashboard (307 to ``/ui``); anything else gets where the API,
    its docs and the pages are (module docstring)."""
    base = request.scope.get("root_path", "")
    vary = {"Vary": "Accept", "Cache-Control": "no-cache"}
    if wants_a_page(request):
        return RedirectResponse(f"{base}/ui", status_code=307, headers=vary)
    app = request.app
    return JSONResponse(
        {
            "name": app.title,
            "version": app.version,
            "api": f"{base}/v1",
            "docs": f"{base}/docs",
            "openapi": f"{base}{app.openapi_url}",
            "ui": f"{base}/ui",
            "health": f"{base}/v1/healthz",
        },
        headers=vary,
    )


@router.api_route("/ui", methods=READ_METHODS)
@requires(PUBLIC)
async def dashboard() -> Response:
    """The live dashboard: selectors, the top features of one, and how their ranks moved."""
    return FileResponse(
        DASHBOARD_PAGE,
        media_type="text/html; charset=utf-8",
        headers={**REVALIDATE, "Content-Security-Policy": DASHBOARD_CSP},
    )


@router.api_route("/ui/assets/{asset}", methods=READ_METHODS)
@requires(PUBLIC)
async def dashboard_asset(asset: str) -> Response:
    return asset_response(STATIC_DIR, asset, DASHBOARD_ASSETS)


@router.api_route("/docs", methods=READ_METHODS)
@requires(PUBLIC)
async def swagger_ui(request: Request) -> Response:
    """Swagger UI over the live OpenAPI document, with its files served from here."""
    app = request.app
    root = request.scope.get("root_path", "")
    return get_swagger_ui_html(
        openapi_url=f"{root}{app.openapi_url}",
        title=f"{app.title} - API docs",
        swagger_js_url=f"{root}{DOCS_ASSETS_PATH}/swagger-ui-bundle.js",
        swagger_css_url=f"{root}{DOCS_ASSETS_PATH}/swagger-ui.css",
        swagger_favicon_url=f"{root}{DOCS_ASSETS_PATH}/favicon-32x32.png",
        swagger_ui_parameters=app.swagger_ui_parameters,
    )


@router.api_route(DOCS_ASSETS_PATH + "/{asset}", methods=READ_METHODS)
@requires(PUBLIC)
async def swagger_ui_asset(asset: str) -> Response:
    return asset_response(swagger_ui_dist(), asset, SWAGGER_ASSETS)
