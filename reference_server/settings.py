"""Server configuration, read once from the environment (``SVC_*``) or built in code.

Every knob an operator may need is here, with a default that makes ``svc-server run``
work on a laptop with nothing else installed: an SQLite file, in-memory rate limits,
sign-up on, URLs that point back at the listening address, keys generated once and kept
in the database.  Production is stricter: its keys must come from outside the database
(never generated and stored beside what they protect), the URLs it publishes or calls are
HTTPS, and it refuses to start without them.

``Settings`` is a pydantic-settings model: each field is read from ``SVC_<FIELD_NAME>``
by :meth:`Settings.from_env` (lists comma-separated), and every instance, however it was
built (``Settings(...)``, :meth:`Settings.evolve`), is validated by the same fields and
validators, so a bad value never reaches the running server; a bad one is a
:class:`SettingsError`, one line naming its variable.  Code-only settings (callables:
``outbound_resolver``, ``clock``) are never read from the environment.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from annotated_types import Ge, Gt, Interval
from pydantic import (
    BeforeValidator,
    Field,
    ModelWrapValidatorHandler,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

__all__ = ["Settings", "SettingsError", "env_fields", "env_variable", "utcnow"]

_MIN_PRODUCTION_JWT_SECRET = 32
_HEX_KEY = re.compile(r"(0x)?[0-9a-fA-F]{64}")
#: The settings only code sets (callables), never read from the environment.
_CODE_ONLY = ("outbound_resolver", "clock")


def utcnow() -> datetime:
    return datetime.now(UTC)


def env_variable(field_name: str) -> str:
    """The one naming rule: field ``max_body_bytes`` is ``SVC_MAX_BODY_BYTES``."""
    return "SVC_" + field_name.upper()


def env_fields() -> list[str]:
    """The settings that can be set from the environment, in declaration order."""
    return [name for name in Settings.model_fields if name not in _CODE_ONLY]


class SettingsError(Exception):
    """A setting is missing or malformed; ``str()`` is one line naming its variable."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.variable = env_variable(field)
        super().__init__(f"{self.variable}: {message}")


def _comma_list(value: Any) -> Any:
    """``SVC_WEBHOOK_RETRY_SCHEDULE=5,300,1800``: tuples are comma-separated in the
    environment (JSON is not what operators type)."""
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value


_Strings = Annotated[tuple[str, ...], NoDecode, BeforeValidator(_comma_list)]
_Numbers = Annotated[tuple[float, ...], NoDecode, BeforeValidator(_comma_list)]


def _production(info: ValidationInfo) -> bool:
    return info.data.get("env") == "production"


def _url(value: str, *, https: bool) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"must be an absolute http(s) URL, not {value[:60]!r}")
    if https and parts.scheme != "https":
        raise ValueError("must be an https:// URL in production")
    return value


