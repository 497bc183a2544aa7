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

**Sources too.** A source's bus is a destination of the same kind (a tenant's admin names it,
the service connects): its policy is a ``DestinationPolicy`` too, with the operator's own
setting (``SIFT_SOURCE_PRIVATE``, which may also name Unix socket paths), judged the same way
on the address connected to (``service.sources.reach``).
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from dataclasses import dataclass, field
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


def normal_host(host: str, field: str = "url") -> str:
    """The one spelling of ``host`` (module docstring), or DestinationNotAllowed for a host
    that can never be reached (a number that is no IPv4 address, a name that is no host
    name): rules the schema's URL pattern cannot state. ``field`` names where it came from."""
    host = host.lower()
    if not host:
        raise DestinationNotAllowed(f"{field} must name a host")
    if ":" in host:
        try:
            return ipaddress.IPv6Address(host.split("%", 1)[0]).compressed
        except ValueError:
            raise DestinationNotAllowed(
                f"{field}'s host is not a valid IPv6 address; got {host[:100]!r}"
            ) from None
    if _NUMBER.fullmatch(host.rstrip(".").rsplit(".", 1)[-1]):
        # Ends in a number: an IPv4 address however spelled, or nothing (as URL parsers read
        # it: "1.2.3.4.5" is not a name that resolves, it is an invalid address).
        if not _NUMERIC_HOST.fullmatch(host):
            raise DestinationNotAllowed(
                f"{field}'s host is not a valid IPv4 address; got {host[:100]!r}"
            )
        try:
            return socket.inet_ntoa(socket.inet_aton(host.rstrip(".")))
        except OSError:
            raise DestinationNotAllowed(
                f"{field}'s host is not a valid IPv4 address; got {host[:100]!r}"
            ) from None
    host = host.rstrip(".")
    labels = host.split(".")
    if len(host) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        raise DestinationNotAllowed(f"{field}'s host is not a valid host name; got {host[:100]!r}")
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
    #: ``SIFT_ALERT_PRIVATE`` (or ``SIFT_SOURCE_PRIVATE``): hosts and networks opted in
    #: although not global.
    private_hosts: list[str]
    private_networks: list[IPNetwork]
    #: What the destinations are for, and the setting that opts them in, as refusals say it.
    what: str = "alerts"
    setting: str = "SIFT_ALERT_PRIVATE"
    #: Unix socket paths opted in (a path, or a folder ending in ``/`` and what is below it);
    #: only where the setting takes them (``paths=True``).
    private_paths: list[str] = field(default_factory=list)

    @classmethod
    def of(
        cls,
        hosts: str,
        private: str,
        *,
        what: str = "alerts",
        setting: str = "SIFT_ALERT_PRIVATE",
        paths: bool = False,
    ) -> DestinationPolicy:
        """From the settings' text; ValueError naming an entry that is not a host name, a
        domain pattern or a network (or, with ``paths``, an absolute path)."""
        names: list[str] = []
        networks: list[IPNetwork] = []
        sockets: list[str] = []
        for entry in _entries(private, lower=False):
            if paths and entry.startswith("/"):
                sockets.append(entry)
                continue
            entry = entry.lower()
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
                continue
            except ValueError:
                pass
            try:
                wildcard = entry.startswith("*.")
                names.append(("*." if wildcard else "") + normal_host(entry[2 * wildcard :]))
            except InvalidInput:
                also = ", an absolute path" if paths else ""
                raise ValueError(
                    f"{setting}: {entry!r} is neither a host name, *.domain{also}, nor a "
                    "network (CIDR)"
                ) from None
        return cls(_entries(hosts), names, networks, what, setting, sockets)

    def check(self, destination: Destination) -> Destination:
        """``destination`` if an alert may be created for it, else InvalidInput saying why."""
        host = destination.host
        if self.hosts and not host_matches(host, self.hosts):
            raise DestinationNotAllowed(
                f"alerts may send to {', '.join(self.hosts)} (SIFT_ALERT_HOSTS); got host {host!r}"
            )
        self.check_host(host)
        return destination

    def check_host(self, host: str, field: str = "url") -> None:
        """DestinationNotAllowed if ``host`` (in its normal form) can be judged now: a literal
        address that may not be reached, or a loopback name not opted in."""
        literal = _literal(host)
        if literal is not None:
            refusal = self.refusal(host, literal)
            if refusal is not None:
                raise DestinationNotAllowed(f"{field}'s host {host} is {refusal}")
        elif (host == "localhost" or host.endswith(".localhost")) and not host_matches(
            host, self.private_hosts
        ):
            raise DestinationNotAllowed(
                f"{field}'s host {host!r} is a loopback name, which {self.what} may not reach "
                f"unless the operator allows it ({self.setting})"
            )

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
            f"a {kind} address, which {self.what} may not reach unless the operator allows it "
            f"({self.setting})"
        )

    def path_allowed(self, path: str) -> bool:
        """Whether a Unix socket at ``path`` (absolute, normalised) is opted in."""
        return any(
            path == entry or (entry.endswith("/") and path.startswith(entry))
            for entry in self.private_paths
        )

    async def allowed_addresses(self, host: str, port: int) -> list[IPAddress]:
        """The addresses ``host`` resolves to now that the policy allows, in the resolver's
        order: what a connection may go to (connect to one of these, never to the name, so
        that the address judged is the address connected to). socket.gaierror if the name
        does not resolve."""
        literal = _literal(host)
        if literal is not None:
            return [] if self.refusal(host, literal) else [literal]
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        allowed: list[IPAddress] = []
        for _family, _type, _proto, _name, sockaddr in infos:
            address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
            if address not in allowed and self.refusal(host, address) is None:
                allowed.append(address)
        return allowed


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _entries(setting: str, lower: bool = True) -> list[str]:
    entries = [entry.strip() for entry in setting.split(",") if entry.strip()]
    return [entry.lower() for entry in entries] if lower else entries
