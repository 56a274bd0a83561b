"""Set-ups for the open-rails tests: a seller with payments enabled, funded payers, and
the official clients (x402's httpx client, pympp's client) paying a URL."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import httpx
import jwt
from eth_account.signers.local import LocalAccount
from mpp.client import Mpp as MppClient
from mpp.client import PaymentTransport
from mpp.methods.evm import BASE_SEPOLIA_USDC
from mpp.methods.evm import client as mpp_evm_client
from sqlalchemy import func, select
from x402 import x402Client
from x402.http.clients import x402HttpxClient
from x402.http.clients.httpx import x402AsyncTransport
from x402.mechanisms.evm.exact import register_exact_evm_client
from x402.mechanisms.evm.signers import EthAccountSigner

import svc
import svc.receipts
from reference_server.store import tables as t
from svc.wire import structure

from ..money.helpers import events_of
from ..sandbox.helpers import Recording, balance, fund, new_account
from ..support import LiveServer
from ..support import new_account as new_service_account

__all__ = [
    "PRICE",
    "RailShop",
    "Recording",
    "balance",
    "count_rows",
    "decode",
    "events_of",
    "fresh_credential",
    "fund",
    "funded_payer",
    "get",
    "mpp_pay",
    "new_account",
    "open_rail_shop",
    "paid_with_credential",
    "pay_with",
    "receipts_of",
    "x402_client",
    "x402_pay",
]

PRICE = 250_000  # $0.25 in USDC's 6 decimals


@attrs.frozen
class RailShop:
    """A seller selling one resource, with payments enabled (or not)."""

    live: LiveServer
    seller_key: str
    seller: svc.Client
    owner_id: str
    seller_id: str
    resource: svc.Resource
    payout_wallet: str | None

    def balance(self) -> svc.Balance:
        return self.seller.sellers.balance()


def open_rail_shop(
    live: LiveServer,
    *,
    price: str = "0.25",
    enable: bool = True,
    payout_wallet: str | None = None,
    upstream_url: str | None = None,
    path: str = "/v1/report",
    environment: str = "test",
) -> RailShop:
    account = new_service_account(live.url, environment)
    seller = svc.Client(base_url=live.url, seller_key=account.seller_key, max_retries=0)
    resource = seller.resources.create(
        kind="http", path=path, amount=price, upstream_url=upstream_url
    )
    if enable:
        seller.sellers.enable_payments(payout_wallet_address=payout_wallet)
    return RailShop(
        live=live,
        seller_key=account.seller_key,
        seller=seller,
        owner_id=account.owner_id,
        seller_id=account.seller_id,
        resource=resource,
        payout_wallet=payout_wallet,
    )


def funded_payer(live: LiveServer, amount: str = "1") -> LocalAccount:
    payer = new_account()
    fund(live.url, payer.address, amount)
    return payer


def x402_client(payer: LocalAccount) -> x402Client:
    """x402's own client, set up as its docs show for EVM."""
    client = x402Client()
    register_exact_evm_client(client, EthAccountSigner(payer))
    return client


async def x402_pay(url: str, payer: LocalAccount, method: str = "GET") -> httpx.Response:
    async with x402HttpxClient(x402_client(payer)) as http:
        return await http.request(method, url)


async def mpp_pay(url: str, payer: LocalAccount, method: str = "GET") -> httpx.Response:
    """pympp's own client paying with an EIP-3009 authorization on Base Sepolia."""
    charge = mpp_evm_client.charge(currency=BASE_SEPOLIA_USDC, account=payer)
    async with MppClient(methods=[charge]) as client:
        return await client.fetch(url, method=method)


async def pay_with(
    protocol: str, url: str, payer: LocalAccount, method: str = "GET"
) -> httpx.Response:
    """``url`` paid by the official client of ``protocol`` (``x402`` or ``mpp``)."""
    return await (x402_pay if protocol == "x402" else mpp_pay)(url, payer, method)


