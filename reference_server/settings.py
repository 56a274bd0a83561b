"""Server configuration, read once from the environment (``SVC_*``) or built in code.

Every knob an operator may need is here, with a default that makes ``svc-server run``
work on a laptop with nothing else installed: an SQLite file, in-memory rate limits,
sign-up on, URLs that point back at the listening address, keys generated once and kept
in the database.  Production is stricter (see :mod:`reference_server._settings_rules`):
its keys must come from outside the database, and it refuses to start without them.

``Settings`` stays a frozen attrs class because code builds it with callables (``clock``,
``outbound_resolver``) and derives variants with ``attrs.evolve``; every field that can be
set from the environment is read as ``SVC_<FIELD_NAME>`` and every instance, however it
was built, is checked by the same pydantic model generated from these fields, so a bad
value never reaches the running server.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import attrs
from annotated_types import Ge, Gt, Interval

__all__ = ["Settings", "SettingsError", "env_variable", "utcnow"]


def utcnow() -> datetime:
    return datetime.now(UTC)


def _field(default: Any, *checks: Any, secret: bool = False) -> Any:
    """A setting read from the environment: ``checks`` are annotated-types constraints
    applied by the rules model; ``secret`` keeps the value out of ``repr`` and error
    messages.  Code-only settings (callables) are plain ``attrs.field(metadata={"env":
    False})``."""
    return attrs.field(
        default=default, repr=not secret, metadata={"checks": checks, "secret": secret}
    )


def env_variable(field_name: str) -> str:
    """The one naming rule: field ``max_body_bytes`` is ``SVC_MAX_BODY_BYTES``."""
    return "SVC_" + field_name.upper()


class SettingsError(Exception):
    """A setting is missing or malformed; ``str()`` is one line naming its variable."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.variable = env_variable(field)
        super().__init__(f"{self.variable}: {message}")


