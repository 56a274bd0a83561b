"""Everything the sync and async clients share: all of a call except sending and sleeping.

Following httpx's ``BaseClient``, this module owns configuration (base URL, the three
role credentials, environment, timeout, retries), turns an endpoint's
:class:`~svc._spec.RequestSpec` into an :class:`httpx.Request`, and turns what came back
-- a response or a transport exception -- into a model, an error to raise, or a
:class:`Retry` instruction.  ``Client`` and ``AsyncClient`` only run the loop (their
``_request``: prepare the call once, then send, read the outcome, sleep and send again
while it is a ``Retry``), so the two cannot disagree on headers, idempotency, error
mapping or retry decisions.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import attrs
import cattrs
import httpx

from ._convert import _text
from ._errors import (
    APIConnectionError,
    APIError,
    APITimeoutError,
    ApprovalRequired,
    ConfigurationError,
    RateLimitError,
    error_for_status,
)
from ._models import Approval
from ._options import Environment, RequestOptions, Timeout
from ._retry import RetryPolicy, parse_retry_after
from ._spec import RequestSpec, Role, as_model
from ._version import __version__

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_TIMEOUT",
    "BaseClient",
    "Call",
    "Retry",
    "error_from_body",
    "error_from_response",
]

T = TypeVar("T")
#: A flavour's transport, ``httpx`` client and sleep (``AsyncClient``'s or ``Client``'s).
TransportT = TypeVar("TransportT")
HttpClientT = TypeVar("HttpClientT")
SleepT = TypeVar("SleepT")

logger = logging.getLogger("svc")

DEFAULT_BASE_URL = "http://127.0.0.1:8000"
#: Generous because ``pay-url`` probes and pays a third-party URL inside one request.
DEFAULT_TIMEOUT = 60.0
USER_AGENT = f"svc-python/{__version__}"
ENVIRONMENTS: tuple[Environment, ...] = ("test", "live")

#: Role -> (constructor / RequestOptions field, environment variable).
_CREDENTIALS: dict[Role, tuple[str, str]] = {
    Role.OWNER: ("owner_jwt", "SVC_OWNER_JWT"),
    Role.SELLER: ("seller_key", "SVC_SELLER_KEY"),
    Role.WALLET: ("wallet_key", "SVC_WALLET_KEY"),
}
_SNIPPET_CHARS = 200


@attrs.frozen
class Retry:
    """The loop's instruction to wait ``delay`` seconds and send the same request again."""

    delay: float


@attrs.define
class Call(Generic[T]):
    """One logical call across its attempts.

    The request (and so its ``Idempotency-Key``) is built once and re-sent unchanged, which
    is what lets the service recognise a retry as the same operation.
    """

    spec: RequestSpec[T]
    request: httpx.Request
    policy: RetryPolicy
    retries_done: int = 0

    def on_response(self, response: httpx.Response) -> T | Retry:
        """The parsed model for a 2xx; otherwise a retry, or the mapped error raised."""
        if response.is_success:
            return _parse_success(self.spec, response)
        return self.on_error(response)

    def on_error(self, response: httpx.Response) -> Retry:
        """A retry, or the mapped error of a non-2xx ``response`` raised."""
        error = error_from_response(response)
        return self._retry_or_raise(error, error)

    def on_transport_error(self, exc: httpx.RequestError) -> Retry:
        """A retry, or :class:`~svc.APIConnectionError` / ``APITimeoutError`` raised."""
        return self._retry_or_raise(exc, connection_error(exc))

    def _retry_or_raise(self, failure: BaseException, error: Exception) -> Retry:
        delay = self.policy.next_delay(self.retries_done, failure)
        if delay is None:
            if error is failure:
                raise error
            raise error from failure
        self.retries_done += 1
        logger.info(
            "retrying %s %s in %.2fs (retry %d of %d) after %s",
            self.request.method,
            self.request.url.path,
            delay,
            self.retries_done,
            self.policy.max_retries,
            _describe(failure),
        )
        return Retry(delay)


