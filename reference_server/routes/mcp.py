"""The svc MCP tools over streamable HTTP, at ``/mcp`` (and ``/api/mcp``; docs/mcp.md).

One server serves every caller: the tools (:mod:`svc.mcp_server`, the same ones ``svc mcp``
serves over stdio) make the client of each tool call from that call's HTTP request and its
credential.  The route passes the one pipeline like every other, so a missing or invalid
credential is an HTTP 401 in the service's envelope before the MCP transport runs.

The tools' client talks to this same application in process (``httpx.ASGITransport``):
no network, not even loopback, and nothing to configure -- the server need not know a URL
it can reach itself on.  The transport is stateless (several server processes can serve
one URL) and answers JSON (the tools send no progress notifications, so a stream would
only wrap one message).  DNS-rebinding protection (a Host/Origin allow-list) is off: it
guards servers that trust whoever can reach them, while this one trusts only the bearer
credential, which a browser never attaches on its own.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio.to_thread
import httpx
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from svc import AsyncClient
from svc.mcp_server import create_server, request_credentials

from ..invariant import InvariantError
from ..web.auth import authenticate
from ..web.endpoint import RAW_BODY, Call, Contract, Endpoint, Flow
from ..web.errors import ApiError

__all__ = ["PATH", "McpService"]

#: Where the tools are served (and again under ``/api``, like every route).
PATH = "/mcp"


def _client_for(request: Request | None) -> AsyncClient:
    """The client of one tool call: the caller's credential, this app in process."""
    if request is None:
        raise InvariantError("the HTTP MCP tools are called from an HTTP request")
    peer = request.client
    transport = httpx.ASGITransport(
        app=request.app, client=(peer.host, peer.port) if peer else ("127.0.0.1", 0)
    )
    return AsyncClient(
        base_url=str(request.base_url), transport=transport, **request_credentials(request.headers)
    )


class _Forward(Response):
    """Hands the request to the MCP transport, adding the pipeline's headers (the rate
    limit's) to whatever it answers."""

    def __init__(self, manager: StreamableHTTPSessionManager) -> None:
        super().__init__()
        self.raw_headers = []  # no body of its own: only headers added by the pipeline
        self._manager = manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        extra = list(self.raw_headers)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self._manager.handle_request(scope, receive, send_with_headers)


@functools.cache
def _tools() -> Any:
    """The process's one MCP server with the svc tools.  Every app can share it: a tool
    call's client comes from that call's own request (and so its own app), and the
    stateless transport keeps nothing on the server between requests.  Building the
    tools' schemas is most of the cost of making an app, so it is paid once."""
    return create_server(client_factory=_client_for)


#: ``streamable_http_app`` leaves the transport it makes on the shared server, where the
#: next app's would replace it: each app takes its own under this lock.
_TRANSPORT_MADE = threading.Lock()


class McpService:
    """The MCP tools of one app: its endpoints and the transport's lifetime."""

    def __init__(self, *, max_body_bytes: int) -> None:
        server = _tools()
        with _TRANSPORT_MADE:
            server.streamable_http_app(
                stateless_http=True,
                json_response=True,
                max_request_body_size=max_body_bytes,
                transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            )
            self.manager: StreamableHTTPSessionManager = server.session_manager

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The transport's task group, for the app's lifespan."""
        async with self.manager.run():
            yield

    def endpoints(self) -> list[Endpoint]:
        async def mcp(call: Call) -> Response:
            """The svc MCP tools over streamable HTTP (any role's credential)."""
            await anyio.to_thread.run_sync(_check_credential, call)
            _check_body_headers(call)
            return _Forward(self.manager)

        # POST only: a stateless server opens no GET stream and has no session to DELETE
        # (the transport would answer both 405; the pipeline does, in the envelope).
        return [
            Endpoint(
                method="POST",
                path=PATH,
                handler=mcp,
                run=Flow(),
                body=RAW_BODY,
                contract=Contract(listed=False, summary="The svc MCP tools over streamable HTTP."),
            )
        ]


def _check_credential(call: Call) -> None:
    """A 401 (missing or invalid credential) before the MCP transport runs."""
    ctx = call.ctx
    ctx.load_secrets()
    with ctx.db.read() as conn:
        authenticate(conn, call.headers, role=None, jwt_secrets=ctx.jwt_secrets, now=call.now)


def _check_body_headers(call: Call) -> None:
    """What the JSON API refuses in the envelope, refused here alike before the transport
    (which would answer in plain text): a body that is not JSON, or declared too big."""
    media = call.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/json":
        raise ApiError(
            "unsupported_media_type",
            f"Send MCP messages as JSON with 'Content-Type: application/json' (got {media!r}).",
        )
    declared = call.headers.get("content-length", "")
    limit = call.ctx.settings.max_body_bytes
    if declared.isdigit() and int(declared) > limit:
        raise ApiError("payload_too_large", f"The body is larger than {limit} bytes.")
