"""The checked plan of one request, and its result: everything that does no I/O.

Checking the URL and headers, checking the resolved addresses, building the request for
httpcore, mapping httpcore's errors and shaping the result live in :class:`Plan`;
:func:`~._send.send` only adds resolution, the connection attempts and the capped read.
"""

from __future__ import annotations

import functools
import re
import ssl
import time
from collections.abc import Iterable, Mapping

import attrs
import httpcore
import httpx

from ._errors import OutboundFailed, OutboundRefused
from ._policy import OutboundPolicy
from ._target import Target, check_url, pin_addresses

__all__ = ["HTTP_ERRORS", "Headers", "OutboundResponse", "Plan", "PoolKey", "take"]

#: Request headers as a mapping or as ``(name, value)`` pairs.
Headers = Mapping[str, str] | Iterable[tuple[str, str]]
#: What a kept-alive connection must match to be reused: scheme, checked name, port, the
#: checked address, and the TLS context that verified the name.
PoolKey = tuple[str, str, int, str, ssl.SSLContext]
#: Every error httpcore raises for a request that was tried and did not work.
HTTP_ERRORS = (
    httpcore.NetworkError,
    httpcore.TimeoutException,
    httpcore.ProtocolError,
    httpcore.UnsupportedProtocol,
)

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
#: Methods whose request always states its length (``Content-Length: 0`` without a body).
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


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
    """One checked request: everything but the I/O."""

    method: str
    target: Target
    #: As sent, ``Host`` and ``Content-Length`` included (``Connection`` added per pool).
    headers: tuple[tuple[bytes, bytes], ...]
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
            if not _TOKEN.fullmatch(name) or _BAD_VALUE.search(value) or not value.isascii():
                raise OutboundRefused(f"the request header {name!r} is malformed")
            if name.lower() not in _CONTROLLED:
                kept.append((name, value))
        names = {name.lower() for name, _ in kept}
        if "user-agent" not in names:
            kept.append(("User-Agent", policy.user_agent))
        if "accept-encoding" not in names:
            kept.append(("Accept-Encoding", "identity"))  # the cap counts the bytes as sent
        kept.append(("Host", target.host_header))
        method = method.upper()
        if content is None and method in _BODY_METHODS:
            content = b""
        if content is not None:
            kept.append(("Content-Length", str(len(content))))
        return cls(
            method=method,
            target=target,
            headers=tuple((name.encode(), value.encode()) for name, value in kept),
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

    def pool_key(self, ip: str) -> PoolKey:
        """A kept-alive connection is reused only for the same scheme, checked name (its
        certificate was verified for it), port, checked address and TLS context."""
        target = self.target
        return (target.scheme, target.host, target.port, ip, self.tls())

    def tls(self) -> ssl.SSLContext:
        return self.policy.tls or default_tls_context()

    def request(self, *, keep_alive: bool) -> httpcore.Request:
        """The request for httpcore, its URL on the checked *name*: httpcore's TLS sends
        it as SNI and verifies the certificate against it, while the network backend
        under the pool (:class:`~._pool.AsyncPinnedClients`) connects to the checked
        address instead of resolving it, so there is no second lookup to rebind.  Without
        ``keep_alive`` (a pool used for this request alone) the server is told the
        connection carries one request.  Each timeout is bounded by the time left."""
        target = self.target
        url = httpcore.URL(
            scheme=target.scheme.encode(),
            host=target.host.encode(),
            port=target.port,
            target=target.path.encode(),
        )
        headers = [*self.headers] if keep_alive else [*self.headers, (b"Connection", b"close")]
        budget = max(self.remaining(), 0.001)
        read = min(self.policy.read_timeout, budget)
        connect = min(self.policy.connect_timeout, budget)
        timeouts = {"connect": connect, "read": read, "write": read, "pool": read}
        return httpcore.Request(
            self.method,
            url,
            headers=headers,
            content=self.content,
            extensions={"timeout": timeouts},
        )

    def next_address_worth_trying(self, exc: httpcore.ConnectError) -> bool:
        """Whether a failed connect may fall through to the host's next checked address.

        Refused / unreachable: yes (e.g. an IPv6 address on a host without IPv6).  A TLS
        failure: no -- the server answered, and its certificate is the problem.
        """
        return _tls_error(exc) is None

    def failed(self, exc: Exception) -> OutboundFailed:
        origin = self.target.origin
        tls = _tls_error(exc)
        if tls is not None:
            detail = getattr(tls, "verify_message", None) or tls.reason or str(tls)
            return OutboundFailed(f"TLS with {origin} failed: {detail}")
        if isinstance(exc, httpcore.ConnectTimeout):
            return OutboundFailed(f"timed out connecting to {origin}")
        if isinstance(exc, httpcore.TimeoutException):
            return OutboundFailed(f"timed out waiting for {origin}")
        if isinstance(exc, httpcore.ConnectError):
            return OutboundFailed(f"could not connect to {origin}: {exc}")
        if isinstance(exc, httpcore.RemoteProtocolError):
            return OutboundFailed(f"{origin} sent a malformed HTTP response: {exc}")
        return OutboundFailed(f"the request to {origin} failed: {exc or type(exc).__name__}")

    def too_slow(self) -> OutboundFailed:
        return OutboundFailed(
            f"{self.target.origin} did not answer within {self.policy.total_timeout:g} s"
        )

    def response(
        self, response: httpcore.Response, body: bytes, truncated: bool, ip: str
    ) -> OutboundResponse:
        return OutboundResponse(
            status=response.status,
            headers=httpx.Headers(response.headers),
            body=body,
            truncated=truncated,
            elapsed=time.monotonic() - self.started,
            ip=ip,
        )


@functools.cache
def default_tls_context() -> ssl.SSLContext:
    """httpx's default verifying context (certifi's CA bundle), built once: loading the
    bundle costs tens of milliseconds, too much to repeat for every fresh pool."""
    return httpx.create_ssl_context()


def take(body: bytearray, chunk: bytes, cap: int) -> bool:
    """Append what fits under ``cap``; True once the body turned out to be longer."""
    room = cap - len(body)
    if len(chunk) > room:
        body += chunk[:room]
        return True
    body += chunk
    return False
