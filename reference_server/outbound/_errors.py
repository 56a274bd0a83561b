"""The two ways an outbound request can go wrong, under one root.

``OutboundRefused`` and ``OutboundFailed`` are deliberately distinct, because callers act
differently on them: a refusal is a verdict of the policy on the URL itself (retrying will
never help, and *nothing was sent*), while a failure happened on the way (DNS, TCP, TLS,
timeouts, a broken response) and may well succeed later, as webhook retries expect.

Messages never contain the full URL: a webhook URL often carries a token in its path or
query, and these messages end up in logs and API responses.  They name the host at most.
"""

from __future__ import annotations

__all__ = ["OutboundError", "OutboundFailed", "OutboundRefused"]


class OutboundError(Exception):
    """Root of every error raised by :mod:`reference_server.outbound`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        #: A short human sentence, safe to log and to show to the URL's owner.
        self.reason = reason

    def __str__(self) -> str:
        return self.reason


class OutboundRefused(OutboundError):
    """The policy forbids this request; nothing was sent (and retrying will not help).

    Raised for a bad scheme, userinfo, an ambiguous or forbidden IP literal, a host that
    resolves to any forbidden address, an oversized request body or a malformed header.
    """


class OutboundFailed(OutboundError):
    """The request was allowed but did not complete: DNS, connect, TLS, timeout, protocol.

    Part of the request may have reached the server.  Usually worth retrying later.
    """
