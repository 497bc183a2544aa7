"""``sift top NAME --alpha A [--correction none|fdr|fwe]`` against a real ``sift serve``: the
features a test at level A selects are those scikit-learn's ``SelectFpr``, ``SelectFdr`` and
``SelectFwe`` select on the same rows, best first, each with its p-value, in the table and in
``--json``; arguments the service would not apply are refused before a request."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import numpy as np
import pytest
from sklearn.feature_selection import SelectFdr, SelectFpr, SelectFwe, f_classif

from siftstream import Client
from tests.support.client import sift
from tests.support.harness import ServiceProcess

FEATURES = 12
ROWS = 240
#: How far apart each feature's three class means are, in standard deviations per class: two
#: far apart, four near the 1% level (on either side of its Bonferroni correction), six noise.
SHIFTS = np.array([1.0, 0.6, 0.35, 0.3, 0.25, 0.22] + [0.0] * 6)
ALPHA = 0.01


@pytest.fixture
def cli_env(service: ServiceProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("SIFT_URL", service.url)
    monkeypatch.setenv("SIFT_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("SIFT_API_KEY", raising=False)
    return service.url


def labelled_rows() -> tuple[np.ndarray, np.ndarray]:
    """Three classes of rows, seeded; feature j's class means ``SHIFTS[j]`` apart."""
    labels = np.arange(ROWS) % 3
    rows = np.random.default_rng(1).normal(size=(ROWS, FEATURES)) + np.outer(labels, SHIFTS)
    return rows, labels


