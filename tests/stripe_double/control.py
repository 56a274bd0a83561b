"""The double's control API (JSON under ``/_double/``) and the two pages a person can click
through: Connect onboarding and Checkout's card form."""

from __future__ import annotations

import html
import json
from typing import Any
from urllib.parse import parse_qsl

import httpx
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from .api import expire
from .errors import StripeError, error_response
from .objects import new_id
from .state import Fault, State

__all__ = ["routes"]

#: Cards the double declines; localstripe declines 4000000000000002 only when attaching it
#: to a customer, so the double charges its charge-declining card (…0341) in their place.
DECLINED_CARDS = {"4000000000000002", "4000000000000341", "4000000000009995"}
_LOCALSTRIPE_DECLINE = "4000000000000341"
#: The id localstripe's own webhook registration has (re-pointed on reset).
LOCALSTRIPE_WEBHOOK = "stripe-double"
#: localstripe's own events passed on to the webhook URL: all it emits but
#: ``payment_intent.payment_failed``, which the double sends itself for a declined Checkout
#: (once, with the declining error); ``charge.refunded`` (localstripe has none) comes from
#: the double when a refund through it succeeds.
LOCALSTRIPE_EVENTS = [
    "balance.available",
    "customer.created",
    "customer.deleted",
    "customer.source.created",
    "customer.subscription.created",
    "customer.subscription.deleted",
    "customer.updated",
    "invoice.created",
    "invoice.payment_failed",
    "invoice.payment_succeeded",
    "payment_intent.succeeded",
    "payout.canceled",
    "payout.created",
    "payout.failed",
    "payout.paid",
    "payout.updated",
    "plan.created",
    "product.created",
]


async def _json(request: Request) -> dict[str, Any]:
    raw = await request.body()
    loaded = json.loads(raw) if raw else {}
    if not isinstance(loaded, dict):
        raise StripeError(400, "a JSON object is expected")
    return loaded


