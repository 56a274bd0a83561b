"""Slow clients are cut off: a real server (built by ``serving.build_server``, as
``svc-server run`` builds it) on loopback, driven with raw sockets.

Timeouts are set small; the assertions are about behaviour (closed, answered 408), with
generous upper bounds rather than timing precision.
"""

from __future__ import annotations

import itertools
import json
import socket
import time
from collections.abc import Callable, Iterable

import pytest

from ..support import LiveServer
from .raw_http import TIMEOUT, connect, head, read_response, read_responses, read_until_closed

pytestmark = pytest.mark.timeout(60)

BOUND = 0.5
#: A closed connection must be seen well within this (a read's own timeout), though the
#: bound is ``BOUND``.
GENEROUS = TIMEOUT


@pytest.fixture
def server(make_server: Callable[..., LiveServer]) -> LiveServer:
    return make_server(
        header_timeout_seconds=BOUND,
        body_timeout_seconds=BOUND,
        send_timeout_seconds=BOUND,
        keep_alive_timeout_seconds=BOUND,
    )


def trickle(sock: socket.socket, pieces: Iterable[bytes], pause: float, lasting: float) -> None:
    """Send ``pieces`` ``pause`` apart for at most ``lasting`` seconds, or until the server
    hangs up; the connection must then be closed with nothing (more) answered."""
    start = time.monotonic()
    for piece in pieces:
        try:
            sock.sendall(piece)
        except (BrokenPipeError, ConnectionResetError):
            return
        time.sleep(pause)
        if time.monotonic() - start > lasting:
            break
    data, _ = read_until_closed(sock)
    assert data == b""


def test_headers_never_completed_close_the_connection(server: LiveServer) -> None:
    with connect(server) as sock:
        sock.sendall(b"POST /owners HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le")
        data, waited = read_until_closed(sock)
    assert data == b""  # no request was read, so none is answered
    assert waited < GENEROUS


def test_headers_trickled_byte_by_byte_are_still_cut_off(server: LiveServer) -> None:
    """The deadline runs from the first byte of the request, not from the last one."""
    request = head("/owners", Content_Length=2)
    with connect(server) as sock:
        start = time.monotonic()
        trickle(sock, (bytes([byte]) for byte in request[:-4]), 0.05, 3 * BOUND)
        assert time.monotonic() - start < GENEROUS


def test_second_request_headers_never_completed_close_the_connection(
    server: LiveServer,
) -> None:
    """On a kept-alive connection the deadline starts again with the next request."""
    with connect(server) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        first = read_response(sock)
        assert first.startswith(b"HTTP/1.1 200")
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 12")
        data, waited = read_until_closed(sock)
    assert data == b"" and waited < GENEROUS


def test_a_connection_that_sends_nothing_is_closed(server: LiveServer) -> None:
    with connect(server) as sock:
        data, waited = read_until_closed(sock)
    assert data == b"" and waited < GENEROUS


@pytest.mark.parametrize("path", ["/owners", "/spend/pay-url", "/gates/redeem"])
def test_stalled_body_is_answered_408_then_closed(server: LiveServer, path: str) -> None:
    """API endpoints and raw routes alike (the body deadline wraps every route)."""
    with connect(server) as sock:
        sock.sendall(head(path, Content_Type="application/json", Content_Length=100))
        sock.sendall(b'{"email": "')  # 11 of 100 bytes, then nothing
        data, waited = read_until_closed(sock)
    status_line, _, rest = data.partition(b"\r\n")
    assert status_line.startswith(b"HTTP/1.1 408"), data[:200]
    headers, _, body = rest.partition(b"\r\n\r\n")
    assert b"connection: close" in headers.lower()
    answer = json.loads(body)
    assert answer["ok"] is False and answer["error"]["code"] == "request_timeout"
    assert answer["request_id"].startswith("req_")
    assert f"x-request-id: {answer['request_id']}".encode() in headers.lower()
    assert waited < GENEROUS


@pytest.mark.parametrize("path", ["/no/such/route", "/sandbox/connect/onboard/tok_x"])
def test_a_body_trickled_after_the_answer_does_not_hold_the_connection(
    server: LiveServer, path: str
) -> None:
    """A route may answer without reading the body (a 404, a form route sent JSON).
    Bytes of that unread body arriving after the answer must not hold the connection:
    uvicorn discards them, and each one cancels its keep-alive timer, so without a bound
    of its own a client trickling a large body kept the connection forever."""
    with connect(server) as sock:
        sock.sendall(head(path, Content_Type="application/json", Content_Length=100_000))
        answer = read_response(sock)
        assert answer.startswith(b"HTTP/1.1 4"), answer[:200]
        start = time.monotonic()
        trickle(sock, itertools.repeat(b"x"), BOUND / 5, 4 * BOUND)  # well past the bound
        assert time.monotonic() - start < GENEROUS


