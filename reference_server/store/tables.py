"""The schema, as SQLAlchemy Core tables.

Money columns are integer micro-units (``*_micros``, BigInteger): no floats, no rounding.
Every row that belongs to a money environment carries ``environment`` so that ``test``
and ``live`` never meet.  Keys are stored only as SHA-256 hashes; ``key_prefix`` is what a
dashboard may show.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

Timestamp = DateTime(timezone=True)

#: Secrets the server generates for itself (the owner-JWT key) so that a laptop server
#: keeps working across restarts without configuration.
server_secrets = Table(
    "server_secrets",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("value", Text, nullable=False),
    Column("created_at", Timestamp, nullable=False),
)

owners = Table(
    "owners",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("email", String(320), nullable=False, unique=True),
    Column("created_at", Timestamp, nullable=False),
)

sellers = Table(
    "sellers",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("owner_id", String(40), ForeignKey("owners.id"), nullable=False),
    Column("environment", String(8), nullable=False),
    Column("name", String(200)),
    Column("mpp_enabled", Boolean, nullable=False, default=False),
    Column("x402_enabled", Boolean, nullable=False, default=False),
    Column("payouts_enabled", Boolean, nullable=False, default=False),
    Column("payout_wallet_address", String(42)),
    Column("processor_profile_id", String(200)),
    Column("created_at", Timestamp, nullable=False),
    Index(None, "owner_id", "environment"),
)

seller_keys = Table(
    "seller_keys",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("seller_id", String(40), ForeignKey("sellers.id"), nullable=False),
    Column("environment", String(8), nullable=False),
    Column("key_hash", String(64), nullable=False, unique=True),
    Column("key_prefix", String(32), nullable=False),
    Column("created_at", Timestamp, nullable=False),
    Column("revoked_at", Timestamp),
)

resources = Table(
    "resources",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("short_id", String(16), nullable=False, unique=True),
    Column("seller_id", String(40), ForeignKey("sellers.id"), nullable=False),
    Column("environment", String(8), nullable=False),
    Column("kind", String(8), nullable=False),
    Column("path", String(2048)),
    Column("tool", String(200)),
    Column("amount_micros", BigInteger, nullable=False),
    Column("description", String(1000)),
    Column("metadata", JSON, nullable=False),
    Column("upstream_url", String(2048)),
    Column("listed", Boolean, nullable=False, default=False),
    Column("active", Boolean, nullable=False, default=True),
    Column("created_at", Timestamp, nullable=False),
    Column("updated_at", Timestamp, nullable=False),
    Index(None, "seller_id", "created_at"),
)

#: Ledger accounts.  ``balance_micros`` is maintained by the ledger in the same
#: transaction as each transfer; ``kind`` + ``ref_id`` name what the account belongs to.
ledger_accounts = Table(
    "ledger_accounts",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("environment", String(8), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("ref_id", String(40), nullable=False),
    Column("balance_micros", BigInteger, nullable=False, default=0),
    Column("created_at", Timestamp, nullable=False),
    UniqueConstraint("environment", "kind", "ref_id"),
)

#: The transactional outbox: an event row is written in the same transaction as the
#: change it reports; delivery reads from here.
events = Table(
    "events",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("environment", String(8), nullable=False),
    Column("owner_id", String(40), ForeignKey("owners.id"), nullable=False),
    Column("type", String(64), nullable=False),
    Column("data", JSON, nullable=False),
    Column("created_at", Timestamp, nullable=False),
    Index(None, "owner_id", "environment", "created_at"),
)

#: Stored first responses of idempotent requests, scoped to credential and route.
idempotency_keys = Table(
    "idempotency_keys",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("scope", String(80), nullable=False),
    Column("route", String(200), nullable=False),
    Column("key", String(255), nullable=False),
    Column("request_hash", String(64), nullable=False),
    Column("state", String(12), nullable=False),
    Column("response_status", Integer),
    Column("response_body", Text),
    Column("locked_until", Timestamp, nullable=False),
    Column("created_at", Timestamp, nullable=False),
    UniqueConstraint("scope", "route", "key"),
)
