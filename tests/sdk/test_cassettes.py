"""The SDK against answers recorded from our own reference server, replayed offline.

``record_cassettes.py`` records ``cassettes/*.yaml`` by driving a real reference server
with :class:`svc.Client`; here vcrpy replays them (``record_mode="none"``: no server, no
network) to both :class:`svc.Client` and :class:`svc.AsyncClient`.  An interaction is only
served when the SDK sends the recorded method, path, query, JSON body, credential,
``X-Svc-Environment``, ``Accept``, ``Content-Type`` and ``Idempotency-Key`` (see
``record_cassettes.MATCH_ON``), so a change in how the SDK builds a request fails here
just as a change in how it reads an answer does.  Every test also checks that every
recorded interaction was played.

Re-record with ``python -m tests.sdk.record_cassettes`` after changing the server or the
recorded flow.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import datetime
from decimal import Decimal
from typing import Any

import attrs
import pytest
from record_cassettes import (
    CASSETTE_DIR,
    HTTP_METADATA,
    IDEMPOTENCY_KEY,
    OWNER_EMAIL,
    OWNER_JWT,
    PAYOUT_WALLET,
    PUBLIC_URL,
    SELLER_KEY,
    SELLER_NAME,
    UNKNOWN_RESOURCE_ID,
    UNKNOWN_SELLER_KEY,
    idempotency_key,
    leaked_secrets,
    make_vcr,
    sdk_headers,
)
from vcr.cassette import Cassette
from vcr.errors import CannotOverwriteExistingCassetteException
from vcr.request import Request as VcrRequest

import svc

pytestmark = pytest.mark.anyio

#: Not the recorded host: matching must not depend on scheme, host or port.
BASE_URL = "http://cassette.invalid"
CASSETTES = ("seller_flow.yaml", "discovery.yaml", "errors.yaml", "newer_server.yaml")


class Replay:
    """Clients of one kind (sync or async) and a way to await either kind's results."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    @asynccontextmanager
    async def client(self, **kwargs: Any) -> AsyncIterator[Any]:
        if self.kind == "sync":
            with svc.Client(base_url=BASE_URL, **kwargs) as client:
                yield client
        else:
            async with svc.AsyncClient(base_url=BASE_URL, **kwargs) as client:
                yield client

    async def __call__(self, result: Any) -> Any:
        """The result of a client call: awaited for the async client, as is for the sync one."""
        if inspect.isawaitable(result):
            return await result
        return result


@pytest.fixture(params=["sync", "async"])
def replay(request: pytest.FixtureRequest) -> Replay:
    return Replay(request.param)


@contextmanager
def cassette(name: str) -> Iterator[Cassette]:
    """Replay ``name`` strictly; afterwards every recorded interaction must have been played."""
    assert (CASSETTE_DIR / name).is_file(), f"missing {name}: run record_cassettes"
    with make_vcr(record_mode="none").use_cassette(name) as cas:
        assert len(cas) > 0
        yield cas
    assert cas.all_played, f"{name}: not every recorded interaction was requested"
    assert cas.play_count == len(cas)


def assert_api_error(exc: svc.APIError, status: int, code: str) -> None:
    assert exc.status == status
    assert exc.code == code
    assert exc.message and not exc.message.startswith("HTTP ")  # read from the envelope
    assert exc.request_id is not None and exc.request_id.startswith("req_")
    assert exc.request_id == exc.headers["x-request-id"]
    assert isinstance(exc.body, dict) and exc.body["ok"] is False


def without_request_id(model: Any) -> Any:
    return attrs.evolve(model, request_id=None)


# --- the seller flow -----------------------------------------------------------------------


