"""svc: the payments kit's typed SDK.

Public surface (everything else lives in private ``_modules``)::

    import svc
    client = svc.Client(base_url=..., seller_key="svc_sk_test_...")
    resource = client.resources.create(kind="http", path="/v1/report", amount="0.05")

Errors all derive from :class:`svc.SvcError`; webhook helpers are in :mod:`svc.webhooks`.
"""

from ._async_client import AsyncClient
from ._client import Client
from ._errors import (
    APIConnectionError,
    APIError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    ConfigurationError,
    ConflictError,
    NotFoundError,
    PaymentRequiredError,
    PermissionDeniedError,
    RateLimitError,
    ServerError,
    SvcError,
    UnprocessableEntityError,
    WebhookVerificationError,
)
from ._models import (
    Balance,
    Capabilities,
    Delivery,
    ErrorBody,
    ErrorDetail,
    Event,
    Handle,
    HandleResolution,
    Health,
    OwnerCreated,
    PaymentSucceededData,
    PayResult,
    ReceiptVerification,
    Resource,
    ResourceList,
    ResourceMetadata,
    Seller,
    SellerCreated,
    SellerList,
    SpendAttempt,
    SpendAttemptList,
    SpendBalance,
    WalletKey,
    WalletKeyCreated,
    WalletKeyList,
    WalletPolicy,
    WebhookEndpoint,
    WebhookEndpointCreated,
    Withdrawal,
)
from ._options import RequestOptions
from ._retry import RetryPolicy
from ._types import NOT_GIVEN, NotGiven
from ._version import __version__

__all__ = [
    "NOT_GIVEN",
    "APIConnectionError",
    "APIError",
    "APITimeoutError",
    "AsyncClient",
    "AuthenticationError",
    "BadRequestError",
    "Balance",
    "Capabilities",
    "Client",
    "ConfigurationError",
    "ConflictError",
    "Delivery",
    "ErrorBody",
    "ErrorDetail",
    "Event",
    "Handle",
    "HandleResolution",
    "Health",
    "NotFoundError",
    "NotGiven",
    "OwnerCreated",
    "PayResult",
    "PaymentRequiredError",
    "PaymentSucceededData",
    "PermissionDeniedError",
    "RateLimitError",
    "ReceiptVerification",
    "RequestOptions",
    "Resource",
    "ResourceList",
    "ResourceMetadata",
    "RetryPolicy",
    "Seller",
    "SellerCreated",
    "SellerList",
    "ServerError",
    "SpendAttempt",
    "SpendAttemptList",
    "SpendBalance",
    "SvcError",
    "UnprocessableEntityError",
    "WalletKey",
    "WalletKeyCreated",
    "WalletKeyList",
    "WalletPolicy",
    "WebhookEndpoint",
    "WebhookEndpointCreated",
    "WebhookVerificationError",
    "Withdrawal",
    "__version__",
]
