"""Store test data: a selector's metadata and states that say which version they are."""

from __future__ import annotations

import hashlib

import numpy as np

from service.store.codec import encode_state
from service.store.records import (
    SelectorMeta,
)


def meta(name: str = "s1", feature_names: list[str] | None = None) -> SelectorMeta:
    return SelectorMeta(
        name=name,
        method="fsds",
        n_features=3,
        params={"ell": 2, "alpha": 0.5},
        feature_names=feature_names,
        created_at=1700000000.25,
        incarnation="c0ffee",
    )


def state_of(version: int) -> dict[str, bytes]:
    """A state whose every field says which version it belongs to."""
    return encode_state(
        {
            "a": np.full(4, version, dtype=np.int64),
            "b": np.full((2, 2), float(version)),
            "version": version,
        }
    )


def published_of(version: int) -> dict[str, bytes]:
    """What a version of ``state_of`` publishes for readers: a part of it."""
    return encode_state({"a": np.full(4, version, dtype=np.int64), "version": version})


def digest(payload: bytes) -> str:
    return hashlib.sha256(payload).hexdigest()
