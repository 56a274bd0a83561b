"""What both send paths share: the checked plan of one request, and its result.

As in httpx's own ``BaseClient`` / ``Client`` / ``AsyncClient`` split, everything that
does not do I/O -- checking the URL and headers, checking the resolved addresses,
building the pinned request, mapping errors, shaping the result -- lives in :class:`Plan`;
:func:`~._async.send` and :func:`~._sync.send` (generated from it) only add resolution,
the connection attempts and the capped body read, each in its own I/O style.
"""

from __future__ import annotations

import functools
import re
import ssl
import time
from collections.abc import Iterable, Mapping
from typing import Any

import attrs
import httpx

from ._errors import OutboundFailed, OutboundRefused
from ._policy import OutboundPolicy
from ._target import Target, check_url, pin_addresses

__all__ = ["Headers", "OutboundResponse", "Plan", "default_tls_context", "take"]

#: Request headers as a mapping or as ``(name, value)`` pairs.
Headers = Mapping[str, str] | Iterable[tuple[str, str]]

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE = re.compile(r"[\x00\r\n]")
#: Headers that describe the connection or the framing, not the message: they are ours to
#: set (``Host`` above all -- it must name the host that was checked) and callers' copies
#: are dropped.
_CONTROLLED = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authorization",
        "te",
        "trailer",
        "upgrade",
        "expect",
    }
)


@attrs.frozen
class OutboundResponse:
    """What came back.  Redirects are not followed: a 3xx is returned as it is."""

    status: int
    headers: httpx.Headers
    #: At most ``policy.max_response_bytes`` of the body, as sent (no decoding).
    body: bytes
    #: True when the body was longer than the cap and the rest was not read.
    truncated: bool
    #: Seconds from the start of :func:`send` (resolution included) to the end of the read.
    elapsed: float
    #: The address the request was sent to (the pinned, checked one).
    ip: str

    @property
    def status_code(self) -> int:
        """:attr:`status`, under httpx's name."""
        return self.status

    @property
    def is_success(self) -> bool:
        return 200 <= self.status < 300

    @property
    def is_redirect(self) -> bool:
        return 300 <= self.status < 400

    @property
    def location(self) -> str | None:
        """The ``Location`` header of a redirect (reported, never followed)."""
        value = self.headers.get("location")
        return value if isinstance(value, str) else None

    @property
    def text(self) -> str:
        """The (possibly truncated) body decoded with its charset, errors replaced."""
        charset = httpx.Response(200, headers=self.headers).charset_encoding or "utf-8"
        try:
            return self.body.decode(charset, errors="replace")
        except LookupError:
            return self.body.decode("utf-8", errors="replace")


def _tls_error(exc: BaseException) -> ssl.SSLError | None:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


