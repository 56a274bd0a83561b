"""``svc``: the SDK's flows as shell commands (the CLI twins of the spec's MCP tools).

Every command is one call of :class:`svc.Client` and prints the result as JSON, so the
output can be piped into ``jq``.  Credentials come from options or the same environment
variables the client reads (``SVC_BASE_URL``, ``SVC_OWNER_JWT``, ``SVC_SELLER_KEY``,
``SVC_WALLET_KEY``, ``SVC_ENVIRONMENT``).  An error prints its code, message and
``request_id`` on stderr and exits 1.

Needs the ``cli`` extra (``pip install 'svc[cli]'``): click is not a dependency of the SDK.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

from ._client import Client
from ._errors import APIError, SvcError
from .wire import unstructure

try:
    import click
except ImportError:  # pragma: no cover - exercised by users without the extra
    click = None  # type: ignore[assignment]

__all__ = ["main"]


def _emit(value: Any) -> None:
    click.echo(json.dumps(unstructure(value), indent=2, default=str))


def _run(ctx: Any, /, call: Callable[[Client], Any]) -> None:
    """One client call: print its result, or the error and exit 1."""
    try:
        with Client(**ctx.obj) as client:
            _emit(call(client))
    except APIError as exc:
        click.echo(
            f"error {exc.status} {exc.code}: {exc.message} (request_id={exc.request_id})", err=True
        )
        sys.exit(1)
    except SvcError as exc:
        click.echo(f"error: {exc.message}", err=True)
        sys.exit(1)


def _list(
    ctx: Any,
    /,
    o: dict[str, Any],
    one: Callable[[Client], Callable[..., Any]],
    every: Callable[[Client], Callable[..., Iterable[Any]]],
) -> None:
    """A list command: one page (``--limit``, ``--starting-after``), or with ``--all`` every
    item, fetched page by page and printed as one list (``has_more`` false)."""
    if o["all"] and o["starting_after"] is not None:
        raise click.UsageError("--all starts at the first item; leave out --starting-after")

    def call(c: Client) -> Any:
        if o["all"]:
            return {"data": list(every(c)(limit=o["limit"])), "has_more": False}
        return one(c)(limit=o["limit"], starting_after=o["starting_after"])

    _run(ctx, call)


def _page_options(fn: Any) -> Any:
    """``--limit``, ``--starting-after`` and ``--all``: the one paging contract of lists."""
    fn = click.option("--all", "all", is_flag=True, help="Every item, page after page.")(fn)
    fn = click.option("--starting-after", default=None, help="The last id of the previous page.")(
        fn
    )
    return click.option("--limit", default=None, type=int, help="Items per page, 1 to 100.")(fn)


def _build() -> Any:
    """The ``svc`` group: global options, then each family of commands, one builder each
    (one function per family keeps each one short enough to read and to change alone)."""

    @click.group()
    @click.option("--base-url", envvar="SVC_BASE_URL", default=None, help="API host.")
    @click.option("--owner-jwt", envvar="SVC_OWNER_JWT", default=None)
    @click.option("--seller-key", envvar="SVC_SELLER_KEY", default=None)
    @click.option("--wallet-key", envvar="SVC_WALLET_KEY", default=None)
    @click.option(
        "--environment", envvar="SVC_ENVIRONMENT", default=None, type=click.Choice(["test", "live"])
    )
    @click.pass_context
    def cli(ctx: Any, /, **options: Any) -> None:
        """Sellers, priced resources, payments and webhooks from the shell."""
        ctx.obj = {k: v for k, v in options.items() if v is not None}

    @cli.command()
    @click.pass_context
    def health(ctx: Any) -> None:
        """Is the service up?"""
        _run(ctx, lambda c: c.health())

    @cli.command()
    def mcp() -> None:
        """Serve the svc MCP tools over stdio (what an MCP host launches); see docs/mcp.md."""
        from .mcp_server import main as serve

        serve()

    _add_seller_commands(cli)
    _add_resource_commands(cli)
    _add_update_resource_command(cli)
    _add_directory_command(cli)
    _add_payment_commands(cli)
    _add_wallet_key_commands(cli)
    _add_webhook_commands(cli)
    return cli


def _add_seller_commands(cli: click.Group) -> None:
    @cli.group()
    def sellers() -> None:
        """Seller accounts (owner JWT)."""

    @sellers.command("create")
    @click.option("--name", default=None)
    @click.pass_context
    def sellers_create(ctx: Any, /, name: str | None) -> None:
        """Create a seller; its key is printed once."""
        _run(ctx, lambda c: c.sellers.create(name=name))

    @sellers.command("list")
    @_page_options
    @click.pass_context
    def sellers_list(ctx: Any, /, **o: Any) -> None:
        """The owner's sellers, oldest first."""
        _list(ctx, o, lambda c: c.sellers.list, lambda c: c.sellers.list_all)


