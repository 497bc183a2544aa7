"""The Python client of Sift, its scikit-learn selector and the ``sift`` command line.

    from siftstream import Client, AsyncClient, SiftSelector

``Client`` / ``AsyncClient`` (``clients``) cover every endpoint with typed results
(``results``) and raise the exceptions of ``errors`` with the service's problem detail; they
need only httpx, numpy and scipy (pandas and pyarrow are optional: the ``client`` extra).
``SiftSelector`` (``sklearn``) is imported on first use, since it needs scikit-learn. The client
never imports the server's modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from siftstream._http import NO_RETRIES, RetryPolicy
from siftstream.clients import AsyncClient, Client
from siftstream.errors import (
    AuthenticationError,
    BadRequestError,
    ChunkRejectedError,
    ConflictError,
    InvalidInputError,
    InvalidURLError,
    NotAcceptableError,
    NotFoundError,
    NotSiftError,
    PayloadTooLargeError,
    PermissionDeniedError,
    ProblemError,
    ServerError,
    ServiceUnreachableError,
    SiftClientError,
    TransportError,
    UnavailableError,
    UnsupportedMediaTypeError,
)

if TYPE_CHECKING:
    from siftstream.sklearn import SiftSelector

__all__ = [
    "NO_RETRIES",
    "AsyncClient",
    "AuthenticationError",
    "BadRequestError",
    "ChunkRejectedError",
    "Client",
    "ConflictError",
    "InvalidInputError",
    "InvalidURLError",
    "NotAcceptableError",
    "NotFoundError",
    "NotSiftError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "ProblemError",
    "RetryPolicy",
    "ServerError",
    "ServiceUnreachableError",
    "SiftClientError",
    "SiftSelector",
    "TransportError",
    "UnavailableError",
    "UnsupportedMediaTypeError",
]


def __getattr__(name: str) -> Any:
    if name == "SiftSelector":  # scikit-learn is imported only by those who use it
        from siftstream.sklearn import SiftSelector

        return SiftSelector
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
