"""Baselines and alerts fit the selector: on a selector of d features the baseline rule and an
alert judge at most its top d - 1 (a top of every feature has no stability), so every selector
of two features or more gets a baseline and can alert. Against a real ``sift serve`` and a real
webhook receiver, through the ``sift`` command line: the rule ``sift drift`` states, ``sift
alerts add`` with and without ``-h``, the baseline set by the service, and an event delivered
when the ranking really changes. A selector wider than 10 features keeps the top 10."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import redis

from service.store.keys import DEFAULT_PREFIX, SelectorKeys
from service.store.monitoring_records import HistoryEntry
from siftstream import Client
from siftstream.webhooks import verify
from tests.support.client import sift
from tests.support.harness import ServiceProcess, wait_for
from tests.support.webhooks import webhook_receiver

THRESHOLD = 0.3


@pytest.fixture
def cli_env(service: ServiceProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("SIFT_URL", service.url)
    monkeypatch.setenv("SIFT_STATE_DIR", str(tmp_path / "state"))
    return service.url


def recorded_stability_h(service: ServiceProcess, name: str) -> int:
    """The h of the stability the newest history entry of ``name`` records."""
    assert service.redis_url is not None
    with redis.Redis.from_url(service.redis_url) as direct:
        raw = direct.lindex(SelectorKeys(DEFAULT_PREFIX, name).history, 0)
    assert raw is not None
    entry = HistoryEntry.from_json(raw)
    assert entry.stability is not None, entry
    return int(entry.stability["h"])


def rows(scales: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    drawn: np.ndarray = rng.standard_normal((count, scales.size)) * scales
    return drawn


@pytest.mark.parametrize("features", [2, 3, 10, 11])
def test_every_selector_of_two_features_or_more_gets_a_baseline_and_alerts(
    features: int,
    service: ServiceProcess,
    cli_env: str,
    capsys: pytest.CaptureFixture[str],
    selector_name: str,
) -> None:
    judged = min(10, features - 1)
    # Variances far apart, every feature's rank clear: settled after a few hundred rows.
    before = np.arange(features, 0, -1, dtype=np.float64)
    after = before[::-1].copy()
    rng = np.random.default_rng(features)
    with Client(cli_env) as client, webhook_receiver() as receiver:
        client.create(selector_name, "variance", n_features=features)

        status, out, err = sift(capsys, "drift", selector_name)
        assert status == 0, err
        assert (
            f"since the baseline: none yet (a version becomes it when the stability of its top "
            f"{judged} reaches 0.75; now not estimated)" in out
        ), out

        if features <= 10:  # a top of every feature cannot be judged: refused, saying why
            status, out, err = sift(
                capsys, "alerts", "add", selector_name, receiver.url, "--threshold", "0.3",
                "-h", str(features),
            )  # fmt: skip
            assert status == 1 and out == ""
            assert f"ranks {features} features, so an alert judges at most its top" in err, err
            assert f"ask for h between 1 and {judged}" in err, err
        status, out, err = sift(
            capsys, "alerts", "add", selector_name, receiver.url, "--threshold", str(THRESHOLD)
        )
        assert status == 0, err
        assert f"when the drift of the top {judged} reaches 0.3" in out, out
        alert_id = out.split()[1]
        secret = out.rsplit(": ", 1)[1].strip()
        assert secret.startswith("whsec_")

        def has_baseline() -> bool:
            client.push(selector_name, rows(before, 400, rng))
            return client.drift(selector_name).baseline is not None

        wait_for(has_baseline, 30, "the automatic baseline")
        drift = client.drift(selector_name)
        assert drift.baseline is not None and drift.baseline.how == "auto"
        status, out, err = sift(capsys, "drift", selector_name)
        assert status == 0 and "since the baseline, auto (version" in out, out
        # What the history records (read from the service's Redis): the stability of the top
        # the rule judged, and the baseline's own.
        assert recorded_stability_h(service, selector_name) == judged

        def delivered() -> bool:
            client.push(selector_name, rows(after, 2000, rng))
            return bool(receiver.delivered())

        wait_for(delivered, 60, "an event at the webhook")
        delivery = receiver.delivered()[0]
        assert verify(secret, delivery.headers, delivery.body)
        event = delivery.event
        assert event["alert"] == alert_id and event["h"] == judged
        assert event["drift"] >= THRESHOLD and event["baseline_version"] == drift.baseline.version
        # Exact numbers for machines, rounded ones for people.
        assert event["drift"] == 1.0 - event["rbo"]
        assert f"drift {event['drift']:.2f} since the baseline" in event["summary"]
        assert event["summary"].startswith(f"the top {judged} of selector {selector_name} moved")


def test_an_alert_that_could_never_fire_is_refused(
    cli_env: str, capsys: pytest.CaptureFixture[str], selector_name: str
) -> None:
    """One feature: no ranking to move. No stability estimate: no min_stability."""
    url = "http://127.0.0.1:9/hook"
    with Client(cli_env) as client:
        client.create(selector_name, "variance", n_features=1)
        client.create(f"{selector_name}-r0", "variance", n_features=12, params={"resamples": 0})
    status, _, err = sift(capsys, "alerts", "add", selector_name, url, "--threshold", "0.3")
    assert status == 1 and "ranks 1 feature: its ranking cannot move" in err, err
    status, _, err = sift(
        capsys, "alerts", "add", f"{selector_name}-r0", url, "--threshold", "0.3",
        "--min-stability", "0.5",
    )  # fmt: skip
    assert status == 1 and "created with resamples: 0" in err, err
    assert "min_stability=0.5 could never fire" in err, err
    without = f"{selector_name}-r0"
    status, out, err = sift(capsys, "alerts", "add", without, url, "--threshold", "0.3")
    assert status == 0 and "the top 10 reaches 0.3" in out, err
