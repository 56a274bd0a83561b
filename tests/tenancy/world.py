"""A shared, populated world: many owners, each with sellers, resources, wallet keys,
payments on every rail, webhooks and deliveries, and withdrawals, in both environments.

Tests of one tenant on a fresh database cannot see a statement that mixes tenants up
(a pay-url answer once named another seller's receipt): they run here instead, beside
everybody else's rows.  Built through the API as users build it; ``live`` open rails
settle through a second server's sandbox facilitator (as ``tests/rails/test_live.py``
does), and live money comes in as a processor deposit would credit it.
"""

from __future__ import annotations

import uuid
from typing import Any

import attrs
import httpx
from eth_account.signers.local import LocalAccount

import svc

from ..buypage.helpers import pay_by_card
from ..payouts.helpers import complete_onboarding
from ..payurl.helpers import deposit_live, hot_address
from ..sandbox.helpers import USDC, fund, new_account
from ..support import LiveServer, assert_ledger_sound

ENVIRONMENTS = ("test", "live")
OWNERS = ("ann", "bob", "cy")
#: What every live open-rail gate of the world settles to (no key behind it).
LIVE_DEPOSIT = "0x000000000000000000000000000000000000dEaD"


def live_settings(chain: LiveServer, hot_wallet: LocalAccount) -> dict[str, Any]:
    """``live`` on the sandbox token's identity, settled by ``chain``'s facilitator."""
    return {
        "live_facilitator_url": chain.url + "/sandbox/x402",
        "live_chain_id": 84532,
        "live_asset_address": USDC,
        "live_asset_name": "USDC",
        "live_asset_version": "2",
        "live_deposit_address": LIVE_DEPOSIT,
        "live_hot_wallet_key": "0x" + bytes(hot_wallet.key).hex(),
    }


@attrs.define
class Seller:
    id: str
    key: str
    resources: dict[str, dict[str, Any]] = attrs.field(factory=dict)


@attrs.define
class WalletKey:
    id: str
    key: str


@attrs.define
class Owner:
    name: str
    id: str
    jwt: str
    handle: str
    sellers: dict[tuple[str, str], Seller] = attrs.field(factory=dict)
    wallet_keys: dict[tuple[str, str], WalletKey] = attrs.field(factory=dict)
    webhooks: dict[str, str] = attrs.field(factory=dict)
    #: ``svc listen``'s listener endpoint (test only).
    listener: str | None = None


@attrs.define
class World:
    server: LiveServer
    owners: list[Owner]


class _Api:
    """Plain HTTP with a credential, every write with a fresh Idempotency-Key."""

    def __init__(self, base_url: str) -> None:
        self.http = httpx.Client(base_url=base_url, timeout=60)

    def call(
        self,
        method: str,
        path: str,
        bearer: str | None = None,
        body: Any = None,
        env: str | None = None,
        ok: tuple[int, ...] = (200, 201),
    ) -> Any:
        headers = {"Idempotency-Key": str(uuid.uuid4())}
        if bearer is not None:
            headers["Authorization"] = f"Bearer {bearer}"
        if env is not None:
            headers["X-Svc-Environment"] = env
        r = self.http.request(method, path, json=body, headers=headers)
        assert r.status_code in ok, (method, path, r.status_code, r.text)
        return r.json()


#: A metered price: 0.001 a token, at most 0.10.
_METERED = {"pricing": "metered", "unit_price": "0.001", "unit": "token", "max_amount": "0.10"}


def build(server: LiveServer, chain: LiveServer, hot_wallet: LocalAccount) -> World:
    """Three owners, each in both environments with a ``processor_deposit`` seller and a
    ``direct_wallet`` one, active, inactive, HTTP and MCP resources, three wallet keys
    (one MPP-only, one capped) and a webhook endpoint; then every owner buys from the
    next one on every rail."""
    api = _Api(server.url)
    fund(chain.url, hot_wallet.address, "100")  # live pay-url pays from it
    fund(server.url, hot_address(server), "100")  # test pay-url pays from it
    owners = [_owner(api, server, name) for name in OWNERS]
    for owner in owners:
        _top_up(server, chain, owner)
    for payer, seller in zip(owners, owners[1:] + owners[:1], strict=True):
        _buy(api, payer, seller)
    for owner in owners:
        _withdraw(api, owner)
    return World(server=server, owners=owners)


