"""The spec's MCP tools (``svc_sellers``, ``svc_resources``, ``svc_pay`` ...) as an MCP server.

An agent host (Claude Desktop, an IDE, any MCP client) starts ``svc-mcp`` (or ``svc mcp``)
and gets the same flows the ``svc`` command offers, each tool one call of
:class:`svc.AsyncClient`: the tools hold no logic of their own, so they cannot drift from
the SDK.  Over stdio, credentials come from the environment like the client's
(``SVC_BASE_URL``, ``SVC_OWNER_JWT``, ``SVC_SELLER_KEY``, ``SVC_WALLET_KEY``,
``SVC_ENVIRONMENT``); ``svc_webhooks`` also takes ``owner_jwt`` and ``environment`` per
call, as the spec says.

The same tools serve many callers over streamable HTTP (the reference server mounts them
at ``/mcp``): there the client of each tool call is made from that call's HTTP request
(``client_factory`` gets it), whose ``Authorization: Bearer`` credential decides who is
calling -- :func:`request_credentials` reads it.

A refused call is a tool error (``isError``) whose text names the error code, the message
and the ``request_id`` -- what a model needs to correct itself or report the failure.

Needs the ``mcp`` extra (``pip install 'svc-payments[mcp]'``).
"""

from __future__ import annotations

import inspect
import logging
import operator
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from decimal import Decimal
from functools import partial
from typing import Annotated, Any, Literal, TypeVar

from ._async_client import AsyncClient
from ._errors import APIError, ApprovalRequired, SvcError
from ._options import Environment, RequestOptions
from ._params import help_of, params, pay_link, resource_metadata
from .bodies import (
    BodyRuleError,
    CaptureReceipt,
    ConnectOnboard,
    CreateRefund,
    CreateResource,
    CreateSeller,
    CreateWebhook,
    EnablePayments,
    Pay,
    PayUrl,
    RecycleBalance,
    Withdraw,
)
from .wire import unstructure

try:
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from pydantic import Field
except ImportError:  # pragma: no cover - exercised by users without the extra
    MCPServer = None  # type: ignore[assignment,misc]
    Context = None  # type: ignore[assignment,misc]
    ToolError = RuntimeError  # type: ignore[assignment,misc]

__all__ = ["TOOL_NAMES", "ClientFactory", "create_server", "main", "request_credentials"]

#: Every tool this server offers (the spec's table).
TOOL_NAMES = (
    "svc_sellers",
    "svc_create_pay_link",
    "svc_resources",
    "svc_enable_payments",
    "svc_connect",
    "svc_withdraw",
    "svc_recycle",
    "svc_pay",
    "svc_pay_url",
    "svc_receipts",
    "svc_refund",
    "svc_payment_status",
    "svc_webhooks",
)

#: What the model is told to do with a link only a person can use.
ONBOARD_NEXT_STEP = (
    "Give onboard_url to the seller's human: they complete the onboarding page in a "
    "browser (no API call can). Then call svc_connect with action=sync; payouts_enabled "
    "turns true once they have finished. The link expires (expires_at): action=onboard "
    "again gives a fresh one."
)
LOGIN_NEXT_STEP = "Give login_url to the seller's human: it opens the payout dashboard."

T = TypeVar("T")
#: Makes the client of one tool call from that call's HTTP request (a Starlette
#: ``Request``: its headers say who is calling), or from ``None`` over stdio.
ClientFactory = Callable[[Any], AsyncClient]


def request_credentials(headers: Mapping[str, str] | None) -> dict[str, Any]:
    """The client options an HTTP request's headers give: its ``Authorization: Bearer``
    credential (or ``X-Svc-Vw-Key``, the API's other form) and its ``X-Svc-Environment``
    (without it a key works in its own environment, an owner JWT in live).

    The service tells the credentials apart by prefix (``svc_sk_`` a seller key,
    ``svc_vw_`` a wallet key, anything else an owner JWT), so the one credential is offered
    to every call: a tool of another role is then refused by the service itself, with
    ``wrong_credential (403)`` and a request id, exactly as the same call over the API.
    No credential at all is a tool error."""
    if headers is None:
        raise ToolError("no HTTP request: this server takes credentials from each request")
    scheme, _, token = (headers.get("authorization") or "").strip().partition(" ")
    token = token.strip() if scheme.lower() == "bearer" else ""
    token = token or (headers.get("x-svc-vw-key") or "").strip()
    if not token:
        raise ToolError(
            "unauthenticated: send 'Authorization: Bearer <credential>' (an owner JWT, "
            "a svc_sk_ seller key or a svc_vw_ wallet key) with every MCP request"
        )
    options: dict[str, Any] = {"owner_jwt": token, "seller_key": token, "wallet_key": token}
    environment = (headers.get("x-svc-environment") or "").strip().lower()
    if environment:
        options["environment"] = environment
    return options


