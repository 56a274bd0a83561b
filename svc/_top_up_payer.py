"""Signing a top-up's x402 challenge with the owner's own key, for ``top_ups.create``.

The service answers ``POST /owners/me/top-ups`` with 402 and an x402 ``PAYMENT-REQUIRED``
for the amount; the official x402 client (the ``rails`` extra) signs an EIP-3009
authorization for it.  Local work only (no I/O), so both clients call it as is.  The SDK
signs only what it was asked to pay: every offer must be for exactly the amount asked,
else nothing is signed.
"""

from __future__ import annotations

from typing import Any

from ._errors import ConfigurationError, PaymentRequiredError

__all__ = ["payment_headers"]


def payment_headers(
    refusal: PaymentRequiredError, payer: Any, amount_micros: int
) -> dict[str, str]:
    """The ``PAYMENT-SIGNATURE`` header paying ``refusal``'s challenge from ``payer`` (an
    eth-account ``LocalAccount`` or a ``0x…`` private key)."""
    try:
        from eth_account import Account
        from x402 import x402ClientSync
        from x402.http import x402HTTPClientSync
        from x402.mechanisms.evm.exact import register_exact_evm_client
        from x402.mechanisms.evm.signers import EthAccountSigner
    except ImportError as exc:  # pragma: no cover - the rails extra is missing
        raise ConfigurationError(
            "paying a top-up needs the official x402 client: pip install 'svc-payments[rails]'"
        ) from exc
    account = Account.from_key(payer) if isinstance(payer, str | bytes) else payer
    client = x402ClientSync()
    register_exact_evm_client(client, EthAccountSigner(account))
    http = x402HTTPClientSync(client)
    headers = {name.lower(): value for name, value in refusal.headers.items()}
    if "payment-required" not in headers:
        raise refusal  # a refusal that is not a challenge (a spent credential...)
    required = http.get_payment_required_response(lambda name: headers.get(name.lower()))
    offers = list(getattr(required, "accepts", []) or [])
    if not offers or any(int(offer.amount) != amount_micros for offer in offers):
        raise ConfigurationError(
            f"the service asked for another amount than the {amount_micros} micro-units "
            "requested; nothing was signed"
        )
    # The amount is checked above: the cap of x402's spend controls is the caller's ask,
    # and the environment's token (the devchain's, a testnet's) need not be a built-in one.
    client.set_spend_controls(False)
    return http.encode_payment_signature_header(client.create_payment_payload(required))
