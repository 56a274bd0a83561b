"""Which IP addresses an outbound request may reach, and which host spellings are IPs.

The blocklist is explicit rather than "whatever :attr:`ipaddress.IPv4Address.is_global`
says" because the standard library's notion moves between Python versions and misses
cases that matter here (multicast counts as "global"; so does the new IPv6 documentation
prefix ``3fff::/20``).  ``is_global`` is still consulted last, as a catch-all for the rest
of the IANA special-purpose registries.

IPv6 has several ways to *embed* an IPv4 address (IPv4-mapped ``::ffff:a.b.c.d``, the
deprecated IPv4-compatible ``::a.b.c.d``, NAT64 ``64:ff9b::/96``, 6to4 ``2002::/16``,
SIIT ``::ffff:0:a.b.c.d``).  Depending on the host's stack these reach the embedded IPv4
address, so ``::ffff:127.0.0.1`` is loopback: such an address gets the verdict of the
address it embeds.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network

from ._errors import OutboundRefused

__all__ = ["IPAddress", "address_refusal", "ip_literal", "parse_address"]

IPAddress = IPv4Address | IPv6Address

_V4 = IPv4Network
_V6 = IPv6Network

#: Forbidden IPv4 ranges, with what they are (RFC 6890 and the IANA registry).
_IPV4_FORBIDDEN: tuple[tuple[IPv4Network, str], ...] = (
    (_V4("0.0.0.0/8"), "an unspecified ('this network') address"),
    (_V4("10.0.0.0/8"), "a private address"),
    (_V4("100.64.0.0/10"), "a shared (carrier-grade NAT) address"),
    (_V4("127.0.0.0/8"), "a loopback address"),
    (_V4("169.254.0.0/16"), "a link-local address (cloud metadata lives here)"),
    (_V4("172.16.0.0/12"), "a private address"),
    (_V4("192.0.0.0/24"), "an IETF protocol-assignment address"),
    (_V4("192.0.2.0/24"), "a documentation address"),
    (_V4("192.88.99.0/24"), "a 6to4 relay anycast address"),
    (_V4("192.168.0.0/16"), "a private address"),
    (_V4("198.18.0.0/15"), "a benchmarking address"),
    (_V4("198.51.100.0/24"), "a documentation address"),
    (_V4("203.0.113.0/24"), "a documentation address"),
    (_V4("224.0.0.0/4"), "a multicast address"),
    (_V4("240.0.0.0/4"), "a reserved address"),
)

#: Forbidden IPv6 ranges that do not embed an IPv4 address.
_IPV6_FORBIDDEN: tuple[tuple[IPv6Network, str], ...] = (
    (_V6("::/128"), "the unspecified address"),
    (_V6("::1/128"), "the loopback address"),
    (_V6("100::/64"), "a discard-only address"),
    (_V6("64:ff9b:1::/48"), "a local-use NAT64 address"),
    (_V6("2001::/23"), "an IETF protocol-assignment address (Teredo, benchmarking)"),
    (_V6("2001:db8::/32"), "a documentation address"),
    (_V6("3fff::/20"), "a documentation address"),
    (_V6("fc00::/7"), "a unique-local (private) address"),
    (_V6("fe80::/10"), "a link-local address"),
    (_V6("fec0::/10"), "a site-local address"),
    (_V6("ff00::/8"), "a multicast address"),
)

#: IPv6 forms whose low 32 bits are an IPv4 address.
_EMBEDDING: tuple[tuple[IPv6Network, str], ...] = (
    (_V6("::ffff:0:0/96"), "IPv4-mapped"),
    (_V6("::ffff:0:0:0/96"), "IPv4-translated"),
    (_V6("::/96"), "IPv4-compatible"),
    (_V6("64:ff9b::/96"), "NAT64"),
)
_SIXTOFOUR = _V6("2002::/16")


def _embedded_ipv4(ip: IPv6Address) -> tuple[IPv4Address, str] | None:
    """The IPv4 address an IPv6 address carries, and the name of the form, if any."""
    for network, form in _EMBEDDING:
        if ip in network:
            return IPv4Address(int(ip) & 0xFFFFFFFF), form
    if ip in _SIXTOFOUR and ip.sixtofour is not None:
        return ip.sixtofour, "6to4"
    return None


def address_refusal(ip: IPAddress) -> str | None:
    """Why a request must not go to ``ip`` (a phrase such as "a loopback address"), or None.

    ``None`` means a public, unicast, globally routable address.
    """
    forbidden = _IPV4_FORBIDDEN if isinstance(ip, IPv4Address) else _IPV6_FORBIDDEN
    for network, what in forbidden:
        if ip in network:
            return what
    embedded = _embedded_ipv4(ip) if isinstance(ip, IPv6Address) else None
    if embedded is not None:
        inner, form = embedded
        verdict = address_refusal(inner)
        return None if verdict is None else f"the {form} form of {inner}, {verdict}"
    return None if ip.is_global else "not a globally routable address"


def parse_address(text: str) -> IPAddress:
    """An address as returned by a resolver; an IPv6 zone (``%eth0``) is dropped."""
    return ipaddress.ip_address(text.partition("%")[0])


_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_DOTTED_QUAD = re.compile(rf"{_OCTET}(?:\.{_OCTET}){{3}}")
_NUMBER = re.compile(r"[0-9]+|0x[0-9a-f]*")


def ip_literal(host: str) -> IPAddress | None:
    """The IP address a URL host names, ``None`` for a DNS name.

    ``host`` is lowercase, without brackets.  Only the canonical spellings are accepted:
    dotted-quad IPv4 (no leading zeros) and IPv6.  Everything else that a browser or
    ``inet_aton`` would read as a number -- ``2130706433``, ``0x7f.1``, ``0177.0.0.1``,
    ``127.1``, ``127.0.0.1.`` -- is refused: resolvers disagree on what these mean, which
    is exactly what SSRF filters get bypassed with.
    """
    if ":" in host:
        if "%" in host:
            raise OutboundRefused("IPv6 zone identifiers are not allowed in URLs")
        try:
            return IPv6Address(host)
        except ValueError:
            raise OutboundRefused("the URL's host is not a valid IPv6 address") from None
    if _DOTTED_QUAD.fullmatch(host):
        return IPv4Address(host)
    # WHATWG URL: a host whose last label is a number is an IPv4 address, however written.
    last_label = host.removesuffix(".").rpartition(".")[2]
    ambiguous = _NUMBER.fullmatch(last_label) is not None
    if not ambiguous:
        try:
            socket.inet_aton(host)
            ambiguous = True
        except (OSError, ValueError):
            pass
    if ambiguous:
        raise OutboundRefused(
            f"the URL's host {host!r} is an unusual numeric form; write IPv4 addresses "
            "as four decimal numbers (a.b.c.d)"
        )
    return None