async def _call(
    factory: ClientFactory,
    ctx: Context,
    call: str | Callable[[AsyncClient], Awaitable[Any]],
    *args: Any,
    **kwargs: Any,
) -> Any:
    """Run one client call (the method ``call`` names, such as ``"sellers.list"``, or a
    function of the client) with ``args`` and ``kwargs``; its result as JSON-ready data, or
    a tool error (``ToolError``: an ``isError`` result with exactly its text)."""
    try:
        request = ctx.request_context.request
    except ValueError:  # called outside an MCP request (a test calling the tool directly)
        request = None
    try:
        async with factory(request) as client:
            method = partial(call, client) if callable(call) else operator.attrgetter(call)(client)
            return unstructure(await method(*args, **kwargs))
    except ApprovalRequired as waiting:  # not an error: the host shows the link
        return _waiting(waiting, kwargs.get("options"))
    except APIError as exc:
        raise ToolError(
            f"{exc.code} ({exc.status}): {exc.message} [request_id={exc.request_id}]"
        ) from None
    except (SvcError, BodyRuleError) as exc:  # BodyRuleError: refused before sending
        raise ToolError(str(exc)) from None


def _waiting(waiting: ApprovalRequired, options: RequestOptions | None) -> dict[str, Any]:
    """A payment that waits for a person: the approval, its link for the host to show,
    and the ``idempotency_key`` to call the tool again with once it is approved."""
    approval = waiting.approval
    return {
        "approval_required": True,
        "message": (
            f"Nothing was paid: a person must approve {approval.amount} {approval.currency}. "
            f"Show them {approval.approval_url} ; once approved, call this tool again with "
            "the same arguments and this idempotency_key."
        ),
        "idempotency_key": None if options is None else options.idempotency_key,
        **unstructure(approval),
    }


def _options(idempotency_key: str | None) -> RequestOptions:
    """The key a payment tool sends: the caller's (a repeat after an approval), or new."""
    return RequestOptions(idempotency_key=idempotency_key or str(uuid.uuid4()))


def _need(value: T | None, name: str, action: str) -> T:
    if value is None:
        raise ToolError(f"action={action} needs {name}")
    return value


