"""What the generated request specs (:mod:`svc._endpoints`) call: the SDK's argument
types, the checks and conversions of arguments, and the body builders of the routes whose
arguments are not their body's fields one to one.

Hand-written, unlike ``_endpoints``: a route declares the builder it needs by name
(``Sdk(build=...)`` beside its ``Endpoint``) and ``python -m reference_server.sdk_codegen``
writes the call, importing what it uses of the names this module defines (so it keeps no
``__all__``).  Arguments are checked here, before anything is sent: a float price or
seven decimal places fail locally with ``ValueError`` instead of reaching the service.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import attrs

from ._models import Capabilities, Health, Jwks, ResourceMetadata
from ._spec import RequestSpec, Role, as_json_object, as_model, as_text
from ._types import NotGiven
from .bodies import (
    ClaimHandle,
    ConnectOnboard,
    ConnectType,
    CreateListener,
    CreateTopUp,
    CreateWalletKey,
    CreateWebhook,
    Pay,
    PayUrl,
    Period,
    RedeemCredential,
    ReleaseClaim,
    RequestChallenge,
    SettleClaim,
    UpdateConnect,
    UpdateResource,
    UpdateWalletKey,
    UpdateWebhook,
    VerifyReceipt,
    WalletKeyPolicy,
    WebhookStatus,
    to_json,
)
from .money import format_amount, parse_amount
from .receipts import rail_credentials
from .wire import unstructure

#: A price: ``Decimal("0.05")``, ``"0.05"`` or a whole number of dollars.  Never a float.
Amount = Decimal | str | int
#: Resource metadata as a plain dict or the typed model.
Metadata = Mapping[str, Any] | ResourceMetadata
#: The choices of the types above (from :mod:`svc.bodies`, which the server reads by).
PERIODS: tuple[str, ...] = get_args(Period)
WEBHOOK_STATUSES: tuple[str, ...] = get_args(WebhookStatus)
#: Most items one page of any list holds (``limit``; the service's default is 20).
MAX_PAGE_LIMIT = 100
TextDocument = Literal["llms.txt", "llms-full.txt"]
JSONDocument = Literal[".well-known/agent.json", "agent-openapi.json"]
DISCOVERY_DOCUMENTS: tuple[str, ...] = get_args(TextDocument) + get_args(JSONDocument)


def _amount(value: Amount, name: str = "amount") -> str:
    """A sum of money to move or a price: in the amount grammar, more than zero, sent in
    canonical form.  The grammar is :func:`parse_amount`'s, the one the server reads with."""
    return format_amount(positive(value, name))


def positive(value: Amount, name: str = "amount") -> Decimal:
    """:func:`_amount` as the :class:`~decimal.Decimal` a body of :mod:`svc.bodies` holds
    (sent in canonical form)."""
    amount = parse_amount(value, name=name)
    if amount <= 0:
        raise ValueError(f"{name} must be greater than zero, got {format_amount(amount)}")
    return amount


def _metadata(value: Metadata) -> dict[str, Any]:
    if isinstance(value, ResourceMetadata):
        # The typed model writes unset optional keys as null; leave them out instead.
        flat: dict[str, Any] = unstructure(value)
        return {k: v for k, v in flat.items() if v is not None}
    return dict(value)


def _limit(name: str, value: Amount) -> Decimal:
    """A policy limit: an amount that may be zero (nothing allowed); never negative."""
    return parse_amount(value, name=name)


def _period(_: str, value: object) -> str:
    if not isinstance(value, str) or value not in PERIODS:
        raise ValueError(
            f"period must be one of {PERIODS} ('none': the allowance never resets), got {value!r}"
        )
    return value


def _seconds(name: str, value: Any) -> int:
    """A whole number of seconds (a bool is not one)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be a whole number of seconds, got {value!r}")
    return value


def _names(name: str, value: Sequence[str]) -> list[str]:
    """A list of hosts or rails; a lone string is refused rather than split into letters."""
    if isinstance(value, str):
        raise ValueError(f"{name} must be a list of strings, not a single string")
    items = list(value)
    for item in items:
        if not isinstance(item, str) or not item:
            raise ValueError(f"{name} must hold non-empty strings, got {item!r}")
    return items


def page_query(limit: int | None, starting_after: str | None) -> dict[str, str] | None:
    """The one paging contract of every list: ``limit`` (1 to :data:`MAX_PAGE_LIMIT`) and
    ``starting_after`` (the id of the previous page's last item), sent only when given."""
    query: dict[str, str] = {}
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int) or not 0 < limit <= MAX_PAGE_LIMIT:
            raise ValueError(
                f"limit must be a whole number from 1 to {MAX_PAGE_LIMIT}, got {limit!r}"
            )
        query["limit"] = str(limit)
    if starting_after is not None:
        query["starting_after"] = _text("starting_after", starting_after)
    return query or None


