"""Where a source's bus is, as its client library reads the source's definition: the hosts and
ports it connects to (or a Unix socket path), the credentials it sends, the options it takes,
and the address shown in answers, log lines and errors.

Each kind's URL is parsed here by the parser its library uses (redis-py's ``parse_url``;
nats-py's server URL handling, which sends the user, password or token exactly as ``urlparse``
splits them, without percent-decoding; a Kafka source's SASL fields), once: the adapter
connects with what this parse found, and nothing else of the URL. So what is shown is *built*
from the parts that are not secret (``Endpoint.shown``) rather than cut out of the text, and a
password that a parser would read elsewhere than where a URL splitter looks (in a query option,
after a ``/``, ``#`` or ``?``) is never shown either.

A URL that no client could connect with (a port beyond 65535, a bad IPv6 literal, an option
Sift does not pass) is refused when the source is created (``BadUrl``, a 422
``destination-not-allowed`` whose text names what was expected and never repeats the URL).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from redis.asyncio.connection import parse_url as redis_parse_url

from service.errors import DestinationNotAllowed, InvalidInput
from service.monitoring.destinations import normal_host

#: The most characters a bus URL (or a Kafka bootstrap list) may have.
MAX_URL_LENGTH = 2048
#: Query options of a Redis URL that Sift passes to Redis: the database, the protocol, and the
#: credentials (redis-py reads ``?password=`` as the password, as in ``unix://``'s form).
REDIS_OPTIONS = ("db", "protocol", "username", "password")
REDIS_FORM = "redis://[user:password@]host[:port][/db], rediss://... or unix:///path/to/socket"
NATS_FORM = "nats://[user:password@ or token@]host[:port], or tls://..."
#: The default ports, as each library assumes them.
REDIS_PORT = 6379
NATS_PORT = 4222
_OPTION_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")
_ENCODE_HINT = "a password holding '/', '?', '#' or '@' must be percent-encoded"


class BadUrl(DestinationNotAllowed):
    """A bus URL that no client could connect with (by rules of addresses and of the client
    libraries, which the schema's pattern does not state); the text never repeats the URL."""


@dataclass(frozen=True)
class Endpoint:
    """A bus as its library reads it."""

    scheme: str
    #: (host in its normal form, port) of each server to try; empty for a Unix socket.
    hosts: tuple[tuple[str, int], ...]
    #: A Unix socket's absolute path.
    path: str | None = None
    username: str | None = None
    password: str | None = None
    #: Options the library passes on (a Redis URL's db and protocol).
    options: dict[str, int] = field(default_factory=dict)
    #: Every text that is a credential, in each spelling it may take (as sent, and as written
    #: in the URL): what ``scrub`` takes out of any text.
    secrets: tuple[str, ...] = ()

    @property
    def shown(self) -> str:
        """The URL without its credentials: the user kept when a password goes with it; a
        password, or a user alone (a token, NATS's way), shown as ``***``."""
        if self.username and self.password is not None:
            auth = f"{quote(self.username, safe='')}:***@"
        elif self.password is not None or self.username:
            auth = "***@"
        else:
            auth = ""
        if self.path is not None:
            where = quote(self.path)
        else:
            where = ",".join(f"{_bracketed(host)}:{port}" for host, port in self.hosts)
        tail = ""
        if "db" in self.options and self.path is None:
            tail = f"/{self.options['db']}"
        query = [(k, v) for k, v in self.options.items() if k != "db" or self.path is not None]
        if query:
            tail += "?" + "&".join(f"{k}={v}" for k, v in query)
        return f"{self.scheme}://{auth}{where}{tail}"


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _spellings(*texts: str | None) -> tuple[str, ...]:
    """Each credential as sent and as it may be written (percent-encoded or not)."""
    out: list[str] = []
    for text in texts:
        if not text:
            continue
        for spelling in (text, quote(text, safe=""), quote(text), unquote(text)):
            if spelling and spelling not in out:
                out.append(spelling)
    return tuple(out)


def checked_text(url: object, field_name: str = "url") -> str:
    if not isinstance(url, str):
        raise BadUrl(f"{field_name} must be a string; got {type(url).__name__}")
    if not url:
        raise BadUrl(f"{field_name} must not be empty")
    if len(url) > MAX_URL_LENGTH:
        raise BadUrl(f"{field_name} must be at most {MAX_URL_LENGTH} characters; got {len(url)}")
    if any(ord(c) < 33 or ord(c) == 127 for c in url):
        raise BadUrl(f"{field_name} must not contain spaces or control characters")
    return url


def _port(netloc: str, parts: Any, default: int, form: str) -> int:
    """The URL's port (``parts.port``), or BadUrl saying what was expected."""
    try:
        port = parts.port
    except ValueError:
        text = netloc.rpartition("@")[2].rpartition(":")[2]
        got = f"; got {text}" if text.isdigit() and len(text) <= 12 else ""
        raise BadUrl(
            f"url's port must be a number from 1 to 65535{got} (expected {form}; {_ENCODE_HINT})"
        ) from None
    if port == 0:
        raise BadUrl("url's port must be a number from 1 to 65535; got 0")
    return default if port is None else int(port)


def _split(url: str, form: str) -> Any:
    try:
        return urlsplit(url)
    except ValueError:
        raise BadUrl(
            f"url's host is not a valid IPv6 literal (expected [address], as in {form})"
        ) from None


def _host(parts: Any, form: str) -> str:
    if not parts.hostname:
        raise BadUrl(f"url must name a host (expected {form}; {_ENCODE_HINT})")
    try:
        return normal_host(unquote(parts.hostname))
    except InvalidInput as exc:
        raise BadUrl(exc.detail) from None


def parse_redis(url: object) -> Endpoint:
    """A Redis bus URL as redis-py reads it, or BadUrl."""
    text = checked_text(url)
    scheme, sep, _rest = text.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in ("redis", "rediss", "unix"):
        raise BadUrl(f"url must be {REDIS_FORM}")
    parts = _split(text, REDIS_FORM)
    query = parse_qs(parts.query, keep_blank_values=True)
    for name in query:
        if name not in REDIS_OPTIONS:
            shown = f"'{name}'" if _OPTION_NAME.fullmatch(name) else "an option"
            raise BadUrl(
                f"url's query has {shown}, which Sift does not pass to Redis; expected only "
                f"{', '.join(REDIS_OPTIONS)}"
            )
    hosts: tuple[tuple[str, int], ...] = ()
    if scheme == "unix" and parts.netloc.rpartition("@")[2]:
        raise BadUrl("url's socket path must follow unix:// at once: unix:///path/to/socket")
    if scheme != "unix":
        port = _port(parts.netloc, parts, REDIS_PORT, REDIS_FORM)
        hosts = ((_host(parts, REDIS_FORM), port),)
    try:
        kwargs: dict[str, Any] = dict(redis_parse_url(text))
    except ValueError:
        raise BadUrl(
            "url's query options must be db (a number), protocol (2 or 3), username and password"
        ) from None
    options: dict[str, int] = {}
    if "db" in kwargs:
        db = kwargs["db"]
        if not isinstance(db, int) or not 0 <= db <= 1_000_000:
            raise BadUrl("url's db must be a number from 0")
        if "db" in query or (parts.path.strip("/") and scheme != "unix"):
            options["db"] = db
    elif scheme != "unix" and parts.path.strip("/"):
        raise BadUrl(f"url's path must be the db, a number (expected {REDIS_FORM})")
    if "protocol" in kwargs:
        if kwargs["protocol"] not in (2, 3):
            raise BadUrl("url's protocol must be 2 or 3")
        options["protocol"] = int(kwargs["protocol"])
    path = None
    if scheme == "unix":
        raw_path = str(kwargs.get("path") or "")
        if not raw_path.startswith("/"):
            raise BadUrl("url's socket path must be absolute: unix:///path/to/socket")
        path = posixpath.normpath(raw_path)
    username = kwargs.get("username")
    password = kwargs.get("password")
    # Each credential as redis-py sends it and as the URL writes it (userinfo, query).
    raw_query = [
        value
        for name, _eq, value in (p.partition("=") for p in parts.query.split("&"))
        if unquote(name) == "password" or (unquote(name) == "username" and password is None)
    ]
    written = [parts.password, *query.get("password", ()), *raw_query]
    if password is None:  # a user alone is shown as ***: it may be a password
        written += [username, parts.username, *query.get("username", ())]
    secrets = _spellings(password, *written)
    return Endpoint(
        scheme=scheme,
        hosts=hosts,
        path=path,
        username=username,
        password=password,
        options=options,
        secrets=secrets,
    )


def parse_nats(url: object) -> Endpoint:
    """A NATS server URL as nats-py reads it (its user, password or token as ``urlparse``
    splits them, not percent-decoded), or BadUrl."""
    text = checked_text(url)
    scheme, sep, _rest = text.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in ("nats", "tls"):
        raise BadUrl(f"url must be {NATS_FORM}")
    parts = _split(text, NATS_FORM)
    if parts.query or parts.fragment or parts.path.strip("/"):
        raise BadUrl(f"url must be {NATS_FORM}, without a path or a query ({_ENCODE_HINT})")
    port = _port(parts.netloc, parts, NATS_PORT, NATS_FORM)
    host = _host(parts, NATS_FORM)
    username, password = parts.username, parts.password
    token = username if password is None else None
    return Endpoint(
        scheme=scheme,
        hosts=((host, port),),
        username=username if username or password is not None else None,
        password=password,
        secrets=_spellings(password, token),
    )


def parse_bootstrap(bootstrap: object) -> tuple[tuple[str, int], ...]:
    """A Kafka source's brokers, ``host:port`` comma-separated, or BadUrl."""
    text = checked_text(bootstrap, "bootstrap")
    hosts = []
    for entry in text.split(","):
        host, sep, port = entry.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise BadUrl("bootstrap must be host:port, comma-separated")
        if not 1 <= int(port) <= 65535:
            raise BadUrl(f"bootstrap's ports must be numbers from 1 to 65535; got {port[:12]}")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        elif ":" in host:
            raise BadUrl("bootstrap's IPv6 hosts must be in brackets: [address]:port")
        try:
            hosts.append((normal_host(host, "bootstrap"), int(port)))
        except InvalidInput as exc:
            raise BadUrl(exc.detail) from None
    return tuple(hosts)


def kafka_url(bootstrap: str, username: str | None, password: str | None) -> str:
    """The brokers as the URL a Kafka source's definition keeps (its credentials encoded,
    whatever characters they hold)."""
    if username is None:
        return f"kafka://{bootstrap}"
    return f"kafka://{quote(username, safe='')}:{quote(password or '', safe='')}@{bootstrap}"


def parse_kafka(url: str) -> Endpoint:
    """A Kafka source's URL as ``kafka_url`` wrote it."""
    rest = url.partition("://")[2]
    auth, sep, bootstrap = rest.rpartition("@")
    if not sep:
        return Endpoint("kafka", parse_bootstrap(rest))
    user, _colon, password = auth.partition(":")
    return Endpoint(
        "kafka",
        parse_bootstrap(bootstrap),
        username=unquote(user),
        password=unquote(password),
        secrets=_spellings(unquote(password)),
    )


#: Each URL scheme's parser.
PARSERS = {
    "redis": parse_redis,
    "rediss": parse_redis,
    "unix": parse_redis,
    "nats": parse_nats,
    "tls": parse_nats,
    "kafka": parse_kafka,
}


def endpoint(url: str) -> Endpoint:
    """``url`` parsed by its scheme's parser; BadUrl for a URL none reads."""
    parser = PARSERS.get(url.partition("://")[0].lower())
    if parser is None:
        raise BadUrl("url's scheme is not one a source reads")
    return parser(url)
