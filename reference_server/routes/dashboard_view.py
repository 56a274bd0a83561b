"""How the dashboard's pages show what they read: the page frame, the sales chart (an SVG
drawn here, so no script or CDN is needed) and the rows of its tables."""

from __future__ import annotations

import itertools
from typing import Any

from sqlalchemy import Row
from starlette.responses import HTMLResponse

from svc import Seller
from svc.money import format_amount, format_micros

from ..domain import dashboard
from ..timeutil import as_utc
from ..web import pages
from ..web.endpoint import Call

__all__ = ["axis", "chart", "endpoint", "message", "page", "payment", "seller"]

#: Bar colours per rail, each dark enough on white for a 3:1 contrast; others: grey.
_COLOURS = {"rill": "#1a5fb4", "x402": "#26734d", "mpp": "#9c4400", "card": "#813d9c"}
_OTHER = "#555555"
_WIDTH, _HEIGHT, _TOP, _LEFT = 600, 200, 10, 60


def message(title: str, *lines: str, status: int = 200, next_step: str = "") -> HTMLResponse:
    return pages.render(
        "page_message.html", status, title=title, lines=list(lines), next_step=next_step
    )


def page(
    call: Call, template: str, title: str, environment: str, session: str, **values: Any
) -> HTMLResponse:
    """A dashboard page: its navigation, the environment switch and the sign-out form."""
    return pages.render(
        template,
        title=title,
        environment=environment,
        csrf=dashboard.csrf_token(call.ctx, session),
        path=call.request.url.path,
        **values,
    )


def axis(top: int) -> tuple[int, list[int]]:
    """A round maximum for the y-axis at or above ``top`` micros, and its ticks from zero:
    steps of 1, 2 or 5 times a power of ten, at most four of them (a cent at least)."""
    step = next(
        m * 10**power for power in itertools.count(4) for m in (1, 2, 5) if m * 10**power * 4 >= top
    )
    highest = max(-(-top // step), 1) * step
    return highest, list(range(0, highest + 1, step))


def chart(sales: dict[str, dict[str, int]]) -> dict[str, Any]:
    """Stacked bars, one per day, one segment per rail, over a y-axis in USD; the total is
    written in each bar's title (and the table beside it) for those who do not see the
    picture."""
    days = list(sales)
    rails = sorted({rail for day in sales.values() for rail in day})
    top = max((sum(day.values()) for day in sales.values()), default=0)
    highest, ticks = axis(top)
    baseline = _HEIGHT + _TOP
    step = _WIDTH / max(len(days), 1)
    bars = []
    for i, day in enumerate(days):
        y = float(baseline)
        for rail in rails:
            amount = sales[day].get(rail, 0)
            if not amount:
                continue
            height = _HEIGHT * amount / highest
            y -= height
            bars.append(
                {
                    "x": round(_LEFT + i * step + 1, 1),
                    "y": round(y, 1),
                    "width": round(step - 2, 1),
                    "height": round(height, 1),
                    "colour": _COLOURS.get(rail, _OTHER),
                    "title": f"{day} {rail}: {format_micros(amount)} USD",
                    "rail": rail,
                }
            )
    totals = [
        {"day": day, "total": format_micros(sum(sales[day].values()))} for day in days if sales[day]
    ]
    return {
        "width": _LEFT + _WIDTH,
        "height": baseline + 20,
        "left": _LEFT,
        "baseline": baseline,
        "ticks": [
            {"y": round(baseline - _HEIGHT * tick / highest, 1), "label": format_micros(tick)}
            for tick in ticks
        ],
        "bars": bars,
        "top": format_micros(top),
        "first": days[0] if days else "",
        "last": days[-1] if days else "",
        "legend": [{"rail": r, "colour": _COLOURS.get(r, _OTHER)} for r in rails],
        "totals": totals,
    }


def seller(model: Seller) -> dict[str, Any]:
    balance = "" if model.balance is None else format_amount(model.balance)
    return {"id": model.id, "name": model.name, "balance": balance}


def payment(row: Row[Any], refundable: bool) -> dict[str, Any]:
    refunded = int(row.refunded_micros)
    state = row.status
    if refunded and refunded >= int(row.amount_micros):
        state = "refunded"
    elif refunded:
        state = "partly refunded"
    return {
        "id": row.id,
        "created_at": as_utc(row.created_at).strftime("%Y-%m-%d %H:%M"),
        "amount": format_micros(int(row.amount_micros)),
        "refunded": format_micros(refunded),
        "rail": row.rail,
        "state": state,
        "refundable": refundable,
    }


def endpoint(row: Row[Any], deliveries: list[Row[Any]]) -> dict[str, Any]:
    return {
        "id": row.id,
        "url": row.url,
        "status": row.status,
        "deliveries": [
            {
                "id": d.id,
                "type": d.type,
                "status": d.status,
                "attempts": d.attempts,
                "last_status_code": d.last_status_code,
                "created_at": as_utc(d.created_at).strftime("%Y-%m-%d %H:%M:%S"),
                "retryable": d.status not in ("succeeded", "cancelled"),
            }
            for d in deliveries
        ],
    }
