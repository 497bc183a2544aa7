"""Where an alert may deliver: its URL normalised when the alert is created, and the address a
delivery connects to judged at that moment.

**Normalised.** An alert's URL is ``http`` or ``https``, at most ``MAX_URL_LENGTH`` characters,
with a host and without credentials or control characters. A host that is a number in any of
the spellings a resolver accepts (``2130706433``, ``0x7f.1``, ``0177.0.0.1``) is rewritten as the
dotted quad it means, an IPv6 literal in its compressed form, a name in lower case without a
trailing dot; the port is kept only when it is not the scheme's default. What is stored, listed
and delivered to is that normal form, so one address has one spelling.

**Which addresses.** Server-side request forgery is the risk: an alert is a way to make the
service send a request where its admin (who may be one tenant's, ``t1-``) could not. So by
default a delivery reaches only global addresses: never loopback, private (RFC 1918, unique
local), shared (100.64/10), link-local (cloud metadata at 169.254.169.254), multicast,
unspecified or reserved, IPv4 mapped into IPv6 included. This holds for every key, root or
prefixed. The operator opts hosts or networks in with ``SIFT_ALERT_PRIVATE`` (host names,
``*.`` for a domain and below, and networks in CIDR notation, comma-separated), for an
Alertmanager or a receiver inside the cluster. ``SIFT_ALERT_HOSTS``, when set, further limits
deliveries to the hosts it names.

**Checked where it matters.** A literal address that may not be reached, and ``localhost`` with
its subdomains, are refused when the alert is created (they can never be delivered). A name is
resolved at every delivery, and the address judged is the address connected to: a name that
resolved to a global address when the alert was created and to 127.0.0.1 now (DNS rebinding)
is refused at delivery, never reached.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from service.errors import DestinationNotAllowed, InvalidInput

#: The longest URL an alert may have.
MAX_URL_LENGTH = 2048
DEFAULT_PORTS = {"http": 80, "https": 443}
#: A host made only of the parts inet_aton reads as numbers (decimal, octal, hex), 1 to 4 of
#: them: what a resolver would take for an IPv4 address, however spelled.
_NUMERIC_HOST = re.compile(r"(?:0x[0-9a-f]*|[0-9]+)(?:\.(?:0x[0-9a-f]*|[0-9]+)){0,3}\.?")
_NUMBER = re.compile(r"0x[0-9a-f]*|[0-9]+")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Destination:
    """An alert URL in its normal form (module docstring), and its parts."""

    scheme: str
    #: A lower-case name, a dotted quad or a compressed IPv6 address (without brackets).
    host: str
    port: int
    #: The path and query, as sent in the request line (``/`` at least).
    target: str

    @property
    def literal(self) -> IPAddress | None:
        """The host as an address, when it is one."""
        try:
            return ipaddress.ip_address(self.host)
        except ValueError:
            return None

    @property
    def authority(self) -> str:
        """The ``Host`` header: the host (IPv6 in brackets), and the port unless default."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == DEFAULT_PORTS[self.scheme] else f"{host}:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.authority}{self.target}"


