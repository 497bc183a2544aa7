"""Where a source may connect, against a live app on a real Redis, with real buses and real TCP
peers: never Sift's own Redis (by address, by another name or port, through a proxy, at its
Unix socket, for every kind); by default only global addresses, refused at creation when the
host says so and at connection when the address resolved to does; a peer that is not the bus
never has its bytes shown; a URL no client could connect with is refused at creation, without
repeating it; and a password, whatever it holds and wherever the library reads it from, never
shows in an answer, a log line or the stored status."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import struct
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
import pytest
import redis.asyncio as aioredis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.asyncio.connection import parse_url as redis_parse_url

from service.store.embedded import EmbeddedRedis
from service.store.redis_store import SelectorStore
from service.store.sources import SourceStore
from tests.support.api import make_settings, running_app
from tests.support.hostile_peers import Peer, closed_port, forward, greeting, tcp_peer
from tests.support.kafka import KafkaBroker
from tests.support.nats import NatsServer
from tests.support.redis import RedisServer, require_redis_server, start_embedded
from tests.support.sources import LOOPBACK, until

ROOT = {"Authorization": "Bearer root"}
#: What a peer that is not the bus greets with, in each protocol's shape.
SECRET = "SECRET_BANNER internal-db-password=hunter2"
BANNERS = {
    "plain": f"{SECRET}\r\n".encode(),
    "redis-error": f"-ERR {SECRET}\r\n".encode(),
    "redis-string": f"+{SECRET}\r\n".encode(),
    "nats-info": b'INFO {"server_id": "'
    + SECRET.encode()
    + b"\"}\r\n-ERR '"
    + SECRET.encode()
    + b"'\r\n",
    "kafka-frame": struct.pack(">ii", len(SECRET) + 4, 1) + SECRET.encode(),
}


async def selector(http: httpx.AsyncClient, name: str, headers: dict[str, str] | None = None):
    body = {"name": name, "method": "variance", "n_features": 1}
    answer = await http.post("/v1/selectors", json=body, headers=headers or {})
    assert answer.status_code == 201, answer.text


def redis_source(name: str, url: str, into: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "kind": "redis-stream",
        "url": url,
        "key": "k",
        "into": {"selector": into},
        **extra,
    }


def nats_source(name: str, url: str, into: str) -> dict[str, Any]:
    return {"name": name, "kind": "nats", "url": url, "stream": "s", "into": {"selector": into}}


def kafka_source(name: str, bootstrap: str, into: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "kind": "kafka",
        "bootstrap": bootstrap,
        "topic": "t",
        "into": {"selector": into},
        **extra,
    }


async def retrying(http: httpx.AsyncClient, name: str, timeout_s: float = 15.0) -> dict[str, Any]:
    """The source once it says it retries, and why."""

    async def probe() -> dict[str, Any] | None:
        described = (await http.get(f"/v1/sources/{name}")).json()
        return described if described["state"] == "retrying" and described["last_error"] else None

    found: dict[str, Any] = await until(probe, timeout_s)
    return found


def own_address(redis_url: str) -> tuple[str, int]:
    """Sift's own Redis in these tests: its host and port (a node of the cluster's)."""
    where = urlsplit(redis_url.replace("redis+cluster://", "redis://"))
    assert where.hostname is not None and where.port is not None
    return where.hostname, where.port


# -- Sift's own Redis ---------------------------------------------------------------------------


async def test_a_tenant_may_not_point_a_source_at_sifts_own_redis(app_factory, redis_url):
    """By address, another name, another loopback address, IPv6 loopback; for every kind;
    for a tenant's admin key and the root's alike, and whatever the policy opts in."""
    host, port = own_address(redis_url)
    allow = "127.0.0.0/8,::1,localhost"
    async with app_factory(api_token="root", source_private=allow) as (_app, http):
        made = await http.post(
            "/v1/keys", json={"scopes": ["admin"], "prefix": "t1-"}, headers=ROOT
        )
        assert made.status_code == 201, made.text
        tenant = {"Authorization": f"Bearer {made.json()['key']}"}
        await selector(http, "t1-spy", tenant)
        urls = [
            redis_url if not redis_url.startswith("redis+cluster") else f"redis://{host}:{port}",
            f"redis://{host}:{port}/0?db=0",
            f"redis://localhost:{port}",
            f"redis://127.0.0.2:{port}",
            f"redis://[::1]:{port}",
            f"redis://[::ffff:127.0.0.1]:{port}",
        ]
        bodies = [
            redis_source(f"t1-r{i}", url, "t1-spy", key="sift:{victim-x}:log")
            for i, url in enumerate(urls)
        ]
        bodies += [
            nats_source("t1-n", f"nats://127.0.0.1:{port}", "t1-spy"),
            nats_source("t1-n6", f"nats://[::1]:{port}", "t1-spy"),
            kafka_source("t1-k", f"127.0.0.1:{port}", "t1-spy"),
            kafka_source("t1-k2", f"localhost:{port},127.0.0.3:{port}", "t1-spy"),
        ]
        for body in bodies:
            for headers in (tenant, ROOT):
                answer = await http.post("/v1/sources", json=body, headers=headers)
                assert answer.status_code == 422, (body, answer.text)
                problem = answer.json()
                assert problem["type"].endswith("destination-not-allowed"), problem
                assert "Sift's own Redis" in problem["detail"], problem
        assert (await http.get("/v1/sources", headers=ROOT)).json()["sources"] == []


async def test_sifts_own_redis_through_another_port_is_refused_by_its_identity(
    app_factory, redis_url
):
    """A proxy on another port reaches Sift's own Redis: the bus's run_id gives it away on
    connecting, before anything is read."""
    host, port = own_address(redis_url)
    with tcp_peer(forward(port, host)) as proxy:
        async with app_factory(source_private=LOOPBACK) as (_app, http):
            await selector(http, "spy")
            body = redis_source("s", f"redis://127.0.0.1:{proxy.port}", "spy", key="sift:{x}:log")
            assert (await http.post("/v1/sources", json=body)).status_code == 201
            described = await retrying(http, "s")
            assert "Sift's own Redis" in described["last_error"], described
            assert "run_id" in described["last_error"]
            assert (described["entries"], described["rejected"]) == (0, 0)
            assert described["rejected_entries"] == [] and described["positions"] == {}
        assert proxy.connections >= 1


def test_sifts_own_unix_socket_is_refused_by_path_and_through_a_link(tmp_path: Path) -> None:
    """The embedded Redis's way: a Unix socket. Opted in or not, its path (or a link to it)
    is Sift's own."""
    own = EmbeddedRedis(tmp_path / "own", executable=require_redis_server())
    url = own.start()
    try:
        link = tmp_path / "sockets" / "bus.sock"
        link.parent.mkdir()
        link.symlink_to(own.socket_path)
        allow = f"{tmp_path}/,127.0.0.0/8"

        async def scenario() -> None:
            async with running_app(make_settings(url, source_private=allow)) as (_app, http):
                await selector(http, "spy")
                for i, path in enumerate([str(own.socket_path), str(link)]):
                    body = redis_source(f"s{i}", f"unix://{path}", "spy")
                    answer = await http.post("/v1/sources", json=body)
                    assert answer.status_code == 422, answer.text
                    assert "Sift's own Redis" in answer.json()["detail"]

        asyncio.run(scenario())
    finally:
        own.stop()


