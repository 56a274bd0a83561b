"""What the approval tests drive and check: an agent, the approval page, the seller."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import httpx
from sqlalchemy import select
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from reference_server.store import tables as t

from ..payurl.apps import gated_app
from ..support import LiveServer

#: The seller's price, and what the page's form is sent with by a browser.
PRICE = Decimal("0.25")
SAME_ORIGIN = {"Sec-Fetch-Site": "same-origin"}
_CSRF = re.compile(r'name="csrf" value="([0-9a-f]+)"')
_PAYMENT_HEADERS = (b"payment-signature", b"x-payment", b"authorization")


async def _goods(request: Request) -> Response:
    return JSONResponse({"goods": "delivered"})


def paid_app(facilitator: str, pay_to: str) -> ASGIApp:
    return gated_app(facilitator, pay_to, _goods)


class PaidCounter:
    """Wraps a seller's app; counts the requests that carried a payment."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.url = ""
        self.paid = 0
        self.seen = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.seen += 1
            names = {name.lower() for name, _ in scope["headers"]}
            self.paid += any(h in names for h in _PAYMENT_HEADERS)
        await self.app(scope, receive, send)


def pay_url(
    live: LiveServer, wallet_key: str, url: str, key: str | None, **body: Any
) -> httpx.Response:
    headers = {"Authorization": f"Bearer {wallet_key}"}
    if key is not None:
        headers["Idempotency-Key"] = key
    return httpx.post(
        live.url + "/spend/pay-url", json={"url": url, **body}, headers=headers, timeout=60
    )


def decide(approval_url: str, decision: str, **headers: str) -> httpx.Response:
    """What a browser does: open the page, send its form with the button pressed."""
    page = httpx.get(approval_url)
    assert page.status_code == 200, page.text
    found = _CSRF.search(page.text)
    assert found is not None, page.text
    return httpx.post(
        approval_url,
        data={"csrf": found.group(1), "decision": decision},
        headers={**SAME_ORIGIN, **headers},
    )


def approval_row(live: LiveServer, approval_id: str) -> Any:
    with live.ctx.db.read() as conn:
        return conn.execute(select(t.approvals).where(t.approvals.c.id == approval_id)).one()


def make_approval(live: LiveServer, account: Any = None, *, key: str = "made") -> str:
    """A pending approval of a funded wallet key, asked as a pay-url over the line asks
    (``approvals.request``, with no URL to probe); its link."""
    from reference_server.domain import approvals, ledger

    from ..support import new_account

    acct = account or new_account(live.url)
    funded = httpx.post(
        f"{live.url}/wallet-keys/{acct.wallet_key_id}/fund",
        json={"amount": "1.00"},
        headers={"Authorization": f"Bearer {acct.owner_jwt}", "X-Svc-Environment": "test"},
    )
    assert funded.status_code == 200, funded.text
    live.ctx.load_secrets()  # before the transaction, as every request does
    ask = approvals.Ask(
        route="pay_url",
        idempotency_key=key,
        fingerprint="0" * 64,
        amount=250_000,
        rail="x402",
        url="https://seller.example/report",
        method="GET",
        host="seller.example",
        credit=(ledger.CHAIN_PAYOUTS, ledger.platform_shard()),
        request_id="req_made",
        public_url=live.url,
    )
    with live.ctx.db.write() as conn:
        asked = approvals.request(
            conn, live.ctx, key_id=acct.wallet_key_id, ask=ask, now=live.ctx.now()
        )
    assert asked.approval_url is not None
    return asked.approval_url
