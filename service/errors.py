"""The one exception tree of Sift, and how a detail shows what came (``shown``).

Every layer raises these; the API maps them to RFC 9457 ``application/problem+json`` answers in
one place (``service.api.problems``). ``detail`` always says what was expected and what came.
"""

from __future__ import annotations

from typing import Any

#: The type of a validation error whose input may hold credentials (a bus URL, a password):
#: its answer says what was expected and never repeats what came (``service.api.problems``).
HIDDEN_INPUT = "hidden_input"


class SiftError(Exception):
    """Base of every error Sift raises on purpose."""

    status: int = 500
    title: str = "Internal error"
    type_slug: str = "internal"

    def __init__(self, detail: str, **extra: object) -> None:
        super().__init__(detail)
        self.detail = detail
        self.extra = extra


class BadRequest(SiftError):
    """The request cannot be parsed at all (malformed JSON, broken .npy header, ...)."""

    status = 400
    title = "Malformed request"
    type_slug = "malformed-request"


class InvalidInput(SiftError):
    """The request parses but its content is not acceptable (shape, values, parameters)."""

    status = 422
    title = "Invalid input"
    type_slug = "invalid-input"


class InvalidParams(InvalidInput):
    """Hyperparameters of a method are out of range or inconsistent."""

    title = "Invalid parameters"
    type_slug = "invalid-params"


class Inconsistent(InvalidInput):
    """Fields that are each valid contradict each other (names as many as features, say).

    The OpenAPI schema states every rule it can; this type marks those it cannot, so a client
    (and the contract test) can tell the two apart.
    """

    title = "Inconsistent request"
    type_slug = "inconsistent"


class SelectorMismatch(InvalidInput):
    """A well-formed request that does not fit the selector it names: rows of another width,
    labels for an unlabelled method, a route its method does not offer."""

    title = "Request does not fit the selector"
    type_slug = "selector-mismatch"


class IdempotencyMismatch(InvalidInput):
    """An ``Idempotency-Key`` was reused with a different body."""

    title = "Idempotency key reused with another body"
    type_slug = "idempotency-mismatch"


class ChunkRejected(InvalidInput):
    """An appended chunk could not be applied and was moved aside (dead-lettered).

    Validation is meant to refuse every such chunk up front; this is the safety net for the
    rest, so that one poison entry never jams its selector.
    """

    title = "Chunk rejected"
    type_slug = "chunk-rejected"


class StateTooLarge(InvalidInput):
    """A selector's state would exceed ``SIFT_MAX_STATE_BYTES`` (or Redis's value limit)."""

    title = "State too large"
    type_slug = "state-too-large"


class DestinationNotAllowed(InvalidInput):
    """An alert's URL (or a source's bus) names a destination that can never be delivered to
    (connected to): one the operator's settings do not allow (an address that is not global, a
    host outside ``SIFT_ALERT_HOSTS``, Sift's own Redis), or one that is no address at all (a
    host that is no address nor host name, a port beyond 65535, a URL its client library
    cannot read). Rules of the deployment and of addresses, which no schema states."""

    title = "Destination not allowed"
    type_slug = "destination-not-allowed"


class Unauthorized(SiftError):
    status = 401
    title = "Unauthorized"
    type_slug = "unauthorized"


class Forbidden(SiftError):
    """The API key is valid but lacks the scope (or the name prefix) the request needs."""

    status = 403
    title = "Forbidden"
    type_slug = "forbidden"


class QuotaExceeded(Forbidden):
    """What a tenant (an API key prefix) asked for would take it over one of its quotas; the
    answer names the quota, its limit and what is used (``service.selectors.quotas``)."""

    title = "Quota exceeded"
    type_slug = "quota-exceeded"


class NotFound(SiftError):
    status = 404
    title = "Not found"
    type_slug = "not-found"


class Conflict(SiftError):
    status = 409
    title = "Conflict"
    type_slug = "conflict"


class CheckpointReplaced(Conflict):
    """A checkpoint was replaced by a newer one while it was read: read the head again."""


class StaleMeta(Conflict):
    """A write was checked against a description of the selector this process had cached, and
    the name has since been deleted and created again (another incarnation): describe it again
    and redo the write."""


class PayloadTooLarge(SiftError):
    status = 413
    title = "Payload too large"
    type_slug = "payload-too-large"


class UnsupportedMediaType(SiftError):
    status = 415
    title = "Unsupported media type"
    type_slug = "unsupported-media-type"


class NotAcceptable(SiftError):
    status = 406
    title = "Not acceptable"
    type_slug = "not-acceptable"


class Unavailable(SiftError):
    """Redis (or another dependency) cannot be reached; the client should retry.

    Only for conditions that pass by themselves: a permanent error is never a 503, or clients
    would retry it forever. The detail is shown to clients, so it never carries addresses or
    library messages (those go to the log).
    """

    status = 503
    title = "Service unavailable"
    type_slug = "unavailable"

    def __init__(self, detail: str, retry_after: int = 1, **extra: object) -> None:
        super().__init__(detail, **extra)
        self.retry_after = retry_after


class CodecError(SiftError):
    """Stored bytes do not decode (wrong magic, checksum, dtype): corruption, never user input."""

    title = "Stored data is corrupt"
    type_slug = "codec"


class StaleApplier(SiftError):
    """A commit was attempted by an applier whose lease or fencing token is no longer current."""

    status = 409
    title = "Stale applier"
    type_slug = "stale-applier"


class _Piece(str):
    """Text ``shown`` writes as it is (punctuation), as opposed to a value to render."""


def shown(value: Any, limit: int = 40) -> str:
    """How an error's detail shows a rejected value: compact JSON, at most ``limit`` characters
    (then cut with "..."), whatever its size, depth or type: never recursive, and it looks at
    no more of the value than it shows (a rejected row may be megabytes, nested 1000 deep)."""
    out: list[str] = []
    size = 0
    stack: list[Any] = [value]
    while stack and size <= limit:
        item = stack.pop()
        if isinstance(item, _Piece):
            text = str(item)
        elif isinstance(item, list | tuple | dict):
            pairs = list(item.items())[:limit] if isinstance(item, dict) else None
            items = pairs if pairs is not None else list(item[:limit])
            # JSON's compact form; a tuple (an array's shape) as Python writes it.
            close, text, comma = {dict: ("}", "{", ","), tuple: (")", "(", ", ")}.get(
                type(item), ("]", "[", ",")
            )
            if isinstance(item, tuple) and len(item) == 1:
                close = ",)"
            stack.append(_Piece(close))
            for index in range(len(items) - 1, -1, -1):
                if pairs is not None:
                    key, entry = pairs[index]
                    stack += [entry, _Piece(":"), str(key)]
                else:
                    stack.append(items[index])
                if index:
                    stack.append(_Piece(comma))
        elif item is None or isinstance(item, bool):
            text = {None: "null", True: "true", False: "false"}[item]
        elif isinstance(item, str):
            text = '"' + item[:limit].replace('"', '\\"') + '"'
        elif isinstance(item, int) and abs(item) >= 10**limit:
            text = f"an integer of more than {limit} digits"  # str() of 10^5000 digits is slow
        elif isinstance(item, int | float):
            text = repr(item)
        else:
            text = type(item).__name__
        if not isinstance(item, list | tuple | dict):
            out.append(text)
            size += len(text)
        else:
            out.append(text)
            size += 1
    rendered = "".join(out)
    if stack or len(rendered) > limit:
        return rendered[: max(limit - 3, 1)] + "..."
    return rendered
