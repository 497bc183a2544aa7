"""Data lands on the right feature, through the command line and the client, as a new user
pushes it: columns matched by name (CSV headers, DataFrames, Parquet), a push that fails part
way resumable exactly, a resume record that belongs to one creation of a selector.

``variance`` keeps exact per-feature moments: a column on the wrong feature shows at once.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from siftstream import Client, InvalidInputError
from tests.support.client import sift

NAMES = ["a", "b", "c", "d", "e"]


@pytest.fixture
def cli_env(service, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    env = {"SIFT_URL": service.url, "SIFT_STATE_DIR": str(tmp_path / "state")}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("SIFT_API_KEY", raising=False)
    return env


def rows(n: int = 300, seed: int = 0) -> np.ndarray:
    """Columns of very different spreads: a feature's variance says which column it got."""
    scales = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    # numpy's stubs type this product as Any; it is an n x 5 float array.
    spread: np.ndarray = np.random.default_rng(seed).normal(size=(n, 5)) * scales
    return spread


def write(path: Path, header: list[str], values: np.ndarray, bad: dict[int, str] | None = None):
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        for i, row in enumerate(values):
            cells = [repr(float(v)) for v in row]
            if bad and i in bad:
                cells[2] = bad[i]
            writer.writerow(cells)
    return path


def variances(url: str, name: str) -> dict[str, float]:
    with Client(url) as client:
        top = client.top(name, h=5)
    return {feature.name: feature.score for feature in top.features}


def test_a_csv_with_its_columns_in_another_order_lands_on_the_right_features(
    cli_env, capsys, tmp_path, selector_name
):
    x = rows()
    ordered = write(tmp_path / "a.csv", NAMES, x)
    reversed_ = write(tmp_path / "b.csv", NAMES[::-1], x[:, ::-1])
    assert (
        sift(capsys, "create", selector_name, "--method", "variance", "--like", str(ordered))[0]
        == 0
    )
    status, _, err = sift(capsys, "push", selector_name, str(reversed_))
    assert status == 0, err
    expected = dict(zip(NAMES, x.var(axis=0).tolist(), strict=True))
    assert variances(cli_env["SIFT_URL"], selector_name) == pytest.approx(expected, rel=1e-12)

    # A header with a name the selector does not have: refused, nothing of it applied.
    wrong = write(tmp_path / "c.csv", ["a", "b", "zz", "d", "e"], x)
    status, _, err = sift(capsys, "push", selector_name, str(wrong))
    assert status == 1
    assert "missing ['c'], unexpected ['zz']" in err and "nothing of" in err, err
    with Client(cli_env["SIFT_URL"]) as client:
        assert client.describe(selector_name).rows_seen == 300


def test_a_selector_created_without_names_takes_the_first_files(
    cli_env, capsys, tmp_path, selector_name
):
    x = rows()
    assert (
        sift(capsys, "create", selector_name, "--method", "variance", "--n-features", "5")[0] == 0
    )
    assert sift(capsys, "push", selector_name, str(write(tmp_path / "a.csv", NAMES, x)))[0] == 0
    shuffled = ["c", "a", "e", "b", "d"]
    order = [NAMES.index(n) for n in shuffled]
    path = write(tmp_path / "b.csv", shuffled, x[:, order])
    assert sift(capsys, "push", selector_name, str(path))[0] == 0
    expected = dict(zip(NAMES, np.vstack([x, x]).var(axis=0).tolist(), strict=True))
    assert variances(cli_env["SIFT_URL"], selector_name) == pytest.approx(expected, rel=1e-12)


