"""Every operation of the Sift API as a plan: the requests to make and how to read their answers.

``Api`` builds ``Call``s (one request) and plans (generators of calls, for operations of several
requests: pushing in chunks, following pages, waiting for a pending chunk). It does no I/O:
``Client`` runs its plans with ``SyncDriver`` and ``AsyncClient`` with ``AsyncDriver``
(``siftstream._http``), so both clients share every request, retry and parse.

Writes carry an ``Idempotency-Key`` chosen here, once per logical chunk (``new_key``, or a
caller's key or key prefix): the drivers resend the same call, key included, on a retry.
"""

from siftstream._api import keys, monitoring, selectors, sources, streams
from siftstream._api.core import Api, new_key

#: The modules whose public functions are the API's operations (each takes the ``Api`` first).
OPERATION_MODULES = (keys, selectors, streams, sources, monitoring)

__all__ = ["OPERATION_MODULES", "Api", "new_key"]