class Capture(Recording):
    """Like :class:`Recording`, but the paid retry is kept instead of sent: the official
    client signs a credential for real, and it stays unused for the test to present."""

    def __init__(self) -> None:
        super().__init__()
        self.credential: dict[str, str] | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        found = {
            name: request.headers[name]
            for name in ("payment-signature", "authorization")
            if name in request.headers
        }
        if found:
            self.credential = found
            return httpx.Response(599, request=request)
        return await super().handle_async_request(request)


def _transport(protocol: str, payer: LocalAccount, wire: httpx.AsyncBaseTransport) -> Any:
    if protocol == "x402":
        return x402AsyncTransport(x402_client(payer), transport=wire)
    charge = mpp_evm_client.charge(currency=BASE_SEPOLIA_USDC, account=payer)
    return PaymentTransport(methods=[charge], inner=wire)


async def paid_with_credential(
    url: str, payer: LocalAccount, protocol: str
) -> tuple[httpx.Response, dict[str, str]]:
    """Pay ``url`` with the official ``protocol`` client; also return the credential
    header it sent (``payment-signature`` or ``authorization``)."""
    wire = Recording()
    async with httpx.AsyncClient(transport=_transport(protocol, payer, wire)) as http:
        paid = await http.get(url)
    [credential] = [
        {name: r.headers[name]}
        for r in wire.sent
        for name in ("payment-signature", "authorization")
        if name in r.headers
    ]
    return paid, credential


async def fresh_credential(
    url: str, payer: LocalAccount, protocol: str, method: str = "GET"
) -> dict[str, str]:
    """A credential the official ``protocol`` client signs for ``method url``, never sent."""
    wire = Capture()
    async with httpx.AsyncClient(transport=_transport(protocol, payer, wire)) as http:
        await http.request(method, url)
    assert wire.credential is not None, "the client did not pay"
    return wire.credential


def decode(value: str) -> dict[str, Any]:
    """A base64 (x402) or base64url (MPP) JSON header value."""
    padded = value + "=" * (-len(value) % 4)
    for decoder in (base64.b64decode, base64.urlsafe_b64decode):
        try:
            return dict(json.loads(decoder(padded)))
        except ValueError:
            continue
    raise ValueError(f"not base64 JSON: {value[:40]}")


def count_rows(live: LiveServer, table: Any, *where: Any) -> int:
    with live.ctx.db.read() as conn:
        return int(conn.execute(select(func.count()).select_from(table).where(*where)).scalar_one())


def receipts_of(live: LiveServer, resource_id: str) -> Sequence[Any]:
    r = t.receipts
    with live.ctx.db.read() as conn:
        return conn.execute(select(r).where(r.c.resource_id == resource_id)).all()


def get(url: str, headers: Mapping[str, str] | None = None) -> httpx.Response:
    """A plain GET, without paying (async tests use it for unpaid probes and replays)."""
    return httpx.get(url, headers=headers)


def event_data(event: Mapping[str, Any], model: type[Any]) -> Any:
    """A recorded event's ``data`` read into its typed ``svc`` model, as a receiver would."""
    return structure({k: v for k, v in event.items() if k != "_environment"}, model)


def signed_receipt(live: LiveServer, paid: httpx.Response) -> svc.receipts.VerifiedReceipt:
    """The paid answer's ``X-Svc-Receipt-Token``, checked offline against the service's
    published keys: it proves the receipt the answer names."""
    jwks = httpx.get(live.url + "/.well-known/jwks.json").json()
    proven = svc.receipts.verify(paid.headers["x-svc-receipt-token"], jwks)
    assert proven.receipt_id == paid.headers["x-svc-receipt"]
    return proven


def untimed(headers: list[tuple[str, str]]) -> list[tuple[str, Any]]:
    """``headers`` with the receipt token's claims, less when it was signed, for its value."""
    return [
        (name, _claims_untimed(value) if name == "X-Svc-Receipt-Token" else value)
        for name, value in headers
    ]


def _claims_untimed(token: str) -> dict[str, Any]:
    claims = jwt.decode(token, options={"verify_signature": False})
    return {k: v for k, v in claims.items() if k not in ("iat", "exp")}