# -- the default policy --------------------------------------------------------------------------

REFUSED_HOSTS = [
    "127.0.0.1",
    "127.1.2.3",
    "10.1.2.3",
    "172.16.0.9",
    "192.168.1.1",
    "169.254.169.254",
    "100.64.0.1",
    "0.0.0.0",
    "[::1]",
    "[fd00::1]",
    "[fe80::1]",
    "[::ffff:10.0.0.1]",
    "localhost",
    "db.localhost",
]


async def test_by_default_sources_reach_only_global_addresses(client_default, tmp_path):
    http = client_default
    await selector(http, "v")
    for i, host in enumerate(REFUSED_HOSTS):
        for body in (
            redis_source(f"r{i}", f"redis://{host}:6379/0", "v"),
            redis_source(f"rs{i}", f"rediss://user:pw@{host}", "v"),
            nats_source(f"n{i}", f"nats://{host}:4222", "v"),
            kafka_source(f"k{i}", f"{host}:9092", "v"),
        ):
            answer = await http.post("/v1/sources", json=body)
            assert answer.status_code == 422, (body, answer.text)
            problem = answer.json()
            assert problem["type"].endswith("destination-not-allowed"), problem
            assert "SIFT_SOURCE_PRIVATE" in problem["detail"], problem
    socket_path = tmp_path / "bus.sock"
    answer = await http.post("/v1/sources", json=redis_source("u", f"unix://{socket_path}", "v"))
    assert answer.status_code == 422 and "SIFT_SOURCE_PRIVATE" in answer.json()["detail"]
    assert (await http.get("/v1/sources")).json()["sources"] == []