class BaseClient(Generic[TransportT, HttpClientT, SleepT]):
    """Configuration and request building shared by :class:`~svc.Client` and ``AsyncClient``.

    Every argument left ``None`` is read from the environment (``SVC_BASE_URL``,
    ``SVC_OWNER_JWT``, ``SVC_SELLER_KEY``, ``SVC_WALLET_KEY``, ``SVC_ENVIRONMENT``), so the
    same code runs against a laptop server and production by changing variables only.
    ``max_retries`` (default 2) overrides the one in ``retry_policy``, which tunes the
    backoff itself.  ``transport``, ``http_client`` and ``sleep`` are of the client's
    flavour (its type parameters), handed to its :meth:`_open`: the one constructor
    serves both clients.
    """

    def __init__(
        self,
        *,
        base_url: str | None = None,
        owner_jwt: str | None = None,
        seller_key: str | None = None,
        wallet_key: str | None = None,
        environment: Environment | None = None,
        timeout: Timeout | None = DEFAULT_TIMEOUT,
        max_retries: int | None = None,
        default_headers: Mapping[str, str] | None = None,
        retry_policy: RetryPolicy | None = None,
        transport: TransportT | None = None,
        http_client: HttpClientT | None = None,
        sleep: SleepT | None = None,
    ) -> None:
        self._base_url = _check_base_url(base_url or _env("SVC_BASE_URL") or DEFAULT_BASE_URL)
        self._timeout = timeout
        env = environment or _env("SVC_ENVIRONMENT")
        self._defaults = RequestOptions(
            environment=_check_environment(env),
            owner_jwt=owner_jwt or _env("SVC_OWNER_JWT"),
            seller_key=seller_key or _env("SVC_SELLER_KEY"),
            wallet_key=wallet_key or _env("SVC_WALLET_KEY"),
            extra_headers=dict(default_headers) if default_headers else None,
        )
        policy = retry_policy or RetryPolicy()
        if max_retries is not None:
            policy = attrs.evolve(policy, max_retries=max_retries)
        self._retry_policy = policy
        if transport is not None and http_client is not None:
            raise ConfigurationError("pass transport= or http_client=, not both")
        self._open(http_client, transport, sleep)

    def _open(
        self, http_client: HttpClientT | None, transport: TransportT | None, sleep: SleepT | None
    ) -> None:
        """Make the sender and keep the sleep: the flavour's part of the constructor."""
        raise NotImplementedError

    @property
    def base_url(self) -> str:
        return self._base_url

    @property
    def environment(self) -> Environment | None:
        """The ``X-Svc-Environment`` sent by default; ``None`` lets the service decide."""
        return self._defaults.environment

    @property
    def max_retries(self) -> int:
        """Retries after the first try, unless a call's options say otherwise."""
        return self._retry_policy.max_retries

    @property
    def timeout(self) -> Timeout | None:
        return self._timeout

    def __repr__(self) -> str:
        env = f", environment={self.environment!r}" if self.environment else ""
        return f"{type(self).__name__}(base_url={self._base_url!r}{env})"

    # --- building a call --------------------------------------------------------------------

    def _prepare(self, spec: RequestSpec[T], options: RequestOptions | None) -> Call[T]:
        """Resolve options, check credentials and build the request, before any I/O."""
        opts = (options or RequestOptions()).merged_over(self._defaults)
        environment = _check_environment(opts.environment)
        headers = httpx.Headers({"User-Agent": USER_AGENT, "Accept": spec.accept})
        role = _sent_role(spec, opts)
        if role is not None and (not spec.role_optional or _has_credential(role, opts)):
            headers["Authorization"] = f"Bearer {_credential(role, opts)}"
        if environment is not None:
            headers["X-Svc-Environment"] = environment
        if opts.idempotency_key is not None:
            headers["Idempotency-Key"] = opts.idempotency_key
        elif spec.mutating:
            headers["Idempotency-Key"] = str(uuid.uuid4())
        content: bytes | None = None
        if spec.json is not None:
            headers["Content-Type"] = "application/json"
            content = _encode_json(spec.json, keep_null=spec.keep_null)
        for name, value in (opts.extra_headers or {}).items():
            headers[name] = value  # case-insensitive replace: the caller's header wins

        timeout = httpx.Timeout(opts.timeout if opts.timeout is not None else self._timeout)
        request = httpx.Request(
            spec.method,
            self._base_url + _format_path(spec.path, spec.path_params),
            params=spec.query,
            headers=headers,
            content=content,
            extensions={"timeout": timeout.as_dict()},
        )
        policy = self._retry_policy
        if opts.max_retries is not None and opts.max_retries != policy.max_retries:
            policy = attrs.evolve(policy, max_retries=opts.max_retries)
        return Call(spec=spec, request=request, policy=policy)


# --- responses --------------------------------------------------------------------------------


def _parse_success(spec: RequestSpec[T], response: httpx.Response) -> T:
    if response.status_code == 202:
        _raise_if_approval(response)
    try:
        return spec.parse(response)
    except (ValueError, TypeError, KeyError, cattrs.BaseValidationError) as exc:
        text = response.text
        raise APIError(
            f"{spec.method} {spec.path} returned {response.status_code} with a body this SDK "
            f"cannot read ({type(exc).__name__}): {_snippet(text) or '<empty>'}",
            status=response.status_code,
            code="invalid_response",
            request_id=response.headers.get("x-request-id"),
            headers=response.headers,
            body=text,
        ) from exc


def _raise_if_approval(response: httpx.Response) -> None:
    """A payment answered 202 ``approval``: nothing was paid, a person must decide."""
    try:
        body = response.json()
    except ValueError:
        return
    if isinstance(body, dict) and body.get("object") == "approval":
        approval = as_model(Approval)(response)
        raise ApprovalRequired.waiting(approval)


