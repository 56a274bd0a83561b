"""A credential signed for one seller's gate is never redeemed by another seller.

Every ``processor_deposit`` seller shares the payee, and x402 binds a credential to the
URL alone, so ``POST /gates/redeem`` with seller B's key, B's resource and seller A's URL
once claimed A's unused credential for B.  Generated over every gate kind (the hosted
gate, a seller's ``svc_asgi`` gate), both rails, both settlement modes (``direct_wallet``
with both sellers paid to one wallet, the hardest case) and every URL seller B could name:
A's own URL, and B's own URL at the same path (MPP's challenge scope is the path alone).
After each attempt, A's gate still takes the credential."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

import svc
from reference_server.app import served

from ..rails.helpers import (
    RailShop,
    fresh_credential,
    funded_payer,
    get,
    new_account,
    open_rail_shop,
    receipts_of,
)
from ..rails.test_seller_app import seller_app
from ..support import LiveApp, LiveServer

pytestmark = pytest.mark.anyio

#: The gates a credential can be presented at.  ``hosted``: the routes of the route table
#: that are gates (``/g/{short_id}``); ``app``: a seller's own ``svc_asgi`` gate, which
#: redeems through ``POST /gates/redeem``.
GATE_KINDS = ("hosted", "app")
RAILS = ("x402", "mpp")
SETTLEMENTS = ("processor_deposit", "direct_wallet")
#: Which URL seller B names when it redeems A's credential.
NAMED = ("sellers_a_url", "sellers_b_url_same_path")


def test_every_gate_route_is_covered() -> None:
    """A new gate in the route table must join :data:`GATE_KINDS` (or say where its own
    cross-tenant case is tested)."""
    gates = {ep.path for ep in served() if ep.contract.gate}
    # The demo gate takes only receipts.  A top-up credential presented by another owner
    # is refused in tests/topups/test_sandbox.py::test_refused_credentials_credit_nothing.
    assert gates == {"/g/{short_id}", "/demo/echo", "/owners/me/top-ups"}


def _gate_url(kind: str, shop: RailShop, serve_app: Callable[..., LiveApp]) -> str:
    if kind == "hosted":
        return shop.resource.gate_url
    return serve_app(seller_app(shop)).url + "/v1/report"


@pytest.mark.parametrize("named", NAMED)
@pytest.mark.parametrize("settlement", SETTLEMENTS)
@pytest.mark.parametrize("rail", RAILS)
@pytest.mark.parametrize("kind", GATE_KINDS)
async def test_another_sellers_credential_is_not_redeemed(
    server: LiveServer,
    serve_app: Callable[..., LiveApp],
    kind: str,
    rail: str,
    settlement: str,
    named: str,
) -> None:
    wallet = str(new_account().address) if settlement == "direct_wallet" else None
    a, b = (open_rail_shop(server, payout_wallet=wallet) for _ in range(2))
    a_url, b_url = _gate_url(kind, a, serve_app), _gate_url(kind, b, serve_app)
    payer = funded_payer(server)
    credential = await fresh_credential(a_url, payer, rail)

    url = a_url if named == "sellers_a_url" else b_url
    try:
        redeemed: Any = b.seller.gates.redeem(
            b.resource.id, method="GET", url=url, headers=credential
        )
    except svc.PermissionDeniedError as refused:
        assert refused.code == "url_not_owned" and refused.request_id
    else:
        assert not redeemed.paid and redeemed.claim is None, redeemed
        assert redeemed.reason == "receipt_refused"
    # Presented at B's own gate, as a payer would: refused there too.
    assert get(b_url, credential).status_code == 402

    paid = get(a_url, credential)  # A's gate still takes it, once
    assert paid.status_code == 200, paid.text
    assert [r.seller_id for r in receipts_of(server, a.resource.id)] == [a.seller_id]
    assert receipts_of(server, b.resource.id) == []
    assert b.balance().balance == 0


def test_a_challenge_at_another_accounts_origin_is_refused(
    server: LiveServer, serve_app: Callable[..., LiveApp]
) -> None:
    """An origin belongs to the first account whose gate asked there: another account's
    gate is refused there, and on the service's own origin each resource has its
    ``gate_url`` only."""
    a, b = open_rail_shop(server), open_rail_shop(server)
    a_url = _gate_url("app", a, serve_app)
    assert httpx.get(a_url).status_code == 402  # A's gate asked a challenge: A's origin
    with pytest.raises(svc.PermissionDeniedError) as refused:
        b.seller.gates.challenge(b.resource.id, method="GET", url=a_url)
    assert refused.value.code == "url_not_owned"
    assert refused.value.details["origin"] == a_url.rsplit("/v1/", 1)[0]
    hosted = a.resource.gate_url  # the service's own origin: only the resource's gate_url
    with pytest.raises(svc.PermissionDeniedError):
        b.seller.gates.challenge(b.resource.id, method="GET", url=hosted)
    assert b.seller.gates.challenge(b.resource.id, method="GET", url=b.resource.gate_url).headers