async def test_an_address_refused_when_connecting_says_so(
    app_factory, bus_redis_server: RedisServer
):
    """Created where a process's policy allowed it (a name, a literal), consumed by a process
    whose policy does not: resolving the name (or judging the literal) at connection lands on
    a refused address, and the source says so instead of connecting."""
    port = urlsplit(bus_redis_server.url).port
    async with app_factory(source_private="127.0.0.0/8,localhost") as (_app, http):
        await selector(http, "v")
        for name, host in (("by-name", "localhost"), ("by-address", "127.0.0.1")):
            body = redis_source(name, f"redis://{host}:{port}", "v")
            assert (await http.post("/v1/sources", json=body)).status_code == 201
    async with app_factory() as (_app, http):
        by_name = await retrying(http, "by-name")
        assert (
            "'localhost' resolves only to addresses sources may not reach" in by_name["last_error"]
        )
        assert "SIFT_SOURCE_PRIVATE" in by_name["last_error"]
        by_address = await retrying(http, "by-address")
        assert "SIFT_SOURCE_PRIVATE" in by_address["last_error"]
        assert by_name["entries"] == by_address["entries"] == 0


async def test_a_kafka_broker_the_metadata_names_is_judged_when_connected_to(
    app_factory, kafka_broker: KafkaBroker
):
    """The bootstrap (a proxy on 127.0.0.2, opted in) names the broker at 127.0.0.1, which is
    not: the consumer never connects there, and says why."""
    port = int(kafka_broker.bootstrap.rsplit(":", 1)[1])
    with tcp_peer(forward(port), host="127.0.0.2") as proxy:
        async with app_factory(source_private="127.0.0.2") as (_app, http):
            await selector(http, "v")
            body = kafka_source("k", f"127.0.0.2:{proxy.port}", "v")
            answer = await http.post("/v1/sources", json=body)
            assert answer.status_code == 201, answer.text
            described = await retrying(http, "k", 30.0)
            error = described["last_error"]
            assert f"broker 127.0.0.1:{port}" in error and "SIFT_SOURCE_PRIVATE" in error, error
        assert proxy.connections >= 1


# -- a peer that is not the bus ---------------------------------------------------------------


@pytest.fixture
def banner_peers() -> Iterator[dict[str, Peer]]:
    with contextlib.ExitStack() as stack:
        yield {
            name: stack.enter_context(tcp_peer(greeting(data))) for name, data in BANNERS.items()
        }


async def test_a_peer_that_is_not_the_bus_never_has_its_bytes_shown(client, banner_peers, caplog):
    http = client
    caplog.set_level(logging.INFO)
    await selector(http, "v")
    names = []
    for banner, peer in banner_peers.items():
        tag = banner.replace("-", "")
        at = f"127.0.0.1:{peer.port}"
        for body in (
            redis_source(f"r-{tag}", f"redis://{at}", "v"),
            redis_source(f"ra-{tag}", f"redis://u:pw@{at}/1?protocol=3", "v"),
            nats_source(f"n-{tag}", f"nats://{at}", "v"),
            kafka_source(f"k-{tag}", at, "v"),
        ):
            answer = await http.post("/v1/sources", json=body)
            assert answer.status_code == 201, answer.text
            names.append(body["name"])
    errors = {}
    for name in names:
        errors[name] = (await retrying(http, name, 30.0))["last_error"]
    for name, error in errors.items():
        assert "SECRET" not in error and "hunter2" not in error, (name, error)
        assert error.startswith("the ") and "retrying in" in error, (name, error)
    seen = (await http.get("/v1/sources")).text + caplog.text
    assert "SECRET_BANNER" not in seen and "hunter2" not in seen
    assert all(peer.connections >= 1 for peer in banner_peers.values())


# -- URLs no client could connect with ----------------------------------------------------------


