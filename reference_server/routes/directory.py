"""``GET /directory``: the resources their sellers listed, for agents to find and pay
(docs/directory.md: what is listed, what an entry shows, the filters).

No credential: anyone may read it, so an entry shows nothing else of the resource or the
seller (not its path, metadata, upstream or seller id).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from svc import DirectoryEntry, DirectoryList
from svc.money import AMOUNT_PATTERN, GRAMMAR_HINT, parse_amount

from ..domain import open_rails, resources
from ..web.endpoint import Call, Contract, Endpoint
from ..web.paging import Filter, PageRequest, paged
from ..web.responses import Reply
from ..web.sdk import Sdk

__all__ = ["ENDPOINTS", "FILTERS"]

#: The directory's filters, beside ``limit`` and ``starting_after``.
FILTERS = (
    Filter(
        name="kind",
        description="Only HTTP resources (http) or MCP tools (mcp).",
        hint="http or mcp",
        choices=("http", "mcp"),
    ),
    Filter(
        name="q",
        description="Only resources whose description contains this text (case ignored).",
        hint="text of 1 to 200 characters",
    ),
    Filter(
        name="max_amount",
        description="Only resources priced at most this amount (a decimal string).",
        hint=GRAMMAR_HINT,
        pattern=f"^{AMOUNT_PATTERN}$",
        max_length=32,
    ),
)


#: What an entry shows of its resource (with its rails and its seller's name, and nothing else).
_SHOWN = (
    "id kind amount gate_url pay_url description method body_hint pricing unit_price unit "
    "max_amount fallback_amount environment created_at"
)


@paged(filters=FILTERS)
def list_directory(call: Call, request: PageRequest) -> Reply:
    """Resources their sellers listed, in the request's environment (no credential)."""
    max_amount = request.filter("max_amount")
    page = resources.directory_page(
        call.conn,
        request,
        environment=call.environment,
        kind=request.filter("kind"),
        text=request.filter("q"),
        max_amount=None if max_amount is None else parse_amount(max_amount, name="max_amount"),
    )
    terms: dict[str, open_rails.RailTerms | None] = {}
    data = [_entry(call, row, terms) for row in page.rows]
    return Reply(DirectoryList(data=data, has_more=page.has_more))


def _entry(call: Call, row: Any, terms: dict[str, open_rails.RailTerms | None]) -> DirectoryEntry:
    resource = resources.resource_model(row, call.public_url)
    if row.seller_id not in terms:
        terms[row.seller_id] = _terms(call, row)
    shown = {name: getattr(resource, name) for name in _SHOWN.split()}
    rails = _rails(call, terms[row.seller_id], row)
    return DirectoryEntry(**shown, rails=rails, seller_name=row.seller_name)


def _terms(call: Call, row: Any) -> open_rails.RailTerms | None:
    """The open rails the row's seller offers (the terms its gates' 402 would carry)."""
    seller = SimpleNamespace(
        environment=row.environment,
        x402_enabled=row.seller_x402_enabled,
        mpp_enabled=row.seller_mpp_enabled,
        payout_wallet_address=row.seller_payout_wallet_address,
    )
    return open_rails.offered(call.ctx, seller)


def _rails(call: Call, terms: open_rails.RailTerms | None, row: Any) -> list[str]:
    """What the resource's gate takes: the open rails it is sold on (a metered one on
    x402 ``upto``, and MPP only at a fallback price), then the service's ledger rail,
    which every gate takes."""
    sold = frozenset() if terms is None else open_rails.sold_on(call.ctx.settings, terms, row)
    return [rail for rail in ("x402", "mpp") if rail in sold] + ["rill"]


ENDPOINTS = [
    Endpoint(
        method="GET",
        path="/directory",
        handler=list_directory,
        sdk=Sdk(
            "directory.list",
            "*, kind: ResourceKind | None = None, q: str | None = None, "
            "max_amount: Amount | None = None",
            doc="""Listed, active resources, oldest first: of one ``kind``, whose description
            contains ``q`` (case ignored), priced at most ``max_amount``, as given.""",
            all_doc="""Every entry of the directory (with the filters given), in the order of
            :meth:`list`.""",
            build="directory_query",
        ),
        contract=Contract(response=DirectoryList, errors=("invalid_environment",)),
    ),
]
