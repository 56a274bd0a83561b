"""Priced resources: create, list, read, update (idempotent), deactivate."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from svc import Resource, ResourceList
from svc.bodies import BODY_METHODS, CreateResource, UpdateResource
from svc.money import format_amount, from_micros

from ..domain import resources
from ..domain.sellers import get_seller
from ..invariant import InvariantError
from ..outbound import OutboundPolicy, OutboundRefused, check_url
from ..settings import Settings
from ..web.auth import Principal, Role
from ..web.endpoint import Call, Contract, Endpoint
from ..web.errors import ApiError
from ..web.paging import PageRequest, paged
from ..web.responses import Reply
from ..web.sdk import Sdk
from ..web.validate import Fields

__all__ = ["ENDPOINTS"]

SKU_KINDS = ("one_shot", "credit_topup")
#: Credits a credit_topup SKU grants: far past any bundle, and exact as a double.
MAX_CREDITS = Decimal(10**12)
_CREDIT_QUANTUM = Decimal("0.000001")


def _read_metadata(
    f: Fields, meta: dict[str, Any] | None, *, default: bool
) -> dict[str, Any] | None:
    if meta is None:
        return {"sku_kind": "one_shot", "credits": None, "credit_unit": None} if default else None
    credits = meta.get("credits")
    meta = {key: _plain_json(value) for key, value in meta.items()}
    kind = meta.setdefault("sku_kind", "one_shot")
    if kind not in SKU_KINDS:
        f.error("metadata.sku_kind", "must be one_shot or credit_topup")
    if credits is not None:
        if not _valid_credits(credits):
            f.error(
                "metadata.credits",
                f"must be a number above 0 and at most {MAX_CREDITS}, with at most 6 decimals",
            )
    elif kind == "credit_topup":
        f.error("metadata.credits", "is required when sku_kind is credit_topup")
    meta.setdefault("credits", None)
    unit = meta.setdefault("credit_unit", None)
    if unit is not None and (not isinstance(unit, str) or len(unit) > 64):
        f.error("metadata.credit_unit", "must be a string of at most 64 characters")
    return meta


def _valid_credits(value: Any) -> bool:
    """A JSON number (parsed as int or exact Decimal) the credits field can hold."""
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        return False
    number = Decimal(value)
    return 0 < number <= MAX_CREDITS and number == number.quantize(_CREDIT_QUANTUM)


def _plain_json(value: Any) -> Any:
    """Bodies are parsed with exact Decimals; stored metadata is plain JSON numbers."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _plain_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain_json(v) for v in value]
    return value


def _target(
    f: Fields, kind: str | None, path: str | None, tool: str | None, *, required: bool
) -> dict[str, Any]:
    """``path`` for an HTTP SKU, ``tool`` for an MCP SKU; never both.  On create, a
    ``null`` target is as missing as a left-out one (the body's shape lets both through)."""
    if kind == "http":
        if tool is not None:
            f.error("tool", "is only for kind mcp")
        if required and path is None:
            f.error("path", "is required for kind http")
        return {} if path is None else {"path": path}
    if kind == "mcp":
        if path is not None:
            f.error("path", "is only for kind http")
        if required and tool is None:
            f.error("tool", "is required for kind mcp")
        return {} if tool is None else {"tool": tool}
    return {}


def _check_upstream(f: Fields, upstream: str | None, settings: Settings) -> str | None:
    """Where the hosted gate forwards paid requests: refused now if the same SSRF rules
    that apply when forwarding would refuse it (it is checked again, resolved, then)."""
    if upstream is None:
        return None
    try:
        check_url(upstream, OutboundPolicy.from_settings(settings))
    except OutboundRefused as exc:
        f.error("upstream_url", f"is refused: {exc}")
        return None
    return upstream


def _check_body_hint(
    f: Fields, method: str | None, hint: dict[str, Any] | None, *, field: str
) -> dict[str, Any] | None:
    """A ``body_hint`` goes only with a method that carries a body (POST, PUT, PATCH): a
    caller copies it as the body it sends.  ``field`` is what the error names (the hint
    when it was sent, else the method that no longer takes it)."""
    if hint is None or method in BODY_METHODS:
        return None if hint is None else _plain_json(hint)
    named = "any method" if method is None else method
    if field == "body_hint":
        f.error(
            "body_hint", f"goes only with method POST, PUT or PATCH (a body to send), not {named}"
        )
    else:
        f.error(
            "method",
            f"{named} takes no body but the resource has a body_hint: "
            "clear it (body_hint: null) in the same request",
        )
    return None


_METERED_FIELDS = ("unit_price", "unit", "max_amount", "fallback_amount")