async def test_a_url_that_can_never_connect_is_refused_at_creation(client):
    http = client
    await selector(http, "v")
    pw = "pw-" + secrets.token_hex(8)
    cases = [
        (redis_source("s", f"redis://:{pw}@127.0.0.1:99999/0", "v"), "from 1 to 65535"),
        (redis_source("s", f"redis://:{pw}@127.0.0.1:0", "v"), "from 1 to 65535"),
        (redis_source("s", f"redis://:{pw}@127.0.0.1:6379/0?bogus=1", "v"), "'bogus'"),
        (
            redis_source("s", f"redis://127.0.0.1?password={pw}&ssl_ca_certs=/x", "v"),
            "'ssl_ca_certs'",
        ),
        (redis_source("s", f"redis://:{pw}@[::zz]:6379", "v"), "IPv6"),
        (redis_source("s", f"redis://:{pw}@[::1:6379", "v"), "IPv6"),
        (redis_source("s", f"redis://:{pw}@127.0.0.1/zero", "v"), "db"),
        (redis_source("s", f"redis://127.0.0.1?db=x&password={pw}", "v"), "db"),
        (redis_source("s", f"redis://127.0.0.1?protocol=4&password={pw}", "v"), "protocol"),
        (redis_source("s", f"redis://:{pw}@999.1.1.1:6379", "v"), "IPv4"),
        (redis_source("s", f"redis://:{pw}@bad_host!:6379", "v"), "host"),
        (redis_source("s", f"redis://:{pw}/x@127.0.0.1:6379", "v"), "percent-encoded"),
        (redis_source("s", f"unix://relative/{pw}.sock", "v"), "at once"),
        (redis_source("s", f"redis://:{pw}@127.0.0.1:6379/" + "x" * 2100, "v"), "2048"),
        (nats_source("s", f"nats://u:{pw}@127.0.0.1:70000", "v"), "from 1 to 65535"),
        (nats_source("s", f"nats://{pw}@[::zz]", "v"), "IPv6"),
        (nats_source("s", f"nats://u:{pw}@127.0.0.1:4222/path?q=1", "v"), "without a path"),
        (kafka_source("s", "127.0.0.1:99999", "v", username="u", password=pw), "65535"),
        (kafka_source("s", "[::zz]:9092", "v", username="u", password=pw), "IPv6"),
        (kafka_source("s", "127.0.0.1:9092", "v", username="u", password=pw * 100), "1024"),
    ]
    for body, fragment in cases:
        answer = await http.post("/v1/sources", json=body)
        assert answer.status_code == 422, (body, answer.text)
        assert fragment in answer.json()["detail"], (fragment, answer.text)
        assert pw not in answer.text, answer.text
    missing_kind = redis_source("s", f"redis://:{pw}@127.0.0.1", "v")
    del missing_kind["kind"]
    answer = await http.post("/v1/sources", json=missing_kind)
    assert answer.status_code == 422 and pw not in answer.text
    assert (await http.get("/v1/sources")).json()["sources"] == []


async def test_every_connect_failure_reaches_last_error_within_seconds(
    client, bus_redis_server: RedisServer
):
    http = client
    await selector(http, "v")
    port = urlsplit(bus_redis_server.url).port
    with closed_port() as closed:
        bodies = [
            redis_source("closed", f"redis://127.0.0.1:{closed}", "v"),
            redis_source("db", f"redis://127.0.0.1:{port}/99999", "v"),
            redis_source("auth", f"redis://nobody:nothing@127.0.0.1:{port}", "v"),
            nats_source("nats", f"nats://127.0.0.1:{closed}", "v"),
            kafka_source("kafka", f"127.0.0.1:{closed}", "v"),
        ]
        started = asyncio.get_running_loop().time()
        for body in bodies:
            assert (await http.post("/v1/sources", json=body)).status_code == 201
        errors = {b["name"]: (await retrying(http, b["name"], 10.0))["last_error"] for b in bodies}
        took = asyncio.get_running_loop().time() - started
    assert took < 10.0, took
    assert "the connection was refused" in errors["closed"]
    assert "refused" in errors["db"]
    assert "credentials" in errors["auth"] or "refused" in errors["auth"]
    assert "the connection was refused" in errors["nats"]
    assert "do not answer" in errors["kafka"]


# -- credentials, whatever they hold --------------------------------------------------------------

#: Any text but surrogates (which JSON cannot carry): controls, spaces, '/', '#', '?', '@', ':',
#: '%' and the rest.
ANY_TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=24)


@pytest.fixture
async def reach_world(
    app_factory: Callable[..., Any],
    kafka_broker: KafkaBroker,
    tmp_path: Path,
    redis_client: Any,
) -> AsyncIterator[dict[str, Any]]:
    """The buses every password is tried on, each refusing it: a Redis that requires another
    password, a NATS server with its own user, a Kafka broker without SASL; a socket path
    where nothing listens."""
    bus = start_embedded(tmp_path / "bus")
    nats = NatsServer(tmp_path / "nats", user="sift", password="nats-secret-pw")
    try:
        setter = aioredis.from_url(str(bus.url))
        await setter.config_set("requirepass", secrets.token_hex(16))
        await setter.aclose()
        nats.start()
        async with app_factory(source_private=f"{LOOPBACK},{tmp_path}/") as (_app, http):
            await selector(http, "v")
            yield {
                "http": http,
                "redis": f"127.0.0.1:{bus.port}",
                "nats": f"127.0.0.1:{nats.port}",
                "kafka": kafka_broker.bootstrap,
                "socket": f"{tmp_path}/none.sock",
                "records": SourceStore(SelectorStore(redis_client, prefix="sift")),
            }
    finally:
        nats.stop()
        bus.stop()


