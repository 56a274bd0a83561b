"""Parsing and checking a user-supplied URL (:func:`check_url`), and checking what its
host resolved to (:func:`pin_addresses`).  Nothing here touches the network."""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit

import attrs
import idna

from ._addresses import IPAddress, address_refusal, ip_literal, parse_address
from ._errors import OutboundRefused
from ._policy import OutboundPolicy

__all__ = ["Target", "check_url", "pin_addresses"]

_DEFAULT_PORTS = {"http": 80, "https": 443}
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
_PORT = re.compile(r"[0-9]{1,5}")
_BAD_CHARS = re.compile(r"[\x00-\x20\x7f\\]")


@attrs.frozen
class Target:
    """A checked URL: where a request may go, before (or without) DNS resolution."""

    #: ``"http"`` or ``"https"``.
    scheme: str
    #: The ASCII host name (IDNA-encoded, no trailing dot), or an IP address's text.
    host: str
    port: int
    #: Path and query as written (at least ``"/"``); the fragment is never sent.
    path: str
    #: The address itself when the URL names an IP literal (then no DNS is involved).
    ip: IPAddress | None = None

    @property
    def host_header(self) -> str:
        """The ``Host`` header value: the host as the URL named it, port if not default."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == _DEFAULT_PORTS[self.scheme] else f"{host}:{self.port}"

    @property
    def origin(self) -> str:
        """``scheme://host[:port]``, for messages (the path may hold secrets; this not)."""
        return f"{self.scheme}://{self.host_header}"


def _hostname(raw: str) -> str:
    host = raw.lower().removesuffix(".")
    if not host.isascii():
        try:
            host = idna.encode(host, uts46=True).decode("ascii")
        except idna.IDNAError:
            raise OutboundRefused("the URL's host is not a valid domain name") from None
    if len(host) > 253 or not all(_LABEL.fullmatch(label) for label in host.split(".")):
        raise OutboundRefused("the URL's host is not a valid domain name")
    return host


def check_url(url: str, policy: OutboundPolicy) -> Target:
    """Check a URL's form against the policy, without any DNS; raise ``OutboundRefused``.

    Refused: schemes other than http(s) (http too when ``policy.https_only``), userinfo
    (``user:pass@`` -- it confuses parsers and humans alike about which host is meant),
    a missing host, odd numeric IPv4 spellings, a bad port, control characters and
    backslashes.  An IP-literal host is checked against the address rules right here;
    a name is checked when it is resolved (:func:`pin_addresses`), and ``localhost``
    names are refused up front unless private addresses are allowed.
    """
    if not isinstance(url, str) or not url:
        raise OutboundRefused("the URL is empty")
    if _BAD_CHARS.search(url):
        raise OutboundRefused("the URL contains whitespace, control characters or backslashes")
    try:
        parts = urlsplit(url)
    except ValueError:
        raise OutboundRefused("the URL cannot be parsed") from None
    scheme = _allowed_scheme(parts.scheme, policy)
    raw_host, port = _host_and_port(parts.netloc, scheme)
    path = parts.path or "/"
    if not path.startswith("/"):
        raise OutboundRefused("the URL's path is malformed")
    if parts.query:
        path = f"{path}?{parts.query}"
    return _checked_host(scheme, raw_host, port, path, policy)


def _allowed_scheme(raw: str, policy: OutboundPolicy) -> str:
    scheme = raw.lower()
    if scheme not in _DEFAULT_PORTS:
        raise OutboundRefused("only http and https URLs are allowed")
    if scheme == "http" and policy.https_only:
        raise OutboundRefused("only https URLs are allowed")
    return scheme


def _host_and_port(netloc: str, scheme: str) -> tuple[str, int]:
    """The host as written (brackets removed) and the port, explicit or the scheme's."""
    if "@" in netloc:
        raise OutboundRefused("URLs with credentials (user:password@) are not allowed")
    if netloc.startswith("["):
        raw_host, bracket, rest = netloc[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")) or ":" not in raw_host:
            raise OutboundRefused("the URL's host is malformed")
        raw_port = rest[1:] if rest else ""
    else:
        raw_host, colon, raw_port = netloc.partition(":")
        if colon and not raw_port:
            raise OutboundRefused("the URL's port is empty")
    if not raw_host:
        raise OutboundRefused("the URL has no host")
    if raw_port:
        if not _PORT.fullmatch(raw_port) or not 0 < int(raw_port) < 65536:
            raise OutboundRefused("the URL's port must be a number from 1 to 65535")
        port = int(raw_port)
    else:
        port = _DEFAULT_PORTS[scheme]
    return raw_host, port


def _checked_host(
    scheme: str, raw_host: str, port: int, path: str, policy: OutboundPolicy
) -> Target:
    """An IP literal is judged by the address rules now; a name waits for its resolution,
    except ``localhost`` names, refused up front unless private addresses are allowed."""
    ip = ip_literal(raw_host.lower())
    if ip is not None:
        verdict = _refusal(ip, policy)
        if verdict is not None:
            raise OutboundRefused(f"{ip} is {verdict}")
        return Target(scheme=scheme, host=str(ip), port=port, path=path, ip=ip)
    host = _hostname(raw_host)
    if ip_literal(host) is not None:  # e.g. full-width digits, which IDNA maps to ASCII
        raise OutboundRefused("the URL's host is an IP address in non-ASCII characters")
    if not policy.allow_private and (host == "localhost" or host.endswith(".localhost")):
        raise OutboundRefused(f"{host} is a loopback name")
    return Target(scheme=scheme, host=host, port=port, path=path)


def _refusal(ip: IPAddress, policy: OutboundPolicy) -> str | None:
    """Why ``ip`` is off limits under ``policy``.  Link-local addresses are refused even
    where private ones are allowed: that is where cloud metadata services live
    (169.254.169.254), and a development server on a cloud machine must not reach them."""
    verdict = address_refusal(ip)
    if verdict is None or not policy.allow_private:
        return verdict
    return verdict if "link-local" in verdict else None


def pin_addresses(target: Target, answers: Iterable[str], policy: OutboundPolicy) -> list[str]:
    """The addresses a request to ``target`` may connect to, given its resolution.

    Every address is checked, and if *any* is forbidden the whole request is refused: a
    name with one public and one private record is a classic way to slip past a filter
    that checks one address while the HTTP stack connects to another.
    """
    if target.ip is not None:
        return [str(target.ip)]
    pinned: list[str] = []
    for answer in answers:
        try:
            ip = parse_address(answer)
        except ValueError:
            raise OutboundRefused(f"{target.host} resolved to a non-address {answer!r}") from None
        verdict = _refusal(ip, policy)
        if verdict is not None:
            raise OutboundRefused(f"{target.host} resolves to {ip}, {verdict}")
        if str(ip) not in pinned:
            pinned.append(str(ip))
    return pinned
