"""Streams from the Python client and the ``sift stream`` commands, against a real service:
one push of a DataFrame (or a file) reaches every attached selector, and their rankings come
back side by side."""

from __future__ import annotations

import asyncio
import csv
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from siftstream import AsyncClient, Client, ConflictError
from siftstream.results import StreamReceipt
from tests.support.client import sift
from tests.support.harness import ServiceProcess


def frame(rows: int = 120, seed: int = 0) -> pd.DataFrame:
    """Four features and a label: ``b`` separates the classes, ``c`` has the largest spread."""
    rng = np.random.default_rng(seed)
    labels = np.array(["x", "y", "z"])[np.arange(rows) % 3]
    data = rng.normal(size=(rows, 4)) * [1.0, 0.5, 6.0, 1.0]
    data[:, 1] += 4.0 * (np.arange(rows) % 3)
    out = pd.DataFrame(data, columns=["a", "b", "c", "d"])
    out["label"] = labels
    return out


def test_a_dataframe_pushed_once_reaches_every_selector(sift: Client, selector_name: str) -> None:
    stream = f"{selector_name}-s"
    data = frame()
    created = sift.create_stream(stream, data=data, y="label")
    assert created.labelled and created.n_features == 4 and created.has_feature_names
    for method in ("fsds", "variance", "ocfs"):
        info = sift.create(f"{stream}-{method}", method, stream=stream)
        assert info.stream == stream and info.stream_base == 0
    with pytest.raises(ConflictError):  # a second creation (a retry's would answer the first)
        sift.create_stream(stream, data=data, y="label")
    summary = sift.push_stream(stream, data, y="label", chunk_rows=50, key_prefix="once")
    assert summary.items == 120 and len(summary.receipts) == 3
    last = summary.receipts[-1]
    assert isinstance(last, StreamReceipt)
    assert {o.name: (o.status, o.seen) for o in last.selectors} == {
        f"{stream}-{m}": ("applied", 120) for m in ("fsds", "variance", "ocfs")
    }
    again = sift.push_stream(stream, data, y="label", chunk_rows=50, key_prefix="once")
    assert again.duplicates == 3
    described = sift.describe_stream(stream)
    assert described.entries == 3 and described.items == 120
    assert [s.seen for s in described.selectors or []] == [120, 120, 120]
    variance = sift.weights(f"{stream}-variance").weights
    assert np.allclose(variance, data[["a", "b", "c", "d"]].to_numpy().var(axis=0))
    side = sift.stream_rankings(stream, h=2)
    assert [t.name for t in side.selectors] == [
        f"{stream}-{m}" for m in ("fsds", "ocfs", "variance")
    ]
    assert side.selectors[1].names[0] == "b" and side.selectors[2].names[0] == "c"
    assert side.between(f"{stream}-ocfs", f"{stream}-variance").shared == len(
        set(side.selectors[1].names) & set(side.selectors[2].names)
    )
    with pytest.raises(ConflictError) as refused:
        sift.delete_stream(stream)
    assert refused.value.problem["selectors"] == sorted(t.name for t in side.selectors)
    detached = sift.detach(f"{stream}-fsds")
    assert detached.stream is None and detached.seen == 120
    sift.delete_stream(stream, force=True)
    assert stream not in [s.name for s in sift.list_streams()]
    assert sift.describe(f"{stream}-ocfs").stream is None


def test_a_stream_of_feature_columns(sift: Client, selector_name: str) -> None:
    stream = f"{selector_name}-cols"
    sift.create_stream(stream, n_samples=6)
    sift.create(f"{stream}-ofs", "ofs", stream=stream, params={"c": 1})
    columns = pd.DataFrame(np.random.default_rng(1).normal(size=(6, 5)), columns=list("pqrst"))
    summary = sift.push_stream(stream, columns, chunk_rows=2)
    receipts = [r for r in summary.receipts if isinstance(r, StreamReceipt)]
    assert summary.items == 5 and [r.first_index for r in receipts] == [0, 2, 4]
    assert sift.features(f"{stream}-ofs").features[4].name == "t"
    # A stream nobody is attached to takes chunks: nobody applies them.
    sift.create_stream(f"{stream}-alone", n_features=2)
    alone = sift.push_stream(f"{stream}-alone", np.ones((3, 2)))
    first = alone.receipts[0]
    assert isinstance(first, StreamReceipt)
    assert first.selectors == [] and alone.last.applied


