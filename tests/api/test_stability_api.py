"""The stability of GET .../top over HTTP: every row method estimates it, feature-column methods
answer null, the published top and every score give the same answer, and selectors without
resamples (created before they existed, or with 0) keep working and answer null."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import httpx
import numpy as np
import pytest

from service.algorithms import METHODS
from service.algorithms.base import EstimatesStability
from service.algorithms.subsamples import DEFAULT_RESAMPLES
from service.selectors.archive import _PREAMBLE, FORMAT_VERSION, MAGIC, unpack
from service.store.codec import decode_array
from tests.support.api import assert_problem, make_settings, running_app

FEATURES = 10
SCALE = np.array([5.0, 4.0, 3.0, 2.0, 1.5] + [1.0] * 5)


def chunk(rng: np.random.Generator, n: int = 200) -> np.ndarray:
    rows: np.ndarray = rng.standard_normal((n, FEATURES)) * SCALE
    return rows


def body_of(method: str, x: np.ndarray, rng: np.random.Generator) -> dict[str, Any]:
    kind = METHODS[method].chunk_kind
    if METHODS[method].examples[0].low >= 0 and kind == "labelled rows":  # chi2: counts
        labels = (x[:, 0] > 0).astype(int) + 2 * (x[:, 1] > 0).astype(int)
        return {"rows": np.abs(x).tolist(), "labels": labels.tolist()}
    if kind == "labelled rows":
        labels = (x[:, 0] > 0).astype(int) + 2 * (x[:, 1] > 0).astype(int)
        return {"rows": x.tolist(), "labels": labels.tolist()}
    if kind == "rows with a target":
        return {"rows": x.tolist(), "targets": (x[:, 0] + 0.5 * x[:, 1]).tolist()}
    if kind == "views":
        return {"views": {"a": np.abs(x[:, :6]).tolist(), "b": np.abs(x[:, 6:]).tolist()}}
    return {"rows": x.tolist()}


def creation(method: str, name: str, **params: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "method": method, "params": params}
    if METHODS[method].chunk_kind == "views":
        body["views"] = {"a": 6, "b": 4}
        body["params"] = {"n_clusters": 2, "max_iter": 10, **params}
    else:
        body["n_features"] = FEATURES
    return body


async def filled(
    http: httpx.AsyncClient, method: str, name: str, partitions: int = 1, **params: Any
) -> None:
    body = creation(method, name, **params)
    if partitions > 1:
        body["partitions"] = partitions
    created = await http.post("/v1/selectors", json=body)
    assert created.status_code == 201, created.text
    rng = np.random.default_rng(0)
    for _ in range(3):
        response = await http.post(
            f"/v1/selectors/{name}/chunks", json=body_of(method, chunk(rng), rng)
        )
        assert response.status_code == 200, response.text


async def top(http: httpx.AsyncClient, name: str, h: int) -> dict[str, Any]:
    response = await http.get(f"/v1/selectors/{name}/top", params={"h": h})
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


ROW_METHODS = sorted(n for n, m in METHODS.items() if m.chunk_kind != "columns")


@pytest.mark.parametrize("method", ROW_METHODS)
async def test_every_row_method_says_how_settled_its_top_is(client, method):
    await filled(client, method, "s")
    answer = await top(client, "s", 3)
    stability = answer["stability"]
    assert stability is not None, answer
    assert (
        stability["resamples"] == DEFAULT_RESAMPLES
        and stability["h"] == 3
        and stability["level"] == 0.95
    )
    low, high = stability["interval"]
    assert -1 <= low <= stability["index"] <= high <= 1
    estimator = METHODS[method]
    assert isinstance(estimator, EstimatesStability)
    if method == "fsds":  # its text names the kernel mode (cosine by default)
        assert "in cosine mode" in stability["estimated_by"]
    else:
        assert stability["estimated_by"] == estimator.stability_estimate
    for feature in answer["features"]:
        lowest, highest = feature["band"]
        assert 1 <= lowest <= feature["rank"] <= highest  # the band holds the current rank


@pytest.mark.parametrize(
    "params, said, not_said",
    [
        ({}, "in cosine mode", "gaussian"),
        ({"kernel": "cosine"}, "in cosine mode", "gaussian"),
        ({"kernel": "gaussian", "kernel_components": 16}, "in gaussian mode", "cosine"),
    ],
)
async def test_fsds_says_how_it_estimates_in_its_own_kernel_mode(client, params, said, not_said):
    """``estimated_by`` names the selector's kernel mode: a cosine selector's never speaks of
    the gaussian mode's bandwidth."""
    await filled(client, "fsds", "k", **params)
    estimated_by = (await top(client, "k", 3))["stability"]["estimated_by"]
    assert said in estimated_by and not_said not in estimated_by
    assert ("bandwidth" in estimated_by) == (said == "in gaussian mode")