def bodies_with(password: str, world: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """A source of every kind with ``password`` in every position its library reads one
    from, percent-encoded as a URL must carry it, and written raw too."""
    q = quote(password, safe="")
    r, nats_at, unix = world["redis"], world["nats"], world["socket"]
    urls = [
        f"redis://:{q}@{r}/0",
        f"redis://sift:{q}@{r}/0",
        f"redis://{q}@{r}",
        f"redis://{r}/0?password={q}",
        f"rediss://sift:{q}@127.0.0.1:1",
        f"unix://{unix}?password={q}",
        f"unix://sift:{q}@{unix}",
        f"redis://:{password}@{r}/0",
        f"redis://{r}/0?password={password}",
    ]
    out = [redis_source(f"r{n}-{i}", url, "v") for i, url in enumerate(urls)]
    out += [
        nats_source(f"n{n}-0", f"nats://sift:{q}@{nats_at}", "v"),
        nats_source(f"n{n}-1", f"nats://{q}@{nats_at}", "v"),
        nats_source(f"n{n}-2", f"nats://sift:{password}@{nats_at}", "v"),
        kafka_source(f"k{n}-0", world["kafka"], "v", username="sift", password=password or "x"),
        kafka_source(f"k{n}-1", world["kafka"], "v", username="s:/#?@", password=password or "x"),
    ]
    return out


def read_by_library(body: dict[str, Any]) -> str | None:
    """The password the bus's library reads from a raw URL, when it reads one."""
    url = str(body.get("url", ""))
    try:
        if body["kind"] == "redis-stream":
            return redis_parse_url(url).get("password")
        return urlsplit(url).password
    except ValueError:
        return None


_examples = iter(range(10_000))


@settings(
    max_examples=5,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(before=ANY_TEXT, after=ANY_TEXT)
async def test_a_password_never_shows_whatever_it_holds(reach_world, caplog, before, after):
    http: httpx.AsyncClient = reach_world["http"]
    caplog.set_level(logging.INFO)
    caplog.clear()
    mark = "Mk" + secrets.token_hex(6)
    password = f"{before}{mark}{after}"
    n = next(_examples)
    bodies = bodies_with(password, reach_world, n)
    answers, created = [], []
    for body in bodies:
        answer = await http.post("/v1/sources", json=body)
        answers.append(answer.text)
        assert answer.status_code in (201, 422), answer.text
        if answer.status_code == 201:
            created.append(body)
    # Every percent-encoded form is taken (a raw password may break the URL's grammar: then
    # it is refused, and not repeated either).
    encoded = [b for b in created if "url" not in b or quote(password, safe="") in b["url"]]
    assert len(encoded) >= 11, answers
    for body in created:
        await retrying(http, body["name"], 30.0)
    records = reach_world["records"]
    statuses = [
        await records.read_status(b["name"], str((await records.get(b["name"]))["id"]))
        for b in created
    ]
    seen = [
        *answers,
        (await http.get("/v1/sources")).text,
        *[(await http.get(f"/v1/sources/{b['name']}")).text for b in created],
        repr(statuses),
        caplog.text,
    ]
    everything = "\n".join(seen)
    raw_secrets = {read_by_library(b) for b in bodies if "url" in b} - {None}
    for secret in [password, mark, *(s for s in raw_secrets if s and mark in s)]:
        assert secret not in everything, secret
    assert mark.lower() not in everything.lower()
    for body in created:
        assert (await http.delete(f"/v1/sources/{body['name']}")).status_code == 204


@pytest.fixture
async def client_default(app_factory: Callable[..., Any]) -> AsyncIterator[httpx.AsyncClient]:
    """The app with the default policy: no SIFT_SOURCE_PRIVATE."""
    async with app_factory() as (_, http):
        yield http


def test_the_setting_names_hosts_networks_and_paths_only() -> None:
    with pytest.raises(ValueError, match="SIFT_SOURCE_PRIVATE"):
        make_settings(None, source_private="10.0.0.0/8, not a host")
    make_settings(None, source_private="10.0.0.0/8, *.svc, /run/redis/, bus.internal")