def _priced(f: Fields, b: CreateResource) -> tuple[Decimal, dict[str, Any] | None]:
    """The resource's ``amount`` column (its price, or its maximum when metered) and its
    metered columns (``None`` when fixed)."""
    if (b.pricing or "fixed") == "fixed":
        for name in _METERED_FIELDS:
            if getattr(b, name) is not None:
                f.error(name, "is only for pricing metered")
        if b.amount is None:
            f.error("amount", "is required (or set pricing metered, with max_amount)")
        return b.amount or Decimal(0), None
    if b.amount is not None:
        f.error(
            "amount",
            "is for fixed pricing: a metered resource's most is max_amount, and "
            "fallback_amount its fixed price where a rail cannot meter",
        )
    for name in ("unit_price", "unit", "max_amount"):
        if getattr(b, name) is None:
            f.error(name, "is required for pricing metered")
    _check_unit_price(f, b.unit_price, b.max_amount)
    if b.unit_price is None or b.unit is None:
        return Decimal(0), None
    columns = resources.pricing_columns(
        unit_price=b.unit_price, unit=b.unit, fallback_amount=b.fallback_amount
    )
    return b.max_amount or Decimal(0), columns


def _check_unit_price(f: Fields, unit_price: Decimal | None, max_amount: Decimal | None) -> None:
    if unit_price is not None and max_amount is not None and unit_price > max_amount:
        f.error("unit_price", f"must be at most max_amount ({format_amount(max_amount)})")


def _repriced(f: Fields, row: Any, b: UpdateResource) -> dict[str, Any]:
    """The price changes an update makes: ``amount`` on a fixed resource, the metered
    fields on a metered one (a resource keeps its pricing; create another to change it)."""
    if row.pricing != "metered":
        for name in _METERED_FIELDS:
            if getattr(b, name) is not None:
                f.error(name, "is only for metered resources (this one is priced fixed)")
        return {} if b.amount is None else {"amount": b.amount}
    if b.amount is not None:
        f.error("amount", "is for fixed pricing: change a metered resource's max_amount")
    unit_price = b.unit_price or from_micros(row.unit_price_micros)
    _check_unit_price(f, unit_price, b.max_amount or from_micros(row.amount_micros))
    given = {
        "amount": b.max_amount,
        "unit_price": b.unit_price,
        "unit": b.unit,
        "fallback_amount": b.fallback_amount,
    }
    return {name: value for name, value in given.items() if value is not None}


def create(call: Call) -> Reply:
    """Create a priced HTTP path or MCP tool; the answer carries gate_url and pay_url."""
    p = _seller(call)
    b = call.input(CreateResource)
    f = Fields.rules(call.body)
    target = _target(f, b.kind, b.path, b.tool, required=True)
    metadata = _read_metadata(f, b.metadata, default=True)
    upstream = _check_upstream(f, b.upstream_url, call.ctx.settings)
    body_hint = _check_body_hint(f, b.method, b.body_hint, field="body_hint")
    amount, pricing = _priced(f, b)
    f.done()
    if metadata is None:
        raise InvariantError("metadata passed validation")
    row = resources.create_resource(
        call.conn,
        seller_id=p.seller_id,
        environment=p.environment,
        kind=b.kind,
        path=target.get("path"),
        tool=target.get("tool"),
        amount=amount,
        description=b.description,
        metadata=metadata,
        upstream_url=upstream,
        listed=bool(b.listed),
        method=b.method,
        body_hint=body_hint,
        pricing=pricing,
        now=call.now,
    )
    return Reply(resources.resource_model(row, call.public_url), 201)


@paged
def list_all(call: Call, request: PageRequest) -> Reply:
    """The seller's resources, oldest first, inactive ones included (paged; see ``active``)."""
    p = _seller(call)
    page = resources.list_resources(call.conn, request, seller_id=p.seller_id)
    data = [resources.resource_model(r, call.public_url) for r in page.rows]
    return Reply(ResourceList(data=data, has_more=page.has_more))


def get_one(call: Call) -> Reply:
    p = _seller(call)
    return Reply(resources.resource_model(_own(call, p), call.public_url))


def patch(call: Call) -> Reply:
    """Change path/tool, amount, description, metadata, upstream, listing, method, body
    hint or ``active``; ``null`` clears ``method`` (any method) and ``body_hint``."""
    p = _seller(call)
    row = _own(call, p, for_update=True)
    b = call.input(UpdateResource)
    f = Fields.rules(call.body)
    changes: dict[str, Any] = dict(_target(f, row.kind, b.path, b.tool, required=False))
    metadata = _read_metadata(f, b.metadata, default=False)
    upstream = _check_upstream(f, b.upstream_url, call.ctx.settings)
    changes.update(_repriced(f, row, b))
    given = {
        "description": b.description,
        "metadata": metadata,
        "upstream_url": upstream,
        "listed": b.listed,
        "active": b.active,
    }
    changes.update({name: value for name, value in given.items() if value is not None})
    method = b.method if "method" in call.body else row.method
    hint = b.body_hint if "body_hint" in call.body else row.body_hint
    field = "body_hint" if "body_hint" in call.body else "method"
    hint = _check_body_hint(f, method, hint, field=field)
    if "method" in call.body:
        changes["method"] = method
    if "body_hint" in call.body:
        changes["body_hint"] = hint
    f.done()
    return Reply(_apply(call, p, row, changes))


