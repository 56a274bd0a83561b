"""The OpenAPI 3.1 document, generated from the route table and the shapes it declares.

Each :class:`~.endpoint.Endpoint` says its credential, idempotency, body shape
(:mod:`svc.bodies`), answer model (:mod:`svc`) and the error codes its handler may answer;
the codes the pipeline answers for every route of a kind (a bad credential, a bad body, a
rate limit) are added here, from the same facts the pipeline acts on.  Schemas come from
:func:`svc.schema.json_schema`, so validation, SDK and document share one definition.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable
from typing import Any

from svc import ErrorBody, __version__
from svc.schema import json_schema

from . import paging
from .auth import OptionalAuth, Role
from .endpoint import FOREIGN_JSON, RAW_BODY, Endpoint
from .errors import CODES

__all__ = ["document", "error_codes", "summary"]

#: What any route may answer, whatever it is: the input boundary and the pipeline's net.
_ANY_ROUTE = ("invalid_header", "invalid_path", "duplicate_header", "internal_error", "not_ready")
_READS_BODY = (
    "unsupported_media_type",
    "invalid_json",
    "duplicate_json_key",
    "payload_too_large",
    "request_timeout",
    "validation_error",
)
_AUTHENTICATED = (
    "invalid_environment",
    "unauthenticated",
    "invalid_credential",
    "wrong_credential",
    "environment_mismatch",
)
_IDEMPOTENT = ("invalid_idempotency_key", "idempotency_in_progress", "idempotency_key_reused")

_ROLE_SCHEMES: dict[str, dict[str, Any]] = {
    Role.OWNER: {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "JWT",
        "description": "The owner's JWT (POST /owners answers it): sellers, webhooks, wallet keys.",
    },
    Role.SELLER: {
        "type": "http",
        "scheme": "bearer",
        "description": "A seller key, svc_sk_<env>_...: /sellers/me/*, /resources.",
    },
    Role.WALLET: {
        "type": "http",
        "scheme": "bearer",
        "description": (
            "A wallet key, svc_vw_<env>_... (or the x-svc-vw-key header): /spend/*, /pay."
        ),
    },
}

#: 1 to 255 printable ASCII characters, no space at either end (``idempotency.validate_key``).
_KEY_PATTERN = r"^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$"
_PATH_PARAM = re.compile(r"\{([a-z_]+)\}")


def summary(ep: Endpoint) -> str:
    """The endpoint's one-line summary: declared, or the handler's first doc line."""
    if ep.contract.summary is not None:
        return ep.contract.summary
    doc = inspect.getdoc(ep.handler) or ep.handler.__name__.replace("_", " ")
    return doc.splitlines()[0]


def error_codes(ep: Endpoint) -> list[str]:
    """Every error code ``ep`` may answer, the pipeline's and its handler's, in the order
    of :data:`~.errors.CODES` (so by status)."""
    codes: set[str] = set(_ANY_ROUTE) | set(ep.contract.errors)
    if ep.rate_limit is not None:
        codes.add("rate_limited")
    if ep.writes and ep.body is not RAW_BODY:
        codes.update(_READS_BODY)
    if ep.body_class is not None:
        codes.discard("validation_error")
        codes.add(ep.contract.invalid_body)
    if ep.role is not None:
        codes.update(_AUTHENTICATED)
    if ep.idempotency != "none":
        codes.update(_IDEMPOTENT)
    if ep.idempotency == "required":
        codes.add("idempotency_key_required")
    if ep.paged:
        codes.add("validation_error")
    if _PATH_PARAM.search(ep.path):
        codes.add("not_found")
    return [code for code in CODES if code in codes]


#: What a gate takes a payment in (MPP's ``Authorization: Payment`` is a credential header,
#: which OpenAPI leaves to security schemes: it is named in the 402's description).
def _param(
    name: str, where: str, schema: dict[str, Any], description: str = "", *, required: bool = False
) -> dict[str, Any]:
    """One OpenAPI parameter (``description`` left out when empty)."""
    param: dict[str, Any] = {"name": name, "in": where, "required": required}
    if description:
        param["description"] = description
    return {**param, "schema": schema}


_GATE_HEADERS: list[dict[str, Any]] = [
    _param(
        "X-Svc-Receipt",
        "header",
        {"type": "string", "maxLength": 200},
        "A receipt id for this resource (from POST /pay or a paid gate).",
    ),
    _param(
        "PAYMENT-SIGNATURE",
        "header",
        {"type": "string"},
        "An x402 v2 payment payload (base64 JSON) answering the 402's PAYMENT-REQUIRED challenge.",
    ),
]
#: What a gate's 402 carries beside the JSON envelope.
_CHALLENGE_HEADERS = {
    "PAYMENT-REQUIRED": {
        "description": "The x402 v2 challenge (base64 JSON), once the seller enabled payments.",
        "schema": {"type": "string"},
    },
    "WWW-Authenticate": {
        "description": "The MPP challenge (Payment ...); answer with Authorization: Payment.",
        "schema": {"type": "string"},
    },
}


def _filter_parameter(spec: paging.Filter) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    if spec.choices:
        schema["enum"] = list(spec.choices)
    else:
        schema.update(minLength=1, maxLength=spec.max_length)
        if spec.pattern is not None:
            schema["pattern"] = spec.pattern
    return _param(spec.name, "query", schema, spec.description)


def _parameters(ep: Endpoint) -> list[dict[str, Any]]:
    path_schema = {"type": "string", "minLength": 1, "maxLength": 200}
    params = [
        _param(name, "path", path_schema, required=True) for name in _PATH_PARAM.findall(ep.path)
    ]
    if ep.paged:
        limit = {
            "type": "integer",
            "minimum": 1,
            "maximum": paging.MAX_LIMIT,
            "default": paging.DEFAULT_LIMIT,
        }
        cursor = {"type": "string", "minLength": 1, "maxLength": 40}
        params += [
            _param("limit", "query", limit, "How many items, 1 to 100."),
            _param(
                "starting_after", "query", cursor, "The id of the last item of the previous page."
            ),
        ]
        params += [_filter_parameter(spec) for spec in getattr(ep.handler, paging.FILTERS, ())]
    if ep.idempotency != "none":
        key = {"type": "string", "minLength": 1, "maxLength": 255, "pattern": _KEY_PATTERN}
        params.append(
            _param(
                "Idempotency-Key",
                "header",
                key,
                "Any unique string (a UUID), sent again on a retry: the request is then "
                "carried out once and its answer replayed.",
                required=ep.idempotency == "required",
            )
        )
    if ep.contract.gate:
        params += _GATE_HEADERS
    environment = {"type": "string", "enum": ["test", "live"]}
    params.append(
        _param(
            "X-Svc-Environment",
            "header",
            environment,
            "test or live; a key's own environment wins and must agree.",
        )
    )
    return params


def _responses(ep: Endpoint, components: dict[str, Any]) -> dict[str, Any]:
    success: dict[str, Any] = {"description": summary(ep)}
    if isinstance(ep.contract.response, tuple):
        shapes = [json_schema(shape, components) for shape in ep.contract.response]
        success["content"] = {"application/json": {"schema": {"oneOf": shapes}}}
    elif ep.contract.response is not None:
        schema = json_schema(ep.contract.response, components)
        success["content"] = {"application/json": {"schema": schema}}
    responses: dict[str, Any] = {str(ep.contract.status): success}
    by_status: dict[int, list[str]] = {}
    for code in error_codes(ep):
        by_status.setdefault(CODES[code][0], []).append(code)
    error_schema = json_schema(ErrorBody, components)
    for status, codes in sorted(by_status.items()):
        lines = [f"- `{code}`: {CODES[code][1]}" for code in codes]
        responses[str(status)] = {
            "description": "\n".join(lines),
            "content": {"application/json": {"schema": error_schema}},
        }
        if status == 402 and ep.contract.gate:
            responses["402"]["headers"] = _CHALLENGE_HEADERS
    return responses


def _operation(ep: Endpoint, components: dict[str, Any]) -> dict[str, Any]:
    op: dict[str, Any] = {
        "operationId": f"{ep.method.lower()}{_operation_name(ep.path)}",
        "summary": summary(ep),
        "parameters": _parameters(ep),
        "responses": _responses(ep, components),
    }
    doc = inspect.getdoc(ep.handler)
    if doc and "\n" in doc:
        op["description"] = doc
    if ep.role is None:
        op["security"] = []
    else:
        op["security"] = [{role.value: []} for role in ep.roles] + (
            [{}] if isinstance(ep.auth, OptionalAuth) else []
        )
    if ep.body_class is not None:
        op["requestBody"] = {
            "required": True,
            "content": {
                "application/json": {"schema": json_schema(ep.body_class, components, request=True)}
            },
        }
    elif ep.body is FOREIGN_JSON:
        op["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": {"type": "object"}}},
        }
    return op


def _operation_name(path: str) -> str:
    words = re.split(r"[^A-Za-z0-9]+", _PATH_PARAM.sub(r"by_\1", path))
    return "".join(word[:1].upper() + word[1:] for word in words if word)


def document(endpoints: Iterable[Endpoint], base_url: str) -> dict[str, Any]:
    """The whole document for ``endpoints`` served at ``base_url``."""
    components: dict[str, Any] = {}
    paths: dict[str, dict[str, Any]] = {}
    for ep in endpoints:
        paths.setdefault(ep.path, {})[ep.method.lower()] = _operation(ep, components)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "svc",
            "version": __version__,
            "description": "Payments for agents: accept and spend on x402, MPP and the ledger. "
            "Errors answer {ok: false, error: {code, message, details}, request_id}.",
        },
        "servers": [{"url": base_url}],
        "paths": paths,
        "components": {
            "schemas": dict(sorted(components.items())),
            "securitySchemes": {role.value: _ROLE_SCHEMES[role] for role in Role},
        },
    }
