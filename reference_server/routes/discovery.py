"""Discovery documents for agents, generated from the live route table.

Because ``llms.txt``, ``agent.json`` and ``agent-openapi.json`` are built from the same
``Endpoint`` list that serves requests (those ``listed``), they cannot drift from what the
server does.  The documents are endpoints of that pipeline too (not listed, not limited).
"""

from __future__ import annotations

import inspect
from typing import Any

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from svc import __version__

from ..api import paging
from ..api.auth import Role
from ..api.endpoint import Call, Endpoint
from ..api.errors import CODES
from ..api.responses import json_response

__all__ = ["endpoints"]

_AUTH_MODES = [
    {
        "role": "owner",
        "header": "Authorization: Bearer <OWNER_JWT>",
        "used_for": "sellers, webhooks, wallet keys",
    },
    {
        "role": "seller",
        "header": "Authorization: Bearer svc_sk_<env>_...",
        "used_for": "/sellers/me/*, /resources",
    },
    {
        "role": "agent",
        "header": "Authorization: Bearer svc_vw_<env>_... (or x-svc-vw-key)",
        "used_for": "/spend/*, /pay, /handles/resolve",
    },
]
_PAY_SHAPES = [
    {"rail": "x402", "how": "POST /spend/pay-url with the 402 URL; or pay the gate directly"},
    {"rail": "mpp", "how": "POST /spend/pay-url; or answer WWW-Authenticate: Payment"},
    {"rail": "rill", "how": "POST /pay {resource_id} or {destination, amount}"},
]
_TRUST_LADDER = [
    {"step": 1, "environment": "test", "what": "sandbox money, test keys, test webhooks"},
    {"step": 2, "environment": "live", "what": "real money under a wallet policy"},
]


#: The query of every list route (``api.paging``; docs/api.md, "Lists").
_PAGE_PARAMETERS = [
    {
        "name": "limit",
        "in": "query",
        "required": False,
        "schema": {
            "type": "integer",
            "minimum": 1,
            "maximum": paging.MAX_LIMIT,
            "default": paging.DEFAULT_LIMIT,
        },
    },
    {
        "name": "starting_after",
        "in": "query",
        "required": False,
        "description": "The id of the last item of the previous page.",
        "schema": {"type": "string", "maxLength": 40},
    },
]


def _summary(ep: Endpoint) -> str:
    if ep.summary is not None:
        return ep.summary
    doc = inspect.getdoc(ep.handler) or ep.handler.__name__.replace("_", " ")
    return doc.splitlines()[0]


def _auth_label(ep: Endpoint) -> str:
    return "none" if ep.auth is None else ep.auth.value


def _base(request: Request) -> str:
    ctx = request.app.state.ctx
    return (ctx.settings.public_url or str(request.base_url)).rstrip("/")


def _operation(ep: Endpoint) -> dict[str, Any]:
    """One endpoint as an OpenAPI operation."""
    op: dict[str, Any] = {
        "summary": _summary(ep),
        "responses": {"default": {"description": "JSON; errors in the envelope"}},
    }
    if ep.auth is not None:
        op["security"] = [{ep.auth.value: []}]
    if ep.idempotency != "none":
        op["parameters"] = [
            {
                "name": "Idempotency-Key",
                "in": "header",
                "required": ep.idempotency == "required",
                "schema": {"type": "string", "maxLength": 255},
            }
        ]
    if ep.paged:
        op["parameters"] = _PAGE_PARAMETERS
    return op


def endpoints(listed: list[Endpoint]) -> list[Endpoint]:
    """The discovery documents' own endpoints, listing ``listed``."""

    def llms_lines(request: Request, full: bool) -> list[str]:
        lines = [
            "# svc payments service",
            "",
            "> Accept payments for HTTP resources and MCP tools; let agents pay any 402 URL.",
            "",
            f"Base URL: {_base(request)} (every route is also under /api/).",
            "Environments: send `X-Svc-Environment: test` with test keys.",
            "Errors: {ok: false, error: {code, message, details}, request_id}.",
            "",
            "## Endpoints",
        ]
        for ep in listed:
            lines.append(f"- {ep.method} {ep.path} (auth: {_auth_label(ep)}): {_summary(ep)}")
        if full:
            lines += ["", "## Error codes"]
            lines += [f"- {code} ({status}): {text}" for code, (status, text) in CODES.items()]
        return lines

    async def llms_txt(call: Call) -> Response:
        request = call.request
        return PlainTextResponse("\n".join(llms_lines(request, full=False)) + "\n")

    async def llms_full_txt(call: Call) -> Response:
        request = call.request
        return PlainTextResponse("\n".join(llms_lines(request, full=True)) + "\n")

    async def capabilities(call: Call) -> Response:
        request = call.request
        base = _base(request)
        demo = await anyio.to_thread.run_sync(request.app.state.ctx.demo_resources)
        return json_response(
            {
                "ok": True,
                "auth_modes": _AUTH_MODES,
                "pay_shapes": _PAY_SHAPES,
                "mcp_urls": [],
                "trust_ladder": _TRUST_LADDER,
                "seed_ids": {
                    "demo_echo_url": f"{base}/demo/echo",
                    "demo_resource_ids": demo,
                },
                "environments": ["test", "live"],
                "request_id": request.state.request_id,
            }
        )

    async def agent_json(call: Call) -> Response:
        request = call.request
        base = _base(request)
        return json_response(
            {
                "ok": True,
                "name": "svc",
                "version": __version__,
                "description": "Payments for agents: accept and spend on x402, MPP and ledger.",
                "url": base,
                "capabilities_url": f"{base}/agent/capabilities",
                "openapi_url": f"{base}/agent-openapi.json",
                "llms_txt_url": f"{base}/llms.txt",
                "request_id": request.state.request_id,
            }
        )

    async def openapi(call: Call) -> Response:
        request = call.request
        paths: dict[str, dict[str, Any]] = {}
        for ep in listed:
            paths.setdefault(ep.path, {})[ep.method.lower()] = _operation(ep)
        schemes = {role.value: {"type": "http", "scheme": "bearer"} for role in Role}
        return json_response(
            {
                "openapi": "3.1.0",
                "info": {"title": "svc", "version": __version__},
                "servers": [{"url": _base(request)}],
                "paths": paths,
                "components": {"securitySchemes": schemes},
                "x-request-id": request.state.request_id,
            }
        )

    table = [
        ("/llms.txt", llms_txt),
        ("/llms-full.txt", llms_full_txt),
        ("/agent/capabilities", capabilities),
        ("/.well-known/agent.json", agent_json),
        ("/agent-openapi.json", openapi),
    ]
    return [
        Endpoint(method="GET", path=path, handler=handler, rate_limit=None, listed=False)
        for path, handler in table
    ]