class Control:
    """The ``/_double/`` endpoints over the double's state; localstripe is reached with
    ``http``."""

    def __init__(self, state: State, http: httpx.AsyncClient) -> None:
        self.state = state
        self.http = http
        self.emitter = state.emitter

    async def localstripe_webhook(self, url: str, secret: str) -> None:
        answer = await self.http.post(
            f"{self.state.localstripe}/_config/webhooks/{LOCALSTRIPE_WEBHOOK}",
            json={"url": url, "secret": secret, "events": LOCALSTRIPE_EVENTS},
        )
        answer.raise_for_status()

    async def set_webhook(self, request: Request) -> Response:
        body = await _json(request)
        self.emitter.url, self.emitter.secret = str(body["url"]), str(body["secret"])
        await self.localstripe_webhook(self.emitter.url, self.emitter.secret)
        return JSONResponse({"url": self.emitter.url})

    async def deliveries(self, request: Request) -> Response:
        return JSONResponse([d.as_json() for d in self.emitter.deliveries])

    async def redeliver(self, request: Request) -> Response:
        event = self.emitter.events.get(request.path_params["evt"])
        if event is None:
            return JSONResponse({"error": "no such event"}, 404)
        self.emitter.deliver(event)
        return JSONResponse({"event": event["id"]})

    def _acct(self, ident: str) -> dict[str, Any]:
        acct = self.state.accounts.get(ident)
        if acct is None:
            raise StripeError(404, f"No such account: '{ident}'", code="resource_missing")
        return acct

    def complete(self, ident: str) -> dict[str, Any]:
        acct = self._acct(ident)
        acct.update(details_submitted=True, payouts_enabled=True, charges_enabled=True)
        acct["requirements"].update(
            currently_due=[], eventually_due=[], past_due=[], disabled_reason=None
        )
        acct["capabilities"] = {name: "active" for name in acct["capabilities"]} or {
            "transfers": "active"
        }
        self.emitter.emit("account.updated", acct, account=ident)
        return acct

    async def complete_account(self, request: Request) -> Response:
        return JSONResponse(self.complete(request.path_params["acct"]))

    async def requirements(self, request: Request) -> Response:
        acct = self._acct(request.path_params["acct"])
        due = [str(item) for item in (await _json(request)).get("currently_due", [])]
        acct["requirements"].update(
            currently_due=due,
            past_due=list(due),
            disabled_reason="requirements.past_due" if due else None,
        )
        acct["payouts_enabled"] = not due
        self.emitter.emit("account.updated", acct, account=acct["id"])
        return JSONResponse(acct)

    async def onboard_page(self, request: Request) -> Response:
        acct = self._acct(request.path_params["acct"])
        link = html.escape(request.query_params.get("link", ""))
        return HTMLResponse(
            f"<!doctype html><title>Onboarding {acct['id']}</title>"
            f"<h1>Stripe Connect onboarding (test double)</h1><p>Account {acct['id']}</p>"
            f'<form method="post" action="/_double/onboard/{acct["id"]}?link={link}">'
            '<button type="submit">Complete onboarding</button></form>'
        )

    async def onboard_submit(self, request: Request) -> Response:
        ident = request.path_params["acct"]
        link = self.state.links.get(request.query_params.get("link", ""))
        if link is None or link["account"] != ident:
            return HTMLResponse("<p>This onboarding link is not valid.</p>", 400)
        self.complete(ident)
        return RedirectResponse(link["return_url"], 303)

    async def settle(self, request: Request) -> Response:
        ident = request.path_params["po"]
        payout = self.state.payouts.get(ident)
        if payout is None:
            raise StripeError(404, f"No such payout: '{ident}'", code="resource_missing")
        body = await _json(request)
        owner = self.state.payout_owner[ident]
        if payout["status"] not in ("pending", "in_transit"):
            raise StripeError(400, f"payout {ident} is already {payout['status']}")
        if body.get("outcome") == "paid":
            payout["status"] = "paid"
            self.emitter.emit("payout.paid", payout, account=owner)
        elif body.get("outcome") == "failed":
            payout.update(
                status="failed",
                failure_code=body.get("failure_code", "account_closed"),
                failure_message=body.get("failure_message", "The bank account has been closed."),
                failure_balance_transaction=new_id("txn"),
            )
            held = self.state.balances.setdefault(owner, {})
            held[payout["currency"]] = held.get(payout["currency"], 0) + payout["amount"]
            self.emitter.emit("payout.failed", payout, account=owner)
        else:
            raise StripeError(400, "outcome must be paid or failed", param="outcome")
        return JSONResponse(payout)

    def _session(self, ident: str) -> dict[str, Any]:
        session = self.state.sessions.get(ident)
        if session is None:
            raise StripeError(404, f"No such checkout.session: '{ident}'", code="resource_missing")
        return session

    async def pay(self, ident: str, card: str) -> tuple[bool, dict[str, Any]]:
        """Pay a session with ``card`` through localstripe; (paid?, the session or the
        failed PaymentIntent)."""
        session = self._session(ident)
        if session["status"] != "open":
            raise StripeError(400, f"checkout session {ident} is {session['status']}")
        auth = {"Authorization": self.state.session_auth.get(ident, "")}
        number = _LOCALSTRIPE_DECLINE if card in DECLINED_CARDS else card
        pm = await self.http.post(
            f"{self.state.localstripe}/v1/payment_methods",
            headers=auth,
            data={
                "type": "card",
                "card[number]": number,
                "card[exp_month]": "12",
                "card[exp_year]": "2034",
                "card[cvc]": "123",
            },
        )
        if pm.status_code != 200:
            raise StripeError(
                402, f"card refused: {pm.text}", type="card_error", code="card_declined"
            )
        meta = self.state.session_pi_metadata.get(ident, {})
        form = {
            "amount": str(session["amount_total"]),
            "currency": session["currency"],
            "payment_method": pm.json()["id"],
            "payment_method_types[]": "card",
            **{f"metadata[{k}]": v for k, v in meta.items()},
        }
        created = await self.http.post(
            f"{self.state.localstripe}/v1/payment_intents", headers=auth, data=form
        )
        created.raise_for_status()
        pi_id = created.json()["id"]
        confirmed = await self.http.post(
            f"{self.state.localstripe}/v1/payment_intents/{pi_id}/confirm", headers=auth
        )
        fetched = await self.http.get(
            f"{self.state.localstripe}/v1/payment_intents/{pi_id}", headers=auth
        )
        pi = fetched.json()
        if confirmed.status_code != 200 or pi.get("status") != "succeeded":
            error = confirmed.json().get("error", {}) if confirmed.status_code != 200 else {}
            pi["last_payment_error"] = pi.get("last_payment_error") or {
                "type": "card_error",
                "code": error.get("code", "card_declined"),
                "decline_code": "generic_decline",
                "message": error.get("message", "Your card was declined."),
            }
            self.emitter.emit("payment_intent.payment_failed", pi)
            return False, pi
        session.update(status="complete", payment_status="paid", payment_intent=pi_id)
        self.emitter.emit("checkout.session.completed", session)
        return True, session

    async def pay_json(self, request: Request) -> Response:
        card = str((await _json(request)).get("card", "4242424242424242"))
        paid, obj = await self.pay(request.path_params["cs"], card)
        return JSONResponse({"paid": paid, "object": obj}, 200 if paid else 402)

    async def checkout_page(self, request: Request) -> Response:
        session = self._session(request.path_params["cs"])
        return HTMLResponse(_checkout_html(session, None))

    async def checkout_submit(self, request: Request) -> Response:
        ident = request.path_params["cs"]
        form = dict(parse_qsl((await request.body()).decode()))
        card = form.get("card", "").replace(" ", "")
        paid, _ = await self.pay(ident, card)
        session = self._session(ident)
        if not paid:
            return HTMLResponse(_checkout_html(session, "Your card was declined."), 402)
        target = str(session["success_url"]).replace("{CHECKOUT_SESSION_ID}", ident)
        return RedirectResponse(target, 303)

    async def abandon(self, request: Request) -> Response:
        session = self._session(request.path_params["cs"])
        if session["status"] != "open":
            raise StripeError(400, f"checkout session {session['id']} is {session['status']}")
        expire(self.state, session)
        return JSONResponse(session)

    async def faults(self, request: Request) -> Response:
        body = await _json(request)
        fault = Fault(
            path_prefix=str(body["path_prefix"]),
            times=int(body.get("times", 1)),
            status=int(body["status"]) if "status" in body else None,
            drop=bool(body.get("drop", False)),
        )
        if fault.status is None and not fault.drop:
            raise StripeError(400, "a fault needs a status or drop: true")
        self.state.faults.append(fault)
        return JSONResponse({"path_prefix": fault.path_prefix, "times": fault.times})

    async def pend_refunds(self, request: Request) -> Response:
        self.state.pending_refunds = int((await _json(request))["times"])
        return JSONResponse({"times": self.state.pending_refunds})

    async def requests(self, request: Request) -> Response:
        return JSONResponse(self.state.requests)

    async def platform_balance(self, request: Request) -> Response:
        self.state.platform_available = int((await _json(request))["available"])
        return JSONResponse({"available": self.state.platform_available})

    async def reset(self, request: Request) -> Response:
        self.state.reset()
        sink = str(request.base_url).rstrip("/") + "/_double/sink"
        await self.localstripe_webhook(sink, "whsec_double_sink")
        return JSONResponse({"reset": True})

    async def sink(self, request: Request) -> Response:
        return Response(status_code=204)

    def routes(self) -> list[Route]:
        table = [
            ("/_double/webhooks", self.set_webhook, "POST"),
            ("/_double/deliveries", self.deliveries, "GET"),
            ("/_double/events/{evt}/redeliver", self.redeliver, "POST"),
            ("/_double/accounts/{acct}/complete", self.complete_account, "POST"),
            ("/_double/accounts/{acct}/requirements", self.requirements, "POST"),
            ("/_double/onboard/{acct}", self.onboard_page, "GET"),
            ("/_double/onboard/{acct}", self.onboard_submit, "POST"),
            ("/_double/payouts/{po}/settle", self.settle, "POST"),
            ("/_double/checkout/{cs}", self.checkout_page, "GET"),
            ("/_double/checkout/{cs}", self.checkout_submit, "POST"),
            ("/_double/checkout/{cs}/pay", self.pay_json, "POST"),
            ("/_double/checkout/{cs}/abandon", self.abandon, "POST"),
            ("/_double/faults", self.faults, "POST"),
            ("/_double/refunds/pending", self.pend_refunds, "POST"),
            ("/_double/requests", self.requests, "GET"),
            ("/_double/platform-balance", self.platform_balance, "POST"),
            ("/_double/reset", self.reset, "POST"),
            ("/_double/sink", self.sink, "POST"),
        ]
        return [Route(path, _guarded(fn), methods=[method]) for path, fn, method in table]


def routes(state: State, http: httpx.AsyncClient) -> list[Route]:
    return Control(state, http).routes()


def _guarded(handler: Any) -> Any:
    async def run(request: Request) -> Response:
        try:
            response: Response = await handler(request)
        except StripeError as err:
            return error_response(err)
        return response

    return run


def _checkout_html(session: dict[str, Any], problem: str | None) -> str:
    amount = f"{session['amount_total'] / 100:.2f} {str(session['currency']).upper()}"
    note = f'<p role="alert">{html.escape(problem)}</p>' if problem else ""
    return (
        f"<!doctype html><title>Checkout {session['id']}</title>"
        f"<h1>Pay {html.escape(amount)}</h1>{note}"
        f'<form method="post" action="/_double/checkout/{session["id"]}">'
        '<label>Card number <input name="card" value="4242 4242 4242 4242"></label>'
        '<button type="submit">Pay</button></form>'
    )
