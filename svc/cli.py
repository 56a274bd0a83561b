"""``svc``: the SDK's flows as shell commands (the CLI twins of the spec's MCP tools).

Every command is one call of :class:`svc.Client` and prints the result as JSON, so the
output can be piped into ``jq``.  Credentials come from options or the same environment
variables the client reads (``SVC_BASE_URL``, ``SVC_OWNER_JWT``, ``SVC_SELLER_KEY``,
``SVC_WALLET_KEY``, ``SVC_ENVIRONMENT``).  An error prints its code, message and
``request_id`` on stderr and exits 1.

Needs the ``cli`` extra (``pip install 'svc-payments[cli]'``): click is not a dependency of the SDK.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import operator
import re
import signal
import sys
import threading
import time
import typing
import uuid
from collections.abc import Callable, Iterable
from typing import Any, get_args

from ._base_client import DEFAULT_BASE_URL
from ._client import Client
from ._errors import APIError, ApprovalRequired, SvcError
from ._listen import POLL_WAIT
from ._listen import listen as forward
from ._models import Approval, PayUrlResult
from ._options import RequestOptions
from ._params import choices, help_of, params, pay_link, resource_metadata
from ._pay_url_stream import PayUrlStream
from ._version import __version__
from ._whoami import CREDENTIALS, check_credentials
from .bodies import (
    BodyRuleError,
    CaptureReceipt,
    ConnectOnboard,
    CreateOwner,
    CreateRefund,
    CreateResource,
    CreateSeller,
    CreateTopUp,
    CreateWalletKey,
    CreateWebhook,
    EnablePayments,
    Pay,
    PayUrl,
    RecycleBalance,
    ResourceKind,
    ResourceMethod,
    UpdateResource,
    WalletKeyAmount,
    Withdraw,
)
from .money import AmountError
from .wire import unstructure

try:
    import click
except ImportError:  # pragma: no cover - exercised by users without the extra
    click = None  # type: ignore[assignment]

__all__ = ["main"]


def _emit(value: Any) -> None:
    click.echo(json.dumps(unstructure(value), indent=2, default=str))


def _emit_err(value: Any) -> None:
    """The result on stderr, when stdout carries a streamed body."""
    click.echo(json.dumps(unstructure(value), indent=2, default=str), err=True)


def _approved(c: Client, url: str, timeout: float, body: dict[str, Any]) -> PayUrlResult:
    """``pay-url --wait-approval``: one ``Idempotency-Key`` for the request and its
    repeat; a payment that waits for a person is shown (its ``approval_url``) and
    polled, with a progress line per poll, then repeated once decided (a declined or
    expired one then answers its 402)."""
    opts = RequestOptions(idempotency_key=str(uuid.uuid4()))
    try:
        paid: PayUrlResult = c.spend.pay_url(url, options=opts, **body)
        return paid
    except ApprovalRequired as waiting:
        asked = waiting.approval
    _say(f"approval required: open {asked.approval_url}")
    _say(f"waiting for a person to approve {asked.amount} {asked.currency} ({asked.id}) ...")

    def progress(approval: Approval) -> None:
        _say(f"  still pending (expires {approval.expires_at.isoformat()})")

    decided = c.wait_for_approval(asked.id, timeout=timeout, on_poll=progress)
    _say(f"approval {decided.status}")
    repeated: PayUrlResult = c.spend.pay_url(url, options=opts, **body)
    return repeated


def _relayed(paid: PayUrlStream) -> PayUrlResult | None:
    """The streamed body written to stdout chunk by chunk as it arrives; its result."""
    out = click.get_binary_stream("stdout")
    with paid:
        for chunk in paid:
            out.write(chunk)
            out.flush()
    return paid.result


def _say(message: str) -> None:
    """A line for the person watching (progress, an error), on stderr: stdout stays the
    JSON result."""
    click.echo(message, err=True)


def _environment(ctx: Any) -> str:
    """The environment an owner command acts in: ``--environment``, ``SVC_ENVIRONMENT``,
    or else ``live``, the service's default for an owner JWT."""
    return str(ctx.obj.get("environment", "live"))


