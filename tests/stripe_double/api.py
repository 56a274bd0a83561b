"""The Stripe API endpoints localstripe lacks, in Stripe's shapes: Connect accounts, account
and login links, transfers, connected-account payouts and balances, Checkout Sessions, and
the double's own events."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import attrs

from .errors import StripeError, balance_insufficient, missing, no_such
from .objects import new_id, now, template
from .state import State

__all__ = ["Call", "route"]

#: What a new connected account still owes before it can be paid out.
INITIAL_DUE = ["external_account", "individual.verification.document", "tos_acceptance.date"]


@attrs.define
class Call:
    """One API request as the handlers see it."""

    state: State
    method: str
    path: str
    params: dict[str, Any]
    account: str | None
    idempotency_key: str | None
    authorization: str
    base_url: str
    match: dict[str, str]

    def request_ref(self) -> dict[str, Any]:
        return {"id": new_id("req"), "idempotency_key": self.idempotency_key}


Handler = Callable[[Call], dict[str, Any]]


def _int(params: dict[str, Any], name: str, *, required: bool = True) -> int:
    raw = params.get(name)
    if raw is None:
        if required:
            raise missing(name)
        return 0
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise StripeError(400, f"Invalid integer: {raw}", param=name) from None
    if value < 0:
        raise StripeError(400, "This value must be greater than or equal to 0.", param=name)
    return value


def _str(params: dict[str, Any], name: str) -> str:
    raw = params.get(name)
    if not isinstance(raw, str) or raw == "":
        raise missing(name)
    return raw


def _metadata(params: dict[str, Any], name: str = "metadata") -> dict[str, str]:
    raw = params.get(name) or {}
    if not isinstance(raw, dict):
        raise StripeError(400, "Invalid object", param=name)
    return {str(k): str(v) for k, v in raw.items()}


def _account(call: Call, ident: str, param: str = "id") -> dict[str, Any]:
    found = call.state.accounts.get(ident)
    if found is None:
        raise no_such("account", ident, param)
    return found


# Connect accounts -------------------------------------------------------------------


def create_account(call: Call) -> dict[str, Any]:
    p = call.params
    kind = p.get("type", "express")
    if kind not in ("express", "standard", "custom"):
        raise StripeError(400, f"Invalid type: {kind}", param="type")
    acct = template("account")
    requested = p.get("capabilities") or {}
    acct.update(
        id=new_id("acct"),
        type=kind,
        country=p.get("country", "US"),
        email=p.get("email"),
        metadata=_metadata(p),
        created=now(),
        details_submitted=False,
        payouts_enabled=False,
        charges_enabled=False,
        capabilities={name: "inactive" for name in requested} if requested else {},
    )
    acct["requirements"].update(
        currently_due=list(INITIAL_DUE),
        eventually_due=list(INITIAL_DUE),
        past_due=[],
        disabled_reason="requirements.past_due",
    )
    acct["external_accounts"] = {
        "object": "list",
        "data": [],
        "has_more": False,
        "total_count": 0,
        "url": f"/v1/accounts/{acct['id']}/external_accounts",
    }
    call.state.accounts[acct["id"]] = acct
    call.state.balances[acct["id"]] = {}
    return acct


def get_account(call: Call) -> dict[str, Any]:
    return _account(call, call.match["id"])


def update_account(call: Call) -> dict[str, Any]:
    acct = _account(call, call.match["id"])
    if "metadata" in call.params:
        merged = {**acct["metadata"], **_metadata(call.params)}
        acct["metadata"] = {k: v for k, v in merged.items() if v != ""}
    if "email" in call.params:
        acct["email"] = call.params["email"]
    return acct


def create_account_link(call: Call) -> dict[str, Any]:
    p = call.params
    acct = _account(call, _str(p, "account"), "account")
    if _str(p, "type") not in ("account_onboarding", "account_update"):
        raise StripeError(400, f"Invalid type: {p['type']}", param="type")
    link_id = new_id("link")
    call.state.links[link_id] = {
        "account": acct["id"],
        "return_url": _str(p, "return_url"),
        "refresh_url": _str(p, "refresh_url"),
    }
    created = now()
    return {
        **template("account_link"),
        "url": f"{call.base_url}/_double/onboard/{acct['id']}?link={link_id}",
        "created": created,
        "expires_at": created + 300,
    }


def create_login_link(call: Call) -> dict[str, Any]:
    acct = _account(call, call.match["id"], "account")
    if acct["type"] != "express":
        raise StripeError(
            400,
            "Cannot create a login link for an account using the Stripe Dashboard; only "
            "Express accounts have one.",
            param="account",
        )
    return {
        **template("login_link"),
        "url": f"{call.base_url}/_double/express/{acct['id']}",
        "created": now(),
    }


# Transfers, connected payouts and balances ------------------------------------------


def create_transfer(call: Call) -> dict[str, Any]:
    p = call.params
    amount = _int(p, "amount")
    currency = _str(p, "currency").lower()
    dest = _account(call, _str(p, "destination"), "destination")
    state = call.state
    if state.platform_available < amount:
        raise balance_insufficient()
    state.platform_available -= amount
    held = state.balances.setdefault(dest["id"], {})
    held[currency] = held.get(currency, 0) + amount
    transfer = template("transfer")
    transfer.update(
        id=new_id("tr"),
        amount=amount,
        currency=currency,
        destination=dest["id"],
        destination_payment=new_id("py"),
        balance_transaction=new_id("txn"),
        transfer_group=p.get("transfer_group"),
        description=p.get("description"),
        metadata=_metadata(p),
        created=now(),
    )
    transfer["reversals"]["url"] = f"/v1/transfers/{transfer['id']}/reversals"
    state.transfers[transfer["id"]] = transfer
    state.emitter.emit("transfer.created", transfer, request=call.request_ref())
    return transfer


def get_transfer(call: Call) -> dict[str, Any]:
    found = call.state.transfers.get(call.match["id"])
    if found is None:
        raise no_such("transfer", call.match["id"])
    return found


def _connected(call: Call) -> dict[str, Any]:
    if call.account is None:
        raise StripeError(400, "This request needs a Stripe-Account header.")
    return _account(call, call.account, "Stripe-Account")


def create_payout(call: Call) -> dict[str, Any]:
    p = call.params
    acct = _connected(call)
    amount = _int(p, "amount")
    currency = _str(p, "currency").lower()
    held = call.state.balances.setdefault(acct["id"], {})
    if held.get(currency, 0) < amount:
        raise balance_insufficient()
    held[currency] -= amount
    payout = template("payout")
    created = now()
    payout.update(
        id=new_id("po"),
        amount=amount,
        currency=currency,
        status="pending",
        automatic=False,
        created=created,
        arrival_date=created + 2 * 86400,
        balance_transaction=new_id("txn"),
        destination=new_id("ba"),
        description=p.get("description"),
        statement_descriptor=p.get("statement_descriptor"),
        method=p.get("method", "standard"),
        metadata=_metadata(p),
        reconciliation_status="not_applicable",
    )
    call.state.payouts[payout["id"]] = payout
    call.state.payout_owner[payout["id"]] = acct["id"]
    return payout


def get_payout(call: Call) -> dict[str, Any]:
    ident = call.match["id"]
    if call.state.payout_owner.get(ident) != call.account:
        raise no_such("payout", ident)
    return call.state.payouts[ident]


def get_balance(call: Call) -> dict[str, Any]:
    acct = _connected(call)
    held = call.state.balances.get(acct["id"], {}) or {"usd": 0}
    balance = template("balance")
    balance["available"] = [
        {"amount": amount, "currency": cur, "source_types": {"card": amount}}
        for cur, amount in sorted(held.items())
    ]
    balance["pending"] = [
        {"amount": 0, "currency": cur, "source_types": {"card": 0}} for cur in sorted(held)
    ]
    balance["connect_reserved"] = [{"amount": 0, "currency": cur} for cur in sorted(held)]
    return balance


# Checkout Sessions ------------------------------------------------------------------


def create_session(call: Call) -> dict[str, Any]:
    p = call.params
    if p.get("mode") != "payment":
        raise StripeError(400, "Only mode=payment is supported by the double.", param="mode")
    items = p.get("line_items")
    if not isinstance(items, list) or not items:
        raise missing("line_items")
    total, currency = 0, None
    for i, item in enumerate(items):
        data = item.get("price_data") if isinstance(item, dict) else None
        if not isinstance(data, dict):
            raise missing(f"line_items[{i}][price_data]")
        currency = _str(data, "currency").lower()
        total += _int(data, "unit_amount") * _int(item, "quantity")
    session = template("checkout.session")
    created = now()
    ident = "cs_test_" + new_id("x")[2:]
    pi_data = p.get("payment_intent_data") or {}
    session.update(
        id=ident,
        mode="payment",
        status="open",
        payment_status="unpaid",
        url=f"{call.base_url}/_double/checkout/{ident}",
        amount_total=total,
        amount_subtotal=total,
        currency=currency,
        created=created,
        expires_at=_int(p, "expires_at", required=False) or created + 86400,
        success_url=p.get("success_url"),
        cancel_url=p.get("cancel_url"),
        client_reference_id=p.get("client_reference_id"),
        customer_email=p.get("customer_email"),
        metadata=_metadata(p),
        payment_intent=None,
        client_secret=None,
        customer=None,
        customer_details=None,
        invoice=None,
        subscription=None,
        setup_intent=None,
        payment_link=None,
        livemode=False,
    )
    session["total_details"] = {"amount_discount": 0, "amount_shipping": 0, "amount_tax": 0}
    # Kept beside the session (Stripe does not return it): the PaymentIntent's metadata.
    session_meta = _metadata(pi_data, "metadata") if isinstance(pi_data, dict) else {}
    call.state.sessions[ident] = session
    call.state.session_auth[ident] = call.authorization
    call.state.session_pi_metadata[ident] = session_meta
    return session


def _session(call: Call) -> dict[str, Any]:
    found = call.state.sessions.get(call.match["id"])
    if found is None:
        raise no_such("checkout.session", call.match["id"], "session")
    return found


def get_session(call: Call) -> dict[str, Any]:
    return _session(call)


def expire_session(call: Call) -> dict[str, Any]:
    session = _session(call)
    if session["status"] != "open":
        raise StripeError(
            400,
            f'Only Checkout Sessions with a status in ["open"] can be expired. This Checkout '
            f'Session has a status of "{session["status"]}".',
        )
    expire(call.state, session, request=call.request_ref())
    return session


def expire(state: State, session: dict[str, Any], *, request: dict[str, Any] | None = None) -> None:
    session["status"] = "expired"
    state.emitter.emit("checkout.session.expired", session, request=request)


# The double's events ----------------------------------------------------------------


def get_event(call: Call) -> dict[str, Any]:
    found = call.state.emitter.events.get(call.match["id"])
    if found is None:
        raise no_such("event", call.match["id"])
    return found


def list_events(call: Call) -> dict[str, Any]:
    events = sorted(call.state.emitter.events.values(), key=lambda e: e["created"], reverse=True)
    kind = call.params.get("type")
    if isinstance(kind, str):
        events = [e for e in events if e["type"] == kind]
    limit = _int(call.params, "limit", required=False) or 10
    return {
        "object": "list",
        "url": "/v1/events",
        "has_more": len(events) > limit,
        "data": events[:limit],
    }


@attrs.frozen
class Route:
    method: str
    pattern: re.Pattern[str]
    handler: Handler
    #: "yes": only with a Stripe-Account header; "no": only without; "any": either.
    account: str = "any"


def _r(method: str, path: str, handler: Handler, account: str = "any") -> Route:
    regex = re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", path)
    return Route(method, re.compile(f"^{regex}$"), handler, account)


ROUTES = [
    _r("POST", "/v1/accounts", create_account),
    _r("GET", "/v1/accounts/{id}", get_account),
    _r("POST", "/v1/accounts/{id}", update_account),
    _r("POST", "/v1/account_links", create_account_link),
    _r("POST", "/v1/accounts/{id}/login_links", create_login_link),
    _r("POST", "/v1/transfers", create_transfer),
    _r("GET", "/v1/transfers/{id}", get_transfer),
    _r("POST", "/v1/payouts", create_payout, "yes"),
    _r("GET", "/v1/payouts/{id}", get_payout, "yes"),
    _r("GET", "/v1/balance", get_balance, "yes"),
    _r("POST", "/v1/checkout/sessions", create_session),
    _r("GET", "/v1/checkout/sessions/{id}", get_session),
    _r("POST", "/v1/checkout/sessions/{id}/expire", expire_session),
    _r("GET", "/v1/events", list_events),
]


def route(
    method: str, path: str, account: str | None, state: State
) -> tuple[Handler, dict[str, str]] | None:
    """The double's own handler for a request, or None to forward it to localstripe."""
    m = re.match(r"^/v1/events/(?P<id>[^/]+)$", path)
    if method == "GET" and m and m["id"] in state.emitter.events:
        return get_event, m.groupdict()
    for r in ROUTES:
        if r.method != method or (r.account == "yes" and account is None):
            continue
        found = r.pattern.match(path)
        if found:
            return r.handler, found.groupdict()
    return None
