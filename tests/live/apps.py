"""Sellers on the devchain that know nothing of svc: x402's own ``PaymentMiddlewareASGI``
settling through the devchain's official facilitator."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from x402 import x402ResourceServer
from x402.http import FacilitatorConfig, HTTPFacilitatorClient
from x402.http.middleware.fastapi import PaymentMiddlewareASGI
from x402.mechanisms.evm.exact import register_exact_evm_server

from ..devchain.running import RunningDevchain

Handler = Callable[[Request], Awaitable[Response]]


async def goods(request: Request) -> JSONResponse:
    return JSONResponse({"report": "the goods"})


def x402_seller(
    devchain: RunningDevchain,
    pay_to: str,
    price: int,
    handler: Handler = goods,
    facilitator_url: str | None = None,
) -> Starlette:
    """``GET /report`` for ``price`` micros to ``pay_to``, as x402's docs set one up."""
    facilitator = HTTPFacilitatorClient(
        FacilitatorConfig(url=facilitator_url or devchain.facilitator_url)
    )
    server = x402ResourceServer(facilitator)
    register_exact_evm_server(server, devchain.network)
    extra = {
        "name": devchain.exports["SVC_LIVE_ASSET_NAME"],
        "version": devchain.exports["SVC_LIVE_ASSET_VERSION"],
    }
    accepts = {
        "scheme": "exact",
        "payTo": pay_to,
        "price": {"amount": str(price), "asset": devchain.asset, "extra": extra},
        "network": devchain.network,
    }
    app = Starlette(routes=[Route("/report", handler)])
    app.add_middleware(
        PaymentMiddlewareASGI, routes={"GET /report": {"accepts": accepts}}, server=server
    )
    return app
