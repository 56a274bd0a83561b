"""A real webhook receiver on loopback: records every request, answers as scripted."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import attrs


@attrs.define
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@attrs.define
class Receiver:
    """``statuses`` are answered in order (then 200 forever); ``redirect_to`` answers 302."""

    server: ThreadingHTTPServer
    received: list[Received] = attrs.field(factory=list)
    statuses: list[int] = attrs.field(factory=list)
    redirect_to: str | None = None
    #: Seconds to wait before answering (a slow receiver).
    delay: float = 0.0
    lock: threading.Lock = attrs.field(factory=threading.Lock)
    arrived: threading.Condition = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.arrived = threading.Condition(self.lock)

    @property
    def url(self) -> str:
        _host, port = self.server.server_address[:2]
        return f"http://localhost:{port}/hooks"

    def wait_for(self, count: int, timeout: float = 20) -> list[Received]:
        with self.arrived:
            ok = self.arrived.wait_for(lambda: len(self.received) >= count, timeout)
            assert ok, f"received {len(self.received)} of {count} deliveries"
            return list(self.received)

    def answer(self, request: Received) -> tuple[int, dict[str, str]]:
        with self.arrived:
            self.received.append(request)
            self.arrived.notify_all()
            if self.redirect_to is not None:
                return 302, {"Location": self.redirect_to}
            return (self.statuses.pop(0) if self.statuses else 200), {}


def start_receiver() -> Receiver:
    holder: dict[str, Receiver] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            if len(body) < length:  # the sender died mid-request: nothing was delivered
                self.close_connection = True
                return
            request = Received(self.path, dict(self.headers.items()), body)
            if holder["r"].delay:
                time.sleep(holder["r"].delay)
            status, headers = holder["r"].answer(request)
            body = b'{"received": true}' if status < 300 else b"nope"
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver = Receiver(server=server)
    holder["r"] = receiver
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return receiver
