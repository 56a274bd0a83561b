"""Every dashboard form (Refund, Retry, Sign out, and the payouts' Set up, Refresh and
Withdraw) through the pages' input boundary: a hidden field holding a control character
or bytes that are not UTF-8 is refused (422, naming the problem), never a 500, and
nothing in the database changes."""

from __future__ import annotations

from urllib.parse import quote_from_bytes

from reference_server.app import served

from ..money.helpers import market
from ..server.test_page_forms import BAD, _database
from ..support import LiveServer
from .helpers import csrf_of, signed_in

DASHBOARD_FORMS = sorted(
    ep.path
    for ep in served()
    if ep.page and ep.method == "POST" and ep.path.startswith("/dashboard/")
)


def test_every_dashboard_form_refuses_a_bad_field(server: LiveServer) -> None:
    m = market(server)
    paid = m.agent.pay(resource_id=m.resource.id)
    client = signed_in(server, m.seller_owner_jwt)
    csrf = csrf_of(client.get("/dashboard/payments").text)
    actions = {
        "/dashboard/payments/{receipt_id}/refund": f"/dashboard/payments/{paid.receipt_id}/refund",
        "/dashboard/sign-out": "/dashboard/sign-out",
        "/dashboard/payouts/{seller_id}/onboard": f"/dashboard/payouts/{m.seller_id}/onboard",
        "/dashboard/payouts/{seller_id}/sync": f"/dashboard/payouts/{m.seller_id}/sync",
        "/dashboard/payouts/{seller_id}/withdraw": f"/dashboard/payouts/{m.seller_id}/withdraw",
        "/dashboard/webhooks/deliveries/{delivery_id}/retry": (
            "/dashboard/webhooks/deliveries/whd_none/retry"
        ),
    }
    assert sorted(actions) == DASHBOARD_FORMS
    before = _database(server)
    problems = []
    for action in actions.values():
        for name in (b"csrf", b"environment"):
            for bad in BAD:
                good = csrf.encode() if name == b"csrf" else b"test"
                pairs = [(b"csrf", csrf.encode()), (b"environment", b"test")]
                pairs = [(k, v) for k, v in pairs if k != name] + [
                    (name, good[:1] + bad + good[1:])
                ]
                body = b"&".join(
                    quote_from_bytes(k).encode() + b"=" + quote_from_bytes(v).encode()
                    for k, v in pairs
                )
                r = client.post(
                    action,
                    content=body,
                    headers={"Content-Type": "application/x-www-form-urlencoded"},
                )
                named = "U+" in r.text or "not UTF-8" in r.text
                if r.status_code != 422 or not named:
                    problems.append(f"{action} {name!r}={bad!r}: {r.status_code} {r.text[:200]}")
    assert not problems, "\n".join(problems)
    assert _database(server) == before
    assert client.get("/dashboard").status_code == 200  # still signed in
