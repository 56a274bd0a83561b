"""svc: the payments kit's typed SDK.

Public surface (everything else lives in private ``_modules``)::

    import svc
    client = svc.Client(base_url=..., seller_key="svc_sk_test_...")
    resource = client.resources.create(kind="http", path="/v1/report", amount="0.05")

Errors all derive from :class:`svc.SvcError`; webhook helpers are in :mod:`svc.webhooks`.
"""

# Public modules, reachable after a bare ``import svc``: ``svc.webhooks.verify(...)``,
# ``svc.money.parse_amount(...)``, ``svc.wire.structure(...)``.
from . import _models, money, webhooks, wire
from ._async_client import AsyncClient
from ._async_pay_url_stream import AsyncPayUrlStream, StreamHead
from ._client import Client
from ._errors import (
    APIConnectionError,
    APIError,
    APITimeoutError,
    ApprovalRequired,
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
from ._models import *  # noqa: F403  (every model is public: see _models.__all__)
from ._options import Environment, RequestOptions
from ._pay_url_stream import PayUrlStream
from ._retry import RetryPolicy
from ._spec import Role
from ._types import NOT_GIVEN, NotGiven
from ._version import __version__

__all__ = [
    "NOT_GIVEN",
    "APIConnectionError",
    "APIError",
    "APITimeoutError",
    "ApprovalRequired",
    "AsyncClient",
    "AsyncPayUrlStream",
    "AuthenticationError",
    "BadRequestError",
    "Client",
    "ConfigurationError",
    "ConflictError",
    "Environment",
    "NotFoundError",
    "NotGiven",
    "PayUrlStream",
    "PaymentRequiredError",
    "PermissionDeniedError",
    "RateLimitError",
    "RequestOptions",
    "RetryPolicy",
    "Role",
    "ServerError",
    "StreamHead",
    "SvcError",
    "UnprocessableEntityError",
    "WebhookVerificationError",
    "__version__",
    "money",
    "webhooks",
    "wire",
    *_models.__all__,
]
