"""Selector export and import over HTTP: every method round-trips exactly and goes on exactly;
damaged, foreign or crafted archives are refused with a problem and create nothing."""

from __future__ import annotations

import hashlib
import json
import struct
import zlib
from typing import Any

import numpy as np
import pytest

from service.algorithms import METHODS
from service.store.codec import decode_array, decode_state, encode_array, encode_state
from service.store.keys import SelectorKeys
from tests.support.api import make_settings, running_app
from tests.support.archive import (
    ADMIN,
    ADMIN_TOKEN,
    ARCHIVE,
    SCENARIOS,
    answers,
    create,
    export,
    import_,
    push,
    weights,
)

pytestmark = pytest.mark.asyncio


async def test_every_method_has_a_scenario() -> None:
    assert set(SCENARIOS) == set(METHODS)


@pytest.mark.parametrize("method", sorted(METHODS))
async def test_round_trip_answers_identically_and_goes_on_identically(client, method):
    scenario = SCENARIOS[method]
    await create(client, "src", method)
    for i in range(scenario.before):
        await push(client, "src", method, i)
    archive = await export(client, "src")

    response = await import_(client, archive, name="copy")
    assert response.status_code == 201, response.text
    assert response.headers["location"] == "/v1/selectors/copy"
    created = response.json()
    original = (await client.get("/v1/selectors/src")).json()
    assert created["version"] == original["version"] == scenario.before
    assert created["params"] == original["params"]

    assert await answers(client, "copy", method) == await answers(client, "src", method)
    np.testing.assert_array_equal(await weights(client, "copy"), await weights(client, "src"))
    history = (await client.get("/v1/selectors/copy/history")).json()["versions"]
    assert [entry["version"] for entry in history] == [scenario.before]

    # The same further chunks, to both: the same states (threads may reorder sums: 1e-12).
    for i in range(scenario.before, scenario.before + scenario.after):
        first = await push(client, "src", method, i)
        second = await push(client, "copy", method, i)
        assert {k: v for k, v in first.items() if k != "log_id"} == {
            k: v for k, v in second.items() if k != "log_id"
        }
    np.testing.assert_allclose(
        await weights(client, "copy"), await weights(client, "src"), rtol=1e-12, atol=0
    )
    after_src, after_copy = (
        await answers(client, "src", method),
        await answers(client, "copy", method),
    )
    assert after_copy["describe"]["version"] == scenario.before + scenario.after
    assert after_copy["describe"] == after_src["describe"]
    assert [f["index"] for f in after_copy["top"]["features"]] == [
        f["index"] for f in after_src["top"]["features"]
    ]


async def test_export_applies_pending_chunks_first(client):
    await create(client, "busy", "variance")
    for i in range(4):
        await push(client, "busy", "variance", i, wait=False)
    archive = await export(client, "busy")
    assert (await import_(client, archive, name="calm")).status_code == 201
    calm = (await client.get("/v1/selectors/calm")).json()
    busy = (await client.get("/v1/selectors/busy")).json()
    assert calm["rows_seen"] == busy["rows_seen"] == 36
    assert calm["version"] == busy["version"] and calm["state"]["pending_entries"] == 0
    np.testing.assert_array_equal(await weights(client, "calm"), await weights(client, "busy"))


async def test_import_under_the_archives_name_and_over_an_existing_one(client):
    await create(client, "orig", "ocfs")
    await push(client, "orig", "ocfs", 0)
    archive = await export(client, "orig")
    classes = (await client.get("/v1/selectors/orig")).json()["classes"]
    assert len(classes) == 4
    taken = await import_(client, archive)
    assert taken.status_code == 409, taken.text
    assert taken.headers["content-type"] == "application/problem+json"
    assert "already exists" in taken.json()["detail"]
    assert (await client.delete("/v1/selectors/orig")).status_code == 204
    recreated = await import_(client, archive)
    assert recreated.status_code == 201, recreated.text
    assert recreated.json()["name"] == "orig"
    assert (await client.get("/v1/selectors/orig")).json()["classes"] == classes


# -- damaged and crafted archives ------------------------------------------------------------


