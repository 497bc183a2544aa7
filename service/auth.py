"""Who is calling and what they may do: API keys with scopes and an optional name prefix.

* ``SIFT_API_TOKEN`` is the bootstrap admin key; with it unset, authentication is off and every
  caller may do everything (the CLI refuses that on a non-loopback address unless told to).
* Keys created at ``POST /v1/keys`` carry scopes: ``read`` (GET routes), ``write`` (read plus
  chunks, features, merge, transform and cluster), ``admin`` (everything, including creating and
  deleting selectors and keys, and reading metrics), ``metrics`` (``GET /metrics`` alone, for a
  scraper). A key with a prefix sees only selectors whose names start with it: others answer
  404 to it, as if they did not exist; it never reads ``/metrics``, which names every selector.

Routes declare the scope they need with :func:`requires`; ``service.api.guard`` checks it
before anything else of the request is read.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from service.errors import Forbidden, Unauthorized
from service.store.api_keys import SCOPES, ApiKeyStore, split_key

F = TypeVar("F", bound=Callable[..., object])

#: What each scope includes: read < write < admin, and admin includes metrics.
_GRANTS = {
    "read": frozenset({"read"}),
    "write": frozenset({"read", "write"}),
    "admin": frozenset(SCOPES),
    "metrics": frozenset({"metrics"}),
}
#: The attribute :func:`requires` sets on a route's endpoint.
SCOPE_ATTRIBUTE = "sift_required_scope"
#: Routes anyone may call (probes).
PUBLIC = "public"


def requires(scope: str) -> Callable[[F], F]:
    """Declare the scope a route needs (``read``, ``write``, ``admin`` or ``public``)."""
    if scope not in (*SCOPES, PUBLIC):
        raise ValueError(f"unknown scope {scope!r}")

    def mark(endpoint: F) -> F:
        setattr(endpoint, SCOPE_ATTRIBUTE, scope)
        return endpoint

    return mark


def granted(scopes: tuple[str, ...] | list[str]) -> frozenset[str]:
    """Every scope that ``scopes`` include."""
    out: frozenset[str] = frozenset()
    for scope in scopes:
        out |= _GRANTS[scope]
    return out


@dataclass(frozen=True)
class Principal:
    """The caller as authenticated: its scopes, and the prefix of the names it may touch."""

    #: The API key's id; None for the bootstrap token or when authentication is off.
    key_id: str | None
    scopes: frozenset[str]
    prefix: str = ""
    #: The tenant its key belongs to (``ApiKey.tenant``; "" for the root).
    tenant: str = ""

    def require(self, scope: str) -> None:
        """403 unless this caller holds ``scope``."""
        if scope != PUBLIC and scope not in self.scopes:
            held = ", ".join(s for s in SCOPES if s in self.scopes) or "none"
            raise Forbidden(f"this request needs scope '{scope}'; the API key has {held}")

    def sees(self, name: str) -> bool:
        """Whether the selector ``name`` exists for this caller at all."""
        return name.startswith(self.prefix)

    def require_metrics(self) -> None:
        """403 unless this caller may read ``/metrics``: scope ``metrics`` (or ``admin``) and
        no name prefix (the metrics name every selector)."""
        self.require("metrics")
        if self.prefix:
            raise Forbidden(
                f"/metrics names every selector; a key limited to the prefix '{self.prefix}' "
                "may not read it"
            )


#: Every caller when authentication is off, and the bootstrap token when it is on.
ADMIN = Principal(key_id=None, scopes=granted(["admin"]))


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, else None."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def same_secret(given: str, expected: str) -> bool:
    """Constant-time equality of two secrets, whatever characters they hold."""
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), expected.encode("utf-8"))


class Authenticator:
    """Turns the Authorization header into a :class:`Principal` (or a 401)."""

    def __init__(self, bootstrap_token: str | None, keys: ApiKeyStore) -> None:
        self.bootstrap_token = bootstrap_token or None
        self.keys = keys

    @property
    def enabled(self) -> bool:
        return self.bootstrap_token is not None

    async def authenticate(self, authorization: str | None) -> Principal:
        if self.bootstrap_token is None:
            return ADMIN
        token = bearer_token(authorization)
        if token is None:
            raise Unauthorized(
                "expected header 'Authorization: Bearer <key>' with the API token or an API key"
            )
        if same_secret(token, self.bootstrap_token):
            return ADMIN
        parts = split_key(token)
        record = await self.keys.get(parts[0]) if parts else None
        if parts is None or record is None or not record.matches(parts[1]):
            raise Unauthorized("the bearer token is not a valid API key (unknown or revoked)")
        return Principal(
            key_id=record.id,
            scopes=granted(record.scopes),
            prefix=record.prefix,
            tenant=record.tenant if record.prefix else "",
        )
