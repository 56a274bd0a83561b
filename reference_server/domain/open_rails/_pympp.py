"""The pympp side: one ``evm`` charge serving MPP and x402 clients from one endpoint.

Per request, a pympp server is built for the gate's terms (cheap: plain objects) and asked
about the request, exactly as a pympp seller's own route would ask it::

    Mpp(methods=evm.charge(currency=…, recipient=…, settle=… | facilitator=…,
                           route_binding="resource", store=ClaimStore(…)),
        realm=…, secret_key=…)
    result = await mpp.charge(amount="0.25")(Request(method, url, headers))

``PaymentRequired`` is a challenge (402) or a refusal (402 with a retry challenge, or
403 for a credential that was already used).  ``route_binding="resource"`` lets stock
x402 clients pay (they bind by the resource URL, not by mppx's route extension); the claim
store is the database, so a credential is claimed once across processes.

Verify, serve, then settle: pympp verifies the credential and claims its nonce, then
calls the charge's ``settle`` hook, which here checks that the authorization would settle
now (the sandbox chain's checks; live, the facilitator's ``/verify``) and *stops*
(:class:`Held`): :func:`claim` records a hold (:mod:`._holds`).  :func:`settle` later
runs it: ``test`` on the sandbox chain, booked in the same transaction (:mod:`._credit`);
``live`` through the facilitator's ``/settle``, booked afterwards, keyed on its hash.
The paid answer's ``Payment-Receipt`` / ``PAYMENT-RESPONSE`` are built as pympp's
``PaymentVerified.with_receipt`` builds them.

This module imports pympp (and through it eth-account): the package imports it only
through :func:`reference_server.domain.open_rails._engine`, which keeps the process's
recursion limit as it was.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import anyio.to_thread
import httpx
from mpp import Receipt, canonical_b64url
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
from mpp.server import Mpp, PaymentVerified, Request
from mpp.x402 import (
    ROUTE_BINDING_EXTENSION,
    InvalidHeaderError,
    decode_payment_signature,
    encode_payment_response,
    is_x402_credential,
)
from mpp.x402.facilitator import Facilitator, FacilitatorError, HttpFacilitator
from sqlalchemy.exc import IntegrityError

from svc import ReceiptVerification, ResourceMetadata
from svc.money import format_micros, from_micros
from svc.wire import structure
from svc_asgi import RailRequest

from ... import outbound
from ...context import ServerContext
from ...ids import new_id
from ...onchain import ChainUnreachable, TokenReader
from ...sandbox import chain
from ...sandbox.eip3009 import Authorization as ChainAuthorization
from ...sandbox.eip3009 import MalformedAuthorization
from ...telemetry import facilitator_client
from ..events import writing
from ..payments import verify_receipt
from ._claims import ClaimStore
from ._credit import credit, receipt_for_transaction, record_refusal, settle_on_sandbox
from ._holds import (
    Hold,
    record_settled,
    release_hold,
    save_hold,
    save_unsettled,
    take_hold,
)
from ._model import Gate, HoldNotFound, Redemption, SettlementUnavailable
from ._terms import RailTerms
from ._unsettled import Outcome, chain_outcome

__all__ = [
    "Charge",
    "Held",
    "binding_of",
    "book_unsettled",
    "challenge",
    "challenge_headers",
    "claim",
    "facilitator_http",
    "facilitator_of",
    "fixed_price",
    "held_redemption",
    "receipt_headers",
    "refusal_message",
    "settle",
    "settlement_refused",
    "unbound_payment",
    "verification",
    "x402_unbound",
]

log = logging.getLogger("reference_server.open_rails")

#: pympp's challenge headers (lowercase, as it hands them back) -> how the gate sends
#: them, and the protocol each belongs to.
_CHALLENGE_HEADERS = {
    "www-authenticate": ("WWW-Authenticate", "mpp"),
    "payment-required": ("PAYMENT-REQUIRED", "x402"),
}


class Held(Exception):
    """Raised by the settle hook of a claiming attempt: the credential is verified and
    claimed; pympp keeps the claim (an error it does not know) and lets this out."""

    def __init__(self, authorization: VerifiedAuthorization) -> None:
        super().__init__("held")
        self.authorization = authorization


class Charge:
    """One request's pympp server for one charge, and what happened to its credential.

    A charge is ``amount_micros`` to ``terms.recipient``, bound to ``binding`` (signed into
    MPP's challenge id, echoed by x402 clients): a gate's sale (:class:`_Attempt`) or a
    payment to the service itself (:mod:`._service`, a top-up)."""

    def __init__(
        self,
        ctx: ServerContext,
        terms: RailTerms,
        secret: str,
        request_id: str,
        *,
        realm: str,
        amount_micros: int,
        binding: dict[str, str],
        http: httpx.AsyncClient | None = None,
        description: str | None = None,
    ) -> None:
        self.ctx = ctx
        self.terms = terms
        self.request_id = request_id
        self.binding = binding
        self.store = ClaimStore(ctx.db, ctx.now)
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
            # Always the hook that stops after the claim: settling is the caller's.
            settle=self._hold,
            facilitator=(
                terms.facilitator_url
                if http is None or terms.facilitator_url is None
                else HttpFacilitator(terms.facilitator_url, client=http)
            ),
            route_binding="resource",
            store=self.store,
        )
        self.intent: Any = method.x402  # the ChargeIntent (its facilitator helpers)
        self.mpp = Mpp(methods=method, realm=realm, secret_key=secret)
        self.mpp.on_payment_failed(self._failed)
        options = {} if description is None else {"description": description}
        self.handler = self.mpp.charge(amount=format_micros(amount_micros), meta=binding, **options)

    async def run(self, request: RailRequest, headers: Mapping[str, str]) -> Any:
        return await self.handler(Request(request.method, request.url, dict(headers)))

    def _failed(self, payload: Mapping[str, Any]) -> None:
        self.error = payload.get("error")
        self.payer = _payer_of(payload.get("credential")) or self.payer

    # --- verify and claim only ----------------------------------------------------------

    async def _hold(self, authorization: VerifiedAuthorization) -> str:
        """pympp verified the credential and claimed its nonce: check it would settle now
        (the sandbox chain's own checks; live, the facilitator's verify), then stop."""
        self.payer = str(authorization.payload.get("from") or "") or None
        if self.terms.sandbox:
            try:
                await anyio.to_thread.run_sync(self._check_on_sandbox, authorization.payload)
            except chain.ChainError as refused:
                raise VerificationFailedError(refused.message) from None  # claim released
            except MalformedAuthorization as exc:
                raise InvalidPayloadError(str(exc)) from None
        else:
            facilitator = facilitator_of(self.intent)
            payment, requirements = self.intent._facilitator_payment(
                authorization.payload, authorization.request
            )
            try:
                verified = await facilitator.verify(payment, requirements)
            except FacilitatorError as error:
                # pympp keeps the claim of an internal error (its settle may have
                # broadcast); /verify never moves money, so the authorization stays usable.
                if self.store.claimed is not None:
                    await self.store.delete(self.store.claimed)
                raise InternalPaymentError() from error
            if not verified["isValid"]:
                raise VerificationFailedError(
                    verified.get("invalidMessage")
                    or verified.get("invalidReason")
                    or "EVM facilitator verify failed"
                )
        raise Held(authorization)

    def _check_on_sandbox(self, payload: Mapping[str, Any]) -> None:
        auth = ChainAuthorization.from_json(payload)
        with self.ctx.db.read() as conn:
            chain.check_transfer(conn, auth, payload.get("signature"), now=self.ctx.now())


def fixed_price(resource: Any) -> int:
    """What the exact charge asks for ``resource``: its price, or for a metered one its
    ``fallback_amount`` (callers offer no exact charge for a metered one without it)."""
    if resource.pricing == "metered":
        return int(resource.fallback_amount_micros or 0)
    return int(resource.amount_micros)


def _fallback_note(resource: Any) -> str | None:
    """The MPP challenge's description of a metered resource sold at its fallback."""
    if resource.pricing != "metered":
        return None
    return (
        f"metered by the {resource.unit} on x402 upto; "
        f"a fixed {format_micros(fixed_price(resource))} on this rail"
    )


class _Attempt(Charge):
    """A gate's sale: the charge is the resource's price (a metered resource's fallback),
    bound to the resource."""

    def __init__(
        self,
        ctx: ServerContext,
        gate: Gate,
        terms: RailTerms,
        secret: str,
        request_id: str,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        super().__init__(
            ctx,
            terms,
            secret,
            request_id,
            realm=gate.realm,
            amount_micros=fixed_price(gate.resource),
            binding=binding_of(gate),
            http=http,
            description=_fallback_note(gate.resource),
        )
        self.gate = gate

    # --- live: the facilitator settled; book the transaction once -------------------------

    def book(
        self, rail: str, tx_hash: str, payer: str | None, receipt_id: str | None = None
    ) -> str:
        ctx, gate = self.ctx, self.gate
        try:
            with writing(ctx.db, ctx.notify_new_events) as conn:
                receipt_id = credit(
                    conn,
                    resource=gate.resource,
                    seller=gate.seller,
                    terms=self.terms,
                    rail=rail,
                    tx_hash=tx_hash,
                    payer=payer,
                    amount=fixed_price(gate.resource),
                    fee_bps=ctx.settings.platform_fee_bps,
                    request_id=self.request_id,
                    now=ctx.now(),
                    receipt_id=receipt_id,
                )
        except IntegrityError:  # booked concurrently: the receipt exists now
            with ctx.db.read() as conn:
                found = receipt_for_transaction(conn, gate.resource.environment, tx_hash)
            if found is None:
                raise
            return found
        return receipt_id


def binding_of(gate: Gate) -> dict[str, str]:
    """What every challenge binds beside the request: the resource sold.  MPP signs it
    into the challenge id (a credential for one resource pays nothing at another, even
    at the same path and price); x402 clients echo it (:func:`x402_unbound`)."""
    return {"resource": str(gate.resource.id)}


def x402_unbound(signature: str, request: RailRequest, binding: dict[str, str]) -> str | None:
    """Why an x402 ``PAYMENT-SIGNATURE`` was not made for this request and ``binding``
    (what the charge binds: a gate's resource, a top-up's owner), or ``None``.

    pympp binds it to the URL; the route binding its challenge carries
    (``extensions.mppx.info``: the method, and the resource in ``opaque``) is echoed by
    x402 clients but checked only for mppx's own.  A credential signed from a GET 402
    must not pay a POST, nor one for another resource pay this one."""
    try:
        payment = decode_payment_signature(signature)
    except InvalidHeaderError:
        return None  # malformed: pympp refuses it, saying so
    return unbound_payment(payment, request, binding)


def unbound_payment(
    payment: Mapping[str, Any], request: RailRequest, binding: dict[str, str]
) -> str | None:
    """:func:`x402_unbound` of a decoded x402 payment (of any scheme)."""
    extensions = payment.get("extensions")
    echoed = extensions.get(ROUTE_BINDING_EXTENSION) if isinstance(extensions, Mapping) else None
    info = echoed.get("info") if isinstance(echoed, Mapping) else None
    if not isinstance(info, Mapping):
        return "the x402 payment does not echo the challenge's route binding (extensions.mppx)"
    method = info.get("method")
    if not isinstance(method, str) or method.upper() != request.method.upper():
        return f"the x402 payment was made for a {method} request, not {request.method}"
    if info.get("opaque") != canonical_b64url(binding):
        return "the x402 payment was made for another resource"
    return None


def _payer_of(credential: Any) -> str | None:
    payload = getattr(credential, "payload", None)
    payer = payload.get("from") if isinstance(payload, Mapping) else None
    if payer is None:
        payer = getattr(payload, "from_", None)
    return payer if isinstance(payer, str) else None


def challenge_headers(response: Any, protocols: frozenset[str]) -> list[tuple[str, str]]:
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
    return challenge_headers(result.challenge, terms.protocols)


def verification(ctx: ServerContext, resource_id: str, receipt_id: str) -> Any:
    """The settled receipt, as ``GET /receipts/verify`` would verify it."""
    with ctx.db.read() as conn:
        return verify_receipt(conn, receipt_id, resource_id=resource_id, seller_id=None)


def _record_refusal(attempt: _Attempt, refusal: Redemption) -> None:
    ctx, gate = attempt.ctx, attempt.gate
    with writing(ctx.db, ctx.notify_new_events) as conn:
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


def refusal_message(error: BaseException | None) -> str:
    if error is None:
        return "the credential was not accepted"
    text = str(error).strip().rstrip(".")
    return text or type(error).__name__


# --- verify, serve, then settle ---------------------------------------------------------------


def facilitator_of(intent: Any) -> Facilitator:
    facilitator = intent.facilitator
    if facilitator is None:
        raise InternalPaymentError()
    return facilitator  # type: ignore[no-any-return]


@asynccontextmanager
async def facilitator_http(terms: RailTerms) -> AsyncIterator[httpx.AsyncClient | None]:
    """One HTTP client for one gate request's facilitator calls (verify, or settle), on
    the running event loop, closed after it; none for the sandbox."""
    if terms.sandbox or terms.facilitator_url is None:
        yield None
        return
    async with facilitator_client(verify=outbound.default_tls_context(), timeout=30) as http:
        yield http


async def claim(
    ctx: ServerContext,
    gate: Gate,
    terms: RailTerms,
    secret: str,
    request: RailRequest,
    credentials: Mapping[str, str],
    request_id: str,
) -> Redemption:
    """Verify the credential in ``credentials`` and claim its nonce, moving nothing; see
    :func:`..claim`."""
    async with facilitator_http(terms) as http:
        attempt = _Attempt(ctx, gate, terms, secret, request_id, http)
        return await _claim(attempt, request, credentials)


async def _claim(
    attempt: _Attempt, request: RailRequest, credentials: Mapping[str, str]
) -> Redemption:
    rail = "mpp" if "authorization" in credentials else "x402"
    signature = credentials.get("payment-signature")
    unbound = None if signature is None else x402_unbound(signature, request, attempt.binding)
    if unbound is not None:
        attempt.error = VerificationFailedError(unbound)
        return await _refused(attempt, await attempt.run(request, {}), rail)
    try:
        result = await attempt.run(request, credentials)
    except Held as held:
        return await anyio.to_thread.run_sync(_held, attempt, held.authorization)
    except PaymentError as exc:  # pympp's 500 (a facilitator that failed to verify)
        raise SettlementUnavailable(str(exc)) from exc
    if isinstance(result, PaymentVerified):  # the hook always stops before settling
        raise SettlementUnavailable("the credential settled while it was only to be claimed")
    return await _refused(attempt, result, rail)


async def _refused(attempt: _Attempt, result: Any, rail: str) -> Redemption:
    response = result.challenge
    error = attempt.error
    malformed = isinstance(error, MalformedCredentialError | InvalidPayloadError)
    refusal = Redemption(
        paid=False,
        rail=rail,
        reason="receipt_malformed" if malformed else "receipt_refused",
        message=refusal_message(error),
        # A 403 is a credential already used: no new challenge, which would invite an
        # auto-paying client to pay a second time.
        headers=(
            challenge_headers(response, attempt.terms.protocols) if response.status == 402 else []
        ),
        payer=attempt.payer,
    )
    await anyio.to_thread.run_sync(_record_refusal, attempt, refusal)
    return refusal


def _held(attempt: _Attempt, authorization: VerifiedAuthorization) -> Redemption:
    ctx, gate = attempt.ctx, attempt.gate
    resource = gate.resource
    rail = "x402" if is_x402_credential(authorization.credential) else "mpp"
    hold = Hold(
        claim=new_id("clm"),
        claim_key=attempt.store.claimed,
        receipt_id=new_id("rcpt"),
        resource_id=resource.id,
        seller_id=gate.seller.id,
        environment=resource.environment,
        rail=rail,
        payer=attempt.payer,
        payload=dict(authorization.payload),
        request=dict(authorization.request),
        request_id=attempt.request_id,
    )
    save_hold(ctx.db, hold, ctx.now())
    return held_redemption(resource, hold, fixed_price(resource))


def held_redemption(resource: Any, hold: Hold, amount_micros: int) -> Redemption:
    """A claim's answer, with what the receipt will say once settled (``amount_micros``,
    the most it can be): the app is served with it meanwhile."""
    provisional = ReceiptVerification(
        valid=True,
        receipt_id=hold.receipt_id,
        resource_id=resource.id,
        amount=from_micros(amount_micros),
        rail=hold.rail,
        metadata=structure(resource.metadata or {}, ResourceMetadata),
        environment=resource.environment,
    )
    return Redemption(
        paid=False,
        rail=hold.rail,
        claim=hold.claim,
        verification=provisional,
        payer=hold.payer,
    )


async def settle(
    ctx: ServerContext, gate: Gate, terms: RailTerms, hold: Hold, request_id: str
) -> Redemption:
    """Settle a held credential whose answer succeeded; see :func:`..settle`."""
    async with facilitator_http(terms) as http:
        attempt = _Attempt(ctx, gate, terms, "", request_id or hold.request_id, http)
        return await _settle(attempt, hold)


async def _settle(attempt: _Attempt, hold: Hold) -> Redemption:
    if attempt.terms.sandbox:
        try:
            _, headers = await anyio.to_thread.run_sync(_settle_held_on_sandbox, attempt, hold)
        except _Gone:
            raise HoldNotFound(hold.claim) from None
        except chain.ChainError as refused:
            return await settlement_refused(attempt.ctx, attempt.request_id, hold, refused.message)
        except Exception as exc:  # rolled back: nothing moved, the hold is still there
            log.exception("settling held %s for %s failed", hold.rail, hold.resource_id)
            why = f"settlement failed ({exc})"
            return await settlement_refused(attempt.ctx, attempt.request_id, hold, why)
        payer = hold.payer
    else:
        done = await _settle_live(attempt, hold)
        if isinstance(done, Redemption):
            return done
        headers, payer = done
    verified = await anyio.to_thread.run_sync(
        verification, attempt.ctx, attempt.gate.resource.id, hold.receipt_id
    )
    return Redemption(
        paid=True,
        rail=hold.rail,
        receipt_id=hold.receipt_id,
        verification=verified,
        headers=headers,
        payer=payer,
    )


def _used_on_chain(ctx: ServerContext, terms: RailTerms, hold: Hold) -> str | None:
    """The facilitator refused to settle: did the authorization settle on chain all the
    same (someone else broadcast it first)?  The transaction, or ``None`` (also without a
    node to ask).  Raises :class:`ChainUnreachable` when the node does not answer: a
    facilitator whose node is down refuses for reasons that are not the payment's."""
    if not ctx.settings.live_rpc_url:
        return None
    reader = TokenReader(ctx.settings.live_rpc_url, terms.asset.address)
    outcome, tx_hash = chain_outcome(reader, hold, ctx.now())
    return tx_hash if outcome is Outcome.SETTLED else None


def book_unsettled(
    ctx: ServerContext, gate: Gate, terms: RailTerms, hold: Hold, tx_hash: str
) -> bool:
    """Book an unsettled hold the chain says ``tx_hash`` settled (blocking); false when
    somebody else decided it first.  Booking is keyed on the transaction, so booking
    twice books once."""
    attempt = _Attempt(ctx, gate, terms, "", hold.request_id)
    attempt.book(hold.rail, tx_hash, hold.payer, hold.receipt_id)
    headers = receipt_headers(hold, terms, tx_hash, hold.payer)
    with ctx.db.write() as conn:
        if not take_hold(conn, hold.claim, unsettled=True):
            return False
        record_settled(conn, hold, tx_hash, headers, ctx.now())
    return True


async def _settle_live(
    attempt: _Attempt, hold: Hold
) -> tuple[list[tuple[str, str]], str | None] | Redemption:
    """Settle through the facilitator and book it: the paid answer's headers and the
    payer; or the refusal (nothing moved, the claim released)."""
    ctx, terms = attempt.ctx, attempt.terms
    if not await anyio.to_thread.run_sync(_take, attempt, hold):
        raise HoldNotFound(hold.claim)
    facilitator = facilitator_of(attempt.intent)
    payment, requirements = attempt.intent._facilitator_payment(hold.payload, hold.request)
    try:
        settled = await facilitator.settle(payment, requirements)
    except FacilitatorError as exc:  # it may have broadcast: the chain decides
        await anyio.to_thread.run_sync(save_unsettled, ctx.db, hold, ctx.now())
        raise SettlementUnavailable(f"{exc}; its outcome is left to the chain") from exc
    tx_hash = settled["transaction"]
    payer = settled.get("payer") or hold.payer
    if not settled["success"]:
        if settled.get("errorReason") == "settlement_pending":
            await anyio.to_thread.run_sync(save_unsettled, ctx.db, hold, ctx.now())
            raise SettlementUnavailable("the facilitator's settlement is pending")
        # Refused: nothing moved, unless somebody broadcast the authorization first.
        try:
            used = await anyio.to_thread.run_sync(_used_on_chain, ctx, terms, hold)
        except ChainUnreachable as exc:  # nobody can say what happened: the chain decides
            await anyio.to_thread.run_sync(save_unsettled, ctx.db, hold, ctx.now())
            raise SettlementUnavailable(f"settling was refused and {exc}") from exc
        if used is None:
            why = settled.get("errorMessage") or settled.get("errorReason") or "settlement failed"
            ctx = attempt.ctx
            return await settlement_refused(ctx, attempt.request_id, hold, str(why), taken=True)
        tx_hash, payer = used, hold.payer
    try:
        await anyio.to_thread.run_sync(attempt.book, hold.rail, tx_hash, payer, hold.receipt_id)
        headers = await anyio.to_thread.run_sync(_mark_settled, attempt, hold, tx_hash, payer)
    except Exception as exc:
        log.critical(
            "%s payment %s settled on chain but could not be booked for %s: %r",
            hold.rail,
            tx_hash,
            hold.resource_id,
            exc,
        )
        raise SettlementUnavailable("the payment settled but could not be booked") from exc
    return headers, payer


class _Gone(Exception):
    """The hold was taken already (settled, released, expired)."""


def _take(attempt: _Attempt, hold: Hold) -> bool:
    with attempt.ctx.db.write() as conn:
        return take_hold(conn, hold.claim)


def _mark_settled(
    attempt: _Attempt, hold: Hold, tx_hash: str, payer: str | None
) -> list[tuple[str, str]]:
    headers = receipt_headers(hold, attempt.terms, tx_hash, payer)
    with attempt.ctx.db.write() as conn:
        record_settled(conn, hold, tx_hash, headers, attempt.ctx.now())
    return headers


def _settle_held_on_sandbox(attempt: _Attempt, hold: Hold) -> tuple[str, list[tuple[str, str]]]:
    """Take the hold, move the tokens and book them: one transaction, all or nothing."""
    ctx, gate = attempt.ctx, attempt.gate
    with writing(ctx.db, ctx.notify_new_events) as conn:
        if not take_hold(conn, hold.claim):
            raise _Gone()
        _, tx_hash = settle_on_sandbox(
            conn,
            resource=gate.resource,
            seller=gate.seller,
            terms=attempt.terms,
            rail=hold.rail,
            payload=hold.payload,
            fee_bps=ctx.settings.platform_fee_bps,
            request_id=attempt.request_id,
            now=ctx.now(),
            receipt_id=hold.receipt_id,
        )
        headers = receipt_headers(hold, attempt.terms, tx_hash, hold.payer)
        record_settled(conn, hold, tx_hash, headers, ctx.now())
    return tx_hash, headers


async def settlement_refused(
    ctx: ServerContext, request_id: str, hold: Hold, why: str, *, taken: bool = False
) -> Redemption:
    """Settling after a successful answer failed and nothing moved: release the claim."""
    message = f"the payment could not be settled: {why}"

    def release() -> bool:
        return release_hold(
            ctx.db,
            hold,
            settings=ctx.settings,
            reason="settlement_refused",
            message=message,
            status=None,
            request_id=request_id,
            now=ctx.now(),
            notify=ctx.notify_new_events,
            taken=taken,
        )

    await anyio.to_thread.run_sync(release)
    return Redemption(
        paid=False, rail=hold.rail, reason="receipt_refused", message=message, payer=hold.payer
    )


def receipt_headers(
    hold: Hold, terms: RailTerms, tx_hash: str, payer: str | None, amount: int | None = None
) -> list[tuple[str, str]]:
    """What pympp's ``PaymentVerified.with_receipt`` adds: ``Payment-Receipt``, and
    ``PAYMENT-RESPONSE`` for an x402 credential (with the ``amount`` settled, for
    ``upto``, as x402's settle response says it)."""
    receipt = Receipt(
        status="success",
        timestamp=datetime.now(UTC),
        reference=tx_hash,
        method="evm",
        payer=payer,
    )
    headers = [("Payment-Receipt", receipt.to_payment_receipt())]
    if hold.rail == "x402":
        response: dict[str, Any] = {
            "success": True,
            "transaction": tx_hash,
            "network": f"eip155:{terms.asset.chain_id}",
        }
        if payer:
            response["payer"] = payer
        if amount is not None:
            response["amount"] = str(amount)
        headers.append(("PAYMENT-RESPONSE", encode_payment_response(response)))  # type: ignore[arg-type]
    return headers
