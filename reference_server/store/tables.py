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
    false,
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
    #: The one HTTP method the hosted gate sells (``NULL``: any method).
    Column("method", String(8)),
    #: A JSON body shape callers copy with their own values (methods with a body only).
    Column("body_hint", JSON),
    #: ``fixed``, or ``metered``: ``amount_micros`` is then the most one payment costs
    #: (``max_amount``) and the payer is charged units * ``unit_price_micros`` up to it.
    Column("pricing", String(8), nullable=False, default="fixed", server_default="fixed"),
    Column("unit_price_micros", BigInteger),
    Column("unit", String(32)),
    #: The fixed price offered where a rail cannot meter (MPP, cards); ``NULL``: none.
    Column("fallback_amount_micros", BigInteger),
    Column("created_at", Timestamp, nullable=False),
    Column("updated_at", Timestamp, nullable=False),
    Index(None, "seller_id", "created_at"),
    #: ``GET /directory``: an environment's listed resources in order.
    Index(None, "environment", "listed", "created_at"),
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
    #: Money reserved by pending transfers out of this account (not yet posted).
    Column("pending_debit_micros", BigInteger, nullable=False, default=0, server_default="0"),
    #: Sources (sandbox funding, processor clearing) go negative as money enters the
    #: ledger; every other account must stay at or above zero.
    Column("allow_negative", Boolean, nullable=False, default=False, server_default=false()),
    Column("created_at", Timestamp, nullable=False),
    UniqueConstraint("environment", "kind", "ref_id"),
)

#: One row per money movement.  ``posted`` transfers make up the balances; ``pending``
#: ones are reservations (counted in the debit account's ``pending_debit_micros``) that
#: are posted or voided exactly once.
ledger_transfers = Table(
    "ledger_transfers",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("environment", String(8), nullable=False),
    Column("debit_account_id", String(40), ForeignKey("ledger_accounts.id"), nullable=False),
    Column("credit_account_id", String(40), ForeignKey("ledger_accounts.id"), nullable=False),
    Column("amount_micros", BigInteger, nullable=False),
    Column("kind", String(32), nullable=False),
    Column("status", String(10), nullable=False),
    Column("receipt_id", String(40)),
    Column("wallet_key_id", String(40)),
    Column("reference", String(200)),
    Column("created_at", Timestamp, nullable=False),
    Column("settled_at", Timestamp),
    Index(None, "receipt_id"),
    Index(None, "debit_account_id"),
    Index(None, "credit_account_id"),
)

#: Wallet keys (agents' spend credentials) with their policy and spend counters.
wallet_keys = Table(
    "wallet_keys",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("owner_id", String(40), ForeignKey("owners.id"), nullable=False),
    Column("environment", String(8), nullable=False),
    Column("name", String(200)),
    Column("key_hash", String(64), nullable=False, unique=True),
    Column("key_prefix", String(32), nullable=False),
    Column("status", String(10), nullable=False),
    Column("allowance_micros", BigInteger),
    Column("max_per_tx_micros", BigInteger),
    Column("budget_micros", BigInteger),
    Column("period", String(8), nullable=False),
    Column("allowed_hosts", JSON),
    Column("allowed_rails", JSON),
    Column("approval_above_micros", BigInteger),
    Column("approval_hosts", JSON),
    Column("approval_ttl_seconds", Integer),
    Column("period_started_at", Timestamp, nullable=False),
    Column("spent_period_micros", BigInteger, nullable=False, default=0),
    Column("spent_total_micros", BigInteger, nullable=False, default=0),
    Column("created_at", Timestamp, nullable=False),
    Column("revoked_at", Timestamp),
    Index(None, "owner_id", "environment"),
)

#: Handles (``@name``) that owners claim for their account wallet, per environment.
handles = Table(
    "handles",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("environment", String(8), nullable=False),
    Column("handle", String(32), nullable=False),
    Column("owner_id", String(40), ForeignKey("owners.id"), nullable=False),
    Column("created_at", Timestamp, nullable=False),
    UniqueConstraint("environment", "handle"),
)

