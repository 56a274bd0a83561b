"""Stripe's error envelope, raised by the double's handlers and rendered by its app."""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

__all__ = ["StripeError", "error_response"]


class StripeError(Exception):
    """An answer Stripe would give: ``status`` with ``{"error": {type, code, message, param}}``."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body: dict[str, Any] = {
            "error": {"type": type, "code": code, "message": message, "param": param}
        }


def error_response(err: StripeError) -> JSONResponse:
    return JSONResponse(err.body, status_code=err.status)


def missing(param: str) -> StripeError:
    return StripeError(
        400, f"Missing required param: {param}.", code="parameter_missing", param=param
    )


def no_such(kind: str, ident: str, param: str = "id") -> StripeError:
    return StripeError(404, f"No such {kind}: '{ident}'", code="resource_missing", param=param)


def balance_insufficient() -> StripeError:
    return StripeError(
        400,
        "You have insufficient available funds in your Stripe account.",
        code="balance_insufficient",
    )
