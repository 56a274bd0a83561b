"""What the service may send, where, and for how long: :class:`OutboundPolicy`."""

from __future__ import annotations

import math
import socket
import ssl
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import attrs

if TYPE_CHECKING:
    from ..settings import Settings

__all__ = ["OutboundPolicy", "Resolver", "system_resolve_async"]

#: ``resolver(host, port)`` -> the IP addresses (strings) ``host`` resolves to.  May be a
#: plain function or a coroutine function.
Resolver = Callable[[str, int], Awaitable[list[str]] | list[str]]

_MAX_SECONDS = 300.0


def _seconds(instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and 0 < value <= _MAX_SECONDS):
        raise ValueError(f"{attribute.name} must be a number of seconds in (0, {_MAX_SECONDS:g}]")


def _positive(instance: object, attribute: attrs.Attribute[Any], value: int) -> None:
    if not (isinstance(value, int) and value > 0):
        raise ValueError(f"{attribute.name} must be a positive number of bytes")


async def system_resolve_async(host: str, port: int) -> list[str]:
    """The operating system's resolver in a worker thread (``anyio.getaddrinfo``)."""
    infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


@attrs.frozen(kw_only=True)
class OutboundPolicy:
    """The rules every outbound request to a user-supplied URL is held to.

    The defaults are the strict, production ones.  Build the service's policy with
    :meth:`from_settings`: outside production, private and loopback addresses (a webhook
    receiver on ``http://localhost:8000``) and plain HTTP are allowed, as the specification
    says ("Localhost callbacks are allowed outside production").
    """

    #: Allow private, loopback, link-local and other non-public addresses.  Production: no.
    allow_private: bool = False
    #: Refuse ``http://`` URLs.
    https_only: bool = True
    #: Seconds to open the TCP connection and finish the TLS handshake.
    connect_timeout: float = attrs.field(default=5.0, validator=_seconds)
    #: Seconds to wait for each read (and write) on the connection.
    read_timeout: float = attrs.field(default=10.0, validator=_seconds)
    #: Hard deadline for the whole exchange: resolution, connect, send, and reading the body.
    total_timeout: float = attrs.field(default=15.0, validator=_seconds)
    #: How much of the response body is read and kept; the rest is never downloaded.
    max_response_bytes: int = attrs.field(default=64 * 1024, validator=_positive)
    #: Largest request body allowed out.
    max_request_bytes: int = attrs.field(default=1024 * 1024, validator=_positive)
    #: ``None``: the system resolver (:func:`system_resolve_async`).  Tests inject their own.
    resolver: Resolver | None = None
    #: Sent unless the caller sets a ``User-Agent`` header.
    user_agent: str = "svc-reference-server"
    #: The TLS context that verifies servers' certificates; ``None``: httpx's default
    #: (certifi's CA bundle).  Tests trust a CA of their own here.
    tls: ssl.SSLContext | None = None

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> OutboundPolicy:
        """The policy for a server: strict in production, localhost and HTTP allowed else."""
        return cls(
            **{"allow_private": not settings.production, "https_only": settings.production}
            | overrides
        )
