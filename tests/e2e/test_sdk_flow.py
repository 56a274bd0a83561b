"""The SDK drives a real reference server (uvicorn on loopback), sync and async twins,
on whichever database the suite runs on (SQLite file or PostgreSQL)."""

from __future__ import annotations

from decimal import Decimal

import pytest

import svc

from ..support import LiveServer


def test_go_live_flow_sync(server: LiveServer) -> None:
    with svc.Client(base_url=server.url, environment="test") as anon:
        owner = anon.owners.create("flow@example.com")
        assert anon.health().ok and anon.ready().status == "ready"
        caps = anon.capabilities()
        assert {m["role"] for m in caps.auth_modes} == {"owner", "seller", "agent"}
        assert "POST /resources" in anon.discovery("llms.txt")
        assert anon.discovery("agent-openapi.json")["paths"]["/resources"]["post"]

    with svc.Client(base_url=server.url, owner_jwt=owner.owner_jwt, environment="test") as oc:
        seller = oc.sellers.create(name="Reports Inc")
        assert seller.seller_key.startswith("svc_sk_test_")
        assert [s.id for s in oc.sellers.list().data] == [seller.id]

    with svc.Client(base_url=server.url, seller_key=seller.seller_key) as sc:
        report = sc.resources.create(
            kind="http",
            path="/v1/report",
            amount="0.05",
            metadata={"sku_kind": "credit_topup", "credits": 100, "credit_unit": "report"},
        )
        assert report.amount == Decimal("0.05")
        assert report.gate_url == f"{server.url}/g/{report.short_id}"
        assert report.pay_url == f"{server.url}/buy/{report.short_id}"
        assert report.metadata.credits == Decimal(100)
        tool = sc.resources.create(kind="mcp", tool="search", amount=Decimal("0.001"))
        assert tool.path_or_tool == "search" and tool.path is None

        updated = sc.resources.update(report.id, amount="0.07", description="Daily report")
        assert updated.amount == Decimal("0.07") and updated.description == "Daily report"
        gone = sc.resources.deactivate(tool.id)
        assert gone.active is False
        listed = {r.id: r for r in sc.resources.list().data}
        assert listed[report.id].amount == Decimal("0.07") and not listed[tool.id].active
        assert sc.resources.get(report.id).short_id == report.short_id

        wallet = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
        enabled = sc.sellers.enable_payments(
            processor_profile_id="prof_1", payout_wallet_address=wallet
        )
        assert enabled.mpp_enabled and enabled.x402_enabled
        assert enabled.payout_wallet_address == wallet
        balance = sc.sellers.balance()
        assert balance.balance == Decimal("0") and balance.mpp_enabled
        assert sc.sellers.me().id == seller.id


@pytest.mark.anyio
async def test_go_live_flow_async(server: LiveServer) -> None:
    async with svc.AsyncClient(base_url=server.url, environment="test") as anon:
        owner = await anon.owners.create("async@example.com")
    async with svc.AsyncClient(
        base_url=server.url, owner_jwt=owner.owner_jwt, environment="test"
    ) as oc:
        seller = await oc.sellers.create()
    async with svc.AsyncClient(base_url=server.url, seller_key=seller.seller_key) as sc:
        created = await sc.resources.create(kind="http", path="/a", amount="1")
        again = await sc.resources.update(created.id, path="/b")
        assert again.path == "/b" and again.path_or_tool == "/b"
        assert [r.id for r in (await sc.resources.list()).data] == [created.id]
        assert (await sc.sellers.enable_payments()).x402_enabled


def test_sdk_errors_carry_request_id(server: LiveServer) -> None:
    with svc.Client(base_url=server.url, environment="test") as anon:
        owner = anon.owners.create("errors@example.com")
        with pytest.raises(svc.ConflictError) as conflict:
            anon.owners.create("errors@example.com")
        assert conflict.value.code == "email_taken" and conflict.value.request_id
    with svc.Client(base_url=server.url, owner_jwt=owner.owner_jwt, environment="test") as oc:
        seller = oc.sellers.create()
    with svc.Client(base_url=server.url, seller_key="svc_sk_test_wrong") as bad:
        with pytest.raises(svc.AuthenticationError) as unauth:
            bad.resources.list()
        assert unauth.value.status == 401 and unauth.value.request_id.startswith("req_")
    with svc.Client(base_url=server.url, seller_key=seller.seller_key, environment="live") as sc:
        with pytest.raises(svc.PermissionDeniedError) as denied:
            sc.resources.list()
        assert denied.value.code == "environment_mismatch"
    with svc.Client(base_url=server.url, seller_key=seller.seller_key) as sc:
        with pytest.raises(svc.NotFoundError):
            sc.resources.get("res_doesnotexist")
        with pytest.raises(svc.UnprocessableEntityError) as invalid:
            sc.resources.create(kind="http", path="no-slash", amount="1")
        assert invalid.value.details is not None
        assert invalid.value.details["errors"][0]["field"] == "path"
        reused = svc.RequestOptions(idempotency_key="same")
        sc.resources.create(kind="http", path="/a", amount="1", options=reused)
        with pytest.raises(svc.UnprocessableEntityError) as clash:
            sc.resources.create(kind="http", path="/a", amount="2", options=reused)
        assert clash.value.code == "idempotency_key_reused"


def test_sdk_retries_through_rate_limit(make_server: object) -> None:
    live = make_server(rate_limit="2/second")  # type: ignore[operator]
    with svc.Client(base_url=live.url, environment="test", max_retries=0) as anon:
        owner = anon.owners.create("rl@example.com")
    with svc.Client(
        base_url=live.url, owner_jwt=owner.owner_jwt, environment="test", max_retries=0
    ) as oc:
        oc.sellers.list()
        oc.sellers.list()
        with pytest.raises(svc.RateLimitError) as limited:
            oc.sellers.list()
        assert limited.value.retry_after is not None and limited.value.retry_after >= 1
    with svc.Client(
        base_url=live.url, owner_jwt=owner.owner_jwt, environment="test", max_retries=3
    ) as patient:
        assert patient.sellers.list().data == []  # waited Retry-After, then succeeded
