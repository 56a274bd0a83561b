"""Open rails at the service's gates: x402 and MPP challenges, settlement, booking.

Once a seller has enabled payments (``PATCH /sellers/me/payments``), every gate of the
seller — its hosted ``gate_url`` and any ``svc_asgi`` gate in front of its own app —
answers an unpaid request with both an x402 ``PAYMENT-REQUIRED`` and an MPP
``WWW-Authenticate: Payment`` challenge, and settles a paid retry once it was served
successfully.  Both kinds of gate come here: hosted gates directly
(``reference_server.routes.gates.backend.DatabaseRails``), ``svc_asgi`` gates through
``POST /gates/challenge``, ``/gates/redeem``, ``/gates/settle`` and ``/gates/release``.

* :func:`challenge` — the challenge headers for one request (never cached: each carries a
  fresh nonce, and both protocols bind the request's method and URL);
* :func:`claim` — verify a credential and claim its nonce, moving nothing: a *hold*
  (:mod:`._holds`), then :func:`settle` once the answer succeeded (status below 400) or
  :func:`release` when it failed ("verify, serve, then settle": a payer is never charged
  for a failed answer); a hold never settled nor released expires (:func:`expire_holds`);
* :func:`service_challenge` and :func:`pay_service` — the same charge paying the service
  itself (an owner's top-up, :mod:`reference_server.domain.top_ups`): no gate, nothing to
  serve, settled as soon as it is verified (:mod:`._service`);
* settled, a payment is booked (receipt, ledger credit for ``processor_deposit``,
  ``payment.succeeded``); a refused credential or a released hold records
  ``payment.failed`` for the seller's owner.  A credential pays once, also when sent many
  times at once.
* :func:`resolve_unsettled` — a live settlement whose outcome the facilitator could not
  give (it timed out or failed) is decided by the chain (:mod:`._unsettled`).

The protocol work is pympp's (``mpp.methods.evm``), imported on first use, in a worker
thread, through :func:`_engine` (see there why), so a server without the ``rails`` extra
still runs: its gates just offer no open rail.  Modules: :mod:`._terms` (what a gate offers),
:mod:`._pympp` (the pympp server), :mod:`._upto` (x402 ``upto``, metered resources),
:mod:`._claims` (its replay store in the database),
:mod:`._holds` (claimed credentials waiting for their answer),
:mod:`._credit` (the books), :mod:`._model` (the values passed around).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from types import ModuleType
from typing import Any, TypeVar

import anyio.to_thread
import attrs
from sqlalchemy import Connection, select

from svc.receipts import rail_credentials
from svc_asgi import RailRequest

from ... import receipt_tokens
from ...context import ServerContext
from ...onchain import ChainUnreachable, TokenReader
from ...recursion import keeping_recursion_limit
from ...store import tables as t
from ..payments import verify_receipt
from ._claims import purge_claims
from ._holds import (
    HOLD_TTL,
    Hold,
    expire_holds,
    hold_of_receipt,
    load_hold,
    load_settled,
    release_hold,
    unsettled_holds,
)
from ._model import (
    FixedPrice,
    Gate,
    HoldNotFound,
    Redemption,
    Settled,
    SettlementUnavailable,
)
from ._terms import (
    DIRECT_WALLET,
    PROCESSOR_DEPOSIT,
    TEST_DEPOSIT_ADDRESS,
    RailTerms,
    deposit_terms,
    sold_on,
    terms_for,
)

__all__ = [
    "DIRECT_WALLET",
    "HOLD_TTL",
    "PROCESSOR_DEPOSIT",
    "TEST_DEPOSIT_ADDRESS",
    "FixedPrice",
    "Gate",
    "HoldNotFound",
    "RailTerms",
    "Redemption",
    "Settled",
    "SettlementUnavailable",
    "challenge",
    "claim",
    "deposit_terms",
    "expire_holds",
    "hold_of_receipt",
    "load_gate",
    "offered",
    "pay_service",
    "purge_claims",
    "release",
    "resolve_unsettled",
    "service_challenge",
    "service_terms",
    "settle",
    "sold_on",
]

log = logging.getLogger("reference_server.open_rails")

_HEADER_PROTOCOL = {"payment-signature": "x402", "authorization": "mpp"}


@functools.cache
def _installed() -> bool:
    """Is pympp there (the ``rails`` extra)?  Asked without importing it."""
    found = importlib.util.find_spec("mpp") is not None
    if not found:
        log.warning("open rails are off: pympp is not installed (the rails extra)")
    return found


T = TypeVar("T")


@functools.cache
def _engine(module: str = "_pympp") -> ModuleType:
    """The pympp-backed engine (:mod:`._pympp`), imported once.  Blocking: the first
    import takes a while, so callers on the event loop ask for it in a worker thread.

    pympp imports eth-account, whose import raises the process-wide recursion limit:
    it is put back (:mod:`reference_server.recursion` says why).
    """
    with keeping_recursion_limit():
        return importlib.import_module(f"{__name__}.{module}")


def load_gate(
    conn: Connection, resource_id: str, *, realm: str, seller_id: str | None = None
) -> Gate | None:
    """The resource (the seller's own, when ``seller_id`` is given) and its seller."""
    r, s = t.resources, t.sellers
    query = select(r).where(r.c.id == resource_id)
    if seller_id is not None:
        query = query.where(r.c.seller_id == seller_id)
    resource = conn.execute(query).first()
    if resource is None:
        return None
    seller = conn.execute(select(s).where(s.c.id == resource.seller_id)).one()
    return Gate(resource=resource, seller=seller, realm=realm)


def offered(ctx: ServerContext, seller: Any) -> RailTerms | None:
    """What the seller's gates offer on the open rails, or ``None`` when nothing."""
    terms = terms_for(ctx.settings, seller)
    if terms is None or not _installed():
        return None
    return terms


async def challenge(ctx: ServerContext, gate: Gate, request: RailRequest) -> list[tuple[str, str]]:
    """The 402's open-rail challenge headers for ``request``; empty when the gate offers
    no open rail (payments not enabled, or ``live`` without a facilitator)."""
    terms = offered(ctx, gate.seller)
    if terms is None or not gate.resource.active:
        return []
    engine, secret = await _prepared(ctx, terms, _module_for(gate))
    headers: list[tuple[str, str]] = await engine.challenge(ctx, gate, terms, secret, request)
    return headers


def _module_for(gate: Gate) -> str:
    """The engine a gate's challenge comes from: a metered resource's is ``upto``'s
    (:mod:`._upto`, with pympp's at the fallback price, if any), a fixed one's pympp's."""
    return "_upto" if gate.resource.pricing == "metered" else "_pympp"


def _accepted(
    ctx: ServerContext, gate: Gate, headers: Mapping[str, str]
) -> tuple[RailTerms, dict[str, str]] | Redemption:
    """The gate's terms and the credentials it takes among ``headers``, or a refusal."""
    credentials = rail_credentials(headers)
    if not credentials:
        raise ValueError("no PAYMENT-SIGNATURE or 'Authorization: Payment' credential")
    rail = "mpp" if "authorization" in credentials else "x402"
    terms = offered(ctx, gate.seller)
    if terms is None:
        return Redemption(
            paid=False,
            rail=rail,
            reason="receipt_refused",
            message="this gate takes no open-rail payment (the seller has not enabled them)",
        )
    credentials = {
        name: value
        for name, value in credentials.items()
        if _HEADER_PROTOCOL[name] in terms.protocols
    }
    if not credentials:
        return Redemption(
            paid=False,
            rail=rail,
            reason="receipt_refused",
            message=f"this gate does not take {rail} payments",
        )
    return terms, credentials


async def claim(
    ctx: ServerContext,
    gate: Gate,
    request: RailRequest,
    headers: Mapping[str, str],
    *,
    request_id: str,
) -> Redemption:
    """Verify the open-rail credential among ``headers`` and claim its nonce (a
    concurrent replay of it is refused), moving nothing.

    Verified: a :class:`Redemption` with ``claim`` (the hold's id) and the provisional
    ``verification`` (the receipt id the payment will settle into); the caller serves the
    request, then :func:`settle` or :func:`release`.  Refused, and raises, as
    :func:`redeem` does.
    """
    accepted = _accepted(ctx, gate, headers)
    if isinstance(accepted, Redemption):
        return accepted
    terms, credentials = accepted
    if gate.resource.pricing == "metered":
        upto, secret = await _prepared(ctx, terms, "_upto")
        if upto.is_upto(credentials):
            metered: Redemption = await upto.claim(
                ctx, gate, terms, secret, request, credentials["payment-signature"], request_id
            )
            return metered
        if gate.resource.fallback_amount_micros is None:
            return Redemption(
                paid=False,
                rail="mpp" if "authorization" in credentials else "x402",
                reason="receipt_refused",
                message="this resource is metered: it is paid with x402's upto scheme only",
                headers=await upto.challenge(ctx, gate, terms, secret, request),
            )
    engine, secret = await _prepared(ctx, terms)
    redemption: Redemption = await engine.claim(
        ctx, gate, terms, secret, request, credentials, request_id
    )
    return redemption


async def _hold_of(ctx: ServerContext, claim_id: str, seller_id: str | None) -> Hold:
    hold = await anyio.to_thread.run_sync(load_hold, ctx.db, claim_id)
    if hold is None or (seller_id is not None and hold.seller_id != seller_id):
        raise HoldNotFound(claim_id)
    return hold


async def settle(
    ctx: ServerContext,
    claim_id: str,
    *,
    seller_id: str | None = None,
    request_id: str,
    units: int | None = None,
) -> Redemption:
    """Settle the hold ``claim_id`` (the answer succeeded): paid, with the receipt and the
    paid answer's headers; or refused (the chain or the facilitator would not move the
    tokens; the claim is released and ``payment.failed`` recorded), when the answer must
    be withheld and a 402 returned.  Raises :class:`HoldNotFound`,
    :class:`SettlementUnavailable`, and :class:`FixedPrice` for ``units`` at a fixed price.

    ``units`` is what the answer used of a metered resource paid with x402 ``upto``: it
    settles ``metered_amount(units, unit_price, max_amount)``; ``None`` settles the
    maximum (as a card captured without an amount); ``0`` releases the hold with nothing
    moved and no ``payment.failed`` (nothing failed): ``paid=False, reason="released"``.
    A metered resource paid at its ``fallback_amount`` (exact, MPP) settles that price
    whatever the units."""
    try:
        settled = await _settle(ctx, claim_id, seller_id, request_id, units)
    except HoldNotFound:  # settled before (a retry after a lost answer), or concurrently
        again = await _settled_already(ctx, claim_id, seller_id)
        if again is None:
            raise
        settled = again
    return await _with_token(ctx, settled)


async def _with_token(ctx: ServerContext, redemption: Redemption) -> Redemption:
    """A paid redemption's headers with ``X-Svc-Receipt-Token``: the receipt signed, for
    the payer to show any gate of the seller's later with no round trip."""
    verification = redemption.verification
    if not redemption.paid or verification is None or not verification.receipt_id:
        return redemption

    def sign() -> str | None:
        with ctx.db.read() as conn:
            return receipt_tokens.token_for(ctx, conn, verification.receipt_id, ctx.now())

    token = await anyio.to_thread.run_sync(sign)
    if token is None:
        return redemption
    headers = [*redemption.headers, (receipt_tokens.HEADER, token)]
    return attrs.evolve(redemption, headers=headers)


async def _settle(
    ctx: ServerContext, claim_id: str, seller_id: str | None, request_id: str, units: int | None
) -> Redemption:
    hold = await _hold_of(ctx, claim_id, seller_id)

    def load() -> Gate | None:
        with ctx.db.read() as conn:
            return load_gate(conn, hold.resource_id, realm="")

    gate = await anyio.to_thread.run_sync(load)
    terms = None if gate is None else terms_for(ctx.settings, gate.seller)
    if gate is None or terms is None or not _installed():
        await release(
            ctx,
            claim_id,
            seller_id=seller_id,
            reason="settlement_refused",
            message="the seller no longer takes open-rail payments",
            status=None,
            request_id=request_id,
        )
        return Redemption(
            paid=False,
            rail=hold.rail,
            reason="receipt_refused",
            message="this gate no longer takes open-rail payments",
        )
    if units is not None and gate.resource.pricing != "metered":
        raise FixedPrice(claim_id)
    if hold.scheme == "upto":
        upto, _ = await _prepared(ctx, terms, "_upto")
        metered: Redemption = await upto.settle(ctx, gate, terms, hold, request_id, units)
        return metered
    engine, _ = await _prepared(ctx, terms)
    redemption: Redemption = await engine.settle(ctx, gate, terms, hold, request_id)
    return redemption


async def _settled_already(
    ctx: ServerContext, claim_id: str, seller_id: str | None
) -> Redemption | None:
    """Settling a claim settled before (a retry after a lost answer): the same payment."""

    def load() -> Redemption | None:
        done = load_settled(ctx.db, claim_id)
        if done is None or (seller_id is not None and done["seller_id"] != seller_id):
            return None
        with ctx.db.read() as conn:
            verification = verify_receipt(
                conn, done["receipt_id"], resource_id=done["resource_id"], seller_id=None
            )
        return Redemption(
            paid=True,
            rail=done["rail"],
            receipt_id=done["receipt_id"],
            verification=verification,
            headers=[(name, value) for name, value in done["headers"]],
        )

    return await anyio.to_thread.run_sync(load)


async def release(
    ctx: ServerContext,
    claim_id: str,
    *,
    seller_id: str | None = None,
    reason: str,
    message: str,
    status: int | None,
    request_id: str,
) -> None:
    """Release the hold ``claim_id`` (the answer failed): nothing moves, the payer's
    authorization may be presented again, ``payment.failed`` says why.  Raises
    :class:`HoldNotFound`."""
    hold = await _hold_of(ctx, claim_id, seller_id)

    def run() -> bool:
        return release_hold(
            ctx.db,
            hold,
            settings=ctx.settings,
            reason=reason,
            message=message,
            status=status,
            request_id=request_id,
            now=ctx.now(),
            notify=ctx.notify_new_events,
        )

    if not await anyio.to_thread.run_sync(run):
        raise HoldNotFound(claim_id)


async def _prepared(
    ctx: ServerContext, terms: RailTerms, module: str = "_pympp"
) -> tuple[Any, str]:
    """The engine and the key MPP challenge ids are HMACs with: one key per environment,
    kept in the database, so that any server process redeems what another one issued."""

    def prepare() -> tuple[Any, str]:
        return _engine(module), ctx.secret(f"mpp_challenge_key_{terms.environment}")

    return await anyio.to_thread.run_sync(prepare)


def resolve_unsettled(ctx: ServerContext, now: datetime | None = None) -> int:
    """Decide every unsettled live hold the chain can decide ``now`` (blocking): book what
    it settled, release what can never settle; the rest waits.  Returns how many were
    decided.  Without ``live_rpc_url`` nothing can be: they wait for an operator."""
    now = now or ctx.now()
    rpc_url = ctx.settings.live_rpc_url
    if not rpc_url:
        return 0
    from ._unsettled import Outcome, chain_outcome

    decided = 0
    for hold in unsettled_holds(ctx.db):
        with ctx.db.read() as conn:
            gate = load_gate(conn, hold.resource_id, realm="")
        terms = None if gate is None else terms_for(ctx.settings, gate.seller)
        if gate is None or terms is None:
            continue  # nothing to book it for: an operator's question
        try:
            outcome, tx_hash = chain_outcome(TokenReader(rpc_url, terms.asset.address), hold, now)
        except ChainUnreachable:
            log.warning("the live chain did not answer; unsettled holds wait")
            return decided
        if outcome is Outcome.SETTLED and tx_hash is not None:
            decided += _engine().book_unsettled(ctx, gate, terms, hold, tx_hash)
        elif outcome is Outcome.NEVER:
            decided += release_hold(
                ctx.db,
                hold,
                settings=ctx.settings,
                reason="settlement_refused",
                message="the facilitator could not say whether the payment settled; the "
                "chain shows it never did and never can (its authorization expired unused)",
                status=None,
                request_id=hold.request_id,
                now=now,
                notify=ctx.notify_new_events,
                unsettled=True,
            )
    return decided


def service_terms(ctx: ServerContext, environment: str) -> RailTerms | None:
    """What a payment to the service offers in ``environment`` (``None``: nothing, live
    without a facilitator or a deposit address, or no pympp)."""
    terms = deposit_terms(ctx.settings, environment)
    if terms is None or not _installed():
        return None
    return terms


async def service_challenge(
    ctx: ServerContext,
    terms: RailTerms,
    request: RailRequest,
    *,
    realm: str,
    amount_micros: int,
    binding: dict[str, str],
) -> list[tuple[str, str]]:
    """The challenge headers for paying ``amount_micros`` to the service."""
    engine, secret = await _prepared(ctx, terms, "_service")
    headers: list[tuple[str, str]] = await engine.challenge(
        ctx, terms, secret, request, realm=realm, amount_micros=amount_micros, binding=binding
    )
    return headers


async def pay_service(
    ctx: ServerContext,
    terms: RailTerms,
    request: RailRequest,
    headers: Mapping[str, str],
    *,
    realm: str,
    amount_micros: int,
    binding: dict[str, str],
    request_id: str,
    book: Callable[[Connection, Settled], T],
) -> T | Redemption:
    """Verify and settle the credential among ``headers`` paying the service; ``book``
    runs in the transaction that records it (``test``: the one that moves the tokens).
    A refusal is a :class:`Redemption`; raises :class:`SettlementUnavailable` when the
    outcome is not known, and ``ValueError`` when ``headers`` hold no credential."""
    credentials = rail_credentials(headers)
    if not credentials:
        raise ValueError("no PAYMENT-SIGNATURE or 'Authorization: Payment' credential")
    engine, secret = await _prepared(ctx, terms, "_service")
    result: T | Redemption = await engine.pay(
        ctx,
        terms,
        secret,
        request,
        credentials,
        request_id=request_id,
        book=book,
        realm=realm,
        amount_micros=amount_micros,
        binding=binding,
    )
    return result
