"""``create_app(settings)``: the whole hosted service as one Starlette application."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import timedelta

import anyio.to_thread
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response

from . import telemetry
from .context import ServerContext
from .domain import approvals, dashboard
from .domain.metered import expire_authorizations
from .domain.open_rails import expire_holds, purge_claims, resolve_unsettled
from .domain.paid_fetch.pending import resolve_pending
from .invariant import InvariantError
from .outbox import run_worker
from .outbox.delivery import drop_abandoned_listeners
from .routes import (
    access,
    buy_page,
    dashboard_money,
    directory,
    discovery,
    handles,
    health,
    listen,
    mcp,
    owners,
    pay_url,
    payouts,
    processor,
    receipts,
    refunds,
    resources,
    sandbox,
    sandbox_checkout,
    sandbox_connect,
    sellers,
    spend,
    top_ups,
    wallet_keys,
    webhooks,
)
from .routes import (
    approvals as approval_routes,
)
from .routes import (
    dashboard as dashboard_routes,
)
from .routes.gates import demo, hosted, rails
from .settings import Settings
from .store import upgrade
from .web import idempotency
from .web.body_timeout import BodyTimeoutMiddleware
from .web.boundary import InputBoundaryMiddleware
from .web.endpoint import Endpoint, routes_for
from .web.errors import ApiError
from .web.metrics import MetricsMiddleware, metrics_route
from .web.request_id import RequestIdMiddleware
from .web.responses import error_response
from .web.routing import IndexedRouter

__all__ = ["create_app", "endpoints", "served"]

log = logging.getLogger("reference_server")


def endpoints(*, sandbox_routes: bool = True) -> list[Endpoint]:
    """Every endpoint of the JSON API, in the order the discovery documents list them; the
    sandbox chain's test-only routes after the others, unless the server is configured
    without them, and ``pay-url`` last."""
    return [
        *owners.ENDPOINTS,
        *dashboard_routes.ENDPOINTS,
        *sellers.ENDPOINTS,
        *resources.ENDPOINTS,
        *directory.ENDPOINTS,
        *payouts.ENDPOINTS,
        *wallet_keys.ENDPOINTS,
        *top_ups.ENDPOINTS,
        *handles.ENDPOINTS,
        *spend.ENDPOINTS,
        *pay_url.ENDPOINTS,
        *approval_routes.ENDPOINTS,
        *access.ENDPOINTS,
        *receipts.ENDPOINTS,
        *refunds.ENDPOINTS,
        *webhooks.ENDPOINTS,
        *listen.ENDPOINTS,
        *(sandbox.ENDPOINTS if sandbox_routes else []),
        pay_url.PAY_URL,
    ]


def served(*, sandbox_routes: bool = True) -> list[Endpoint]:
    """Every endpoint the app serves but the discovery documents' own: the JSON API, the
    gates (the demonstration gate, hosted gates, the open rails a seller's own gate asks),
    the pages for people (buy pages, the sandbox payout processor's), what the card
    processor sends (its webhooks, its people coming back) and the probes.  All
    take the one pipeline (:mod:`.web.endpoint`)."""
    return [
        *endpoints(sandbox_routes=sandbox_routes),
        *demo.ENDPOINTS,
        *hosted.ENDPOINTS,
        *rails.ENDPOINTS,
        *sandbox_connect.ENDPOINTS,
        *approval_routes.PAGES,
        *dashboard_routes.PAGES,
        *dashboard_money.PAGES,
        *buy_page.ENDPOINTS,
        *sandbox_checkout.ENDPOINTS,
        *top_ups.PAGES,
        *processor.ENDPOINTS,
        *health.ENDPOINTS,
    ]


async def _http_exception(request: Request, exc: Exception) -> Response:
    """Starlette's own 404/405 (unknown path, wrong method) in the service's envelope."""
    if not isinstance(exc, HTTPException):
        raise InvariantError("expected isinstance(exc, HTTPException)")
    if exc.status_code == 405:
        error = ApiError(
            "method_not_allowed",
            f"{request.method} is not allowed on {request.url.path}.",
            headers=dict(exc.headers or {}),
        )
    elif exc.status_code == 404:
        error = ApiError("not_found", f"No route {request.method} {request.url.path}.")
    else:
        error = ApiError("bad_request", str(exc.detail))
    return error_response(error, request.state.request_id)


async def _housekeeping(ctx: ServerContext, every_seconds: float = 300) -> None:
    """Purge expired idempotency records and open-rail claims (kept a day, far past the
    authorizations they claim), and release open-rail holds never settled nor released
    (a gate that crashed mid-request) and metered ledger authorizations never captured
    (``metered.AUTHORIZATION_TTL``), and let the live chain decide the settlements
    (gates' and pay-url's) whose outcome nobody could give, now and then, and delete the
    ``svc listen`` endpoints nobody polls any more, and expired dashboard sign-in links
    and sessions; failures wait for the next round."""
    ttl = timedelta(seconds=ctx.settings.idempotency_ttl_seconds)
    chores: list[Callable[[], object]] = [
        lambda: idempotency.purge_expired(ctx.db, now=ctx.now(), ttl=ttl),
        lambda: purge_claims(ctx.db, before=ctx.now() - timedelta(days=1)),
        lambda: expire_holds(
            ctx.db, settings=ctx.settings, now=ctx.now(), notify=ctx.notify_new_events
        ),
        lambda: expire_authorizations(ctx.db, now=ctx.now()),
        lambda: approvals.expire_due(ctx.db, now=ctx.now()),
        lambda: resolve_unsettled(ctx),
        lambda: resolve_pending(ctx),
        lambda: drop_abandoned_listeners(ctx.db, now=ctx.now()),
        lambda: dashboard.purge_expired(ctx.db, now=ctx.now()),
    ]
    while True:
        await anyio.sleep(every_seconds)
        try:
            for chore in chores:
                await anyio.to_thread.run_sync(chore)
        except Exception:
            log.exception("housekeeping failed")


def create_app(settings: Settings | None = None) -> Starlette:
    settings = settings or Settings.from_env()
    ctx = ServerContext(settings)
    tools = mcp.McpService(max_body_bytes=settings.max_body_bytes)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if settings.auto_migrate:
            await anyio.to_thread.run_sync(upgrade, ctx.db)
            await anyio.to_thread.run_sync(ctx.load_secrets)
            await anyio.to_thread.run_sync(ctx.demo_resources)
        try:
            async with tools.running(), anyio.create_task_group() as tasks:
                tasks.start_soon(_housekeeping, ctx)
                if settings.worker_enabled:
                    tasks.start_soon(run_worker, ctx)
                yield
                tasks.cancel_scope.cancel()
        finally:
            ctx.db.dispose()

    served_here = served(sandbox_routes=settings.sandbox_enabled)
    listed = [ep for ep in served_here if ep.contract.listed]
    app = Starlette(
        # The body deadline sits inside the request id (its 408 carries the id) and
        # outside everything that reads the body; the input boundary reads no body.
        middleware=[
            Middleware(MetricsMiddleware),
            Middleware(RequestIdMiddleware),
            *([Middleware(telemetry.tracing_middleware(ctx.db))] if settings.tracing else []),
            Middleware(BodyTimeoutMiddleware, timeout_seconds=settings.body_timeout_seconds),
            Middleware(InputBoundaryMiddleware),
        ],
        exception_handlers={HTTPException: _http_exception},
    )
    # Starlette's router, indexed by path (web.routing says why); the lifespan is the
    # router's, as Starlette's own constructor passes it.
    routes = routes_for([*served_here, *tools.endpoints(), *discovery.endpoints(listed)])
    scrape = metrics_route(ctx)
    app.router = IndexedRouter(routes if scrape is None else [*routes, scrape], lifespan=lifespan)
    app.state.ctx = ctx
    return app