#: Receipts: proof of a payment, looked up by ``POST /access/verify`` and gates.
receipts = Table(
    "receipts",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("environment", String(8), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("rail", String(8), nullable=False),
    Column("settlement", String(20), nullable=False),
    Column("amount_micros", BigInteger, nullable=False),
    Column("fee_micros", BigInteger, nullable=False),
    Column("resource_id", String(40)),
    Column("seller_id", String(40)),
    Column("wallet_key_id", String(40)),
    Column("destination_owner_id", String(40)),
    Column("handle", String(32)),
    #: The ledger transfer the receipt stands for; ``None`` only for an open-rail payment
    #: settled ``direct_wallet`` (the money went on chain to the seller, not through us).
    Column("transfer_id", String(40)),
    #: Open rails: the settling transaction and who signed it.
    Column("tx_hash", String(66)),
    Column("payer", String(42)),
    Column("network", String(32)),
    Column("metadata", JSON),
    Column("request_id", String(40)),
    #: ``settled``; or, for a metered ledger payment, ``authorized`` (``max_amount_micros``
    #: held on the wallet key, ``amount_micros`` the same, ``transfer_id`` the pending
    #: hold) until the seller captures its usage, then ``settled`` (``amount_micros`` what
    #: was used, ``transfer_id`` the sale) or ``released`` (0; the hold voided).
    #: (Server default only: a Python-side default breaks the JSON-recordset batch insert.)
    Column("status", String(16), nullable=False, server_default="settled"),
    #: Metered payments: the units the answer used, and the most the payer authorised.
    Column("units", BigInteger),
    Column("max_amount_micros", BigInteger),
    Column("settled_at", Timestamp),
    Column("created_at", Timestamp, nullable=False),
    #: What refunds gave back so far (``POST /refunds``): raised by a conditional
    #: ``UPDATE``, never past ``amount_micros``.
    Column("refunded_micros", BigInteger, nullable=False, server_default="0"),
    Index(None, "wallet_key_id", "created_at"),
    #: The dashboard's payments page: a seller's receipts, newest first (keyset).
    Index(None, "seller_id", "created_at"),
    #: One transaction is at most one receipt per side: the seller's (``resource``, booked
    #: by the gate that settled it) and the payer's (``url``, when our own hot wallet paid
    #: it through ``pay-url``); both exist when an agent of ours pays a gate of ours.
    UniqueConstraint("environment", "kind", "tx_hash"),
)

#: Refunds: all or part of a payment given back by its seller (``POST /refunds``).
refunds = Table(
    "refunds",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("environment", String(8), nullable=False),
    Column("receipt_id", String(40), ForeignKey("receipts.id"), nullable=False),
    Column("seller_id", String(40), nullable=False),
    Column("wallet_key_id", String(40)),
    Column("amount_micros", BigInteger, nullable=False),
    Column("reason", String(500)),
    #: The reversing ledger transfer (seller balance -> the payer's wallet key).
    Column("transfer_id", String(40)),
    #: ``succeeded``; a live card refund is ``pending`` until the processor confirms it
    #: (then ``succeeded``) or fails it (``failed``, the money put back).
    Column("status", String(16), nullable=False),
    Column("request_id", String(40)),
    Column("created_at", Timestamp, nullable=False),
    #: A live card refund's id at the processor (its events name it).
    Column("processor_refund_id", String(64)),
    #: On chain (an open-rail ``processor_deposit`` payment): the hot wallet's transaction
    #: to the payer, when the worker next sends or follows it (``pending`` only), and why
    #: it failed.
    Column("tx_hash", String(66)),
    Column("next_check_at", Timestamp),
    Column("failure_reason", String(500)),
    Index(None, "seller_id", "created_at"),
    Index(None, "receipt_id"),
    Index(None, "processor_refund_id", unique=True),
    Index(None, "next_check_at"),
)

#: The dashboard's one-time sign-in links (``POST /owners/me/dashboard-link``): only the
#: SHA-256 of the token is kept; ``used_at`` makes a link good once.
dashboard_links = Table(
    "dashboard_links",
    metadata,
    Column("token_hash", String(64), primary_key=True),
    Column("owner_id", String(40), ForeignKey("owners.id"), nullable=False),
    Column("expires_at", Timestamp, nullable=False),
    Column("created_at", Timestamp, nullable=False),
    Column("used_at", Timestamp),
    Index(None, "expires_at"),
)

#: The dashboard's sessions (its cookie holds the token; the SHA-256 is kept).
dashboard_sessions = Table(
    "dashboard_sessions",
    metadata,
    Column("token_hash", String(64), primary_key=True),
    Column("owner_id", String(40), ForeignKey("owners.id"), nullable=False),
    Column("expires_at", Timestamp, nullable=False),
    Column("created_at", Timestamp, nullable=False),
    Index(None, "expires_at"),
)

#: Approvals: a payment over a wallet key's ``approval_above`` (or to an
#: ``approval_hosts`` host) waits for a person; its amount is held meanwhile.
approvals = Table(
    "approvals",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("environment", String(8), nullable=False),
    Column("owner_id", String(40), nullable=False),
    Column("wallet_key_id", String(40), ForeignKey("wallet_keys.id"), nullable=False),
    Column("amount_micros", BigInteger, nullable=False),
    #: ``POST /spend/pay-url``: what the agent asked to pay.
    Column("method", String(10)),
    Column("url", String(2048)),
    Column("host", String(255)),
    #: ``POST /pay``: the resource.
    Column("resource_id", String(40)),
    #: The route that asked, and the request's ``Idempotency-Key`` and fingerprint: a
    #: repeat with the key resumes it.
    Column("route", String(40), nullable=False),
    Column("idempotency_key", String(255), nullable=False),
    Column("request_hash", String(64), nullable=False),
    Column("status", String(10), nullable=False),
    #: sha256 of the one-time link's token (the token itself is never stored).
    Column("token_hash", String(64), nullable=False, unique=True),
    #: The pending ledger transfer that holds the amount.
    Column("transfer_id", String(40)),
    Column("expires_at", Timestamp, nullable=False),
    Column("decided_at", Timestamp),
    Column("receipt_id", String(40)),
    Column("request_id", String(40)),
    Column("created_at", Timestamp, nullable=False),
    UniqueConstraint("wallet_key_id", "route", "idempotency_key"),
    Index(None, "status", "expires_at"),
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
    #: The API request that caused the event, and its span (a W3C ``traceparent``) when
    #: traced: the worker's delivery trace names and links to it.  ``None`` for events the
    #: worker records itself.
    Column("request_id", String(40)),
    Column("traceparent", String(55)),
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

#: Webhook endpoints.  The signing secret is sealed (``crypto.SecretBox``): deliveries
#: must sign with it, so it cannot be hashed like a key.
webhook_endpoints = Table(
    "webhook_endpoints",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("owner_id", String(40), ForeignKey("owners.id"), nullable=False),
    Column("environment", String(8), nullable=False),
    Column("url", String(2048), nullable=False),
    #: ``None`` = every event type.
    Column("events", JSON),
    Column("description", String(500)),
    Column("secret_sealed", Text, nullable=False),
    #: ``enabled`` or ``disabled`` (by the owner, or after failing for too long).
    Column("status", String(10), nullable=False),
    Column("disabled_reason", String(500)),
    #: When the current run of consecutive failures began; ``None`` while healthy.
    Column("failing_since", Timestamp),
    Column("created_at", Timestamp, nullable=False),
    #: A ``svc listen`` endpoint's last poll: one not polled for a while is swept.
    Column("listened_at", Timestamp),
    Index(None, "owner_id", "environment"),
)

#: One row per (event, endpoint): the outbox.  Its id is the ``deliveryId`` of the API and
#: stays the same across retries.  A worker *claims* a due row by writing a lease (token and
#: expiry); only the holder of the lease may record the attempt's outcome.
webhook_deliveries = Table(
    "webhook_deliveries",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("endpoint_id", String(40), ForeignKey("webhook_endpoints.id"), nullable=False),
    Column("event_id", String(40), ForeignKey("events.id"), nullable=False),
    #: ``pending`` (waiting for its next attempt), ``succeeded``, ``failed`` (retries
    #: exhausted) or ``cancelled`` (endpoint deleted).
    Column("status", String(10), nullable=False),
    Column("attempts", Integer, nullable=False, default=0),
    Column("next_attempt_at", Timestamp),
    Column("lease_token", String(40)),
    Column("lease_until", Timestamp),
    Column("last_status_code", Integer),
    Column("last_error", String(500)),
    Column("created_at", Timestamp, nullable=False),
    Column("delivered_at", Timestamp),
    Index(None, "status", "next_attempt_at"),
    Index(None, "endpoint_id", "created_at"),
)

#: The delivery log: every attempt, with what the receiver answered (body capped).
webhook_attempts = Table(
    "webhook_attempts",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("delivery_id", String(40), ForeignKey("webhook_deliveries.id"), nullable=False),
    Column("number", Integer, nullable=False),
    Column("started_at", Timestamp, nullable=False),
    Column("duration_ms", Integer, nullable=False),
    Column("status_code", Integer),
    Column("error", String(500)),
    Column("response_body", Text),
    Column("trigger", String(10), nullable=False),
    UniqueConstraint("delivery_id", "number"),
)

#: The sandbox chain (``reference_server.sandbox``): a Base Sepolia USDC look-alike that
#: settles ``test`` payments on the open rails.  Test-only by construction, so these rows
#: carry no ``environment``; they are never part of the double-entry ledger.  Addresses
#: are stored lowercase (one row per address however a client cases it); amounts are the
#: token's atomic units (6 decimals, so 1 unit = 1 micro-USD).
sandbox_balances = Table(
    "sandbox_balances",
    metadata,
    Column("address", String(42), primary_key=True),
    Column("balance", BigInteger, nullable=False),
    Column("updated_at", Timestamp, nullable=False),
)

#: EIP-3009 nonces consumed by ``transferWithAuthorization`` (and Permit2 nonces, as 0x-hex
#: 32 bytes, by ``permitWitnessTransferFrom``): the primary key is what makes an
#: authorization pay once, even when many settles of it race.
sandbox_nonces = Table(
    "sandbox_nonces",
    metadata,
    Column("authorizer", String(42), primary_key=True),
    Column("nonce", String(66), primary_key=True),
    Column("tx_hash", String(66), nullable=False),
    Column("created_at", Timestamp, nullable=False),
)

#: Every token movement: faucet mints (``from`` the zero address, as an ERC-20 ``Transfer``
#: of a mint) and authorized transfers.  ``block_number`` only grows, like a chain's.
sandbox_transactions = Table(
    "sandbox_transactions",
    metadata,
    Column("block_number", Integer, primary_key=True, autoincrement=True),
    Column("tx_hash", String(66), nullable=False, unique=True),
    #: ``mint``, ``transferWithAuthorization``, ``cancelAuthorization`` or
    #: ``permitWitnessTransferFrom`` (whose ``valid_before`` is the permit's deadline).
    Column("kind", String(32), nullable=False),
    Column("from_address", String(42), nullable=False),
    Column("to_address", String(42), nullable=False),
    Column("value", BigInteger, nullable=False),
    Column("nonce", String(66)),
    Column("valid_after", String(78)),
    Column("valid_before", String(78)),
    Column("created_at", Timestamp, nullable=False),
    Index(None, "from_address", "block_number"),
    Index(None, "to_address", "block_number"),
)


#: Which owner's gates answer at an origin (``https://shop.example``), per environment:
#: claimed by the first seller's gate to ask a challenge there, so a credential signed
#: for one seller's gate cannot be redeemed by another's (x402 binds the URL alone).
gate_origins = Table(
    "gate_origins",
    metadata,
    Column("environment", String(8), primary_key=True),
    Column("origin", String(300), primary_key=True),
    Column("owner_id", String(40), ForeignKey("owners.id"), nullable=False),
    Column("seller_id", String(40), ForeignKey("sellers.id"), nullable=False),
    Column("created_at", Timestamp, nullable=False),
)

#: Owners' top-ups (``POST /owners/me/top-ups``): one row per settled payment to the
#: environment's deposit address, credited to the owner's account wallet in the same
#: transaction.  ``tx_hash`` is unique per environment: a transaction is booked once.
top_ups = Table(
    "top_ups",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("owner_id", String(40), ForeignKey("owners.id"), nullable=False),
    Column("environment", String(8), nullable=False),
    Column("amount_micros", BigInteger, nullable=False),
    Column("status", String(16), nullable=False),
    Column("rail", String(8), nullable=False),
    Column("network", String(40), nullable=False),
    #: The chain transaction (x402/MPP), or the PaymentIntent id of a card top-up once
    #: paid; ``None`` while a card top-up is pending.
    Column("tx_hash", String(80)),
    Column("payer", String(64)),
    #: ``None`` until the top-up is credited (a pending card top-up).
    Column("transfer_id", String(40)),
    #: The owner's ``Idempotency-Key``, when given: its record in the one store
    #: (``web/idempotency.py``), kept for good while a top-up names it.
    Column("idempotency_record_id", Integer, ForeignKey("idempotency_keys.id")),
    Column("request_id", String(64)),
    Column("created_at", Timestamp, nullable=False),
    UniqueConstraint("environment", "tx_hash"),
    UniqueConstraint("idempotency_record_id"),
    Index(None, "owner_id", "environment", "created_at"),
)

#: The processor's events received at ``POST /processor/webhooks``: one row per event id,
#: written in the transaction that applies the event, so a redelivered event (the same
#: id) finds its row and changes nothing.
processor_events = Table(
    "processor_events",
    metadata,
    Column("id", String(255), primary_key=True),
    Column("type", String(80), nullable=False),
    #: The connected account the event is about (Connect events), else ``None``.
    Column("account", String(255)),
    Column("livemode", Boolean, nullable=False),
    Column("event_created_at", Timestamp, nullable=False),
    #: ``False``: a type the server does not act on, acknowledged and kept for the record.
    Column("applied", Boolean, nullable=False),
    Column("received_at", Timestamp, nullable=False),
)

#: Checkout Sessions at the processor: a live card payment on a buy page (``kind``
#: ``sale``, ``resource_id``) or a card top-up (``top_up``, ``owner_id``), booked once
#: when ``checkout.session.completed`` arrives (``status`` ``complete``, with its
#: ``receipt_id`` or ``top_up_id``).  The row is written before the session is created, so
#: its id is the processor's idempotency key and names it in the session's metadata.
card_checkouts = Table(
    "card_checkouts",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("session_id", String(255), unique=True),
    Column("url", Text),
    Column("kind", String(8), nullable=False),
    Column("environment", String(8), nullable=False),
    Column("resource_id", String(40), ForeignKey("resources.id")),
    Column("owner_id", String(40), ForeignKey("owners.id")),
    Column("amount_micros", BigInteger, nullable=False),
    #: ``open`` | ``complete`` | ``expired`` | ``failed`` (declined; the payer may still
    #: pay the same session with another card, which completes it).
    Column("status", String(16), nullable=False),
    Column("receipt_id", String(40), unique=True),
    Column("top_up_id", String(40), unique=True),
    Column("payment_intent", String(255), index=True),
    Column("failure_reason", Text),
    Column("refunded_at", Timestamp),
    Column("created_at", Timestamp, nullable=False),
    Column("updated_at", Timestamp, nullable=False),
)

#: Open-rail credentials claimed before settlement (pympp's ``Store`` contract): the
#: primary key makes an authorization settle once across every server process.
rail_claims = Table(
    "rail_claims",
    metadata,
    Column("key", String(255), primary_key=True),
    Column("value", Text, nullable=False),
    Column("created_at", Timestamp, nullable=False),
)

#: ``POST /spend/pay-url`` attempts: one row per attempt, written before any money
#: moves and updated as it goes, so money that left is never unaccounted for.
spend_attempts = Table(
    "spend_attempts",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("environment", String(8), nullable=False),
    Column("owner_id", String(40), nullable=False),
    Column("wallet_key_id", String(40), nullable=False),
    #: The caller's ``Idempotency-Key``, when given: its record in the one store
    #: (``web/idempotency.py``), kept for good while an attempt names it.
    Column("idempotency_record_id", Integer, ForeignKey("idempotency_keys.id")),
    Column("request_hash", String(64)),
    Column("method", String(8), nullable=False),
    Column("url", Text, nullable=False),
    Column("host", String(255), nullable=False),
    #: ``probing`` → ``paying`` → ``succeeded`` | ``failed`` (see the pay-url docs).
    Column("status", String(16), nullable=False),
    Column("rail", String(8)),
    #: Reserved while paying; once concluded, what was spent.
    Column("amount_micros", BigInteger),
    #: A metered (x402 ``upto``) payment's signed maximum, which the reservation held.
    Column("max_amount_micros", BigInteger),
    Column("pay_to", String(42)),
    Column("network", String(32)),
    #: The hot wallet that signed and the EIP-3009 nonce it signed: unique, so that two
    #: attempts can never both claim one on-chain transfer (an MPP nonce is derived from
    #: the challenge, and two probes can get the same challenge).
    Column("payer", String(42)),
    Column("nonce", String(66)),
    #: The pending ledger reservation while paying; posted or voided at the end.
    Column("transfer_id", String(40)),
    #: When the wallet key was charged (a refund gives the allowance back only if the
    #: period has not rolled since).
    Column("reserved_at", Timestamp),
    Column("receipt_id", String(40)),
    Column("tx_hash", String(66)),
    Column("error_code", String(64)),
    Column("error_message", Text),
    Column("error_details", JSON),
    Column("response_status", Integer),
    Column("response_headers", JSON),
    #: The unlock body, sealed (it may carry what the caller paid for), as text in
    #: ``body_encoding`` (``utf-8``, or ``base64`` for bytes that are not UTF-8).
    Column("response_body", Text),
    Column("body_encoding", String(8)),
    Column("body_truncated", Boolean, nullable=False, server_default=false()),
    Column("request_id", String(40), nullable=False),
    Column("created_at", Timestamp, nullable=False),
    Column("updated_at", Timestamp, nullable=False),
    UniqueConstraint("idempotency_record_id"),
    UniqueConstraint("payer", "nonce"),
    Index(None, "wallet_key_id", "created_at"),
)


#: Payout accounts (Connect): one per seller, opened at the payout processor by
#: ``POST /sellers/me/connect/onboard``.  The readiness flags are the processor's as of the
#: last sync (``POST /sellers/me/connect/sync``); ``sellers.payouts_enabled`` mirrors the
#: flag.  ``auto_payout_minimum_micros`` ``None``: the server's default minimum.
payout_accounts = Table(
    "payout_accounts",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("seller_id", String(40), ForeignKey("sellers.id"), nullable=False, unique=True),
    Column("environment", String(8), nullable=False),
    #: Which processor holds the account (``sandbox``) and its id there.
    Column("processor", String(16), nullable=False),
    Column("processor_account_id", String(64), nullable=False),
    Column("type", String(10), nullable=False),
    Column("country", String(2), nullable=False),
    Column("details_submitted", Boolean, nullable=False, default=False),
    Column("payouts_enabled", Boolean, nullable=False, default=False),
    Column("requirements_due", JSON, nullable=False),
    Column("auto_payout", Boolean, nullable=False, default=True),
    Column("auto_payout_minimum_micros", BigInteger),
    Column("synced_at", Timestamp),
    #: When the processor made the last account event applied (its own clock): an older
    #: event, delivered late, is not applied over it.
    Column("processor_event_at", Timestamp),
    Column("created_at", Timestamp, nullable=False),
    Column("updated_at", Timestamp, nullable=False),
)

#: Withdrawals: seller balance on its way to the payout account.  The money is held by a
#: pending ledger transfer (``transfer_id``, seller balance -> processor payouts) from the
#: moment the withdrawal exists; it is posted when the payout is ``paid`` and voided when
#: it ``failed`` (the money is available again).  ``next_check_at`` is when the worker
#: next asks the processor (``None`` once final).
withdrawals = Table(
    "withdrawals",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("seller_id", String(40), ForeignKey("sellers.id"), nullable=False),
    Column("environment", String(8), nullable=False),
    Column("amount_micros", BigInteger, nullable=False),
    #: ``pending`` -> ``in_transit`` -> ``paid``, or ``failed``.
    Column("status", String(12), nullable=False),
    #: Started by auto payout rather than a withdraw call.
    Column("automatic", Boolean, nullable=False, default=False),
    Column("transfer_id", String(40), nullable=False),
    Column("processor", String(16), nullable=False),
    Column("processor_payout_id", String(64)),
    Column("failure_reason", String(500)),
    Column("next_check_at", Timestamp),
    Column("request_id", String(40)),
    Column("created_at", Timestamp, nullable=False),
    Column("updated_at", Timestamp, nullable=False),
    Index(None, "seller_id", "created_at"),
    Index(None, "status", "next_check_at"),
)

#: The sandbox payout processor's own state (``domain/payouts/sandbox.py``): what a real
#: processor would keep on its side.  Accounts, as the onboarding page left them.
sandbox_payout_accounts = Table(
    "sandbox_payout_accounts",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("environment", String(8), nullable=False),
    Column("type", String(10), nullable=False),
    Column("country", String(2), nullable=False),
    Column("legal_name", String(200)),
    #: ``succeeds`` or ``fails`` (payouts to it fail); ``None`` until given.
    Column("bank_account", String(16)),
    Column("tos_accepted", Boolean, nullable=False, default=False),
    Column("details_submitted", Boolean, nullable=False, default=False),
    Column("payouts_enabled", Boolean, nullable=False, default=False),
    Column("requirements_due", JSON, nullable=False),
    Column("created_at", Timestamp, nullable=False),
    Column("updated_at", Timestamp, nullable=False),
)

#: Onboarding and login links of the sandbox processor: a one-time token (stored as its
#: SHA-256) that expires.
sandbox_account_links = Table(
    "sandbox_account_links",
    metadata,
    Column("token_hash", String(64), primary_key=True),
    Column("account_id", String(40), ForeignKey("sandbox_payout_accounts.id"), nullable=False),
    #: ``onboarding`` or ``login``.
    Column("kind", String(12), nullable=False),
    Column("expires_at", Timestamp, nullable=False),
    Column("used_at", Timestamp),
    Column("created_at", Timestamp, nullable=False),
)

#: Payouts of the sandbox processor; ``reference`` (the withdrawal id) makes creating one
#: idempotent.  They advance by time: ``pending``, ``in_transit``, then ``paid`` (or
#: ``failed`` when the account's bank account is the failing one).
sandbox_payouts = Table(
    "sandbox_payouts",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("account_id", String(40), ForeignKey("sandbox_payout_accounts.id"), nullable=False),
    Column("amount_micros", BigInteger, nullable=False),
    Column("reference", String(40), nullable=False, unique=True),
    Column("status", String(12), nullable=False),
    Column("fails", Boolean, nullable=False),
    Column("created_at", Timestamp, nullable=False),
    Column("updated_at", Timestamp, nullable=False),
)

#: Reconciliation runs (``svc-server reconcile``, and the worker every
#: ``reconcile_interval_seconds``): the books of the chain-facing accounts against the
#: chain.  ``drift_count`` > 0 or an ``error`` is what an operator must look at;
#: ``findings`` is every row of the run's table (``reconcile.findings.Finding``).
reconciliations = Table(
    "reconciliations",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("environment", String(8), nullable=False),
    Column("created_at", Timestamp, nullable=False),
    Column("from_block", BigInteger),
    Column("to_block", BigInteger),
    Column("drift_count", Integer, nullable=False),
    Column("findings", JSON, nullable=False),
    #: Why the run could not compare (the node did not answer...); ``None`` when it did.
    Column("error", Text),
    Index(None, "environment", "created_at"),
)