async def test_seller_flow(replay: Replay) -> None:
    with cassette("seller_flow.yaml"):
        async with replay.client(max_retries=0) as anon:
            owner = await replay(anon.owners.create(OWNER_EMAIL))
        assert isinstance(owner, svc.OwnerCreated)
        assert owner.owner_jwt == OWNER_JWT
        assert owner.owner_id.startswith("own_")
        assert owner.request_id is not None and owner.request_id.startswith("req_")

        async with replay.client(owner_jwt=owner.owner_jwt, environment="test") as as_owner:
            seller = await replay(as_owner.sellers.create(name=SELLER_NAME))
            sellers = await replay(as_owner.sellers.list())
        assert isinstance(seller, svc.SellerCreated)
        assert seller.seller_key == SELLER_KEY
        assert seller.id.startswith("sel_")
        assert seller.environment == "test"
        assert seller.name == SELLER_NAME
        assert (seller.mpp_enabled, seller.x402_enabled, seller.payouts_enabled) == (
            False,
            False,
            False,
        )
        assert seller.balance == Decimal("0") and isinstance(seller.balance, Decimal)
        assert isinstance(seller.created_at, datetime) and seller.created_at.tzinfo is not None
        assert isinstance(sellers, svc.SellerList)
        assert sellers.has_more is False
        assert [type(s) for s in sellers.data] == [svc.Seller]  # the key is not listed
        assert sellers.data[0].id == seller.id
        assert sellers.data[0].created_at == seller.created_at

        # The replayed key is the placeholder, and the seller calls must send exactly it.
        async with replay.client(seller_key=seller.seller_key, environment="test") as client:
            me = await replay(client.sellers.me())
            assert isinstance(me, svc.Seller) and me.id == seller.id

            report = await replay(
                client.resources.create(
                    kind="http",
                    path="/v1/report",
                    amount=Decimal("0.05"),
                    description="Quarterly report",
                    metadata=HTTP_METADATA,
                    upstream_url="https://upstream.example.test/v1/report",
                    listed=True,
                )
            )
            assert isinstance(report, svc.Resource)
            assert report.id.startswith("res_")
            assert report.kind == "http"
            assert report.amount == Decimal("0.05") and isinstance(report.amount, Decimal)
            assert (report.path, report.tool, report.path_or_tool) == (
                "/v1/report",
                None,
                "/v1/report",
            )
            assert report.gate_url == f"{PUBLIC_URL}/g/{report.short_id}"
            assert report.pay_url == f"{PUBLIC_URL}/buy/{report.short_id}"
            assert report.metadata == svc.ResourceMetadata(
                sku_kind="credit_topup",
                credits=Decimal(100),
                credit_unit="call",
                extra={"tier": "gold"},
            )
            assert report.active is True and report.listed is True
            assert report.upstream_url == "https://upstream.example.test/v1/report"
            assert report.seller_id == seller.id and report.environment == "test"
            assert report.created_at == report.updated_at

            tool = await replay(
                client.resources.create(kind="mcp", tool="summarize", amount="0.002")
            )
            assert (tool.kind, tool.tool, tool.path, tool.path_or_tool) == (
                "mcp",
                "summarize",
                None,
                "summarize",
            )
            assert tool.amount == Decimal("0.002")
            assert tool.metadata == svc.ResourceMetadata()  # one_shot, no credits
            assert tool.gate_url == f"{PUBLIC_URL}/g/{tool.short_id}"
            assert tool.short_id != report.short_id

            listed = await replay(client.resources.list())
            assert isinstance(listed, svc.ResourceList)
            assert [without_request_id(r) for r in listed.data] == [
                without_request_id(report),
                without_request_id(tool),
            ]

            got = await replay(client.resources.get(report.id))
            assert without_request_id(got) == without_request_id(report)
            assert got.request_id != report.request_id

            updated = await replay(
                client.resources.update(report.id, amount="0.10", description="Quarterly report v2")
            )
            assert updated.id == report.id
            assert updated.amount == Decimal("0.10")
            assert updated.description == "Quarterly report v2"
            assert updated.metadata == report.metadata  # untouched
            assert updated.updated_at is not None and report.updated_at is not None
            assert updated.updated_at > report.updated_at

            deactivated = await replay(client.resources.deactivate(tool.id))
            assert deactivated.id == tool.id and deactivated.active is False

            enabled = await replay(
                client.sellers.enable_payments(payout_wallet_address=PAYOUT_WALLET)
            )
            assert isinstance(enabled, svc.Seller)
            assert enabled.mpp_enabled is True and enabled.x402_enabled is True
            assert enabled.payout_wallet_address == PAYOUT_WALLET

            balance = await replay(client.sellers.balance())
            assert isinstance(balance, svc.Balance)
            assert balance.seller_id == seller.id and balance.environment == "test"
            assert balance.balance == Decimal("0") and isinstance(balance.balance, Decimal)
            assert balance.currency == "USD"
            assert (balance.mpp_enabled, balance.x402_enabled) == (True, True)
            assert balance.request_id is not None and balance.request_id.startswith("req_")