def _say_environment(ctx: Any) -> None:
    """One stderr line naming the environment an owner command used, and why (stdout
    stays the JSON result): a silent ``live`` is how a test key ends up looked for in live."""
    _say(f"environment: {_environment(ctx)} ({_source(ctx, 'environment')})")


def _source(ctx: Any, name: str) -> str:
    """Where a global option's value came from: its flag, its ``SVC_*`` variable, or
    (unset) the default, which for the environment (live) says how to act in test."""
    default = "the default"
    if name == "environment":
        default += "; pass --environment test or set SVC_ENVIRONMENT=test for test"
    return str(ctx.meta.get(f"svc.source.{name}", default))


def _not_found_hint(ctx: Any, message: str) -> str:
    """``no such wallet key in live; pass --environment test or set SVC_ENVIRONMENT=test
    if it is there``: an owner's test and live worlds are apart."""
    env = _environment(ctx)
    other = "test" if env == "live" else "live"
    what = "not found"
    if message.startswith("No such "):
        what = "no such " + message.removeprefix("No such ").split(".", 1)[0]
    return (
        f"{what} in {env}; pass --environment {other} or set SVC_ENVIRONMENT={other} if it is there"
    )


def _run(
    ctx: Any,
    /,
    call: Callable[[Client], Any],
    *,
    owner: bool = False,
    show: Callable[[Any], None] = _emit,
) -> Any:
    """One client call: print and return its result (as JSON unless ``show`` says
    otherwise), or the error and exit 1.  An owner command (``owner``) first says which
    environment it acts in, and a 404 names it."""
    if owner:
        _say_environment(ctx)
    try:
        with Client(**ctx.obj) as client:
            result = call(client)
        show(result)
        return result
    except APIError as exc:
        _say_api_error(exc)
        if owner and exc.status == 404:
            _say(_not_found_hint(ctx, exc.message))
        sys.exit(1)
    except SvcError as exc:
        _say(f"error: {_in_cli_terms(exc)}")
        sys.exit(1)
    except AmountError as exc:
        # Refused before sending (the SDK's own amount check): a usage error, not a crash.
        raise click.BadParameter(exc.reason, param_hint=f"'{exc.name}'") from None
    except BodyRuleError as exc:  # the body's own rule across its fields (svc.bodies)
        raise click.UsageError(str(exc)) from None


def _say_api_error(exc: APIError) -> None:
    _say(f"error {exc.status} {exc.code}: {exc.message} (request_id={exc.request_id})")


def _in_cli_terms(exc: SvcError) -> str:
    """The SDK's message, but a missing credential named as this command takes it (an
    option or an ``SVC_*`` variable, not a constructor argument)."""
    role = getattr(exc, "missing_credential", None)
    name = {"owner": "owner_jwt", "seller": "seller_key", "wallet": "wallet_key"}.get(role or "")
    if name is None:
        return exc.message
    noun = CREDENTIALS[name]
    article = "an" if noun[0] in "aeiou" else "a"
    return f"this command needs {article} {noun}: pass {_flag(name)} or set {_envvar(name)}"


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _envvar(name: str) -> str:
    return "SVC_" + name.upper()


def _global_option(flag: str, help: str, **kwargs: Any) -> Callable[[Any], Any]:
    """A global option read from its ``SVC_*`` variable too, which its help names."""
    name = flag.removeprefix("--").replace("-", "_")
    return click.option(
        flag, envvar=_envvar(name), show_envvar=True, default=None, help=help, **kwargs
    )


