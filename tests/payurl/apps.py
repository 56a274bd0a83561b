"""Sellers' apps for the pay-url tests, each served on loopback by the test that needs it.

The two stock sellers (x402's ``PaymentMiddlewareASGI`` and a pympp-gated route) come from
the sandbox interop tests unchanged; the variants here differ only in what the paid route
answers, built the same way with the official x402 server SDK.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
from mpp import Challenge
from mpp.methods.evm import BASE_SEPOLIA_USDC
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send
from x402 import PaymentRequired, PaymentRequirements, x402ResourceServer
from x402.http import FacilitatorConfig, HTTPFacilitatorClient, encode_payment_required_header
from x402.http.middleware.fastapi import PaymentMiddlewareASGI
from x402.mechanisms.evm.exact import register_exact_evm_server
from x402.mechanisms.evm.upto import UptoEvmServerScheme

from ..sandbox.test_interop import PRICE, _mpp_gated_app, _x402_gated_app

__all__ = [
    "PRICE",
    "Counting",
    "another_network_app",
    "claiming",
    "fixed_challenge_mpp_app",
    "free_app",
    "gated_app",
    "metered_app",
    "mpp_gated_app",
    "settles_then_fails_app",
    "streaming_metered_app",
    "x402_gated_app",
    "x402_v1_app",
]

x402_gated_app = _x402_gated_app
mpp_gated_app = _mpp_gated_app
Handler = Callable[[Request], Awaitable[Response]]


def gated_app(
    facilitator_url: str, pay_to: str, handler: Handler, price: str = "$0.25"
) -> Starlette:
    """``GET``/``POST /paid`` behind x402's own middleware, answering with ``handler``."""
    server = x402ResourceServer(HTTPFacilitatorClient(FacilitatorConfig(url=facilitator_url)))
    register_exact_evm_server(server, "eip155:84532")
    accepts = {"scheme": "exact", "payTo": pay_to, "price": price, "network": "eip155:84532"}
    app = Starlette(routes=[Route("/paid", handler, methods=["GET", "POST"])])
    app.add_middleware(
        PaymentMiddlewareASGI,
        routes={f"{verb} /paid": {"accepts": accepts} for verb in ("GET", "POST")},
        server=server,
    )
    return app


def metered_app(
    facilitator_url: str, pay_to: str, used: int, max_price: str = "$0.50"
) -> Starlette:
    """``GET /report`` priced by use, as x402's docs set one up for ``upto``: x402's own
    middleware asks for at most ``max_price`` and, once the handler answers, settles the
    ``used`` atomic units it names in ``Settlement-Overrides``."""
    server = x402ResourceServer(HTTPFacilitatorClient(FacilitatorConfig(url=facilitator_url)))
    server.register("eip155:84532", UptoEvmServerScheme())

    async def report(request: Request) -> Response:
        overrides = json.dumps({"amount": str(used)})
        return JSONResponse({"used": used}, headers={"Settlement-Overrides": overrides})

    app = Starlette(routes=[Route("/report", report)])
    accepts = {"scheme": "upto", "payTo": pay_to, "price": max_price, "network": "eip155:84532"}
    app.add_middleware(
        PaymentMiddlewareASGI, routes={"GET /report": {"accepts": accepts}}, server=server
    )
    return app


