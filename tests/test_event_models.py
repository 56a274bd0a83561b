"""Typed ``data`` of every event: structuring, sign/verify round trips, tolerance.

Each sample is the ``data`` the reference server sends for that event type (see
docs/events.md); the expected model's typed values are written out by hand, so a renamed
field or a lost Decimal shows up here rather than in a receiver.
"""

from __future__ import annotations

import json
import typing
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import svc
from svc import webhooks, wire
from svc._models import EVENT_DATA_TYPES

from .support import ALL_EVENT_TYPES

SECRET = "whsec_event_models"
NOW = 1_795_003_200
CREATED_AT = "2026-11-21T12:00:00Z"

RESOURCE_JSON: dict[str, Any] = {
    "id": "res_1",
    "short_id": "r1",
    "kind": "http",
    "amount": "0.10",
    "gate_url": "https://svc.example.test/g/r1",
    "pay_url": "https://svc.example.test/p/r1",
    "path_or_tool": "/v1/report",
    "path": "/v1/report",
    "tool": None,
    "active": True,
    "description": "a report",
    "metadata": {"sku_kind": "credit_topup", "credits": 100, "credit_unit": "call", "tier": "pro"},
    "upstream_url": None,
    "listed": False,
    "seller_id": "sel_1",
    "environment": "test",
    "created_at": "2026-11-20T08:00:00Z",
    "updated_at": "2026-11-21T12:00:00Z",
    "request_id": None,
}


def _sample(cls: type, data: dict[str, Any], **typed: Any) -> tuple[dict[str, Any], Any]:
    """(data as the server sends it, the model it must read into): ``cls`` over ``data``
    with every value that is not read as sent (Decimal, datetime, nested models) written
    out by hand in ``typed``, so a renamed field or a lost Decimal fails here."""
    return data, cls(**{**data, **typed})


