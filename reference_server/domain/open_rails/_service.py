"""Payments to the service itself (an owner's top-up): the gates' pympp charge, settled at once.

A gate verifies, serves, then settles; a payment to the service has nothing to serve, so
:func:`pay` verifies the credential and claims its nonce exactly as a gate does
(:class:`._pympp.Charge`: same challenge, same replay store, same checks), then settles
it straight away: ``test`` on the sandbox chain, in the same transaction as the caller's
booking (``book``); ``live`` through the facilitator's ``/settle``, then ``book`` in a
transaction of its own.  A refused settlement releases the claim (the payer may present
the authorization again) and books nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import anyio.to_thread
from mpp.errors import PaymentError, VerificationFailedError
from mpp.methods.evm.intents import Authorization as VerifiedAuthorization
from mpp.x402 import is_x402_credential
from mpp.x402.facilitator import FacilitatorError
from sqlalchemy import Connection, delete, update

from svc_asgi import RailRequest

from ...context import ServerContext
from ...sandbox import chain
from ...sandbox.eip3009 import Authorization as ChainAuthorization
from ...store import tables as t
from ..events import writing
from ._model import Redemption, Settled, SettlementUnavailable
from ._pympp import Charge, Held, challenge_headers, facilitator_of, refusal_message, x402_unbound
from ._terms import RailTerms

__all__ = ["challenge", "pay"]

log = logging.getLogger("reference_server.open_rails")

T = TypeVar("T")
_c = t.rail_claims


async def challenge(
    ctx: ServerContext, terms: RailTerms, secret: str, request: RailRequest, **charge: Any
) -> list[tuple[str, str]]:
    """The 402's challenge headers for a payment of ``charge`` to the service."""
    attempt = Charge(ctx, terms, secret, "", **charge)
    result = await attempt.run(request, {})
    return challenge_headers(result.challenge, terms.protocols)


async def pay(
    ctx: ServerContext,
    terms: RailTerms,
    secret: str,
    request: RailRequest,
    credentials: Mapping[str, str],
    *,
    request_id: str,
    book: Callable[[Connection, Settled], T],
    **charge: Any,
) -> T | Redemption:
    """Verify, claim and settle the credential; ``book``'s result once settled, else the
    refusal (``headers``: a fresh challenge, none after a replay).  Raises
    :class:`SettlementUnavailable` when the outcome is not known (do not pay again)."""
    rail = "mpp" if "authorization" in credentials else "x402"
    attempt = Charge(ctx, terms, secret, request_id, **charge)
    signature = credentials.get("payment-signature")
    unbound = None if signature is None else x402_unbound(signature, request, attempt.binding)
    try:
        if unbound is not None:
            attempt.error = VerificationFailedError(unbound)
            result = await attempt.run(request, {})
        else:
            result = await attempt.run(request, credentials)
    except Held as held:
        return await _settle(attempt, held.authorization, book)
    except PaymentError as exc:  # pympp's 500 (a facilitator that failed to verify)
        raise SettlementUnavailable(str(exc)) from exc
    response = result.challenge
    return Redemption(
        paid=False,
        rail=rail,
        reason="receipt_refused",
        message=refusal_message(attempt.error),
        headers=challenge_headers(response, terms.protocols) if response.status == 402 else [],
        payer=attempt.payer,
    )


async def _settle(
    attempt: Charge, authorization: VerifiedAuthorization, book: Callable[[Connection, Settled], T]
) -> T | Redemption:
    rail = "x402" if is_x402_credential(authorization.credential) else "mpp"
    payload = dict(authorization.payload)
    payer = str(payload.get("from") or "") or None
    claim_key = attempt.store.claimed
    if attempt.terms.sandbox:
        try:
            return await anyio.to_thread.run_sync(_on_sandbox, attempt, rail, payload, book)
        except chain.ChainError as refused:
            return await _refused(attempt, rail, payer, refused.message)
        except BaseException:  # rolled back: nothing moved; let the payer retry
            await anyio.to_thread.run_sync(_unclaim, attempt, claim_key)
            raise
    facilitator = facilitator_of(attempt.intent)
    payment, requirements = attempt.intent._facilitator_payment(payload, authorization.request)
    try:
        settled = await facilitator.settle(payment, requirements)
    except FacilitatorError as exc:  # it may have broadcast: keep the claim
        raise SettlementUnavailable(str(exc)) from exc
    if not settled["success"]:
        if settled.get("errorReason") == "settlement_pending":
            raise SettlementUnavailable("the facilitator's settlement is pending")
        why = settled.get("errorMessage") or settled.get("errorReason") or "settlement failed"
        return await _refused(attempt, rail, payer, str(why))
    done = Settled(
        rail=rail,
        tx_hash=str(settled["transaction"]).lower(),
        payer=settled.get("payer") or payer,
        network=attempt.terms.asset.network,
    )
    try:
        return await anyio.to_thread.run_sync(_book, attempt, claim_key, done, book)
    except Exception as exc:
        log.critical("%s payment %s settled on chain but was not booked: %r", rail, done, exc)
        raise SettlementUnavailable("the payment settled but could not be booked") from exc


def _on_sandbox(
    attempt: Charge, rail: str, payload: dict[str, Any], book: Callable[[Connection, Settled], T]
) -> T:
    """Move the sandbox tokens and book them: one transaction, all or nothing."""
    ctx = attempt.ctx
    with writing(ctx.db, ctx.notify_new_events) as conn:
        auth = ChainAuthorization.from_json(payload)
        tx = chain.transfer_with_authorization(conn, auth, payload.get("signature"), now=ctx.now())
        done = Settled(
            rail=rail,
            tx_hash=tx.hash.lower(),
            payer=tx.from_address,
            network=attempt.terms.asset.network,
        )
        return _booked(conn, attempt.store.claimed, done, book)


def _book(
    attempt: Charge, claim_key: str | None, done: Settled, book: Callable[[Connection, Settled], T]
) -> T:
    with writing(attempt.ctx.db, attempt.ctx.notify_new_events) as conn:
        return _booked(conn, claim_key, done, book)


def _booked(
    conn: Connection, claim_key: str | None, done: Settled, book: Callable[[Connection, Settled], T]
) -> T:
    if claim_key is not None:  # the claim now names what it paid
        conn.execute(update(_c).where(_c.c.key == claim_key).values(value=done.tx_hash))
    return book(conn, done)


def _unclaim(attempt: Charge, claim_key: str | None) -> None:
    if claim_key is not None:
        with attempt.ctx.db.write() as conn:
            conn.execute(delete(_c).where(_c.c.key == claim_key))


async def _refused(attempt: Charge, rail: str, payer: str | None, why: str) -> Redemption:
    """Settling failed and nothing moved: release the claim, book nothing."""
    await anyio.to_thread.run_sync(_unclaim, attempt, attempt.store.claimed)
    return Redemption(
        paid=False,
        rail=rail,
        reason="receipt_refused",
        message=f"the payment could not be settled: {why}",
        payer=payer,
    )
