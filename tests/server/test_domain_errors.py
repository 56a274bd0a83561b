"""The one mapping from domain errors to HTTP (``reference_server.web.errors.http_error``)."""

from __future__ import annotations

import logging

import pytest

from reference_server.domain.errors import DomainError, PaymentRefused
from reference_server.web.errors import CODES, ApiError, http_error
from reference_server.web.responses import Reply, error_response


@pytest.mark.parametrize("code", sorted(CODES))
def test_every_code_maps_to_its_status(code: str) -> None:
    error = http_error(DomainError(code, "m", details={"k": "v"}))
    assert (error.code, error.status, error.message) == (code, CODES[code][0], "m")
    assert error.details == {"k": "v"} and error.headers == {}


def test_retry_after_seconds_becomes_the_header() -> None:
    error = http_error(DomainError("conflict", "busy", retry_after_seconds=1))
    assert (error.status, error.headers) == (409, {"Retry-After": "1"})


def test_an_api_error_passes_through_unchanged() -> None:
    raised = ApiError("rate_limited", "slow down", headers={"Retry-After": "7"})
    assert http_error(raised) is raised
    assert isinstance(raised, DomainError)  # so one `except DomainError` catches both


def test_a_payment_refusal_is_a_402_domain_error() -> None:
    refused = PaymentRefused("budget_exceeded", "over budget", details={"amount": "1.00"})
    assert isinstance(refused, DomainError) and http_error(refused).status == 402


def test_an_undocumented_code_is_a_logged_500(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="reference_server"):
        error = http_error(DomainError("no_such_code", "secret detail"))
    assert (error.code, error.status) == ("internal_error", 500)
    assert "secret detail" not in error.message
    assert "no_such_code" in caplog.text


def test_the_envelope_is_the_same_for_both_kinds() -> None:
    """A domain error and the ApiError a route would have raised answer the same bytes."""
    domain = DomainError("idempotency_in_progress", "wait", details={"a": 1}, retry_after_seconds=1)
    api = ApiError(
        "idempotency_in_progress", "wait", details={"a": 1}, headers={"Retry-After": "1"}
    )
    one, two = error_response(domain, "req_1"), error_response(api, "req_1")
    assert (one.status_code, one.body, one.headers.items()) == (
        two.status_code,
        two.body,
        two.headers.items(),
    )
    assert Reply.from_error(domain) == Reply.from_error(api)
