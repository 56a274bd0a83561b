"""The service's one way to make HTTP requests to URLs that users supply.

Webhook endpoints, ``pay-url`` probes and upstream forwarding all send requests to URLs
chosen by users.  Done naively, that is **SSRF** (server-side request forgery): a user
registers ``http://169.254.169.254/latest/meta-data/`` (the cloud metadata service, which
hands out credentials), ``http://127.0.0.1:5432/`` or ``http://10.0.0.7/admin`` and the
service -- sitting inside the network, trusted by it -- makes the request for them, and
may even show them the answer.  Every such request goes through :func:`send` /
:func:`send_sync`, which:

* check the URL's form (:func:`check_url`): http(s) only (https only in production), no
  ``user:pass@``, no odd numeric IP spellings such as ``http://2130706433/``;
* **resolve the host once** and check *every* address it resolves to; if any is private,
  loopback, link-local, multicast, reserved or otherwise non-public (IPv6 forms that embed
  such an IPv4 address included), the request is refused before anything is sent;
* **pin** the connection to the checked address: the request goes to the IP itself, with
  the ``Host`` header and TLS (SNI and certificate verification) on the original name.
  Checking a name and then letting the HTTP library resolve it again would be open to
  *DNS rebinding*: the attacker's DNS answers a public address to the check and
  ``127.0.0.1`` to the connect a millisecond later;
* never follow redirects (a 3xx is returned as a response: a public URL redirecting to
  the metadata service would otherwise undo every check above);
* bound everything: connect, read and total timeouts, the request body, and the response
  body, of which only ``max_response_bytes`` are read -- the rest is never downloaded.

The HTTP is httpcore's (``AsyncConnectionPool``, :class:`AsyncPinnedClients` for
kept-alive connections); the pinning is its network backend, which connects to the
checked address whatever name the URL carries, so the name still drives the ``Host``
header, SNI and the certificate check.

Outside production (:meth:`OutboundPolicy.from_settings`), private and loopback addresses
and plain HTTP are allowed, so a developer's ``http://localhost:8000/hooks`` works.

:class:`OutboundRefused` means the policy forbids the request and nothing was sent;
:class:`OutboundFailed` means it was tried and did not work (DNS, connect, TLS, timeout).
"""

from ._addresses import address_refusal
from ._errors import OutboundError, OutboundFailed, OutboundRefused
from ._plan import Headers, OutboundResponse, default_tls_context
from ._policy import OutboundPolicy, Resolver, system_resolve_async
from ._pool import AsyncPinnedClients
from ._send import send, send_sync
from ._stream import OutboundStream, stream
from ._target import Target, check_url, pin_addresses

__all__ = [
    "AsyncPinnedClients",
    "Headers",
    "OutboundError",
    "OutboundFailed",
    "OutboundPolicy",
    "OutboundRefused",
    "OutboundResponse",
    "OutboundStream",
    "Resolver",
    "Target",
    "address_refusal",
    "check_url",
    "default_tls_context",
    "pin_addresses",
    "send",
    "send_sync",
    "stream",
    "system_resolve_async",
]