def _command(
    group: Any,
    name: str,
    call: str,
    *arguments: str,
    body: type | None = None,
    owner: bool = False,
    seller_id: bool = False,
    page: bool = False,
    get: tuple[str, str] | None = None,
    options: Iterable[Callable[[Any], Any]] = (),
) -> None:
    """A command of ``group`` that is one client call (``call``, e.g. ``"webhooks.test"``),
    helped by that method's docstring and given every parameter by its name: ``arguments``
    positional, ``body``'s fields as options (:func:`_body_options`), ``--seller-id`` (an
    owner acting for one of its sellers) and, for a list (``page``), one page
    (``--limit``, ``--starting-after``) or with ``--all`` every item, fetched page by page
    and printed as one list (``has_more`` false).
    ``get`` (an argument, a call): that optional argument, given, calls for that one item
    instead.  ``options``: click options of the command's own, passed on by name too."""
    item_id, get_call = get or ("", "")
    method, get_method = operator.attrgetter(call), operator.attrgetter(get_call or call)

    def command(ctx: Any, /, **o: Any) -> Any:
        as_owner = owner or o.get("seller_id") is not None
        item = o.pop(item_id, None)
        paging = {key: o.pop(key) for key in ("limit", "starting_after", "all")} if page else {}
        if item is not None:
            return _run(ctx, lambda c: get_method(c)(item, **o), owner=as_owner)
        if not paging.pop("all", False):
            return _run(ctx, lambda c: method(c)(**paging, **o), owner=as_owner)
        if paging["starting_after"] is not None:
            raise click.UsageError("--all starts at the first item; leave out --starting-after")

        def every(c: Client) -> dict[str, Any]:
            items = operator.attrgetter(call + "_all")(c)(limit=paging["limit"], **o)
            return {"data": list(items), "has_more": False}

        return _run(ctx, every, owner=as_owner)

    fields = [shape.name for shape in params(body)] if body else []
    decorators = [click.argument(item_id, required=False)] if get else []
    decorators += [click.argument(arg) for arg in arguments if arg not in fields]
    decorators += [_body_options(body, arguments=arguments)] if body else []
    decorators += [_seller_id_option] if seller_id else []
    if page:  # the one paging contract of lists
        decorators += [
            click.option("--limit", default=None, type=int, help="Items per page, 1 to 100."),
            click.option(
                "--starting-after", default=None, help="The last id of the previous page."
            ),
            click.option("--all", "all", is_flag=True, help="Every item, page after page."),
        ]
    decorators += options
    fn = _stack(decorators)(click.pass_context(command))
    that_one = f"  With {item_id.upper()}, that one." if get else ""
    group.command(name, help=_sdk_doc(call) + that_one)(fn)


def _stack(decorators: Iterable[Callable[[Any], Any]]) -> Callable[[Any], Any]:
    """One decorator applying ``decorators`` as if written one above the other, in order."""

    def apply(fn: Any) -> Any:
        for decorator in reversed(list(decorators)):
            fn = decorator(fn)
        return fn

    return apply


def _sdk_doc(call: str) -> str:
    """The first paragraph of the client method's docstring, its reST roles and literals
    as plain words."""
    where: Any = Client
    *namespaces, name = call.split(".")
    for namespace in namespaces:
        where = getattr(where, namespace).func  # a cached_property of the namespace class
    doc = (inspect.getdoc(getattr(where, name)) or "").split("\n\n")[0]
    return re.sub(r":\w+:`~?([^`]+)`|``([^`]+)``", lambda m: m[1] or m[2], doc)


def _build() -> Any:
    """The ``svc`` group: global options, then each family of commands, one builder each
    (one function per family keeps each one short enough to read and to change alone)."""

    @click.group()
    @click.version_option(
        __version__, "--version", prog_name="svc", message="%(prog)s %(version)s (svc-payments)"
    )
    @_global_option("--base-url", f"The service's address (default {DEFAULT_BASE_URL}).")
    @_global_option(
        "--owner-jwt", "Owner JWT, for owner commands (sellers, wallet-keys, webhooks, recycle)."
    )
    @_global_option(
        "--seller-key",
        "Seller key (svc_sk_...), for seller commands (resources, balance, connect, withdraw).",
    )
    @_global_option(
        "--wallet-key", "Wallet key (svc_vw_...), for agent commands (pay, pay-url, attempts)."
    )
    @_global_option(
        "--environment",
        "test or live, for owner commands and the directory; default live, as the service "
        "takes an owner JWT (a seller or wallet key carries its own).",
        type=click.Choice(["test", "live"]),
    )
    @click.pass_context
    def cli(ctx: Any, /, **options: Any) -> None:
        """Sellers, priced resources, payments, payouts and webhooks from the shell.

        Every option below also reads the SVC_* variable it names; `svc whoami` says which
        credentials are set and what the service makes of them."""
        ctx.obj = {k: v for k, v in options.items() if v is not None}
        for name in ("base_url", *CREDENTIALS, "environment"):
            source = ctx.get_parameter_source(name)
            if options[name] is not None and source is not None:  # read by _source
                ctx.meta[f"svc.source.{name}"] = (
                    _envvar(name) if source.name == "ENVIRONMENT" else _flag(name)
                )

    _command(cli, "health", "health")

    @cli.command()
    def mcp() -> None:
        """Serve the svc MCP tools over stdio (what an MCP host launches); see docs/mcp.md."""
        from .mcp_server import main as serve

        serve()

    _add_whoami_command(cli)
    _add_owner_commands(cli)
    _add_resource_commands(cli)
    _add_payment_commands(cli)
    _add_receipt_commands(cli)
    _add_payout_commands(cli)
    _add_wallet_key_commands(cli)
    _add_webhook_commands(cli)
    _add_listen_command(cli)
    return cli


