"""What every benchmark of run.py shares: the sizes of each mode (``Sizes``: ``FULL``, ``QUICK``,
``SMOKE``), the ``Context`` a benchmark is given (sizes, where the service comes from, the
report so far), the seed and media types, and the data helpers (``TermRows``, ``npz``,
``pct``)."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from live import Latencies, Stack, stack
from report import Report

REPO_ROOT = Path(__file__).resolve().parents[2]
SEED = 20_250_114
NPZ = "application/x-npz"
NPY = "application/x-npy"


@dataclass(frozen=True)
class Sizes:
    """How much each benchmark does in one mode (``full``, ``quick`` or ``smoke``)."""

    mode: str
    #: fsds selectors of the big-state stream: (m, chunks); the first one is the long stream.
    big_fsds: tuple[tuple[int, int], ...]
    big_chunk_rows: int
    #: Terms drawn per row of the sparse chunks (duplicates add up: ~0.9 of it are stored).
    big_terms: int
    fsds_peer_chunks: int
    slow_peer_chunks: int
    idle_top_calls: int
    ofs_samples: int
    ofs_columns: int
    ofs_per_request: int
    naive_columns: int
    clients: int
    chunks_per_client: int
    many_features: int
    basehock_rows: int
    basehock_chunk_rows: int
    rounds: int
    ocfs_sets: tuple[str, ...]
    ocfs_chunks: int | None
    omvfs_chunks: int
    omvfs_params: dict[str, Any]
    takeover_features: int
    takeover_prior_chunks: int
    memory_rows: int
    memory_every: int
    memory_chunk_rows: int
    variance_rows: int
    variance_features: int
    #: bench_stability: rows streamed through each row method, features, rows per chunk.
    stability_rows: int
    stability_features: int
    stability_chunk_rows: int
    #: ... and FSDS on a wide stream (features, chunks of 500 rows): its decompositions grow
    #: with the features, where the subsamples' scores cost most.
    stability_wide_features: int
    stability_wide_chunks: int
    #: bench_request_path: rounds and seconds of each wrk run; bench_idle: selectors, seconds.
    path_rounds: int
    path_seconds: float
    idle_selectors: int
    idle_seconds: float
    #: bench_streams: features, timed chunks and rows per chunk.
    stream_features: int
    stream_chunks: int
    stream_chunk_rows: int
    #: bench_big_chunk: rows and features of each dense chunk, timed chunks per method.
    big_chunk_dense_rows: int = 500
    big_chunk_features: int = 1024
    big_chunk_count: int = 20
    #: bench_sources: entries in the Redis stream; one-row POSTs beside them.
    source_rows: int = 100_000
    source_posts: int = 3000


FULL = Sizes(
    mode="full",
    big_fsds=((20_000, 240), (50_000, 60)),
    big_chunk_rows=500,
    big_terms=74,
    fsds_peer_chunks=30,
    slow_peer_chunks=3,
    idle_top_calls=50,
    ofs_samples=1000,
    ofs_columns=1000,
    ofs_per_request=32,
    naive_columns=30,
    clients=8,
    chunks_per_client=250,
    many_features=1000,
    basehock_rows=12_000,
    basehock_chunk_rows=1000,
    rounds=3,
    ocfs_sets=("PCMAC", "COIL20"),
    ocfs_chunks=None,
    omvfs_chunks=10,
    omvfs_params={},
    takeover_features=20_000,
    takeover_prior_chunks=30,
    memory_rows=1_000_000,
    memory_every=100_000,
    memory_chunk_rows=1000,
    variance_rows=20_000,
    variance_features=100,
    stability_rows=20_000,
    stability_features=1000,
    stability_chunk_rows=1000,
    stability_wide_features=20_000,
    stability_wide_chunks=60,
    path_rounds=3,
    path_seconds=10.0,
    idle_selectors=100_000,
    idle_seconds=20.0,
    stream_features=2000,
    stream_chunks=200,
    stream_chunk_rows=500,
)
QUICK = replace(
    FULL,
    mode="quick",
    big_fsds=((20_000, 60), (50_000, 15)),
    fsds_peer_chunks=10,
    slow_peer_chunks=2,
    idle_top_calls=30,
    naive_columns=15,
    basehock_rows=6000,
    rounds=1,
    ocfs_sets=("PCMAC",),
    takeover_prior_chunks=10,
    variance_rows=10_000,
    stability_rows=6000,
    stability_wide_chunks=20,
    path_rounds=1,
    path_seconds=5.0,
    idle_selectors=10_000,
    idle_seconds=10.0,
    stream_chunks=60,
    source_rows=30_000,
    source_posts=1500,
)
SMOKE = replace(
    QUICK,
    mode="smoke",
    big_fsds=((2000, 8),),
    big_chunk_rows=100,
    big_terms=20,
    fsds_peer_chunks=2,
    slow_peer_chunks=1,
    idle_top_calls=5,
    ofs_samples=100,
    ofs_columns=64,
    naive_columns=4,
    chunks_per_client=3,
    many_features=100,
    basehock_rows=400,
    basehock_chunk_rows=100,
    ocfs_chunks=2,
    omvfs_chunks=1,
    omvfs_params={"max_iter": 3},
    takeover_features=2000,
    takeover_prior_chunks=2,
    memory_rows=6000,
    memory_every=2000,
    memory_chunk_rows=500,
    variance_rows=1000,
    variance_features=20,
    stability_rows=400,
    stability_features=20,
    stability_chunk_rows=100,
    stability_wide_features=200,
    stability_wide_chunks=3,
    path_seconds=1.0,
    idle_selectors=200,
    idle_seconds=1.0,
    stream_features=200,
    stream_chunks=3,
    stream_chunk_rows=100,
    big_chunk_dense_rows=50,
    big_chunk_features=64,
    big_chunk_count=2,
    source_rows=2000,
    source_posts=200,
)


@dataclass
class Context:
    """What every benchmark gets: sizes, where the service comes from, the report so far."""

    sizes: Sizes
    service_root: Path
    service_env: dict[str, str]
    report: Report
    previous_report: str
    #: PING latencies of every benchmark whose service held a big state, by label.
    big_state_pings: dict[str, Latencies] = field(default_factory=dict)
    #: Selectors that stopped applying chunks, by label: why.
    stalled: dict[str, str] = field(default_factory=dict)

    @contextlib.contextmanager
    def stack(self, **env: str) -> Iterator[Stack]:
        """A stack on the run's settings, and ``env``'s ``SIFT_*`` variables besides."""
        with stack(self.service_root, {**self.service_env, **env}) as running:
            yield running


# -- data ---------------------------------------------------------------------------------


class TermRows:
    """Sparse rows shaped like term counts: each row draws ``terms`` features from a Zipf-like
    popularity over ``m`` features (seeded), repeated draws adding up."""

    def __init__(self, m: int, terms: int, seed: int) -> None:
        self.rng = np.random.default_rng([seed, m])
        popularity = 1.0 / (1.0 + self.rng.permutation(m))
        self.p = popularity / popularity.sum()
        self.m = m
        self.terms = terms

    def chunk(self, rows: int) -> sp.csr_matrix:
        columns = self.rng.choice(self.m, size=rows * self.terms, p=self.p)
        matrix = sp.csr_matrix(
            (np.ones(columns.size), (np.repeat(np.arange(rows), self.terms), columns)),
            shape=(rows, self.m),
        )
        matrix.sum_duplicates()
        return matrix


def npz(matrix: sp.csr_matrix) -> bytes:
    """``scipy.sparse.save_npz`` without compression: the bytes a producer would send."""
    buffer = io.BytesIO()
    sp.save_npz(buffer, matrix, compressed=False)
    return buffer.getvalue()


def pct(value: float) -> str:
    return f"{value:.0%}"
