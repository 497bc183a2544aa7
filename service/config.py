"""Configuration: one ``Settings`` object read from ``SIFT_*`` environment variables."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


def default_update_threads(blas_threads: int) -> int:
    """``update_threads``' default: the cores this process may use over ``blas_threads``."""
    affinity = getattr(os, "sched_getaffinity", None)
    cores = len(affinity(0)) if affinity is not None else os.cpu_count() or 1
    return max(1, cores // blas_threads)


def _default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "share"
    )
    return Path(base) / "sift"


class Settings(BaseSettings):
    """Every knob of the service. Environment variables win over defaults (prefix ``SIFT_``)."""

    model_config = SettingsConfigDict(env_prefix="SIFT_", extra="ignore")

    host: str = Field(
        default="127.0.0.1",
        description="The interface `sift serve` binds (`--host`). Any address but a loopback one "
        "needs SIFT_API_TOKEN (or `--allow-unauthenticated`).",
    )
    port: int = Field(default=8000, description="The port `sift serve` listens on (`--port`).")
    header_timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        description=(
            "A connection that has not sent a whole request head this long after it opened "
            "(or after its previous answer) is closed: idle half-sent headers cannot hold "
            "the process's connections (`service.server`)."
        ),
    )
    max_connections: int = Field(
        default=4096,
        ge=1,
        description=(
            "Most connections one process holds open (lowered to what the process's "
            "open-file limit allows): at the bound a new one replaces the connection "
            "waiting longest for a request head, or is closed when all are serving "
            "requests. Each idle connection costs a few KiB and one file descriptor."
        ),
    )

    workers: int = Field(
        default=1,
        ge=1,
        le=64,
        description=(
            "Processes serving the port (`sift serve --workers`), each a replica on the "
            "same Redis (`service.workers`); 1: this process serves."
        ),
    )

    redis_url: str | None = Field(
        default=None,
        description="The Redis to use (`redis://`, `rediss://` with TLS; "
        "`redis+cluster://host:port` for any node of a Redis Cluster). Unset: the service "
        "starts, supervises and manages its own redis-server (the embedded default).",
    )
    redis_from_parent: bool = Field(
        default=False,
        description=(
            "Set by `sift serve --workers` for its workers: SIFT_REDIS_URL is the embedded "
            "Redis the parent process manages (reported as embedded)."
        ),
        # Not a knob for operators: the configuration page leaves it out.
        json_schema_extra={"internal": True},
    )
    data_dir: Path = Field(
        default_factory=_default_data_dir,
        description="Where the embedded Redis keeps its append-only file (default "
        "`$XDG_DATA_HOME/sift`, else `~/.local/share/sift`).",
    )
    redis_server: str | None = Field(
        default=None, description="Path of the redis-server binary for the embedded Redis."
    )
    redis_appendfsync: str = Field(
        default="always",
        description="fsync policy of the embedded Redis: 'always' makes every acknowledged "
        "chunk survive a power loss; 'everysec' is faster and risks the last second.",
    )
    redis_cluster: bool = Field(
        default=False,
        description="SIFT_REDIS_URL is a node of a Redis Cluster (as is any "
        "'redis+cluster://' URL): connect with the cluster client.",
    )
    redis_wait_replicas: int = Field(
        default=0,
        ge=0,
        description=(
            "After each write a client is told about (a chunk appended, a version "
            "committed, a checkpoint, a selector created), wait until this many replicas of "
            "the selector's master have it (Redis `WAIT`), and answer 503 if fewer do "
            "within `redis_wait_ms`: what is acknowledged then survives the loss of the "
            "master. 0: do not wait (Redis replicates asynchronously; a failover may lose "
            "the last writes)."
        ),
    )
    redis_wait_ms: int = Field(
        default=1000,
        ge=1,
        description=("How long each such write waits for its replicas (milliseconds)."),
    )
    key_prefix: str = Field(
        default="sift",
        description="The prefix of every Redis key of this service: several services may share "
        "one Redis under different prefixes.",
    )

    max_body_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=1,
        description=(
            "Bodies of chunks and feature columns (.npy, .npz); larger ones get 413. A "
            "request's peak memory is about 7 times its body (the body, its values, the log "
            "payload, Redis's copy, the update's working copies), so this bounds it "
            "(Limits)."
        ),
    )
    max_json_body_bytes: int = Field(
        default=8 * 1024 * 1024,
        ge=1,
        description=(
            "JSON bodies of every route: parsed into Python objects, a JSON chunk peaks at "
            "about 25 times its size, so bounded tighter (send large chunks as .npy or "
            ".npz)."
        ),
    )
    max_state_bytes: int = Field(
        default=1024**3,
        ge=1024,
        description=(
            "Most bytes one selector's state may take in Redis (creation and every commit "
            "check it; Redis itself refuses a single value over 512 MiB)."
        ),
    )
    apply_wait_seconds: float = Field(
        default=60.0,
        ge=0,
        description=(
            "How long a POST waits for its chunk to be applied before answering 202 instead."
        ),
    )
    lease_ms: int = Field(
        default=3_000,
        ge=100,
        description=(
            "Lease of the applier of one selector, renewed every third of it while it "
            "computes: short, so that a crashed applier's selector is taken over within "
            "seconds (the fencing token, not the lease, is what keeps a stalled applier "
            "from committing)."
        ),
    )
    checkpoint_replay_seconds: float = Field(
        default=4.0,
        gt=0,
        description=(
            "A checkpoint (the whole state, written in pieces; the log after it is what a "
            "takeover replays) is due once the updates since the last one took this many "
            "seconds of CPU (readers and other selectors holding the cores meanwhile do not "
            "make it due sooner; with more than one BLAS thread, seconds on the clock): "
            "bounds how long a takeover replays."
        ),
    )
    checkpoint_log_ratio: float = Field(
        default=1.0,
        gt=0,
        description=(
            "A checkpoint is also due once the log since the last one holds this many times "
            "the state's bytes: bounds the log's memory in Redis, and makes checkpoints cost "
            "at most that share of what producers send."
        ),
    )
    checkpoint_interval_seconds: float = Field(
        default=5.0,
        gt=0,
        description=(
            "A checkpoint is also due once a selector had no commit for this many seconds: "
            "at rest, its log is trimmed and a restart replays nothing."
        ),
    )
    hot_state_bytes: int = Field(
        default=1024**3,
        ge=0,
        description=(
            "States the appliers of this process keep decoded in memory between commits, in "
            "bytes of their arrays (least recently used go first; a state dropped is "
            "reloaded from its checkpoint and the log when its selector next gets a chunk)."
        ),
    )
    blas_threads: int = Field(
        default=1,
        ge=1,
        description=(
            "BLAS threads of each update (OpenBLAS, process-wide). Updates of different "
            "selectors and partitions already run in parallel, one worker thread each; "
            "OpenBLAS's threads spin while they wait, so two concurrent updates with a "
            "thread per core each slowed every update about 7x on 2 cores "
            '(BENCHMARKS.md, "Partitions"). Raise it for a service that applies one '
            "big selector at a time."
        ),
    )
    update_threads: int | None = Field(
        default=None,
        ge=1,
        description=(
            "Threads one update may use for its independent parts (a resampled method's "
            "whole stream and its subsamples, when their arrays are large), each with "
            "blas_threads BLAS threads. Default: the cores this process may use over "
            "blas_threads. Replays use as many, and the replay budget counts what the parts "
            "keep the cores busy (SIFT_CHECKPOINT_REPLAY_SECONDS)."
        ),
    )
    applier_linger_seconds: float = Field(
        default=2.0,
        ge=0,
        description=(
            "An applier that has applied everything keeps its lease this long, watching the "
            "log, before letting go: the next chunks of a busy selector are applied by the "
            "replica that holds its state in memory, instead of by another that would first "
            "rebuild it."
        ),
    )
    max_coalesce_entries: int = Field(
        default=64,
        ge=1,
        description="Most log entries coalesced into one update.",
    )
    max_coalesce_rows: int = Field(
        default=20_000,
        ge=1,
        description="Most rows coalesced into one update (bounds one update's memory).",
    )
    sweep_interval_seconds: float = Field(
        default=1.0,
        gt=0,
        description=(
            "Seconds between sweeps for entries nobody is applying (`wait=false` posts, "
            "crashed appliers)."
        ),
    )
    idempotency_ttl_seconds: int = Field(
        default=24 * 3600,
        ge=1,
        description=(
            "Seconds an Idempotency-Key is remembered (a retry after that is a new chunk)."
        ),
    )
    idempotency_max_records: int = Field(
        default=100_000,
        ge=1,
        description=(
            "Most Idempotency-Keys remembered per selector (the oldest are forgotten first): "
            "bounds the memory the records take, about 420 bytes each."
        ),
    )
    max_apply_attempts: int = Field(
        default=3,
        ge=1,
        description=(
            "Attempts at applying a log entry before it is moved aside as rejected, for "
            "failures that may not repeat (out of memory, the applying process died); a "
            "failure that repeats deterministically (the method refuses the chunk) rejects "
            "the entry at once."
        ),
    )
    max_archive_bytes: int | None = Field(
        default=None,
        ge=1024,
        description=(
            "Largest selector archive `POST /v1/selectors/import` reads (and an export may "
            "make); unset: `max_state_bytes` plus 64 MiB for the manifest, names and "
            "segments."
        ),
    )
    history_top: int = Field(
        default=100,
        ge=1,
        le=10_000,
        description=("Features (per view) the ranking history keeps of each committed version."),
    )
    history_versions: int = Field(
        default=200,
        ge=1,
        le=100_000,
        description="Versions the ranking history keeps per selector (older ones are trimmed).",
    )

    baseline_stability: float = Field(
        default=0.75,
        ge=-1,
        le=1,
        description="A version whose top 10 has at least this stability index (Nogueira et al. "
        "2018; `service.algorithms.stability`) is stable: the first stable version of a "
        "selector becomes the baseline its drift is measured against, unless one is pinned.",
    )
    tenant_max_selectors: int = Field(
        default=1000,
        ge=0,
        description="Most selectors (and partitioned selectors, each one) the names of one "
        "tenant may hold: a tenant is an API key's name prefix (`service.selectors.quotas`); "
        "`PUT /v1/quotas/{prefix}` sets another limit for one.",
    )
    tenant_max_state_bytes: int | None = Field(
        default=None,
        ge=0,
        description="Most state bytes one tenant's selectors may declare in all (what their "
        "methods, sizes, resamples and partitions take once they have learned); unset: "
        "`SIFT_TENANT_MEMORY_SHARE` of Redis's memory (`maxmemory`, else the machine's), over "
        "3 (a state is kept as its version and a checkpoint, with room for the log).",
    )
    tenant_memory_share: float = Field(
        default=0.25,
        gt=0,
        le=1,
        description="The share of Redis's memory one tenant's declared state may take when "
        "`SIFT_TENANT_MAX_STATE_BYTES` is unset.",
    )
    tenant_max_alerts: int = Field(
        default=200, ge=0, description="Most alerts one tenant's selectors may have in all."
    )
    tenant_max_streams: int = Field(
        default=100, ge=0, description="Most streams the names of one tenant may hold."
    )
    tenant_max_sources: int = Field(
        default=20,
        ge=0,
        description="Most sources the names of one tenant may hold (each is a consumer "
        "connected to its bus).",
    )

    source_max_pending: int = Field(
        default=8,
        ge=1,
        le=10_000,
        description="Most chunks a source may have appended that its target has not applied "
        "yet; over it, the source pauses until the target catches up (`service/sources`).",
    )

    source_private: str = Field(
        default="",
        description="Hosts (`*.example.com` for a domain), networks (CIDR, `10.0.0.0/8`) and "
        "Unix socket paths (`/run/redis.sock`, or a folder ending in `/`) that sources may "
        "connect to although their addresses are loopback, private, link-local or otherwise "
        "not global, comma-separated; empty: none, for every key. Sift's own Redis is refused "
        "whatever this says (`service.sources.reach`).",
    )

    alert_hosts: str = Field(
        default="",
        description="The only hosts alert webhooks may be sent to, comma-separated "
        "(`*.example.com`: the domain and its subdomains); empty: any host with a global "
        "address (`service.monitoring.destinations`).",
    )
    alert_private: str = Field(
        default="",
        description="Hosts (`*.example.com` for a domain) and networks (CIDR, `10.0.0.0/8`) "
        "that alert webhooks may reach although their addresses are loopback, private, "
        "link-local or otherwise not global, comma-separated; empty: none, for every key "
        "(`service.monitoring.destinations` says why).",
    )
    alert_attempts: int = Field(
        default=6, ge=1, le=20, description="Attempts at delivering one alert event."
    )
    alert_backoff_seconds: float = Field(
        default=1.0,
        ge=0,
        description="The pause before an alert event's second delivery attempt, doubling "
        "after each.",
    )
    alert_timeout_seconds: float = Field(
        default=5.0, gt=0, description="How long one delivery attempt of an alert may take."
    )

    api_token: str | None = Field(
        default=None,
        description=(
            "The bootstrap admin key. Set: every /v1 request except the probes needs "
            "`Authorization: Bearer <token or API key>`; API keys are created with it. "
            "Unset: no authentication (refused on non-loopback addresses unless explicitly "
            "allowed)."
        ),
    )
    metrics_token: str | None = Field(
        default=None,
        description=("If set, `GET /metrics` needs `Authorization: Bearer <metrics token>`."),
    )

    log_format: Literal["text", "json"] = Field(
        default="text",
        description=("`text` (human) or `json` (one object per line, for log collectors)."),
    )
    cors_origins: str = Field(
        default="",
        description=(
            "Origins allowed by CORS, comma-separated (`*` for any); empty: no CORS headers at all."
        ),
    )
    gzip_min_bytes: int = Field(
        default=0,
        ge=0,
        description=(
            "Compress answers of at least this many bytes when the client accepts gzip; 0: "
            "never. Off by default: the proxy in front usually compresses, and the CPU is "
            "the selectors'."
        ),
    )
    hot_path: bool = Field(
        default=True,
        description=(
            "Serve plain chunk POSTs and top GETs past FastAPI's routing "
            "(`service.api.hot_path`); off: every request through FastAPI (the answers are "
            "the same, only slower)."
        ),
    )
    metrics_refresh_seconds: float = Field(
        default=5.0,
        ge=0,
        description=(
            "The selector gauges of `/metrics` (pending entries, state bytes) are read from "
            "Redis at a scrape at most this often; scrapes in between answer the last "
            "reading."
        ),
    )

    @model_validator(mode="after")
    def _external_redis_for_cluster_and_replicas(self) -> Settings:
        """A cluster, and replicas to wait for, are external Redis deployments: the embedded
        Redis is one server without replicas."""
        if self.redis_url is None and self.redis_cluster:
            raise ValueError("SIFT_REDIS_CLUSTER needs SIFT_REDIS_URL (a node of the cluster)")
        if self.redis_url is None and self.redis_wait_replicas:
            raise ValueError(
                "SIFT_REDIS_WAIT_REPLICAS needs SIFT_REDIS_URL: the embedded Redis has no replicas"
            )
        return self

    @model_validator(mode="after")
    def _alert_destinations_parse(self) -> Settings:
        """SIFT_ALERT_PRIVATE and SIFT_SOURCE_PRIVATE name hosts, networks (and socket
        paths) only: refused at start, not at the first delivery or connection."""
        from service.monitoring.destinations import DestinationPolicy  # settings come first

        DestinationPolicy.of(self.alert_hosts, self.alert_private)
        DestinationPolicy.of("", self.source_private, setting="SIFT_SOURCE_PRIVATE", paths=True)
        return self

    @property
    def archive_limit(self) -> int:
        """The size limit of selector archives (``max_archive_bytes``, or its default)."""
        if self.max_archive_bytes is not None:
            return self.max_archive_bytes
        return self.max_state_bytes + 64 * 1024**2

    @property
    def parts_threads(self) -> int:
        """Threads one update may use for its parts (``update_threads``, or its default)."""
        if self.update_threads is not None:
            return self.update_threads
        return default_update_threads(self.blas_threads)

    @property
    def cors_origin_list(self) -> list[str]:
        return [origin.strip() for origin in self.cors_origins.split(",") if origin.strip()]
