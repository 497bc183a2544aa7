"""Where alerts may send: one spelling per address, and by default no address inside the
service's network, for every key (``service.monitoring.destinations``)."""

from __future__ import annotations

import ipaddress

import pytest

from service.errors import InvalidInput
from service.monitoring.destinations import (
    DestinationPolicy,
    forbidden_kind,
    parse_destination,
)
from tests.support.api import assert_problem

DEFAULT = DestinationPolicy.of("", "")


@pytest.mark.parametrize(
    ("url", "normal"),
    [
        ("http://127.0.0.1/x", "http://127.0.0.1/x"),
        ("http://2130706433/x", "http://127.0.0.1/x"),  # one decimal number
        ("http://0x7f000001/x", "http://127.0.0.1/x"),  # one hex number
        ("http://0177.0.0.1/x", "http://127.0.0.1/x"),  # octal
        ("http://0x7f.1/x", "http://127.0.0.1/x"),  # two parts, hex
        ("http://127.1:8080/x?a=1", "http://127.0.0.1:8080/x?a=1"),
        ("HTTPS://Hooks.Example.COM.:443", "https://hooks.example.com/"),
        ("http://hooks.example.com:80/a/b", "http://hooks.example.com/a/b"),
        ("http://[0:0:0:0:0:0:0:1]:9/x", "http://[::1]:9/x"),
        ("http://[::ffff:7f00:1]/x", "http://[::ffff:7f00:1]/x"),
    ],
)
def test_a_url_has_one_spelling(url, normal):
    assert parse_destination(url).url == normal


@pytest.mark.parametrize(
    "url",
    [
        "http://256.0.0.1/x",
        "http://0x1ffffffff/x",
        "http://1.2.3.4.5/x",
        "http://09.0.0.1/x",  # not octal, not decimal: inet_aton refuses it
        "http://exa mple.com/x",
        "http://-bad-.example/x",
        "http://[::g]/x",
        "http://host:0/x",
        "gopher://host/x",
    ],
)
def test_a_url_that_can_never_be_delivered_is_refused(url):
    with pytest.raises(InvalidInput):
        parse_destination(url)


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "link-local"),
        ("100.64.0.1", "non-global"),
        ("0.0.0.0", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("::1", "loopback"),
        ("fd00::1", "private"),
        ("fe80::1", "link-local"),
        ("::ffff:127.0.0.1", "loopback"),  # IPv4 mapped
        ("2002:7f00:1::", "loopback"),  # 6to4 of 127.0.0.1
        ("93.184.215.14", None),
        ("2606:2800:21f:cb07:6820:80da:af6b:8b2c", None),
    ],
)
def test_which_addresses_are_forbidden(address, kind):
    assert forbidden_kind(ipaddress.ip_address(address)) == kind


def test_the_operator_opts_networks_and_hosts_in():
    policy = DestinationPolicy.of("", "10.0.0.0/8, *.svc.cluster.local, ::1")
    assert policy.refusal("x", ipaddress.ip_address("10.9.8.7")) is None
    assert policy.refusal("x", ipaddress.ip_address("::ffff:10.9.8.7")) is None
    assert policy.refusal("am.svc.cluster.local", ipaddress.ip_address("192.168.0.5")) is None
    assert policy.refusal("x", ipaddress.ip_address("::1")) is None
    assert policy.refusal("x", ipaddress.ip_address("192.168.0.5")) is not None
    assert policy.refusal("x", ipaddress.ip_address("127.0.0.1")) is not None
    with pytest.raises(ValueError, match="SIFT_ALERT_PRIVATE"):
        DestinationPolicy.of("", "10.0.0.0/8, not a host")


async def create(http) -> None:
    body = {"name": "s", "method": "variance", "n_features": 4}
    assert (await http.post("/v1/selectors", json=body)).status_code == 201


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:6379/",
        "http://0177.0.0.1/",
        "http://2130706433/",
        "http://0x7f.0.0.1/",
        "http://localhost:8080/",
        "http://api.localhost/",
        "http://169.254.169.254/latest/meta-data",
        "http://10.0.0.7/hook",
        "http://0.0.0.0/",
    ],
)
async def test_inner_addresses_are_refused_when_the_alert_is_created(app_factory, url):
    async with app_factory(alert_private="") as (_app, http):
        await create(http)
        response = await http.post("/v1/selectors/s/alerts", json={"url": url, "threshold": 0.5})
        assert_problem(response, 422, "SIFT_ALERT_PRIVATE")
        assert (await http.get("/v1/selectors/s/alerts")).json()["alerts"] == []


async def test_an_ipv6_literal_is_refused_by_the_schema(client):
    """IPv6 hosts go by their names (the schema's URL pattern); the literal is never stored."""
    await create(client)
    for url in ("http://[::1]/", "http://[::ffff:127.0.0.1]/", "http://[2606:2800::1]/"):
        answer = await client.post("/v1/selectors/s/alerts", json={"url": url, "threshold": 0.5})
        assert_problem(answer, 422, "url")


async def test_an_alert_stores_its_url_in_its_normal_form(app_factory):
    async with app_factory(alert_private="127.0.0.0/8") as (_app, http):
        await create(http)
        response = await http.post(
            "/v1/selectors/s/alerts", json={"url": "http://0177.0.0.1:8080/hook", "threshold": 0.5}
        )
        assert response.status_code == 201, response.text
        assert response.json()["url"] == "http://127.0.0.1:8080/hook"
        listed = (await http.get("/v1/selectors/s/alerts")).json()["alerts"]
        assert listed[0]["url"] == "http://127.0.0.1:8080/hook"


async def test_alert_hosts_limit_where_webhooks_go(app_factory):
    async with app_factory(alert_hosts="hooks.example.com, *.internal.example") as (_app, http):
        await create(http)
        refused = await http.post(
            "/v1/selectors/s/alerts", json={"url": "http://93.184.215.14/x", "threshold": 0.5}
        )
        assert_problem(refused, 422, "SIFT_ALERT_HOSTS", "93.184.215.14")
        for url in ("https://hooks.example.com/a", "https://a.b.internal.example/x"):
            body = {"url": url, "threshold": 0.5}
            assert (await http.post("/v1/selectors/s/alerts", json=body)).status_code == 201
        evil = {"url": "https://hooks.example.com.evil/a", "threshold": 0.5}
        assert_problem(await http.post("/v1/selectors/s/alerts", json=evil), 422)
