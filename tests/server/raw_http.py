"""HTTP/1.1 spoken by hand over a socket, for the tests of what no HTTP client sends:
stalled heads and bodies, pipelined requests read slowly or never, unparseable requests."""

from __future__ import annotations

import socket
import time
from typing import Any
from urllib.parse import urlsplit

from ..support import LiveServer

#: How long a read waits for the server before the test counts the connection as held.
TIMEOUT = 10.0


def connect(live: LiveServer, *, receive_buffer: int | None = None) -> socket.socket:
    """A connection to ``live``; ``receive_buffer`` (bytes) shrinks what the kernel will
    take for this client before the server's writes stall."""
    parts = urlsplit(live.url)
    sock = socket.socket()
    if receive_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.settimeout(TIMEOUT)
    sock.connect((parts.hostname, parts.port))
    return sock


def head(path: str, method: str = "POST", **headers: Any) -> bytes:
    """A request head; ``Content_Type="x"`` is sent as ``Content-Type: x``."""
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    lines += [f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def read_until_closed(sock: socket.socket) -> tuple[bytes, float]:
    """Everything the server sends until it closes; and how long that took."""
    start = time.monotonic()
    chunks = []
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks), time.monotonic() - start


def exchange(live: LiveServer, raw: bytes) -> bytes:
    """Send ``raw`` on a new connection; everything answered until the server closes."""
    with connect(live) as sock:
        sock.sendall(raw)
        return read_until_closed(sock)[0]


def read_response(sock: socket.socket) -> bytes:
    """One whole response (head and its Content-Length body), however TCP splits it."""
    return read_responses(sock, 1)[0]


def read_responses(sock: socket.socket, count: int, pause: float = 0.0) -> list[bytes]:
    """``count`` whole responses, pipelined on one connection, read ``pause`` apart."""
    data, answers = b"", []
    while len(answers) < count:
        head_end = data.find(b"\r\n\r\n")
        if head_end >= 0:
            length = 0
            for line in data[:head_end].split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            end = head_end + 4 + length
            if len(data) >= end:
                answers.append(data[:end])
                data = data[end:]
                continue
        chunk = sock.recv(65536)
        assert chunk, f"closed after {len(answers)} answers"
        data += chunk
        time.sleep(pause)
    return answers
