"""An MCP server whose ``search`` tool is paid and ``ping`` is free.

Run it with the seller key and the MCP resource (``kind="mcp", tool="search"``)::

    SVC_BASE_URL=http://127.0.0.1:8000 SVC_SELLER_KEY=svc_sk_test_… \
    SEARCH_RESOURCE_ID=res_… uvicorn gate_mcp:app
"""

import os

from mcp.server.mcpserver import Context, MCPServer

from svc_asgi import PaymentGate, payment_of

server = MCPServer("archive")


@server.tool()
def search(query: str, ctx: Context) -> str:
    """Search the archive (paid per call)."""
    payment = payment_of(ctx.request_context.request)
    assert payment is not None  # the gate lets only paid calls through to here
    return f"3 results for {query!r} (receipt {payment.receipt_id})"


@server.tool()
def ping() -> str:
    """Free."""
    return "pong"


app = PaymentGate(
    server.streamable_http_app(),
    prices={"mcp:search": os.environ["SEARCH_RESOURCE_ID"]},
)
