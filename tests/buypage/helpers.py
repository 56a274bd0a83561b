"""Set-ups for the buy page tests: a seller's resource and its page's form, as a browser
reads and sends it."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import attrs
import httpx
from sqlalchemy import func, select

from reference_server.store import tables as t

from ..support import Account, LiveServer, new_account

PAYING = "4242 4242 4242 4242"
DECLINED = "4000 0000 0000 0002"
FUTURE = "12/39"
#: What Chromium sends with the page's own form (checked in test_browser.py).
BROWSER = {"Origin": "null", "Sec-Fetch-Site": "same-origin"}


@attrs.frozen
class Item:
    """A seller's resource and its buy page."""

    live: LiveServer
    acct: Account
    resource: dict[str, Any]

    @property
    def pay_url(self) -> str:
        return str(self.resource["pay_url"])

    @property
    def seller(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.acct.seller_key}"}

    def balance(self) -> Decimal:
        r = httpx.get(self.live.url + "/sellers/me/balance", headers=self.seller)
        assert r.status_code == 200, r.text
        return Decimal(r.json()["balance"])

    def verify(self, receipt_id: str) -> dict[str, Any]:
        r = httpx.post(
            self.live.url + "/access/verify",
            json={"receipt_id": receipt_id, "resource_id": self.resource["id"]},
            headers=self.seller,
        )
        assert r.status_code == 200, r.text
        body: dict[str, Any] = r.json()
        return body

    def deactivate(self) -> None:
        r = httpx.patch(
            self.live.url + f"/resources/{self.resource['id']}",
            json={"active": False},
            headers={**self.seller, "Idempotency-Key": "off-" + self.resource["id"]},
        )
        assert r.status_code == 200, r.text

    def subscribe(self, url: str) -> str:
        """Register a webhook endpoint at ``url`` for the owner's ``payment.succeeded``;
        returns its signing secret."""
        r = httpx.post(
            self.live.url + "/webhooks",
            json={"url": url, "events": ["payment.succeeded"]},
            headers={
                "Authorization": f"Bearer {self.acct.owner_jwt}",
                "X-Svc-Environment": self.resource["environment"],
                "Idempotency-Key": "hook-" + self.resource["id"],
            },
        )
        assert r.status_code == 201, r.text
        return str(r.json()["signing_secret"])

    def payments(self) -> int:
        """How many ledger transfers paid this resource."""
        tr = t.ledger_transfers
        with self.live.ctx.db.read() as conn:
            count = conn.execute(
                select(func.count())
                .select_from(tr)
                .where(tr.c.kind == "payment", tr.c.reference == self.resource["id"])
            ).scalar_one()
        return int(count)


def item(
    live: LiveServer,
    *,
    environment: str = "test",
    amount: str = "2.50",
    description: str | None = "Monthly weather report",
    pricing: dict[str, Any] | None = None,
) -> Item:
    """A seller's resource at ``amount``, or priced as ``pricing`` says (metered)."""
    acct = new_account(live.url, environment)
    body: dict[str, Any] = {"kind": "http", "path": "/v1/report", "amount": amount}
    if pricing is not None:
        body = {**body, "amount": None, **pricing}
    if description is not None:
        body["description"] = description
    r = httpx.post(
        live.url + "/resources", json=body, headers={"Authorization": f"Bearer {acct.seller_key}"}
    )
    assert r.status_code == 201, r.text
    return Item(live=live, acct=acct, resource=r.json())


def token_of(html: str) -> str:
    found = re.search(r'name="token" value="([^"]+)"', html)
    assert found is not None, html
    return found.group(1)


def receipt_of(html: str) -> str:
    found = re.search(r'id="receipt-id">(rcpt_[0-9A-Za-z]+)<', html)
    assert found is not None, html
    return found.group(1)


def pay(
    it: Item,
    *,
    number: str = PAYING,
    expiry: str = FUTURE,
    cvc: str = "123",
    token: str | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    """:func:`pay_by_card` on the item's buy page."""
    return pay_by_card(
        it.pay_url, number=number, expiry=expiry, cvc=cvc, token=token, headers=headers
    )


def pay_by_card(
    pay_url: str,
    *,
    number: str = PAYING,
    expiry: str = FUTURE,
    cvc: str = "123",
    token: str | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    """Send the page's form as Chromium does (urlencoded; ``Origin: null`` under the page's
    ``no-referrer`` policy, ``Sec-Fetch-Site: same-origin``); ``headers`` replace those."""
    if token is None:
        page = httpx.get(pay_url)
        assert page.status_code == 200, page.text
        token = token_of(page.text)
    return httpx.post(
        pay_url,
        data={"token": token, "number": number, "expiry": expiry, "cvc": cvc},
        headers=BROWSER if headers is None else headers,
        timeout=30,
    )
