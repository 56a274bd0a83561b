"""The pympp side: one ``evm`` charge serving MPP and x402 clients from one endpoint.

Per request, a pympp server is built for the gate's terms (cheap: plain objects) and asked
about the request, exactly as a pympp seller's own route would ask it::

    Mpp(methods=evm.charge(currency=…, recipient=…, settle=… | facilitator=…,
                           route_binding="resource", store=ClaimStore(…)),
        realm=…, secret_key=…)
    result = await mpp.charge(amount="0.25")(Request(method, url, headers))

``PaymentRequired`` is a challenge (402) or a refusal (402 with a retry challenge, or
403 for a credential that was already used); ``PaymentVerified`` is a settled payment.
``route_binding="resource"`` lets stock x402 clients pay (they bind by the resource URL,
not by mppx's route extension); the claim store is the database, so a credential pays
once across processes.

Settlement: ``test`` uses the charge's ``settle`` hook, which runs the authorization on
the sandbox chain and books it in one transaction (:mod:`._credit`); ``live`` lets pympp
settle through the configured x402 facilitator and books the transaction afterwards,
keyed on its hash.

This module imports pympp (and through it eth-account): the package imports it only
through :func:`reference_server.domain.open_rails._engine`, which keeps the process's
recursion limit as it was.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import anyio.to_thread
from mpp.errors import (
    InternalPaymentError,
    InvalidPayloadError,
    MalformedCredentialError,
    PaymentError,
    VerificationFailedError,
)
from mpp.methods.evm import EvmAsset
from mpp.methods.evm import server as evm
from mpp.methods.evm.intents import Authorization as VerifiedAuthorization
from mpp.server import Mpp, PaymentVerified, Request, Response
from mpp.x402 import is_x402_credential
from sqlalchemy.exc import IntegrityError

from svc.money import format_micros
from svc_asgi import RailRequest

from ...context import ServerContext
from ...sandbox import chain
from ...sandbox.eip3009 import MalformedAuthorization
from ..events import NEW_DELIVERIES
from ..payments import verify_receipt
from ._claims import ClaimStore
from ._credit import credit, receipt_for_transaction, record_refusal, settle_on_sandbox
from ._model import Gate, Redemption, SettlementUnavailable
from ._terms import RailTerms

__all__ = ["challenge", "redeem"]

log = logging.getLogger("reference_server.open_rails")

#: pympp's challenge headers (lowercase, as it hands them back) -> how the gate sends
#: them, and the protocol each belongs to.
_CHALLENGE_HEADERS = {
    "www-authenticate": ("WWW-Authenticate", "mpp"),
    "payment-required": ("PAYMENT-REQUIRED", "x402"),
}
_RECEIPT_HEADERS = {"payment-receipt": "Payment-Receipt", "payment-response": "PAYMENT-RESPONSE"}


class _Attempt:
    """One request's pympp server, and what happened to its credential."""

    def __init__(
        self, ctx: ServerContext, gate: Gate, terms: RailTerms, secret: str, request_id: str
    ) -> None:
        self.ctx = ctx
        self.gate = gate
        self.terms = terms
        self.request_id = request_id
        self.store = ClaimStore(ctx.db, ctx.now)
        self.receipt_id: str | None = None
        self.error: BaseException | None = None
        self.payer: str | None = None
        asset = terms.asset
        method = evm.charge(
            currency=EvmAsset(
                address=asset.address,
                decimals=asset.decimals,
                chain_id=asset.chain_id,
                name=asset.name,
                version=asset.version,
            ),
            recipient=terms.recipient,
            settle=self._settle if terms.sandbox else None,
            facilitator=terms.facilitator_url,
            route_binding="resource",
            store=self.store,
        )
        self.mpp = Mpp(methods=method, realm=gate.realm, secret_key=secret)
        self.mpp.on_payment_failed(self._failed)
        self.handler = self.mpp.charge(amount=format_micros(int(gate.resource.amount_micros)))

    async def run(self, request: RailRequest, headers: Mapping[str, str]) -> Any:
        return await self.handler(Request(request.method, request.url, dict(headers)))

    def _failed(self, payload: Mapping[str, Any]) -> None:
        self.error = payload.get("error")
        self.payer = _payer_of(payload.get("credential")) or self.payer

    # --- test: settle on the sandbox chain and book it, in one transaction ---------------

    async def _settle(self, authorization: VerifiedAuthorization) -> str:
        rail = "x402" if is_x402_credential(authorization.credential) else "mpp"
        self.payer = str(authorization.payload.get("from") or "") or None
        try:
            receipt_id, tx_hash = await anyio.to_thread.run_sync(
                self._settle_in_db, rail, authorization.payload
            )
        except chain.ChainError as refused:
            # Nothing moved: pympp releases the claim, so the payer may fund and retry.
            raise VerificationFailedError(refused.message) from None
        except MalformedAuthorization as exc:
            raise InvalidPayloadError(str(exc)) from None
        except Exception as exc:
            # The transaction rolled back, so nothing moved either; pympp keeps claims
            # on unexpected errors (a payment may have landed elsewhere): release ours.
            log.exception("settling %s for %s failed", rail, self.gate.resource.id)
            if self.store.claimed is not None:
                await self.store.delete(self.store.claimed)
            raise InternalPaymentError() from exc
        self.receipt_id = receipt_id
        return tx_hash

    def _settle_in_db(self, rail: str, payload: Mapping[str, Any]) -> tuple[str, str]:
        ctx, gate = self.ctx, self.gate
        with ctx.db.write() as conn:
            result = settle_on_sandbox(
                conn,
                resource=gate.resource,
                seller=gate.seller,
                terms=self.terms,
                rail=rail,
                payload=payload,
                fee_bps=ctx.settings.platform_fee_bps,
                request_id=self.request_id,
                now=ctx.now(),
            )
            queued = conn.info.pop(NEW_DELIVERIES, False)
        if queued:
            ctx.notify_new_events()
        return result

    # --- live: the facilitator settled; book the transaction once -------------------------

    def book(self, rail: str, tx_hash: str, payer: str | None) -> str:
        ctx, gate = self.ctx, self.gate
        try:
            with ctx.db.write() as conn:
                receipt_id = credit(
                    conn,
                    resource=gate.resource,
                    seller=gate.seller,
                    terms=self.terms,
                    rail=rail,
                    tx_hash=tx_hash,
                    payer=payer,
                    amount=int(gate.resource.amount_micros),
                    fee_bps=ctx.settings.platform_fee_bps,
                    request_id=self.request_id,
                    now=ctx.now(),
                )
                queued = conn.info.pop(NEW_DELIVERIES, False)
        except IntegrityError:  # booked concurrently: the receipt exists now
            with ctx.db.read() as conn:
                found = receipt_for_transaction(conn, gate.resource.environment, tx_hash)
            if found is None:
                raise
            return found
        if queued:
            ctx.notify_new_events()
        return receipt_id


