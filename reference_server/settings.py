"""Server configuration, read once from the environment (``SVC_*``) or built in code.

Every knob an operator may need is here, with a default that makes ``svc-server run``
work on a laptop with nothing else installed: an SQLite file, in-memory rate limits,
sign-up on, URLs that point back at the listening address.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import attrs

__all__ = ["Settings", "utcnow"]


def utcnow() -> datetime:
    return datetime.now(UTC)


def _env_bool(name: str) -> bool | None:
    value = os.environ.get(name)
    if value is None or value == "":
        return None
    return value.strip().lower() in {"1", "true", "yes", "on"}


@attrs.frozen(kw_only=True)
class Settings:
    #: SQLAlchemy URL; ``postgresql://`` is served by psycopg 3.
    database_url: str = "sqlite:///svc.db"
    #: ``development`` (default) or ``production``: production refuses localhost callbacks,
    #: closes sign-up by default and insists on HTTPS URLs.
    env: str = "development"
    #: Base of every ``gate_url`` / ``pay_url``; ``None`` = the address the request came to.
    public_url: str | None = None
    #: HS256 secret for owner JWTs; ``None`` = generated once and kept in the database.
    jwt_secret: str | None = None
    jwt_ttl_seconds: int = 30 * 24 * 3600
    #: Fernet key sealing secrets at rest; ``None`` = generated once, kept in the database.
    data_key: str | None = None
    #: ``POST /owners``; ``None`` = on outside production.
    signup_enabled: bool | None = None
    #: ``limits`` rate strings, per credential (or client address when anonymous).
    rate_limit: str = "100/second"
    signup_rate_limit: str = "20/minute"
    #: ``memory://`` for one process, ``redis://host:port`` when several share limits.
    rate_limit_storage: str = "memory://"
    max_body_bytes: int = 256 * 1024
    idempotency_ttl_seconds: int = 24 * 3600
    #: How long an in-flight idempotent request holds its key before a retry may take over
    #: (a crashed worker must not wedge a key forever).
    idempotency_lease_seconds: int = 60
    #: Platform fee on ledger payments, in basis points of the price (100 = 1 %).
    platform_fee_bps: int = 100
    auto_migrate: bool = True
    #: Serve ``POST /_bench/commit`` (a route that commits one row through the full API
    #: pipeline, the baseline of ``bench/pay_throughput.py``).  Keep it off in production.
    bench_routes: bool = False
    #: Delay before each retry of a failed webhook delivery, in seconds: after the first
    #: failure the first delay, and so on (DESIGN.md: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h,
    #: 10 h), each jittered by ``webhook_retry_jitter``; then the delivery has failed.
    webhook_retry_schedule: tuple[float, ...] = (5, 300, 1800, 7200, 18000, 36000, 36000)
    webhook_retry_jitter: float = 0.1
    webhook_timeout_seconds: float = 10.0
    #: An endpoint failing without a single success for this long is disabled.
    webhook_disable_after_seconds: float = 5 * 24 * 3600
    #: Kept in the delivery log per attempt.
    webhook_log_body_bytes: int = 2048
    #: Run the outbox delivery worker inside the server (``svc-server run``).
    worker_enabled: bool = True
    worker_poll_seconds: float = 0.5
    worker_batch_size: int = 20
    worker_concurrency: int = 8
    #: A claimed delivery belongs to its worker this long; a crashed worker's claims are
    #: picked up by another worker after it.
    worker_lease_seconds: float = 60.0
    #: Serve the sandbox chain's routes (``/sandbox/faucet``, ``/sandbox/balances/…``, the
    #: x402 facilitator at ``/sandbox/x402``).  They only ever answer for ``test``.
    sandbox_enabled: bool = True
    #: Most one ``POST /sandbox/faucet`` call mints, in atomic units (6 decimals): 1000 USDC.
    sandbox_faucet_max_micros: int = 1000 * 1_000_000
    #: Open rails in ``live``: the x402 facilitator that verifies and settles gate
    #: payments, the chain and token they are paid in, the service's deposit address
    #: (``processor_deposit`` settlement) and the hot wallet that pays ``pay-url``
    #: challenges.  Unset, ``live`` gates offer no open rail and ``live`` pay-url refuses:
    #: nothing in ``test`` can stand in for them.
    live_facilitator_url: str | None = None
    live_chain_id: int = 8453
    live_asset_address: str = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"
    live_asset_name: str = "USD Coin"
    live_asset_version: str = "2"
    live_deposit_address: str | None = None
    live_hot_wallet_key: str | None = None
    #: The most a ``pay-url`` unlock body keeps; past it the body is cut, ``body_truncated``.
    unlock_body_max_bytes: int = 8192
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
        """Settings from ``SVC_*`` variables; keyword overrides win (CLI flags)."""
        values: dict[str, object] = {}
        mapping = {
            "database_url": "SVC_DATABASE_URL",
            "env": "SVC_ENV",
            "public_url": "SVC_PUBLIC_URL",
            "jwt_secret": "SVC_JWT_SECRET",
            "data_key": "SVC_DATA_KEY",
            "rate_limit": "SVC_RATE_LIMIT",
            "rate_limit_storage": "SVC_RATE_LIMIT_STORAGE",
            "live_facilitator_url": "SVC_LIVE_FACILITATOR_URL",
            "live_asset_address": "SVC_LIVE_ASSET_ADDRESS",
            "live_asset_name": "SVC_LIVE_ASSET_NAME",
            "live_asset_version": "SVC_LIVE_ASSET_VERSION",
            "live_deposit_address": "SVC_LIVE_DEPOSIT_ADDRESS",
            "live_hot_wallet_key": "SVC_LIVE_HOT_WALLET_KEY",
        }
        for field, var in mapping.items():
            if os.environ.get(var):
                values[field] = os.environ[var]
        signup = _env_bool("SVC_SIGNUP_ENABLED")
        if signup is not None:
            values["signup_enabled"] = signup
        worker = _env_bool("SVC_WORKER_ENABLED")
        if worker is not None:
            values["worker_enabled"] = worker
        if os.environ.get("SVC_LIVE_CHAIN_ID"):
            values["live_chain_id"] = int(os.environ["SVC_LIVE_CHAIN_ID"])
        for field, var in (
            ("worker_lease_seconds", "SVC_WORKER_LEASE_SECONDS"),
            ("worker_poll_seconds", "SVC_WORKER_POLL_SECONDS"),
        ):
            if os.environ.get(var):
                values[field] = float(os.environ[var])
        if os.environ.get("SVC_WEBHOOK_RETRY_SCHEDULE"):
            values["webhook_retry_schedule"] = tuple(
                float(x) for x in os.environ["SVC_WEBHOOK_RETRY_SCHEDULE"].split(",")
            )
        sandbox = _env_bool("SVC_SANDBOX_ENABLED")
        if sandbox is not None:
            values["sandbox_enabled"] = sandbox
        bench = _env_bool("SVC_BENCH_ROUTES")
        if bench is not None:
            values["bench_routes"] = bench
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)  # type: ignore[arg-type]