async def test_feature_column_methods_answer_null(client):
    created = await client.post(
        "/v1/selectors", json={"name": "c", "method": "ofs", "n_samples": 20}
    )
    assert created.status_code == 201, created.text
    columns = np.random.default_rng(1).standard_normal((6, 20)).tolist()
    pushed = await client.post("/v1/selectors/c/features", json={"columns": columns})
    assert pushed.status_code == 200, pushed.text
    answer = await top(client, "c", 3)
    assert answer["stability"] is None and all("band" not in f for f in answer["features"])
    methods = (await client.get("/v1/methods")).json()["methods"]
    offering = {m["name"] for m in methods if "stability" in m["capabilities"]}
    assert offering == set(ROW_METHODS)


@pytest.mark.parametrize("method", [m for m in ROW_METHODS if METHODS[m].chunk_kind != "views"])
async def test_the_published_top_and_every_score_give_one_answer(redis_url, redis_client, method):
    """h within what each version publishes (SIFT_HISTORY_TOP) is answered from the published
    resample ranks; deeper, from what the subsamples' scores read of the version (a stored
    subsample's fields, the whole stream's a derived one is taken from, FSDS's sketches from a
    checkpoint): the same numbers. (Multi-view selectors always answer the second way.)"""
    answers = []
    for history_top in (100, 4):
        await redis_client.flushall()
        settings = make_settings(redis_url, history_top=history_top)
        async with running_app(settings) as (_app, http):
            await filled(http, method, "s")
            answers.append(await top(http, "s", 6))
    published, computed = answers
    assert published["stability"] == computed["stability"]
    assert published["features"] == computed["features"]


def with_params(archive: bytes, edit: Any) -> bytes:
    """An archive whose selector's params are ``edit(params)`` (a new dict), its state as it
    was."""
    document = unpack(archive)
    manifest = dict(document.manifest)
    manifest["selector"] = dict(manifest["selector"])
    manifest["selector"]["params"] = edit(dict(manifest["selector"]["params"]))
    encoded = json.dumps(manifest).encode()
    members = [*document.state.values(), *document.segments.values()]
    header = _PREAMBLE.pack(MAGIC, FORMAT_VERSION, 0, len(encoded))
    body = b"".join([header, encoded, *members])
    return body + hashlib.sha256(body).digest()


def without_resamples(archive: bytes) -> bytes:
    """An archive as the release before resamples wrote it: its params without the key (the
    state of a selector created with resamples 0 has no subsample fields, as then)."""

    def edit(params: dict[str, Any]) -> dict[str, Any]:
        assert params.pop("resamples") == 0
        return params

    return with_params(archive, edit)