def _add_whoami_command(cli: click.Group) -> None:
    @cli.command()
    @click.pass_context
    def whoami(ctx: Any) -> None:
        """Which credentials are set (by option or SVC_* variable) and, for each, its role,
        environment and who it is, as the service answers; exit 1 if it refuses one."""
        given = {name: ctx.obj[name] for name in CREDENTIALS if name in ctx.obj}
        if "owner_jwt" in given:
            _say_environment(ctx)
        try:
            with Client(**ctx.obj) as client:
                base_url = client.base_url
                sources = {name: _source(ctx, name) for name in given}
                entries, refusals = check_credentials(client, given, sources)
        except SvcError as exc:  # no answer at all (the service is not there)
            _say(f"error: {exc.message}")
            sys.exit(1)
        for entry in entries:
            if entry.get("role") == "owner":
                entry["environment_from"] = _source(ctx, "environment").split(";")[0]
        base = {"base_url": base_url, "base_url_from": _source(ctx, "base_url")}
        _emit({**base, "credentials": entries})
        for refused in refusals:
            _say_api_error(refused.error)
            _say(f"the {refused.credential} given by {refused.source} was refused")
        if not given:
            _say(
                "error: no credential: pass --owner-jwt, --seller-key or --wallet-key, or set "
                "SVC_OWNER_JWT, SVC_SELLER_KEY or SVC_WALLET_KEY"
            )
        if refusals or not given:
            sys.exit(1)


def _add_owner_commands(cli: click.Group) -> None:
    @cli.group()
    def owners() -> None:
        """Owner sign-up over HTTP (no credential), where the server allows it."""

    @owners.command("create")
    @_body_options(CreateOwner)
    @click.option(
        "--jwt-only", is_flag=True, help="Print the owner JWT alone: export SVC_OWNER_JWT=$(...)."
    )
    @click.pass_context
    def owners_create(ctx: Any, /, email: str, jwt_only: bool) -> None:
        """Sign up (POST /owners): print owner_id and owner_jwt (keep it: it is not stored).

        An operator with the database creates owners with `svc-server owners create`."""
        show = (lambda created: click.echo(created.owner_jwt)) if jwt_only else _emit
        _run(ctx, lambda c: c.owners.create(email), show=show)

    @cli.command()
    @click.pass_context
    def dashboard(ctx: Any) -> None:
        """Print a one-time link that signs you in to the dashboard (owner JWT); open it in
        a browser within 10 minutes.  Nothing is opened for you."""
        _run(ctx, lambda c: c.owners.dashboard_link(), show=lambda r: click.echo(r.url))

    @cli.group()
    def sellers() -> None:
        """Seller accounts (owner JWT)."""

    _command(sellers, "create", "sellers.create", body=CreateSeller, owner=True)
    _command(sellers, "list", "sellers.list", owner=True, page=True)


def _create_resource(c: Client, o: dict[str, Any]) -> Any:
    """``resources create`` and ``create-pay-link`` take the same options to the same call."""
    meta = resource_metadata(o.pop("sku_kind"), o.pop("credits"), o.pop("credit_unit"))
    return c.resources.create(kind="mcp" if o["tool"] else "http", metadata=meta, **o)


