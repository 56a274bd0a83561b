"""One amount grammar (docs/api.md "Money"): the server and the SDK read amounts with the
same function, so a string one accepts the other accepts, and a string one refuses the other
refuses; driven through real requests on the test database (SQLite or PostgreSQL)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from reference_server.web.validate import MAX_AMOUNT
from svc import _endpoints
from svc.money import GRAMMAR_HINT, format_amount, format_micros, from_micros, parse_amount

from ..support import Account, LiveServer, new_account

#: The grammar as docs/api.md writes it, compiled independently of svc.money.
DOC_GRAMMAR = re.compile(r"(0|[1-9][0-9]{0,11})(\.[0-9]{1,6})?", re.ASCII)

#: The issue's four, and their kin: signs, exponents, bare points, other digits, spaces.
REFUSED = [
    "0.0500000",
    " 0.05",
    "0.05\n",
    "00.05",
    "\u0660.\u0660\u0665",  # Arabic-Indic digits: str.isdigit() and Decimal() take them
    "\uff10.\uff10\uff15",  # fullwidth digits
    "+0.05",
    "-0.05",
    "5e-2",
    "0.05 ",
    "0. 05",
    "\t1",
    ".5",
    "5.",
    "",
    "NaN",
    "Infinity",
    "1_000",
    "0x10",
    "1000000000000",
]

props = settings(
    deadline=None,
    max_examples=120,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

amount_like = st.one_of(
    st.from_regex(DOC_GRAMMAR, fullmatch=True),
    st.text(alphabet="0123456789.-+eE_ \n\t\u0660\u0665\uff10", max_size=14),
    st.builds(
        lambda pad, core, tail: pad + core + tail,
        st.sampled_from(["", "0", " ", "+", "-", "\n"]),
        st.from_regex(DOC_GRAMMAR, fullmatch=True),
        st.sampled_from(["", "0", " ", "\n", "e1", ".", "5"]),
    ),
)


def sdk_accepts(text: str) -> bool:
    """What the SDK does before sending a price (``client.resources.create(amount=...)``)."""
    try:
        _endpoints.resources_create(kind="http", path="/p", amount=text)
    except ValueError:
        return False
    return True


@pytest.fixture(scope="module")
def shop(module_server: LiveServer) -> Iterator[tuple[LiveServer, Account, httpx.Client]]:
    account = new_account(module_server.url)
    with httpx.Client(base_url=module_server.url) as http:
        yield module_server, account, http


_paths = itertools.count()


def post_resource(http: httpx.Client, account: Account, amount: Any) -> httpx.Response:
    return http.post(
        "/resources",
        json={"kind": "http", "path": f"/v1/item-{next(_paths)}", "amount": amount},
        headers={"Authorization": f"Bearer {account.seller_key}"},
    )


def post_fund(http: httpx.Client, account: Account, amount: Any) -> httpx.Response:
    return http.post(
        f"/wallet-keys/{account.wallet_key_id}/fund",
        json={"amount": amount},
        headers={"Authorization": f"Bearer {account.owner_jwt}", "X-Svc-Environment": "test"},
    )


def amount_errors(r: httpx.Response) -> list[str]:
    """The messages of a 422 validation_error about the ``amount`` field ([] otherwise)."""
    if r.status_code != 422:
        return []
    body = r.json()
    assert body["error"]["code"] == "validation_error", r.text
    return [e["message"] for e in body["error"]["details"]["errors"] if e["field"] == "amount"]


def refused_for_amount(r: httpx.Response) -> bool:
    """Refused because of the amount: its grammar or range, or (for a control character)
    the input boundary, which answers before any field is read but still names it."""
    return r.status_code in (400, 422) and (
        bool(amount_errors(r)) or "amount" in r.json()["error"]["message"]
    )


# --- the grammar itself -----------------------------------------------------------------------


@given(st.decimals(min_value=0, max_value=Decimal("999999999999.999999"), places=6))
def test_format_then_parse_round_trips(amount: Decimal) -> None:
    text = format_amount(amount)
    assert DOC_GRAMMAR.fullmatch(text), text
    assert parse_amount(text) == amount


@given(st.integers(min_value=0, max_value=10**18 - 1))
def test_micro_units_format_into_the_grammar(micros: int) -> None:
    text = format_micros(micros)
    assert DOC_GRAMMAR.fullmatch(text), text
    assert parse_amount(text) == from_micros(micros)


@pytest.mark.parametrize("value", [5, 5_000_000, True, 0.05, "0.05"])
def test_format_amount_takes_only_a_decimal(value: object) -> None:
    """``parse_amount(5)`` is five dollars and the server stores micro-units: a bare
    number given to ``format_amount`` could mean either, so it is refused, not guessed."""
    assert parse_amount(5) == Decimal(5)
    with pytest.raises(TypeError, match="format_micros"):
        format_amount(value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [Decimal("0.05"), True, 0.05, "50000"])
def test_format_micros_takes_only_integer_micro_units(value: object) -> None:
    assert format_micros(50_000) == "0.05" and format_micros(5) == "0.000005"
    with pytest.raises(TypeError):
        format_micros(value)  # type: ignore[arg-type]


@given(amount_like)
@example("0.0500000")
@example("00.05")
def test_parse_amount_is_exactly_the_documented_grammar(text: str) -> None:
    try:
        parsed = parse_amount(text)
    except ValueError as exc:
        assert not DOC_GRAMMAR.fullmatch(text)
        assert GRAMMAR_HINT in str(exc)
    else:
        assert DOC_GRAMMAR.fullmatch(text)
        assert parsed == Decimal(text)


@pytest.mark.parametrize("text", REFUSED, ids=repr)
def test_sdk_refuses_before_sending(text: str) -> None:
    with pytest.raises(ValueError, match=re.escape(GRAMMAR_HINT)):
        _endpoints.wallet_keys_fund("vw_1", text)
    assert not sdk_accepts(text)


@pytest.mark.parametrize("value", [Decimal("-0.01"), Decimal("-0"), -1, Decimal("1e12")])
def test_sdk_refuses_python_numbers_outside_the_grammar(value: Any) -> None:
    with pytest.raises(ValueError, match="amount"):
        parse_amount(value)


# --- the server, through real requests --------------------------------------------------------


@pytest.mark.parametrize("text", REFUSED, ids=repr)
def test_server_refuses_with_a_validation_error_naming_field_and_grammar(
    shop: tuple[LiveServer, Account, httpx.Client], text: str
) -> None:
    _, account, http = shop
    for r in (post_resource(http, account, text), post_fund(http, account, text)):
        assert r.status_code == 422, r.text
        assert r.json()["error"]["code"] == "validation_error"
        assert "amount" in r.json()["error"]["message"]
        (message,) = amount_errors(r)
        if text.isprintable():  # a control character may be refused for what it is
            assert GRAMMAR_HINT in message


@pytest.mark.parametrize("value", [0.05, 5, True, ["0.05"], {"v": "0.05"}])
def test_server_refuses_json_non_strings_naming_the_grammar(
    shop: tuple[LiveServer, Account, httpx.Client], value: Any
) -> None:
    _, account, http = shop
    (message,) = amount_errors(post_resource(http, account, value))
    assert GRAMMAR_HINT in message


@props
@given(text=amount_like)
@example(text="0.0500000")
@example(text=" 0.05")
@example(text="0.05\n")
@example(text="00.05")
@example(text="0.000001")
@example(text="1000000")
def test_sdk_and_server_accept_the_same_strings(
    shop: tuple[LiveServer, Account, httpx.Client], text: str
) -> None:
    _, account, http = shop
    accepted = sdk_accepts(text)
    in_range = accepted and parse_amount(text) <= MAX_AMOUNT

    created = post_resource(http, account, text)
    if in_range:
        assert created.status_code == 201, created.text
        assert Decimal(created.json()["amount"]) == parse_amount(text)
    else:
        assert refused_for_amount(created), created.text

    funded = post_fund(http, account, text)
    refused = refused_for_amount(funded)
    assert refused is not in_range, funded.text
    if not refused:
        # Accepted as an amount: either moved, or refused for want of money, never for form.
        assert funded.status_code == 200 or funded.json()["error"]["code"] == "insufficient_funds"


@pytest.mark.parametrize("credits", [100, 2.5, 10**15, "40"])
def test_credits_are_a_count_not_an_amount(credits: Any) -> None:
    """``metadata.credits`` (a JSON number the seller chose) is read outside the amount
    grammar, so a large count does not make a resource unreadable."""
    from svc._models import ResourceMetadata
    from svc.wire import structure

    meta = structure({"sku_kind": "credit_topup", "credits": credits}, ResourceMetadata)
    assert meta.credits == Decimal(str(credits))