def test_dataframes_and_parquet_are_matched_by_column_name(cli_env, tmp_path, selector_name):
    x = rows()
    frame = pd.DataFrame(x, columns=NAMES)
    shuffled = ["e", "c", "a", "d", "b"]
    url = cli_env["SIFT_URL"]
    with Client(url) as client:
        client.create(selector_name, "variance", data=frame)
        client.push(selector_name, frame[shuffled])
        pq.write_table(pa.Table.from_pandas(frame[shuffled[::-1]]), tmp_path / "x.parquet")
    status = __import__("siftstream.cli", fromlist=["main"]).main(
        ["push", selector_name, str(tmp_path / "x.parquet")]
    )
    assert status == 0
    expected = dict(zip(NAMES, np.vstack([x, x]).var(axis=0).tolist(), strict=True))
    assert variances(url, selector_name) == pytest.approx(expected, rel=1e-12)
    with Client(url) as client, pytest.raises(InvalidInputError, match="unexpected"):
        client.push(selector_name, frame.rename(columns={"a": "A"}))


def test_a_push_that_stops_part_way_says_what_is_in_and_resumes_exactly(
    cli_env, capsys, tmp_path, selector_name
):
    """Row 501 holds 'oops': the push stops after the first 500 rows and says so; the file
    corrected and pushed again adds exactly the rest (every row once)."""
    x = rows(1000)
    path = write(tmp_path / "rows.csv", NAMES, x, bad={500: "oops"})
    assert (
        sift(capsys, "create", selector_name, "--method", "variance", "--like", str(path))[0] == 0
    )
    status, _, err = sift(capsys, "push", selector_name, str(path), "--chunk-rows", "100")
    assert status == 1
    assert "line 502, column 3 'c': 'oops' is not a number" in err, err
    assert "the first 500 rows" in err and "5 chunks" in err, err
    with Client(cli_env["SIFT_URL"]) as client:
        assert client.describe(selector_name).rows_seen == 500
    write(path, NAMES, x)  # corrected
    status, out, err = sift(capsys, "push", selector_name, str(path), "--chunk-rows", "100")
    assert status == 0, err
    assert "skipped 5 chunks" in out, out
    with Client(cli_env["SIFT_URL"]) as client:
        assert client.describe(selector_name).rows_seen == 1000
    expected = dict(zip(NAMES, x.var(axis=0).tolist(), strict=True))
    assert variances(cli_env["SIFT_URL"], selector_name) == pytest.approx(expected, rel=1e-12)


def test_a_resume_record_belongs_to_one_creation_of_the_selector(
    cli_env, capsys, tmp_path, selector_name
):
    path = write(tmp_path / "rows.csv", NAMES, rows(200))
    for _ in range(2):
        assert (
            sift(capsys, "create", selector_name, "--method", "variance", "--like", str(path))[0]
            == 0
        )
        status, out, err = sift(capsys, "push", selector_name, str(path))
        assert status == 0 and "pushed 200 rows" in out, err
        status, out, _ = sift(capsys, "push", selector_name, str(path))
        assert status == 0 and out.startswith("nothing to push"), out
        with Client(cli_env["SIFT_URL"]) as client:
            assert client.describe(selector_name).rows_seen == 200
        assert sift(capsys, "delete", selector_name)[0] == 0


def test_top_of_a_selector_without_data_and_the_methods(cli_env, capsys, selector_name):
    assert sift(capsys, "create", selector_name, "--method", "fsds", "--n-features", "4")[0] == 0
    status, out, _ = sift(capsys, "top", selector_name)
    assert status == 0 and "no data yet" in out and "score" not in out, out
    status, out, _ = sift(capsys, "methods")
    assert status == 0
    for method in ("fsds", "ofs", "iqrp", "omvfs", "ocfs", "ioc", "variance"):
        assert f"\n{method}: " in "\n" + out
    assert "--param k=..." in out and "(default 3.0)" in out  # fsds' alpha_exponent
    with Client(cli_env["SIFT_URL"]) as client:
        methods = {m.name: m for m in client.methods()}
        described = client.describe(selector_name)
    assert methods["ocfs"].chunk_kind == "labelled rows" and "merge" in methods["ocfs"].capabilities
    assert methods["ofs"].route == "features" and methods["ofs"].counts == "features_seen"
    assert described.chunk_kind == "rows" and not described.labelled