def _json(ctx: Any, param: Any, value: str | None) -> Any:
    """A JSON value given on the command line (``--json '{"q": 1}'``); for a field that
    holds an object (``--body-hint``), an object or the ``null`` that clears it."""
    if value is None:
        return None
    try:
        data = json.loads(value)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}") from None
    if param.name in _OBJECTS and data is not None and not isinstance(data, dict):
        raise click.BadParameter("must be a JSON object")
    return data


#: Fields that hold a JSON object (the others given as JSON take any value).
_OBJECTS = ("body_hint", "metadata")


def _body_options(
    cls: type, *names: str, arguments: tuple[str, ...] = (), **custom: dict[str, Any]
) -> Callable[[Any], Any]:
    """The fields ``names`` of the body class ``cls`` (every field when none are named) as
    click parameters named as the fields: ``arguments`` positional, the others
    ``--options`` whose type, choices and help come from the field (:mod:`svc._params`); a
    list is a repeated option named in the singular (``--event``).  ``custom`` overrides a
    field's click settings (``decls`` its flags)."""
    decorators = []
    for shape in params(cls, *names):
        if shape.name in arguments:
            decorators.append(click.argument(shape.name, required=shape.required))
            continue
        plural = typing.get_origin(shape.type) is list
        flag = _flag(shape.name.removesuffix("s") if plural else shape.name)
        kwargs: dict[str, Any] = dict(default=None, required=shape.required, help=help_of(shape))
        if chosen := choices(shape):
            kwargs["type"] = click.Choice(chosen)
        if shape.type is bool:
            kwargs["is_flag"] = True
        elif shape.type is int:
            kwargs["type"] = int
        elif plural:
            kwargs["help"] += "  Repeat for several."
            kwargs.update(multiple=True, callback=lambda _c, _p, v: list(v) or None)
        elif shape.type is Any or typing.get_origin(shape.type) is dict:
            kwargs["callback"] = _json
        kwargs.update(custom.get(shape.name, {}))
        decls = kwargs.pop("decls", (flag,))
        decorators.append(click.option(*decls, shape.name, **kwargs))
    return _stack(decorators)


#: ``resources create`` and ``create-pay-link``: a resource's fields, and its metadata as
#: three options of their own.
_RESOURCE_FIELDS = ("path", "tool", "amount", "description", "upstream_url", "listed")
#: A metered price (``--pricing metered``); ``update-resource`` changes all but the pricing.
_METERED_FIELDS = ("pricing", "unit_price", "unit", "max_amount", "fallback_amount")


def _resource_options(fn: Any) -> Any:
    """The options of ``resources create`` and ``create-pay-link`` (one resource each)."""
    sku_kinds = click.Choice(["one_shot", "credit_topup"])
    return _stack(
        [
            _body_options(
                CreateResource, *_RESOURCE_FIELDS, *_METERED_FIELDS, "method", "body_hint"
            ),
            click.option(
                "--sku-kind",
                default="one_shot",
                show_default=True,
                type=sku_kinds,
                help="One paid call, or a top-up of --credits.",
            ),
            click.option("--credits", default=None, help="Credits a credit_topup buys, e.g. 10."),
            click.option("--credit-unit", default=None, help="What a credit is, e.g. report."),
        ]
    )(fn)


