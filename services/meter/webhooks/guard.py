"""Where a webhook may be sent: the address guard.

Only public addresses (`ipaddress`'s `is_global`, not multicast) are reached, unless the
operator allows networks (`TRAINYARD_WEBHOOK_ALLOWED_NETWORKS`); loopback, private,
link-local, unspecified and reserved addresses are refused, as are IPv6 forms that carry
one of them inside (IPv4-mapped, 6to4, Teredo, NAT64). Plain `http://` goes only to an
allowed network; a public address needs `https://`.

A URL is checked at create (a literal address, or every address its name resolves to
now) and again before every attempt, after resolving the name afresh: the attempt
connects to the address that was checked, so a name that resolves elsewhere between the
check and the connection (DNS rebinding) cannot redirect it."""

from __future__ import annotations

import dataclasses
import ipaddress
import re
import socket
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

from services.core import errors

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
# host, port -> the addresses it resolves to (socket.getaddrinfo's, by default).
Resolver = Callable[[str, int], list[str]]

MAX_URL = 2048
PRINTABLE = re.compile(r"^[\x21-\x7e]+$")
NAT64 = ipaddress.ip_network("64:ff9b::/96")
# The phrase a refused URL answers, naming the field only.
REFUSED_URL = "must be an https:// URL of a public address, or one the deployment allows"


class Refused(Exception):
    """No attempt may be made now; `category` is what the delivery log records."""

    def __init__(self, category: str) -> None:
        super().__init__(category)
        self.category = category


@dataclasses.dataclass(frozen=True)
class Target:
    """Where one attempt goes: the URL's parts, and the address checked for it."""

    scheme: str
    host: str
    port: int
    # The path and query, as the URL has them ("/" when empty).
    target: str
    address: Address

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"

    @property
    def connect_url(self) -> str:
        """The URL naming the checked address itself, so no second lookup happens."""
        literal = f"[{self.address}]" if self.address.version == 6 else str(self.address)
        return f"{self.scheme}://{literal}:{self.port}{self.target}"


def system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _inner(address: Address) -> list[Address]:
    """The IPv4 addresses an IPv6 one carries and would reach through a relay."""
    if not isinstance(address, ipaddress.IPv6Address):
        return []
    found: list[Address] = []
    if address.ipv4_mapped is not None:
        found.append(address.ipv4_mapped)
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)
    if address in NAT64:
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return found


def _public(address: Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return _public(address.ipv4_mapped)  # judged as the IPv4 address it is
    if address.is_multicast or address.is_unspecified or address.is_reserved:
        return False
    return address.is_global and all(_public(inner) for inner in _inner(address))


class Guard:
    """The operator's allowed networks, and the resolver names are looked up with."""

    def __init__(self, allowed: Iterable[str] = (), resolver: Resolver = system_resolver) -> None:
        self._networks = tuple(ipaddress.ip_network(n, strict=False) for n in allowed)
        self._resolve = resolver

    def allowed_network(self, address: Address) -> bool:
        """Whether the operator allows the address's network (IPv4-mapped forms count as
        the IPv4 address they carry)."""
        forms = [address]
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            forms.append(address.ipv4_mapped)
        return any(form in network for form in forms for network in self._networks)

    def allows(self, address: Address, scheme: str) -> bool:
        if self.allowed_network(address):
            return True
        return scheme == "https" and _public(address)

    def check_at_create(self, url: str) -> None:
        """Refuse, naming `url` and never echoing it, a URL no delivery could be sent to: a
        malformed one, or one whose literal address or resolved addresses are not
        allowed. An https:// name that does not resolve yet passes: each attempt checks
        it again."""
        scheme, host, port, _ = parse(url)
        literal = _literal(host)
        if literal is not None:
            addresses = [literal]
        else:
            try:
                addresses = self._lookup(host, port)
            except Refused:
                if scheme == "http":  # an allowed network cannot be shown for it
                    raise errors.ValidationError("url", REFUSED_URL) from None
                return
        if not all(self.allows(a, scheme) for a in addresses):
            raise errors.ValidationError("url", REFUSED_URL)

    def target(self, url: str) -> Target:
        """Where an attempt goes now: the URL's name resolved afresh, and every address it
        resolves to allowed (one that is not refuses them all), else `Refused`."""
        try:
            scheme, host, port, path = parse(url)
        except errors.ValidationError:
            raise Refused("address_not_allowed") from None
        literal = _literal(host)
        addresses = [literal] if literal is not None else self._lookup(host, port)
        if not addresses or not all(self.allows(a, scheme) for a in addresses):
            raise Refused("address_not_allowed")
        return Target(scheme, host, port, path, addresses[0])

    def _lookup(self, host: str, port: int) -> list[Address]:
        try:
            found = [ipaddress.ip_address(a.split("%", 1)[0]) for a in self._resolve(host, port)]
        except (OSError, UnicodeError, ValueError):
            raise Refused("name_not_resolved") from None
        if not found:
            raise Refused("name_not_resolved")
        return found


def _literal(host: str) -> Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def parse(url: str) -> tuple[str, str, int, str]:
    """A webhook URL's scheme, host, port and path with its query; refused naming `url`
    (never echoing it) unless it is an http:// or https:// URL of at most 2048 printable
    characters with a host and no user, password or fragment."""
    if not url:
        raise errors.ValidationError("url", "is required")
    problem = errors.ValidationError(
        "url", "must be an http:// or https:// URL with a host, no credentials and no fragment"
    )
    if len(url) > MAX_URL or not PRINTABLE.fullmatch(url):
        raise problem
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise problem from None
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.username is not None
        or parts.password is not None
        or parts.fragment
        or "#" in url
    ):
        raise problem
    path = parts.path or "/"
    if parts.query:
        path = f"{path}?{parts.query}"
    return parts.scheme, parts.hostname, port or (443 if parts.scheme == "https" else 80), path
