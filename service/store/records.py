"""Plain records the store hands out: selector description, head, append outcome, log entry, lease.

They hold no behaviour beyond (de)serialisation; the store owns how they are kept in Redis.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from service.errors import CodecError


@dataclass(frozen=True)
class SelectorMeta:
    """What a selector is: method, size, resolved parameters. Immutable after ``create``."""

    name: str
    method: str
    n_features: int
    params: dict[str, Any]
    feature_names: list[str] | None
    created_at: float
    #: Method-specific shape information (e.g. views of a multi-view method).
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        """JSON of everything except ``feature_names`` (stored under their own key)."""
        return json.dumps(
            {
                "name": self.name,
                "method": self.method,
                "n_features": self.n_features,
                "params": self.params,
                "created_at": self.created_at,
                "extra": self.extra,
            },
            allow_nan=False,
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, raw: str | bytes, feature_names: list[str] | None) -> SelectorMeta:
        try:
            data = json.loads(raw)
            return cls(
                name=str(data["name"]),
                method=str(data["method"]),
                n_features=int(data["n_features"]),
                params=dict(data["params"]),
                feature_names=feature_names,
                created_at=float(data["created_at"]),
                extra=dict(data.get("extra") or {}),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise CodecError(f"stored selector description does not parse: {exc}") from exc


@dataclass(frozen=True)
class Head:
    """The committed position of a selector: which state is current and how far the log went."""

    #: 0 at creation, +1 per commit.
    version: int
    #: Last applied stream id; ``"0-0"`` before anything was applied.
    cursor: str
    rows_seen: int
    #: Redis key of the state hash of this version.
    state_key: str
    #: Seconds since the epoch (Redis server clock) of the last commit or the creation.
    updated_at: float


@dataclass(frozen=True)
class AppendOutcome:
    """Answer of ``append``: where the entry went and, for a repeated key, how far it got."""

    log_id: str
    #: True when the idempotency key was seen before (nothing new was appended).
    duplicate: bool
    #: The version that contains the entry, once it is applied (else None).
    applied_version: int | None
    #: ``rows_seen`` of that version (else None).
    rows_seen: int | None
    #: Stream position of the entry's first item (row or feature column), from 0.
    first: int = 0


@dataclass(frozen=True)
class LogEntry:
    """One appended chunk, as the applier reads it back."""

    log_id: str
    payload: bytes
    idempotency_key: str | None
    #: Rows the appender declared for this chunk (bounds coalescing without decoding).
    rows: int = 0
    #: Stream position of its first item (row or feature column), from 0.
    first: int = 0


@dataclass(frozen=True)
class Lease:
    """The right to apply a selector's log, as long as ``token`` is the current fencing token."""

    name: str
    #: Fencing token, strictly increasing per selector.
    token: int
    #: Random id of this holder (value of the lease key).
    holder: str
