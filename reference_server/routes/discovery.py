"""Discovery documents for agents, generated from the live route table.

Because ``llms.txt``, ``agent.json`` and ``agent-openapi.json`` are built from the same
``Endpoint`` list that serves requests (those ``listed``), they cannot drift from what the
server does.  The documents are endpoints of that pipeline too (not listed, not limited).

``GET /`` is where anyone who only knows the server's address starts: a small page for a
browser (the ``Accept`` header asks for HTML) and the same pointers as JSON for anything
else, so that neither meets a bare 404.
"""

from __future__ import annotations

import anyio.to_thread
from starlette.responses import PlainTextResponse, Response

from svc import __version__

from .. import receipt_tokens
from ..web import pages
from ..web.endpoint import Call, Endpoint
from ..web.errors import CODES
from ..web.openapi import document as openapi_document
from ..web.openapi import summary
from ..web.responses import json_response
from .health import unlisted_get
from .mcp import PATH as MCP_PATH

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


def _auth_label(ep: Endpoint) -> str:
    return "none" if ep.role is None else " or ".join(role.value for role in ep.roles)


def _quality(accept: str, media_types: tuple[str, ...]) -> float:
    """The highest ``q`` the ``Accept`` header gives any of ``media_types``."""
    best = 0.0
    for item in accept.split(","):
        kind, *params = (part.strip() for part in item.split(";"))
        if kind.lower() not in media_types:
            continue
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        best = max(best, q)
    return best


def wants_html(accept: str) -> bool:
    """A browser's ``Accept`` names HTML above JSON; ``*/*`` alone (curl, HTTP libraries)
    and no header at all get JSON."""
    html = _quality(accept, ("text/html", "application/xhtml+xml"))
    json = _quality(accept, ("application/json", "application/*", "*/*"))
    return html > json


def _about(base: str) -> dict[str, object]:
    """What the service is: the start of the landing JSON and of ``agent.json``."""
    return {
        "ok": True,
        "name": "svc",
        "version": __version__,
        "description": "Payments for agents: accept and spend on x402, MPP and ledger.",
        "url": base,
    }


def _pointers(base: str) -> dict[str, str]:
    """Where to go from the server's address."""
    return {
        "llms_txt_url": f"{base}/llms.txt",
        "openapi_url": f"{base}/agent-openapi.json",
        "directory_url": f"{base}/directory",
        "docs_url": f"{base}/llms-full.txt",
        "agent_json_url": f"{base}/.well-known/agent.json",
        "capabilities_url": f"{base}/agent/capabilities",
        "mcp_url": f"{base}{MCP_PATH}",
    }


async def landing(call: Call) -> Response:
    """Where to start from the server's address: the documents, the directory, the
    docs; a page for a browser, JSON otherwise."""
    base = call.public_url
    vary = {"Vary": "Accept"}
    if wants_html(call.headers.get("accept", "")):
        answer = pages.render("landing.html", 200, title="svc payments service", **_pointers(base))
        answer.headers.update(vary)
        return answer
    body = {**_about(base), **_pointers(base), "request_id": call.request_id}
    return json_response(body, headers=vary)


def endpoints(listed: list[Endpoint]) -> list[Endpoint]:
    """The discovery documents' own endpoints, listing ``listed``."""

    def llms_lines(base: str, full: bool) -> list[str]:
        lines = [
            "# svc payments service",
            "",
            "> Accept payments for HTTP resources and MCP tools; let agents pay any 402 URL.",
            "",
            f"Base URL: {base} (every route is also under /api/).",
            "Environments: send `X-Svc-Environment: test` with test keys.",
            "Errors: {ok: false, error: {code, message, details}, request_id}.",
            f"MCP: the svc tools over streamable HTTP at {base}{MCP_PATH}; send "
            "`Authorization: Bearer <credential>` (owner JWT, seller key or wallet key).",
            "",
            "## Find something to pay",
            f"GET {base}/directory (no auth; `X-Svc-Environment` picks test or "
            "live, absent = live) lists the resources sellers chose to list: description, "
            "amount, rails, gate_url, pay_url, method and body_hint; filters `kind`, `q`, "
            "`max_amount`, paged by `limit`/`starting_after`.  Pay an entry with "
            "POST /spend/pay-url {url: gate_url}; when its method is POST, send "
            "{url: gate_url, method: POST, json: <body_hint with your own values>}.",
            "",
            "## Endpoints",
        ]
        for ep in listed:
            lines.append(f"- {ep.method} {ep.path} (auth: {_auth_label(ep)}): {summary(ep)}")
        if full:
            lines += ["", "## Error codes"]
            lines += [f"- {code} ({status}): {text}" for code, (status, text) in CODES.items()]
        return lines

    async def llms_txt(call: Call) -> Response:
        return PlainTextResponse("\n".join(llms_lines(call.public_url, full=False)) + "\n")

    async def llms_full_txt(call: Call) -> Response:
        return PlainTextResponse("\n".join(llms_lines(call.public_url, full=True)) + "\n")

    async def capabilities(call: Call) -> Response:
        base = call.public_url
        demo = await anyio.to_thread.run_sync(call.ctx.demo_resources)
        return json_response(
            {
                "ok": True,
                "auth_modes": _AUTH_MODES,
                "pay_shapes": _PAY_SHAPES,
                "mcp_urls": [f"{base}{MCP_PATH}"],
                "trust_ladder": _TRUST_LADDER,
                "seed_ids": {
                    "demo_echo_url": f"{base}/demo/echo",
                    "demo_resource_ids": demo,
                },
                "environments": ["test", "live"],
                "request_id": call.request_id,
            }
        )

    async def agent_json(call: Call) -> Response:
        base = call.public_url
        return json_response(
            {
                **_about(base),
                "capabilities_url": f"{base}/agent/capabilities",
                "openapi_url": f"{base}/agent-openapi.json",
                "llms_txt_url": f"{base}/llms.txt",
                "request_id": call.request_id,
            }
        )

    async def jwks(call: Call) -> Response:
        """The keys receipt tokens are signed with, every environment's (a token names
        its environment and resource, both signed): public, cacheable for five minutes."""
        keys = await anyio.to_thread.run_sync(receipt_tokens.published, call.ctx, call.now)
        return json_response(keys, headers={"Cache-Control": "public, max-age=300"})

    async def openapi(call: Call) -> Response:
        return json_response(openapi_document(listed, call.public_url))

    table = [
        ("/", landing),
        ("/llms.txt", llms_txt),
        ("/llms-full.txt", llms_full_txt),
        ("/agent/capabilities", capabilities),
        ("/.well-known/agent.json", agent_json),
        ("/.well-known/jwks.json", jwks),
        ("/agent-openapi.json", openapi),
    ]
    return [unlisted_get(path, handler) for path, handler in table]
