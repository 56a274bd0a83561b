"""Sellers on the devchain that know nothing of svc: x402's own ``PaymentMiddlewareASGI``
settling through the devchain's official facilitator."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import httpx
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


def facilitator_proxy(facilitator_url: str, settle: str) -> Starlette:
    """The devchain's facilitator behind a gateway that breaks ``/settle`` the way a dying
    facilitator host does, answering 502 without a JSON body: ``settle="after"`` forwards
    it first (the transfer is mined, the answer lost: its node went down as it replied),
    ``settle="before"`` never forwards it (it went down before broadcasting).  Every
    other path is forwarded as it is."""

    async def forward(request: Request) -> Response:
        path = request.url.path
        async with httpx.AsyncClient(timeout=30) as http:
            if path == "/settle" and settle == "before":
                return Response("bad gateway", status_code=502)
            answer = await http.request(
                request.method,
                facilitator_url + path,
                content=await request.body(),
                headers={"content-type": request.headers.get("content-type", "")},
            )
            if path == "/settle":
                return Response("bad gateway", status_code=502)
        return Response(
            answer.content, answer.status_code, media_type=answer.headers.get("content-type")
        )

    routes = ["/verify", "/settle", "/supported"]
    return Starlette(routes=[Route(p, forward, methods=["GET", "POST"]) for p in routes])
