"""Sending a ``live`` refund on the real chain (:mod:`.refunds_chain` holds and concludes it).

The hot wallet signs an EIP-3009 ``transferWithAuthorization`` to the payer whose nonce is
the refund's (:func:`.refunds_chain.nonce_of`), and the live facilitator settles it (an x402
``exact`` payment from the hot wallet to the payer: the facilitator pays the gas, as it does
for every payment the hot wallet makes).  Before each send the token is asked whether that
nonce was used already: a send that went through while its answer was lost (the worker
stopped, the facilitator timed out) is found there and concluded, never sent again; and
the token would refuse a second use of the nonce anyway.  Nothing is held across the
network: the refund is read, sent, then concluded in transactions of their own.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

import anyio.to_thread
import httpx
from eth_utils.address import to_checksum_address
from sqlalchemy import Connection, select, update

from ..context import ServerContext
from ..onchain import ChainUnreachable, TokenReader
from ..sandbox.eip3009 import Authorization, signing_digest
from ..settings import Settings
from ..store import tables as t
from ..telemetry import facilitator_client, span
from .events import NEW_DELIVERIES
from .paid_fetch.hot_wallet import HotWallet, hot_wallet
from .refunds_chain import CARRIED, Announce, conclude, lease_due, locked_pending, nonce_of

__all__ = ["advance_live", "missing_setup", "send_transfer"]

log = logging.getLogger("reference_server.refunds")
_f = t.refunds
_r = t.receipts
#: How long a refund whose send failed (facilitator down, float short) waits to be retried.
_RETRY = timedelta(seconds=30)
#: How long a worker holds a live refund it is sending (others leave it alone meanwhile).
_LEASE = timedelta(minutes=2)
#: How long each signed authorization may be settled: a retry signs a new one.
_VALID = timedelta(hours=1)


def missing_setup(settings: Settings | None) -> str | None:
    """What this server lacks to send a ``live`` refund on chain, or ``None``: checked
    when the refund is asked for, so one that nothing could send is refused then rather
    than accepted and failed by the worker."""
    if settings is not None and (
        settings.live_hot_wallet_key and settings.live_facilitator_url and settings.live_rpc_url
    ):
        return None
    return (
        "Refunds on chain in live need SVC_LIVE_HOT_WALLET_KEY, SVC_LIVE_FACILITATOR_URL "
        "and SVC_LIVE_RPC_URL on the server"
    )


async def advance_live(ctx: ServerContext, announce: Announce) -> bool:
    """Send or conclude each ``live`` refund that is due; ``True`` when events were
    recorded.  Without a hot wallet, a facilitator and a node (taken away since the refund
    was accepted), a live refund fails (its money back on the seller's balance)."""

    def due() -> list[Any]:
        with ctx.db.write() as conn:
            return _claim_due(conn, ctx.now(), ctx.settings.worker_batch_size)

    queued = False
    for row in await anyio.to_thread.run_sync(due):
        payer = str(to_checksum_address(row.payer))
        names = {"svc.refund_id": row.id, "svc.origin_request_id": row.request_id}
        with span("chain refund", **names):  # its facilitator calls inside
            sent = await _advance_one(ctx, row.id, payer, int(row.amount_micros), announce)
        queued = sent or queued
    return queued


def _claim_due(conn: Connection, now: datetime, limit: int) -> list[Any]:
    """The live refunds due, each leased for :data:`_LEASE` (its ``next_check_at`` moved
    on) so that one worker of several sends it at a time; a worker that stops mid-send
    leaves it to be taken again when the lease ends (the chain then says if it went)."""
    query = (
        select(_f.c.id, _f.c.amount_micros, _f.c.request_id, _r.c.payer)
        .select_from(_f.join(_r, _r.c.id == _f.c.receipt_id))
        .where(
            _f.c.environment == "live",
            _f.c.status == "pending",
            _f.c.next_check_at <= now,
            CARRIED,
        )
        .order_by(_f.c.next_check_at)
        .limit(limit)
    )
    return lease_due(conn, query, now, _LEASE)


async def _advance_one(
    ctx: ServerContext, refund_id: str, payer: str, amount: int, announce: Announce
) -> bool:
    settings = ctx.settings
    url, rpc = settings.live_facilitator_url, settings.live_rpc_url
    missing = missing_setup(settings)
    if missing is not None or not (url and rpc):  # set-up removed since it was accepted
        return await _write(ctx, refund_id, None, missing, announce)
    wallet = hot_wallet(ctx, "live")
    reader = TokenReader(rpc, wallet.token.address)
    nonce = nonce_of(refund_id)
    try:
        tx_hash = await anyio.to_thread.run_sync(lambda: _sent_by(reader, wallet, nonce))
        if tx_hash is None:
            tx_hash = await send_transfer(url, wallet, payer, amount, nonce, ctx.now())
        if tx_hash is not None:
            mined = tx_hash

            def moved() -> bool:
                return reader.paid(mined, sender=wallet.address, receiver=payer, value=amount)

            if not await anyio.to_thread.run_sync(moved):
                tx_hash = None  # not mined (yet), or not this transfer: asked again later
    except (ChainUnreachable, httpx.HTTPError, OSError) as exc:
        log.warning("refund %s: the chain or the facilitator did not answer: %s", refund_id, exc)
        tx_hash = None
    if tx_hash is None:
        await anyio.to_thread.run_sync(lambda: _later(ctx, refund_id))
        return False
    return await _write(ctx, refund_id, tx_hash, None, announce)


def _sent_by(reader: TokenReader, wallet: HotWallet, nonce: str) -> str | None:
    """The transaction that used the refund's nonce, if a send went through already."""
    if not reader.authorization_used(wallet.address, nonce):
        return None
    return reader.authorization_transaction(wallet.address, nonce)


async def send_transfer(
    url: str, wallet: HotWallet, payer: str, amount: int, nonce: str, now: datetime
) -> str | None:
    """The hot wallet's signed transfer to ``payer``, settled by the facilitator: its
    transaction, or ``None`` when it refused (retried later, under the same nonce)."""
    from mpp.x402.facilitator import FacilitatorError, HttpFacilitator

    token = wallet.token
    auth = Authorization(
        from_address=wallet.address,
        to=payer,
        value=amount,
        valid_after=0,
        valid_before=int((now + _VALID).timestamp()),
        nonce=nonce,
    )
    signature = wallet.account.unsafe_sign_hash(signing_digest(auth, token)).signature
    offer: dict[str, Any] = {
        "scheme": "exact",
        "network": token.network,
        "asset": token.address,
        "amount": str(amount),
        "payTo": payer,
        "maxTimeoutSeconds": int(_VALID.total_seconds()),
        "extra": {"name": token.name, "version": token.version},
    }
    payment = {
        "x402Version": 2,
        "accepted": offer,
        "payload": {"signature": "0x" + bytes(signature).hex(), "authorization": auth.to_json()},
    }
    async with facilitator_client(timeout=30) as http:
        try:
            settled = await HttpFacilitator(url, client=http).settle(payment, offer)  # type: ignore[arg-type]
        except FacilitatorError as exc:
            log.warning("refund nonce %s: the facilitator failed: %s", nonce, exc)
            return None
    if not settled.get("success"):
        log.warning("refund nonce %s: not settled: %r", nonce, settled)
        return None
    return str(settled["transaction"]).lower()


def _later(ctx: ServerContext, refund_id: str) -> None:
    with ctx.db.write() as conn:
        conn.execute(
            update(_f)
            .where(_f.c.id == refund_id, _f.c.status == "pending")
            .values(next_check_at=ctx.now() + _RETRY)
        )


async def _write(
    ctx: ServerContext,
    refund_id: str,
    tx_hash: str | None,
    failure: str | None,
    announce: Announce,
) -> bool:
    def write() -> bool:
        with ctx.db.write() as conn:
            _conclude_locked(conn, refund_id, tx_hash, failure, ctx.now(), announce)
            return bool(conn.info.pop(NEW_DELIVERIES, False))

    return await anyio.to_thread.run_sync(write)


def _conclude_locked(
    conn: Connection,
    refund_id: str,
    tx_hash: str | None,
    failure: str | None,
    now: datetime,
    announce: Announce,
) -> None:
    row = locked_pending(conn, refund_id)
    if row is not None:  # else concluded meanwhile by another worker
        conclude(conn, row, tx_hash, failure, now, announce)
