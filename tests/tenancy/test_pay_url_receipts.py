"""A pay-url answer names the receipt of the seller it paid, never another seller's.

On SQLite an ``UPDATE … RETURNING`` renders its columns unqualified, so a correlated
subquery in it once compared the receipts table with itself and answered the first
resource receipt of the environment, whoever owned it: with one seller per database no
test could see it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from reference_server.domain.paid_fetch import attempts
from reference_server.store import tables as t

from ..payurl.helpers import make_agent
from ..rails.helpers import open_rail_shop
from ..support import LiveServer


@pytest.mark.parametrize("rail", ["x402", "mpp"])
def test_each_seller_gets_its_own_receipt(server: LiveServer, rail: str) -> None:
    shops = [open_rail_shop(server, price="0.25", path=f"/v1/report-{n}") for n in range(3)]
    agent = make_agent(server, fund="5.00", allowed_rails=[rail])

    for shop in shops:
        paid = agent.client.spend.pay_url(shop.resource.gate_url)
        seller_receipt = paid.seller_receipt_id
        assert seller_receipt is not None
        with server.ctx.db.read() as conn:
            receipt = conn.execute(
                t.receipts.select().where(t.receipts.c.id == seller_receipt)
            ).one()
        assert (receipt.resource_id, receipt.tx_hash) == (shop.resource.id, paid.tx_hash)
        assert shop.seller.access.verify(seller_receipt, shop.resource.id).valid
        for other in shops:
            if other is not shop:
                assert not other.seller.access.verify(seller_receipt, other.resource.id).valid


def test_a_url_naming_another_sellers_receipt_is_not_believed(server: LiveServer) -> None:
    """A URL may answer any ``X-Svc-Receipt``: a receipt of this service counts as the
    seller's only when it is for the transaction the agent paid."""
    shop = open_rail_shop(server, price="0.25")
    agent = make_agent(server, fund="1.00", allowed_rails=["x402"])
    paid = agent.client.spend.pay_url(shop.resource.gate_url)
    theirs = paid.seller_receipt_id
    assert theirs is not None

    def row(tx_hash: str | None) -> object:
        return SimpleNamespace(
            status="succeeded",
            tx_hash=tx_hash,
            environment="test",
            response_headers={"x-svc-receipt": theirs},
        )

    with server.ctx.db.read() as conn:
        assert attempts.seller_receipt_id(conn, row("0x" + "cd" * 32)) is None
        assert attempts.seller_receipt_id(conn, row(None)) is None
        assert attempts.seller_receipt_id(conn, row(paid.tx_hash)) == theirs
