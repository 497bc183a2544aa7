"""Where the client connects and as whom: the service's URL and the API key, read the same way
by ``Client``, ``AsyncClient``, ``SiftSelector`` and the ``sift`` command line.

* URL: the one given, else ``SIFT_URL``, else ``DEFAULT_URL``. Without a scheme
  (``127.0.0.1:8765``, ``localhost:8765``) it is ``http://``; a trailing ``/v1`` (or ``/v1/``)
  is dropped, since every request's path starts with it; a URL with more of the API's path
  (``.../v1/selectors``), a query, or a scheme other than http(s) is refused with
  ``InvalidURLError``. A path before ``/v1`` stays (a service behind a proxy under a prefix).
* API key: the one given, else ``SIFT_API_KEY``, else ``SIFT_API_TOKEN`` (the service's
  bootstrap admin token, which is what someone running it locally has). An empty string means
  none, whatever the environment says.
"""

from __future__ import annotations

import os
import re
from urllib.parse import urlsplit, urlunsplit

from siftstream.errors import InvalidURLError

DEFAULT_URL = "http://127.0.0.1:8000"
#: The environment variables read for the key, in order of precedence.
KEY_VARIABLES = ("SIFT_API_KEY", "SIFT_API_TOKEN")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def service_url(url: str | None = None) -> str:
    """The base URL of the service: ``url`` (else ``SIFT_URL``, else ``DEFAULT_URL``) with
    the rules of the module docstring applied."""
    given = url if url is not None else os.environ.get("SIFT_URL") or DEFAULT_URL
    text = given.strip()
    if not text:
        raise InvalidURLError("the service's URL is empty; give its base URL, e.g. " + DEFAULT_URL)
    if not _SCHEME.match(text):
        text = "http://" + text
    parts = urlsplit(text)
    if parts.scheme.lower() not in ("http", "https"):
        raise InvalidURLError(
            f"{given!r}: the service's URL must be http:// or https://; got {parts.scheme}://"
        )
    try:
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        port_ok = False
    if not parts.hostname or not port_ok:
        raise InvalidURLError(f"{given!r} has no host (and port) to reach the service at")
    if parts.query or parts.fragment:
        raise InvalidURLError(
            f"{given!r}: give the service's base URL, without a query or fragment"
        )
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    if "/v1/" in path + "/":
        raise InvalidURLError(
            f"{given!r} is a path of the API; give the service's base URL (e.g. "
            f"{urlunsplit((parts.scheme, parts.netloc, '', '', ''))}), the client adds /v1/..."
        )
    return urlunsplit((parts.scheme.lower(), parts.netloc, path, "", ""))


def api_key(given: str | None = None) -> str | None:
    """The API key to send: ``given`` (``""``: none), else the first of ``KEY_VARIABLES`` set
    to a non-empty value, else none."""
    if given is not None:
        return given or None
    for variable in KEY_VARIABLES:
        value = os.environ.get(variable)
        if value:
            return value
    return None
