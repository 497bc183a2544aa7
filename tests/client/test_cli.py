"""``sift``'s client commands against a real service: in this process through ``main`` (output
captured), and as processes where it matters (a push killed and resumed, a terminal)."""

from __future__ import annotations

import csv
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp

from siftstream import Client
from tests.support.client import ADMIN_TOKEN, sift
from tests.support.harness import REPO_ROOT, ServiceProcess, wait_for


@pytest.fixture
def cli_env(
    service: ServiceProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    """SIFT_URL of the test service and a progress-record folder of this test's own."""
    env = {"SIFT_URL": service.url, "SIFT_STATE_DIR": str(tmp_path / "state")}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("SIFT_API_KEY", raising=False)
    return env


def write_csv(path: Path, x: np.ndarray, labels: np.ndarray | None = None) -> Path:
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            [f"f{i}" for i in range(x.shape[1])] + (["label"] if labels is not None else [])
        )
        for i, row in enumerate(x):
            writer.writerow(
                [repr(float(v)) for v in row] + ([labels[i]] if labels is not None else [])
            )
    return path


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    status, out, _ = sift(capsys, "--version")
    assert status == 0 and out.strip() == f"sift {version('siftstream')}"


def test_create_push_csv_top_ls_describe_delete(
    cli_env: dict[str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path, selector_name: str
) -> None:
    x = np.random.default_rng(0).normal(size=(250, 4)) * [1, 8, 2, 1]
    path = write_csv(tmp_path / "rows.csv", x, np.arange(250) % 3)

    status, out, err = sift(
        capsys,
        "create",
        selector_name,
        "--method",
        "variance",
        "--like",
        str(path),
        "--labels",
        "label",
    )
    assert status == 0, err
    assert out.startswith(f"created {selector_name}: variance, 4 features")

    status, out, err = sift(
        capsys, "push", selector_name, str(path), "--labels", "label", "--chunk-rows", "100"
    )
    assert status == 0, err
    # Not a terminal: no bar, one summary line.
    assert re.fullmatch(
        rf"pushed 250 rows in 3 chunks to {selector_name} in \d+:\d\d \([\d,]+ rows/s\); "
        rf"{selector_name}: version \d+, 250 rows seen\n",
        err,
    ), err

    status, out, _ = sift(capsys, "top", selector_name, "-h", "2")
    lines = out.splitlines()
    assert status == 0 and lines[0].startswith(f"{selector_name}  variance  version")
    assert lines[1].split() == ["rank", "index", "name", "score"]
    assert [line.split()[:3] for line in lines[2:4]] == [["1", "1", "f1"], ["2", "2", "f2"]]
    assert lines[4].startswith("stability of the top 2: ") and lines[5].startswith("bands: f1")
    assert len({len(line) for line in lines[1:]}) >= 1 and lines[2].index("f1") == lines[1].index(
        "name"
    )

    status, out, _ = sift(capsys, "top", selector_name, "-h", "2", "--json")
    with Client(cli_env["SIFT_URL"]) as client:
        assert json.loads(out) == client.top(selector_name, h=2).raw

    status, out, _ = sift(capsys, "ls")
    row = next(line for line in out.splitlines() if line.startswith(selector_name + " "))
    assert row.split()[:5] == [selector_name, "variance", "4", "250", "rows"]

    status, out, _ = sift(capsys, "describe", selector_name)
    assert json.loads(out)["rows_seen"] == 250

    assert sift(capsys, "delete", selector_name)[:2] == (0, f"deleted {selector_name}\n")
    status, _, err = sift(capsys, "describe", selector_name)
    assert status == 1 and err == (
        f"sift describe: selector '{selector_name}' does not exist (404 Not found)\n"
    )


def test_push_labels_to_labelled_and_unlabelled_selectors(
    cli_env: dict[str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path, selector_name: str
) -> None:
    x = np.random.default_rng(1).normal(size=(120, 3))
    path = write_csv(tmp_path / "rows.csv", x, np.where(np.arange(120) % 2, "spam", "ham"))
    labelled, plain = selector_name + "-l", selector_name + "-p"
    assert sift(capsys, "create", labelled, "--method", "ocfs", "--n-features", "3")[0] == 0
    assert sift(capsys, "create", plain, "--method", "variance", "--n-features", "3")[0] == 0
    status, _, err = sift(capsys, "push", labelled, str(path))
    assert status == 1 and "labelled rows" in err and "--labels" in err
    status, _, err = sift(capsys, "push", plain, str(path))
    assert status == 1 and "line 2, column 4 'label': 'ham' is not a number" in err
    assert "nothing of" in err
    for name in (labelled, plain):
        status, _, err = sift(capsys, "push", name, str(path), "--labels", "label")
        assert status == 0, err
    with Client(cli_env["SIFT_URL"]) as client:
        classes = client.describe(labelled).classes
        assert classes is not None and {(c.label, c.count) for c in classes} == {
            ("ham", 60),
            ("spam", 60),
        }
        np.testing.assert_allclose(client.weights(plain).weights, x.var(axis=0), rtol=1e-12)


@pytest.mark.parametrize("kind", ["npy", "npz", "parquet"])
def test_push_binary_files(
    cli_env: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    selector_name: str,
    kind: str,
) -> None:
    x = sp.random(300, 6, density=0.5, format="csr", random_state=2)
    path = tmp_path / f"rows.{kind}"
    if kind == "npy":
        np.save(path, x.toarray())
    elif kind == "npz":
        sp.save_npz(path, x)
    else:
        pq.write_table(pa.table({f"c{i}": x.toarray()[:, i] for i in range(6)}), path)
    assert (
        sift(capsys, "create", selector_name, "--method", "variance", "--like", str(path))[0] == 0
    )
    status, _, err = sift(capsys, "push", selector_name, str(path), "--chunk-rows", "128")
    assert status == 0 and "pushed 300 rows in 3 chunks" in err, err
    with Client(cli_env["SIFT_URL"]) as client:
        np.testing.assert_allclose(client.weights(selector_name).weights, x.toarray().var(axis=0))
        if kind == "parquet":
            assert client.top(selector_name, h=6).names[0].startswith("c")


def test_feature_columns_from_a_csv(
    cli_env: dict[str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path, selector_name: str
) -> None:
    samples = np.random.default_rng(3).normal(size=(30, 12))
    path = write_csv(tmp_path / "genes.csv", samples)
    status, out, _ = sift(
        capsys,
        "create",
        selector_name,
        "--method",
        "ofs",
        "--n-samples",
        "30",
        "--param",
        "epsilon=0.5",
    )
    assert status == 0 and "30 samples" in out and "epsilon=0.5" in out
    status, _, err = sift(capsys, "push", selector_name, str(path), "--chunk-rows", "5")
    assert status == 0 and "pushed 12 columns in 3 chunks" in err, err
    with Client(cli_env["SIFT_URL"]) as client:
        page = client.features(selector_name, limit=100)
        assert [d.name for d in page.features] == [f"f{i}" for i in range(12)]


def test_create_params_views_and_bad_arguments(
    cli_env: dict[str, str], capsys: pytest.CaptureFixture[str], selector_name: str
) -> None:
    status, out, err = sift(
        capsys,
        "create",
        selector_name,
        "--method",
        "fsds",
        "--n-features",
        "50",
        "--param",
        "k=7",
        "--param",
        "normalize_rows=false",
        "--param",
        "kernel=cosine",
        "--json",
    )
    assert status == 0, err
    params = json.loads(out)["params"]
    assert (params["k"], params["normalize_rows"], params["kernel"]) == (7, False, "cosine")

    status, out, err = sift(
        capsys, "create", selector_name + "-mv", "--method", "omvfs", "--views", "text=5,image=3"
    )
    assert status == 0 and "text 5, image 3 features" in out, err

    status, _, err = sift(capsys, "create", selector_name, "--method", "fsds", "--n-features", "5")
    assert status == 1 and "already exists" in err and "(409 Conflict)" in err
    status, _, err = sift(
        capsys, "create", "x", "--method", "fsds", "--n-features", "5", "--param", "k"
    )
    assert status == 1 and "--param expects KEY=VALUE" in err
    status, _, err = sift(capsys, "push", selector_name, "missing.csv")
    assert status == 1 and "no such file" in err


def test_watch_prints_successive_tables_when_not_a_terminal(
    cli_env: dict[str, str], capsys: pytest.CaptureFixture[str], selector_name: str
) -> None:
    with Client(cli_env["SIFT_URL"]) as client:
        client.create(selector_name, "variance", n_features=3)
        client.push(selector_name, np.eye(3))
    status, out, _ = sift(
        capsys, "watch", selector_name, "-h", "2", "--count", "2", "--interval", "0.1"
    )
    assert status == 0
    assert out.count(f"{selector_name}  variance  version 1  3 rows seen") == 2
    assert "\x1b[" not in out and "(+0/s)" in out


def test_connection_options_before_or_after_the_command(
    secured: ServiceProcess, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SIFT_URL", raising=False)
    monkeypatch.delenv("SIFT_API_KEY", raising=False)
    status, _, err = sift(capsys, "--url", secured.url, "ls")
    assert status == 1 and "(401 Unauthorized)" in err
    status, _, err = sift(capsys, "ls", "--url", secured.url, "--api-key", ADMIN_TOKEN)
    assert status == 0, err
    monkeypatch.setenv("SIFT_URL", secured.url)
    monkeypatch.setenv("SIFT_API_KEY", ADMIN_TOKEN)
    assert sift(capsys, "ls")[0] == 0
    # Nothing listening, or no such host: said at once, with the URL (no 30 s of retries).
    for url, reason in (
        ("http://127.0.0.1:9", "Connection refused"),
        ("http://no-such-host.invalid:8000", "not known"),
    ):
        started = time.monotonic()
        status, _, err = sift(capsys, "--url", url, "ls")
        assert status == 1 and f"cannot reach the service at {url}" in err and reason in err
        assert time.monotonic() - started < 5.0


def run_sift(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "service", *argv],
        cwd=REPO_ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.slow
def test_a_killed_push_resumes_and_counts_every_row_once(
    cli_env: dict[str, str], tmp_path: Path, selector_name: str
) -> None:
    x = np.random.default_rng(4).normal(size=(2000, 10))
    path = write_csv(tmp_path / "big.csv", x)
    argv = ["push", selector_name, str(path), "--chunk-rows", "25"]
    with Client(cli_env["SIFT_URL"]) as client:
        client.create(selector_name, "variance", n_features=10)
    records = Path(cli_env["SIFT_STATE_DIR"])

    def acknowledged() -> int:
        found = list(records.glob("*.json"))
        return len(json.loads(found[0].read_text())["done"]) if found else 0

    first = subprocess.Popen(
        [sys.executable, "-m", "service", *argv],
        cwd=REPO_ROOT,
        env={**os.environ, **cli_env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: acknowledged() >= 10, 60, "10 chunks acknowledged")
        first.send_signal(signal.SIGKILL)
    finally:
        first.wait(10)
    done_before = acknowledged()
    assert done_before < 80, "the push finished before it could be interrupted"

    second = run_sift(cli_env, *argv)
    assert second.returncode == 0, second.stderr
    skipped = re.search(r"skipped (\d+) chunks", second.stderr)
    assert skipped is not None and int(skipped.group(1)) == done_before, second.stderr
    with Client(cli_env["SIFT_URL"]) as client:
        assert client.describe(selector_name).rows_seen == 2000
        np.testing.assert_allclose(client.weights(selector_name).weights, x.var(axis=0), rtol=1e-10)

    third = run_sift(cli_env, *argv)
    assert third.returncode == 0 and third.stdout.startswith("nothing to push")


def test_progress_bar_on_a_terminal(
    cli_env: dict[str, str], tmp_path: Path, selector_name: str
) -> None:
    path = tmp_path / "rows.npy"
    np.save(path, np.random.default_rng(5).normal(size=(600, 4)))
    with Client(cli_env["SIFT_URL"]) as client:
        client.create(selector_name, "variance", n_features=4)
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "service", "push", selector_name, str(path), "--chunk-rows", "100"],
        cwd=REPO_ROOT,
        env={**os.environ, **cli_env},
        stdout=subprocess.DEVNULL,
        stderr=terminal,
    )
    os.close(terminal)
    shown = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([controller], [], [], 0.5)
        if ready:
            try:
                piece = os.read(controller, 4096)
            except OSError:  # the process closed the terminal
                break
            if not piece:
                break
            shown += piece
        elif process.poll() is not None:
            break
    process.wait(10)
    os.close(controller)
    text = shown.decode()
    assert process.returncode == 0, text
    assert "\r[" in text and "600/600 rows" in text and "rows/s" in text and "ETA" in text
    assert "pushed 600 rows in 6 chunks" in text


def test_export_then_import(
    cli_env: dict[str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path, selector_name: str
) -> None:
    with Client(cli_env["SIFT_URL"]) as client:
        client.create(selector_name, "variance", n_features=3)
        client.push(selector_name, np.random.default_rng(6).normal(size=(40, 3)))
    archive = tmp_path / "saved.sift"
    status, out, err = sift(capsys, "export", selector_name, "-o", str(archive))
    assert status == 0 and out.startswith(f"exported {selector_name} to {archive} ("), err
    assert archive.stat().st_size > 0 and not list(tmp_path.glob("*.part"))

    status, out, err = sift(capsys, "import", str(archive), "--name", selector_name + "-2")
    assert status == 0, err
    assert out == f"imported {selector_name}-2: variance, 3 features, version 1, 40 rows seen\n"
    top = sift(capsys, "top", selector_name + "-2", "-h", "3")[1].splitlines()[2:]
    assert top == sift(capsys, "top", selector_name, "-h", "3")[1].splitlines()[2:]

    status, _, err = sift(capsys, "import", str(archive))
    assert status == 1 and "(409 Conflict)" in err