def _add_resource_commands(cli: click.Group) -> None:
    @cli.group()
    def resources() -> None:
        """Priced resources (seller key)."""

    @resources.command("create")
    @_resource_options
    @click.pass_context
    def resources_create(ctx: Any, /, **o: Any) -> None:
        """Create a priced HTTP path (--path) or MCP tool (--tool)."""
        _run(ctx, lambda c: _create_resource(c, o))

    _command(resources, "list", "resources.list", page=True)
    _command(resources, "deactivate", "resources.deactivate", "resource_id")

    @cli.command("create-pay-link")
    @_resource_options
    @click.pass_context
    def create_pay_link(ctx: Any, /, **o: Any) -> None:
        """Create a priced resource and print what to share: gate_url and pay_url."""
        _run(ctx, lambda c: pay_link(_create_resource(c, o)))

    @cli.command("update-resource")
    @click.argument("resource_id")
    @_body_options(
        UpdateResource,
        *_RESOURCE_FIELDS[:4],
        *_METERED_FIELDS[1:],
        "listed",
        "method",
        "body_hint",
        listed={"decls": ("--listed/--unlisted",), "help": "In the directory or not."},
        method={
            "type": click.Choice([*get_args(ResourceMethod), "any"]),
            "help": "The one HTTP method the gate sells; any: every method.",
        },
    )
    @click.pass_context
    def update_resource(ctx: Any, /, resource_id: str, **o: Any) -> None:
        """Change a resource's price, path, tool, description, listing, method or body hint."""
        changes = {k: v for k, v in o.items() if v is not None and k not in ("method", "body_hint")}
        if o["method"] is not None:
            changes["method"] = None if o["method"] == "any" else o["method"]
        if ctx.get_parameter_source("body_hint") is click.core.ParameterSource.COMMANDLINE:
            changes["body_hint"] = o["body_hint"]
        if not changes:
            raise click.UsageError(
                "name at least one of --amount, --path, --tool, --description, --unit-price, "
                "--unit, --max-amount, --fallback-amount, --listed, --unlisted, --method, "
                "--body-hint"
            )
        _run(ctx, lambda c: c.resources.update(resource_id, **changes))

    kinds = click.Choice(get_args(ResourceKind))
    filters = [
        click.option("--kind", default=None, type=kinds, help="HTTP paths or MCP tools."),
        click.option("-q", "--q", "q", default=None, help="Text the description contains."),
        click.option("--max-amount", default=None, help="Prices at most this amount."),
    ]
    _command(cli, "directory", "directory.list", page=True, options=filters)


def _add_payment_commands(cli: click.Group) -> None:
    _command(cli, "enable-payments", "sellers.enable_payments", body=EnablePayments)
    _command(cli, "balance", "sellers.balance")
    # Either form, as given: the body's own rule (svc.bodies.Pay) refuses a wrong mix.
    _command(cli, "pay", "pay", "resource_id", body=Pay)

    @cli.command("pay-url")
    @_body_options(PayUrl, arguments=("url",), method={"default": "GET"})
    @click.option(
        "--wait-approval",
        is_flag=True,
        default=False,
        help="If a person must approve the payment: print the approval_url, wait for the "
        "decision (progress on stderr), then repeat the request with the same key.",
    )
    @click.option(
        "--approval-timeout",
        default=900.0,
        show_default=True,
        type=float,
        help="Seconds --wait-approval waits for the decision.",
    )
    @click.pass_context
    def pay_url(
        ctx: Any,
        /,
        url: str,
        dry_run: bool | None,
        stream: bool | None,
        wait_approval: bool,
        approval_timeout: float,
        **o: Any,
    ) -> None:
        """Pay any x402/MPP 402 URL (wallet key) and print its unlocked answer (with
        ``--stream``: its body on stdout as it arrives, then the result on stderr)."""
        if stream and not dry_run:
            _run(ctx, lambda c: _relayed(c.spend.pay_url(url, stream=True, **o)), show=_emit_err)
            return
        if wait_approval and not dry_run:
            _run(ctx, lambda c: _approved(c, url, approval_timeout, o))
            return
        _run(ctx, lambda c: (c.spend.pay_url_quote if dry_run else c.spend.pay_url)(url, **o))

    _command(cli, "attempts", "spend.attempts", page=True)
    _command(cli, "recycle", "sellers.recycle", "seller_id", body=RecycleBalance, owner=True)


