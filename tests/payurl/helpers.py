"""What the pay-url tests check with: an agent, its answers, the chain, the ledger."""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

import attrs
import httpx
from sqlalchemy import select

import svc
from reference_server.domain import ledger
from reference_server.domain.paid_fetch.hot_wallet import hot_wallet
from reference_server.store import tables as t
from svc.money import to_micros

from ..sandbox.helpers import balance
from ..support import LiveServer, new_account


@attrs.frozen
class Agent:
    live: LiveServer
    owner_id: str
    wallet_key_id: str
    wallet_key: str
    client: svc.Client

    def pay_url(self, url: str, key: str | None = None, **body: Any) -> httpx.Response:
        """``POST /spend/pay-url`` over plain HTTP (``key``: an Idempotency-Key)."""
        headers = {"Authorization": f"Bearer {self.wallet_key}"}
        if key is not None:
            headers["Idempotency-Key"] = key
        return httpx.post(
            self.live.url + "/spend/pay-url", json={"url": url, **body}, headers=headers, timeout=60
        )

    def spend(self) -> svc.SpendBalance:
        return self.client.spend.balance()


def make_agent(
    live: LiveServer, *, fund: str | None = "10.00", environment: str = "test", **policy: Any
) -> Agent:
    """An owner's wallet key minted with ``policy`` and funded with ``fund`` (in live, the
    owner's account wallet is first credited as a processor deposit would credit it)."""
    account = new_account(live.url)
    owner = svc.Client(
        base_url=live.url, owner_jwt=account.owner_jwt, environment=environment, max_retries=0
    )
    key = owner.wallet_keys.create(name="agent", **policy)
    if fund is not None:
        if environment == "live":
            deposit_live(live, account.owner_id, to_micros(Decimal(fund)))
        owner.wallet_keys.fund(key.id, fund)
    owner.close()
    client = svc.Client(base_url=live.url, wallet_key=key.key, max_retries=0, timeout=60)
    return Agent(
        live=live,
        owner_id=account.owner_id,
        wallet_key_id=key.id,
        wallet_key=key.key,
        client=client,
    )


def deposit_live(live: LiveServer, owner_id: str, amount: int) -> None:
    """Credit the owner's live account wallet as a processor deposit would."""
    now = live.ctx.now()
    with live.ctx.db.write() as conn:

        def account(kind: str, ref_id: str) -> str:
            return ledger.ensure_account(
                conn, environment="live", kind=kind, ref_id=ref_id, now=now
            )

        ledger.transfer(
            conn,
            environment="live",
            debit=account(ledger.PROCESSOR_CLEARING, ledger.PLATFORM),
            credit=account(ledger.OWNER_WALLET, owner_id),
            amount=amount,
            kind="deposit",
            now=now,
        )


def hot_address(live: LiveServer) -> str:
    return hot_wallet(live.ctx, "test").address


def chain_balance(live: LiveServer, address: str) -> int:
    return balance(live.url, address)


def new_key() -> str:
    return str(uuid.uuid4())


def attempt_row(live: LiveServer, attempt_id: str) -> Any:
    a = t.spend_attempts
    with live.ctx.db.read() as conn:
        return conn.execute(select(a).where(a.c.id == attempt_id)).one()


def events(live: LiveServer, owner_id: str, event_type: str) -> list[dict[str, Any]]:
    e = t.events
    with live.ctx.db.read() as conn:
        rows = conn.execute(
            select(e.c.data).where(e.c.owner_id == owner_id, e.c.type == event_type)
        ).all()
    return [dict(row.data) for row in rows]


def price(atomic: int) -> Decimal:
    return Decimal(atomic) / Decimal(1_000_000)
