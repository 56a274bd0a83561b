"""Payouts through the SDK against a real server: a seller onboards (a person completes
the sandbox page, here its form posted as a browser would), syncs, withdraws and watches
the withdrawal reach ``paid``; its owner sees the same through the dashboard twins."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

import pytest

import svc

from ..payouts.helpers import FAST_PAYOUTS, complete_onboarding, shop
from ..support import LiveServer, new_account, until


@pytest.fixture
def fast(make_server: Callable[..., LiveServer]) -> LiveServer:
    return make_server(**FAST_PAYOUTS)


def _until(client: svc.Client, withdrawal_id: str, *statuses: str, **kw: str) -> svc.Withdrawal:
    get = client.withdrawals.get
    return until(lambda: (w := get(withdrawal_id, **kw)).status in statuses and w, "not yet")


def test_onboard_sync_withdraw_and_watch_it_paid(fast: LiveServer) -> None:
    s = shop(fast)  # a seller with 9.90 from one sale
    with svc.Client(base_url=fast.url, seller_key=s.acct.seller_key) as sc:
        assert sc.connect.status().status == "not_started"
        with pytest.raises(svc.APIError) as refused:
            sc.withdrawals.create()
        assert "GET /sellers/me/balance" in refused.value.message

        link = sc.connect.onboard("us")
        assert link.account is not None and link.account.country == "US"
        assert link.account.payouts_enabled is False
        assert complete_onboarding(link.onboard_url).status_code == 200
        account = sc.connect.sync()
        assert account.payouts_enabled and account.details_submitted
        assert account.requirements_due == []
        assert sc.connect.status().payouts_enabled
        assert sc.connect.login().login_url.startswith(fast.url)
        off = sc.connect.update(auto_payout=False)
        assert off.auto_payout is False

        w = sc.withdrawals.create("5.00")
        assert w.status == "pending" and w.amount == Decimal("5.00") and not w.automatic
        assert sc.sellers.balance().balance == Decimal("4.90")
        paid = _until(sc, w.id, "paid", "failed")
        assert paid.status == "paid" and paid.failure_reason is None
        assert [x.id for x in sc.withdrawals.list_all()] == [w.id]

    with svc.Client(base_url=fast.url, owner_jwt=s.acct.owner_jwt, environment="test") as oc:
        assert oc.sellers.get(s.acct.seller_id).id == s.acct.seller_id
        assert oc.sellers.balance(seller_id=s.acct.seller_id).balance == Decimal("4.90")
        assert oc.connect.status(seller_id=s.acct.seller_id).payouts_enabled
        rest = oc.withdrawals.create(seller_id=s.acct.seller_id)  # the whole balance
        assert rest.amount == Decimal("4.90")
        done = _until(oc, rest.id, "paid", "failed", seller_id=s.acct.seller_id)
        assert done.status == "paid"
        listed = oc.withdrawals.list(seller_id=s.acct.seller_id).data
        assert [x.id for x in listed] == [rest.id, w.id]  # newest first
        [resource] = oc.resources.list(seller_id=s.acct.seller_id).data
        assert resource.id == s.resource_id

    stranger = new_account(fast.url)
    xc = svc.Client(base_url=fast.url, owner_jwt=stranger.owner_jwt, environment="test")
    with xc, pytest.raises(svc.NotFoundError):
        xc.withdrawals.list(seller_id=s.acct.seller_id)


@pytest.mark.anyio
async def test_the_async_client_onboards_too(fast: LiveServer) -> None:
    s = shop(fast)
    async with svc.AsyncClient(base_url=fast.url, seller_key=s.acct.seller_key) as sc:
        link = await sc.connect.onboard("US", "standard")
        assert complete_onboarding(link.onboard_url, button="Finish later").status_code == 200
        account = await sc.connect.sync()
        assert account.payouts_enabled is False and account.requirements_due
        with pytest.raises(svc.APIError) as refused:
            await sc.withdrawals.create()
        assert refused.value.code == "payouts_not_enabled"