# --- probes and discovery ------------------------------------------------------------------


async def test_probes_and_discovery(replay: Replay) -> None:
    with cassette("discovery.yaml"):
        async with replay.client() as client:
            health = await replay(client.health())
            ready = await replay(client.ready())
            caps = await replay(client.capabilities())
            llms = await replay(client.discovery("llms.txt"))
            agent = await replay(client.discovery(".well-known/agent.json"))
    assert health == svc.Health(ok=True, status="ok", request_id=health.request_id)
    assert health.request_id is not None and health.request_id.startswith("req_")
    assert (ready.ok, ready.status, ready.checks) == (True, "ready", {"database": "ok"})
    assert isinstance(caps, svc.Capabilities)
    assert [mode["role"] for mode in caps.auth_modes] == ["owner", "seller", "agent"]
    assert {shape["rail"] for shape in caps.pay_shapes} >= {"x402", "mpp"}
    assert caps.environments == ["test", "live"]
    assert caps.seed_ids == {"demo_echo": f"{PUBLIC_URL}/demo/echo"}
    assert isinstance(llms, str)
    assert llms.startswith("# svc payments service\n")
    assert f"Base URL: {PUBLIC_URL}" in llms
    assert "- POST /resources (auth: seller)" in llms
    assert isinstance(agent, dict)
    assert agent["name"] == "svc" and agent["url"] == PUBLIC_URL
    assert agent["llms_txt_url"] == f"{PUBLIC_URL}/llms.txt"


# --- error responses -----------------------------------------------------------------------


async def test_error_responses(replay: Replay) -> None:
    key_options = svc.RequestOptions(idempotency_key=IDEMPOTENCY_KEY)
    with cassette("errors.yaml"):
        async with replay.client(seller_key=SELLER_KEY, environment="test") as client:
            with pytest.raises(svc.NotFoundError) as not_found:
                await replay(client.resources.get(UNKNOWN_RESOURCE_ID))
            assert_api_error(not_found.value, 404, "not_found")

            with pytest.raises(svc.AuthenticationError) as unauthenticated:
                bad_key = svc.RequestOptions(seller_key=UNKNOWN_SELLER_KEY)
                await replay(client.sellers.me(options=bad_key))
            assert_api_error(unauthenticated.value, 401, "invalid_credential")

            with pytest.raises(svc.PermissionDeniedError) as mismatch:
                live = svc.RequestOptions(environment="live")
                await replay(client.sellers.me(options=live))
            assert_api_error(mismatch.value, 403, "environment_mismatch")
            assert "live" in mismatch.value.message

            with pytest.raises(svc.UnprocessableEntityError) as invalid:
                await replay(client.resources.create(kind="http", amount="0.05"))
            assert_api_error(invalid.value, 422, "validation_error")
            assert invalid.value.details == {
                "errors": [{"field": "path", "message": "is required for kind http"}]
            }

            first = await replay(
                client.resources.create(
                    kind="http", path="/v1/idem", amount="0.05", options=key_options
                )
            )
            again = await replay(
                client.resources.create(
                    kind="http", path="/v1/idem", amount="0.05", options=key_options
                )
            )
            assert again.id == first.id and again.short_id == first.short_id
            assert again.request_id != first.request_id  # the replay's own id
            with pytest.raises(svc.UnprocessableEntityError) as reused:
                await replay(
                    client.resources.create(
                        kind="http", path="/v1/idem", amount="0.07", options=key_options
                    )
                )
            assert_api_error(reused.value, 422, "idempotency_key_reused")
            assert reused.value.details is None