def test_idle_keep_alive_connection_is_closed(server: LiveServer) -> None:
    with connect(server) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        data, waited = read_until_closed(sock)  # answered, then idle until the bound
    assert data.startswith(b"HTTP/1.1 200")
    assert waited < GENEROUS


def test_slow_but_progressing_request_is_served(server: LiveServer) -> None:
    """Headers and body each arrive in pieces, each within its bound: served as usual."""
    body = json.dumps({"email": "slow@example.com"}).encode()
    request = head("/owners", Content_Type="application/json", Content_Length=len(body))
    with connect(server) as sock:
        for piece in (request[:20], request[20:]):
            sock.sendall(piece)
            time.sleep(BOUND / 5)
        for i in range(0, len(body), 8):
            sock.sendall(body[i : i + 8])
            time.sleep(BOUND / 20)
        reply = read_response(sock)
    assert reply.startswith(b"HTTP/1.1 201"), reply[:300]
    assert b'"owner_jwt"' in reply


#: An answer of about 260 KB; pipelined 40 times, far more than a socket's buffers hold.
LONG_ANSWER = b"GET /agent-openapi.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
PIPELINED = 40


def open_connections(live: LiveServer) -> int:
    return len(live.server.server_state.connections)


def test_a_client_that_reads_none_of_its_answers_is_dropped(server: LiveServer) -> None:
    """A slow-read attack: long answers asked for and none read.  Once the buffers are
    full the answer cannot progress; without a bound uvicorn held the connection, its
    task and its buffers for good (a close waits for a flush that never comes)."""
    with connect(server, receive_buffer=4096) as sock:
        sock.sendall(LONG_ANSWER * PIPELINED)
        start = time.monotonic()
        while not open_connections(server) and time.monotonic() - start < GENEROUS:
            time.sleep(0.01)  # until the server has taken the connection
        assert open_connections(server) == 1
        while open_connections(server) and time.monotonic() - start < GENEROUS:
            time.sleep(0.05)
        assert open_connections(server) == 0, "the connection is still held"
        assert time.monotonic() - start >= BOUND  # dropped by the bound, not at once


def test_a_slow_reader_that_keeps_reading_gets_every_answer(server: LiveServer) -> None:
    """Reading, however slowly, is progress: the bound is on time without any."""
    with connect(server, receive_buffer=65536) as sock:
        sock.sendall(LONG_ANSWER * PIPELINED)
        start = time.monotonic()
        answers = read_responses(sock, PIPELINED, pause=0.005)
        took = time.monotonic() - start
    assert all(a.startswith(b"HTTP/1.1 200") for a in answers)
    assert len({len(a) for a in answers}) == 1  # each whole, none cut
    assert took > BOUND  # longer than the bound: the bound did not cut it


def body_routes(live: LiveServer) -> list[tuple[str, str]]:
    """Every path the app serves that takes a body, from its route table (path
    parameters filled with a placeholder), without the ``/api`` aliases: (method, path)."""
    from starlette.routing import Route

    app = live.server.config.app
    paths = []
    for route in app.routes:
        if not isinstance(route, Route) or route.path.startswith("/api/"):
            continue
        methods = sorted((route.methods or {"POST"}) & {"POST", "PUT", "PATCH", "DELETE"})
        if methods:
            path = route.path.replace("{", "").replace("}", "").replace(":path", "")
            paths.append((methods[0], path))
    return paths


def test_no_route_holds_a_stalled_body(server: LiveServer) -> None:
    """Whatever a route does with a body that never arrives (408, or an answer that did
    not need it), the connection is closed within the bound, never held.

    The first byte of the body is sent a moment after the head, so a route that answers
    without the body has answered before it arrives (the byte then lands on a request
    already answered, which once held its connection) and one that reads it is waiting."""
    paths = body_routes(server)
    assert len(paths) > 20
    sockets = []
    for method, path in paths:
        sock = connect(server)
        sock.sendall(head(path, method, Content_Type="application/json", Content_Length=100))
        sockets.append((method, path, sock))
    time.sleep(BOUND / 5)
    for _, _, sock in sockets:
        sock.sendall(b"{")
    start = time.monotonic()
    statuses = set()
    for method, path, sock in sockets:
        with sock:
            try:
                data, _ = read_until_closed(sock)
            except TimeoutError:
                elapsed = time.monotonic() - start
                pytest.fail(f"{method} {path} held its connection ({elapsed:.1f} s in)")
        assert data.startswith(b"HTTP/1.1 "), (method, path)  # answered, then closed
        statuses.add(data[9:12])
    assert b"408" in statuses
    assert time.monotonic() - start < GENEROUS
