"""Set-ups for the payout tests: a seller with a balance, onboarding through the sandbox
page's own form (as a browser sends it), and waiting for a withdrawal to settle."""

from __future__ import annotations

import uuid
from decimal import Decimal
from html.parser import HTMLParser
from typing import Any

import attrs
import httpx

from reference_server.domain import ledger

from ..support import Account, LiveServer, new_account, until

#: Payouts move a step every 0.2 s and the worker looks every 0.05 s: a test watches one
#: reach ``paid`` in well under a second.
FAST_PAYOUTS: dict[str, Any] = {"sandbox_payout_seconds": 0.2, "worker_poll_seconds": 0.05}


@attrs.frozen
class Shop:
    """A seller (``acct``) with a balance from sales, and an agent (``buyer``) that can
    buy more of its resource."""

    url: str
    acct: Account
    buyer: Account
    resource_id: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.acct.seller_key}"}

    @property
    def owner(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.acct.owner_jwt}", "X-Svc-Environment": "test"}

    def post(self, path: str, body: Any = None, **headers: str) -> httpx.Response:
        return httpx.post(self.url + path, json=body, headers={**self.auth, **headers}, timeout=30)

    def get(self, path: str) -> httpx.Response:
        return httpx.get(self.url + path, headers=self.auth, timeout=30)

    def withdraw(self, amount: str | None = None) -> httpx.Response:
        body = {} if amount is None else {"amount": amount}
        return self.post("/sellers/me/withdraw", body, **{"Idempotency-Key": str(uuid.uuid4())})

    def balance(self) -> Decimal:
        r = self.get("/sellers/me/balance")
        assert r.status_code == 200, r.text
        return Decimal(r.json()["balance"])

    def sell(self, times: int = 1) -> None:
        for _ in range(times):
            r = httpx.post(
                self.url + "/pay",
                json={"resource_id": self.resource_id},
                headers={
                    "Authorization": f"Bearer {self.buyer.wallet_key}",
                    "Idempotency-Key": str(uuid.uuid4()),
                },
                timeout=30,
            )
            assert r.status_code == 200, r.text


def shop(live: LiveServer, *, price: str = "10.00", sales: int = 1) -> Shop:
    """A seller that sold a resource priced ``price`` ``sales`` times (its balance: 99 %
    of the takings, after the platform fee)."""
    acct, buyer = new_account(live.url), new_account(live.url)
    r = httpx.post(
        live.url + "/resources",
        json={"kind": "http", "path": "/v1/report", "amount": price},
        headers={"Authorization": f"Bearer {acct.seller_key}"},
    )
    assert r.status_code == 201, r.text
    resource_id = str(r.json()["id"])
    r = httpx.post(
        f"{live.url}/wallet-keys/{buyer.wallet_key_id}/fund",
        json={"amount": "10000.00"},
        headers={"Authorization": f"Bearer {buyer.owner_jwt}", "X-Svc-Environment": "test"},
    )
    assert r.status_code == 200, r.text
    s = Shop(url=live.url, acct=acct, buyer=buyer, resource_id=resource_id)
    s.sell(sales)
    return s


class _Form(HTMLParser):
    """The onboarding page's form: its inputs and buttons, as a browser reads them."""

    def __init__(self) -> None:
        super().__init__()
        self.action: str | None = None
        self.inputs: list[dict[str, str | None]] = []
        self.buttons: list[dict[str, str | None]] = []
        self.labels: list[str] = []
        self._button: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs_: list[tuple[str, str | None]]) -> None:
        a = dict(attrs_)
        if tag == "form":
            self.action = a.get("action")
        elif tag == "input":
            self.inputs.append(a)
        elif tag == "button":
            self._button = {**a, "text": ""}

    def handle_data(self, data: str) -> None:
        if self._button is not None:
            self._button["text"] = (self._button["text"] or "") + data

    def handle_endtag(self, tag: str) -> None:
        if tag == "button" and self._button is not None:
            self.buttons.append(self._button)
            self._button = None


def read_form(html: str) -> _Form:
    form = _Form()
    form.feed(html)
    return form


def complete_onboarding(
    onboard_url: str, *, button: str = "Complete onboarding", bank: str = "succeeds"
) -> httpx.Response:
    """Fill in the page and press ``button`` (by its visible name), as a person would."""
    page = httpx.get(onboard_url, timeout=30)
    page.raise_for_status()
    form = read_form(page.text)
    fields: dict[str, str] = {}
    for field in form.inputs:
        name, kind = field.get("name"), field.get("type")
        if name is None:
            continue
        if kind == "hidden":
            fields[name] = field.get("value") or ""
        elif kind == "text":
            fields[name] = "Ada Lovelace"
        elif kind == "radio" and field.get("value") == bank:
            fields[name] = bank
        elif kind == "checkbox":
            fields[name] = field.get("value") or "on"
    (pressed,) = [b for b in form.buttons if (b["text"] or "").strip() == button]
    fields[str(pressed["name"])] = str(pressed["value"])
    return httpx.post(onboard_url, data=fields, timeout=30)


def paid_out(live: LiveServer) -> Decimal:
    """What the platform has paid out to sellers' banks so far, in dollars."""
    with live.ctx.db.read() as conn:
        micros = ledger.balance_micros(
            conn, environment="test", kind=ledger.PROCESSOR_PAYOUTS, ref_id=ledger.PLATFORM
        )
    return Decimal(micros) / 1_000_000


def onboard_url(s: Shop) -> str:
    """The seller's onboarding link, as the dashboard asks for it."""
    r = s.post("/sellers/me/connect/onboard", {"country": "US", "type": "express"})
    assert r.status_code == 200, r.text
    return str(r.json()["onboard_url"])


def onboard(s: Shop, *, bank: str = "succeeds") -> dict[str, Any]:
    """Onboard and sync: payouts enabled.  Returns the sync's answer."""
    r = s.post("/sellers/me/connect/onboard", {"country": "US", "type": "express"})
    assert r.status_code == 200, r.text
    done = complete_onboarding(r.json()["onboard_url"], bank=bank)
    assert done.status_code == 200, done.text
    r = s.post("/sellers/me/connect/sync")
    assert r.status_code == 200, r.text
    assert r.json()["payouts_enabled"] is True
    return dict(r.json())


def wait_for(s: Shop, withdrawal_id: str, *statuses: str) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        r = s.get(f"/sellers/me/withdrawals/{withdrawal_id}")
        assert r.status_code == 200, r.text
        return dict(r.json()) if r.json()["status"] in statuses else None

    return until(reached, f"withdrawal {withdrawal_id} not {statuses}")