def test_the_async_client_pushes_to_a_stream(service: ServiceProcess, selector_name: str) -> None:
    async def main() -> tuple[int, float]:
        async with AsyncClient(service.url) as client:
            stream = f"{selector_name}-a"
            await client.create_stream(stream, n_features=3)
            await client.create(f"{stream}-v", "variance", stream=stream)
            summary = await client.push_stream(stream, np.arange(12.0).reshape(4, 3))
            side = await client.stream_rankings(stream, h=1)
            return summary.items, side.selectors[0].features[0].score

    items, score = asyncio.run(main())
    assert items == 4 and score == pytest.approx(np.arange(12.0).reshape(4, 3).var(axis=0)[0])


@pytest.fixture
def cli_env(
    service: ServiceProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    env = {"SIFT_URL": service.url, "SIFT_STATE_DIR": str(tmp_path / "state")}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("SIFT_API_KEY", raising=False)
    return env


def test_sift_stream_create_push_top_ls_rm(
    cli_env: dict[str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path, selector_name: str
) -> None:
    data = frame(rows=90, seed=2)
    path = tmp_path / "rows.csv"
    data.to_csv(path, index=False, quoting=csv.QUOTE_MINIMAL)
    stream = f"{selector_name}-cli"
    status, out, err = sift(
        capsys, "stream", "create", stream, "--like", str(path), "--labels", "label"
    )
    assert status == 0, err
    assert out == (
        f"created stream {stream}: labelled rows, 4 features; methods that may attach: "
        "anova, chi2, fsds, ioc, ocfs, variance\n"
    )
    for method in ("ocfs", "variance"):
        status, out, err = sift(
            capsys, "create", f"{stream}-{method}", "--method", method, "--stream", stream
        )
        assert status == 0, err
        assert f"attached to stream {stream}" in out
    status, _, err = sift(
        capsys, "create", "x", "--method", "fsds", "--n-features", "3", "--from", "now"
    )
    assert status == 1 and "--from applies" in err
    status, out, err = sift(
        capsys, "stream", "push", stream, str(path), "--labels", "label", "--chunk-rows", "40"
    )
    assert status == 0, err
    assert re.search(rf"pushed 90 rows in 3 chunks to {stream}", out), out
    assert f"{stream}-ocfs: version 3, 90 rows seen" in out
    # Resumed: every chunk is in already.
    status, out, err = sift(
        capsys, "stream", "push", stream, str(path), "--labels", "label", "--chunk-rows", "40"
    )
    assert status == 0 and "nothing to push" in out, err
    status, out, err = sift(capsys, "stream", "top", stream, "-h", "2")
    assert status == 0, err
    lines = out.splitlines()
    assert lines[0] == f"stream {stream}  top 2 of 2 selectors"
    assert lines[1].split()[:2] == ["rank", f"{stream}-ocfs"]
    assert lines[2].split()[:2] == ["1", "b"]  # ocfs: the class-separating feature
    assert lines[5].split()[:2] == ["a", "b"] and lines[6].split()[:2] == [
        f"{stream}-ocfs",
        f"{stream}-variance",
    ]
    status, out, _ = sift(capsys, "stream", "top", stream, "--json")
    assert json.loads(out)["stream"] == stream
    status, out, _ = sift(capsys, "stream", "ls")
    row = next(line for line in out.splitlines() if line.startswith(stream + " "))
    assert f"{stream}-ocfs (ocfs)" in row and " 90 " in f" {row} "
    status, _, err = sift(capsys, "stream", "rm", stream)
    assert status == 1 and "selectors attached" in err and "(409 Conflict)" in err
    status, out, err = sift(capsys, "stream", "rm", stream, "--force")
    assert status == 0 and out == f"deleted stream {stream}\n", err
    status, out, _ = sift(capsys, "describe", f"{stream}-ocfs")
    assert "stream" not in json.loads(out) and json.loads(out)["rows_seen"] == 90
