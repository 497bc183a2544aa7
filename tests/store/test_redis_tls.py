"""The service on a Redis that wants a password, over TLS (``rediss://``) and in the clear.

A real redis-server with ``--tls-port`` and ``--requirepass`` and a certificate made here with
``openssl``; the tests fail (never skip) if either is missing.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from service.errors import SiftError
from tests.support.api import make_settings, running_app
from tests.support.redis import free_port, require_redis_server

pytestmark = pytest.mark.asyncio

PASSWORD = "correct horse"


def make_certificate(folder: Path) -> tuple[Path, Path]:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.fail("the TLS test needs the openssl command", pytrace=False)
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            openssl,
            *("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2"),
            *("-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1"),
            *("-addext", "subjectAltName=IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def wait_ready(client: redis.Redis, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 15
    while True:
        try:
            if client.ping():
                return
        except redis.ConnectionError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"redis-server did not start:\n{log.read_text()[-2000:]}", pytrace=False)
        time.sleep(0.05)


@pytest.fixture
def secured_redis(tmp_path: Path) -> Iterator[dict[str, str]]:
    """One redis-server with a password on a plain port and on a TLS port."""
    cert, key = make_certificate(tmp_path)
    plain, tls = free_port(), free_port()
    log = tmp_path / "redis.log"
    process = subprocess.Popen(
        [
            require_redis_server(),
            *("--port", str(plain), "--bind", "127.0.0.1", "--tls-port", str(tls)),
            *("--tls-cert-file", str(cert), "--tls-key-file", str(key)),
            *("--tls-ca-cert-file", str(cert), "--tls-auth-clients", "no"),
            *("--requirepass", PASSWORD, "--save", "", "--appendonly", "no"),
            *("--dir", str(tmp_path), "--logfile", str(log)),
        ]
    )
    try:
        wait_ready(redis.Redis(port=plain, password=PASSWORD), process, log)
        yield {
            "tls": f"rediss://:{PASSWORD.replace(' ', '%20')}@127.0.0.1:{tls}/0"
            f"?ssl_ca_certs={cert}",
            "plain": f"redis://:{PASSWORD.replace(' ', '%20')}@127.0.0.1:{plain}/0",
            "wrong": f"redis://:wrong@127.0.0.1:{plain}/0",
        }
    finally:
        process.terminate()
        process.wait(10)


@pytest.mark.parametrize("kind", ["tls", "plain"])
async def test_service_works_over_tls_and_with_a_password(secured_redis, kind):
    async with running_app(make_settings(secured_redis[kind])) as (_, http):
        assert (await http.get("/v1/readyz")).status_code == 200
        body = {"name": "s", "method": "fsds", "n_features": 3}
        assert (await http.post("/v1/selectors", json=body)).status_code == 201
        pushed = await http.post("/v1/selectors/s/chunks", json=[[1.0, 2.0, 3.0], [0, 1, 0]])
        assert pushed.status_code == 200 and pushed.json()["rows_seen"] == 2
        top = (await http.get("/v1/selectors/s/top", params={"h": 2})).json()
        assert len(top["features"]) == 2


async def test_a_wrong_password_stops_the_start_with_a_clear_error(secured_redis):
    """Wrong credentials are permanent: the service says so instead of retrying forever."""
    with pytest.raises(SiftError, match="credentials"):
        async with running_app(make_settings(secured_redis["wrong"])):
            pass