def _text(name: str, value: object) -> str:
    """A required string: sent in a body, or a path parameter (the client encodes it)."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name} must be a non-empty string, got {value!r}")
    return value


def _policy(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The ``policy`` object: fields not given are left out, ``None`` is sent as ``null``
    (which clears that limit on update; ``period`` cannot be cleared).

    Built from :class:`~svc.bodies.WalletKeyPolicy`; :func:`~svc.bodies.to_json` leaves
    out every ``None``, so the fields given as ``None`` are added back as ``null`` after
    it.  The object is nested in the body, so its ``null`` values survive encoding (only
    top-level ``None`` values are dropped by the client).
    """
    given = {n: v for n, v in fields.items() if not isinstance(v, NotGiven)}
    cleared = [n for n, v in given.items() if v is None and n != "period"]
    checked = {n: check(n, given[n]) for n, check in _POLICY.items() if n in given.keys() - cleared}
    policy = {**to_json(WalletKeyPolicy(**checked)), **dict.fromkeys(cleared)}
    return {name: policy[name] for name in _POLICY if name in policy}


#: The policy's fields in the order they are sent, each with its check.
_POLICY: dict[str, Callable[[str, Any], Any]] = {
    "allowance": _limit,
    "max_per_tx": _limit,
    "budget": _limit,
    "period": _period,
    "allowed_hosts": _names,
    "allowed_rails": _names,
    "approval_above": _limit,
    "approval_hosts": _names,
    "approval_ttl_seconds": _seconds,
}


def seller_route(
    seller_id: str | None, path: str, owner_path: str, **path_params: str
) -> dict[str, Any]:
    """Where a seller route is: ``path`` with the seller key, or, given ``seller_id``, its
    owner dashboard twin ``owner_path`` (under ``/sellers/{seller_id}``) with the owner JWT
    (the same body and answer; the service answers 404 for another owner's seller)."""
    if seller_id is None:
        return {"path": path, "role": Role.SELLER, "path_params": path_params}
    return {
        "path": owner_path,
        "role": Role.OWNER,
        "path_params": {"seller_id": seller_id, **path_params},
    }


# --- body builders: one per route whose arguments are not its body's fields one to one ----


def checked(cls: type) -> Callable[..., dict[str, Any]]:
    """The builder of a body whose fields are the arguments of their names, each checked
    by its field's type before anything is sent: an amount more than zero, a string not
    empty, a choice one of its values (``None`` is "not given")."""
    hints = get_type_hints(cls)

    def build(**fields: Any) -> dict[str, Any]:
        return to_json(cls(**{name: _check(name, hints[name], v) for name, v in fields.items()}))

    return build


def _check(name: str, hint: Any, value: Any) -> Any:
    """``value`` as the field typed ``hint`` takes it, or a ``ValueError`` naming it."""
    types = get_args(hint) if get_origin(hint) in (Union, UnionType) else (hint,)
    if value is None:
        return None
    if Decimal in types:
        return positive(value, name)
    for choices in (get_args(t) for t in types if get_origin(t) is Literal):
        if value not in choices:
            raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return _text(name, value) if str in types else value


#: Bodies whose arguments need no more than :func:`checked`.
pay_body = checked(Pay)
verify_receipt_body = checked(VerifyReceipt)
gate_settle_body = checked(SettleClaim)
gate_release_body = checked(ReleaseClaim)
pay_url_body = checked(PayUrl)


def connect_onboard_body(country: str, type: ConnectType | None) -> dict[str, Any]:
    if not isinstance(country, str) or len(country) != 2 or not country.isascii():
        raise ValueError(f"country must be a two-letter country code such as 'US', got {country!r}")
    return checked(ConnectOnboard)(country=country.upper(), type=type)


