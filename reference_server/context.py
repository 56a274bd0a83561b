"""What every request handler may reach: settings, database, limiter, server secrets."""

from __future__ import annotations

import contextlib
import functools
import secrets
from collections.abc import Callable
from datetime import datetime
from typing import Any

import anyio
import anyio.from_thread
from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError

from . import receipt_tokens
from .crypto import SecretBox, new_data_key, new_evm_key
from .invariant import InvariantError
from .settings import Settings
from .store import Database
from .store import tables as t
from .web.ratelimit import RateLimiter

__all__ = ["ServerContext"]

#: ``server_secrets`` row holding the sealed test hot-wallet key.
_TEST_HOT_WALLET = "pay_url_hot_wallet_test"
#: The keys approval links' tokens and their pages' CSRF tokens are made with
#: (:mod:`.domain.approvals`): loaded up front, as a request's transaction cannot create one.
APPROVAL_LINKS = "approval_links"
APPROVAL_CSRF = "approval_csrf"
APPROVAL_SECRETS = (APPROVAL_LINKS, APPROVAL_CSRF)


def _token() -> str:
    return secrets.token_urlsafe(48)


class ServerContext:
    def __init__(self, settings: Settings, db: Database | None = None) -> None:
        self.settings = settings
        self.db = db or Database(
            settings.database_url,
            pool_size=settings.database_pool_size,
            max_overflow=settings.database_max_overflow,
        )
        self.limiter = RateLimiter(settings.rate_limit_storage)
        self._demo: dict[str, str] | None = None
        self._wakeup: anyio.Event | None = None
        self._secrets: dict[str, str] = {}
        #: The group-commit queues of the routes that group (``strategies.Grouped``),
        #: by route; used on the event loop only.
        self.group_commits: dict[str, Any] = {}

    def now(self) -> datetime:
        return self.settings.clock()

    @functools.cached_property
    def jwt_secret(self) -> str:
        """The key new owner JWTs are signed with: configured, or (outside production)
        generated once and kept in the database so that every process (and the
        ``svc-server owners create`` command) agrees on it.  Threads that race to read it
        first get the same one: the database keeps the first stored."""
        return self.settings.jwt_secret or self._stored_key("owner_jwt", _token)

    @property
    def jwt_secrets(self) -> tuple[str, ...]:
        """Every key an owner JWT may be signed with: the current one first, then the
        previous ones still accepted during a rotation."""
        return (self.jwt_secret, *self.settings.jwt_previous_secrets)

    @functools.cached_property
    def box(self) -> SecretBox:
        """Seals secrets at rest (see :mod:`reference_server.crypto`)."""
        key = self.settings.data_key or self._stored_key("data_key", new_data_key)
        return SecretBox(key, *self.settings.data_previous_keys)

    def demo_resources(self) -> dict[str, str]:
        """``{environment: id}`` of the ``/demo/echo`` resource, seeded on first use."""
        if self._demo is None:
            from .domain.demo_gate import ensure_demo_resources

            for attempt in range(3):
                try:
                    with self.db.write() as conn:
                        self._demo = ensure_demo_resources(conn, self.now())
                    break
                except IntegrityError:  # another process seeded at the same moment
                    if attempt == 2:
                        raise
        if self._demo is None:
            raise InvariantError("expected self._demo is not None")
        return self._demo

    @property
    def wakeup(self) -> anyio.Event:
        """Set when this process commits new events, so its delivery worker need not wait
        for the next poll (other processes' workers find them by polling)."""
        if self._wakeup is None:
            self._wakeup = anyio.Event()
        return self._wakeup

    def reset_wakeup(self) -> None:
        self._wakeup = anyio.Event()

    def notify_new_events(self) -> None:
        """From a request's worker thread, after its transaction committed events."""
        event = self._wakeup
        if event is None:
            return
        with contextlib.suppress(RuntimeError):  # not in an anyio worker thread: polling will do
            anyio.from_thread.run_sync(event.set)

    def secret(self, name: str, generate: Callable[[], str] = _token) -> str:
        """A named server secret (e.g. the key MPP challenges are signed with), generated
        on first use and kept in the database so that every process agrees on it; read
        once per process.  Blocking: call it from a worker thread."""
        found = self._secrets.get(name)
        if found is None:
            found = self._secrets[name] = self._stored_secret(name, generate)
        return found

    def load_secrets(self) -> None:
        """Read (or create) the server's secrets up front, outside any request transaction
        (SQLite has one writer: a request's transaction cannot create one in another).

        The test hot wallet's key is made and stored here but opened only when used: a
        development database moved to production without its old data key still starts,
        and only a test ``pay-url`` fails, naming the unknown key."""
        box = self.box
        _ = self.jwt_secret, self.secret(_TEST_HOT_WALLET, lambda: box.seal(new_evm_key()))
        for name in APPROVAL_SECRETS:
            self.secret(name)
        receipt_tokens.load(self)

    def replace_secret(self, name: str, value: str) -> None:
        """This process's copy of a secret just rewritten in the database (a rotation)."""
        self._secrets[name] = value

    @functools.cached_property
    def test_hot_wallet_key(self) -> str:
        """The test environment's ``pay-url`` hot-wallet key: generated once, kept in the
        database sealed with :attr:`box`, so that every process signs as one address."""
        self.load_secrets()  # the sealed key, read once (before a transaction opens)
        return self.box.open(self._secrets[_TEST_HOT_WALLET])

    def _stored_key(self, name: str, generate: Callable[[], str]) -> str:
        """The owner-JWT or data key kept in the database: a convenience for laptops
        only.  Settings already refuse production without configured keys; this is the
        last guard, so that production never stores a key beside what it protects."""
        if self.settings.production:
            raise RuntimeError(f"production never generates its {name}; configure it")
        return self._stored_secret(name, generate)

    def _stored_secret(self, name: str, generate: Callable[[], str] = _token) -> str:
        q = select(t.server_secrets.c.value).where(t.server_secrets.c.name == name)
        with self.db.read() as conn:
            value = conn.execute(q).scalar()
        if value is not None:
            return str(value)
        try:
            with self.db.write() as conn:
                conn.execute(
                    insert(t.server_secrets).values(
                        name=name, value=generate(), created_at=self.now()
                    )
                )
        except IntegrityError:
            pass  # another process created it first; use theirs
        with self.db.read() as conn:
            return str(conn.execute(q).scalar_one())
