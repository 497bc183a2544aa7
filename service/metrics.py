"""Prometheus metrics of one service instance (its own registry: apps in one process stay apart)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

__all__ = ["CONTENT_TYPE_LATEST", "Metrics"]


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.chunks_accepted = Counter(
            "sift_chunks_accepted",
            "Chunks validated and appended to a selector log.",
            ["method"],
            registry=self.registry,
        )
        self.chunks_duplicate = Counter(
            "sift_chunks_duplicate",
            "Chunks answered from an earlier request with the same Idempotency-Key.",
            registry=self.registry,
        )
        self.chunks_rejected = Counter(
            "sift_chunks_rejected",
            "Chunks rejected before anything was written, by HTTP status.",
            ["status"],
            registry=self.registry,
        )
        self.rows_applied = Counter(
            "sift_rows_applied",
            "Rows folded into selector state.",
            ["method"],
            registry=self.registry,
        )
        self.apply_seconds = Histogram(
            "sift_apply_seconds",
            "Time of one coalesced update: load state, compute, commit.",
            ["method"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
            registry=self.registry,
        )
        self.entries_per_update = Histogram(
            "sift_entries_per_update",
            "Log entries coalesced into one update.",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128),
            registry=self.registry,
        )
        self.stale_commits = Counter(
            "sift_stale_commits",
            "Commits rejected because the applier lost its lease or fencing token.",
            registry=self.registry,
        )

    def observe_apply(self, method: str, entries: int, rows: int, seconds: float) -> None:
        self.rows_applied.labels(method).inc(rows)
        self.apply_seconds.labels(method).observe(seconds)
        self.entries_per_update.observe(entries)

    def render(self) -> bytes:
        return generate_latest(self.registry)