def connect_update_body(
    auto_payout: bool | NotGiven, auto_payout_minimum: Amount | NotGiven | None
) -> dict[str, Any]:
    """Only the fields given; ``auto_payout_minimum=None`` is sent as ``null`` (back to the
    server's default)."""
    if not isinstance(auto_payout, NotGiven | bool):
        raise ValueError(f"auto_payout must be True or False, got {auto_payout!r}")
    minimum = auto_payout_minimum
    if minimum is not None and not isinstance(minimum, NotGiven):
        minimum = _limit("auto_payout_minimum", minimum)
    needs = "update needs auto_payout=... or auto_payout_minimum=..."
    return _changes(UpdateConnect, needs, auto_payout=auto_payout, auto_payout_minimum=minimum)


def _changes(cls: type, needs: str, **fields: Any) -> dict[str, Any]:
    """An update's body: the fields given, in the class's order, one given as ``None`` sent
    as ``null`` (it clears the field, or sets it back to the server's default); ``needs``
    is the ``ValueError`` when none is given."""
    given = {name: value for name, value in fields.items() if not isinstance(value, NotGiven)}
    sent = to_json(cls(**given))
    body = {n: sent.get(n) for n in attrs.fields_dict(cls) if n in sent or n in given}
    if not body:
        raise ValueError(needs)
    return body


def create_resource_body(**fields: Any) -> dict[str, Any]:
    return {name: value for name, value in _resource(fields).items() if value is not None}


def update_resource_body(**fields: Any) -> dict[str, Any]:
    """``None`` leaves a field as it is, except ``method`` and ``body_hint``, where
    ``None`` clears (any method; no hint) and leaving them out keeps them."""
    return {
        name: value
        for name, value in _resource(fields).items()
        if not isinstance(value, NotGiven) and (value is not None or name in _CLEARED)
    }


def _resource(fields: dict[str, Any]) -> dict[str, Any]:
    """A resource's fields as sent, in this order: the amount checked, the metadata flat,
    the body hint a plain dict."""
    body = {name: fields[name] for name in _RESOURCE_FIELDS if name in fields}
    for name, convert in _RESOURCE_CONVERT.items():
        if body.get(name) is not None and not isinstance(body[name], NotGiven):
            body[name] = convert(body[name])
    return body


#: The order a resource's fields are sent in: ``kind``, then ``UpdateResource``'s.
_RESOURCE_FIELDS = ("kind", "pricing", *attrs.fields_dict(UpdateResource))
_RESOURCE_CONVERT: dict[str, Callable[[Any], Any]] = {
    **{
        name: functools.partial(_amount, name=name)
        for name in ("amount", "unit_price", "max_amount", "fallback_amount")
    },
    "metadata": _metadata,
    "body_hint": dict,
}
#: The fields of an update that ``None`` clears (sent as ``null``).
_CLEARED = ("method", "body_hint")


def directory_query(
    *, limit: int | None, starting_after: str | None, max_amount: Amount | None, **filters: Any
) -> dict[str, str] | None:
    """A page of the directory and its filters (``kind``, ``q``, ``max_amount``) given."""
    query = dict(page_query(limit, starting_after) or {})
    if max_amount is not None:
        filters["max_amount"] = _amount(max_amount, "max_amount")
    query.update((name, value) for name, value in filters.items() if value is not None)
    return query or None


def listen_query(*, wait: float) -> dict[str, str]:
    """How long a listener's poll may wait for a delivery (seconds)."""
    return {"wait": str(wait)}


def create_wallet_key_body(*, name: str | None, **policy: Any) -> dict[str, Any]:
    """On create, a limit given as ``None`` is no limit: the same as leaving it out."""
    limits = _policy({field: value for field, value in policy.items() if value is not None})
    # The policy goes in as built (see _policy), after to_json has dropped None.
    return {**to_json(CreateWalletKey(name=name)), "policy": limits}


def update_wallet_key_body(*, name: str | NotGiven, **policy: Any) -> dict[str, Any]:
    body = to_json(
        UpdateWalletKey(name=None if isinstance(name, NotGiven) else _text("name", name))
    )
    if limits := _policy(policy):
        body["policy"] = limits
    if not body:
        raise ValueError("update needs at least one field to change")
    return body


def top_up_body(*, amount: Amount, method: str | None) -> dict[str, Any]:
    body = to_json(CreateTopUp(amount=positive(amount)))
    if method is not None:
        body["method"] = method
    return body


def pay_url_quote_body(**fields: Any) -> dict[str, Any]:
    return pay_url_body(**fields, dry_run=True)


def handle_body(*, handle: str) -> dict[str, Any]:
    if _text("handle", handle) == "@":
        raise ValueError("handle must have a name after '@'")
    return to_json(ClaimHandle(handle=handle))


