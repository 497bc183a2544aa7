"""Stability, drift and alerts from the client and the ``sift`` command line, against a real
``sift serve`` and a real webhook receiver."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from service.algorithms.subsamples import DEFAULT_RESAMPLES
from service.monitoring.signing import new_secret, signed_headers
from siftstream import AsyncClient, Client, NotFoundError
from siftstream.webhooks import verify
from tests.support.client import sift
from tests.support.harness import ServiceProcess, poll
from tests.support.webhooks import webhook_receiver

FEATURES = 12
BEFORE = np.array([5.0, 4.0, 3.5, 3.0, 2.5] + [1.0] * 7)
AFTER = np.array([1.0] * 7 + [12.0, 11.0, 10.0, 9.0, 8.0])
#: Without alerts the baseline waits for a stable top 10: ten features clearly above two.
TEN_APART = np.array([5.0, 4.0, 3.5, 3.0, 2.5, 2.2, 2.0, 1.8, 1.6, 1.5, 0.5, 0.5])


@pytest.fixture
def cli_env(service: ServiceProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("SIFT_URL", service.url)
    monkeypatch.setenv("SIFT_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("SIFT_API_KEY", raising=False)
    return service.url


def settled(client: Client, name: str, rng: np.random.Generator) -> None:
    """A variance selector pushed until its top 10 made a version the baseline."""
    client.create(name, "variance", n_features=FEATURES)

    def has_baseline() -> bool:
        client.push(name, rng.standard_normal((400, FEATURES)) * TEN_APART)
        return client.drift(name, 5).baseline is not None

    poll(has_baseline, timeout_s=30, interval_s=0.05)


def test_top_drift_baseline_and_alerts_from_the_client(sift: Client, selector_name: str) -> None:
    rng = np.random.default_rng(0)
    with webhook_receiver() as receiver:
        sift.create(selector_name, "variance", n_features=FEATURES)
        created = sift.create_alert(selector_name, receiver.url, 0.5, h=5, label="moved")
        assert created.alert.h == 5 and created.alert.label == "moved"
        assert created.secret.startswith("whsec_")
        assert [a.id for a in sift.list_alerts(selector_name)] == [created.alert.id]

        def has_baseline() -> bool:
            sift.push(selector_name, rng.standard_normal((400, FEATURES)) * BEFORE)
            return sift.drift(selector_name, 5).baseline is not None

        poll(has_baseline, timeout_s=30, interval_s=0.05)
        sift.push(selector_name, rng.standard_normal((400, FEATURES)) * BEFORE)
        top = sift.top(selector_name, 5)
        assert top.stability is not None and top.stability.resamples == DEFAULT_RESAMPLES
        assert top.stability.corrected and top.stability.interval[0] <= top.stability.index
        assert all(
            band is not None and band[0] <= f.rank <= band[1]
            for f, band in zip(top.features, top.bands, strict=True)
        )
        drift = sift.drift(selector_name, 5)
        assert drift.baseline is not None and drift.baseline.how == "auto"
        assert drift.previous is not None and drift.version == top.version

        for _ in range(10):
            sift.push(selector_name, rng.standard_normal((400, FEATURES)) * AFTER)
        poll(receiver.all, timeout_s=20)
        (delivery,) = receiver.all()
        # What a receiver runs, from the client distribution alone.
        assert verify(created.secret, delivery.headers, delivery.body)
        assert not verify(created.secret, delivery.headers, delivery.body + b" ")
        events = poll(lambda: sift.alert_events(selector_name), timeout_s=10)
        assert events[0].id == delivery.event["id"] and events[0].crossing == 1
        assert {f.name for f in events[0].entered} <= {f"f{i}" for i in range(7, 12)}

        pinned = sift.set_baseline(selector_name)
        assert pinned.how == "pinned" and pinned.version == sift.describe(selector_name).version
        sift.forget_baseline(selector_name)
        assert sift.drift(selector_name).baseline is None
        sift.delete_alert(selector_name, created.alert.id)
        assert sift.list_alerts(selector_name) == []
        with pytest.raises(NotFoundError):
            sift.delete_alert(selector_name, created.alert.id)


async def test_the_async_client_has_the_same_operations(
    service: ServiceProcess, selector_name: str
) -> None:
    async with AsyncClient(service.url) as client:
        await client.create(selector_name, "ocfs", n_features=3)
        shift = np.vstack([np.tile([2.0, 0.0, 0.0], (20, 1)), np.zeros((20, 3))])
        rows = np.random.default_rng(2).standard_normal((40, 3)) + shift
        await client.push(selector_name, rows, y=["a"] * 20 + ["b"] * 20)
        top = await client.top(selector_name, 2)
        assert top.stability is not None
        assert (await client.drift(selector_name, 2)).version == top.version
        assert await client.list_alerts(selector_name) == []
        assert await client.alert_events(selector_name) == []


def test_the_client_verifies_what_the_service_signs() -> None:
    body = b'{"id": "a-1"}'
    secret, other = new_secret(), new_secret()
    headers = signed_headers([secret], "a-1", body, time.time())
    assert verify(secret, headers, body)
    assert not verify(other, headers, body)
    stale = signed_headers([secret], "a-1", body, time.time() - 3600)
    assert not verify(secret, stale, body)  # a replay, an hour later
    assert not verify(secret, {**headers, "webhook-id": "a-2"}, body)  # another event's id
    rotating = signed_headers([other, secret], "a-1", body, time.time())
    assert verify(secret, rotating, body) and verify(other, rotating, body)


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"webhook-id": "a", "webhook-timestamp": "1e99", "webhook-signature": "v1,AAAA"},
        {"webhook-id": "a", "webhook-timestamp": "9" * 400, "webhook-signature": "v1,AAAA"},
        {"webhook-id": "a", "webhook-timestamp": "-5", "webhook-signature": "v1,AAAA"},
        {"webhook-id": "a", "webhook-timestamp": "١٢٣", "webhook-signature": "v1,AAAA"},
        {"webhook-id": "a", "webhook-timestamp": "NOW", "webhook-signature": "v1"},
        {"webhook-id": None, "webhook-timestamp": 5, "webhook-signature": b"v1,x"},
        {"webhook-id": "a", "webhook-timestamp": "TS", "webhook-signature": "v1,!!!! v2 ,,,"},
        {1: 2, "webhook-signature": "v1,=" * 1000},
    ],
)
def test_verify_answers_false_and_never_raises_on_hostile_headers(headers: dict[Any, Any]) -> None:
    now = str(int(time.time()))
    shaped = {k: (now if v == "TS" else v) for k, v in headers.items()}
    assert verify(new_secret(), shaped, b"{}") is False
    assert verify("not base64 at all \u0000", shaped, b"{}") is False
    assert verify(new_secret(), "not a mapping", b"{}") is False  # type: ignore[arg-type]


def test_sift_top_watch_drift_baseline_and_alerts(
    cli_env: str, capsys: pytest.CaptureFixture[str], selector_name: str
) -> None:
    rng = np.random.default_rng(1)
    with Client(cli_env) as client:
        settled(client, selector_name, rng)
    status, out, err = sift(capsys, "top", selector_name, "-h", "5")
    assert status == 0, err
    table, stability, bands = out.rstrip("\n").rsplit("\n", 2)
    assert table.splitlines()[1].startswith("rank  index  name")
    assert (
        stability.startswith("stability of the top 5: ")
        and f"{DEFAULT_RESAMPLES} resamples" in stability
    )
    assert bands.startswith("bands: f0 ")

    status, out, err = sift(capsys, "watch", selector_name, "-h", "5", "--once")
    assert status == 0, err
    assert "stability of the top 5" in out and "drift of the top 5 at version" in out
    assert "since the baseline, auto (version" in out and "\x1b[" not in out

    status, out, _ = sift(capsys, "drift", selector_name, "-h", "3")
    assert status == 0 and out.startswith("drift of the top 3 at version")
    status, out, _ = sift(capsys, "baseline", selector_name)
    assert status == 0 and "is the baseline (pinned)" in out
    status, out, _ = sift(capsys, "baseline", selector_name, "--forget")
    assert status == 0 and "forgot the baseline" in out
    status, out, _ = sift(capsys, "drift", selector_name, "-h", "3")
    waiting = "since the baseline: none yet (a version becomes it when the stability of its top 10"
    assert status == 0 and f"{waiting} reaches 0.75; now 1.00)" in out, out

    status, out, err = sift(
        capsys,
        "alerts",
        "add",
        selector_name,
        "http://127.0.0.1:9/hook",
        "--threshold",
        "0.4",
        "-h",
        "5",
    )
    assert status == 0, err
    alert_id = out.split()[1]
    assert "secret (shown once" in out
    status, out, _ = sift(capsys, "alerts", "ls", selector_name)
    assert status == 0 and alert_id in out and "0.4" in out
    status, out, _ = sift(capsys, "alerts", "events", selector_name)
    assert status == 0 and out.strip() == "no events"
    status, out, _ = sift(capsys, "alerts", "rm", selector_name, alert_id)
    assert status == 0 and f"deleted alert {alert_id}" in out
    status, _, err = sift(capsys, "alerts", "add", selector_name, "ftp://x/y", "--threshold", "0.4")
    assert status == 1 and "422" in err