def _add_receipt_commands(cli: click.Group) -> None:
    @cli.group()
    def receipts() -> None:
        """Receipts as their payer or seller reads them; capture a metered ledger payment
        (seller key)."""

    _command(receipts, "get", "receipts.get", "receipt_id")
    _command(receipts, "capture", "receipts.capture", "receipt_id", body=CaptureReceipt)

    @cli.group()
    def refunds() -> None:
        """Give back all or part of a payment the seller received, and read the seller's
        refunds (seller key)."""

    _command(refunds, "create", "refunds.create", "receipt_id", body=CreateRefund)
    _command(refunds, "list", "refunds.list", page=True)
    _command(refunds, "get", "refunds.get", "refund_id")

    @cli.group()
    def payments() -> None:
        """Where a payment stands: claimed, settled, released or refunded (its payer's
        wallet key, its seller's key, or the owner JWT of either)."""

    _command(payments, "get", "payments.get", "receipt_id")


def _seller_id_option(fn: Any) -> Any:
    """``--seller-id``: the owner dashboard's twin of a seller-key command (owner JWT)."""
    return click.option(
        "--seller-id",
        default=None,
        help="Act on this seller of the owner (owner JWT) instead of the seller key's.",
    )(fn)


def _watch(
    c: Client, withdrawal: Any, seller_id: str | None, interval: float, timeout: float
) -> Any:
    """Poll the withdrawal until it is paid or failed, printing each status it reaches."""
    w = withdrawal
    _say(f"withdrawal {w.id} of {w.amount} {w.currency}: {w.status}")
    deadline = time.monotonic() + timeout
    while withdrawal.status not in ("paid", "failed"):  # settled for good
        if time.monotonic() >= deadline:
            raise click.ClickException(
                f"withdrawal {withdrawal.id} is still {withdrawal.status} after {timeout:g} s; "
                f"see it with: svc withdrawals {withdrawal.id}"
            )
        time.sleep(interval)
        status = withdrawal.status
        withdrawal = c.withdrawals.get(withdrawal.id, seller_id=seller_id)
        if withdrawal.status != status:
            _say(f"withdrawal {withdrawal.id}: {withdrawal.status}")
    return withdrawal


def _add_payout_commands(cli: click.Group) -> None:
    @cli.group()
    def connect() -> None:
        """The payout account (seller key, or --seller-id with the owner JWT): a person
        completes onboarding in a browser, then `svc connect sync`."""

    @connect.command("onboard")
    @_body_options(ConnectOnboard)
    @_seller_id_option
    @click.pass_context
    def connect_onboard(ctx: Any, /, country: str, type: Any, seller_id: str | None) -> None:
        """Get an onboarding link (onboard_url) for a person to complete in a browser."""
        owner = seller_id is not None
        _run(ctx, lambda c: c.connect.onboard(country, type, seller_id=seller_id), owner=owner)
        _say(
            "Open onboard_url in a browser and complete it (a person must: no command can), "
            "then run: svc connect sync"
        )

    for name in ("sync", "status", "login"):
        _command(connect, name, f"connect.{name}", seller_id=True)

    @cli.command()
    @_body_options(Withdraw)
    @click.option("--wait", is_flag=True, help="Show progress until paid or failed.")
    @click.option("--timeout", default=600.0, show_default=True, help="Seconds --wait waits.")
    @click.option("--interval", default=1.0, show_default=True, help="Seconds between polls.")
    @_seller_id_option
    @click.pass_context
    def withdraw(
        ctx: Any,
        /,
        amount: str | None,
        wait: bool,
        timeout: float,
        interval: float,
        seller_id: str | None,
    ) -> None:
        """Withdraw seller balance to the payout account; with --wait, follow it
        (pending -> in_transit -> paid) and exit 1 if it fails."""

        def call(c: Client) -> Any:
            withdrawal = c.withdrawals.create(amount, seller_id=seller_id)
            return _watch(c, withdrawal, seller_id, interval, timeout) if wait else withdrawal

        done = _run(ctx, call, owner=seller_id is not None)
        if wait and done.status == "failed":
            _say(
                f"error: the withdrawal failed ({done.failure_reason}); the money is back in "
                "the balance"
            )
            sys.exit(1)

    withdrawal = ("withdrawal_id", "withdrawals.get")
    _command(cli, "withdrawals", "withdrawals.list", seller_id=True, page=True, get=withdrawal)