def anova_selector(url: str, name: str) -> tuple[np.ndarray, np.ndarray]:
    """An ``anova`` selector fed ``labelled_rows`` in three JSON chunks; its F and p-values as
    scikit-learn's ``f_classif`` computes them on the same rows."""
    rows, labels = labelled_rows()
    with Client(url) as client:
        client.create(name, "anova", n_features=FEATURES)
    with httpx.Client(base_url=url, timeout=60) as http:
        for start in range(0, ROWS, ROWS // 3):
            chunk = slice(start, start + ROWS // 3)
            pushed = http.post(
                f"/v1/selectors/{name}/chunks",
                json={"rows": rows[chunk].tolist(), "labels": labels[chunk].tolist()},
                params={"wait": "true"},
            )
            assert pushed.status_code == 200, pushed.text
    f, p = f_classif(rows, labels)
    return np.asarray(f), np.asarray(p)


def printed(out: str) -> tuple[str, list[str], list[list[str]]]:
    """``sift top``'s table: its title, its headers and its rows, split on whitespace."""
    title, header, *rows = out.rstrip("\n").split("\n")
    return title, header.split(), [row.split() for row in rows]


def best_first(f: np.ndarray, chosen: np.ndarray) -> list[str]:
    """The names of the chosen features (a mask) by F, highest first."""
    order = [int(i) for i in np.argsort(-f, kind="stable") if chosen[i]]
    return [f"f{i}" for i in order]


def test_alpha_prints_the_features_scikit_learns_selectors_keep_with_their_p_values(
    cli_env: str, capsys: pytest.CaptureFixture[str], selector_name: str
) -> None:
    f, p = anova_selector(cli_env, selector_name)
    rows, labels = labelled_rows()
    passing = p < ALPHA
    bonferroni = p < ALPHA / FEATURES
    # The data make the corrections differ: some features pass at 1% and not after Bonferroni,
    # some pass neither.
    assert 0 < bonferroni.sum() < passing.sum() < FEATURES
    np.testing.assert_array_equal(
        SelectFpr(f_classif, alpha=ALPHA).fit(rows, labels).get_support(), passing
    )
    np.testing.assert_array_equal(
        SelectFwe(f_classif, alpha=ALPHA).fit(rows, labels).get_support(), bonferroni
    )

    status, out, err = sift(capsys, "top", selector_name, "--alpha", str(ALPHA))
    assert status == 0, err
    title, headers, table = printed(out)
    assert title.endswith(f"(alpha {ALPHA:g}, correction none)")
    assert headers == ["rank", "index", "name", "score", "p-value"]
    assert [row[2] for row in table] == best_first(f, passing)
    for row in table:
        index = int(row[1])
        assert row[2] == f"f{index}"
        assert float(row[4]) == pytest.approx(p[index], rel=5e-3)  # printed to 3 digits
        assert float(row[4]) < ALPHA

    status, out, err = sift(
        capsys, "top", selector_name, "--alpha", str(ALPHA), "--correction", "fwe"
    )
    assert status == 0, err
    title, _, table = printed(out)
    assert title.endswith(f"(alpha {ALPHA:g}, correction fwe)")
    assert [row[2] for row in table] == best_first(f, bonferroni)

    fdr = SelectFdr(f_classif, alpha=ALPHA).fit(rows, labels).get_support()
    status, out, err = sift(
        capsys, "top", selector_name, "--alpha", str(ALPHA), "--correction", "fdr"
    )
    assert status == 0, err
    assert [row[2] for row in printed(out)[2]] == best_first(f, fdr)

    # -h still caps the answer: the h best of the features that pass.
    status, out, err = sift(capsys, "top", selector_name, "--alpha", str(ALPHA), "-h", "2")
    assert status == 0, err
    assert [row[2] for row in printed(out)[2]] == best_first(f, passing)[:2]


def test_alpha_in_json_and_p_values_without_alpha(
    cli_env: str, capsys: pytest.CaptureFixture[str], selector_name: str
) -> None:
    f, p = anova_selector(cli_env, selector_name)
    status, out, err = sift(
        capsys, "top", selector_name, "--alpha", str(ALPHA), "--correction", "fwe", "--json"
    )
    assert status == 0, err
    answer = json.loads(out)
    with Client(cli_env) as client:
        assert answer == client.top(selector_name, 20, alpha=ALPHA, correction="fwe").raw
    features = answer["features"]
    assert [feature["name"] for feature in features] == best_first(f, p < ALPHA / FEATURES)
    np.testing.assert_allclose(
        [feature["p_value"] for feature in features],
        [p[feature["index"]] for feature in features],
        rtol=1e-9,
    )

    # Without --alpha: every feature, ranked by F, each with its p-value; no test in the title.
    status, out, err = sift(capsys, "top", selector_name)
    assert status == 0, err
    title, headers, table = printed(out.split("\nstability")[0])
    assert "(alpha" not in title and headers[-1] == "p-value"
    assert [row[2] for row in table] == best_first(f, np.ones(FEATURES, dtype=bool))
    assert [float(row[4]) for row in table] == pytest.approx(
        [p[int(row[1])] for row in table], rel=5e-3
    )

    # A level that nothing passes: said, not an empty table.
    status, out, err = sift(capsys, "top", selector_name, "--alpha", "1e-300")
    assert status == 0, err
    assert out.rstrip("\n").split("\n")[1:] == ["no feature passes the test"]


def test_alpha_and_correction_are_refused_where_they_would_not_apply(
    cli_env: str, capsys: pytest.CaptureFixture[str], selector_name: str
) -> None:
    anova_selector(cli_env, selector_name)
    for alpha in ("0", "-0.5", "1.5", "nan"):
        status, out, err = sift(capsys, "top", selector_name, "--alpha", alpha)
        assert (status, out) == (1, ""), alpha
        assert err.startswith("sift top: --alpha must be in (0, 1]; got "), err
    assert sift(capsys, "top", selector_name, "--alpha", "1")[0] == 0  # the upper bound is in

    # The service ignores a correction without a level: the command says so instead.
    status, out, err = sift(capsys, "top", selector_name, "--correction", "fwe")
    assert (status, out) == (1, "")
    assert err.startswith("sift top: --correction fwe corrects the level of --alpha"), err

    status, _, err = sift(capsys, "top", selector_name, "--alpha", "0.05", "--correction", "bh")
    assert status == 2 and "invalid choice: 'bh'" in err
    status, _, err = sift(capsys, "top", selector_name, "--alpha", "0.05", "--strategy", "diverse")
    assert status == 1 and "does not apply with --strategy diverse" in err

    # A method without p-values: the service's refusal, in its words.
    plain = selector_name + "-variance"
    assert sift(capsys, "create", plain, "--method", "variance", "--n-features", "3")[0] == 0
    status, out, err = sift(capsys, "top", plain, "--alpha", "0.05")
    assert (status, out) == (1, "") and err.startswith("sift top: ") and "(422 " in err, err


def test_a_test_that_is_not_a_number_prints_nan_and_never_passes(
    cli_env: str, capsys: pytest.CaptureFixture[str], selector_name: str
) -> None:
    labels = np.arange(30) % 2
    rows = np.column_stack([3 * labels + np.random.default_rng(2).normal(size=30), np.ones(30)])
    with Client(cli_env) as client:
        client.create(selector_name, "anova", n_features=2)
        client.push(selector_name, rows, labels)
    status, out, err = sift(capsys, "top", selector_name)
    assert status == 0, err
    _, headers, table = printed(out)
    assert headers[-1] == "p-value"
    assert table[0][2] == "f0" and float(table[0][4]) < 1e-3
    assert table[1][2:] == ["f1", "nan", "nan"]  # no spread: the service's nulls
    status, out, err = sift(capsys, "top", selector_name, "--alpha", "1")
    assert status == 0, err
    assert [row[2] for row in printed(out)[2]] == ["f0"]