def split(archive: bytes) -> tuple[dict[str, Any], dict[str, bytes], dict[str, bytes]]:
    """An archive's manifest, state members and segments (an independent reader of the format
    docs/export-import.md documents)."""
    magic, version, _reserved, length = struct.unpack_from("<8sIIQ", archive, 0)
    assert magic == b"SIFTARCH" and version == 1
    assert hashlib.sha256(archive[:-32]).digest() == archive[-32:]
    manifest = json.loads(archive[24 : 24 + length])
    offset = 24 + length
    parts: list[dict[str, bytes]] = []
    for key, label in (("state", "field"), ("segments", "id")):
        part = {}
        for member in manifest[key]:
            part[member[label]] = archive[offset : offset + member["length"]]
            offset += member["length"]
        parts.append(part)
    assert offset == len(archive) - 32
    return manifest, parts[0], parts[1]


def join(manifest: dict[str, Any], state: dict[str, bytes], segments: dict[str, bytes]) -> bytes:
    """An archive with a valid digest around whatever it is given (crafted content)."""
    manifest = {
        **manifest,
        "state": [{"field": f, "length": len(v)} for f, v in state.items()],
        "segments": [{"id": s, "length": len(v)} for s, v in segments.items()],
    }
    encoded = json.dumps(manifest).encode()
    body = struct.pack("<8sIIQ", b"SIFTARCH", 1, 0, len(encoded)) + encoded
    body += b"".join([*state.values(), *segments.values()])
    return body + hashlib.sha256(body).digest()


def with_array(archive: bytes, field_name: str, array: np.ndarray) -> bytes:
    manifest, state, segments = split(archive)
    return join(manifest, {**state, field_name: encode_array(array)}, segments)


def with_state(archive: bytes, **fields: Any) -> bytes:
    """``archive`` with some state fields (arrays or scalars) replaced, all else as it was."""
    manifest, state, segments = split(archive)
    decoded = decode_state(state)
    return join(manifest, encode_state({**decoded, **fields}), segments)


def zeros_blob(length: int) -> bytes:
    """A valid array blob of ``length`` float64 zeros, flagged ZEROS and without a payload,
    written by hand from the layout docs/export-import.md documents (encoding the array
    itself would need its memory)."""
    header = bytearray(struct.pack("<8sBBHI", b"SIFTARR1", 3, 1, 1, 0) + b"<f8")
    header += struct.pack("<Q", length) + bytes(5)  # the shape, then padding to 32 bytes
    struct.pack_into("<I", header, 12, zlib.crc32(bytes(header)))
    return bytes(header)


@pytest.fixture
async def exported(client) -> dict[str, bytes]:
    """Archives of a variance, an iqrp and an ofs selector (the sources are then deleted)."""
    out = {}
    for method in ("variance", "iqrp", "ofs"):
        await create(client, method, method)
        for i in range(2):
            await push(client, method, method, i)
        out[method] = await export(client, method)
        assert (await client.delete(f"/v1/selectors/{method}")).status_code == 204
    return out