def parse_destination(url: object) -> Destination:
    """``url`` in its normal form, or InvalidInput saying what was expected."""
    if not isinstance(url, str) or not url:
        raise InvalidInput(f"url must be an http or https URL; got {url!r}")
    if len(url) > MAX_URL_LENGTH:
        raise InvalidInput(f"url must be at most {MAX_URL_LENGTH} characters; got {len(url)}")
    if any(ord(c) < 33 or ord(c) == 127 for c in url):
        raise InvalidInput("url must not contain spaces or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InvalidInput(f"url is not a valid URL ({exc}); got {url[:200]!r}") from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise InvalidInput(f"url must use http or https; got {parts.scheme or 'no scheme'!r}")
    if parts.username is not None or parts.password is not None:
        raise InvalidInput("url must not carry credentials (user:password@): alerts are listed")
    host = normal_host(parts.hostname or "")
    if port == 0:
        raise InvalidInput("url must not name port 0")
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    return Destination(scheme, host, DEFAULT_PORTS[scheme] if port is None else port, target)


def normal_host(host: str) -> str:
    """The one spelling of ``host`` (module docstring), or DestinationNotAllowed for a host
    that can never be reached (a number that is no IPv4 address, a name that is no host
    name): rules the schema's URL pattern cannot state."""
    host = host.lower()
    if not host:
        raise DestinationNotAllowed("url must name a host")
    if ":" in host:
        try:
            return ipaddress.IPv6Address(host.split("%", 1)[0]).compressed
        except ValueError:
            raise DestinationNotAllowed(
                f"url's host is not a valid IPv6 address; got {host!r}"
            ) from None
    if _NUMBER.fullmatch(host.rstrip(".").rsplit(".", 1)[-1]):
        # Ends in a number: an IPv4 address however spelled, or nothing (as URL parsers read
        # it: "1.2.3.4.5" is not a name that resolves, it is an invalid address).
        if not _NUMERIC_HOST.fullmatch(host):
            raise DestinationNotAllowed(f"url's host is not a valid IPv4 address; got {host!r}")
        try:
            return socket.inet_ntoa(socket.inet_aton(host.rstrip(".")))
        except OSError:
            raise DestinationNotAllowed(
                f"url's host is not a valid IPv4 address; got {host!r}"
            ) from None
    host = host.rstrip(".")
    labels = host.split(".")
    if len(host) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        raise DestinationNotAllowed(f"url's host is not a valid host name; got {host[:100]!r}")
    return host


_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")


def host_matches(host: str, patterns: list[str]) -> bool:
    """Whether ``host`` is one of ``patterns`` (``*.example.com``: the domain and below)."""
    for pattern in patterns:
        if pattern.startswith("*."):
            domain = pattern[2:]
            if host == domain or host.endswith("." + domain):
                return True
        elif host == pattern:
            return True
    return False


def forbidden_kind(address: IPAddress) -> str | None:
    """What makes ``address`` unreachable by default (None: a global address)."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour
        if embedded is not None:
            return forbidden_kind(embedded)
    for kind, test in (
        ("unspecified", address.is_unspecified),
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("reserved", address.is_reserved),
        ("private", address.is_private),
    ):
        if test:
            return kind
    return None if address.is_global else "non-global"


@dataclass(frozen=True)
class DestinationPolicy:
    """The operator's settings on destinations (module docstring)."""

    #: ``SIFT_ALERT_HOSTS``: the only hosts deliveries may go to (empty: any).
    hosts: list[str]
    #: ``SIFT_ALERT_PRIVATE``: hosts and networks opted in although not global.
    private_hosts: list[str]
    private_networks: list[IPNetwork]

    @classmethod
    def of(cls, hosts: str, private: str) -> DestinationPolicy:
        """From the two settings' text; ValueError naming an entry that is not a host name,
        a domain pattern or a network."""
        names: list[str] = []
        networks: list[IPNetwork] = []
        for entry in _entries(private):
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
                continue
            except ValueError:
                pass
            try:
                wildcard = entry.startswith("*.")
                names.append(("*." if wildcard else "") + normal_host(entry[2 * wildcard :]))
            except InvalidInput:
                raise ValueError(
                    f"SIFT_ALERT_PRIVATE: {entry!r} is neither a host name, *.domain, nor a "
                    "network (CIDR)"
                ) from None
        return cls(_entries(hosts), names, networks)

    def check(self, destination: Destination) -> Destination:
        """``destination`` if an alert may be created for it, else InvalidInput saying why."""
        host = destination.host
        if self.hosts and not host_matches(host, self.hosts):
            raise DestinationNotAllowed(
                f"alerts may send to {', '.join(self.hosts)} (SIFT_ALERT_HOSTS); got host {host!r}"
            )
        literal = destination.literal
        if literal is not None:
            refusal = self.refusal(host, literal)
            if refusal is not None:
                raise DestinationNotAllowed(f"url's host {host} is {refusal}")
        elif (host == "localhost" or host.endswith(".localhost")) and not host_matches(
            host, self.private_hosts
        ):
            raise DestinationNotAllowed(
                f"url's host {host!r} is a loopback name, which alerts may not reach unless "
                "the operator allows it (SIFT_ALERT_PRIVATE)"
            )
        return destination

    def refusal(self, host: str, address: IPAddress) -> str | None:
        """Why ``address`` (what ``host`` resolved to) may not be connected to (None: it
        may)."""
        kind = forbidden_kind(address)
        if kind is None or host_matches(host, self.private_hosts):
            return None
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if any(address in network for network in self.private_networks):
            return None
        return (
            f"a {kind} address, which alerts may not reach unless the operator allows it "
            "(SIFT_ALERT_PRIVATE)"
        )


def _entries(setting: str) -> list[str]:
    return [entry.strip().lower() for entry in setting.split(",") if entry.strip()]