@attrs.frozen(kw_only=True)
class Settings:
    #: SQLAlchemy URL; ``postgresql://`` is served by psycopg 3.
    database_url: str = _field("sqlite:///svc.db", secret=True)
    #: PostgreSQL connections each process keeps open, and how many more it may open while
    #: busy.  Every ``run`` and ``worker`` process may hold their sum (plus one listening
    #: session per worker): keep that total over all processes under ``max_connections``.
    database_pool_size: int = _field(32, Gt(0))
    database_max_overflow: int = _field(8, Ge(0))
    #: ``development`` (default) or ``production``, spelled exactly: production refuses
    #: to start without ``jwt_secret`` and ``data_key``, refuses localhost callbacks,
    #: closes sign-up by default and insists on HTTPS URLs.
    env: str = _field("development")
    #: Base of every ``gate_url`` / ``pay_url``; ``None`` = the address the request came to.
    public_url: str | None = _field(None)
    #: HS256 secret owner JWTs are signed with; ``None`` = generated once and kept in the
    #: database (outside production only).
    jwt_secret: str | None = _field(None, secret=True)
    #: Retired JWT secrets still accepted when verifying (not for signing): rotation.
    jwt_previous_secrets: tuple[str, ...] = _field((), secret=True)
    jwt_ttl_seconds: int = _field(30 * 24 * 3600, Gt(0))
    #: Fernet key sealing secrets at rest; ``None`` = generated once, kept in the database
    #: (outside production only).
    data_key: str | None = _field(None, secret=True)
    #: Older Fernet keys: still open what they sealed, never seal anything new.
    data_previous_keys: tuple[str, ...] = _field((), secret=True)
    #: ``POST /owners``; ``None`` = on outside production.
    signup_enabled: bool | None = _field(None)
    #: ``limits`` rate strings, per credential (or client address when anonymous).
    rate_limit: str = _field("100/second")
    signup_rate_limit: str = _field("20/minute")
    #: ``memory://`` for one process, ``redis://host:port`` when several share limits.
    rate_limit_storage: str = _field("memory://", secret=True)
    max_body_bytes: int = _field(256 * 1024, Gt(0))
    idempotency_ttl_seconds: int = _field(24 * 3600, Gt(0))
    #: How long an in-flight idempotent request holds its key before a retry may take over
    #: (a crashed worker must not wedge a key forever).
    idempotency_lease_seconds: int = _field(60, Gt(0))
    #: Platform fee on ledger payments, in basis points of the price (100 = 1 %).
    platform_fee_bps: int = _field(100, Interval(ge=0, le=10_000))
    auto_migrate: bool = _field(True)
    #: Delay before each retry of a failed webhook delivery, in seconds: after the first
    #: failure the first delay, and so on (DESIGN.md: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h,
    #: 10 h), each jittered by ``webhook_retry_jitter``; then the delivery has failed.
    webhook_retry_schedule: tuple[float, ...] = _field((5, 300, 1800, 7200, 18000, 36000, 36000))
    webhook_retry_jitter: float = _field(0.1, Interval(ge=0, le=1))
    webhook_timeout_seconds: float = _field(10.0, Gt(0))
    #: An endpoint failing without a single success for this long is disabled.
    webhook_disable_after_seconds: float = _field(5 * 24 * 3600, Gt(0))
    #: Kept in the delivery log per attempt.
    webhook_log_body_bytes: int = _field(2048, Ge(0))
    #: Run the outbox delivery worker inside the server (``svc-server run``).
    worker_enabled: bool = _field(True)
    worker_poll_seconds: float = _field(0.5, Gt(0))
    #: Deliveries claimed per transaction (and payouts advanced per round).  Large enough
    #: that a busy worker claims rarely: each claim is a transaction run from a thread,
    #: which waits for the GIL behind the senders.
    worker_batch_size: int = _field(100, Ge(1))
    worker_concurrency: int = _field(8, Ge(1))
    #: A claimed delivery belongs to its worker this long; a crashed worker's claims are
    #: picked up by another worker after it.
    worker_lease_seconds: float = _field(60.0, Gt(0))
    #: Serve the sandbox chain's routes (``/sandbox/faucet``, ``/sandbox/balances/…``, the
    #: x402 facilitator at ``/sandbox/x402``).  They only ever answer for ``test``.
    sandbox_enabled: bool = _field(True)
    #: Most one ``POST /sandbox/faucet`` call mints, in atomic units (6 decimals): 1000 USDC.
    sandbox_faucet_max_micros: int = _field(1000 * 1_000_000, Ge(0))
    #: Payouts (Connect and withdrawals, ``domain/payouts``).  How long a Connect
    #: onboarding or login link stays usable (it can be fetched again after).
    connect_link_seconds: int = _field(30 * 60, Gt(0))
    #: The sandbox payout processor moves each payout one step (``pending`` ->
    #: ``in_transit`` -> ``paid`` or ``failed``) after this many seconds.
    sandbox_payout_seconds: float = _field(5.0, Ge(0))
    #: Auto payout: a seller with payouts enabled whose available balance reaches this
    #: minimum (micro-USD; 100 USD) is paid out whole, one payout in flight at a time.  A
    #: seller may set its own minimum (``PATCH /sellers/me/connect``); 0 turns the
    #: server default off (sellers that set their own minimum still get auto payout).
    auto_payout_minimum_micros: int = _field(100 * 1_000_000, Ge(0))
    #: Open rails in ``live``: the x402 facilitator that verifies and settles gate
    #: payments, the chain and token they are paid in, the service's deposit address
    #: (``processor_deposit`` settlement) and the hot wallet that pays ``pay-url``
    #: challenges.  Unset, ``live`` gates offer no open rail and ``live`` pay-url refuses:
    #: nothing in ``test`` can stand in for them.  ``live_rpc_url`` names a node of that
    #: chain (``svc-server reconcile`` reads it); ``svc-server devchain`` prints every
    #: one of these for a chain on this machine.
    live_facilitator_url: str | None = _field(None)
    live_rpc_url: str | None = _field(None)
    live_chain_id: int = _field(8453, Gt(0))
    live_asset_address: str = _field("0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913")
    live_asset_name: str = _field("USD Coin")
    live_asset_version: str = _field("2")
    live_deposit_address: str | None = _field(None)
    live_hot_wallet_key: str | None = _field(None, secret=True)
    #: ``svc-server reconcile`` in live reads the token's ``Transfer`` logs from this block
    #: on (through ``live_rpc_url``): the block the service started using its deposit
    #: address and hot wallet, so that a long chain is not read from its genesis.
    live_reconcile_from_block: int = _field(0, Ge(0))
    #: The worker reconciles the books with the chain this often (seconds; each
    #: environment it can read: ``test``'s sandbox chain, ``live`` with ``live_rpc_url``)
    #: and records the run in ``reconciliations``, drift logged at WARNING; 0 turns it off.
    reconcile_interval_seconds: float = _field(3600.0, Ge(0))
    #: The processor for ``live`` card payments, card top-ups and payouts (Connect):
    #: ``sandbox`` (the embedded default, which ``test`` always uses) or ``stripe``,
    #: through the official SDK with these keys.  ``stripe_api_base`` sends the SDK's
    #: requests elsewhere than Stripe's own API (a local Stripe-compatible server in tests
    #: and demos); ``stripe_webhook_secret`` verifies ``POST /processor/webhooks``.
    stripe_secret_key: str | None = _field(None, secret=True)
    stripe_webhook_secret: str | None = _field(None, secret=True)
    stripe_api_base: str | None = _field(None)
    #: Retries of a processor call that failed on the network, a 409, 429 or 5xx, with
    #: the SDK's own backoff; a withdrawal whose call still fails stays ``pending``.
    stripe_max_network_retries: int = _field(2, Ge(0))
    processor: str = _field("sandbox")
    #: The most a ``pay-url`` unlock body keeps; past it the body is cut, ``body_truncated``.
    unlock_body_max_bytes: int = _field(8192, Ge(0))
    #: Slow clients: the most time a connection may take to send a request's line and
    #: headers (then it is closed), and to send its body once the app reads it (then it
    #: is answered 408 ``request_timeout`` and closed); the most time an answer may wait
    #: on a client that reads none of it (then the connection is dropped); how long an
    #: idle keep-alive connection is kept open.
    header_timeout_seconds: float = _field(10.0, Gt(0))
    body_timeout_seconds: float = _field(30.0, Gt(0))
    send_timeout_seconds: float = _field(30.0, Gt(0))
    keep_alive_timeout_seconds: float = _field(5.0, Gt(0))
    #: Name resolution for outbound requests (``None``: the system's); tests inject one.
    outbound_resolver: Callable[[str, int], Any] | None = attrs.field(
        default=None, metadata={"env": False}
    )
    clock: Callable[[], datetime] = attrs.field(default=utcnow, metadata={"env": False})

    def __attrs_post_init__(self) -> None:
        from ._settings_rules import checked

        for name, value in checked(self).items():
            object.__setattr__(self, name, value)  # normalised, e.g. "5" -> 5, list -> tuple

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
        from ._settings_rules import from_environment

        return cls(**from_environment({k: v for k, v in overrides.items() if v is not None}))