def _with_body(
    cls: type, *names: str, optional: bool = False
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A tool whose parameters are its own and then the fields ``names`` of the body class
    ``cls`` (every field when none are named), which its ``**body`` receives: the signature
    the ``mcp`` package builds the tool's input schema from (name, type, choices, required
    or not, description) is the body's.  ``optional``: no field is required (a tool of
    several actions checks what its action needs).  An amount is a decimal string."""

    def with_fields(fn: Callable[..., Any]) -> Callable[..., Any]:
        fields = params(cls, *names)
        taken = {shape.name for shape in fields}
        own = inspect.signature(fn, eval_str=True).parameters.values()
        kept = [p for p in own if p.kind is not p.VAR_KEYWORD and p.name not in taken]
        for shape in fields:
            tp = str if shape.type is Decimal else shape.type
            if shape.required and not optional:
                default: Any = inspect.Parameter.empty
            else:
                tp, default = tp | None, None
            tp = Annotated[tp, Field(description=help_of(shape))]
            keyword = inspect.Parameter.KEYWORD_ONLY
            kept.append(inspect.Parameter(shape.name, keyword, annotation=tp, default=default))
        fn.__signature__ = inspect.Signature(kept)  # type: ignore[attr-defined]
        return fn

    return with_fields


def create_server(
    client_factory: ClientFactory | None = None, *, client_options: Mapping[str, Any] | None = None
) -> Any:
    """An ``mcp`` ``MCPServer`` with the svc tools.

    ``client_factory`` makes the client each tool call uses from that call's HTTP request
    (``None`` over stdio); by default it is ``AsyncClient`` from ``client_options`` and
    the environment, whatever the request.
    """
    if MCPServer is None:
        raise ImportError(
            "the svc MCP server needs the mcp package: pip install 'svc-payments[mcp]'"
        )
    options = dict(client_options or {})
    factory: ClientFactory = client_factory or (lambda _request: AsyncClient(**options))
    with _host_logging_kept():
        server = MCPServer(
            "svc",
            instructions=(
                "Payments for agents and the people who sell to them. Sellers: svc_sellers, "
                "svc_resources / svc_create_pay_link, svc_enable_payments, svc_webhooks; "
                "payouts with svc_connect (a human completes onboarding) and svc_withdraw. "
                "Agents: svc_pay for in-service resources and handles, svc_pay_url for any "
                "x402 or MPP URL (including hosted gates); svc_receipts reads a receipt, and "
                "captures a metered one for its seller; svc_payment_status says where a "
                "payment stands (settled, refunded, ...); svc_refund gives a payment back "
                "(seller key)."
            ),
        )
    # One builder per family of tools: each stays short enough to read and change alone.
    _add_seller_tools(server, factory)
    _add_resource_tools(server, factory)
    _add_payment_tools(server, factory)
    _add_payout_tools(server, factory)
    _add_webhook_tools(server, factory)
    return server


@contextmanager
def _host_logging_kept() -> Iterator[None]:
    """``MCPServer()`` calls ``logging.basicConfig(level=INFO)`` on the root logger: inside
    the reference server (or any app that builds the tools) every library's INFO lines
    (httpx's, one per request) would start printing.  Building the tools must leave the
    host process's logging as it was."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


def _add_seller_tools(server: MCPServer, factory: ClientFactory) -> None:
    @server.tool()
    @_with_body(CreateSeller)
    async def svc_sellers(
        ctx: Context,
        action: Literal["create", "list", "me", "balance"],
        limit: int | None = None,
        starting_after: str | None = None,
        **body: Any,
    ) -> Any:
        """Seller accounts: create (owner JWT; the seller key is shown once), list (owner
        JWT; one page: ``limit`` 1-100, ``starting_after`` the last id of the previous page
        while ``has_more``), me or balance (seller key)."""
        if action == "create":
            return await _call(factory, ctx, "sellers.create", **body)
        page = {"limit": limit, "starting_after": starting_after} if action == "list" else {}
        return await _call(factory, ctx, f"sellers.{action}", **page)


#: The fields of a resource that ``svc_create_pay_link`` takes besides ``path``.
_PAY_LINK = ("amount", "description", "upstream_url")


def _add_resource_tools(server: MCPServer, factory: ClientFactory) -> None:
    @server.tool()
    @_with_body(CreateResource, "kind", "path", "tool", *_PAY_LINK, optional=True)
    async def svc_resources(
        ctx: Context,
        action: Literal["list", "get", "create", "update", "deactivate"],
        resource_id: str | None = None,
        sku_kind: Literal["one_shot", "credit_topup"] | None = None,
        credits: float | None = None,
        credit_unit: str | None = None,
        limit: int | None = None,
        starting_after: str | None = None,
        **body: Any,
    ) -> Any:
        """Priced resources of the seller (seller key).  ``amount`` is a decimal string
        such as "0.05"; create needs ``path`` (kind http) or ``tool`` (kind mcp); list is
        one page (``limit`` 1-100, ``starting_after`` the last id while ``has_more``)."""
        metadata = resource_metadata(sku_kind, credits, credit_unit)
        if action == "list":
            page = {"limit": limit, "starting_after": starting_after}
            return await _call(factory, ctx, "resources.list", **page)
        if action == "create":
            _need(body["amount"], "amount", action)
            body["kind"] = body["kind"] or ("mcp" if body["tool"] else "http")
            return await _call(factory, ctx, "resources.create", metadata=metadata, **body)
        rid = _need(resource_id, "resource_id", action)
        if action != "update":  # get or deactivate
            return await _call(factory, ctx, f"resources.{action}", rid)
        del body["kind"]  # a resource keeps its kind
        return await _call(factory, ctx, "resources.update", rid, metadata=metadata, **body)

    @server.tool()
    @_with_body(CreateResource, "path", *_PAY_LINK)
    async def svc_create_pay_link(ctx: Context, resource_id: str | None = None, **body: Any) -> Any:
        """What to share to get paid: ``gate_url`` and ``pay_url`` (the buy page).  With
        ``resource_id``, for that resource; otherwise a new HTTP resource is created at
        ``amount`` (and ``path``, default "/")."""

        async def link(c: AsyncClient) -> dict[str, Any]:
            if resource_id is not None:
                resource = await c.resources.get(resource_id)
            else:
                path = body.pop("path") or "/"
                resource = await c.resources.create(kind="http", path=path, **body)
            return pay_link(resource)

        return await _call(factory, ctx, link)


def _add_payment_tools(server: MCPServer, factory: ClientFactory) -> None:
    @server.tool()
    @_with_body(EnablePayments)
    async def svc_enable_payments(ctx: Context, **body: Any) -> Any:
        """Turn on MPP and x402 on every gate of the seller (seller key).  With
        ``payout_wallet_address`` USDC goes straight to that wallet; otherwise payments
        credit the seller balance."""
        return await _call(factory, ctx, "sellers.enable_payments", **body)

    @server.tool()
    @_with_body(RecycleBalance)
    async def svc_recycle(ctx: Context, seller_id: str, **body: Any) -> Any:
        """Move a seller's balance (all, or ``amount``) into the owner's account wallet
        (owner JWT)."""
        return await _call(factory, ctx, "sellers.recycle", seller_id, **body)

    @server.tool()
    @_with_body(Pay)
    async def svc_pay(ctx: Context, idempotency_key: str | None = None, **form: Any) -> Any:
        """Pay on the service ledger (wallet key): an in-service resource by
        ``resource_id``, or a handle (``destination`` "@name") an ``amount``.  Send the
        returned ``receipt_id`` to the gate in X-Svc-Receipt.  A payment that needs a
        person's approval returns ``approval_required`` with the ``approval_url`` to show
        and the ``idempotency_key`` to call again with once approved."""
        # Either form, as given: the body's own rule (svc.bodies.Pay) refuses a wrong mix.
        return await _call(factory, ctx, "pay", options=_options(idempotency_key), **form)

    @server.tool()
    @_with_body(PayUrl, "url", "method", "json", "dry_run")  # a tool answers whole: no stream
    async def svc_pay_url(ctx: Context, idempotency_key: str | None = None, **body: Any) -> Any:
        """Pay any x402 or MPP URL under the wallet key's policy (``POST /spend/pay-url``)
        and return the unlocked response (body cut at 8 KB, ``body_truncated``).
        ``dry_run``: only probe, and return the rail and price it would pay and whether
        the policy allows it (``allowed``, ``blocked_by``); nothing is paid.  A payment
        that needs a person's approval returns ``approval_required`` with the
        ``approval_url`` to show and the ``idempotency_key`` to call again with."""
        given = {k: v for k, v in body.items() if v is not None}
        if given.pop("dry_run", False):
            return await _call(factory, ctx, "spend.pay_url_quote", **given)
        return await _call(
            factory, ctx, "spend.pay_url", options=_options(idempotency_key), **given
        )

    @server.tool()
    @_with_body(CaptureReceipt, optional=True)
    async def svc_receipts(
        ctx: Context, action: Literal["get", "capture"], receipt_id: str, **body: Any
    ) -> Any:
        """A receipt: get reads it as its payer (wallet key) or seller (seller key):
        ``status`` (authorized while a metered payment is held, then settled or released),
        ``amount``, ``units``.  capture (seller key) charges a metered ledger payment the
        ``units`` its answer used, at most the authorised maximum; 0 releases it."""
        if action == "get":
            return await _call(factory, ctx, "receipts.get", receipt_id)
        units = _need(body["units"], "units", action)
        return await _call(factory, ctx, "receipts.capture", receipt_id, units=units)

    @server.tool()
    @_with_body(CreateRefund)
    async def svc_refund(ctx: Context, **body: Any) -> Any:
        """Give back all or part of a payment the seller received (seller key): without
        ``amount`` all that is not refunded yet; never more than was paid across refunds.
        Ledger payments go back to the payer's wallet key at once, card payments through
        the card processor (``status`` pending until it confirms)."""
        given = {k: v for k, v in body.items() if v is not None}
        return await _call(factory, ctx, "refunds.create", given.pop("receipt_id"), **given)

    @server.tool()
    async def svc_payment_status(ctx: Context, receipt_id: str) -> Any:
        """Where a payment stands, for its payer (wallet key), its seller (seller key) or
        the owner of either: ``state`` claimed, settled, released or refunded, with
        ``amount``, ``refunded`` and ``remaining``.  Use it when a pay answer was lost."""
        return await _call(factory, ctx, "payments.get", receipt_id)


def _add_payout_tools(server: MCPServer, factory: ClientFactory) -> None:
    @server.tool()
    @_with_body(ConnectOnboard, optional=True)
    async def svc_connect(
        ctx: Context, action: Literal["onboard", "sync", "status", "login"], **body: Any
    ) -> Any:
        """The seller's payout account (seller key).  onboard (needs ``country``, two
        letters such as "US"; ``type`` express by default) returns an ``onboard_url``
        that a HUMAN must open and complete in a browser -- hand it to them, an agent
        cannot complete onboarding -- then call sync, which reads ``payouts_enabled``,
        ``details_submitted`` and ``requirements_due``.  status is the account as of the
        last sync.  login returns a ``login_url`` to the payout dashboard, also for a
        human, once onboarded."""
        if action == "onboard":
            _need(body["country"], "country", action)
            link = await _call(factory, ctx, "connect.onboard", **body)
            return {**link, "next_step": ONBOARD_NEXT_STEP}
        answer = await _call(factory, ctx, f"connect.{action}")
        return {**answer, "next_step": LOGIN_NEXT_STEP} if action == "login" else answer

    @server.tool()
    @_with_body(Withdraw)
    async def svc_withdraw(ctx: Context, withdrawal_id: str | None = None, **body: Any) -> Any:
        """Withdraw seller balance to the payout account (seller key; payouts must be
        enabled, see svc_connect): ``amount`` as a decimal string such as "5.00", or left
        out for the whole available balance.  Returns the withdrawal with its ``status``:
        pending, then in_transit, then paid -- or failed, with ``failure_reason``, and the
        money back in the balance.  With ``withdrawal_id`` (and no amount) nothing is
        withdrawn: that withdrawal's current status is returned."""
        if withdrawal_id is not None:
            if body["amount"] is not None:
                raise ToolError("give amount to withdraw, or withdrawal_id to check one, not both")
            return await _call(factory, ctx, "withdrawals.get", withdrawal_id)
        return await _call(factory, ctx, "withdrawals.create", **body)


def _add_webhook_tools(server: MCPServer, factory: ClientFactory) -> None:
    @server.tool()
    @_with_body(CreateWebhook, "url", "events", optional=True)
    async def svc_webhooks(
        ctx: Context,
        action: Literal["create", "list", "test", "delete"],
        webhook_id: str | None = None,
        owner_jwt: str | None = None,
        environment: Literal["test", "live"] | None = None,
        limit: int | None = None,
        starting_after: str | None = None,
        **body: Any,
    ) -> Any:
        """Webhook endpoints (owner JWT from the session, or ``owner_jwt``).  ``test``
        sends a signed payment.succeeded sample carrying a receipt_id.  Use environment
        "test" to keep the endpoint and the payments in Test.  list is one page (``limit``
        1-100, ``starting_after`` the last id while ``has_more``)."""
        env: Environment | None = environment
        per_call = RequestOptions(owner_jwt=owner_jwt, environment=env)
        if action == "create":
            _need(body["url"], "url", action)
            return await _call(factory, ctx, "webhooks.create", **body, options=per_call)
        if action == "list":
            page = {"limit": limit, "starting_after": starting_after}
            return await _call(factory, ctx, "webhooks.list", **page, options=per_call)
        wid = _need(webhook_id, "webhook_id", action)  # test or delete
        return await _call(factory, ctx, f"webhooks.{action}", wid, options=per_call)


def main() -> None:
    """``svc-mcp``: serve the tools over stdio (what MCP hosts launch)."""
    try:
        server = create_server()
    except ImportError:  # pragma: no cover - exercised by users without the extra
        sys.exit("svc-mcp needs the mcp package: pip install 'svc-payments[mcp]'")
    server.run("stdio")


if __name__ == "__main__":  # pragma: no cover - ``python -m svc.mcp_server``
    main()