class Settings(BaseSettings):
    """Every setting, validated (see the module).  Secrets are kept out of ``repr`` and
    error messages."""

    model_config = SettingsConfigDict(
        env_prefix="SVC_",
        case_sensitive=False,
        env_ignore_empty=True,  # SVC_X= means unset
        extra="forbid",
        validate_default=True,  # production rules apply to defaults too (no keys set)
        frozen=True,
        arbitrary_types_allowed=True,
    )

    #: SQLAlchemy URL; ``postgresql://`` is served by psycopg 3.
    database_url: str = Field("sqlite:///svc.db", repr=False)
    #: PostgreSQL connections each process keeps open, and how many more it may open while
    #: busy.  Every ``run`` and ``worker`` process may hold their sum (plus one listening
    #: session per worker): keep that total over all processes under ``max_connections``.
    database_pool_size: Annotated[int, Gt(0)] = 32
    database_max_overflow: Annotated[int, Ge(0)] = 8
    #: ``development`` (default) or ``production``, spelled exactly: production refuses
    #: to start without ``jwt_secret`` and ``data_key``, refuses localhost callbacks,
    #: closes sign-up by default and insists on HTTPS URLs.
    env: Literal["development", "production"] = "development"
    #: Base of every ``gate_url`` / ``pay_url``; ``None`` = the address the request came to.
    public_url: str | None = None
    #: HS256 secret owner JWTs are signed with; ``None`` = generated once and kept in the
    #: database (outside production only).
    jwt_secret: str | None = Field(None, repr=False)
    #: Serves ``GET /metrics`` to ``Authorization: Bearer`` with it; unset, no such route.
    metrics_token: str | None = Field(None, repr=False)
    #: Retired JWT secrets still accepted when verifying (not for signing): rotation.
    jwt_previous_secrets: _Strings = Field((), repr=False)
    jwt_ttl_seconds: Annotated[int, Gt(0)] = 30 * 24 * 3600
    #: Fernet key sealing secrets at rest; ``None`` = generated once, kept in the database
    #: (outside production only).
    data_key: str | None = Field(None, repr=False)
    #: Older Fernet keys: still open what they sealed, never seal anything new.
    data_previous_keys: _Strings = Field((), repr=False)
    #: ``POST /owners``; ``None`` = on outside production.
    signup_enabled: bool | None = None
    #: ``limits`` rate strings, per credential (or client address when anonymous).
    rate_limit: str = "100/second"
    signup_rate_limit: str = "20/minute"
    #: ``memory://`` for one process, ``redis://host:port`` when several share limits.
    rate_limit_storage: str = Field("memory://", repr=False)
    max_body_bytes: Annotated[int, Gt(0)] = 256 * 1024
    idempotency_ttl_seconds: Annotated[int, Gt(0)] = 24 * 3600
    #: How long an in-flight idempotent request holds its key before a retry may take over
    #: (a crashed worker must not wedge a key forever).
    idempotency_lease_seconds: Annotated[int, Gt(0)] = 60
    #: Platform fee on ledger payments, in basis points of the price (100 = 1 %).
    platform_fee_bps: Annotated[int, Interval(ge=0, le=10_000)] = 100
    auto_migrate: bool = True
    #: Delay before each retry of a failed webhook delivery, in seconds: after the first
    #: failure the first delay, and so on (DESIGN.md: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h,
    #: 10 h), each jittered by ``webhook_retry_jitter``; then the delivery has failed.
    webhook_retry_schedule: _Numbers = (5, 300, 1800, 7200, 18000, 36000, 36000)
    webhook_retry_jitter: Annotated[float, Interval(ge=0, le=1)] = 0.1
    webhook_timeout_seconds: Annotated[float, Gt(0)] = 10.0
    #: An endpoint failing without a single success for this long is disabled.
    webhook_disable_after_seconds: Annotated[float, Gt(0)] = 5 * 24 * 3600
    #: Kept in the delivery log per attempt.
    webhook_log_body_bytes: Annotated[int, Ge(0)] = 2048
    #: Run the outbox delivery worker inside the server (``svc-server run``).
    worker_enabled: bool = True
    #: ``json``: every log record a JSON line, and one per request (docs/observability.md).
    log_format: Literal["text", "json"] = "text"
    #: OpenTelemetry traces (the ``otel`` extra), exported as ``OTEL_*`` says.
    tracing: bool = False
    worker_poll_seconds: Annotated[float, Gt(0)] = 0.5
    #: Deliveries claimed per transaction (and payouts advanced per round).  Large enough
    #: that a busy worker claims rarely: each claim is a transaction run from a thread,
    #: which waits for the GIL behind the senders.
    worker_batch_size: Annotated[int, Ge(1)] = 100
    worker_concurrency: Annotated[int, Ge(1)] = 8
    #: A claimed delivery belongs to its worker this long; a crashed worker's claims are
    #: picked up by another worker after it.
    worker_lease_seconds: Annotated[float, Gt(0)] = 60.0
    #: Serve the sandbox chain's routes (``/sandbox/faucet``, ``/sandbox/balances/…``, the
    #: x402 facilitator at ``/sandbox/x402``).  They only ever answer for ``test``.
    sandbox_enabled: bool = True
    #: Most one ``POST /sandbox/faucet`` call mints, in atomic units (6 decimals): 1000 USDC.
    sandbox_faucet_max_micros: Annotated[int, Ge(0)] = 1000 * 1_000_000
    #: Payouts (Connect and withdrawals, ``domain/payouts``).  How long a Connect
    #: onboarding or login link stays usable (it can be fetched again after).
    connect_link_seconds: Annotated[int, Gt(0)] = 30 * 60
    #: The sandbox payout processor moves each payout one step (``pending`` ->
    #: ``in_transit`` -> ``paid`` or ``failed``) after this many seconds.
    sandbox_payout_seconds: Annotated[float, Ge(0)] = 5.0
    #: Auto payout: a seller with payouts enabled whose available balance reaches this
    #: minimum (micro-USD; 100 USD) is paid out whole, one payout in flight at a time.  A
    #: seller may set its own minimum (``PATCH /sellers/me/connect``); 0 turns the
    #: server default off (sellers that set their own minimum still get auto payout).
    auto_payout_minimum_micros: Annotated[int, Ge(0)] = 100 * 1_000_000
    #: Open rails in ``live``: the x402 facilitator that verifies and settles gate
    #: payments, the chain and token they are paid in, the service's deposit address
    #: (``processor_deposit`` settlement) and the hot wallet that pays ``pay-url``
    #: challenges.  Unset, ``live`` gates offer no open rail and ``live`` pay-url refuses:
    #: nothing in ``test`` can stand in for them.  ``live_rpc_url`` names a node of that
    #: chain (``svc-server reconcile`` reads it); ``svc-server devchain`` prints every
    #: one of these for a chain on this machine.
    live_facilitator_url: str | None = None
    live_rpc_url: str | None = None
    live_chain_id: Annotated[int, Gt(0)] = 8453
    live_asset_address: str = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"
    live_asset_name: str = "USD Coin"
    live_asset_version: str = "2"
    live_deposit_address: str | None = None
    #: The account the live facilitator settles x402 ``upto`` payments from (its
    #: ``/supported`` upto kind names it): a payer's Permit2 witness must name it, so a
    #: metered resource's ``upto`` challenge carries it.  Unset: live gates do not offer
    #: ``upto`` (a metered resource sells there only at its ``fallback_amount``).
    live_upto_facilitator_address: str | None = None
    live_hot_wallet_key: str | None = Field(None, repr=False)
    #: ``svc-server reconcile`` in live reads the token's ``Transfer`` logs from this block
    #: on (through ``live_rpc_url``): the block the service started using its deposit
    #: address and hot wallet, so that a long chain is not read from its genesis.
    live_reconcile_from_block: Annotated[int, Ge(0)] = 0
    #: The worker reconciles the books with the chain this often (seconds; each
    #: environment it can read: ``test``'s sandbox chain, ``live`` with ``live_rpc_url``)
    #: and records the run in ``reconciliations``, drift logged at WARNING; 0 turns it off.
    reconcile_interval_seconds: Annotated[float, Ge(0)] = 3600.0
    #: The processor for ``live`` card payments, card top-ups and payouts (Connect):
    #: ``sandbox`` (the embedded default, which ``test`` always uses) or ``stripe``,
    #: through the official SDK with these keys.  ``stripe_api_base`` sends the SDK's
    #: requests elsewhere than Stripe's own API (a local Stripe-compatible server in tests
    #: and demos); ``stripe_webhook_secret`` verifies ``POST /processor/webhooks``.
    stripe_secret_key: str | None = Field(None, repr=False)
    stripe_webhook_secret: str | None = Field(None, repr=False)
    stripe_api_base: str | None = None
    #: Retries of a processor call that failed on the network, a 409, 429 or 5xx, with
    #: the SDK's own backoff; a withdrawal whose call still fails stays ``pending``.
    stripe_max_network_retries: Annotated[int, Ge(0)] = 2
    processor: Literal["sandbox", "stripe"] = "sandbox"
    #: The most a ``pay-url`` unlock body keeps; past it the body is cut, ``body_truncated``.
    unlock_body_max_bytes: Annotated[int, Ge(0)] = 8192
    #: Slow clients: the most time a connection may take to send a request's line and
    #: headers (then it is closed), and to send its body once the app reads it (then it
    #: is answered 408 ``request_timeout`` and closed); the most time an answer may wait
    #: on a client that reads none of it (then the connection is dropped); how long an
    #: idle keep-alive connection is kept open.
    header_timeout_seconds: Annotated[float, Gt(0)] = 10.0
    body_timeout_seconds: Annotated[float, Gt(0)] = 30.0
    send_timeout_seconds: Annotated[float, Gt(0)] = 30.0
    keep_alive_timeout_seconds: Annotated[float, Gt(0)] = 5.0
    #: Name resolution for outbound requests (``None``: the system's); tests inject one.
    outbound_resolver: Callable[[str, int], Any] | None = None
    clock: Callable[[], datetime] = utcnow

    @property
    def production(self) -> bool:
        return self.env == "production"

    @property
    def signup_open(self) -> bool:
        return (not self.production) if self.signup_enabled is None else self.signup_enabled

    @classmethod
    def from_env(cls, **overrides: object) -> Settings:
        """Settings from ``SVC_*`` variables; keyword overrides that are not ``None`` win
        (CLI flags).  Raises :class:`SettingsError` naming the first bad variable."""
        read = {k: v for k, v in EnvSettingsSource(cls)().items() if k not in _CODE_ONLY}
        return cls(**{**read, **{k: v for k, v in overrides.items() if v is not None}})

    def evolve(self, **changes: Any) -> Settings:
        """A copy with ``changes``, validated as any other instance."""
        return type(self)(**{**dict(self), **changes})

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)  # code-built settings ignore the environment: see from_env

    @model_validator(mode="wrap")
    @classmethod
    def _one_line(cls, values: Any, handler: ModelWrapValidatorHandler[Settings]) -> Settings:
        """The first problem as a :class:`SettingsError` naming the variable (a secret's
        value is not echoed)."""
        try:
            return handler(values)
        except ValidationError as exc:
            first = exc.errors()[0]
            name = str(first["loc"][0]) if first["loc"] else "env"
            message = str(first["msg"]).removeprefix("Value error, ")
            field = cls.model_fields.get(name)
            if first["type"] != "value_error" and field is not None and field.repr:
                message += f" (got {str(first.get('input'))[:60]!r})"
            raise SettingsError(name, message) from None

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, value: str) -> str:
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        try:
            backend = make_url(value).get_backend_name()
        except ArgumentError:
            raise ValueError("is not a database URL (sqlite:///… or postgresql://…)") from None
        if backend not in ("sqlite", "postgresql"):
            raise ValueError(f"names {backend!r}; only sqlite and postgresql are supported")
        return value

    @field_validator("public_url", "live_facilitator_url", "live_rpc_url", "stripe_api_base")
    @classmethod
    def _urls(cls, value: str | None, info: ValidationInfo) -> str | None:
        return None if value is None else _url(value, https=_production(info))

    @field_validator("jwt_secret", "data_key")
    @classmethod
    def _production_key(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None and _production(info):
            raise ValueError("is required in production (it is never generated there)")
        return value

    @field_validator("jwt_secret")
    @classmethod
    def _jwt_secret(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and _production(info) and len(value) < _MIN_PRODUCTION_JWT_SECRET:
            raise ValueError(
                f"must be at least {_MIN_PRODUCTION_JWT_SECRET} characters in production"
            )
        if value == "":
            raise ValueError("must not be empty")
        return value

    @field_validator("jwt_previous_secrets")
    @classmethod
    def _jwt_previous(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any(not s for s in value):
            raise ValueError("must not contain an empty secret")
        return value

    @field_validator("data_key", "data_previous_keys")
    @classmethod
    def _data_keys(cls, value: str | tuple[str, ...] | None) -> str | tuple[str, ...] | None:
        for key in (value,) if isinstance(value, str) else value or ():
            _fernet_key(key)
        return value

    @field_validator("rate_limit", "signup_rate_limit")
    @classmethod
    def _rate(cls, value: str) -> str:
        from limits import parse_many

        try:
            parse_many(value)
        except ValueError:
            raise ValueError(
                f"is not a rate limit like '100/second' or '20/minute', not {value[:40]!r}"
            ) from None
        return value

    @field_validator("rate_limit_storage")
    @classmethod
    def _rate_storage(cls, value: str) -> str:
        # limits keeps its scheme registry out of __all__, yet has no public way to ask
        # whether a scheme is known without constructing (and connecting) a storage.
        from limits.storage import SCHEMES  # type: ignore[attr-defined]  # registry not in __all__

        if urlsplit(value).scheme not in SCHEMES:
            raise ValueError("must be memory:// or a storage URL such as redis://host:6379")
        return value

    @field_validator("webhook_retry_schedule")
    @classmethod
    def _schedule(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if any(delay < 0 for delay in value):
            raise ValueError("delays must be 0 or more seconds")
        return value

    @field_validator("live_asset_address", "live_deposit_address", "live_upto_facilitator_address")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        from eth_utils import is_address

        if value is not None and not is_address(value):
            raise ValueError("is not an EVM address (0x and 40 hex digits)")
        return value

    @field_validator("processor")
    @classmethod
    def _processor(cls, value: str, info: ValidationInfo) -> str:
        if value == "stripe":
            for needed in ("stripe_secret_key", "stripe_webhook_secret"):
                if not info.data.get(needed):
                    raise ValueError(f"'stripe' needs {env_variable(needed)} as well")
        return value

    @field_validator("live_hot_wallet_key")
    @classmethod
    def _hot_wallet(cls, value: str | None) -> str | None:
        if value is not None and not _HEX_KEY.fullmatch(value):
            raise ValueError("is not a private key (64 hex digits)")
        return value


def _fernet_key(key: str) -> None:
    from cryptography.fernet import Fernet

    try:
        Fernet(key.encode())
    except (ValueError, TypeError):
        raise ValueError(
            "is not a Fernet key (32 url-safe base64 bytes; make one with "
            "python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key())')"
        ) from None
