"""The official x402 facilitator over HTTP: ``POST /verify``, ``POST /settle``,
``GET /supported``, the wire x402's ``HTTPFacilitatorClient`` speaks.

All the payment logic is x402's own (``x402FacilitatorSync`` with the ``exact`` and
``upto`` EVM schemes over one ``FacilitatorWeb3Signer``); this module only moves its
JSON.  ``upto`` settles through the Permit2 and x402 upto proxy the devchain places at
their canonical addresses, and ``/supported`` names this facilitator's address in its
``upto`` kind, which a seller copies into ``extra.facilitatorAddress``.  web3 is
blocking, so each call runs in a worker thread.  ``simulate_in_settle`` re-simulates
the transfer before sending it: without it a replayed payload is sent, reverts, and
costs gas.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

__all__ = ["facilitator_app"]


def _facilitator(private_key: str, rpc_url: str, network: str) -> Any:
    from x402 import x402FacilitatorSync
    from x402.mechanisms.evm.exact import register_exact_evm_facilitator
    from x402.mechanisms.evm.signers import FacilitatorWeb3Signer
    from x402.mechanisms.evm.upto import UptoEvmFacilitatorScheme, UptoEvmSchemeConfig

    signer = FacilitatorWeb3Signer(private_key, rpc_url, confirmation_timeout_seconds=20)
    facilitator = x402FacilitatorSync()
    register_exact_evm_facilitator(facilitator, signer, networks=network, simulate_in_settle=True)
    # x402 has no register_upto_* helper: its upto scheme is registered as a plain scheme.
    upto = UptoEvmFacilitatorScheme(signer, UptoEvmSchemeConfig(simulate_in_settle=True))
    facilitator.register([network], upto)
    return facilitator


def _refusal(reason: str) -> JSONResponse:
    return JSONResponse({"error": "invalid_request", "message": reason}, status_code=400)


def _objects(body: object, *names: str) -> list[dict[str, Any]]:
    """The JSON objects ``body`` holds under ``names``, or ValueError naming the first
    that is missing or not an object."""
    found = []
    for name in names:
        value = body.get(name) if isinstance(body, dict) else None
        if not isinstance(value, dict):
            raise ValueError(f"{name} must be a JSON object")
        found.append(value)
    return found


def facilitator_app(private_key: str, rpc_url: str, network: str) -> Starlette:
    """The facilitator for ``network`` (``eip155:<chain id>``), settling from
    ``private_key``'s account through the node at ``rpc_url``."""
    from x402 import SchemeNotFoundError
    from x402.schemas.helpers import parse_payment_payload, parse_payment_requirements

    facilitator = _facilitator(private_key, rpc_url, network)

    def call(method: str) -> Any:
        async def endpoint(request: Request) -> JSONResponse:
            try:
                body = json.loads(await request.body())
                payment, wanted = _objects(body, "paymentPayload", "paymentRequirements")
                payload = parse_payment_payload(payment)
                requirements = parse_payment_requirements(payload.x402_version, wanted)
            except ValueError as exc:  # pydantic's ValidationError and JSON's are ValueErrors
                return _refusal(f"not a facilitator request: {exc}")
            try:
                answer = await run_in_threadpool(
                    getattr(facilitator, method), payload, requirements
                )
            except SchemeNotFoundError as exc:  # a scheme or network it does not settle
                return _refusal(str(exc))
            return JSONResponse(answer.model_dump(by_alias=True, exclude_none=True))

        return endpoint

    async def supported(request: Request) -> JSONResponse:
        answer = facilitator.get_supported()
        return JSONResponse(answer.model_dump(by_alias=True, exclude_none=True))

    return Starlette(
        routes=[
            Route("/verify", call("verify"), methods=["POST"]),
            Route("/settle", call("settle"), methods=["POST"]),
            Route("/supported", supported, methods=["GET"]),
        ]
    )