def damaged(exported: dict[str, bytes]) -> list[tuple[str, bytes, str]]:
    """(what, archive, a fragment of the problem's detail)."""
    good = exported["variance"]
    manifest, state, segments = split(good)
    flipped = bytearray(good)
    flipped[len(good) // 2] ^= 0x01
    other_version = bytearray(good)
    other_version[8:12] = struct.pack("<I", 2)
    variance = decode_array(state["variance"])
    iqrp_manifest, iqrp_state, iqrp_segments = split(exported["iqrp"])
    ofs = exported["ofs"]
    return [
        ("empty", b"", "not a Sift selector archive"),
        ("truncated", good[: len(good) - 100], "damaged"),
        ("a flipped byte", bytes(flipped), "damaged"),
        ("another format version", bytes(other_version), "format version 2 is not understood"),
        ("wrong magic", b"PK\x03\x04" + good[4:], "not a Sift selector archive"),
        ("json", b'{"format": "sift-selector-archive"}' + bytes(40), "not a Sift selector"),
        ("wrong shape", with_array(good, "variance", np.zeros(3)), "must have 5 entries"),
        (
            "wrong dtype",
            with_array(good, "variance", variance.astype(np.float32)),
            "must be a 1-D float64 array",
        ),
        (
            "NaN",
            with_array(good, "mean", np.where(np.arange(5) == 2, np.nan, variance)),
            "NaN",
        ),
        (
            "a field missing",
            join(manifest, {k: v for k, v in state.items() if k != "m2"}, segments),
            "lacks ['m2']",
        ),
        (
            "params that do not resolve",
            join(
                {**manifest, "selector": {**manifest["selector"], "params": {"ddof": 7}}},
                state,
                segments,
            ),
            "ddof",
        ),
        (
            "an unknown method",
            join(
                {**manifest, "selector": {**manifest["selector"], "method": "pickle"}},
                state,
                segments,
            ),
            "unknown method",
        ),
        (
            "a count that disagrees",
            join({**manifest, "items_seen": 5}, state, segments),
            "must be given again as 'rows_seen'",
        ),
        (
            "a version beyond 2^53",
            join({**manifest, "version": 10**30}, state, segments),
            "'version' must be an integer from 0 to 9007199254740991",
        ),
        (
            "a count beyond 2^53",
            join({**manifest, "items_seen": 10**30, "rows_seen": 10**30}, state, segments),
            "'items_seen' must be an integer from 0 to 9007199254740991",
        ),
        (
            "a negative version",
            join({**manifest, "version": -1}, state, segments),
            "'version' must be an integer from 0",
        ),
        (
            "created_at 10^400",
            join(
                {**manifest, "selector": {**manifest["selector"], "created_at": 10**400}},
                state,
                segments,
            ),
            "created_at must be a time",
        ),
        ("a negative count of rows", with_state(good, count=-5), "must be an integer from 0"),
        (
            "moments without rows",
            with_state(good, count=0, m2=np.ones(5), mean=np.zeros(5), variance=np.zeros(5)),
            "counts no rows has zero moments",
        ),
        ("a negative M2", with_state(good, m2=-np.ones(5)), "nonnegative"),
        (
            "a variance that is not M2 / count",
            with_state(good, variance=variance + 1.0),
            "M2 / (count - ddof)",
        ),
        ("values near 1e300", with_state(good, m2=np.full(5, 1e300)), "in magnitude"),
        (
            "means beyond the values' bound",
            with_state(good, mean=np.full(5, 1e60)),
            "within the values' bound",
        ),
        (
            "a missing segment",
            join(iqrp_manifest, iqrp_state, dict(list(iqrp_segments.items())[:-1])),
            "missing",
        ),
        (
            "a segment of the wrong shape",
            join(
                iqrp_manifest,
                iqrp_state,
                {s: encode_array(np.zeros((5, 3))) for s in iqrp_segments},
            ),
            "must be a float64 block of shape (5, 2)",
        ),
        (
            "a segment of zeros that declares more than it carries",
            join(
                iqrp_manifest,
                iqrp_state,
                {s: encode_array(np.zeros((5, 2)), elide_zeros=True) for s in iqrp_segments},
            ),
            "segments must be stored in full",
        ),
        (
            "a state of zeros declaring 8 GiB in 32 bytes",
            join(manifest, {**state, "m2": zeros_blob(2**30)}, segments),
            "SIFT_MAX_STATE_BYTES",
        ),
        (
            "more features seen than scores",
            join({**split(ofs)[0], "items_seen": 9, "features_seen": 9}, *split(ofs)[1:]),
            "has scores for 4 features; having seen 9 items",
        ),
        (
            "a reserved item name",
            join({**split(ofs)[0], "item_names": [[0, "f3"]]}, *split(ofs)[1:]),
            "out of place",
        ),
    ]


async def test_damaged_or_crafted_archives_are_refused_and_create_nothing(client, exported):
    assert (await client.get("/v1/selectors")).json()["selectors"] == []
    for what, archive, fragment in damaged(exported):
        response = await import_(client, archive, name="victim")
        assert response.status_code == 422, (what, response.text)
        assert response.headers["content-type"] == "application/problem+json", what
        assert fragment in response.json()["detail"], (what, response.json()["detail"])
        assert (await client.get("/v1/selectors")).json()["selectors"] == [], what
    assert (await client.get("/v1/selectors/victim")).status_code == 404


async def test_the_format_version_problem_names_the_versions_understood(client, exported):
    other = bytearray(exported["variance"])
    other[8:12] = struct.pack("<I", 7)
    response = await import_(client, bytes(other))
    assert response.status_code == 422
    assert response.json()["detail"].endswith("this server reads format version(s) 1")


async def test_archives_over_the_limit_are_refused_before_reading_them(app_factory):
    async with app_factory(max_archive_bytes=2048) as (_app, http):
        await create(http, "wide", "variance", n_features=400)
        # A state that learned something (a new one's zeros take a header per array).
        row = {"rows": [[float(i) for i in range(400)]] * 2}
        assert (await http.post("/v1/selectors/wide/chunks", json=row)).status_code == 200
        too_big = await http.get("/v1/selectors/wide/export")
        assert too_big.status_code == 422, too_big.text
        assert "SIFT_MAX_ARCHIVE_BYTES" in too_big.json()["detail"]
        response = await import_(http, bytes(4096), name="big")
        assert response.status_code == 413, response.text
        assert response.headers["content-type"] == "application/problem+json"
        assert (await http.get("/v1/selectors/big")).status_code == 404


async def test_import_media_types(client, exported):
    wrong = await client.post(
        "/v1/selectors/import", content=exported["variance"], headers={"content-type": "text/csv"}
    )
    assert wrong.status_code == 415, wrong.text
    binary = await client.post(
        "/v1/selectors/import",
        content=exported["variance"],
        headers={"content-type": "application/octet-stream"},
    )
    assert binary.status_code == 201, binary.text


async def test_a_state_that_exceeds_the_state_limit_is_refused(app_factory):
    async with app_factory() as (_app, http):
        await create(http, "roomy", "variance", n_features=300)
        archive = await export(http, "roomy")
    async with app_factory(max_state_bytes=4096) as (_app, http):
        response = await import_(http, archive, name="cramped")
        assert response.status_code == 422, response.text
        assert response.json()["type"].endswith("state-too-large")


async def test_scopes_read_exports_admin_imports(redis_url, redis_client):
    settings = make_settings(redis_url, api_token=ADMIN_TOKEN)
    async with running_app(settings) as (_app, http):
        keys = {}
        for scope in ("read", "write", "admin"):
            response = await http.post(
                "/v1/keys", json={"scopes": [scope], "label": scope}, headers=ADMIN
            )
            keys[scope] = {"authorization": f"Bearer {response.json()['key']}"}
        prefixed = await http.post(
            "/v1/keys", json={"scopes": ["admin"], "prefix": "team-"}, headers=ADMIN
        )
        team = {"authorization": f"Bearer {prefixed.json()['key']}"}
        body = {"name": "s", "method": "variance", "n_features": 3}
        assert (await http.post("/v1/selectors", json=body, headers=ADMIN)).status_code == 201
        archive = await export(http, "s", headers=keys["read"])
        assert (await http.get("/v1/selectors/s/export")).status_code == 401
        for scope in ("read", "write"):
            refused = await http.post(
                "/v1/selectors/import",
                content=archive,
                headers={**ARCHIVE, **keys[scope]},
                params={"name": "t"},
            )
            assert refused.status_code == 403, refused.text
            assert "admin" in refused.json()["detail"]
        # A key with a name prefix imports only under names it may create.
        outside = await http.post(
            "/v1/selectors/import", content=archive, headers={**ARCHIVE, **team}
        )
        assert outside.status_code == 403, outside.text
        inside = await http.post(
            "/v1/selectors/import",
            content=archive,
            headers={**ARCHIVE, **team},
            params={"name": "team-s"},
        )
        assert inside.status_code == 201, inside.text
        accepted = await http.post(
            "/v1/selectors/import",
            content=archive,
            headers={**ARCHIVE, **keys["admin"]},
            params={"name": "t"},
        )
        assert accepted.status_code == 201, accepted.text


async def test_a_version_past_10_to_the_14_counts_on_exactly(client, exported):
    """Lua prints numbers with %.14g: version 10^14 - 1 + 1 must not become the string 1e+14."""
    manifest, state, segments = split(exported["variance"])
    huge = 10**14 - 1
    archive = join({**manifest, "version": huge}, state, segments)
    created = await import_(client, archive, name="old-timer")
    assert created.status_code == 201, created.text
    assert created.json()["version"] == huge
    pushed = await push(client, "old-timer", "variance", 7)
    assert pushed["version"] == huge + 1
    described = (await client.get("/v1/selectors/old-timer")).json()
    assert described["version"] == huge + 1
    listed = await client.get("/v1/selectors")
    assert listed.status_code == 200, listed.text
    assert [s["version"] for s in listed.json()["selectors"]] == [huge + 1]


async def test_one_damaged_selector_never_fails_a_listing(client, redis_client):
    for name in ("a-fine", "b-damaged", "c-fine"):
        await create(client, name, "variance")
    await redis_client.hset(SelectorKeys("sift", "b-damaged").head, "version", "1e+14")
    listed = await client.get("/v1/selectors")
    assert listed.status_code == 200, listed.text
    assert [s["name"] for s in listed.json()["selectors"]] == ["a-fine", "c-fine"]
    assert listed.json()["unreadable"] == ["b-damaged"]
    damaged = await client.get("/v1/selectors/b-damaged")
    assert damaged.status_code == 500 and "1e+14" not in damaged.text