def _owner(api: _Api, server: LiveServer, name: str) -> Owner:
    created = api.call("POST", "/owners", body={"email": f"{name}-{uuid.uuid4().hex[:8]}@x.test"})
    handle = f"{name}{uuid.uuid4().hex[:6]}"
    owner = Owner(name=name, id=created["owner_id"], jwt=created["owner_jwt"], handle=handle)
    jwt = owner.jwt
    for env in ENVIRONMENTS:
        api.call("POST", "/handles", jwt, {"handle": handle}, env)
        for kind, wallet in (("deposit", None), ("wallet", str(new_account().address))):
            made = api.call("POST", "/sellers", jwt, {"name": f"{name} {kind}"}, env)
            seller = Seller(id=made["id"], key=made["seller_key"])
            owner.sellers[(env, kind)] = seller
            api.call("PATCH", "/sellers/me/payments", seller.key, {"payout_wallet_address": wallet})
            for label, body in (
                ("report", {"kind": "http", "path": "/v1/report", "amount": "0.25"}),
                ("listed", {"kind": "http", "path": "/v1/list", "amount": "0.10", "listed": True}),
                ("tool", {"kind": "mcp", "tool": "forecast", "amount": "0.05"}),
                ("retired", {"kind": "http", "path": "/v1/old", "amount": "1.00"}),
                ("tokens", {"kind": "http", "path": "/v1/chat", **_METERED}),
            ):
                seller.resources[label] = api.call("POST", "/resources", seller.key, body)
            retired = seller.resources["retired"]["id"]
            api.call("POST", f"/resources/{retired}/deactivate", seller.key)
        for label, policy in (
            ("agent", {"allowed_rails": ["x402", "rill"]}),
            # Pays listed resources (0.10) at once; above 0.20 a person decides.
            ("mpp", {"allowed_rails": ["mpp"], "approval_above": "0.20"}),
            ("capped", {"allowance": "1.00", "period": "day"}),
        ):
            made = api.call("POST", "/wallet-keys", jwt, {"name": label, "policy": policy}, env)
            owner.wallet_keys[(env, label)] = WalletKey(id=made["id"], key=made["key"])
        if env == "live":
            deposit_live(server, owner.id, 50_000_000)
        for label in ("agent", "mpp", "capped"):
            key_id = owner.wallet_keys[(env, label)].id
            api.call("POST", f"/wallet-keys/{key_id}/fund", jwt, {"amount": "5.00"}, env)
        hook = api.call("POST", "/webhooks", jwt, {"url": "http://localhost:9/hooks"}, env)
        owner.webhooks[env] = hook["id"]
        if env == "test":
            owner.listener = api.call("POST", "/webhooks/listen", jwt, {}, env)["id"]
    return owner


def _buy(api: _Api, payer: Owner, seller: Owner) -> None:
    """``payer``'s agents buy from ``seller`` on the ledger (a part refunded), x402 and MPP
    (pay-url; in ``test`` a part of one refunded on chain), a handle, and (``test``) the
    card on the buy page."""
    for env in ENVIRONMENTS:
        agent = payer.wallet_keys[(env, "agent")].key
        deposit, wallet = seller.sellers[(env, "deposit")], seller.sellers[(env, "wallet")]
        sold = api.call("POST", "/pay", agent, {"resource_id": deposit.resources["report"]["id"]})
        # A part of it refunded: a refund of each seller's, its payer's event.
        api.call(
            "POST", "/refunds", deposit.key, {"receipt_id": sold["receipt_id"], "amount": "0.01"}
        )
        # Metered on the ledger: one hold left authorized, one captured by its seller.
        tokens = deposit.resources["tokens"]["id"]
        api.call("POST", "/pay", agent, {"resource_id": tokens})
        used = api.call("POST", "/pay", agent, {"resource_id": tokens})["receipt_id"]
        api.call("POST", f"/receipts/{used}/capture", deposit.key, {"units": 7})
        api.call("POST", "/pay", agent, {"destination": f"@{seller.handle}", "amount": "0.30"})
        for shop, rail in ((deposit, "x402"), (wallet, "mpp"), (deposit, "mpp"), (wallet, "x402")):
            url = shop.resources["listed"]["gate_url"]
            key = payer.wallet_keys[(env, "agent" if rail == "x402" else "mpp")].key
            paid = api.call("POST", "/spend/pay-url", key, {"url": url}, ok=(200,))
            assert (paid["status"], paid["rail"]) == ("succeeded", rail), paid
            if (env, shop, rail) == ("test", deposit, "x402"):  # a part refunded on chain
                refund = {"receipt_id": paid["seller_receipt_id"], "amount": "0.01"}
                api.call("POST", "/refunds", deposit.key, refund)
        # Over the mpp key's approval line: an approval, pending, its amount held.
        careful = payer.wallet_keys[(env, "mpp")].key
        url = deposit.resources["report"]["gate_url"]
        asked = api.call("POST", "/spend/pay-url", careful, {"url": url}, ok=(202,))
        assert asked["status"] == "pending", asked
        capped = payer.wallet_keys[(env, "capped")].key
        api.call("POST", "/pay", capped, {"resource_id": wallet.resources["report"]["id"]})
    paid = pay_by_card(seller.sellers[("test", "deposit")].resources["report"]["pay_url"])
    assert paid.status_code == 200, paid.text


def _top_up(server: LiveServer, chain: LiveServer, owner: Owner) -> None:
    """The owner tops up its account wallet in both environments from a wallet of its
    own (funded by the faucet of the chain each environment settles on)."""
    for env, faucet in (("test", server), ("live", chain)):
        payer = new_account()
        fund(faucet.url, payer.address, "1")
        with svc.Client(base_url=server.url, owner_jwt=owner.jwt, environment=env) as client:
            client.top_ups.create("0.50", payer=payer)


def _withdraw(api: _Api, owner: Owner) -> None:
    """The ``test`` deposit seller onboards and withdraws part of its balance."""
    seller = owner.sellers[("test", "deposit")]
    link = api.call(
        "POST", "/sellers/me/connect/onboard", seller.key, {"country": "US", "type": "express"}
    )
    assert complete_onboarding(link["onboard_url"]).status_code == 200
    api.call("POST", "/sellers/me/connect/sync", seller.key)
    api.call("POST", "/sellers/me/withdraw", seller.key, {"amount": "0.10"})


def stop(world: World, chain: LiveServer) -> None:
    world.server.stop()
    chain.stop()
    assert_ledger_sound(world.server)
    assert_ledger_sound(chain)