def deactivate(call: Call) -> Reply:
    """Set ``active`` to false; the gate stops selling it.  Repeating it changes nothing."""
    p = _seller(call)
    row = _own(call, p, for_update=True)
    return Reply(_apply(call, p, row, {"active": False}))


def _apply(call: Call, p: Principal, row: Any, changes: dict[str, Any]) -> Any:
    new_row = resources.update_resource(
        call.conn, row, changes, owner_id=p.owner_id, public_url=call.public_url, now=call.now
    )
    return resources.resource_model(new_row, call.public_url)


def _seller(call: Call) -> Principal:
    get_seller(call.conn, call.caller.seller_id)
    return call.caller


def _own(call: Call, p: Principal, *, for_update: bool = False) -> Any:
    row = resources.find_resource(
        call.conn, call.params["resource_id"], seller_id=p.seller_id, for_update=for_update
    )
    if row is None:
        raise ApiError("not_found", "No such resource.")
    return row


ENDPOINTS = [
    Endpoint(
        method="POST",
        path="/resources",
        handler=create,
        auth=Role.SELLER,
        idempotency="optional",
        body=CreateResource,
        sdk=Sdk(
            "resources.create",
            "*, kind: ResourceKind, amount: Amount | None = None, path: str | None = None, "
            "tool: str | None = None, pricing: ResourcePricing | None = None, "
            "unit_price: Amount | None = None, unit: str | None = None, "
            "max_amount: Amount | None = None, fallback_amount: Amount | None = None, "
            "description: str | None = None, "
            "metadata: Metadata | None = None, upstream_url: str | None = None, "
            "listed: bool | None = None, method: ResourceMethod | None = None, "
            "body_hint: Mapping[str, Any] | None = None",
            doc="""Create an HTTP (``path``) or MCP (``tool``) SKU; agents pay its ``gate_url``.

            ``amount`` is validated locally (no floats, at most 6 decimal places).  Metered
            (``pricing="metered"``): ``unit_price``, ``unit`` and ``max_amount`` instead of
            ``amount``, and optionally ``fallback_amount`` for rails that cannot meter.  ``listed``
            shows it in the directory; ``method`` sells one HTTP method only (any when left
            out); ``body_hint`` is a JSON object callers copy with their own values (only with
            ``method`` POST, PUT or PATCH).
            """,
            build="create_resource_body",
        ),
        contract=Contract(response=Resource, status=201),
    ),
    Endpoint(
        method="GET",
        path="/resources",
        handler=list_all,
        auth=Role.SELLER,
        sdk=Sdk(
            "resources.list",
            owner=True,
            doc="""The seller's resources, oldest first, inactive ones included.  With
            ``seller_id``, that seller's of the owner (owner JWT).""",
            all_doc="""Every resource of the seller, in the order of :meth:`list`.""",
        ),
        contract=Contract(response=ResourceList),
    ),
    Endpoint(
        method="GET",
        path="/resources/{resource_id}",
        handler=get_one,
        auth=Role.SELLER,
        sdk=Sdk(
            "resources.get",
            "resource_id: str",
        ),
        contract=Contract(response=Resource),
    ),
    Endpoint(
        method="PATCH",
        path="/resources/{resource_id}",
        handler=patch,
        auth=Role.SELLER,
        idempotency="required",
        body=UpdateResource,
        sdk=Sdk(
            "resources.update",
            "resource_id: str, *, path: str | None = None, tool: str | None = None, "
            "amount: Amount | None = None, unit_price: Amount | None = None, "
            "unit: str | None = None, max_amount: Amount | None = None, "
            "fallback_amount: Amount | None = None, description: str | None = None, "
            "metadata: Metadata | None = None, upstream_url: str | None = None, "
            "listed: bool | None = None, active: bool | None = None, "
            "method: ResourceMethod | NotGiven | None = NOT_GIVEN, body_hint: Mapping[str, "
            "Any] | NotGiven | None = NOT_GIVEN",
            doc="""Change the fields given; ``None`` leaves a field as it is, except ``method``
            and ``body_hint``, which ``None`` clears (any method; no hint).""",
            build="update_resource_body",
            keep_null=True,
        ),
        contract=Contract(response=Resource),
    ),
    Endpoint(
        method="POST",
        path="/resources/{resource_id}/deactivate",
        handler=deactivate,
        auth=Role.SELLER,
        idempotency="optional",
        sdk=Sdk(
            "resources.deactivate",
            "resource_id: str",
            doc="""Stop selling the resource (``active`` becomes false); its gate stops
            unlocking.""",
        ),
        contract=Contract(response=Resource),
    ),
]
