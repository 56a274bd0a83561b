"""The x402 facilitator API over the sandbox chain: ``/verify``, ``/settle``, ``/supported``.

The wire shapes are the ones the official clients use — x402's
``HTTPFacilitatorClient`` (v2, and v1 for legacy ``base-sepolia`` payloads) and pympp's
``HttpFacilitator`` — so a resource server needs nothing but its facilitator URL:

    POST /verify   {"x402Version", "paymentPayload", "paymentRequirements"}
                   → {"isValid", "invalidReason"?, "invalidMessage"?, "payer"?}
    POST /settle   same request
                   → {"success", "errorReason"?, "errorMessage"?, "payer"?,
                      "transaction", "network", "amount"?}
    GET /supported → {"kinds": [...], "extensions": [], "signers": {"eip155:*": [...]}}

Both clients treat any status but 200 as a transport failure, so every answer about a
payment — including "this payload is malformed" — is a 200 with ``isValid``/``success``
false and a reason, as real facilitators answer.  Reasons are the x402 ``exact`` (and
``upto``) EVM codes of the official SDK (``invalid_exact_evm_nonce_already_used`` for a
replay, …) and the spec's generic ones (``invalid_payload``, ``invalid_network``,
``unsupported_scheme``, …).

Two schemes, on ``eip155:84532``: ``exact`` (EIP-3009, here) and ``upto`` (Permit2, the
payer signs a maximum and settle moves the actual amount: :mod:`.upto`); :func:`verify`
and :func:`settle` pass a body to the scheme its requirements name.

Verify checks without writing; settle runs ``transferWithAuthorization`` on the sandbox
chain in the caller's transaction.  Settling the same authorization again is refused with
``invalid_exact_evm_nonce_already_used`` (the message names the original transaction), as
the chain would refuse it, so a credential pays once.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import attrs
from sqlalchemy import Connection

from . import chain, upto
from .eip3009 import Authorization, InvalidSignature, MalformedAuthorization, recover_signer
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
    "FACILITATOR_ADDRESS",
    "PaymentRequest",
    "Refused",
    "parse_request",
    "recover_ahead",
    "settle",
    "supported",
    "verify",
]

#: Spec / SDK reason codes for what is wrong before the chain is asked.
NETWORK_MISMATCH = "network_mismatch"
RECIPIENT_MISMATCH = "invalid_exact_evm_payload_recipient_mismatch"
VALUE_MISMATCH = "invalid_exact_evm_payload_authorization_value_mismatch"
TOKEN_NAME_MISMATCH = "invalid_exact_evm_token_name_mismatch"  # noqa: S105 - an x402 error reason, not a secret
TOKEN_VERSION_MISMATCH = "invalid_exact_evm_token_version_mismatch"  # noqa: S105 - an x402 error reason, not a secret


@attrs.frozen(kw_only=True)
class PaymentRequest:
    """A verify/settle request reduced to what the sandbox checks."""

    version: int
    #: The network as the requirements name it (echoed in settle answers).
    network: str
    amount: int
    pay_to: str
    authorization: Authorization
    signature: object


def supported() -> dict[str, Any]:
    """``exact`` on Base Sepolia, in x402 v2 (CAIP-2 id) and v1 (legacy name) form, and
    ``upto`` (x402 v2 only), whose ``extra`` names the facilitator the payer's witness
    must name (x402's upto server copies it into the requirements)."""
    return {
        "kinds": [
            {"x402Version": 2, "scheme": "exact", "network": SANDBOX_TOKEN.network},
            {"x402Version": 1, "scheme": "exact", "network": SANDBOX_TOKEN.v1_network},
            {
                "x402Version": 2,
                "scheme": "upto",
                "network": SANDBOX_TOKEN.network,
                "extra": {"facilitatorAddress": FACILITATOR_ADDRESS},
            },
        ],
        "extensions": [],
        "signers": {"eip155:*": [FACILITATOR_ADDRESS]},
    }


#: The network names each x402 version may use: v1 clients name the chain
#: "base-sepolia"; accept the CAIP-2 id from them too.
_NETWORKS = {1: (SANDBOX_TOKEN.v1_network, SANDBOX_TOKEN.network), 2: (SANDBOX_TOKEN.network,)}


def parse_request(body: Mapping[str, Any]) -> PaymentRequest:
    """Check an ``exact`` verify/settle body (EIP-3009 on ``eip155:84532``); raises
    :class:`Refused` with the reason a facilitator would give, naming the payer the
    payload claims whenever it can be read."""
    try:
        return _parse(body)
    except Refused as refused:
        refused.payer = refused.payer or claimed_payer(body, "authorization")
        raise


def _parse(body: Mapping[str, Any]) -> PaymentRequest:
    version = body.get("x402Version")
    if type(version) is not int or version not in (1, 2):
        raise Refused(INVALID_VERSION, "x402Version must be 1 or 2")
    requirements = object_at(
        body.get("paymentRequirements"), INVALID_REQUIREMENTS, "paymentRequirements"
    )
    payment = object_at(body.get("paymentPayload"), INVALID_PAYLOAD, "paymentPayload")
    inner = object_at(payment.get("payload"), INVALID_PAYLOAD, "paymentPayload.payload")
    network = _agreed_network(version, requirements, payment)
    amount, pay_to = asset_amount_pay_to(requirements, version)
    _check_token_domain(requirements.get("extra"))
    return PaymentRequest(
        version=version,
        network=network,
        amount=amount,
        pay_to=pay_to,
        authorization=_matching_authorization(inner, pay_to, amount),
        signature=inner.get("signature"),
    )


def _agreed_network(
    version: int, requirements: Mapping[str, Any], payment: Mapping[str, Any]
) -> str:
    """The sandbox's network, once the requirements ask for ``exact`` on it and the
    payload says it accepted the same scheme and network."""
    scheme, network = requirements.get("scheme"), requirements.get("network")
    if scheme != "exact":
        raise Refused(
            UNSUPPORTED_SCHEME,
            f"the sandbox facilitator settles 'exact' and 'upto' (x402 v2), not {scheme!r}",
        )
    if not isinstance(network, str) or network not in _NETWORKS[version]:
        raise Refused(
            INVALID_NETWORK,
            f"the sandbox chain is {SANDBOX_TOKEN.network} ({SANDBOX_TOKEN.v1_network} in "
            f"x402 v1), not {network!r}",
        )
    # What the client says it accepted must be what the server asked for.
    if version == 2:
        accepted = object_at(payment.get("accepted"), INVALID_PAYLOAD, "paymentPayload.accepted")
        paid_scheme, paid_network = accepted.get("scheme"), accepted.get("network")
    else:
        paid_scheme, paid_network = payment.get("scheme"), payment.get("network")
    if paid_scheme != scheme:
        raise Refused(UNSUPPORTED_SCHEME, f"the payload is for scheme {paid_scheme!r}")
    if paid_network != network:
        raise Refused(
            NETWORK_MISMATCH, f"the payload is for network {paid_network!r}, not {network!r}"
        )
    return network


def _check_token_domain(extra: object) -> None:
    """The EIP-712 domain the requirements name, if any, is the sandbox token's."""
    if isinstance(extra, Mapping):
        if "name" in extra and extra["name"] != SANDBOX_TOKEN.name:
            raise Refused(
                TOKEN_NAME_MISMATCH,
                f"the token's EIP-712 name is {SANDBOX_TOKEN.name!r}, not {extra['name']!r}",
            )
        if "version" in extra and extra["version"] != SANDBOX_TOKEN.version:
            raise Refused(
                TOKEN_VERSION_MISMATCH,
                f"the token's EIP-712 version is {SANDBOX_TOKEN.version!r}, "
                f"not {extra['version']!r}",
            )


def _matching_authorization(inner: Mapping[str, Any], pay_to: str, amount: int) -> Authorization:
    """The payload's EIP-3009 authorization, paying exactly ``amount`` to ``pay_to``."""
    if "authorization" not in inner:
        raise Refused(
            INVALID_PAYLOAD,
            "the sandbox settles EIP-3009 authorizations only (payload.authorization + "
            "payload.signature); Permit2 and other transfer methods are not available",
        )
    try:
        authorization = Authorization.from_json(inner.get("authorization"))
    except MalformedAuthorization as exc:
        raise Refused(INVALID_PAYLOAD, str(exc)) from None
    payer = authorization.from_address
    if authorization.to.lower() != pay_to.lower():
        raise Refused(
            RECIPIENT_MISMATCH,
            f"the authorization pays {authorization.to}, not payTo {pay_to}",
            payer,
        )
    if authorization.value != amount:
        raise Refused(
            VALUE_MISMATCH,
            f"the authorization moves {authorization.value}, the requirements ask {amount}",
            payer,
        )
    return authorization


def _is_upto(body: Mapping[str, Any]) -> bool:
    requirements = body.get("paymentRequirements")
    return isinstance(requirements, Mapping) and requirements.get("scheme") == "upto"


def recover_ahead(body: Mapping[str, Any]) -> None:
    """Recover the payload's signer, if it can be read, before a transaction opens: the
    chain asks for the same recovery inside and finds it remembered.  Raises nothing
    (whatever is wrong is refused inside, with the reason a facilitator gives)."""
    if _is_upto(body):
        upto.recover_ahead(body)
        return
    try:
        request = parse_request(body)
        recover_signer(request.authorization, request.signature)
    except (Refused, InvalidSignature):
        pass


def verify(conn: Connection, body: Mapping[str, Any], *, now: datetime) -> dict[str, Any]:
    """x402 ``/verify``: would this payment settle now?  Moves nothing."""
    if _is_upto(body):
        return upto.verify(conn, body, now=now)
    try:
        request = parse_request(body)
        chain.check_transfer(conn, request.authorization, request.signature, now=now)
    except Refused as refused:
        return invalid(refused.reason, refused.message, refused.payer)
    except chain.ChainError as error:
        return invalid(error.reason, error.message, request.authorization.from_address)
    return {"isValid": True, "payer": request.authorization.from_address}


def settle(conn: Connection, body: Mapping[str, Any], *, now: datetime) -> dict[str, Any]:
    """x402 ``/settle``: run ``transferWithAuthorization`` (``exact``) or the upto proxy's
    settle (``upto``) on the sandbox chain."""
    if _is_upto(body):
        return upto.settle(conn, body, now=now)
    network = settle_network(body)
    try:
        request = parse_request(body)
        tx = chain.transfer_with_authorization(
            conn, request.authorization, request.signature, now=now
        )
    except Refused as refused:
        return failed(refused.reason, refused.message, refused.payer, network)
    except chain.ChainError as error:
        return failed(error.reason, error.message, request.authorization.from_address, network)
    return {
        "success": True,
        "payer": tx.from_address,
        "transaction": tx.hash,
        "network": request.network,
        "amount": str(tx.value),
    }
