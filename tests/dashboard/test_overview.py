"""The overview's numbers: sales summed per UTC day and rail by the database (day edges,
the 30-day window, only settled sales of the owner's own sellers), balances written as
money, the chart's y-axis; the Refund button only where the balance covers it; and
housekeeping's sweep of expired sign-in links and sessions."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import httpx
import pytest
from sqlalchemy import Connection, Table, func, select, update

import svc
from reference_server.domain import dashboard
from reference_server.routes.dashboard_view import axis
from reference_server.store import tables as t

from ..money.helpers import D, market
from ..support import LiveServer
from .helpers import link, signed_in


def _move(live: LiveServer, receipt_id: str, **values: object) -> None:
    with live.ctx.db.write() as conn:
        conn.execute(update(t.receipts).where(t.receipts.c.id == receipt_id).values(**values))


def test_sales_are_summed_per_utc_day_and_rail_within_30_days(server: LiveServer) -> None:
    m = market(server)
    stranger = market(server)  # another owner's sales the same days: never counted
    paid = [m.agent.pay(resource_id=m.resource.id).receipt_id for _ in range(6)]
    theirs = stranger.agent.pay(resource_id=stranger.resource.id).receipt_id
    now = server.ctx.now()
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    first_day = today - timedelta(days=29)
    _move(server, paid[0], created_at=today + timedelta(seconds=1))
    _move(server, paid[1], created_at=today + timedelta(seconds=2), rail="x402")
    _move(server, paid[2], created_at=today - timedelta(seconds=1))  # yesterday, last second
    _move(server, paid[3], created_at=first_day)  # the window's first instant
    _move(server, paid[4], created_at=first_day - timedelta(microseconds=1))  # outside
    _move(server, paid[5], created_at=today + timedelta(seconds=3), status="pending")
    _move(server, theirs, created_at=today + timedelta(seconds=1))

    with server.ctx.db.read() as conn:
        sales = dashboard.sales_by_day(conn, m.seller_owner_id, "test", now)
        live = dashboard.sales_by_day(conn, m.seller_owner_id, "live", now)

    day = lambda moment: moment.strftime("%Y-%m-%d")  # noqa: E731
    assert list(sales) == [day(first_day + timedelta(days=i)) for i in range(30)]
    assert sales[day(today)] == {"rill": 1_000_000, "x402": 1_000_000}
    assert sales[day(today - timedelta(days=1))] == {"rill": 1_000_000}
    assert sales[day(first_day)] == {"rill": 1_000_000}
    assert sum(sum(d.values()) for d in sales.values()) == 4_000_000
    assert all(not d for d in live.values())

    page = signed_in(server, m.seller_owner_jwt).get("/dashboard").text
    table = page[page.index('id="sales-table"') :]
    assert f'<td>{day(today)}</td><td class="amount">2.00</td>' in table
    assert day(first_day - timedelta(days=1)) not in table


def test_balances_are_money_and_the_chart_has_a_y_axis(server: LiveServer) -> None:
    m = market(server)
    m.agent.pay(resource_id=m.resource.id)
    m.agent.pay(resource_id=m.resource.id)
    page = signed_in(server, m.seller_owner_jwt).get("/dashboard").text
    sellers = page[page.index('id="sellers"') : page.index("</table>")]
    assert '<td class="amount">1.98</td>' in sellers and "1.980000" not in sellers
    labels = re.findall(r"<text [^>]*>([0-9.]+)</text>", page)
    assert labels == ["0.00", "0.50", "1.00", "1.50", "2.00"]


@pytest.mark.parametrize(
    ("top", "highest", "ticks"),
    [
        (0, 10_000, [0, 10_000]),
        (2_000_000, 2_000_000, [0, 500_000, 1_000_000, 1_500_000, 2_000_000]),
        (3_300_000, 4_000_000, [0, 1_000_000, 2_000_000, 3_000_000, 4_000_000]),
        (45_000, 60_000, [0, 20_000, 40_000, 60_000]),
        (123_456_789, 150_000_000, [0, 50_000_000, 100_000_000, 150_000_000]),
    ],
)
def test_the_y_axis_is_round_and_covers_the_highest_day(
    top: int, highest: int, ticks: list[int]
) -> None:
    assert axis(top) == (highest, ticks)


def test_no_refund_button_where_the_balance_cannot_cover_the_refund(server: LiveServer) -> None:
    m = market(server)
    kept = m.agent.pay(resource_id=m.resource.id).receipt_id
    owner = svc.Client(base_url=server.url, owner_jwt=m.seller_owner_jwt, environment="test")
    client = signed_in(server, m.seller_owner_jwt)
    assert f"Refund 1.00 USD of {kept}" in client.get("/dashboard/payments").text
    owner.sellers.recycle(m.seller_id, "0.01")  # 0.98 left: below the 0.99 the refund takes
    page = client.get("/dashboard/payments").text
    row = page[page.index(f'id="payment-{kept}"') :]
    row = row[: row.index("</tr>")]
    assert "settled" in row and "Refund" not in row
    assert m.seller.sellers.balance().balance == D("0.98")


def test_housekeeping_sweeps_expired_links_and_sessions(server: LiveServer) -> None:
    m = market(server)
    kept = signed_in(server, m.seller_owner_jwt)  # a live session
    old = signed_in(server, m.seller_owner_jwt)
    unused = link(server, m.seller_owner_jwt)
    now = server.ctx.now()
    with server.ctx.db.write() as conn:
        s, lk = t.dashboard_sessions, t.dashboard_links
        conn.execute(
            update(s)
            .where(s.c.owner_id == m.seller_owner_id, s.c.created_at == _newest(conn, s))
            .values(expires_at=now - timedelta(seconds=1))
        )
        conn.execute(
            update(lk)
            .where(lk.c.owner_id == m.seller_owner_id, lk.c.used_at.is_(None))
            .values(expires_at=now - timedelta(seconds=1))
        )
    assert dashboard.purge_expired(server.ctx.db, now=now) == 2
    assert kept.get("/dashboard").status_code == 200
    assert old.get("/dashboard").status_code == 401
    assert httpx.get(unused).status_code == 404
    with server.ctx.db.read() as conn:
        sessions = conn.execute(select(func.count()).select_from(t.dashboard_sessions)).scalar()
    assert sessions == 1
    assert dashboard.purge_expired(server.ctx.db, now=now) == 0


def _newest(conn: Connection, table: Table) -> datetime:
    newest: datetime = conn.execute(select(func.max(table.c.created_at))).scalar_one()
    return newest
