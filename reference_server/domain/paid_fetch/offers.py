"""From a 402 answer to a signed credential, with the official x402 and pympp clients.

The probe's answer may carry an x402 challenge (v2 ``PAYMENT-REQUIRED`` header, or a v1
JSON body with ``accepts``) and MPP challenges (``WWW-Authenticate: Payment …``).  Each is
read by its own SDK's parser and signed by its own SDK's client for the environment's hot
wallet; this module only decides *which* offers the environment can pay:

* x402: scheme ``exact`` with EIP-3009, or ``upto`` (metered: the payer signs a maximum,
  the URL settles what it used) with Permit2, on the token's network (v2 CAIP-2 id, or its
  v1 name), the token's address, and an EIP-712 name/version that, when stated, are the
  token's.  Among the payable ones x402's client takes the first the URL lists, whatever
  its scheme (:data:`RAIL_PREFERENCE` orders rails, not schemes): the URL's order is its
  preference, and the policy weighs an ``upto`` offer at its maximum anyway;
* MPP: method ``evm``, intent ``charge`` of the token on its chain (pympp's own
  ``can_handle_challenge``), with ``decimals`` 6 when stated;

and, for both, an amount from one micro-unit up to the API's largest amount.  A credential
is signed *before* any money is reserved: it stays in memory and is sent only after the
reservation that pays for it has committed (with its nonce claimed, so that two attempts
can never both count one on-chain transfer).  Signing first lets the reserved amount be the
one x402 actually selected and signed.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs

from svc.money import to_micros

from ...outbound import OutboundResponse
from ...recursion import keeping_recursion_limit
from ...sandbox.permit2 import MalformedPermit, PermitWitnessTransfer
from ..ledger import MAX_AMOUNT
from .hot_wallet import HotWallet

__all__ = ["RAIL_PREFERENCE", "SignedPayment", "sign_payment"]

log = logging.getLogger("reference_server")

#: Rails in order of preference when the URL offers several the policy allows.
RAIL_PREFERENCE = ("x402", "mpp")
_MAX_MICROS = to_micros(MAX_AMOUNT)


@attrs.frozen(kw_only=True)
class SignedPayment:
    """A credential for the paid request, signed by the hot wallet, not yet sent."""

    rail: str
    #: The request header that carries it (``PAYMENT-SIGNATURE``, ``X-PAYMENT``,
    #: ``Authorization``…) and its value.
    header: str
    value: str = attrs.field(repr=False)
    #: What the signed authorization moves, in micro-units, and to whom: for ``upto``
    #: the maximum (what the policy checks and the reservation holds), of which the URL
    #: settles what it used.
    amount: int
    pay_to: str
    network: str
    #: The authorizer (the hot wallet) and the authorization's nonce (Permit2's for
    #: ``upto``, as the sandbox chain stores it: 0x and 64 hex digits).
    payer: str
    nonce: str
    #: The authorization's ``validBefore`` (Permit2's ``deadline`` for ``upto``, unix
    #: seconds): past it, unused, it never settles.
    valid_before: int | None = None
    #: x402's scheme: ``exact`` (and every MPP charge) moves ``amount``; ``upto`` at most.
    scheme: str = "exact"

    @property
    def metered(self) -> bool:
        return self.scheme == "upto"


#: Signs for one rail: a credential, or ``None`` when the answer offers that rail unpayably.
_Signer = Callable[[HotWallet, OutboundResponse], Awaitable[SignedPayment | None]]


async def sign_payment(
    wallet: HotWallet, answer: OutboundResponse, rails: Sequence[str]
) -> SignedPayment | None:
    """A credential for the first rail in ``rails`` the answer offers payably, or ``None``."""
    signers: dict[str, _Signer] = {
        "x402": _sign_x402,
        "mpp": _sign_mpp,
    }
    for rail in rails:
        signed = await signers[rail](wallet, answer)
        if signed is not None:
            return signed
    return None


def _payable_amount(raw: object) -> int | None:
    if not isinstance(raw, str) or not raw.isascii() or not raw.isdigit() or len(raw) > 18:
        return None
    amount = int(raw)
    return amount if 0 < amount <= _MAX_MICROS else None


# --- x402 -----------------------------------------------------------------------------------


def _x402_payable(wallet: HotWallet, version: int, requirement: Any) -> bool:
    token = wallet.token
    extra = requirement.get_extra() or {}
    network = token.network if version == 2 else token.v1_network
    method = "permit2" if requirement.scheme == "upto" else "eip3009"
    return (
        requirement.scheme in ("exact", "upto")
        and (requirement.scheme == "exact" or version == 2)
        and bool(network)
        and requirement.network == network
        and token.is_token(requirement.asset)
        and extra.get("assetTransferMethod", method) == method
        and extra.get("name", token.name) == token.name
        and extra.get("version", token.version) == token.version
        and _payable_amount(requirement.get_amount()) is not None
    )


@functools.lru_cache(maxsize=8)
def _x402_clients(wallet: HotWallet) -> tuple[Any, Any]:
    """x402's client for the wallet, and its HTTP helper: built once per hot wallet (a
    handful per process), since registering the scheme and the policy is the same work for
    every payment.  Neither keeps per-payment state, so concurrent signers share them."""
    with keeping_recursion_limit():
        from x402 import x402Client
        from x402.http import x402HTTPClient
        from x402.mechanisms.evm.exact import register_exact_evm_client
        from x402.mechanisms.evm.signers import EthAccountSigner
        from x402.mechanisms.evm.upto import UptoEvmClientScheme

    client = x402Client()
    signer = EthAccountSigner(wallet.account)
    register_exact_evm_client(client, signer, networks=wallet.token.network)
    client.register(wallet.token.network, UptoEvmClientScheme(signer))
    client.register_policy(
        lambda version, reqs: [r for r in reqs if _x402_payable(wallet, version, r)]
    )
    # The wallet key's policy and the reservation are the spend controls; x402's own
    # default (a $1 cap per payment) would refuse prices the policy allows.
    client.set_spend_controls(False)
    return client, x402HTTPClient(client)


async def _sign_x402(wallet: HotWallet, answer: OutboundResponse) -> SignedPayment | None:
    with keeping_recursion_limit():
        from x402 import NoMatchingRequirementsError

    client, http = _x402_clients(wallet)
    try:
        required = http.get_payment_required_response(answer.headers.get, _json(answer.body))
    except Exception:  # no x402 challenge, or not one the SDK can read
        return None
    try:
        payload = await client.create_payment_payload(required)
    except NoMatchingRequirementsError:
        return None
    except Exception:
        log.warning("x402 could not sign an offer it selected", exc_info=True)
        return None
    authorization = payload.payload.get("authorization")
    if not isinstance(authorization, dict):
        authorization = _upto_authorization(payload.payload.get("permit2Authorization"))
    if authorization is None:
        return None  # neither EIP-3009 nor Permit2: the policy above makes this impossible
    [(header, value)] = http.encode_payment_signature_header(payload).items()
    return _signed("x402", header, value, authorization, _x402_network(payload))


def _upto_authorization(raw: object) -> dict[str, Any] | None:
    """An ``upto`` Permit2 authorization in EIP-3009's terms (its maximum as ``value``,
    ``witness.to`` as ``to``, its deadline as ``validBefore``), or ``None``."""
    try:
        permit = PermitWitnessTransfer.from_json(raw)
    except MalformedPermit:
        return None
    return {
        "value": permit.amount,
        "to": permit.to,
        "from": permit.from_address,
        "nonce": permit.nonce_key,
        "validBefore": permit.deadline,
        "scheme": "upto",
    }


def _x402_network(payload: Any) -> str:
    accepted = getattr(payload, "accepted", None)
    return str(accepted.network if accepted is not None else payload.network)


def _json(body: bytes) -> Any:
    """The body as JSON for x402 v1 (its challenge is the body), or ``None``."""
    try:
        return json.loads(body)
    except ValueError:
        return None


# --- MPP ------------------------------------------------------------------------------------


async def _sign_mpp(wallet: HotWallet, answer: OutboundResponse) -> SignedPayment | None:
    with keeping_recursion_limit():
        from mpp import Challenge, Credential, ParseError
        from mpp.methods.evm import client as evm_client
        from mpp.runtime import CredentialParams

    token = wallet.token
    method = evm_client.charge(
        currency=token.address,
        account=wallet.account,
        chain_id=token.chain_id,
        decimals=token.decimals,
        authorization={"name": token.name, "version": token.version},
        max_amount=str(MAX_AMOUNT),
    )
    for field in _payment_challenges(answer.headers.get_list("www-authenticate")):
        try:
            challenge = Challenge.from_www_authenticate(field)
        except ParseError:
            continue
        details = challenge.request.get("methodDetails")
        if (
            challenge.method != method.name
            or challenge.intent != method.intent
            or not isinstance(details, dict)
            or details.get("decimals", token.decimals) != token.decimals
            or _payable_amount(challenge.request.get("amount")) is None
            or method.can_handle_challenge is None
            or not method.can_handle_challenge(challenge)
        ):
            continue
        value = await method.create_credential(CredentialParams(challenge=challenge))
        payload = Credential.from_authorization(value).payload
        return _signed("mpp", challenge.credential_header, value, payload, token.network)
    return None


def _payment_challenges(values: list[str]) -> list[str]:
    """Each ``Payment`` challenge of the ``WWW-Authenticate`` fields, split as pympp's own
    client splits them (one field may hold several challenges)."""
    with keeping_recursion_limit():
        try:
            from mpp.client.transport import _payment_challenges as split
        except ImportError:  # pragma: no cover - a pympp without it: one challenge a field

            def split(value: str) -> list[str]:
                return [value]

    return [challenge for value in values for challenge in split(value)]


# --- both -----------------------------------------------------------------------------------


def _signed(
    rail: str, header: str, value: str, authorization: dict[str, Any], network: str
) -> SignedPayment | None:
    amount = _payable_amount(str(authorization.get("value")))
    if amount is None:
        return None
    return SignedPayment(
        rail=rail,
        header=header,
        value=value,
        amount=amount,
        pay_to=str(authorization["to"]),
        network=network,
        payer=str(authorization["from"]),
        nonce=str(authorization["nonce"]).lower(),
        valid_before=_int_or_none(authorization.get("validBefore")),
        scheme=str(authorization.get("scheme", "exact")),
    )


def _int_or_none(value: Any) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None