#: event type -> (data as the server sends it, the model it must read into)
SAMPLES: dict[str, tuple[dict[str, Any], Any]] = {
    "payment.succeeded": _sample(
        svc.PaymentSucceededData,
        {
            "ok": True,
            "type": "resource",
            "rail": "rill",
            "receipt_id": "rcpt_1",
            "request_id": "req_1",
            "resource_id": "res_1",
            "short_id": "r1",
            "path_or_tool": "/v1/report",
            "metadata": {"sku_kind": "one_shot"},
            "seller_id": "sel_1",
            "amount": "0.10",
            "platform_fee": "0.001",
            "processor_payment_intent_id": None,
            "seller_balance": "12.099",
            "environment": "test",
            "settlement": "ledger",
        },
        metadata=svc.ResourceMetadata(sku_kind="one_shot"),
        amount=Decimal("0.10"),
        platform_fee=Decimal("0.001"),
        seller_balance=Decimal("12.099"),
    ),
    "transfer.received": _sample(
        svc.TransferReceivedData,
        {
            "receipt_id": "rcpt_2",
            "request_id": "req_2",
            "destination": "@acme",
            "amount": "1.25",
            "rail": "rill",
            "settlement": "ledger",
            "environment": "test",
            "account_wallet_balance": "41.25",
        },
        amount=Decimal("1.25"),
        account_wallet_balance=Decimal("41.25"),
    ),
    "funding.paid": _sample(
        svc.FundingPaidData,
        {
            "wallet_key_id": "vw_1",
            "amount": "20.00",
            "balance": "20.00",
            "source": "sandbox",
            "transfer_id": "tr_1",
            "environment": "test",
        },
        amount=Decimal("20"),
        balance=Decimal("20"),
    ),
    "payment.refunded": _sample(
        svc.PaymentRefundedData,
        {
            "receipt_id": "rcpt_1",
            "refund_id": "rfnd_1",
            "amount": "0.30",
            "refunded": "0.30",
            "remaining": "0.70",
            "reason": "requested_by_customer",
            "rail": "rill",
            "seller_id": "sel_1",
            "wallet_key_id": "vw_1",
            "environment": "test",
        },
        amount=Decimal("0.3"),
        refunded=Decimal("0.3"),
        remaining=Decimal("0.7"),
    ),
    "payment.refund_failed": _sample(
        svc.PaymentRefundFailedData,
        {
            "receipt_id": "rcpt_2",
            "refund_id": "rfnd_2",
            "amount": "0.50",
            "refunded": "0.00",
            "remaining": "0.50",
            "reason": None,
            "rail": "x402",
            "seller_id": "sel_1",
            "wallet_key_id": None,
            "environment": "live",
            "failure_reason": "the facilitator refused the transfer",
        },
        amount=Decimal("0.5"),
        refunded=Decimal("0"),
        remaining=Decimal("0.5"),
    ),
    "approval.requested": _sample(
        svc.ApprovalRequestedData,
        {
            "approval_id": "appr_1",
            "wallet_key_id": "vw_1",
            "amount": "0.25",
            "url": "https://seller.example/report",
            "resource_id": None,
            "expires_at": "2026-11-28T02:15:00+00:00",
            "environment": "test",
        },
        amount=Decimal("0.25"),
        expires_at=datetime(2026, 11, 28, 2, 15, tzinfo=UTC),
    ),
    "approval.decided": _sample(
        svc.ApprovalDecidedData,
        {
            "approval_id": "appr_1",
            "wallet_key_id": "vw_1",
            "decision": "declined",
            "amount": "0.25",
            "environment": "test",
        },
        amount=Decimal("0.25"),
    ),
    "funding.refunded": _sample(
        svc.FundingRefundedData,
        {
            "wallet_key_id": "vw_1",
            "amount": "5.50",
            "balance": "14.50",
            "reason": "refund",
            "transfer_id": "tr_2",
            "environment": "live",
        },
        amount=Decimal("5.5"),
        balance=Decimal("14.5"),
    ),
    "vw.revoked": _sample(
        svc.WalletKeyRevokedData,
        {"wallet_key_id": "vw_1", "returned_amount": "14.50", "environment": "test"},
        returned_amount=Decimal("14.5"),
    ),
    "allowance.reset": _sample(
        svc.AllowanceResetData,
        {
            "wallet_key_id": "vw_1",
            "period": "day",
            "allowance": "5.00",
            "spent_last_period": "4.95",
            "period_started_at": "2026-11-21T00:00:00+00:00",
            "next_reset_at": "2026-11-22T00:00:00+00:00",
        },
        allowance=Decimal("5"),
        spent_last_period=Decimal("4.95"),
        period_started_at=datetime(2026, 11, 21, tzinfo=UTC),
        next_reset_at=datetime(2026, 11, 22, tzinfo=UTC),
    ),
    "resource.updated": _sample(
        svc.ResourceUpdatedData,
        {"resource": RESOURCE_JSON, "changed": ["amount", "description"]},
        resource=_sample(
            svc.Resource,
            RESOURCE_JSON,
            amount=Decimal("0.10"),
            metadata=svc.ResourceMetadata(
                sku_kind="credit_topup",
                credits=Decimal(100),
                credit_unit="call",
                extra={"tier": "pro"},
            ),
            created_at=datetime(2026, 11, 20, 8, tzinfo=UTC),
            updated_at=datetime(2026, 11, 21, 12, tzinfo=UTC),
        )[1],
    ),
    "payment.failed": _sample(
        svc.PaymentFailedData,
        {
            "ok": False,
            "type": "url",
            "rail": "x402",
            "reason": "allowance_exceeded",
            "message": "The allowance for this period is spent.",
            "request_id": "req_3",
            "attempt_id": "att_1",
            "resource_id": None,
            "short_id": None,
            "seller_id": None,
            "amount": "0.05",
            "environment": "test",
            "settlement": None,
        },
        amount=Decimal("0.05"),
    ),
    "withdrawal.paid": _sample(
        svc.WithdrawalPaidData,
        {
            "withdrawal_id": "wd_1",
            "seller_id": "sel_1",
            "amount": "100.00",
            "status": "paid",
            "environment": "live",
        },
        amount=Decimal("100"),
    ),
    "withdrawal.failed": _sample(
        svc.WithdrawalFailedData,
        {
            "withdrawal_id": "wd_2",
            "seller_id": "sel_1",
            "amount": "100.00",
            "status": "failed",
            "reason": "payout account closed",
            "environment": "live",
        },
        amount=Decimal("100"),
    ),
    "seller.withdrawn": _sample(
        svc.SellerWithdrawnData,
        {
            "seller_id": "sel_1",
            "amount": "12.00",
            "destination": "account_wallet",
            "withdrawal_id": None,
            "balance": "0.00",
            "environment": "test",
        },
        amount=Decimal("12"),
        balance=Decimal("0"),
    ),
}

