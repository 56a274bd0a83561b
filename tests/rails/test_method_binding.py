"""A credential is bound to the method of the 402 it answers, on both rails.

MPP signs the method into its challenge; x402 binds the URL only, and a
``PAYMENT-SIGNATURE`` signed from a GET 402 was once accepted by POST and DELETE on the
same hosted gate.  Its challenge's route binding (``extensions.mppx.info``, echoed by x402
clients) names the method, and the gates hold the credential to it."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from ..support import LiveApp, LiveServer
from .helpers import RailShop, fresh_credential, funded_payer, get, receipts_of
from .test_seller_app import seller_app

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("rail", ["x402", "mpp"])
@pytest.mark.parametrize("kind", ["hosted", "app"])
async def test_a_credential_signed_for_get_pays_no_other_method(
    server: LiveServer, shop: RailShop, serve_app: Callable[..., LiveApp], kind: str, rail: str
) -> None:
    if kind == "hosted":
        url, others = shop.resource.gate_url, ("POST", "DELETE", "PUT", "PATCH")
    else:
        url, others = serve_app(seller_app(shop)).url + "/v1/report", ("POST",)
    credential = await fresh_credential(url, funded_payer(server), rail, method="GET")

    async with httpx.AsyncClient() as http:
        for method in others:
            r = await http.request(method, url, headers=credential)
            assert r.status_code == 402, (method, r.text)
            assert r.json()["error"]["details"]["reason"] == "receipt_refused", method
            assert receipts_of(server, shop.resource.id) == []
    assert get(url, credential).status_code == 200  # the method it was signed for
    assert len(receipts_of(server, shop.resource.id)) == 1
