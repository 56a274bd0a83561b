# Generated from the route table by `python -m reference_server.sdk_codegen` -- do not edit.
"""Every route the SDK calls, as a function returning its ``RequestSpec``.

The namespace classes of the sync and async clients only call these functions and send
the result, so the route, credential, body and response model of an endpoint live in
exactly one place: its ``Endpoint`` in the reference server's route table, from which
this file is written.  Arguments are checked (:mod:`svc._convert`) before anything is sent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._convert import (
    Amount,
    Metadata,
    connect_onboard_body,
    connect_update_body,
    create_listener_body,
    create_resource_body,
    create_wallet_key_body,
    create_webhook_body,
    directory_query,
    gate_challenge_body,
    gate_redeem_body,
    gate_release_body,
    gate_settle_body,
    handle_body,
    listen_query,
    page_query,
    pay_body,
    pay_url_body,
    pay_url_quote_body,
    positive,
    seller_route,
    top_up_body,
    update_resource_body,
    update_wallet_key_body,
    update_webhook_body,
    verify_receipt_body,
)
from ._models import (
    Approval,
    ApprovalList,
    Balance,
    ConnectAccount,
    ConnectLogin,
    ConnectOnboarding,
    DashboardLink,
    Delivery,
    DeliveryList,
    DirectoryList,
    EventCatalog,
    GateChallenge,
    GateRedemption,
    GateRelease,
    Handle,
    HandleResolution,
    ListenBatch,
    OwnerCreated,
    Payment,
    PayResult,
    PayUrlQuote,
    PayUrlResult,
    Receipt,
    ReceiptVerification,
    Recycled,
    Refund,
    RefundList,
    Resource,
    ResourceList,
    Seller,
    SellerCreated,
    SellerList,
    SpendAttemptList,
    SpendBalance,
    TopUp,
    TopUpList,
    WalletKey,
    WalletKeyCreated,
    WalletKeyList,
    WebhookEndpoint,
    WebhookEndpointCreated,
    WebhookEndpointList,
    Withdrawal,
    WithdrawalList,
)
from ._spec import RequestSpec, Role, as_model
from ._types import NOT_GIVEN, NotGiven
from .bodies import (
    AckListened,
    CaptureReceipt,
    ConnectType,
    CreateOwner,
    CreateRefund,
    CreateSeller,
    EnablePayments,
    PayUrlMethod,
    Period,
    RecycleBalance,
    ResourceKind,
    ResourceMethod,
    ResourcePricing,
    WalletKeyAmount,
    WebhookStatus,
    Withdraw,
    to_json,
)

__all__ = [
    "access_verify",
    "connect_login",
    "connect_onboard",
    "connect_status",
    "connect_sync",
    "connect_update",
    "directory_list",
    "gates_challenge",
    "gates_redeem",
    "gates_release",
    "gates_settle",
    "handles_create",
    "handles_resolve",
    "owners_create",
    "owners_dashboard_link",
    "pay",
    "payments_get",
    "receipts_capture",
    "receipts_get",
    "refunds_create",
    "refunds_get",
    "refunds_list",
    "resources_create",
    "resources_deactivate",
    "resources_get",
    "resources_list",
    "resources_update",
    "sellers_balance",
    "sellers_create",
    "sellers_enable_payments",
    "sellers_get",
    "sellers_list",
    "sellers_me",
    "sellers_recycle",
    "spend_approval",
    "spend_approvals",
    "spend_attempts",
    "spend_balance",
    "spend_pay_url",
    "spend_pay_url_quote",
    "top_ups_create",
    "top_ups_get",
    "top_ups_list",
    "wallet_keys_create",
    "wallet_keys_fund",
    "wallet_keys_get",
    "wallet_keys_list",
    "wallet_keys_refund",
    "wallet_keys_revoke",
    "wallet_keys_update",
    "webhooks_ack",
    "webhooks_create",
    "webhooks_delete",
    "webhooks_deliveries",
    "webhooks_events",
    "webhooks_list",
    "webhooks_listen",
    "webhooks_poll",
    "webhooks_retry",
    "webhooks_test",
    "webhooks_update",
    "withdrawals_create",
    "withdrawals_get",
    "withdrawals_list",
]


def owners_create(email: str) -> RequestSpec[OwnerCreated]:
    """``POST /owners``."""
    return RequestSpec(
        method="POST",
        path="/owners",
        json=to_json(CreateOwner(email=email)),
        parse=as_model(OwnerCreated),
    )


def owners_dashboard_link() -> RequestSpec[DashboardLink]:
    """``POST /owners/me/dashboard-link``."""
    return RequestSpec(
        method="POST",
        path="/owners/me/dashboard-link",
        role=Role.OWNER,
        json={},
        parse=as_model(DashboardLink),
    )


def sellers_create(name: str | None = None) -> RequestSpec[SellerCreated]:
    """``POST /sellers``."""
    return RequestSpec(
        method="POST",
        path="/sellers",
        role=Role.OWNER,
        json=to_json(CreateSeller(name=name)),
        parse=as_model(SellerCreated),
    )


def sellers_list(
    *, limit: int | None = None, starting_after: str | None = None
) -> RequestSpec[SellerList]:
    """``GET /sellers``."""
    return RequestSpec(
        method="GET",
        path="/sellers",
        role=Role.OWNER,
        query=page_query(limit, starting_after),
        parse=as_model(SellerList),
    )


def sellers_me() -> RequestSpec[Seller]:
    """``GET /sellers/me``."""
    return RequestSpec(method="GET", path="/sellers/me", role=Role.SELLER, parse=as_model(Seller))


def sellers_enable_payments(
    *,
    processor_profile_id: str | None = None,
    payout_wallet_address: str | None = None,
    seller_id: str | None = None,
) -> RequestSpec[Seller]:
    """``PATCH /sellers/me/payments``."""
    return RequestSpec(
        method="PATCH",
        **seller_route(seller_id, "/sellers/me/payments", "/sellers/{seller_id}/payments"),
        json=to_json(
            EnablePayments(
                processor_profile_id=processor_profile_id,
                payout_wallet_address=payout_wallet_address,
            )
        ),
        parse=as_model(Seller),
    )


def sellers_balance(*, seller_id: str | None = None) -> RequestSpec[Balance]:
    """``GET /sellers/me/balance``."""
    return RequestSpec(
        method="GET",
        **seller_route(seller_id, "/sellers/me/balance", "/sellers/{seller_id}/balance"),
        parse=as_model(Balance),
    )


def sellers_recycle(seller_id: str, amount: Amount | None = None) -> RequestSpec[Recycled]:
    """``POST /sellers/{seller_id}/recycle``."""
    return RequestSpec(
        method="POST",
        path="/sellers/{seller_id}/recycle",
        role=Role.OWNER,
        path_params={"seller_id": seller_id},
        json=to_json(RecycleBalance(amount=None if amount is None else positive(amount))),
        parse=as_model(Recycled),
    )


def resources_create(
    *,
    kind: ResourceKind,
    amount: Amount | None = None,
    path: str | None = None,
    tool: str | None = None,
    pricing: ResourcePricing | None = None,
    unit_price: Amount | None = None,
    unit: str | None = None,
    max_amount: Amount | None = None,
    fallback_amount: Amount | None = None,
    description: str | None = None,
    metadata: Metadata | None = None,
    upstream_url: str | None = None,
    listed: bool | None = None,
    method: ResourceMethod | None = None,
    body_hint: Mapping[str, Any] | None = None,
) -> RequestSpec[Resource]:
    """``POST /resources``."""
    return RequestSpec(
        method="POST",
        path="/resources",
        role=Role.SELLER,
        json=create_resource_body(
            kind=kind,
            amount=amount,
            path=path,
            tool=tool,
            pricing=pricing,
            unit_price=unit_price,
            unit=unit,
            max_amount=max_amount,
            fallback_amount=fallback_amount,
            description=description,
            metadata=metadata,
            upstream_url=upstream_url,
            listed=listed,
            method=method,
            body_hint=body_hint,
        ),
        parse=as_model(Resource),
    )


def resources_list(
    *, limit: int | None = None, starting_after: str | None = None, seller_id: str | None = None
) -> RequestSpec[ResourceList]:
    """``GET /resources``."""
    return RequestSpec(
        method="GET",
        **seller_route(seller_id, "/resources", "/sellers/{seller_id}/resources"),
        query=page_query(limit, starting_after),
        parse=as_model(ResourceList),
    )


def resources_get(resource_id: str) -> RequestSpec[Resource]:
    """``GET /resources/{resource_id}``."""
    return RequestSpec(
        method="GET",
        path="/resources/{resource_id}",
        role=Role.SELLER,
        path_params={"resource_id": resource_id},
        parse=as_model(Resource),
    )


def resources_update(
    resource_id: str,
    *,
    path: str | None = None,
    tool: str | None = None,
    amount: Amount | None = None,
    unit_price: Amount | None = None,
    unit: str | None = None,
    max_amount: Amount | None = None,
    fallback_amount: Amount | None = None,
    description: str | None = None,
    metadata: Metadata | None = None,
    upstream_url: str | None = None,
    listed: bool | None = None,
    active: bool | None = None,
    method: ResourceMethod | NotGiven | None = NOT_GIVEN,
    body_hint: Mapping[str, Any] | NotGiven | None = NOT_GIVEN,
) -> RequestSpec[Resource]:
    """``PATCH /resources/{resource_id}``."""
    return RequestSpec(
        method="PATCH",
        path="/resources/{resource_id}",
        role=Role.SELLER,
        path_params={"resource_id": resource_id},
        json=update_resource_body(
            path=path,
            tool=tool,
            amount=amount,
            unit_price=unit_price,
            unit=unit,
            max_amount=max_amount,
            fallback_amount=fallback_amount,
            description=description,
            metadata=metadata,
            upstream_url=upstream_url,
            listed=listed,
            active=active,
            method=method,
            body_hint=body_hint,
        ),
        keep_null=True,
        parse=as_model(Resource),
    )


def resources_deactivate(resource_id: str) -> RequestSpec[Resource]:
    """``POST /resources/{resource_id}/deactivate``."""
    return RequestSpec(
        method="POST",
        path="/resources/{resource_id}/deactivate",
        role=Role.SELLER,
        path_params={"resource_id": resource_id},
        json={},
        parse=as_model(Resource),
    )


def directory_list(
    *,
    limit: int | None = None,
    starting_after: str | None = None,
    kind: ResourceKind | None = None,
    q: str | None = None,
    max_amount: Amount | None = None,
) -> RequestSpec[DirectoryList]:
    """``GET /directory``."""
    return RequestSpec(
        method="GET",
        path="/directory",
        query=directory_query(
            limit=limit, starting_after=starting_after, kind=kind, q=q, max_amount=max_amount
        ),
        parse=as_model(DirectoryList),
    )


def connect_status(*, seller_id: str | None = None) -> RequestSpec[ConnectAccount]:
    """``GET /sellers/me/connect``."""
    return RequestSpec(
        method="GET",
        **seller_route(seller_id, "/sellers/me/connect", "/sellers/{seller_id}/connect"),
        parse=as_model(ConnectAccount),
    )


def connect_update(
    *,
    auto_payout: bool | NotGiven = NOT_GIVEN,
    auto_payout_minimum: Amount | NotGiven | None = NOT_GIVEN,
    seller_id: str | None = None,
) -> RequestSpec[ConnectAccount]:
    """``PATCH /sellers/me/connect``."""
    return RequestSpec(
        method="PATCH",
        **seller_route(seller_id, "/sellers/me/connect", "/sellers/{seller_id}/connect"),
        json=connect_update_body(auto_payout=auto_payout, auto_payout_minimum=auto_payout_minimum),
        keep_null=True,
        parse=as_model(ConnectAccount),
    )


def connect_onboard(
    country: str, type: ConnectType | None = None, *, seller_id: str | None = None
) -> RequestSpec[ConnectOnboarding]:
    """``POST /sellers/me/connect/onboard``."""
    return RequestSpec(
        method="POST",
        **seller_route(
            seller_id, "/sellers/me/connect/onboard", "/sellers/{seller_id}/connect/onboard"
        ),
        json=connect_onboard_body(country=country, type=type),
        parse=as_model(ConnectOnboarding),
    )


def connect_sync(*, seller_id: str | None = None) -> RequestSpec[ConnectAccount]:
    """``POST /sellers/me/connect/sync``."""
    return RequestSpec(
        method="POST",
        **seller_route(seller_id, "/sellers/me/connect/sync", "/sellers/{seller_id}/connect/sync"),
        json={},
        parse=as_model(ConnectAccount),
    )


def connect_login(*, seller_id: str | None = None) -> RequestSpec[ConnectLogin]:
    """``POST /sellers/me/connect/login``."""
    return RequestSpec(
        method="POST",
        **seller_route(
            seller_id, "/sellers/me/connect/login", "/sellers/{seller_id}/connect/login"
        ),
        json={},
        parse=as_model(ConnectLogin),
    )


def withdrawals_create(
    amount: Amount | None = None, *, seller_id: str | None = None
) -> RequestSpec[Withdrawal]:
    """``POST /sellers/me/withdraw``."""
    return RequestSpec(
        method="POST",
        **seller_route(seller_id, "/sellers/me/withdraw", "/sellers/{seller_id}/withdraw"),
        json=to_json(Withdraw(amount=None if amount is None else positive(amount))),
        parse=as_model(Withdrawal),
    )


def withdrawals_list(
    *, limit: int | None = None, starting_after: str | None = None, seller_id: str | None = None
) -> RequestSpec[WithdrawalList]:
    """``GET /sellers/me/withdrawals``."""
    return RequestSpec(
        method="GET",
        **seller_route(seller_id, "/sellers/me/withdrawals", "/sellers/{seller_id}/withdrawals"),
        query=page_query(limit, starting_after),
        parse=as_model(WithdrawalList),
    )


def withdrawals_get(withdrawal_id: str, *, seller_id: str | None = None) -> RequestSpec[Withdrawal]:
    """``GET /sellers/me/withdrawals/{withdrawal_id}``."""
    return RequestSpec(
        method="GET",
        **seller_route(
            seller_id,
            "/sellers/me/withdrawals/{withdrawal_id}",
            "/sellers/{seller_id}/withdrawals/{withdrawal_id}",
            withdrawal_id=withdrawal_id,
        ),
        parse=as_model(Withdrawal),
    )


def sellers_get(seller_id: str) -> RequestSpec[Seller]:
    """``GET /sellers/{seller_id}``."""
    return RequestSpec(
        method="GET",
        path="/sellers/{seller_id}",
        role=Role.OWNER,
        path_params={"seller_id": seller_id},
        parse=as_model(Seller),
    )


def wallet_keys_create(
    name: str | None = None,
    *,
    allowance: Amount | None = None,
    max_per_tx: Amount | None = None,
    budget: Amount | None = None,
    period: Period | None = None,
    allowed_hosts: Sequence[str] | None = None,
    allowed_rails: Sequence[str] | None = None,
    approval_above: Amount | None = None,
    approval_hosts: Sequence[str] | None = None,
    approval_ttl_seconds: int | None = None,
) -> RequestSpec[WalletKeyCreated]:
    """``POST /wallet-keys``."""
    return RequestSpec(
        method="POST",
        path="/wallet-keys",
        role=Role.OWNER,
        json=create_wallet_key_body(
            name=name,
            allowance=allowance,
            max_per_tx=max_per_tx,
            budget=budget,
            period=period,
            allowed_hosts=allowed_hosts,
            allowed_rails=allowed_rails,
            approval_above=approval_above,
            approval_hosts=approval_hosts,
            approval_ttl_seconds=approval_ttl_seconds,
        ),
        parse=as_model(WalletKeyCreated),
    )


def wallet_keys_list(
    *, limit: int | None = None, starting_after: str | None = None
) -> RequestSpec[WalletKeyList]:
    """``GET /wallet-keys``."""
    return RequestSpec(
        method="GET",
        path="/wallet-keys",
        role=Role.OWNER,
        query=page_query(limit, starting_after),
        parse=as_model(WalletKeyList),
    )


def wallet_keys_get(wallet_key_id: str) -> RequestSpec[WalletKey]:
    """``GET /wallet-keys/{key_id}``."""
    return RequestSpec(
        method="GET",
        path="/wallet-keys/{wallet_key_id}",
        role=Role.OWNER,
        path_params={"wallet_key_id": wallet_key_id},
        parse=as_model(WalletKey),
    )


def wallet_keys_update(
    wallet_key_id: str,
    *,
    name: str | NotGiven = NOT_GIVEN,
    allowance: Amount | NotGiven | None = NOT_GIVEN,
    max_per_tx: Amount | NotGiven | None = NOT_GIVEN,
    budget: Amount | NotGiven | None = NOT_GIVEN,
    period: Period | NotGiven = NOT_GIVEN,
    allowed_hosts: Sequence[str] | NotGiven | None = NOT_GIVEN,
    allowed_rails: Sequence[str] | NotGiven | None = NOT_GIVEN,
    approval_above: Amount | NotGiven | None = NOT_GIVEN,
    approval_hosts: Sequence[str] | NotGiven | None = NOT_GIVEN,
    approval_ttl_seconds: int | NotGiven | None = NOT_GIVEN,
) -> RequestSpec[WalletKey]:
    """``PATCH /wallet-keys/{key_id}``."""
    return RequestSpec(
        method="PATCH",
        path="/wallet-keys/{wallet_key_id}",
        role=Role.OWNER,
        path_params={"wallet_key_id": wallet_key_id},
        json=update_wallet_key_body(
            name=name,
            allowance=allowance,
            max_per_tx=max_per_tx,
            budget=budget,
            period=period,
            allowed_hosts=allowed_hosts,
            allowed_rails=allowed_rails,
            approval_above=approval_above,
            approval_hosts=approval_hosts,
            approval_ttl_seconds=approval_ttl_seconds,
        ),
        parse=as_model(WalletKey),
    )


def wallet_keys_fund(wallet_key_id: str, amount: Amount) -> RequestSpec[WalletKey]:
    """``POST /wallet-keys/{key_id}/fund``."""
    return RequestSpec(
        method="POST",
        path="/wallet-keys/{wallet_key_id}/fund",
        role=Role.OWNER,
        path_params={"wallet_key_id": wallet_key_id},
        json=to_json(WalletKeyAmount(amount=positive(amount))),
        parse=as_model(WalletKey),
    )


def wallet_keys_refund(wallet_key_id: str, amount: Amount) -> RequestSpec[WalletKey]:
    """``POST /wallet-keys/{key_id}/refund``."""
    return RequestSpec(
        method="POST",
        path="/wallet-keys/{wallet_key_id}/refund",
        role=Role.OWNER,
        path_params={"wallet_key_id": wallet_key_id},
        json=to_json(WalletKeyAmount(amount=positive(amount))),
        parse=as_model(WalletKey),
    )


def wallet_keys_revoke(wallet_key_id: str) -> RequestSpec[WalletKey]:
    """``POST /wallet-keys/{key_id}/revoke``."""
    return RequestSpec(
        method="POST",
        path="/wallet-keys/{wallet_key_id}/revoke",
        role=Role.OWNER,
        path_params={"wallet_key_id": wallet_key_id},
        json={},
        parse=as_model(WalletKey),
    )


def top_ups_create(amount: Amount, *, method: str | None = None) -> RequestSpec[TopUp]:
    """``POST /owners/me/top-ups``."""
    return RequestSpec(
        method="POST",
        path="/owners/me/top-ups",
        role=Role.OWNER,
        json=top_up_body(amount=amount, method=method),
        parse=as_model(TopUp),
    )


def top_ups_list(
    *, limit: int | None = None, starting_after: str | None = None
) -> RequestSpec[TopUpList]:
    """``GET /owners/me/top-ups``."""
    return RequestSpec(
        method="GET",
        path="/owners/me/top-ups",
        role=Role.OWNER,
        query=page_query(limit, starting_after),
        parse=as_model(TopUpList),
    )


def top_ups_get(top_up_id: str) -> RequestSpec[TopUp]:
    """``GET /owners/me/top-ups/{top_up_id}``."""
    return RequestSpec(
        method="GET",
        path="/owners/me/top-ups/{top_up_id}",
        role=Role.OWNER,
        path_params={"top_up_id": top_up_id},
        parse=as_model(TopUp),
    )


def handles_create(handle: str) -> RequestSpec[Handle]:
    """``POST /handles``."""
    return RequestSpec(
        method="POST",
        path="/handles",
        role=Role.OWNER,
        json=handle_body(handle=handle),
        parse=as_model(Handle),
    )


def spend_balance() -> RequestSpec[SpendBalance]:
    """``GET /spend/balance``."""
    return RequestSpec(
        method="GET", path="/spend/balance", role=Role.WALLET, parse=as_model(SpendBalance)
    )


def pay(
    *, resource_id: str | None = None, destination: str | None = None, amount: Amount | None = None
) -> RequestSpec[PayResult]:
    """``POST /pay``."""
    return RequestSpec(
        method="POST",
        path="/pay",
        role=Role.WALLET,
        json=pay_body(resource_id=resource_id, destination=destination, amount=amount),
        parse=as_model(PayResult),
    )


def handles_resolve(destination: str) -> RequestSpec[HandleResolution]:
    """``GET /handles/resolve/{destination}``."""
    return RequestSpec(
        method="GET",
        path="/handles/resolve/{destination}",
        role=Role.WALLET,
        path_params={"destination": destination},
        parse=as_model(HandleResolution),
    )


def spend_attempts(
    *, limit: int | None = None, starting_after: str | None = None
) -> RequestSpec[SpendAttemptList]:
    """``GET /spend/attempts``."""
    return RequestSpec(
        method="GET",
        path="/spend/attempts",
        role=Role.WALLET,
        query=page_query(limit, starting_after),
        parse=as_model(SpendAttemptList),
    )


def spend_approvals(
    *, limit: int | None = None, starting_after: str | None = None
) -> RequestSpec[ApprovalList]:
    """``GET /spend/approvals``."""
    return RequestSpec(
        method="GET",
        path="/spend/approvals",
        role=Role.WALLET,
        query=page_query(limit, starting_after),
        parse=as_model(ApprovalList),
    )


def spend_approval(approval_id: str) -> RequestSpec[Approval]:
    """``GET /spend/approvals/{approval_id}``."""
    return RequestSpec(
        method="GET",
        path="/spend/approvals/{approval_id}",
        role=Role.WALLET,
        also_roles=(Role.OWNER,),
        path_params={"approval_id": approval_id},
        parse=as_model(Approval),
    )


def access_verify(
    receipt_id: str, resource_id: str | None = None
) -> RequestSpec[ReceiptVerification]:
    """``POST /access/verify``."""
    return RequestSpec(
        method="POST",
        path="/access/verify",
        role=Role.SELLER,
        role_optional=True,
        json=verify_receipt_body(receipt_id=receipt_id, resource_id=resource_id),
        parse=as_model(ReceiptVerification),
    )


def receipts_get(receipt_id: str) -> RequestSpec[Receipt]:
    """``GET /receipts/{receipt_id}``."""
    return RequestSpec(
        method="GET",
        path="/receipts/{receipt_id}",
        role=Role.WALLET,
        also_roles=(Role.SELLER, Role.OWNER),
        path_params={"receipt_id": receipt_id},
        parse=as_model(Receipt),
    )


def receipts_capture(receipt_id: str, *, units: int) -> RequestSpec[Receipt]:
    """``POST /receipts/{receipt_id}/capture``."""
    return RequestSpec(
        method="POST",
        path="/receipts/{receipt_id}/capture",
        role=Role.SELLER,
        path_params={"receipt_id": receipt_id},
        json=to_json(CaptureReceipt(units=units)),
        parse=as_model(Receipt),
    )


def refunds_create(
    receipt_id: str, *, amount: Amount | None = None, reason: str | None = None
) -> RequestSpec[Refund]:
    """``POST /refunds``."""
    return RequestSpec(
        method="POST",
        path="/refunds",
        role=Role.SELLER,
        json=to_json(
            CreateRefund(
                receipt_id=receipt_id,
                amount=None if amount is None else positive(amount),
                reason=reason,
            )
        ),
        parse=as_model(Refund),
    )


def refunds_list(
    *, limit: int | None = None, starting_after: str | None = None
) -> RequestSpec[RefundList]:
    """``GET /refunds``."""
    return RequestSpec(
        method="GET",
        path="/refunds",
        role=Role.SELLER,
        query=page_query(limit, starting_after),
        parse=as_model(RefundList),
    )


def refunds_get(refund_id: str) -> RequestSpec[Refund]:
    """``GET /refunds/{refund_id}``."""
    return RequestSpec(
        method="GET",
        path="/refunds/{refund_id}",
        role=Role.SELLER,
        path_params={"refund_id": refund_id},
        parse=as_model(Refund),
    )


def payments_get(receipt_id: str) -> RequestSpec[Payment]:
    """``GET /payments/{receipt_id}``."""
    return RequestSpec(
        method="GET",
        path="/payments/{receipt_id}",
        role=Role.WALLET,
        also_roles=(Role.SELLER, Role.OWNER),
        path_params={"receipt_id": receipt_id},
        parse=as_model(Payment),
    )


def webhooks_create(
    url: str, *, events: Sequence[str] | None = None, description: str | None = None
) -> RequestSpec[WebhookEndpointCreated]:
    """``POST /webhooks``."""
    return RequestSpec(
        method="POST",
        path="/webhooks",
        role=Role.OWNER,
        json=create_webhook_body(url=url, events=events, description=description),
        parse=as_model(WebhookEndpointCreated),
    )


def webhooks_list(
    *, limit: int | None = None, starting_after: str | None = None
) -> RequestSpec[WebhookEndpointList]:
    """``GET /webhooks``."""
    return RequestSpec(
        method="GET",
        path="/webhooks",
        role=Role.OWNER,
        query=page_query(limit, starting_after),
        parse=as_model(WebhookEndpointList),
    )


def webhooks_events() -> RequestSpec[EventCatalog]:
    """``GET /webhooks/events``."""
    return RequestSpec(
        method="GET", path="/webhooks/events", role=Role.OWNER, parse=as_model(EventCatalog)
    )


def webhooks_update(
    webhook_id: str,
    *,
    events: Sequence[str] | NotGiven | None = NOT_GIVEN,
    description: str | NotGiven = NOT_GIVEN,
    status: WebhookStatus | NotGiven = NOT_GIVEN,
) -> RequestSpec[WebhookEndpoint]:
    """``PATCH /webhooks/{webhook_id}``."""
    return RequestSpec(
        method="PATCH",
        path="/webhooks/{webhook_id}",
        role=Role.OWNER,
        path_params={"webhook_id": webhook_id},
        json=update_webhook_body(events=events, description=description, status=status),
        keep_null=True,
        parse=as_model(WebhookEndpoint),
    )


def webhooks_delete(webhook_id: str) -> RequestSpec[WebhookEndpoint]:
    """``DELETE /webhooks/{webhook_id}``."""
    return RequestSpec(
        method="DELETE",
        path="/webhooks/{webhook_id}",
        role=Role.OWNER,
        path_params={"webhook_id": webhook_id},
        parse=as_model(WebhookEndpoint),
    )


def webhooks_deliveries(
    webhook_id: str, *, limit: int | None = None, starting_after: str | None = None
) -> RequestSpec[DeliveryList]:
    """``GET /webhooks/{webhook_id}/deliveries``."""
    return RequestSpec(
        method="GET",
        path="/webhooks/{webhook_id}/deliveries",
        role=Role.OWNER,
        path_params={"webhook_id": webhook_id},
        query=page_query(limit, starting_after),
        parse=as_model(DeliveryList),
    )


def webhooks_test(webhook_id: str) -> RequestSpec[Delivery]:
    """``POST /webhooks/{webhook_id}/test``."""
    return RequestSpec(
        method="POST",
        path="/webhooks/{webhook_id}/test",
        role=Role.OWNER,
        path_params={"webhook_id": webhook_id},
        json={},
        parse=as_model(Delivery),
    )


def webhooks_retry(webhook_id: str, delivery_id: str) -> RequestSpec[Delivery]:
    """``POST /webhooks/{webhook_id}/deliveries/{delivery_id}/retry``."""
    return RequestSpec(
        method="POST",
        path="/webhooks/{webhook_id}/deliveries/{delivery_id}/retry",
        role=Role.OWNER,
        path_params={"webhook_id": webhook_id, "delivery_id": delivery_id},
        json={},
        parse=as_model(Delivery),
    )


def webhooks_listen(*, events: Sequence[str] | None = None) -> RequestSpec[WebhookEndpointCreated]:
    """``POST /webhooks/listen``."""
    return RequestSpec(
        method="POST",
        path="/webhooks/listen",
        role=Role.OWNER,
        json=create_listener_body(events=events),
        parse=as_model(WebhookEndpointCreated),
    )


def webhooks_poll(webhook_id: str, *, wait: float = 0) -> RequestSpec[ListenBatch]:
    """``GET /webhooks/{webhook_id}/listen``."""
    return RequestSpec(
        method="GET",
        path="/webhooks/{webhook_id}/listen",
        role=Role.OWNER,
        path_params={"webhook_id": webhook_id},
        query=listen_query(wait=wait),
        parse=as_model(ListenBatch),
    )


def webhooks_ack(
    webhook_id: str, *, delivery_id: str, status_code: int | None = None, error: str | None = None
) -> RequestSpec[ListenBatch]:
    """``POST /webhooks/{webhook_id}/listen/ack``."""
    return RequestSpec(
        method="POST",
        path="/webhooks/{webhook_id}/listen/ack",
        role=Role.OWNER,
        path_params={"webhook_id": webhook_id},
        json=to_json(AckListened(delivery_id=delivery_id, status_code=status_code, error=error)),
        parse=as_model(ListenBatch),
    )


def spend_pay_url(
    url: str, *, method: PayUrlMethod = "GET", json: Any = None
) -> RequestSpec[PayUrlResult]:
    """``POST /spend/pay-url``."""
    return RequestSpec(
        method="POST",
        path="/spend/pay-url",
        role=Role.WALLET,
        json=pay_url_body(url=url, method=method, json=json),
        parse=as_model(PayUrlResult),
    )


def spend_pay_url_quote(
    url: str, *, method: PayUrlMethod = "GET", json: Any = None
) -> RequestSpec[PayUrlQuote]:
    """``POST /spend/pay-url``."""
    return RequestSpec(
        method="POST",
        path="/spend/pay-url",
        role=Role.WALLET,
        json=pay_url_quote_body(url=url, method=method, json=json),
        parse=as_model(PayUrlQuote),
    )


def gates_challenge(resource_id: str, *, method: str, url: str) -> RequestSpec[GateChallenge]:
    """``POST /gates/challenge``."""
    return RequestSpec(
        method="POST",
        path="/gates/challenge",
        role=Role.SELLER,
        json=gate_challenge_body(resource_id=resource_id, method=method, url=url),
        parse=as_model(GateChallenge),
    )


def gates_redeem(
    resource_id: str, *, method: str, url: str, headers: Mapping[str, str]
) -> RequestSpec[GateRedemption]:
    """``POST /gates/redeem``."""
    return RequestSpec(
        method="POST",
        path="/gates/redeem",
        role=Role.SELLER,
        json=gate_redeem_body(resource_id=resource_id, method=method, url=url, headers=headers),
        parse=as_model(GateRedemption),
    )


def gates_settle(claim: str, units: int | None = None) -> RequestSpec[GateRedemption]:
    """``POST /gates/settle``."""
    return RequestSpec(
        method="POST",
        path="/gates/settle",
        role=Role.SELLER,
        json=gate_settle_body(claim=claim, units=units),
        parse=as_model(GateRedemption),
    )


def gates_release(
    claim: str, *, status: int | None = None, reason: str = "answer_failed"
) -> RequestSpec[GateRelease]:
    """``POST /gates/release``."""
    return RequestSpec(
        method="POST",
        path="/gates/release",
        role=Role.SELLER,
        json=gate_release_body(claim=claim, status=status, reason=reason),
        parse=as_model(GateRelease),
    )