def gate_challenge_body(*, resource_id: str, method: str, url: str) -> dict[str, Any]:
    """``method`` an HTTP method's name (sent upper case), ``url`` absolute http(s)."""
    build = checked(RequestChallenge)
    return build(resource_id=resource_id, method=_method(method), url=_absolute_url(url))


def gate_redeem_body(
    *, resource_id: str, method: str, url: str, headers: Mapping[str, str]
) -> dict[str, Any]:
    """Only ``PAYMENT-SIGNATURE`` (x402) and ``Authorization`` (MPP's ``Payment`` scheme)
    are sent: any other header, and an ``Authorization`` of another scheme (the app's own
    login), stays with the seller's app."""
    credentials = rail_credentials(headers)
    if not credentials:
        raise ValueError("headers hold no PAYMENT-SIGNATURE or 'Authorization: Payment' credential")
    build = checked(RedeemCredential)
    method, url = _method(method), _absolute_url(url)
    return build(resource_id=resource_id, method=method, url=url, headers=dict(credentials))


def create_listener_body(*, events: Sequence[str] | None) -> dict[str, Any]:
    return to_json(CreateListener(events=_events(events)))


def create_webhook_body(
    *, url: str, events: Sequence[str] | None, description: str | None
) -> dict[str, Any]:
    if description is not None and not isinstance(description, str):
        raise ValueError(f"description must be a string, got {description!r}")
    return to_json(
        CreateWebhook(url=_text("url", url), events=_events(events), description=description)
    )


def update_webhook_body(
    *,
    events: Sequence[str] | NotGiven | None,
    description: str | NotGiven,
    status: WebhookStatus | NotGiven,
) -> dict[str, Any]:
    """Only the fields given; ``events=None`` is sent as ``null`` (all events)."""
    events = events if isinstance(events, NotGiven) else _events(events)
    if not isinstance(description, NotGiven | str):
        raise ValueError(f"description must be a string ('' clears it), got {description!r}")
    if not isinstance(status, NotGiven) and status not in WEBHOOK_STATUSES:
        raise ValueError(f"status must be one of {WEBHOOK_STATUSES}, got {status!r}")
    needs = "update needs at least one field to change"
    return _changes(UpdateWebhook, needs, events=events, description=description, status=status)


def _absolute_url(value: object) -> str:
    url = _text("url", value)
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in ("http", "https") or not rest or rest[0] in "/?#":
        raise ValueError(f"url must be an absolute http(s) URL, got {url!r}")
    return url


def _method(value: object) -> str:
    method = _text("method", value)
    if not method.isascii() or not method.isalpha() or len(method) > 16:
        raise ValueError(f"method must be an HTTP method such as 'GET', got {method!r}")
    return method.upper()


def _events(value: Sequence[str] | None) -> list[str] | None:
    """An endpoint's event allowlist; ``None`` is every event, including future ones."""
    if value is None:
        return None
    names = _names("events", value)
    if not names:
        raise ValueError(
            "events must name at least one event type; pass None to receive every event"
        )
    return names


# --- not a route of its own: the discovery documents ------------------------------------


def discovery(name: str) -> RequestSpec[str | dict[str, Any]]:
    """A discovery document: ``str`` for the ``.txt`` ones, ``dict`` for the JSON ones."""
    name = name.lstrip("/")
    if name not in DISCOVERY_DOCUMENTS:
        raise ValueError(
            f"unknown discovery document {name!r}; expected one of {DISCOVERY_DOCUMENTS}"
        )
    path = "/" + name
    if path.endswith(".txt"):  # prose for language models; the others are JSON
        return RequestSpec(
            method="GET",
            path=path,
            accept="text/plain, text/markdown;q=0.9, */*;q=0.1",
            parse=as_text,
        )
    return RequestSpec(method="GET", path=path, parse=as_json_object)


# --- the probes: no route of the API (the route table's ``listed=False``) --------------------


def health() -> RequestSpec[Health]:
    return RequestSpec(method="GET", path="/health", parse=as_model(Health))


def ready() -> RequestSpec[Health]:
    return RequestSpec(method="GET", path="/ready", parse=as_model(Health))


def capabilities() -> RequestSpec[Capabilities]:
    return RequestSpec(method="GET", path="/agent/capabilities", parse=as_model(Capabilities))


def jwks() -> RequestSpec[Jwks]:
    return RequestSpec(method="GET", path="/.well-known/jwks.json", parse=as_model(Jwks))
