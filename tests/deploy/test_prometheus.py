"""The Prometheus files pass Prometheus's own checker (``promtool``, from Debian's
``prometheus`` package, which CI installs), and a live ``/metrics`` passes it too, with the
ranking gauges the rules alert on."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import yaml

from tests.support.api import make_settings, running_app, wait_for
from tests.support.manifests import REPO_ROOT

PROMETHEUS = REPO_ROOT / "deploy" / "prometheus"
RULES = PROMETHEUS / "rules.yaml"


def promtool(
    *args: str, stdin: bytes | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``promtool`` itself; a missing one fails the test (CI installs it, and so does
    scripts/setup): never skipped."""
    found = shutil.which("promtool")
    assert found, "promtool is missing: apt-get install prometheus (scripts/setup does)"
    return subprocess.run(
        [found, *args],
        input=None if stdin is None else stdin.decode(),
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
        check=False,
    )


def test_the_rules_pass_promtool_and_their_unit_tests() -> None:
    checked = promtool("check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = promtool("test", "rules", "rules.test.yaml", cwd=PROMETHEUS)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_promtool_refuses_a_broken_copy(tmp_path: Path) -> None:
    """The check can fail: a rule with a broken expression is refused."""
    rules = yaml.safe_load(RULES.read_text())
    rules["groups"][0]["rules"][0]["expr"] = "max by (selector) (sift_ranking_drift >= "
    broken = tmp_path / "rules.yaml"
    broken.write_text(yaml.safe_dump(rules))
    checked = promtool("check", "rules", str(broken))
    assert checked.returncode != 0


def rule_metrics() -> set[str]:
    """The metric names the rules' expressions read."""
    rules = yaml.safe_load(RULES.read_text())
    names: set[str] = set()
    for group in rules["groups"]:
        for rule in group["rules"]:
            names |= set(re.findall(r"\bsift_[a-z_]+", rule["expr"]))
    return names


async def test_a_live_metrics_page_passes_promtool_with_the_gauges_the_rules_read(
    redis_url: str, redis_client: object
) -> None:
    settings = make_settings(redis_url, metrics_refresh_seconds=0.0)
    async with running_app(settings) as (_app, http):
        created = await http.post(
            "/v1/selectors", json={"name": "s", "method": "variance", "n_features": 12}
        )
        assert created.status_code == 201, created.text
        rng = np.random.default_rng(0)
        scale = np.array([12.0, 11.0, 10.0, 9.0, 8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 1.0, 1.0])
        for _ in range(4):
            rows = (rng.standard_normal((300, 12)) * scale).tolist()
            assert (
                await http.post("/v1/selectors/s/chunks", json={"rows": rows})
            ).status_code == 200
        assert (await http.post("/v1/selectors/s/baseline")).status_code == 200
        hook = {"url": "http://hooks.example.invalid/hook", "threshold": 0.5}
        assert (await http.post("/v1/selectors/s/alerts", json=hook)).status_code == 201

        async def gauged() -> bool:
            text = (await http.get("/metrics")).text
            return 'sift_ranking_drift{selector="s"}' in text

        await wait_for(gauged)
        await asyncio.sleep(0)
        page = (await http.get("/metrics")).text
    checked = promtool("check", "metrics", stdin=page.encode())
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert re.search(r'^sift_ranking_stability\{selector="s"\} [-0-9.e]+$', page, re.MULTILINE), (
        page
    )
    assert re.search(r'^sift_ranking_drift\{selector="s"\} 0\.0$', page, re.MULTILINE), page
    missing = {name for name in rule_metrics() if not re.search(rf"^{name}\b", page, re.MULTILINE)}
    # Counters are named with _total on the page; the failed-deliveries counter shows once an
    # attempt was made (none here).
    assert missing <= {"sift_alert_deliveries_total"}, missing
    assert "# TYPE sift_alert_deliveries_total counter" in page or "sift_alert_deliveries" in page
