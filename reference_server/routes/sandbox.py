"""The sandbox chain's routes: a faucet, balances, transactions and an x402 facilitator
(docs/sandbox.md), for ``test`` only.

They take no credential (a real facilitator or faucet takes none, and stock x402 clients
send none) but pass the same pipeline as every route.  Because stock clients send no
``X-Svc-Environment`` either, a request without the header is a ``test`` request here
(elsewhere an anonymous request is ``live``); ``live`` is refused with
``sandbox_test_only``: live has no faucet and settles on a real chain.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import anyio.to_thread
from eth_utils.address import to_checksum_address

from svc.bodies import SandboxFaucet
from svc.money import format_micros, to_micros

from ..sandbox import chain, facilitator
from ..sandbox.answers import (
    FacilitatorSettlement,
    FacilitatorSupport,
    FacilitatorVerdict,
    SandboxBalance,
    SandboxMint,
    SandboxTransaction,
)
from ..sandbox.token import SANDBOX_TOKEN
from ..store.database import in_transaction
from ..web.auth import requested_environment
from ..web.endpoint import FOREIGN_JSON, Call, Contract, Endpoint, Flow
from ..web.errors import ApiError, invalid
from ..web.responses import Reply
from ..web.validate import EVM_ADDRESS, Fields, checksum_ok

__all__ = ["ENDPOINTS"]

_TX_HASH = re.compile(r"^0x[0-9a-fA-F]{64}$")


def _test_only(call: Call) -> None:
    if requested_environment(call.headers) == "live":
        raise ApiError(
            "sandbox_test_only",
            "The sandbox (faucet, balances, the x402 facilitator at /sandbox/x402) exists "
            "only in the test environment; live payments settle on a real chain through the "
            "configured facilitator. Send X-Svc-Environment: test, or no such header.",
        )


def _address_problem(address: str) -> str | None:
    """Mixed case is an EIP-55 checksum: a wrong one is a typo, refused rather than minted
    to (all-lowercase or all-uppercase carry no checksum and are taken as they are)."""
    if not EVM_ADDRESS.fullmatch(address):
        return "must be a 0x-prefixed 20-byte EVM address"
    if not checksum_ok(address):
        return "has a mixed-case EIP-55 checksum that does not match (a typo?)"
    return None


def _token() -> dict[str, object]:
    return {
        "network": SANDBOX_TOKEN.network,
        "asset": SANDBOX_TOKEN.address,
        "symbol": SANDBOX_TOKEN.symbol,
        "decimals": SANDBOX_TOKEN.decimals,
    }


def faucet(call: Call) -> Reply:
    """Mint sandbox USDC to any EVM address (test only), so any x402 or MPP client can pay."""
    _test_only(call)
    b = call.input(SandboxFaucet)
    address, amount = b.address, b.amount
    f = Fields.rules(call.body)
    if problem := _address_problem(address):  # the EIP-55 checksum: no pattern says it
        f.error("address", problem)
    cap = call.ctx.settings.sandbox_faucet_max_micros
    if to_micros(amount) > cap:
        f.error("amount", f"must be at most {format_micros(cap)} per call")
    f.done()
    # The token has 6 decimals, like the service's micro-units: one atomic unit = 1 micro.
    tx = chain.mint(call.conn, to=address, value=to_micros(amount), now=call.now)
    balance = chain.balance_of(call.conn, address)
    return Reply(
        {
            "address": tx.to,
            "amount": format_micros(tx.value),
            "balance": format_micros(balance),
            "balance_atomic": str(balance),
            "transaction": tx.hash,
            "block_number": tx.block_number,
            **_token(),
        }
    )


def balance(call: Call) -> Reply:
    """An address's sandbox USDC balance (test only)."""
    _test_only(call)
    address = call.params["address"]
    problem = _address_problem(address)
    if problem:
        raise invalid([{"field": "address", "message": problem}])
    atomic = chain.balance_of(call.conn, address)
    return Reply(
        {
            "address": str(to_checksum_address(address)),
            "balance": format_micros(atomic),
            "balance_atomic": str(atomic),
            **_token(),
        }
    )


