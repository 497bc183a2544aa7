"""The client's exceptions: one tree, each error carrying what the service said.

The service answers every refusal as RFC 9457 ``application/problem+json`` (``type``,
``title``, ``status``, ``detail``, ``instance`` and sometimes more, such as a rejected chunk's
``log_id``). ``ProblemError`` keeps all of it; its subclasses follow the HTTP status so that
callers catch what they can act on (``NotFoundError``, ``ConflictError``, ...), and
``InvalidInputError.kind`` names the rule a 422 broke (``invalid-input``, ``inconsistent``,
``selector-mismatch``, ...). ``TransportError`` is raised when the service could not be reached
within the retry budget (``ServiceUnreachableError`` when nothing answered at all),
``NotSiftError`` when what answers at the URL is not a Sift service, and ``InvalidURLError``
for a URL the client cannot use.

This tree is the client's own: the client never imports the server's modules.
"""

from __future__ import annotations

from typing import Any

#: The prefix of every problem ``type`` Sift writes (``urn:sift:problem:<kind>``).
PROBLEM_TYPE_PREFIX = "urn:sift:problem:"


class SiftClientError(Exception):
    """Base of every error the client raises. Every one pickles (``__reduce__``): errors cross
    process boundaries, e.g. from scikit-learn's parallel workers back to the search."""


class TransportError(SiftClientError):
    """The service could not be reached (or kept failing) until the retry budget ran out."""

    def __init__(self, message: str, attempts: int) -> None:
        super().__init__(message)
        self.attempts = attempts

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.attempts))


class ServiceUnreachableError(TransportError):
    """Nothing answered at the service's URL (connection refused, unknown host, connect timed
    out) until the retry budget ran out: the service is down, or the URL is not its."""


class NotSiftError(SiftClientError):
    """Something answered at the URL, but not a Sift service (an answer neither Sift's JSON nor
    its problem+json: a web server's HTML page, another API); the message says what came."""


class InvalidURLError(SiftClientError, ValueError):
    """A service URL the client cannot use (another scheme, no host, a path of the API)."""


class ProblemError(SiftClientError):
    """The service refused a request; ``problem`` is its problem+json body."""

    def __init__(self, status: int, problem: dict[str, Any], method: str, url: str) -> None:
        self.status = status
        self.problem = problem
        self.method = method
        self.url = url
        said = self.detail if self.detail == self.title else f"{self.title}: {self.detail}"
        super().__init__(f"{status} {said} ({method} {url})")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.status, self.problem, self.method, self.url))

    @property
    def title(self) -> str:
        return str(self.problem.get("title", ""))

    @property
    def detail(self) -> str:
        return str(self.problem.get("detail", ""))

    @property
    def type(self) -> str:
        return str(self.problem.get("type", ""))

    @property
    def kind(self) -> str:
        """The problem type without its URN prefix: ``selector-mismatch``, ``not-found``, ..."""
        return self.type.removeprefix(PROBLEM_TYPE_PREFIX)


class BadRequestError(ProblemError):
    """400: the body could not be parsed at all."""


class AuthenticationError(ProblemError):
    """401: no API key, or one the service does not know (or revoked)."""


class PermissionDeniedError(ProblemError):
    """403: the API key lacks the scope or the name prefix the request needs."""


class NotFoundError(ProblemError):
    """404: no such selector (or one this key may not see), log id or API key."""


class ConflictError(ProblemError):
    """409: the name exists, or the answer needs more data than the selector has yet."""


class PayloadTooLargeError(ProblemError):
    """413: a body over the service's limit (send smaller chunks)."""


class UnsupportedMediaTypeError(ProblemError):
    """415: the body's Content-Type is not one the route takes."""


class NotAcceptableError(ProblemError):
    """406: the route cannot answer in the media type asked for."""


class InvalidInputError(ProblemError):
    """422: the request parses but breaks a rule; ``kind`` says which kind of rule."""


class ChunkRejectedError(InvalidInputError):
    """422 ``chunk-rejected``: the chunk was appended but could not be applied (set aside)."""

    @property
    def log_id(self) -> str | None:
        value = self.problem.get("log_id")
        return None if value is None else str(value)


class UnavailableError(ProblemError):
    """503: the service's Redis is unavailable; raised once retrying gave up."""


class ServerError(ProblemError):
    """A 5xx other than 503: the detail carries an ``error_id`` the server log has too."""


_BY_STATUS: dict[int, type[ProblemError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    406: NotAcceptableError,
    409: ConflictError,
    413: PayloadTooLargeError,
    415: UnsupportedMediaTypeError,
    422: InvalidInputError,
    503: UnavailableError,
}


def problem_error(status: int, problem: dict[str, Any], method: str, url: str) -> ProblemError:
    """The exception for a refusal: by status, and ``ChunkRejectedError`` by problem type."""
    if problem.get("type") == PROBLEM_TYPE_PREFIX + "chunk-rejected":
        return ChunkRejectedError(status, problem, method, url)
    cls = _BY_STATUS.get(status, ServerError if status >= 500 else ProblemError)
    return cls(status, problem, method, url)
