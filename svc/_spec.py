"""What one endpoint call is, independent of how it is sent.

An endpoint function (see ``_endpoints``) returns a :class:`RequestSpec`: method, path
template, which credential it needs, the JSON body, and how to read a successful
response.  The sync and async clients both send the same spec, so an endpoint is written
once and cannot drift between the two.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

import attrs
import httpx

from .wire import structure

__all__ = ["RequestSpec", "Role", "as_json_object", "as_model", "as_text"]

T = TypeVar("T")


class Role(enum.StrEnum):
    """Which credential a route takes: owner JWT, seller key (``svc_sk_*``) or wallet key
    (``svc_vw_*``); ``None`` where a role is optional is a public route.

    The one definition, for the SDK choosing what to send and the reference server
    deciding what to accept.  A :class:`~enum.StrEnum`, so a member equals its wire word
    (``Role.OWNER == "owner"``) and is a typed, iterable set of exactly three.
    """

    OWNER = "owner"
    SELLER = "seller"
    WALLET = "wallet"

    @property
    def credential_hint(self) -> str:
        """The credential, as an error message names it."""
        return _CREDENTIAL_HINTS[self]


_CREDENTIAL_HINTS = {
    Role.OWNER: "an owner JWT",
    Role.SELLER: "a seller key (svc_sk_*)",
    Role.WALLET: "a wallet key (svc_vw_*)",
}

#: Reads the body of a 2xx response; raising ``ValueError``/``TypeError`` (or a cattrs
#: validation error) turns into an :class:`~svc.APIError` with code ``invalid_response``.
Parser = Callable[[httpx.Response], T]


@attrs.frozen(kw_only=True)
class RequestSpec(Generic[T]):
    """One call to the service, before credentials, headers and retries are applied.

    ``path`` is a template such as ``/resources/{id}``; ``path_params`` fill it and are
    percent-encoded by the client, so an id can never reach another route.  Top-level
    ``None`` values in ``json`` are dropped, which is how optional fields are left out,
    unless ``keep_null`` is set.
    """

    method: str
    path: str
    parse: Parser[T]
    role: Role | None = None
    #: Send the ``role`` credential when the client has one, and nothing otherwise
    #: (a public route that answers more precisely for a known caller).
    role_optional: bool = False
    #: Other roles whose credential the route takes as well: sent, in this order, when the
    #: client has no ``role`` credential (a receipt reads for its payer or its seller).
    also_roles: tuple[Role, ...] = ()
    path_params: Mapping[str, str] = attrs.field(factory=dict)
    json: Mapping[str, Any] | None = None
    query: Mapping[str, str] | None = None
    #: Send top-level ``None`` values in ``json`` as JSON ``null`` instead of dropping
    #: them: for a ``PATCH`` where ``null`` means something (``events: null`` = all
    #: events) and whose endpoint function puts only the fields given in ``json``.
    keep_null: bool = False
    accept: str = "application/json"

    @property
    def mutating(self) -> bool:
        """Calls that change state get an idempotency key so retries are safe."""
        return self.method.upper() in {"POST", "PATCH", "PUT", "DELETE"}


def as_model(cls: type[T]) -> Parser[T]:
    """Read a JSON object into one of the ``svc`` models, ignoring unknown fields.

    A body without ``request_id`` takes it from the ``X-Request-Id`` header, so the id
    to quote to support is on the result either way.
    """

    def parse(response: httpx.Response) -> T:
        data = as_json_object(response)
        if data.get("request_id") is None and "x-request-id" in response.headers:
            data["request_id"] = response.headers["x-request-id"]
        return structure(data, cls)

    return parse


def as_json_object(response: httpx.Response) -> dict[str, Any]:
    """The body as a JSON object; anything else is not what the service sends."""
    data = response.json()
    if not isinstance(data, dict):
        raise TypeError(f"expected a JSON object, got {type(data).__name__}")
    return data


def as_text(response: httpx.Response) -> str:
    """The body as text (the ``llms.txt`` discovery documents)."""
    return response.text
