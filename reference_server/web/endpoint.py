"""A route's declaration: every route of the app is an :class:`Endpoint` served by
:func:`routes_for` through the one pipeline (:mod:`.pipeline`; a test checks the
Starlette route table for it), run the way its strategy says (:mod:`.strategies`).
"""

from __future__ import annotations

from functools import partial
from typing import Literal

import attrs
from starlette.routing import Route

from ..invariant import InvariantError
from .auth import AnyCredential, OptionalAuth, Role
from .call import AsyncHandler, Call, Handler
from .paging import PAGED
from .pipeline import API_PREFIX, dispatch
from .sdk import Sdk
from .strategies import Flow, Grouped, Strategy, Transaction
from .validate import FOREIGN_JSON, RAW_BODY, Unread

__all__ = [
    "API_PREFIX",
    "FOREIGN_JSON",
    "RAW_BODY",
    "Call",
    "Contract",
    "Endpoint",
    "Flow",
    "Grouped",
    "OptionalAuth",
    "Page",
    "Transaction",
    "routes_for",
]

Idempotency = Literal["required", "optional", "none"]


@attrs.frozen
class Page:
    """A page for people: it answers HTML (its refusals too), not the JSON envelope."""

    #: The path holds a secret (a one-time link's token): the access log shows the
    #: route's template instead (:mod:`.access_log`).
    secret_path: bool = False


@attrs.frozen(kw_only=True)
class Contract:
    """What the documents say of an endpoint (:mod:`.openapi`)."""

    #: The answer's shape (a model exported by :mod:`svc`); several classes when the
    #: route answers one of several shapes (``oneOf``).
    response: type | tuple[type, ...] | None = None
    status: int = 200
    #: Error codes the handler itself may answer, beyond those the pipeline answers for
    #: every route of its kind (:mod:`.openapi` adds those).
    errors: tuple[str, ...] = ()
    #: The code a body refused by its shape is answered with (the gate rails keep their
    #: documented 400 ``invalid_rail_request``, which svc_asgi reads as a bad credential).
    invalid_body: str = "validation_error"
    #: By default the handler's first doc line.
    summary: str | None = None
    #: Listed in the discovery documents (the API); probes, pages and the documents are not.
    listed: bool = True
    #: A gate: it takes a payment in its headers (``X-Svc-Receipt``, x402's
    #: ``PAYMENT-SIGNATURE``, MPP's ``Authorization: Payment``) and answers 402 with the
    #: challenges until paid; the document declares those headers.
    gate: bool = False


@attrs.frozen(kw_only=True)
class Endpoint:
    method: str
    path: str
    #: ``def (Call) -> Reply`` run by :class:`Transaction` or :class:`Grouped`;
    #: ``async def (Call) -> Reply | Response`` run by :class:`Flow`.
    handler: Handler | AsyncHandler
    #: A page for people; it implies the defaults every page takes (a :class:`Flow`, not
    #: listed, a POST's form read by the handler: :data:`RAW_BODY`).
    page: Page | None = None
    #: How the request runs (:mod:`.strategies`).
    run: Strategy = attrs.field(
        default=attrs.Factory(lambda ep: Flow() if ep.page else Transaction(), takes_self=True)
    )
    #: Who may call: a role, :class:`OptionalAuth`, :class:`AnyCredential` or ``None``
    #: (anyone).
    auth: Role | OptionalAuth | AnyCredential | None = None
    idempotency: Idempotency = "none"
    #: The body's shape (a class of :mod:`svc.bodies`), read by the pipeline before the
    #: handler runs, :data:`RAW_BODY` or :data:`FOREIGN_JSON`; ``None``: the route takes
    #: no body.
    body: type | Unread | None = attrs.field(
        default=attrs.Factory(
            lambda ep: RAW_BODY if ep.page and ep.method != "GET" else None, takes_self=True
        )
    )
    #: Which ``Settings`` attribute holds this route's rate limit; ``None``: not limited
    #: (health probes and the discovery documents).
    rate_limit: str | None = "rate_limit"
    contract: Contract = attrs.field(
        default=attrs.Factory(lambda ep: Contract(listed=ep.page is None), takes_self=True)
    )
    #: How the SDK calls the route (:class:`.sdk.Sdk`; several: one route, several SDK
    #: methods); ``None``: the SDK does not.  ``python -m reference_server.sdk_codegen``
    #: writes the SDK's request specs and namespaces from it.
    sdk: Sdk | tuple[Sdk, ...] | None = None

    @property
    def role(self) -> Role | None:
        """The role a credential must have, whether or not one is required."""
        if isinstance(self.auth, AnyCredential):
            return self.auth.roles[0]
        return self.auth.role if isinstance(self.auth, OptionalAuth) else self.auth

    @property
    def roles(self) -> tuple[Role, ...]:
        """Every role whose credential the route takes."""
        if isinstance(self.auth, AnyCredential):
            return self.auth.roles
        return () if self.role is None else (self.role,)

    @property
    def body_class(self) -> type | None:
        """The body's declared class; ``None`` for a marker or no body."""
        return self.body if isinstance(self.body, type) else None

    @property
    def writes(self) -> bool:
        return self.method != "GET"

    @property
    def paged(self) -> bool:
        """A list route: its handler is wrapped by ``paging.paged`` (``limit``,
        ``starting_after`` in; ``has_more`` out)."""
        return bool(getattr(self.handler, PAGED, False))


def routes_for(endpoints: list[Endpoint]) -> list[Route]:
    """One Starlette route per path (bare and under ``/api``), dispatching on method so
    that a wrong method is a 405 with the right ``Allow`` header.  Every route's endpoint
    is :func:`.pipeline.dispatch` bound to its methods: nothing else serves a request."""
    by_path: dict[str, dict[str, Endpoint]] = {}
    for ep in endpoints:
        ep.run.check(ep)
        if ep.page and (
            not isinstance(ep.run, Flow)
            or ep.contract.listed
            or ep.body is not (RAW_BODY if ep.writes else None)
        ):
            raise InvariantError(
                f"{ep.method} {ep.path}: a page runs as a Flow, is not listed, and reads "
                "its own form (RAW_BODY)"
            )
        methods = by_path.setdefault(ep.path, {})
        if ep.method in methods:
            raise InvariantError(f"{ep.method} {ep.path} is declared twice")
        methods[ep.method] = ep
    routes = []
    for path, methods in by_path.items():
        serve = partial(dispatch, methods)
        for prefix in ("", API_PREFIX):
            routes.append(Route(prefix + path, serve, methods=list(methods)))
    return routes