def _payer_of(credential: Any) -> str | None:
    payload = getattr(credential, "payload", None)
    payer = payload.get("from") if isinstance(payload, Mapping) else None
    if payer is None:
        payer = getattr(payload, "from_", None)
    return payer if isinstance(payer, str) else None


def _challenge_headers(response: Any, protocols: frozenset[str]) -> list[tuple[str, str]]:
    """The challenges of the protocols the seller offers, named as the gate sends them."""
    return [
        (_CHALLENGE_HEADERS[name][0], value)
        for name, value in response.headers.multi_items()
        if name in _CHALLENGE_HEADERS and _CHALLENGE_HEADERS[name][1] in protocols
    ]


async def challenge(
    ctx: ServerContext, gate: Gate, terms: RailTerms, secret: str, request: RailRequest
) -> list[tuple[str, str]]:
    """The 402's ``WWW-Authenticate: Payment`` and ``PAYMENT-REQUIRED`` for ``request``."""
    attempt = _Attempt(ctx, gate, terms, secret, request_id="")
    result = await attempt.run(request, {})
    return _challenge_headers(result.challenge, terms.protocols)


async def redeem(
    ctx: ServerContext,
    gate: Gate,
    terms: RailTerms,
    secret: str,
    request: RailRequest,
    credentials: Mapping[str, str],
    request_id: str,
) -> Redemption:
    """Verify and settle the credential in ``credentials``; see :func:`..redeem`."""
    rail = "mpp" if "authorization" in credentials else "x402"
    attempt = _Attempt(ctx, gate, terms, secret, request_id)
    try:
        result = await attempt.run(request, credentials)
    except PaymentError as exc:  # pympp's 500: the outcome may be unknown, do not re-offer
        raise SettlementUnavailable(str(exc)) from exc
    if isinstance(result, PaymentVerified):
        return await _paid(attempt, result)
    response = result.challenge
    error = attempt.error
    malformed = isinstance(error, MalformedCredentialError | InvalidPayloadError)
    refusal = Redemption(
        paid=False,
        rail=rail,
        reason="receipt_malformed" if malformed else "receipt_refused",
        message=_message(error),
        # A 403 is a credential already used: no new challenge, which would invite an
        # auto-paying client to pay a second time.
        headers=(_challenge_headers(response, terms.protocols) if response.status == 402 else []),
        payer=attempt.payer,
    )
    await anyio.to_thread.run_sync(_record_refusal, attempt, refusal)
    return refusal


