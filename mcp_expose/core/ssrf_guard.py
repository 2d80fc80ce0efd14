"""Where an upstream may be: HTTPS on a public address, unless the deployment allows more. The SSRF guard.

An upstream's URL is entered by an administrator, but what its host resolves to can change after it was
checked, and an admin form is one more way into the network behind it. So every address the host resolves
to is checked when the server is saved, and again each time a connection is made (`connectable_address`).
Refused, unless `UPSTREAM_ALLOWED_NETWORKS` lists them: private, shared (CGNAT), link-local and reserved
addresses; loopback, unless `UPSTREAM_ALLOW_LOOPBACK`. Refused whatever is listed: unspecified addresses (which
reach this host), multicast, and the cloud metadata endpoints. An IPv4 address inside an IPv6 one (mapped,
6to4, Teredo, NAT64) is judged as itself.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

from mcp_expose.core.conf import get_settings
from mcp_expose.core.errors import McpExposeError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# Instance metadata and credential services, refused whatever is allowed: AWS, GCP, Azure and OpenStack
# (169.254.169.254), AWS over IPv6, ECS task credentials and EKS pod identity (169.254.170.2, 169.254.170.23,
# fd00:ec2::23), Alibaba Cloud, Oracle Cloud (192.0.0.192), Azure WireServer (168.63.129.16).
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(address)
    for address in (
        "169.254.169.254",
        "fd00:ec2::254",
        "169.254.170.2",
        "169.254.170.23",
        "fd00:ec2::23",
        "100.100.100.200",
        "192.0.0.192",
        "168.63.129.16",
    )
)
# IPv6 prefixes that carry an IPv4 address in their last 32 bits: NAT64 (RFC 6052, RFC 8215) and the
# deprecated IPv4-compatible form.
EMBEDDING_IPV4 = tuple(ipaddress.ip_network(network) for network in ("64:ff9b::/96", "64:ff9b:1::/48", "::/96"))
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})
MAX_URL_LENGTH = 2000


class AddressRefused(McpExposeError, ValueError):
    """The URL, or an address its host resolves to, is not one an upstream may have; the message says why."""


def check_url(url: str) -> tuple[str, int]:
    """The URL's host and port, when its form is one an upstream may have (HTTPS; HTTP only to loopback when
    allowed). Resolves nothing: `check_host` does."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL_LENGTH:
        raise AddressRefused(f"Enter an https:// URL of at most {MAX_URL_LENGTH} characters.")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise AddressRefused(f"The URL cannot be read: {exc}.") from None
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise AddressRefused("Enter an https:// URL with a host.")
    if parts.username is not None or parts.password is not None:
        raise AddressRefused("Put credentials in the server's authentication, never in its URL.")
    if parts.fragment:
        raise AddressRefused("An upstream URL has no #fragment.")
    host = parts.hostname
    if parts.scheme == "http" and not (get_settings().UPSTREAM_ALLOW_LOOPBACK and is_loopback_name(host)):
        raise AddressRefused(
            "Use https://. Plain http:// is accepted only to a loopback address (127.0.0.1, ::1, localhost), "
            "and only with UPSTREAM_ALLOW_LOOPBACK on."
        )
    return host, port if port is not None else (443 if parts.scheme == "https" else 80)


def is_loopback_name(host: str) -> bool:
    if host.lower().rstrip(".") in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_host(host: str, port: int) -> list[IPAddress]:
    """Every address `host` resolves to, each allowed; else `AddressRefused` naming the first that is not."""
    try:
        # An address in its usual form needs no look-up (its zone dropped, as below, so that no zone hides it).
        addresses: list[IPAddress] = [ipaddress.ip_address(host.split("%", 1)[0])]
    except ValueError:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as exc:
            raise AddressRefused(f"The host {host!r} does not resolve ({exc}).") from None
        addresses = list(dict.fromkeys(ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos))
    for address in addresses:
        problem = address_problem(address)
        if problem is not None:
            raise AddressRefused(f"The host {host!r} resolves to {address}, {problem}.")
    return addresses


def connectable_address(url: str) -> tuple[str, int, list[IPAddress]]:
    """`check_url` then `check_host`: what a connection to this upstream may use, checked now."""
    host, port = check_url(url)
    return host, port, check_host(host, port)


def address_problem(address: IPAddress) -> str | None:
    """Why an upstream may not be at `address`, or None."""
    address = _unwrapped(address)
    if address in METADATA_ADDRESSES:
        return "a cloud metadata address, which is never reachable from here"
    if address.is_multicast:
        return "a multicast address"
    if address.is_unspecified:
        return "an unspecified address, which reaches this host"
    if address.is_loopback:
        if get_settings().UPSTREAM_ALLOW_LOOPBACK:
            return None
        return "a loopback address (allowed only with UPSTREAM_ALLOW_LOOPBACK)"
    if address.is_global:
        return None
    if _listed(address, get_settings().UPSTREAM_ALLOWED_NETWORKS):
        return None
    kind = (
        "unspecified"
        if address.is_unspecified
        else "link-local"
        if address.is_link_local
        else "private"
        if address.is_private
        else "not a public"
    )
    return f"a {kind} address (list its network in UPSTREAM_ALLOWED_NETWORKS to allow it)"


def _unwrapped(address: IPAddress) -> IPAddress:
    """An IPv4 address carried inside an IPv6 one (mapped, 6to4, Teredo) is judged as itself."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address.sixtofour is not None:
            return address.sixtofour
        if address.teredo is not None:
            return address.teredo[1]
        for network in EMBEDDING_IPV4:
            if address in network and not address.is_unspecified and not address.is_loopback:
                return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def _listed(address: IPAddress, networks: Iterable[str]) -> bool:
    return any(address in ipaddress.ip_network(network, strict=False) for network in networks)


def network_problem(network: object) -> str | None:
    """Why an `UPSTREAM_ALLOWED_NETWORKS` entry is unusable (for the system check), or None."""
    try:
        ipaddress.ip_network(str(network), strict=False)
    except ValueError as exc:
        return str(exc)
    return None if isinstance(network, str) else "not a string"