@attrs.frozen
class Plan:
    """One checked request: everything but the I/O, shared by both send paths."""

    method: str
    target: Target
    headers: tuple[tuple[str, str], ...]
    content: bytes | None
    policy: OutboundPolicy
    started: float = attrs.field(factory=time.monotonic)

    @classmethod
    def make(
        cls,
        method: str,
        url: str,
        headers: Headers | None,
        content: bytes | None,
        policy: OutboundPolicy,
    ) -> Plan:
        """Check everything that can be checked before any I/O; raise OutboundRefused."""
        target = check_url(url, policy)
        if not _TOKEN.fullmatch(method):
            raise OutboundRefused("the HTTP method is not a valid token")
        if content is not None and len(content) > policy.max_request_bytes:
            raise OutboundRefused(
                f"the request body ({len(content)} bytes) is larger than the "
                f"{policy.max_request_bytes}-byte limit"
            )
        pairs = headers.items() if isinstance(headers, Mapping) else (headers or ())
        kept: list[tuple[str, str]] = []
        for name, value in pairs:
            if not _TOKEN.fullmatch(name) or _BAD_VALUE.search(value):
                raise OutboundRefused(f"the request header {name!r} is malformed")
            if name.lower() not in _CONTROLLED:
                kept.append((name, value))
        names = {name.lower() for name, _ in kept}
        if "user-agent" not in names:
            kept.append(("User-Agent", policy.user_agent))
        if "accept-encoding" not in names:
            kept.append(("Accept-Encoding", "identity"))  # the cap counts the bytes as sent
        kept.append(("Host", target.host_header))
        return cls(
            method=method.upper(),
            target=target,
            headers=tuple(kept),
            content=content,
            policy=policy,
        )

    # -- resolution ---------------------------------------------------------------------

    def remaining(self) -> float:
        return self.policy.total_timeout - (time.monotonic() - self.started)

    def pin(self, answers: Iterable[str]) -> list[str]:
        addresses = pin_addresses(self.target, answers, self.policy)
        if not addresses:
            raise OutboundFailed(f"{self.target.host} did not resolve to any address")
        return addresses

    def resolve_failed(self, exc: OSError) -> OutboundFailed:
        return OutboundFailed(f"could not resolve {self.target.host}: {exc.strerror or exc}")

    # -- the pinned request -------------------------------------------------------------

    def pool_key(self, ip: str) -> tuple[str, str, int, str]:
        """What a kept-alive connection must match to be reused for this request: the
        scheme, the checked name (its TLS certificate was verified for it) and port, and
        the checked address it was pinned to."""
        return (self.target.scheme, self.target.host, self.target.port, ip)

    def request(self, ip: str, trace: Any = None, *, keep_alive: bool = False) -> httpx.Request:
        """The request to send: to ``ip`` itself, with Host and TLS on the original name.

        Without ``keep_alive`` the connection carries this one request (``Connection:
        close``): a client's own pool is keyed by address alone, so a connection to the
        same IP but verified for another name (or pinned for another URL) could otherwise
        be reused.  With it, the caller guarantees the client only ever sends requests of
        one :meth:`pool_key` (:class:`~._async_io.AsyncPinnedClients`).

        The URL's host is the checked IP, so the HTTP stack has nothing left to resolve:
        no second DNS lookup, hence no DNS rebinding between check and connect.  The
        ``Host`` header carries the name, and httpcore's ``sni_hostname`` extension makes
        the TLS handshake send that name as SNI *and* verify the certificate against it
        (``server_hostname`` in :meth:`ssl.SSLContext.wrap_socket`), so HTTPS stays as
        strict as a normal request to the name.
        """
        host = f"[{ip}]" if ":" in ip else ip
        url = httpx.URL(f"{self.target.scheme}://{host}:{self.target.port}{self.target.path}")
        if url.host != ip:  # the parsed URL must point exactly where we checked
            raise OutboundRefused("the URL could not be pinned to its checked address")
        budget = max(self.remaining(), 0.001)
        read = min(self.policy.read_timeout, budget)
        extensions: dict[str, Any] = {
            "timeout": {
                "connect": min(self.policy.connect_timeout, budget),
                "read": read,
                "write": read,
                "pool": read,
            }
        }
        if self.target.scheme == "https" and self.target.ip is None:
            extensions["sni_hostname"] = self.target.host
        if trace is not None:
            extensions["trace"] = trace
        headers = list(self.headers)
        if not keep_alive:
            headers.append(("Connection", "close"))
        return httpx.Request(
            self.method,
            url,
            headers=headers,
            content=self.content,
            extensions=extensions,
        )

    def next_address_worth_trying(self, exc: httpx.ConnectError) -> bool:
        """Whether a failed connect may fall through to the host's next checked address.

        Refused / unreachable: yes (e.g. an IPv6 address on a host without IPv6).  A TLS
        failure: no -- the server answered, and its certificate is the problem.
        """
        return _tls_error(exc) is None

    def failed(self, exc: httpx.HTTPError) -> OutboundFailed:
        origin = self.target.origin
        tls = _tls_error(exc)
        if tls is not None:
            detail = getattr(tls, "verify_message", None) or tls.reason or str(tls)
            return OutboundFailed(f"TLS with {origin} failed: {detail}")
        if isinstance(exc, httpx.ConnectTimeout):
            return OutboundFailed(f"timed out connecting to {origin}")
        if isinstance(exc, httpx.TimeoutException):
            return OutboundFailed(f"timed out waiting for {origin}")
        if isinstance(exc, httpx.ConnectError):
            return OutboundFailed(f"could not connect to {origin}: {exc}")
        if isinstance(exc, httpx.RemoteProtocolError):
            return OutboundFailed(f"{origin} sent a malformed HTTP response: {exc}")
        return OutboundFailed(f"the request to {origin} failed: {exc or type(exc).__name__}")

    def too_slow(self) -> OutboundFailed:
        return OutboundFailed(
            f"{self.target.origin} did not answer within {self.policy.total_timeout:g} s"
        )

    def response(
        self, response: httpx.Response, body: bytes, truncated: bool, ip: str
    ) -> OutboundResponse:
        return OutboundResponse(
            status=response.status_code,
            headers=httpx.Headers(response.headers),
            body=body,
            truncated=truncated,
            elapsed=time.monotonic() - self.started,
            ip=ip,
        )


@functools.cache
def default_tls_context() -> ssl.SSLContext:
    """httpx's default verifying context (certifi's CA bundle), built once: loading the
    bundle costs tens of milliseconds, too much to repeat for every fresh client."""
    return httpx.create_ssl_context()


def take(body: bytearray, chunk: bytes, cap: int) -> bool:
    """Append what fits under ``cap``; True once the body turned out to be longer."""
    room = cap - len(body)
    if len(chunk) > room:
        body += chunk[:room]
        return True
    body += chunk
    return False