#: The fields a sender must always include; every other field has a default.
REQUIRED: dict[type, set[str]] = {
    svc.PaymentSucceededData: {"receipt_id"},
    svc.TransferReceivedData: {"receipt_id"},
    svc.FundingPaidData: {"wallet_key_id"},
    svc.PaymentRefundedData: {"receipt_id"},
    svc.PaymentRefundFailedData: {"receipt_id"},
    svc.ApprovalRequestedData: {"approval_id"},
    svc.ApprovalDecidedData: {"approval_id"},
    svc.FundingRefundedData: {"wallet_key_id"},
    svc.WalletKeyRevokedData: {"wallet_key_id"},
    svc.AllowanceResetData: {"wallet_key_id"},
    svc.ResourceUpdatedData: {"resource"},
    svc.PaymentFailedData: set(),
    svc.WithdrawalPaidData: {"withdrawal_id"},
    svc.WithdrawalFailedData: {"withdrawal_id"},
    svc.SellerWithdrawnData: {"seller_id"},
}
TYPES = sorted(SAMPLES)


def envelope(event_type: str, data: Any, event_id: str = "evt_1") -> dict[str, Any]:
    return {"id": event_id, "type": event_type, "created_at": CREATED_AT, "data": data}


def deliver(document: Any) -> svc.Event:
    """Sign ``document`` as the service does and verify it as a receiver does."""
    body = json.dumps(document, separators=(",", ":")).encode("utf-8")
    headers = webhooks.headers(SECRET, webhook_id=document["id"], timestamp=NOW, body=body)
    return webhooks.verify(SECRET, body, headers, now=lambda: NOW)


def _money_fields(cls: type) -> list[str]:
    hints = typing.get_type_hints(cls)
    return [n for n, h in hints.items() if h is Decimal or Decimal in typing.get_args(h)]


# --- the registry ---------------------------------------------------------------------------


def test_every_event_of_the_spec_has_a_model() -> None:
    assert set(EVENT_DATA_TYPES) == ALL_EVENT_TYPES == set(SAMPLES)
    assert {type(expected) for _, expected in SAMPLES.values()} == set(REQUIRED)
    for event_type, (_, expected) in SAMPLES.items():
        assert EVENT_DATA_TYPES[event_type] is type(expected)


def test_the_server_catalog_and_the_sdk_agree() -> None:
    from reference_server.domain.events import EVENT_TYPES

    assert set(EVENT_TYPES) == set(EVENT_DATA_TYPES)


@pytest.mark.parametrize("event_type", TYPES)
def test_models_are_exported_frozen_and_optional_but_for_their_key(event_type: str) -> None:
    expected = SAMPLES[event_type][1]
    cls = type(expected)
    assert cls.__name__.endswith("Data")
    assert getattr(svc, cls.__name__) is cls
    assert cls.__name__ in svc.__all__
    required = {f.name for f in attrs.fields(cls) if f.default is attrs.NOTHING}
    assert required == REQUIRED[cls]
    assert all(f.kw_only for f in attrs.fields(cls))
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        setattr(expected, attrs.fields(cls)[0].name, None)


# --- structuring --------------------------------------------------------------------------


@pytest.mark.parametrize("event_type", TYPES)
def test_each_type_structures_from_its_envelope(event_type: str) -> None:
    data, expected = SAMPLES[event_type]

    event = wire.structure(envelope(event_type, data), svc.Event)

    assert event == svc.Event(
        id="evt_1",
        type=event_type,
        created_at=datetime(2026, 11, 21, 12, tzinfo=UTC),
        data=expected,
    )
    assert type(event.data) is type(expected)
    for name in _money_fields(type(expected)):
        value = getattr(event.data, name)
        assert value is None or isinstance(value, Decimal), name  # money is never a float


@pytest.mark.parametrize("event_type", TYPES)
def test_each_type_round_trips_through_sign_and_verify(event_type: str) -> None:
    data, expected = SAMPLES[event_type]

    received = deliver(envelope(event_type, data, event_id="evt_rt"))

    assert received.id == "evt_rt"
    assert received.type == event_type
    assert received.data == expected
    assert type(received.data) is type(expected)


