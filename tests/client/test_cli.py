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
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp

from siftstream import AuthenticationError, Client
from tests.support.client import ADMIN_TOKEN, sift
from tests.support.harness import REPO_ROOT, RedisProcess, ServiceProcess, wait_for


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
        out,
    ), out

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


def test_push_a_target_column_to_the_selectors_that_take_it(
    cli_env: dict[str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path, selector_name: str
) -> None:
    """--target names the column of a numeric target: never a feature, sent to f_regression
    (whose scores are then scikit-learn's), left out for a row method, refused for a labelled
    one; a selector of rows with a target says to name it, and takes no labels."""
    from sklearn.feature_selection import f_regression

    rng = np.random.default_rng(11)
    x = rng.normal(size=(240, 3))
    y = 3.0 * x[:, 1] - x[:, 2] + rng.normal(scale=0.5, size=240)
    path = tmp_path / "rows.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["f0", "price", "f1", "f2"])
        for value, row in zip(y, x, strict=True):
            writer.writerow([repr(float(row[0])), repr(float(value)), *map(repr, row[1:].tolist())])
    regressor, plain, labelled = (f"{selector_name}-{kind}" for kind in ("r", "p", "l"))
    created = ("create", regressor, "--method", "f_regression", "--like", str(path))
    status, out, err = sift(capsys, *created, "--target", "price")
    assert status == 0 and "f_regression, 3 features" in out, err
    assert sift(capsys, "create", plain, "--method", "variance", "--n-features", "3")[0] == 0
    assert sift(capsys, "create", labelled, "--method", "anova", "--n-features", "3")[0] == 0

    status, _, err = sift(capsys, "push", regressor, str(path))
    assert status == 1 and "takes rows with a target" in err and "--target" in err
    status, _, err = sift(capsys, "push", regressor, str(path), "--labels", "price")
    assert status == 1 and "not labels: name the target column with --target" in err
    status, _, err = sift(capsys, "push", labelled, str(path), "--target", "price")
    assert status == 1 and "takes labelled rows (class labels), not a target" in err
    status, _, err = sift(capsys, "push", plain, str(path), "--labels", "price", "--target", "p")
    assert status == 2 and "not allowed with argument" in err
    for name in (regressor, plain):
        status, out, err = sift(
            capsys, "push", name, str(path), "--target", "price", "--chunk-rows", "100"
        )
        assert status == 0 and "pushed 240 rows in 3 chunks" in out, err
    with Client(cli_env["SIFT_URL"]) as client:
        np.testing.assert_allclose(
            client.weights(regressor).weights, f_regression(x, y)[0], rtol=1e-9
        )
        np.testing.assert_allclose(client.weights(plain).weights, x.var(axis=0), rtol=1e-12)
    status, out, _ = sift(capsys, "top", regressor, "-h", "2")
    assert status == 0 and "p-value" in out and "f1" in out.splitlines()[2]

    # A target that is not a number stops the push where it is, before anything is sent.
    path.write_text("f0,price,f1,f2\n1,2,3,4\n5,cheap,7,8\n")
    status, _, err = sift(capsys, "push", regressor, str(path), "--target", "price")
    assert status == 1 and "line 3, target column 'price': 'cheap' is not a number" in err
    # An .npz's target array.
    npz = tmp_path / "rows.npz"
    np.savez(npz, rows=x, y=y)
    status, _, err = sift(capsys, "push", regressor, str(npz), "--target", "y")
    assert status == 0, err
    with Client(cli_env["SIFT_URL"]) as client:
        twice = f_regression(np.vstack([x, x]), np.concatenate([y, y]))[0]
        np.testing.assert_allclose(client.weights(regressor).weights, twice, rtol=1e-9)


def test_a_stream_of_rows_with_a_target(
    cli_env: dict[str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path, selector_name: str
) -> None:
    from sklearn.feature_selection import r_regression

    rng = np.random.default_rng(12)
    x = rng.normal(size=(150, 3))
    y = x[:, 0] - 2.0 * x[:, 2] + rng.normal(scale=0.3, size=150)
    path = tmp_path / "rows.csv"
    np.savetxt(path, np.column_stack([x, y]), delimiter=",", header="a,b,c,y", comments="")
    stream = f"{selector_name}-s"
    status, out, err = sift(
        capsys, "stream", "create", stream, "--like", str(path), "--target", "y"
    )
    assert status == 0 and f"created stream {stream}: rows with a target, 3 features" in out, err
    status, out, err = sift(
        capsys, "stream", "create", f"{stream}-n", "--n-features", "3", "--targets"
    )
    assert status == 0 and "rows with a target" in out, err
    both = ("stream", "create", f"{stream}-x", "--n-features", "3", "--targets", "--labelled")
    status, _, err = sift(capsys, *both)
    assert status == 2 and "not allowed with argument" in err
    alone = ("stream", "create", f"{stream}-y", "--n-features", "3", "--target", "y")
    status, _, err = sift(capsys, *alone)
    assert status == 1 and "--target applies with --like" in err
    correlation = f"{selector_name}-c"
    assert (
        sift(capsys, "create", correlation, "--method", "correlation", "--stream", stream)[0] == 0
    )
    status, _, err = sift(capsys, "stream", "push", stream, str(path))
    assert status == 1 and "--target" in err
    status, out, err = sift(capsys, "stream", "push", stream, str(path), "--target", "y")
    assert status == 0 and "pushed 150 rows" in out, err
    with Client(cli_env["SIFT_URL"]) as client:
        np.testing.assert_allclose(
            client.weights(correlation).weights, np.abs(r_regression(x, y)), rtol=1e-9
        )


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
    status, out, err = sift(capsys, "push", selector_name, str(path), "--chunk-rows", "128")
    assert status == 0 and "pushed 300 rows in 3 chunks" in out, err
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
    status, out, err = sift(capsys, "push", selector_name, str(path), "--chunk-rows", "5")
    assert status == 0 and "pushed 12 columns in 3 chunks" in out, err
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
    skipped = re.search(r"skipped (\d+) chunks", second.stdout)  # the result, on stdout
    assert skipped is not None and int(skipped.group(1)) == done_before, second.stdout
    with Client(cli_env["SIFT_URL"]) as client:
        assert client.describe(selector_name).rows_seen == 2000
        np.testing.assert_allclose(client.weights(selector_name).weights, x.var(axis=0), rtol=1e-10)

    third = run_sift(cli_env, *argv)
    assert third.returncode == 0 and third.stdout.startswith("nothing to push")


def read_terminal(
    process: subprocess.Popen[bytes],
    controller: int,
    timeout_s: float,
    until: Callable[[str], bool] = lambda text: False,
) -> str:
    """What ``process`` wrote to the terminal whose controlling side is ``controller``, until
    it exits (and then waited for) or ``until`` the text so far holds."""
    shown = b""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not until(shown.decode(errors="replace")):
        ready, _, _ = select.select([controller], [], [], 0.2)
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
    if not until(shown.decode(errors="replace")):
        process.wait(10)
        os.close(controller)
    return shown.decode(errors="replace")


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
        stdout=terminal,
        stderr=terminal,
    )
    os.close(terminal)
    text = read_terminal(process, controller, 60)
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


@pytest.mark.slow
def test_a_push_whose_service_stops_says_so_on_its_own_line_and_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The service SIGKILLed during a push on a terminal: the push keeps trying for its whole
    retry budget, ends the bar's line before it says what stopped it and that the same command
    resumes; run again once the service is back, it skips what was in and every row counts
    once."""
    redis_server = RedisProcess(tmp_path / "redis")
    process = ServiceProcess("stopped-push", redis_server.url, tmp_path)
    env = {"SIFT_URL": "", "SIFT_STATE_DIR": str(tmp_path / "state")}
    try:
        process.start()
        env["SIFT_URL"] = process.url
        x = np.random.default_rng(6).normal(size=(4000, 10))
        path = write_csv(tmp_path / "rows.csv", x)
        with Client(process.url) as client:
            client.create("stopped", "variance", n_features=10)
        argv = ["push", "stopped", str(path), "--chunk-rows", "20", "--retry-budget", "3"]
        controller, terminal = pty.openpty()
        push = subprocess.Popen(
            [sys.executable, "-m", "service", *argv],
            cwd=REPO_ROOT,
            env={**os.environ, **env},
            stdout=terminal,
            stderr=terminal,
        )
        os.close(terminal)

        def sent(text: str) -> int:
            counts = re.findall(r"([\d,]+)/4,000 rows", text)
            return max((int(c.replace(",", "")) for c in counts), default=0)

        shown = read_terminal(push, controller, 60, lambda text: sent(text) >= 1000)
        assert 1000 <= sent(shown) < 4000, shown
        process.kill()
        stopped_at = time.monotonic()
        shown += read_terminal(push, controller, 60)
        elapsed = time.monotonic() - stopped_at
        assert push.returncode == 1, shown
        assert 3.0 - 0.3 <= elapsed <= 3.0 + 4.0, f"gave up after {elapsed:.1f} s"
        lines = shown.replace("\r\n", "\n").split("\n")
        said = [line for line in lines if line.startswith("sift push: ")]
        assert said and "cannot reach the service" in said[0], shown
        assert not re.search(r"ETA [^\n]*sift push", shown), shown  # not on the bar's line
        stopped = [line for line in lines if line.startswith("stopped: ")]
        assert stopped and "run the same command again" in stopped[0], shown
        assert "it resumes" in stopped[0]

        process.start()
        again = run_sift(env, *argv)
        assert again.returncode == 0, again.stderr
        skipped = re.search(r"skipped (\d+) chunks", again.stdout)
        assert skipped and int(skipped.group(1)) >= 50, again.stdout
        with Client(process.url) as client:
            assert client.describe("stopped").rows_seen == 4000
            np.testing.assert_allclose(client.weights("stopped").weights, x.var(axis=0), rtol=1e-10)
    finally:
        process.kill()
        redis_server.close()


def test_top_help_and_unknown_options_are_the_commands_own(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``-h`` is a count in ``sift top`` (as the API's ``h``); alone it is the help, and an
    unknown option is refused with ``sift top``'s usage, not ``sift``'s."""
    status, out, _ = sift(capsys, "top", "quick", "-h")
    assert status == 0 and out.startswith("usage: sift top ") and "-h [N], -n [N]" in out
    status, _, err = sift(capsys, "top", "quick", "-x", "3")
    assert status == 2 and err.startswith("usage: sift top "), err
    assert "unrecognized arguments: -x 3" in err
    argv = ("alerts", "add", "quick", "http://h.example", "--threshold", "0.3", "--bad")
    status, _, err = sift(capsys, *argv)
    assert status == 2 and err.startswith("usage: sift alerts add "), err


def test_top_counts_with_h_or_n(
    cli_env: dict[str, str], capsys: pytest.CaptureFixture[str], selector_name: str
) -> None:
    with Client(cli_env["SIFT_URL"]) as client:
        client.create(selector_name, "variance", n_features=6)
        client.push(selector_name, np.random.default_rng(1).normal(size=(50, 6)) * np.arange(1, 7))
    for option in ("-h", "-n"):
        status, out, err = sift(capsys, "top", selector_name, option, "3")
        assert status == 0, err
        ranks = [line.split()[1] for line in out.splitlines() if line[:4].strip().isdigit()]
        assert ranks == ["5", "4", "3"], out


def test_a_401_without_a_key_says_how_to_send_one(
    secured: ServiceProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = sift(capsys, "--url", secured.url, "ls")
    assert status == 1
    assert "Authorization: Bearer <key>" in err  # the service's words
    assert "SIFT_API_KEY" in err and "--api-key" in err, err  # and how this client sends one
    with Client(secured.url) as client, pytest.raises(AuthenticationError) as raised:
        client.list_selectors()
    assert "api_key=KEY to Client" in str(raised.value)
    status, _, err = sift(capsys, "--url", secured.url, "--api-key", "sift_nope_nope", "ls")
    assert status == 1 and "not a valid API key" in err and "no API key was sent" not in err


def test_a_reader_that_goes_away_is_no_traceback(cli_env: dict[str, str]) -> None:
    """`sift methods | head -0`: the pipe's reader is gone before sift writes; sift stops
    quietly instead of printing a BrokenPipeError traceback."""
    process = subprocess.Popen(
        [sys.executable, "-m", "service", "methods"],
        cwd=REPO_ROOT,
        env={**os.environ, **cli_env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # no reader is left: sift's first write fails with EPIPE
    status = process.wait(timeout=120)
    errors = process.stderr.read().decode()
    assert status == 1, errors
    assert "Traceback" not in errors and "BrokenPipe" not in errors, errors
