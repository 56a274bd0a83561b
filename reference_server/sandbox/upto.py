"""The sandbox facilitator's ``upto`` scheme: the payer signs a maximum (Permit2,
:mod:`.permit2`), the resource server settles the actual amount after the answer.

The wire is x402 v2's, as the official ``upto`` client and server write it: the payload is
``{"permit2Authorization": {...}, "signature"}``; verify's ``paymentRequirements.amount``
is the maximum, which ``permitted.amount`` must equal; settle's is the actual amount, at
most the maximum.  Zero settles successfully with no transaction (nothing moves and the
authorization stays unspent, as on a real chain, where nothing is sent).

:func:`verify` and :func:`settle` answer the x402 wire; :func:`parse_request`, :func:`check`
and :func:`execute` are the same in typed form, for a caller settling in its own
transaction (the service's own gates, booking the sale in the same commit).

Verify's checks follow the official facilitator's cascade, with its reason codes: scheme,
network, spender (x402's upto proxy), recipient (``witness.to`` is ``payTo``), facilitator
(``witness.facilitator`` is :data:`~.x402_wire.FACILITATOR_ADDRESS`), deadline (at least
6 seconds away), ``validAfter``, amount, token; then the chain's
(:mod:`.permit2_chain`): nonce, signature, balance.  Every sandbox account counts as
having approved Permit2, so there is no allowance check.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import attrs
from sqlalchemy import Connection

from . import permit2, permit2_chain
from .chain import ChainError, Transaction
from .eip3009 import InvalidSignature
from .permit2 import MalformedPermit, PermitWitnessTransfer
from .token import SANDBOX_TOKEN
from .x402_wire import (
    FACILITATOR_ADDRESS,
    INVALID_NETWORK,
    INVALID_PAYLOAD,
    INVALID_REQUIREMENTS,
    INVALID_VERSION,
    UNSUPPORTED_SCHEME,
    Refused,
    asset_amount_pay_to,
    claimed_payer,
    failed,
    invalid,
    object_at,
    settle_network,
)

__all__ = [
    "UptoRequest",
    "check",
    "execute",
    "parse_request",
    "recover_ahead",
    "settle",
    "verify",
]

#: x402 ``upto`` EVM reason codes (as the official facilitator names them).
INVALID_SCHEME = "invalid_upto_evm_scheme"
NETWORK_MISMATCH = "invalid_upto_evm_network_mismatch"
UNSUPPORTED_PAYLOAD_TYPE = "unsupported_payload_type"
PAYLOAD_FORMAT = "invalid_permit2_payload_format"
RECIPIENT_MISMATCH = "invalid_permit2_recipient_mismatch"
FACILITATOR_MISMATCH = "upto_facilitator_mismatch"
AMOUNT_MISMATCH = "permit2_amount_mismatch"
SETTLEMENT_EXCEEDS_AMOUNT = "invalid_upto_evm_payload_settlement_exceeds_amount"
#: The official facilitator refuses a deadline closer than this (seconds).
DEADLINE_BUFFER = 6


@attrs.frozen(kw_only=True)
class UptoRequest:
    """An ``upto`` verify/settle request reduced to what the sandbox checks."""

    network: str
    #: ``paymentRequirements.amount``: the maximum (verify) or the actual amount (settle).
    amount: int
    pay_to: str
    permit: PermitWitnessTransfer
    signature: object


def parse_request(body: Mapping[str, Any]) -> UptoRequest:
    """Read an ``upto`` verify/settle body; raises :class:`~.x402_wire.Refused` with the
    reason a facilitator would give, naming the payer the payload claims if it can."""
    try:
        return _parse(body)
    except Refused as refused:
        refused.payer = refused.payer or claimed_payer(body, "permit2Authorization")
        raise


def _parse(body: Mapping[str, Any]) -> UptoRequest:
    version = body.get("x402Version")
    if version == 1:
        raise Refused(UNSUPPORTED_SCHEME, "'upto' exists in x402 v2 only")
    if type(version) is not int or version != 2:
        raise Refused(INVALID_VERSION, "x402Version must be 2 for 'upto'")
    requirements = object_at(
        body.get("paymentRequirements"), INVALID_REQUIREMENTS, "paymentRequirements"
    )
    payment = object_at(body.get("paymentPayload"), INVALID_PAYLOAD, "paymentPayload")
    accepted = object_at(payment.get("accepted"), INVALID_PAYLOAD, "paymentPayload.accepted")
    inner = object_at(payment.get("payload"), INVALID_PAYLOAD, "paymentPayload.payload")
    if accepted.get("scheme") != "upto":
        raise Refused(INVALID_SCHEME, f"the payload is for scheme {accepted.get('scheme')!r}")
    network = requirements.get("network")
    if accepted.get("network") != network:
        raise Refused(
            NETWORK_MISMATCH,
            f"the payload is for network {accepted.get('network')!r}, not {network!r}",
        )
    if network != SANDBOX_TOKEN.network:
        raise Refused(INVALID_NETWORK, f"the sandbox chain is {SANDBOX_TOKEN.network}")
    amount, pay_to = asset_amount_pay_to(requirements, 2)
    raw = inner.get("permit2Authorization")
    witness = raw.get("witness") if isinstance(raw, Mapping) else None
    if not isinstance(witness, Mapping) or "facilitator" not in witness:
        raise Refused(
            UNSUPPORTED_PAYLOAD_TYPE,
            "an 'upto' payload is a Permit2 authorization whose witness names the "
            "facilitator (payload.permit2Authorization + payload.signature)",
        )
    try:
        permit = PermitWitnessTransfer.from_json(raw)
    except MalformedPermit as exc:
        raise Refused(PAYLOAD_FORMAT, str(exc)) from None
    return UptoRequest(
        network=network,
        amount=amount,
        pay_to=pay_to,
        permit=permit,
        signature=inner.get("signature"),
    )


def _check_terms(request: UptoRequest, *, now: datetime, maximum: int | None) -> None:
    """The official facilitator's checks before the chain's, in its order; ``maximum``
    (verify's amount) must be the permitted amount (settle passes ``None``)."""
    permit, payer = request.permit, request.permit.from_address
    if permit.spender.lower() != permit2.UPTO_PROXY_ADDRESS.lower():
        raise Refused(
            permit2_chain.PERMIT2_INVALID_SPENDER,
            f"spender is {permit.spender}, not x402's upto proxy {permit2.UPTO_PROXY_ADDRESS}",
            payer,
        )
    if permit.to.lower() != request.pay_to.lower():
        raise Refused(
            RECIPIENT_MISMATCH, f"the witness pays {permit.to}, not payTo {request.pay_to}", payer
        )
    if permit.facilitator.lower() != FACILITATOR_ADDRESS.lower():
        raise Refused(
            FACILITATOR_MISMATCH,
            f"the witness names facilitator {permit.facilitator}, not this one "
            f"({FACILITATOR_ADDRESS}, in /supported's upto kind)",
            payer,
        )
    moment = int(now.timestamp())
    if permit.deadline < moment + DEADLINE_BUFFER:
        raise Refused(
            permit2_chain.PERMIT2_DEADLINE_EXPIRED,
            f"the deadline {permit.deadline} is less than {DEADLINE_BUFFER}s after now {moment}",
            payer,
        )
    if permit.valid_after > moment:
        raise Refused(
            permit2_chain.PERMIT2_NOT_YET_VALID,
            f"not yet valid: validAfter is {permit.valid_after}, now is {moment}",
            payer,
        )
    if maximum is not None and permit.amount != maximum:
        raise Refused(
            AMOUNT_MISMATCH,
            f"the permit allows {permit.amount}, the requirements' maximum is {maximum}",
            payer,
        )
    if not SANDBOX_TOKEN.is_token(permit.token):
        raise Refused(
            permit2_chain.PERMIT2_TOKEN_MISMATCH,
            f"the permit is for token {permit.token}, the requirements' asset is "
            f"{SANDBOX_TOKEN.address}",
            payer,
        )


def recover_ahead(body: Mapping[str, Any]) -> None:
    """Recover the signer before a transaction opens (remembered for the chain's check);
    raises nothing: whatever is wrong is refused inside, with its reason."""
    try:
        request = parse_request(body)
        permit2.recover_signer(request.permit, request.signature)
    except (Refused, InvalidSignature):
        pass


def check(conn: Connection, request: UptoRequest, *, now: datetime) -> None:
    """Would the maximum (``request.amount``, which the permit must equal) settle now?
    Raises :class:`~.x402_wire.Refused` or :class:`~.chain.ChainError` (both with the x402
    ``reason``); writes nothing."""
    _check_terms(request, now=now, maximum=request.amount)
    permit2_chain.check_permit_witness_transfer(
        conn,
        request.permit,
        request.signature,
        amount=request.amount,
        sender=FACILITATOR_ADDRESS,
        now=now,
    )


def execute(conn: Connection, request: UptoRequest, *, now: datetime) -> Transaction | None:
    """Settle the actual amount (``request.amount``, at most the permitted maximum) in the
    caller's transaction: its sandbox transaction, or ``None`` for zero (nothing moves, the
    authorization stays unspent).  Raises as :func:`check` does, having written nothing."""
    permit = request.permit
    _check_terms(request, now=now, maximum=None)
    if request.amount > permit.amount:
        raise Refused(
            SETTLEMENT_EXCEEDS_AMOUNT,
            f"settling {request.amount} exceeds the authorized maximum {permit.amount}",
            permit.from_address,
        )
    if request.amount == 0:
        # Nothing is sent; the chain's checks still hold (a spent or forged permit is
        # refused at zero as at any amount).
        permit2_chain.check_permit_witness_transfer(
            conn, permit, request.signature, amount=0, sender=FACILITATOR_ADDRESS, now=now
        )
        return None
    return permit2_chain.permit_witness_transfer_from(
        conn,
        permit,
        request.signature,
        amount=request.amount,
        sender=FACILITATOR_ADDRESS,
        now=now,
    )


def verify(conn: Connection, body: Mapping[str, Any], *, now: datetime) -> dict[str, Any]:
    """x402 ``/verify`` for ``upto``: would the maximum settle now?  Moves nothing."""
    try:
        request = parse_request(body)
        check(conn, request, now=now)
    except Refused as refused:
        return invalid(refused.reason, refused.message, refused.payer)
    except ChainError as error:
        return invalid(error.reason, error.message, request.permit.from_address)
    return {"isValid": True, "payer": request.permit.from_address}


def settle(conn: Connection, body: Mapping[str, Any], *, now: datetime) -> dict[str, Any]:
    """x402 ``/settle`` for ``upto``: move the requirements' amount (the actual one, at
    most the permitted maximum) on the sandbox chain; zero moves nothing and succeeds."""
    network = settle_network(body)
    try:
        request = parse_request(body)
        tx = execute(conn, request, now=now)
    except Refused as refused:
        return failed(refused.reason, refused.message, refused.payer, network)
    except ChainError as error:
        return failed(error.reason, error.message, request.permit.from_address, network)
    return {
        "success": True,
        "payer": request.permit.from_address,
        "transaction": "" if tx is None else tx.hash,
        "network": network,
        "amount": str(request.amount),
    }