def _metadata(sku_kind: str, credits: str | None, credit_unit: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"sku_kind": sku_kind}
    if credits is not None:
        meta["credits"] = int(credits) if credits.isdigit() else float(credits)
    if credit_unit is not None:
        meta["credit_unit"] = credit_unit
    return meta


def _create_resource(c: Client, o: dict[str, Any]) -> Any:
    """``resources create`` and ``create-pay-link`` take the same options to the same call."""
    return c.resources.create(
        kind="mcp" if o["tool"] else "http",
        path=o["path"],
        tool=o["tool"],
        amount=o["amount"],
        description=o["description"],
        metadata=_metadata(o["sku_kind"], o["credits"], o["credit_unit"]),
        upstream_url=o["upstream_url"],
        listed=o["listed"] or None,
        method=o["method"],
        body_hint=o["body_hint"],
    )


def _json_object(ctx: Any, param: Any, value: str | None) -> Any:
    """A JSON object given on the command line (``--body-hint '{"city": "Lisbon"}'``);
    ``null`` where the command takes it to clear."""
    if value is None:
        return None
    try:
        data = json.loads(value)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}") from None
    if data is not None and not isinstance(data, dict):
        raise click.BadParameter("must be a JSON object")
    return data


_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]


def _resource_options(fn: Any) -> Any:
    """The options of ``resources create`` and ``create-pay-link`` (one resource each)."""
    options = [
        click.option("--path", default=None, help="HTTP path the SKU gates (kind http)."),
        click.option("--tool", default=None, help="MCP tool the SKU gates (kind mcp)."),
        click.option("--amount", required=True, help='Price as a decimal string, e.g. "0.05".'),
        click.option("--description", default=None),
        click.option(
            "--sku-kind", default="one_shot", type=click.Choice(["one_shot", "credit_topup"])
        ),
        click.option("--credits", default=None),
        click.option("--credit-unit", default=None),
        click.option("--upstream-url", default=None),
        click.option("--listed", is_flag=True, help="Show it in the directory."),
        click.option(
            "--method",
            default=None,
            type=click.Choice(_METHODS),
            help="The one HTTP method the gate sells (default: any).",
        ),
        click.option(
            "--body-hint",
            default=None,
            callback=_json_object,
            help="A JSON object callers copy as their body (with --method POST, PUT or PATCH).",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


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

    @resources.command("list")
    @_page_options
    @click.pass_context
    def resources_list(ctx: Any, /, **o: Any) -> None:
        """The seller's resources, oldest first."""
        _list(ctx, o, lambda c: c.resources.list, lambda c: c.resources.list_all)

    @resources.command("deactivate")
    @click.argument("resource_id")
    @click.pass_context
    def resources_deactivate(ctx: Any, /, resource_id: str) -> None:
        """Stop selling a resource (``active`` becomes false)."""
        _run(ctx, lambda c: c.resources.deactivate(resource_id))

    @cli.command("create-pay-link")
    @_resource_options
    @click.pass_context
    def create_pay_link(ctx: Any, /, **o: Any) -> None:
        """Create a priced resource and print what to share: gate_url and pay_page_url."""

        def call(c: Client) -> dict[str, Any]:
            resource = _create_resource(c, o)
            return {
                "resource_id": resource.id,
                "gate_url": resource.gate_url,
                "pay_page_url": resource.pay_url,
            }

        _run(ctx, call)


def _add_update_resource_command(cli: click.Group) -> None:
    @cli.command("update-resource")
    @click.argument("resource_id")
    @click.option("--amount", default=None)
    @click.option("--path", default=None)
    @click.option("--tool", default=None)
    @click.option("--description", default=None)
    @click.option("--listed/--unlisted", default=None, help="In the directory or not.")
    @click.option(
        "--method",
        default=None,
        type=click.Choice([*_METHODS, "any"]),
        help="The one HTTP method the gate sells; any: every method.",
    )
    @click.option(
        "--body-hint", default=None, callback=_json_object, help="A JSON object; null clears it."
    )
    @click.pass_context
    def update_resource(ctx: Any, /, resource_id: str, **o: Any) -> None:
        """Change a resource's price, path, tool, description, listing, method or body hint."""
        changes = {k: v for k, v in o.items() if v is not None and k not in ("method", "body_hint")}
        if o["method"] is not None:
            changes["method"] = None if o["method"] == "any" else o["method"]
        source = click.get_current_context().get_parameter_source("body_hint")
        if source is click.core.ParameterSource.COMMANDLINE:
            changes["body_hint"] = o["body_hint"]
        if not changes:
            raise click.UsageError(
                "name at least one of --amount, --path, --tool, --description, --listed, "
                "--unlisted, --method, --body-hint"
            )
        _run(ctx, lambda c: c.resources.update(resource_id, **changes))


def _add_directory_command(cli: click.Group) -> None:
    @cli.command("directory")
    @_page_options
    @click.option("--kind", default=None, type=click.Choice(["http", "mcp"]))
    @click.option("-q", "--q", "q", default=None, help="Text the description contains.")
    @click.option("--max-amount", default=None, help="Prices at most this amount.")
    @click.pass_context
    def directory(ctx: Any, /, **o: Any) -> None:
        """Resources their sellers listed (no credential; --environment picks test or live)."""
        filters = {"kind": o["kind"], "q": o["q"], "max_amount": o["max_amount"]}
        _list(
            ctx,
            o,
            lambda c: partial(c.directory.list, **filters),
            lambda c: partial(c.directory.list_all, **filters),
        )


def _add_payment_commands(cli: click.Group) -> None:
    @cli.command("enable-payments")
    @click.option("--payout-wallet-address", default=None)
    @click.option("--processor-profile-id", default=None)
    @click.pass_context
    def enable_payments(
        ctx: Any, payout_wallet_address: str | None, processor_profile_id: str | None
    ) -> None:
        """Turn on MPP and x402 for every gate of the seller."""
        _run(
            ctx,
            lambda c: c.sellers.enable_payments(
                processor_profile_id=processor_profile_id,
                payout_wallet_address=payout_wallet_address,
            ),
        )

    @cli.command()
    @click.pass_context
    def balance(ctx: Any) -> None:
        """The seller's balance and payout readiness."""
        _run(ctx, lambda c: c.sellers.balance())

    @cli.command()
    @click.argument("resource_id", required=False)
    @click.option("--destination", default=None, help="A handle such as @acme.")
    @click.option("--amount", default=None)
    @click.pass_context
    def pay(
        ctx: Any, /, resource_id: str | None, destination: str | None, amount: str | None
    ) -> None:
        """Pay a resource on the ledger (wallet key), or a handle with --destination."""
        if resource_id is not None:
            _run(ctx, lambda c: c.pay(resource_id=resource_id))
        elif destination is not None and amount is not None:
            _run(ctx, lambda c: c.pay(destination=destination, amount=amount))
        else:
            raise click.UsageError("give RESOURCE_ID, or --destination and --amount")

    @cli.command("pay-url")
    @click.argument("url")
    @click.option("--method", default="GET", type=click.Choice(["GET", "POST"]))
    @click.option("--json", "body", default=None, help="JSON body to send (with --method POST).")
    @click.pass_context
    def pay_url(ctx: Any, /, url: str, method: str, body: str | None) -> None:
        """Pay any x402/MPP 402 URL (wallet key) and print its unlocked answer."""
        try:
            payload = None if body is None else json.loads(body)
        except ValueError as exc:
            raise click.BadParameter(f"not JSON: {exc}", param_hint="--json") from None
        verb: Any = method  # click.Choice has checked it is GET or POST
        _run(ctx, lambda c: c.spend.pay_url(url, method=verb, json=payload))

    @cli.command()
    @_page_options
    @click.pass_context
    def attempts(ctx: Any, /, **o: Any) -> None:
        """The wallet key's pay-url attempts, newest first."""
        _list(ctx, o, lambda c: c.spend.attempts, lambda c: c.spend.attempts_all)

    @cli.command()
    @click.argument("seller_id")
    @click.option("--amount", default=None, help="Default: the whole balance.")
    @click.pass_context
    def recycle(ctx: Any, /, seller_id: str, amount: str | None) -> None:
        """Move a seller's balance into the owner's account wallet (owner JWT)."""
        _run(ctx, lambda c: c.sellers.recycle(seller_id, amount))


def _add_wallet_key_commands(cli: click.Group) -> None:
    @cli.group("wallet-keys")
    def wallet_keys() -> None:
        """Agents' wallet keys and their spend policies (owner JWT)."""

    @wallet_keys.command("create")
    @click.option("--name", default=None)
    @click.option("--allowance", default=None, help="Per period, e.g. 5.00.")
    @click.option("--period", default=None, type=click.Choice(["day", "week", "month", "none"]))
    @click.option("--max-per-tx", default=None)
    @click.option("--budget", default=None, help="Lifetime cap.")
    @click.option("--allowed-host", "hosts", multiple=True, help="Repeat for several.")
    @click.option(
        "--allowed-rail", "rails", multiple=True, type=click.Choice(["x402", "mpp", "rill"])
    )
    @click.pass_context
    def wallet_keys_create(
        ctx: Any, /, hosts: tuple[str, ...], rails: tuple[str, ...], **o: Any
    ) -> None:
        """Mint a wallet key; the key is printed once."""
        _run(
            ctx,
            lambda c: c.wallet_keys.create(
                **o, allowed_hosts=list(hosts) or None, allowed_rails=list(rails) or None
            ),
        )

    @wallet_keys.command("list")
    @_page_options
    @click.pass_context
    def wallet_keys_list(ctx: Any, /, **o: Any) -> None:
        """The owner's wallet keys, oldest first."""
        _list(ctx, o, lambda c: c.wallet_keys.list, lambda c: c.wallet_keys.list_all)

    @wallet_keys.command("fund")
    @click.argument("wallet_key_id")
    @click.argument("amount")
    @click.pass_context
    def wallet_keys_fund(ctx: Any, /, wallet_key_id: str, amount: str) -> None:
        """Add prepaid balance from the account wallet (Test: sandbox money)."""
        _run(ctx, lambda c: c.wallet_keys.fund(wallet_key_id, amount))

    @wallet_keys.command("revoke")
    @click.argument("wallet_key_id")
    @click.pass_context
    def wallet_keys_revoke(ctx: Any, /, wallet_key_id: str) -> None:
        _run(ctx, lambda c: c.wallet_keys.revoke(wallet_key_id))


def _add_webhook_commands(cli: click.Group) -> None:
    @cli.group()
    def webhooks() -> None:
        """Webhook endpoints (owner JWT; --environment test keeps them in Test)."""

    @webhooks.command("create")
    @click.argument("url")
    @click.option("--event", "events", multiple=True, help="Repeat for several; none = all.")
    @click.pass_context
    def webhooks_create(ctx: Any, /, url: str, events: tuple[str, ...]) -> None:
        """Register an endpoint; its signing secret is printed once."""
        _run(ctx, lambda c: c.webhooks.create(url, events=list(events) or None))

    @webhooks.command("list")
    @_page_options
    @click.pass_context
    def webhooks_list(ctx: Any, /, **o: Any) -> None:
        """The owner's endpoints, oldest first."""
        _list(ctx, o, lambda c: c.webhooks.list, lambda c: c.webhooks.list_all)

    @webhooks.command("deliveries")
    @click.argument("webhook_id")
    @_page_options
    @click.pass_context
    def webhooks_deliveries(ctx: Any, /, webhook_id: str, **o: Any) -> None:
        """An endpoint's delivery log, newest first."""
        _list(
            ctx,
            o,
            lambda c: partial(c.webhooks.deliveries, webhook_id),
            lambda c: partial(c.webhooks.deliveries_all, webhook_id),
        )

    @webhooks.command("test")
    @click.argument("webhook_id")
    @click.pass_context
    def webhooks_test(ctx: Any, /, webhook_id: str) -> None:
        """Send a signed payment.succeeded sample now."""
        _run(ctx, lambda c: c.webhooks.test(webhook_id))

    @webhooks.command("delete")
    @click.argument("webhook_id")
    @click.pass_context
    def webhooks_delete(ctx: Any, /, webhook_id: str) -> None:
        _run(ctx, lambda c: c.webhooks.delete(webhook_id))


def main() -> None:
    if click is None:
        sys.exit("the svc command needs click: pip install 'svc[cli]'")
    _build()(prog_name="svc")
