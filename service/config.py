"""Configuration: one ``Settings`` object read from ``SIFT_*`` environment variables."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


def _default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "share"
    )
    return Path(base) / "sift"


class Settings(BaseSettings):
    """Every knob of the service. Environment variables win over defaults (prefix ``SIFT_``)."""

    model_config = SettingsConfigDict(env_prefix="SIFT_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = 8000

    redis_url: str | None = Field(
        default=None,
        description="External Redis to use. Unset: the service starts and manages its own.",
    )
    data_dir: Path = Field(
        default_factory=_default_data_dir,
        description="Where the embedded Redis keeps its append-only file.",
    )
    redis_server: str | None = Field(
        default=None, description="Path of the redis-server binary for the embedded Redis."
    )
    redis_appendfsync: str = Field(
        default="always",
        description="fsync policy of the embedded Redis: 'always' makes every acknowledged "
        "chunk survive a power loss; 'everysec' is faster and risks the last second.",
    )
    key_prefix: str = "sift"

    max_body_bytes: int = Field(default=256 * 1024 * 1024, ge=1)
    #: How long a POST waits for its chunk to be applied before answering 202 instead.
    apply_wait_seconds: float = Field(default=60.0, ge=0)
    #: Lease of the applier of one selector; renewed while it computes.
    lease_ms: int = Field(default=30_000, ge=100)
    #: At most this many log entries are coalesced into one update.
    max_coalesce_entries: int = Field(default=64, ge=1)
    #: ... and at most this many rows (keeps one update's memory bounded).
    max_coalesce_rows: int = Field(default=20_000, ge=1)
    #: Background sweep for entries nobody is applying (wait=false posts, crashed appliers).
    sweep_interval_seconds: float = Field(default=1.0, gt=0)
    idempotency_ttl_seconds: int = Field(default=24 * 3600, ge=1)

    #: If set, every /v1 request except the probes needs ``Authorization: Bearer <token>``.
    api_token: str | None = None