# --- a newer server ------------------------------------------------------------------------


async def test_newer_server_fields_are_ignored(replay: Replay) -> None:
    with cassette("newer_server.yaml") as cas:
        extra = cas.responses[0]["body"]["string"]
        assert b"introduced_in_a_newer_server" in extra  # the cassette really has them
        async with replay.client(seller_key=SELLER_KEY, environment="test") as client:
            me = await replay(client.sellers.me())
            listed = await replay(client.resources.list())
            balance = await replay(client.sellers.balance())
            with pytest.raises(svc.NotFoundError) as not_found:
                await replay(client.resources.get(UNKNOWN_RESOURCE_ID))
    assert isinstance(me, svc.Seller) and me.id.startswith("sel_")
    assert not hasattr(me, "introduced_in_a_newer_server")
    assert [r.kind for r in listed.data] == ["http", "mcp"]
    assert listed.data[0].amount == Decimal("0.05")
    # Unknown metadata keys are the seller's own and are kept, like "tier".
    assert listed.data[0].metadata.extra == {"tier": "gold", "bundle": {"size": 3}}
    assert listed.data[0].metadata.credits == Decimal(100)
    assert balance.balance == Decimal("0") and balance.mpp_enabled is True
    assert_api_error(not_found.value, 404, "not_found")


# --- the replay itself ---------------------------------------------------------------------


async def test_a_request_the_cassette_lacks_is_refused_not_sent(replay: Replay) -> None:
    """Strict replay: another environment header, credential or path is not served."""
    with make_vcr(record_mode="none").use_cassette("discovery.yaml"):
        async with replay.client(environment="live") as client:
            with pytest.raises(CannotOverwriteExistingCassetteException):
                await replay(client.health())  # recorded without X-Svc-Environment
        async with replay.client(seller_key=SELLER_KEY) as client:
            with pytest.raises(CannotOverwriteExistingCassetteException):
                await replay(client.sellers.me())


def _request(**headers: str) -> VcrRequest:
    return VcrRequest("POST", "http://x.invalid/resources", b"{}", headers)


def test_idempotency_key_matcher() -> None:
    generated = "5e967823-c758-4a29-bc2e-cec4568c702b"
    other = "c96640bb-aa2d-4246-aee0-bbbbdef495df"
    idempotency_key(
        _request(**{"Idempotency-Key": other}), _request(**{"idempotency-key": generated})
    )
    idempotency_key(_request(), _request())
    idempotency_key(
        _request(**{"Idempotency-Key": "mine"}), _request(**{"Idempotency-Key": "mine"})
    )
    for a, b in [({}, {"Idempotency-Key": generated}), ({"Idempotency-Key": "mine"}, {})]:
        with pytest.raises(AssertionError):
            idempotency_key(_request(**a), _request(**b))
    with pytest.raises(AssertionError):
        idempotency_key(
            _request(**{"Idempotency-Key": generated}), _request(**{"Idempotency-Key": "mine"})
        )


def test_sdk_headers_matcher() -> None:
    sent = {"Authorization": f"Bearer {SELLER_KEY}", "X-Svc-Environment": "test"}
    sdk_headers(_request(**sent), _request(**{k.lower(): v for k, v in sent.items()}))
    with pytest.raises(AssertionError):
        sdk_headers(_request(**sent), _request(**{**sent, "X-Svc-Environment": "live"}))
    with pytest.raises(AssertionError):
        sdk_headers(_request(**sent), _request(**{**sent, "Authorization": "Bearer other"}))


@pytest.mark.parametrize("name", CASSETTES)
def test_cassette_is_scrubbed_and_host_free(name: str) -> None:
    text = (CASSETTE_DIR / name).read_text()
    assert leaked_secrets(text, {}) == []
    assert "127.0.0.1" not in text and "localhost" not in text
    assert "uri: http://recorded.invalid/" in text
    if name != "discovery.yaml":
        assert f"Bearer {SELLER_KEY}" in text