def transaction(call: Call) -> Reply:
    """One sandbox transaction by hash: a faucet mint or a settled authorization."""
    _test_only(call)
    tx_hash = call.params["tx_hash"]
    tx = chain.transaction(call.conn, tx_hash) if _TX_HASH.fullmatch(tx_hash) else None
    if tx is None:
        raise ApiError("not_found", f"No sandbox transaction {tx_hash[:80]}.")
    return Reply(tx.to_json())


def x402_supported(call: Call) -> Reply:
    """x402 facilitator: the kinds it settles on eip155:84532 (exact, v2 and v1; upto, v2)."""
    _test_only(call)
    return Reply(facilitator.supported())


async def x402_verify(call: Call) -> Reply:
    """x402 facilitator: would this payment settle on the sandbox chain now?  Moves nothing."""
    return await _transaction(call, write=False, work=facilitator.verify)


async def x402_settle(call: Call) -> Reply:
    """x402 facilitator: settle a payment on the sandbox chain (exact, or upto's actual amount)."""
    return await _transaction(call, write=True, work=facilitator.settle)


# verify and settle are async handlers for one reason: the signature's ECDSA recovery
# (milliseconds of pure-Python CPU) runs before their transaction opens, not inside it.
# Inside, it held SQLite's one write lock (and, settling, the payer's balance row) for
# that long on every payment.  The chain still checks the signature in the transaction;
# the recovery it asks for is then remembered (``facilitator.recover_ahead``).


async def _transaction(call: Call, *, write: bool, work: Callable[..., dict[str, Any]]) -> Reply:
    """``work``'s answer, run in one short transaction in a worker thread, as the pipeline
    runs a sync route's (a deadlock or serialization failure runs it again); the signature
    is recovered first in the same thread, before the transaction opens (one hop, not two:
    each costs the event loop a queue hand-off and a wake-up)."""
    _test_only(call)

    def run() -> dict[str, Any]:
        facilitator.recover_ahead(call.body)
        return in_transaction(call.ctx, write, lambda conn: work(conn, call.body, now=call.now))

    return Reply(await anyio.to_thread.run_sync(run))


_TEST_ONLY = ("sandbox_test_only",)

# The answers are the sandbox's and the x402 facilitator protocol's own JSON, not svc
# models (their shapes: ``sandbox.answers``).  The facilitator's bodies are x402's (read by
# ``facilitator.parse_request``, which answers 200 with a reason even for a malformed one,
# as x402 clients expect): a foreign body, passed as sent.
ENDPOINTS = [
    Endpoint(
        method="POST",
        path="/sandbox/faucet",
        handler=faucet,
        idempotency="optional",
        body=SandboxFaucet,
        contract=Contract(response=SandboxMint, errors=_TEST_ONLY),
    ),
    Endpoint(
        method="GET",
        path="/sandbox/balances/{address}",
        handler=balance,
        contract=Contract(response=SandboxBalance, errors=(*_TEST_ONLY, "validation_error")),
    ),
    Endpoint(
        method="GET",
        path="/sandbox/transactions/{tx_hash}",
        handler=transaction,
        contract=Contract(response=SandboxTransaction, errors=_TEST_ONLY),
    ),
    Endpoint(
        method="GET",
        path="/sandbox/x402/supported",
        handler=x402_supported,
        contract=Contract(response=FacilitatorSupport, errors=_TEST_ONLY),
    ),
    Endpoint(
        method="POST",
        path="/sandbox/x402/verify",
        handler=x402_verify,
        run=Flow(),
        body=FOREIGN_JSON,
        contract=Contract(response=FacilitatorVerdict, errors=_TEST_ONLY),
    ),
    Endpoint(
        method="POST",
        path="/sandbox/x402/settle",
        handler=x402_settle,
        run=Flow(),
        body=FOREIGN_JSON,
        contract=Contract(response=FacilitatorSettlement, errors=_TEST_ONLY),
    ),
]
