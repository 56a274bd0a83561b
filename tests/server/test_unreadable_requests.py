"""A request the HTTP parser cannot read is still answered in the service's envelope.

uvicorn answers what h11 refuses with a plain-text 400 and no request id;
``serving.build_server``'s protocol answers ``400 bad_request`` like every other error
(JSON envelope, ``request_id`` in the body and ``X-Request-Id``), then closes.  Driven
with raw sockets against a real server, since no HTTP client sends these.
"""

from __future__ import annotations

import json

import pytest

from reference_server.serving import MAX_HEAD_BYTES
from reference_server.web.errors import CODES

from ..support import LiveServer
from .raw_http import exchange

UNREADABLE = {
    "garbage request line": b"GARBAGE\r\n\r\n",
    "no Host header": b"GET /health HTTP/1.1\r\n\r\n",
    "Content-Length not a number": (
        b"POST /owners HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n"
    ),
    "two different Content-Lengths": (
        b"POST /owners HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n"
    ),
    "unsupported Transfer-Encoding": (
        b"POST /owners HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n"
    ),
    "header line without a colon": b"GET /health HTTP/1.1\r\nHost: x\r\nNoColon\r\n\r\n",
    "space before the colon": b"GET /health HTTP/1.1\r\nHost : x\r\n\r\n",
    "bad chunk size": (
        b"POST /owners HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"
    ),
}


def assert_refused(answer: bytes, status: int, code: str) -> None:
    """``answer`` is the envelope with ``code`` at ``status``, framed, with its id, closing."""
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines)}
    assert status_line.startswith(f"HTTP/1.1 {status}"), answer[:300]
    assert headers["content-type"] == "application/json"
    assert headers["connection"] == "close"
    assert int(headers["content-length"]) == len(body)
    error = json.loads(body)
    assert error["ok"] is False and error["error"]["code"] == code
    assert error["request_id"].startswith("req_")
    assert headers["x-request-id"] == error["request_id"]


@pytest.mark.parametrize("raw", UNREADABLE.values(), ids=UNREADABLE.keys())
def test_an_unreadable_request_is_answered_in_the_envelope(server: LiveServer, raw: bytes) -> None:
    assert_refused(exchange(server, raw), 400, "bad_request")


def test_a_head_too_large_is_answered_431(server: LiveServer) -> None:
    """More than ``MAX_HEAD_BYTES`` of a head and still no end to it."""
    raw = b"GET /health HTTP/1.1\r\nHost: x\r\nCookie: " + b"a" * (MAX_HEAD_BYTES + 1)
    answer = exchange(server, raw)
    assert_refused(answer, 431, "headers_too_large")
    message = json.loads(answer.partition(b"\r\n\r\n")[2])["error"]["message"]
    assert f"{MAX_HEAD_BYTES // 1024} KiB" in message  # the bound, said where it is set
    assert message != CODES["headers_too_large"][1]


def test_the_next_request_s_head_too_large_is_answered_431_after_the_first_is_served(
    server: LiveServer,
) -> None:
    first = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
    second = b"GET /health HTTP/1.1\r\nHost: x\r\nCookie: " + b"a" * (MAX_HEAD_BYTES + 1)
    answer = exchange(server, first + second)
    served, _, rest = answer.partition(b"HTTP/1.1 431")
    assert served.startswith(b"HTTP/1.1 200")
    assert_refused(b"HTTP/1.1 431" + rest, 431, "headers_too_large")


def test_a_bad_chunk_after_a_long_body_is_400_not_431(server: LiveServer) -> None:
    """Much unparsed data while a body is read is not a head too large."""
    head = b"POST /owners HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    body = b"zz\r\n" + b"a" * (2 * MAX_HEAD_BYTES)
    raw = head + b"Transfer-Encoding: chunked\r\n\r\n" + body
    assert_refused(exchange(server, raw), 400, "bad_request")


def test_a_large_head_within_the_bound_is_served(server: LiveServer) -> None:
    cookie = b"a" * (MAX_HEAD_BYTES // 2)
    raw = b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\nCookie: " + cookie + b"\r\n\r\n"
    assert exchange(server, raw).startswith(b"HTTP/1.1 200")


def test_a_readable_request_on_the_same_server_is_served(server: LiveServer) -> None:
    answer = exchange(server, b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 200"), answer[:300]
