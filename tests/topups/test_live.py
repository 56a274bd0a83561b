"""Top-ups in ``live`` on a real chain: anvil, the committed EIP-3009 token and the
official x402 facilitator (``devchain``).  The owner's own wallet pays the deposit address
on chain; the account wallet is credited once, then funds a live wallet key."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import anyio
import pytest
from eth_account.signers.local import LocalAccount
from mpp.client import Mpp as MppClient
from mpp.methods.evm import EvmAsset
from mpp.methods.evm import client as mpp_evm_client

import svc

from ..devchain.running import RunningDevchain
from ..money.helpers import events_of
from ..rails.helpers import funded_payer
from ..support import LiveServer
from ..support import new_account as new_owner
from .helpers import PATH, account_wallet, challenge_of, owner_client, signed, with_headers

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture
def live(devchain: RunningDevchain, make_server: Callable[..., LiveServer]) -> LiveServer:
    return make_server(**devchain.live_settings())


async def _mpp_top_up(
    devchain: RunningDevchain, base: str, jwt: str, payer: LocalAccount, amount: str
) -> Any:
    """pympp's client, paying in the devchain's token (``Authorization: Payment``)."""
    asset = EvmAsset(
        address=devchain.asset,
        decimals=6,
        chain_id=devchain.chain_id,
        name=devchain.exports["SVC_LIVE_ASSET_NAME"],
        version=devchain.exports["SVC_LIVE_ASSET_VERSION"],
    )
    charge = mpp_evm_client.charge(currency=asset, account=payer)
    async with MppClient(methods=[charge]) as client:
        return await client.fetch(
            base + PATH,
            method="POST",
            json={"amount": amount},
            headers={"X-Svc-Owner-JWT": jwt, "X-Svc-Environment": "live"},
        )


def test_a_live_top_up_moves_tokens_on_chain_and_funds_a_wallet_key(
    devchain: RunningDevchain, live: LiveServer
) -> None:
    owner = new_owner(live.url, "live")
    client = owner_client(live.url, owner.owner_jwt, "live")
    payer = devchain.new_payer(3_000_000)
    deposits = devchain.balance(devchain.deposit_address)

    top_up = client.top_ups.create("1.50", payer=payer)

    assert (top_up.environment, top_up.rail, top_up.network) == ("live", "x402", devchain.network)
    assert top_up.payer == payer.address
    assert devchain.balance(devchain.deposit_address) - deposits == 1_500_000
    assert devchain.balance(payer.address) == 1_500_000
    mined = devchain.web3().eth.get_transaction_receipt(top_up.tx_hash)
    assert mined["status"] == 1 and mined["to"] == devchain.asset
    assert account_wallet(live, owner.owner_id, "live") == 1_500_000
    [paid] = events_of(live, owner.owner_id, "funding.paid")
    assert (paid["source"], paid["tx_hash"], paid["_environment"]) == (
        "x402",
        top_up.tx_hash,
        "live",
    )

    # MPP through the same facilitator.
    answer = anyio.run(_mpp_top_up, devchain, live.url, owner.owner_jwt, payer, "0.25")
    assert answer.status_code == 201, answer.text
    assert answer.json()["rail"] == "mpp"
    assert devchain.balance(devchain.deposit_address) - deposits == 1_750_000
    assert account_wallet(live, owner.owner_id, "live") == 1_750_000

    # The account wallet now funds a live wallet key: real money reaches an agent.
    key = client.wallet_keys.create("agent")
    funded = client.wallet_keys.fund(key.id, "1.00")
    assert funded.balance == Decimal("1.00")
    assert account_wallet(live, owner.owner_id, "live") == 750_000


def test_live_refusals_move_nothing_on_chain(devchain: RunningDevchain, live: LiveServer) -> None:
    owner = new_owner(live.url, "live")
    client = owner_client(live.url, owner.owner_jwt, "live")
    payer = devchain.new_payer(1_000_000)
    deposits = devchain.balance(devchain.deposit_address)

    credential = signed(challenge_of(client, "0.40"), payer, "0.40")
    client.top_ups.create("0.40", options=with_headers(credential))
    with pytest.raises(svc.PaymentRequiredError):  # replayed under another key
        client.top_ups.create("0.40", options=with_headers(credential))
    with pytest.raises(svc.PaymentRequiredError):  # signed for 0.40, presented for 0.60
        client.top_ups.create(
            "0.60", options=with_headers(signed(challenge_of(client, "0.40"), payer, "0.40"))
        )
    with pytest.raises(svc.PaymentRequiredError):  # the payer lacks funds: the facilitator refuses
        client.top_ups.create("0.50", payer=devchain.new_payer(0))

    # The other environment's credential: a sandbox one in live, a live one in test.
    test_client = owner_client(live.url, owner.owner_jwt, "test")
    sandbox_payer = funded_payer(live, "1")
    sandbox_credential = signed(challenge_of(test_client, "0.10"), sandbox_payer, "0.10")
    with pytest.raises(svc.PaymentRequiredError):
        client.top_ups.create("0.10", options=with_headers(sandbox_credential))
    live_credential = signed(challenge_of(client, "0.10"), payer, "0.10")
    with pytest.raises(svc.PaymentRequiredError):
        test_client.top_ups.create("0.10", options=with_headers(live_credential))

    assert devchain.balance(devchain.deposit_address) - deposits == 400_000
    assert devchain.balance(payer.address) == 600_000
    assert account_wallet(live, owner.owner_id, "live") == 400_000
    assert account_wallet(live, owner.owner_id, "test") == 0
    assert len(events_of(live, owner.owner_id, "funding.paid")) == 1