async def test_selectors_from_before_resamples_answer_null_and_keep_working(client, store):
    """A selector of the release before resamples: params without the key, a state without
    subsample fields (recreated here from an archive of one created with resamples 0, its
    params' key removed). It is imported, stored as it was, applied, exported again and
    merged as before, and answers stability null."""
    await filled(client, "variance", "zero", resamples=0)
    assert (await store.registry.get_meta("zero")).params == {"ddof": 0, "resamples": 0}
    assert (await top(client, "zero", 3))["stability"] is None
    exported = await client.get("/v1/selectors/zero/export")
    assert exported.status_code == 200
    media = {"content-type": exported.headers["content-type"]}
    imported = await client.post(
        "/v1/selectors/import",
        params={"name": "old"},
        content=without_resamples(exported.content),
        headers=media,
    )
    assert imported.status_code == 201, imported.text
    assert imported.json()["params"] == {"ddof": 0}
    stored = await store.registry.get_meta("old")
    assert stored.params == {"ddof": 0}  # what the earlier release stored
    snapshot = await store.checkpoints.snapshot("old")
    assert {"mean", "m2", "variance"} <= set(snapshot.state)
    assert not [field for field in snapshot.state if "resample" in field]
    assert (await top(client, "old", 3))["stability"] is None
    more = await client.post(
        "/v1/selectors/old/chunks", json={"rows": chunk(np.random.default_rng(5)).tolist()}
    )
    assert more.status_code == 200 and more.json()["rows_seen"] == 800
    assert (await top(client, "old", 3))["stability"] is None
    again = await client.get("/v1/selectors/old/export")
    assert again.status_code == 200
    copy = await client.post(
        "/v1/selectors/import", params={"name": "copy"}, content=again.content, headers=media
    )
    assert copy.status_code == 201 and copy.json()["params"] == {"ddof": 0}
    # A merge adds resample to resample: selectors that keep none merge (whatever the key
    # says) ...
    merged = await client.post("/v1/selectors/copy/merge", json={"from": "zero"})
    assert merged.status_code == 200, merged.text
    # ... and one with resamples does not take one without.
    await filled(client, "variance", "new")
    assert_problem(
        await client.post("/v1/selectors/new/merge", json={"from": "old"}), 422, "resamples"
    )


async def test_fsds_selectors_from_before_single_precision_subsamples_keep_theirs(client, store):
    """An fsds selector of the release before ``resample_ell`` and ``resample_precision``: its
    params without them, its subsample sketches of ell rows in double precision (recreated from
    an archive of one created with ``resample_precision: double``, the keys removed). It is
    imported and stored as it was, applied, answers its stability, and exports as it was; an
    archive whose params say single precision over a double-precision state is refused."""
    await filled(client, "fsds", "dbl", resample_precision="double")
    exported = await client.get("/v1/selectors/dbl/export")
    assert exported.status_code == 200
    media = {"content-type": exported.headers["content-type"]}
    layout = ("resample_ell", "resample_precision")

    def older(params: dict[str, Any]) -> dict[str, Any]:
        assert (params["resample_ell"], params["resample_precision"]) == (11, "double")
        return {k: v for k, v in params.items() if k not in layout}

    imported = await client.post(
        "/v1/selectors/import",
        params={"name": "old"},
        content=with_params(exported.content, older),
        headers=media,
    )
    assert imported.status_code == 201, imported.text
    assert not set(layout) & set(imported.json()["params"])
    assert not set(layout) & set((await store.registry.get_meta("old")).params)
    snapshot = await store.checkpoints.snapshot("old")
    assert decode_array(snapshot.state["resample0:sketch_rows"]).dtype == np.float64
    more = await client.post(
        "/v1/selectors/old/chunks", json={"rows": chunk(np.random.default_rng(5)).tolist()}
    )
    assert more.status_code == 200 and more.json()["rows_seen"] == 800
    stability = (await top(client, "old", 3))["stability"]
    assert stability is not None and stability["resamples"] == DEFAULT_RESAMPLES
    again = await client.get("/v1/selectors/old/export")
    assert not set(layout) & set(unpack(again.content).manifest["selector"]["params"])
    # The new default keeps the subsamples in single precision: a double-precision state
    # under params that say so is not one of its states.
    await filled(client, "fsds", "new")
    described = (await client.get("/v1/selectors/new")).json()
    assert described["params"]["resample_precision"] == "single"
    assert described["params"]["resample_ell"] == 11
    single = await client.post(
        "/v1/selectors/import",
        params={"name": "crafted"},
        content=with_params(
            exported.content, lambda params: {**params, "resample_precision": "single"}
        ),
        headers=media,
    )
    assert_problem(single, 422, "float32")


async def test_partitioned_selectors_merge_their_resamples(client):
    await filled(client, "variance", "p", partitions=2)
    answer = await top(client, "p", 3)
    assert answer["versions"] is not None and answer["stability"] is not None
    assert answer["stability"]["resamples"] == DEFAULT_RESAMPLES


async def test_descriptions_leave_the_resamples_copies_out(client):
    await filled(client, "fsds", "s")
    described = (await client.get("/v1/selectors/s")).json()
    assert described["params"]["resamples"] == DEFAULT_RESAMPLES
    assert not [key for key in described["state"] if key.startswith("resample")]
    assert described["state"]["rows_seen"] == 600