@pytest.mark.parametrize("event_type", TYPES)
def test_a_typed_event_written_out_reads_back_equal(event_type: str) -> None:
    _, expected = SAMPLES[event_type]
    event = svc.Event(
        id="evt_out", type=event_type, created_at=datetime(2026, 11, 21, tzinfo=UTC), data=expected
    )

    document = wire.unstructure(event)

    assert deliver(json.loads(json.dumps(document))) == event


@pytest.mark.parametrize("event_type", TYPES)
def test_only_the_required_fields_are_enough(event_type: str) -> None:
    data, expected = SAMPLES[event_type]
    cls = type(expected)
    minimal = {k: v for k, v in data.items() if k in REQUIRED[cls]}

    received = deliver(envelope(event_type, minimal))

    assert type(received.data) is cls
    for field in attrs.fields(cls):
        if field.name not in REQUIRED[cls]:
            default = field.default
            if isinstance(default, attrs.Factory):
                default = default.factory()
            assert getattr(received.data, field.name) == default, field.name


@pytest.mark.parametrize("event_type", sorted(t for t in TYPES if REQUIRED[type(SAMPLES[t][1])]))
def test_a_missing_required_field_is_refused_when_the_data_is_read(event_type: str) -> None:
    data, expected = SAMPLES[event_type]
    key = sorted(REQUIRED[type(expected)])[0]
    broken = {k: v for k, v in data.items() if k != key}

    received = deliver(envelope(event_type, broken))  # typed on first read of data
    with pytest.raises(svc.WebhookVerificationError, match=rf"{event_type}.*\$\.data\.{key}"):
        _ = received.data


def test_nullable_fields_read_as_none() -> None:
    data = {**SAMPLES["allowance.reset"][0], "allowance": None, "next_reset_at": None}

    received = deliver(envelope("allowance.reset", data))

    assert received.data.allowance is None  # no allowance limit
    assert received.data.next_reset_at is None  # the key no longer resets
    assert received.data.spent_last_period == Decimal("4.95")


def test_payment_failed_is_not_ok_by_default() -> None:
    received = deliver(envelope("payment.failed", {"reason": "insufficient_funds"}))

    assert received.data == svc.PaymentFailedData(reason="insufficient_funds")
    assert received.data.ok is False


# --- tolerance ------------------------------------------------------------------------------


@pytest.mark.parametrize("event_type", TYPES)
def test_unknown_fields_are_ignored(event_type: str) -> None:
    data, expected = SAMPLES[event_type]
    document = {
        **envelope(event_type, {**data, "added_later": {"x": [1, 2]}, "fee_currency": "USD"}),
        "api_version": "2027-01-01",
    }

    received = deliver(document)

    assert received.data == expected


@pytest.mark.parametrize(
    "data",
    [
        {"amount": "1.00", "from": "@alice", "nested": [1, {"x": None}]},
        {},
        [1, "two", None],
        "text",
        None,
    ],
    ids=["object", "empty", "list", "string", "null"],
)
def test_unknown_event_types_keep_their_data_as_json(data: Any) -> None:
    document = envelope("invoice.created", data)

    parsed = wire.structure(document, svc.Event)
    received = deliver(document)

    assert parsed.data == data
    assert received.type == "invoice.created"
    assert received.data == data
    assert received.data is None or type(received.data) is type(data)


amounts = st.decimals(
    min_value=0, max_value=10**9, places=6, allow_nan=False, allow_infinity=False
).map(lambda d: format(d, "f"))
extras = st.dictionaries(
    st.text(min_size=1, max_size=8).map(lambda k: "x_" + k),
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    max_size=4,
)


@settings(deadline=None)
@given(event_type=st.sampled_from(TYPES), data=st.data(), extra=extras)
def test_any_amount_reads_back_exactly_and_extra_keys_are_ignored(
    event_type: str, data: st.DataObject, extra: dict[str, Any]
) -> None:
    sample, expected = SAMPLES[event_type]
    cls = type(expected)
    money = {name: data.draw(amounts, label=name) for name in _money_fields(cls)}

    received = deliver(envelope(event_type, {**sample, **extra, **money}))

    assert type(received.data) is cls
    for name, text in money.items():
        value = getattr(received.data, name)
        assert isinstance(value, Decimal)
        assert value == Decimal(text)
