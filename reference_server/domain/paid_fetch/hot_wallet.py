"""What an environment pays ``pay-url`` challenges with: one token and one hot wallet.

* ``test``: the sandbox token (Base Sepolia USDC's identity) and a hot wallet whose key the
  service generates once and keeps sealed in the database (``ServerContext.test_hot_wallet_key``),
  so every server process signs as the same address.  The wallet holds no float of its
  own: each payment mints it exactly the reserved amount on the sandbox chain, in the
  transaction that reserves the money in the ledger.
* ``live``: the configured chain and asset, paid from ``live_hot_wallet_key``.  Without that
  key a live ``pay-url`` is refused: nothing in ``test`` can stand in for it.

Only tokens with 6 decimals are paid, so one atomic unit is one micro-dollar of the ledger.
"""

from __future__ import annotations

import weakref
from typing import Any

import attrs

from ...context import ServerContext
from ...recursion import keeping_recursion_limit
from ...sandbox.token import SANDBOX_TOKEN, TokenIdentity
from ..errors import DomainError

__all__ = ["HotWallet", "hot_wallet"]

_cache: weakref.WeakKeyDictionary[ServerContext, dict[str, HotWallet]] = weakref.WeakKeyDictionary()


@attrs.frozen(kw_only=True)
class HotWallet:
    """The signer and the one token it pays in, for one environment."""

    environment: str
    token: TokenIdentity
    #: An eth-account ``LocalAccount``.
    account: Any = attrs.field(repr=False)

    @property
    def address(self) -> str:
        return str(self.account.address)

    @property
    def sandbox(self) -> bool:
        """Test payments settle on the sandbox chain, which ``pay-url`` can read and write."""
        return self.environment == "test"


def hot_wallet(ctx: ServerContext, environment: str) -> HotWallet:
    """The environment's hot wallet.  It reads no database once the server's secrets are
    loaded (``ServerContext.load_secrets``, before a request's transaction opens), so a
    transaction may ask for it."""
    known = _cache.setdefault(ctx, {})
    if environment not in known:
        known[environment] = _test(ctx) if environment == "test" else _live(ctx)
    return known[environment]


def _account_class() -> Any:
    with keeping_recursion_limit():
        from eth_account import Account
    return Account


def _test(ctx: ServerContext) -> HotWallet:
    account = _account_class().from_key(ctx.test_hot_wallet_key)
    return HotWallet(environment="test", token=SANDBOX_TOKEN, account=account)


def _live(ctx: ServerContext) -> HotWallet:
    settings = ctx.settings
    if not settings.live_hot_wallet_key:
        raise DomainError(
            "rails_not_configured",
            "Live pay-url needs a hot wallet (SVC_LIVE_HOT_WALLET_KEY) with the live chain "
            "and asset settings; this server has none. Test keys pay on the sandbox chain.",
        )
    with keeping_recursion_limit():
        from eth_utils.address import to_checksum_address
        from x402.mechanisms.evm.v1.constants import V1_NETWORK_CHAIN_IDS
    v1_names = [
        name for name, chain in V1_NETWORK_CHAIN_IDS.items() if chain == settings.live_chain_id
    ]
    token = TokenIdentity(
        chain_id=settings.live_chain_id,
        network=f"eip155:{settings.live_chain_id}",
        v1_network=v1_names[0] if v1_names else "",
        address=str(to_checksum_address(settings.live_asset_address)),
        name=settings.live_asset_name,
        version=settings.live_asset_version,
        decimals=6,
        symbol="USDC",
    )
    account = _account_class().from_key(settings.live_hot_wallet_key)
    return HotWallet(environment="live", token=token, account=account)