async def _paid(attempt: _Attempt, result: PaymentVerified) -> Redemption:
    rail = "x402" if is_x402_credential(result.credential) else "mpp"
    receipt_id = attempt.receipt_id
    if receipt_id is None:  # live: the facilitator settled, the books are ours to write
        payer = result.receipt.payer or _payer_of(result.credential)
        try:
            receipt_id = await anyio.to_thread.run_sync(
                attempt.book, rail, result.receipt.reference, payer
            )
        except Exception as exc:
            log.critical(
                "%s payment %s settled on chain but could not be booked for %s: %r",
                rail,
                result.receipt.reference,
                attempt.gate.resource.id,
                exc,
            )
            raise SettlementUnavailable("the payment settled but could not be booked") from exc
    paid = result.with_receipt(Response())
    headers = [
        (_RECEIPT_HEADERS[name], value)
        for name, value in paid.headers.multi_items()
        if name in _RECEIPT_HEADERS
    ]
    verification = await anyio.to_thread.run_sync(_verification, attempt, receipt_id)
    return Redemption(
        paid=True,
        rail=rail,
        receipt_id=receipt_id,
        verification=verification,
        headers=headers,
        payer=result.receipt.payer,
    )


def _verification(attempt: _Attempt, receipt_id: str) -> Any:
    with attempt.ctx.db.read() as conn:
        return verify_receipt(
            conn, receipt_id, resource_id=attempt.gate.resource.id, seller_id=None
        )


def _record_refusal(attempt: _Attempt, refusal: Redemption) -> None:
    ctx, gate = attempt.ctx, attempt.gate
    with ctx.db.write() as conn:
        record_refusal(
            conn,
            resource=gate.resource,
            seller=gate.seller,
            terms=attempt.terms,
            rail=refusal.rail or "x402",
            reason=refusal.reason or "receipt_refused",
            message=refusal.message or "",
            payer=refusal.payer,
            request_id=attempt.request_id,
            now=ctx.now(),
        )
        queued = conn.info.pop(NEW_DELIVERIES, False)
    if queued:
        ctx.notify_new_events()


def _message(error: BaseException | None) -> str:
    if error is None:
        return "the credential was not accepted"
    text = str(error).strip().rstrip(".")
    return text or type(error).__name__
