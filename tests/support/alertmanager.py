"""A real Prometheus Alertmanager (Debian's ``prometheus-alertmanager``) for the tests, on free
ports, without clustering, whose one route sends every notification (firing and resolved) at
once to a webhook receiver the test gives."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.support.redis import free_port

BINARY = "prometheus-alertmanager"


@contextmanager
def alertmanager(folder: Path, receiver_url: str) -> Iterator[str]:
    """Alertmanager's base URL, while it runs."""
    binary = shutil.which(BINARY) or shutil.which("alertmanager")
    if binary is None:
        raise RuntimeError(f"{BINARY} is not installed (scripts/setup installs it)")
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "alertmanager.yml"
    config.write_text(
        "route:\n"
        "  receiver: test\n"
        "  group_by: [alertname, selector, alert]\n"
        "  group_wait: 0s\n"
        "  group_interval: 1s\n"
        "  repeat_interval: 1h\n"
        "receivers:\n"
        "  - name: test\n"
        "    webhook_configs:\n"
        f"      - url: {receiver_url}\n"
        "        send_resolved: true\n"
    )
    port = free_port()
    log = (folder / "alertmanager.log").open("wb")
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.path={folder / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if httpx.get(f"{url}/-/ready", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"alertmanager did not start: {(folder / 'alertmanager.log').read_text()}"
                )
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
