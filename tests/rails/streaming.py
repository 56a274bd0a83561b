"""A streaming seller and its payer for the metered tests (sandbox and devchain): an LLM
stand-in that reports each token to the gate, x402's client signing ``upto``, and an SSE
reader that notes when each event arrived."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
from eth_account.signers.local import LocalAccount
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route
from x402 import x402Client
from x402.http import x402HTTPClient
from x402.mechanisms.evm.signers import EthAccountSigner
from x402.mechanisms.evm.upto import UptoEvmClientScheme

from .helpers import decode

__all__ = ["TokenApp", "read_events", "upto_client", "upto_credential"]


class TokenApp:
    """An LLM stand-in: ``tokens`` SSE events ``gap`` seconds apart, each reported to the
    gate; it notes when it made its last token.  ``fail_after``: it raises after that many
    tokens instead (a model that broke midway)."""

    def __init__(self, tokens: int = 200, gap: float = 0.01, fail_after: int | None = None) -> None:
        self.tokens = tokens
        self.gap = gap
        self.fail_after = fail_after
        self.last_made: float | None = None

    def app(self) -> Starlette:
        async def stream(request: Request) -> StreamingResponse:
            usage = request.scope["extensions"]["svc.usage"]

            async def tokens() -> AsyncIterator[bytes]:
                for i in range(self.tokens):
                    if i == self.fail_after:
                        raise RuntimeError("the model broke off")
                    await anyio.sleep(self.gap)
                    usage(1)
                    if i == self.tokens - 1:
                        self.last_made = time.monotonic()
                    yield f"data: tok{i}\n\n".encode()

            return StreamingResponse(tokens(), media_type="text/event-stream")

        return Starlette(routes=[Route("/v1/stream", stream)])


def upto_client(payer: LocalAccount) -> x402Client:
    """x402's own client signing ``upto`` for ``payer`` on any EVM network."""
    return x402Client().register("eip155:*", UptoEvmClientScheme(EthAccountSigner(payer)))


async def upto_credential(url: str, client: x402Client) -> dict[str, str]:
    """Probe ``url`` and sign its ``upto`` offer (of 0.50) with x402's ``client``."""
    helper = x402HTTPClient(client)
    async with httpx.AsyncClient() as http:
        probe = await http.get(url)
    assert probe.status_code == 402
    [offer] = [o for o in decode(probe.headers["payment-required"])["accepts"]]
    assert offer["scheme"] == "upto" and offer["amount"] == "500000"
    required = helper.get_payment_required_response(probe.headers.get, None)
    payload = await client.create_payment_payload(required)
    return dict(helper.encode_payment_signature_header(payload))


async def read_events(url: str, headers: dict[str, str]) -> tuple[list[tuple[float, str]], Any]:
    """Every SSE event with the time it arrived, and the response."""
    events: list[tuple[float, str]] = []
    async with (
        httpx.AsyncClient(timeout=30) as http,
        http.stream("GET", url, headers=headers) as response,
    ):
        buffer = ""
        async for chunk in response.aiter_text():
            buffer += chunk
            while "\n\n" in buffer:
                event, buffer = buffer.split("\n\n", 1)
                events.append((time.monotonic(), event))
    return events, response