def streaming_metered_app(
    facilitator_url: str,
    pay_to: str,
    events: list[bytes],
    unit_price: int,
    *,
    before_last: threading.Event | None = None,
    die_after: int | None = None,
    max_price: str = "$0.50",
) -> Starlette:
    """``GET /stream`` priced by use and answered as it is produced (x402's middleware
    would buffer it): the official resource server verifies the ``upto`` payment, the
    ``events`` go out one by one, and once the last is out it settles ``unit_price`` per
    event sent.  ``before_last``: the last event waits for it (set by the test once it
    has read the first); ``die_after``: the stream breaks after that many, settling none."""
    from x402.http import decode_payment_signature_header
    from x402.schemas import ResourceConfig

    server = x402ResourceServer(HTTPFacilitatorClient(FacilitatorConfig(url=facilitator_url)))
    server.register("eip155:84532", UptoEvmServerScheme())
    config = ResourceConfig(scheme="upto", pay_to=pay_to, price=max_price, network="eip155:84532")
    initialized = anyio.Lock()

    async def paid_stream(request: Request) -> Response:
        async with initialized:
            if not server._initialized:
                await anyio.to_thread.run_sync(server.initialize)
        [requirements] = server.build_payment_requirements(config)
        unpaid = encode_payment_required_header(PaymentRequired(accepts=[requirements]))
        header = request.headers.get("payment-signature")
        if header is None:
            return JSONResponse({}, status_code=402, headers={"PAYMENT-REQUIRED": unpaid})
        payload = decode_payment_signature_header(header)
        if not (await server.verify_payment(payload, requirements)).is_valid:
            return JSONResponse({}, status_code=402, headers={"PAYMENT-REQUIRED": unpaid})

        async def produce() -> AsyncIterator[bytes]:
            for sent, event in enumerate(events):
                if sent == die_after:
                    raise RuntimeError("the seller broke midway")
                if before_last is not None and sent == len(events) - 1:
                    await anyio.to_thread.run_sync(before_last.wait, 30)
                yield event
            used = requirements.model_copy(update={"amount": str(unit_price * len(events))})
            await server.settle_payment(payload, used)

        return StreamingResponse(produce(), media_type="text/event-stream")

    return Starlette(routes=[Route("/stream", paid_stream)])