def error_from_response(response: httpx.Response) -> APIError:
    """Map an error response to the :class:`~svc.APIError` subclass for its status.

    The spec's envelope gives code, message, details and request id; anything else (a
    proxy's HTML page, an empty 502) still maps by status, with a message quoting the start
    of the body so the cause is visible.
    """
    body: Any
    try:
        body = response.json()
    except ValueError:
        body = response.text
    return error_from_body(
        response.status_code, body, response.headers, response.reason_phrase, response.text
    )


def error_from_body(
    status: int, body: Any, headers: httpx.Headers, reason: str = "", text: str = ""
) -> APIError:
    """The :class:`~svc.APIError` for ``status`` and a decoded error envelope ``body``
    (also what a streamed answer's final ``error`` line carries)."""
    outer = body if isinstance(body, dict) else {}
    envelope = outer.get("error")
    error = envelope if isinstance(envelope, dict) else {"message": envelope}
    message = _str_or_none(error.get("message"))
    details = error.get("details")
    if not message:
        snippet = _snippet(body if isinstance(body, str) else text)
        message = f"HTTP {status} {reason or 'error'}" + (f": {snippet}" if snippet else "")

    cls = error_for_status(status)
    kwargs: dict[str, Any] = {
        "status": status,
        "code": _str_or_none(error.get("code")),
        "details": details if isinstance(details, dict) else None,
        "request_id": _str_or_none(outer.get("request_id")) or headers.get("x-request-id"),
        "headers": headers,
        "body": body,
    }
    if issubclass(cls, RateLimitError):
        return cls(message, retry_after=parse_retry_after(headers), **kwargs)
    return cls(message, **kwargs)


def connection_error(exc: httpx.RequestError) -> APIConnectionError:
    """The SDK error for a request that got no usable response."""
    try:
        target = f"{exc.request.method} {exc.request.url}"
    except RuntimeError:  # the exception was raised before a request existed
        target = "request"
    detail = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.TimeoutException):
        return APITimeoutError(f"{target} timed out: {detail}")
    return APIConnectionError(f"{target} failed: {detail}")


# --- helpers ----------------------------------------------------------------------------------


def _env(name: str) -> str | None:
    """An environment variable, with an empty value counting as unset."""
    return os.environ.get(name) or None


def _check_base_url(url: str) -> str:
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise ConfigurationError(f"base_url {url!r} is not a valid URL: {exc}") from exc
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ConfigurationError(f"base_url must be an http(s) URL with a host, got {url!r}")
    # Routes are appended as-is, so a base with a path prefix (``.../api``) keeps it.
    return url.rstrip("/")


def _check_environment(value: str | None) -> Environment | None:
    if value is None or value in ENVIRONMENTS:
        return value
    raise ConfigurationError(f"environment must be 'test' or 'live', got {value!r}")


def _sent_role(spec: RequestSpec[Any], opts: RequestOptions) -> Role | None:
    """The role whose credential goes: ``spec.role``, or the first of ``also_roles`` the
    client has a credential for when it has none for ``spec.role``."""
    if spec.role is None or _has_credential(spec.role, opts):
        return spec.role
    return next((role for role in spec.also_roles if _has_credential(role, opts)), spec.role)


def _has_credential(role: Role, opts: RequestOptions) -> bool:
    return bool(getattr(opts, _CREDENTIALS[role][0]))


def _credential(role: Role, opts: RequestOptions) -> str:
    """The credential for ``role``; missing it fails here, before anything is sent."""
    field, env_var = _CREDENTIALS[role]
    value: str | None = getattr(opts, field)
    if not value:
        error = ConfigurationError(
            f"this call needs the {role} credential: pass {field}=... to the client or in "
            f"RequestOptions, or set {env_var}"
        )
        error.missing_credential = str(role)
        raise error
    return value


def _format_path(template: str, params: Mapping[str, str]) -> str:
    """Fill a path template, percent-encoding every segment.

    Encoding ``/`` and refusing empty values means an id such as ``../owners`` or ``""``
    can never turn ``/resources/{id}`` into a different route.
    """
    encoded = {name: quote(_text(name, value), safe="") for name, value in params.items()}
    return template.format(**encoded)


def _json_default(value: Any) -> Any:
    """Decimals in caller-supplied dicts (metadata) go out as exact decimal strings."""
    if isinstance(value, Decimal):
        return format(value, "f")
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _encode_json(body: Mapping[str, Any], *, keep_null: bool = False) -> bytes:
    data = dict(body) if keep_null else {k: v for k, v in body.items() if v is not None}
    return json.dumps(data, default=_json_default, separators=(",", ":")).encode()


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _snippet(text: str) -> str:
    collapsed = " ".join(text.split())
    if len(collapsed) <= _SNIPPET_CHARS:
        return collapsed
    return collapsed[: _SNIPPET_CHARS - 1] + "…"


def _describe(failure: BaseException) -> str:
    if isinstance(failure, APIError):
        return f"{failure.status} {failure.code}"
    return type(failure).__name__
