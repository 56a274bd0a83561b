"""Every list method of the SDK pages the one way, on both clients.

The list methods are found, not listed: every public namespace method whose return type
has ``has_more``.  Each must take ``limit`` and ``starting_after`` and have an auto-paging
``*_all`` twin (``list`` -> ``list_all``) that follows ``starting_after`` until
``has_more`` is false, lazily, on ``svc.Client`` and ``svc.AsyncClient`` alike.
"""

from __future__ import annotations

import inspect
from typing import Any

import attrs
import pytest
from sdk_support import (
    ALL_CREDENTIALS,
    Twin,
    ok,
)

from svc import _async_namespaces, _namespaces

pytestmark = pytest.mark.anyio

#: Positional arguments the list methods that need one get.
ARGS = {"deliveries": ("wh_1",)}


def _list_methods() -> list[tuple[str, str]]:
    found = []
    for cls_name, cls in vars(_namespaces).items():
        if not (inspect.isclass(cls) and issubclass(cls, _namespaces._Namespace)):
            continue
        for name, fn in vars(cls).items():
            if name.startswith("_") or not inspect.isfunction(fn):
                continue
            returns = inspect.signature(fn, eval_str=True).return_annotation
            if attrs.has(returns) and "has_more" in attrs.fields_dict(returns):
                found.append((cls_name, name))
    return found


LIST_METHODS = _list_methods()
IDS = [f"{c}.{m}" for c, m in LIST_METHODS]


def _all_name(method: str) -> str:
    return "list_all" if method == "list" else f"{method}_all"


def test_the_lists_are_found() -> None:
    assert {m for _, m in LIST_METHODS} >= {"list", "deliveries", "attempts"}
    # sellers, resources, directory, wallet keys, top-ups, webhooks, deliveries, attempts,
    # approvals, withdrawals, refunds
    assert len(LIST_METHODS) == 11


@pytest.mark.parametrize(("cls_name", "method"), LIST_METHODS, ids=IDS)
def test_list_methods_take_the_paging_parameters_on_both_clients(
    cls_name: str, method: str
) -> None:
    sync_cls = getattr(_namespaces, cls_name)
    async_cls = getattr(_async_namespaces, "Async" + cls_name)
    page, apage = getattr(sync_cls, method), getattr(async_cls, method)
    assert {"limit", "starting_after"} <= set(inspect.signature(page).parameters)
    assert inspect.signature(page) == inspect.signature(apage)
    assert inspect.iscoroutinefunction(apage) and not inspect.iscoroutinefunction(page)
    every, aevery = getattr(sync_cls, _all_name(method)), getattr(async_cls, _all_name(method))
    params = list(inspect.signature(every).parameters.values())
    assert params == list(inspect.signature(aevery).parameters.values())
    assert "limit" in [p.name for p in params] and "starting_after" not in [p.name for p in params]


def _namespace(client: Any, cls_name: str) -> Any:
    """The client's namespace of that class (each a ``cached_property`` of the client)."""
    for name, attr in inspect.getmembers(type(client)):
        if getattr(getattr(attr, "func", None), "__name__", "").removeprefix("Async") == cls_name:
            return getattr(client, name)
    raise AssertionError(f"no {cls_name} namespace on {client!r}")


def _page(ids: list[str], has_more: bool) -> Any:
    items = [
        {
            "id": i,
            "environment": "test",
            "webhook_id": "wh_1",
            "event_id": "evt_1",
            "event_type": "payment.succeeded",
            "status": "succeeded",
            "url": "https://example.com/x",
            "method": "GET",
            "host": "example.com",
            "kind": "http",
            "short_id": "abc",
            "amount": "0.05",
            "gate_url": "https://g/x",
            "pay_url": "https://p/x",
            "path_or_tool": "/x",
            "policy": {},
            "balance": "0.00",
            "rails": ["rill"],
            "rail": "x402",
            "tx_hash": "0x" + "ab" * 32,
            "receipt_id": "rcpt_1",
            "wallet_key_id": "vw_1",
            "expires_at": "2026-01-01T00:00:00Z",
            "created_at": "2026-01-01T00:00:00Z",
        }
        for i in ids
    ]
    return ok({"data": items, "has_more": has_more})


@pytest.mark.parametrize(("cls_name", "method"), LIST_METHODS, ids=IDS)
async def test_one_page_sends_limit_and_starting_after(
    twin: Twin, cls_name: str, method: str
) -> None:
    client = twin.client(**ALL_CREDENTIALS)
    ns = _namespace(client, cls_name)
    args = ARGS.get(method, ())
    twin.reply(_page(["x_1"], True), _page([], False))
    page = await twin.call(client, lambda c: getattr(ns, method)(*args))
    assert [i.id for i in page.data] == ["x_1"] and page.has_more is True
    assert twin.last.url.query == b""
    await twin.call(client, lambda c: getattr(ns, method)(*args, limit=2, starting_after="x_1"))
    assert dict(twin.last.url.params) == {"limit": "2", "starting_after": "x_1"}
    for bad in (0, 101, True, "5"):
        with pytest.raises(ValueError, match="limit"):
            await twin.call(client, lambda c, bad=bad: getattr(ns, method)(*args, limit=bad))
    with pytest.raises(ValueError, match="starting_after"):
        await twin.call(client, lambda c: getattr(ns, method)(*args, starting_after=""))


async def _collect(twin: Twin, iterator: Any) -> list[str]:
    if twin.kind == "sync":
        return [item.id for item in iterator]
    return [item.id async for item in iterator]


@pytest.mark.parametrize(("cls_name", "method"), LIST_METHODS, ids=IDS)
async def test_auto_paging_follows_starting_after_until_has_more_is_false(
    twin: Twin, cls_name: str, method: str
) -> None:
    client = twin.client(**ALL_CREDENTIALS)
    ns = _namespace(client, cls_name)
    args = ARGS.get(method, ())
    iterator = getattr(ns, _all_name(method))(*args, limit=2)
    assert twin.requests == []  # nothing is fetched before the iteration starts
    twin.reply(_page(["a", "b"], True), _page(["c", "d"], True), _page(["e"], False))

    assert await _collect(twin, iterator) == ["a", "b", "c", "d", "e"]

    sent = [dict(r.url.params) for r in twin.requests]
    assert sent == [
        {"limit": "2"},
        {"limit": "2", "starting_after": "b"},
        {"limit": "2", "starting_after": "d"},
    ]


async def test_an_empty_page_that_claims_more_ends_the_iteration(twin: Twin) -> None:
    client = twin.client(**ALL_CREDENTIALS)
    twin.reply(_page([], True))
    assert await _collect(twin, client.resources.list_all()) == []
    assert len(twin.requests) == 1
