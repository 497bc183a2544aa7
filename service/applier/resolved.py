"""A selector's parameters as its method takes them: resolved once, not per call.

A selector's params are stored resolved (``MethodParams.as_params``, the JSON its answers echo)
and never change for an incarnation. Every call of its method takes them as the method's typed
``MethodParams``, resolved for the selector's size, so they are resolved here, once per
incarnation (and again only if the stored params differ, which no incarnation's do), and kept
in a ``service.cache.LRU`` beside the registry's cached descriptions.

Worker threads (updates, replays, reads decoded off the event loop) ask as the event loop does,
so the cache is guarded by a lock.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from service.algorithms import get_method
from service.algorithms.params import MethodParams
from service.cache import LRU
from service.store.records import SelectorMeta

__all__ = ["resolved_params"]

#: Selectors whose resolved params are kept (a few hundred bytes each).
RESOLVED_CACHE_SIZE = 4096


@dataclass(frozen=True)
class _Resolved:
    method: str
    size: int
    stored: dict[str, Any]
    params: MethodParams


_cache: LRU[tuple[str, str], _Resolved] = LRU(RESOLVED_CACHE_SIZE)
_lock = threading.Lock()


def resolved_params(meta: SelectorMeta) -> Any:
    """``meta``'s stored params as its method's ``MethodParams`` (resolved as stored, for
    ``meta.size``). Typed ``Any`` as ``AnyMethod``'s params are: each method takes its own.

    Kept per (name, incarnation); an entry is used only for the same method, size and stored
    params, so a name created again (or a selector created before incarnations were recorded)
    never gets another's."""
    key = (meta.name, meta.incarnation)
    with _lock:
        known = _cache.get(key)
    if (
        known is not None
        and known.method == meta.method
        and known.size == meta.size
        and (known.stored is meta.params or known.stored == meta.params)
    ):
        return known.params
    params = get_method(meta.method).resolve_params(meta.params, meta.size, stored=True)
    with _lock:
        _cache.put(key, _Resolved(meta.method, meta.size, meta.params, params))
    return params