def _add_wallet_key_commands(cli: click.Group) -> None:
    @cli.group("wallet-keys")
    def wallet_keys() -> None:
        """Agents' wallet keys and their spend policies (owner JWT)."""

    _command(wallet_keys, "create", "wallet_keys.create", body=CreateWalletKey, owner=True)
    _command(wallet_keys, "list", "wallet_keys.list", owner=True, page=True)
    fund = ("wallet_key_id", "amount")
    _command(wallet_keys, "fund", "wallet_keys.fund", *fund, body=WalletKeyAmount, owner=True)
    _command(wallet_keys, "revoke", "wallet_keys.revoke", "wallet_key_id", owner=True)

    @cli.command("top-up")
    @_body_options(CreateTopUp, "amount", arguments=("amount",))
    @click.option(
        "--private-key-file",
        type=click.File("r"),
        help="File holding the paying wallet's 0x private key (Test: a sandbox faucet wallet).",
    )
    @click.option(
        "--card",
        is_flag=True,
        help="Pay by card at the processor's Checkout (live): prints the checkout_url to open.",
    )
    @click.pass_context
    def top_up(ctx: Any, /, amount: str, private_key_file: Any, card: bool) -> Any:
        """Pay AMOUNT into the account wallet: from your own wallet (x402, with
        --private-key-file), or by card (--card; open the checkout_url it prints)."""
        if card:
            return _run(ctx, lambda c: c.top_ups.create(amount, method="card"), owner=True)
        if private_key_file is None:
            raise click.UsageError("Give --private-key-file (x402) or --card.")
        key = private_key_file.read().strip()
        _run(ctx, lambda c: c.top_ups.create(amount, payer=key), owner=True)

    one_top_up = ("top_up_id", "top_ups.get")
    _command(cli, "top-ups", "top_ups.list", owner=True, page=True, get=one_top_up)


def _add_webhook_commands(cli: click.Group) -> None:
    @cli.group()
    def webhooks() -> None:
        """Webhook endpoints (owner JWT; --environment test keeps them in Test)."""

    _command(webhooks, "create", "webhooks.create", "url", body=CreateWebhook, owner=True)
    _command(webhooks, "list", "webhooks.list", owner=True, page=True)
    _command(webhooks, "deliveries", "webhooks.deliveries", "webhook_id", owner=True, page=True)
    _command(webhooks, "test", "webhooks.test", "webhook_id", owner=True)
    _command(webhooks, "delete", "webhooks.delete", "webhook_id", owner=True)


def _add_listen_command(cli: click.Group) -> None:
    @cli.command()
    @click.option("--forward-to", required=True, help="The local URL each event is POSTed to.")
    @click.option("--events", help="Comma-separated event types (default: every event).")
    @click.option(
        "--poll-wait",
        type=click.FloatRange(0.1, 30),
        default=POLL_WAIT,
        show_default=True,
        help="Seconds each poll waits on the service before its empty answer (the "
        "heartbeat a quiet connection is told from a dead one by).",
    )
    @click.pass_context
    def listen(ctx: Any, /, forward_to: str, events: str | None, poll_wait: float) -> None:
        """Forward Test events to a local receiver (owner JWT, --environment test), signed
        as delivered, one line per event; Ctrl-C deletes the listener endpoint.  A lost
        connection is retried with backoff (said on stderr); a listener gone meanwhile
        exits 1."""
        if _environment(ctx) != "test":
            _say("error: svc listen works in the test environment only: --environment test")
            sys.exit(1)
        stop = threading.Event()
        with contextlib.suppress(ValueError):  # SIGTERM ends it as Ctrl-C does (main thread)
            signal.signal(signal.SIGTERM, signal.default_int_handler)
        chosen = None if events is None else [e.strip() for e in events.split(",") if e.strip()]

        def run(c: Client) -> None:
            with contextlib.suppress(KeyboardInterrupt):
                forward(
                    c,
                    forward_to,
                    events=chosen,
                    say=click.echo,
                    stop=stop,
                    wait=poll_wait,
                    warn=_say,
                )

        _run(ctx, run, owner=True, show=lambda _: None)


def main() -> None:
    if click is None:
        sys.exit("the svc command needs click: pip install 'svc-payments[cli]'")
    _build()(prog_name="svc")


if __name__ == "__main__":
    main()