def claiming(app: ASGIApp, amount: int) -> ASGIApp:
    """``app`` with its ``PAYMENT-RESPONSE`` rewritten to claim ``amount`` settled: a URL
    that says it took more than it did."""
    from x402.http import decode_payment_response_header, encode_payment_response_header

    async def lying(scope: Scope, receive: Receive, send: Send) -> None:
        async def rewrite(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = []
                for name, value in message["headers"]:
                    if name.lower() == b"payment-response":
                        settled = decode_payment_response_header(value.decode())
                        claim = settled.model_copy(update={"amount": str(amount)})
                        value = encode_payment_response_header(claim).encode()
                    headers.append((name, value))
                message = {**message, "headers": headers}
            await send(message)

        await app(scope, receive, rewrite)

    return lying


def free_app() -> Starlette:
    async def free(request: Request) -> Response:
        return JSONResponse({"free": True})

    return Starlette(routes=[Route("/free", free)])


def another_network_app(pay_to: str) -> Starlette:
    """A 402 asking for Base mainnet USDC: payable somewhere, not in the test environment."""
    required = PaymentRequired(
        accepts=[
            PaymentRequirements(
                scheme="exact",
                network="eip155:8453",
                asset="0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
                amount=str(PRICE),
                pay_to=pay_to,
                max_timeout_seconds=300,
                extra={"name": "USD Coin", "version": "2"},
            )
        ]
    )

    async def mainnet(request: Request) -> Response:
        header = encode_payment_required_header(required)
        return JSONResponse({}, status_code=402, headers={"PAYMENT-REQUIRED": header})

    return Starlette(routes=[Route("/mainnet", mainnet)])


class Counting:
    """Wraps an ASGI app; counts the HTTP requests that reached it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.requests: list[dict[str, Any]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.requests.append({"method": scope["method"], "path": scope["path"]})
        await self.app(scope, receive, send)


def fixed_challenge_mpp_app(pay_to: str) -> Starlette:
    """An MPP seller that offers the very same challenge on every probe (pympp itself adds
    a random nonce to each; another server need not), and refuses every credential.  Every
    credential for that challenge signs the same EIP-3009 nonce."""
    challenge = Challenge.create(
        secret_key="pay-url-fixed-challenge-secret",
        realm="127.0.0.1",
        method="evm",
        intent="charge",
        request={
            "amount": str(PRICE),
            "currency": BASE_SEPOLIA_USDC.address,
            "recipient": pay_to,
            "methodDetails": {"chainId": 84532, "credentialTypes": ["authorization"]},
        },
        expires="2099-01-01T00:00:00.000Z",
    )

    async def report(request: Request) -> Response:
        if request.headers.get("authorization", "").startswith("Payment "):
            return JSONResponse({"error": "not today"}, status_code=500)
        header = challenge.to_www_authenticate("127.0.0.1")
        return JSONResponse({}, status_code=402, headers={"WWW-Authenticate": header})

    return Starlette(routes=[Route("/report", report)])


def x402_v1_app(facilitator_url: str, pay_to: str, price_atomic: int) -> Starlette:
    """A seller still on x402 v1 (the SDK ships no v1 server, so the route is written
    with its v1 types): the challenge is the 402's JSON body (``base-sepolia``,
    ``maxAmountRequired``), the payment comes back in ``X-PAYMENT``, and the official
    facilitator client verifies and settles it; ``X-PAYMENT-RESPONSE`` carries the result."""
    from x402.http import decode_payment_signature_header, encode_payment_response_header
    from x402.schemas.v1 import PaymentPayloadV1, PaymentRequiredV1, PaymentRequirementsV1

    facilitator = HTTPFacilitatorClient(FacilitatorConfig(url=facilitator_url))

    async def report(request: Request) -> Response:
        requirements = PaymentRequirementsV1(
            scheme="exact",
            network="base-sepolia",
            max_amount_required=str(price_atomic),
            resource=str(request.url),
            description="one report",
            mime_type="application/json",
            pay_to=pay_to,
            max_timeout_seconds=300,
            asset=BASE_SEPOLIA_USDC.address,
            extra={"name": "USDC", "version": "2"},
        )
        unpaid = PaymentRequiredV1(error="X-PAYMENT header is required", accepts=[requirements])
        header = request.headers.get("x-payment")
        if header is None:
            return JSONResponse(unpaid.model_dump(by_alias=True, exclude_none=True), 402)
        payload = decode_payment_signature_header(header)
        assert isinstance(payload, PaymentPayloadV1), payload
        verified = await facilitator.verify(payload, requirements)
        settled = await facilitator.settle(payload, requirements) if verified.is_valid else None
        if settled is None or not settled.success:
            return JSONResponse(unpaid.model_dump(by_alias=True, exclude_none=True), 402)
        return JSONResponse(
            {"report": "the v1 goods"},
            headers={"X-PAYMENT-RESPONSE": encode_payment_response_header(settled)},
        )

    return Starlette(routes=[Route("/report", report)])


def settles_then_fails_app(facilitator_url: str, pay_to: str, price_atomic: int) -> Starlette:
    """A third-party x402 v2 seller that charges on failure: it verifies and settles the
    payment with the official facilitator client, then answers 500 (with its
    ``PAYMENT-RESPONSE``), as a gate that settles before serving does when its upstream fails."""
    from x402.http import decode_payment_signature_header, encode_payment_response_header

    facilitator = HTTPFacilitatorClient(FacilitatorConfig(url=facilitator_url))
    requirements = PaymentRequirements(
        scheme="exact",
        network="eip155:84532",
        asset=BASE_SEPOLIA_USDC.address,
        amount=str(price_atomic),
        pay_to=pay_to,
        max_timeout_seconds=300,
        extra={"name": "USDC", "version": "2"},
    )
    unpaid = encode_payment_required_header(PaymentRequired(accepts=[requirements]))

    async def report(request: Request) -> Response:
        header = request.headers.get("payment-signature")
        if header is None:
            return JSONResponse({}, status_code=402, headers={"PAYMENT-REQUIRED": unpaid})
        payload = decode_payment_signature_header(header)
        verified = await facilitator.verify(payload, requirements)
        settled = await facilitator.settle(payload, requirements) if verified.is_valid else None
        if settled is None or not settled.success:
            return JSONResponse({}, status_code=402, headers={"PAYMENT-REQUIRED": unpaid})
        return JSONResponse(
            {"error": "the upstream broke after you paid"},
            status_code=500,
            headers={"PAYMENT-RESPONSE": encode_payment_response_header(settled)},
        )

    return Starlette(routes=[Route("/report", report)])
