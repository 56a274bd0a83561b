"""The uvicorn internals ``reference_server/serving.py`` builds on, checked by name and
signature: uvicorn publishes no hook for a head deadline, an unread body's deadline, a
stalled answer or the envelope of a 400, so ``_GuardedProtocol`` subclasses its h11
protocol.  A uvicorn release that renames, removes or reshapes what the subclass
overrides or reads fails here, by name, before the behaviour tests (test_slow_clients.py,
test_unreadable_requests.py) fail by timing out."""

from __future__ import annotations

import asyncio
import inspect

import h11
import uvicorn
from uvicorn.lifespan.on import LifespanOn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from reference_server.serving import _GuardedProtocol, _Server

#: Each method the subclass overrides, with the parameters uvicorn calls it with.
OVERRIDDEN = {
    "connection_made": ["self", "transport"],
    "connection_lost": ["self", "exc"],
    "data_received": ["self", "data"],
    "pause_writing": ["self"],
    "resume_writing": ["self"],
    "on_response_complete": ["self"],
    "send_400_response": ["self", "msg"],
}
#: What the subclass reads or calls on a protocol instance.
READ = ("loop", "conn", "cycle", "transport", "timeout_keep_alive", "timeout_keep_alive_task")
#: uvicorn's settings that bound a wait on the client.  A new one may make part of
#: ``_GuardedProtocol`` unnecessary: read it, then update this list.
TIMEOUT_SETTINGS = {
    "timeout_keep_alive",
    "timeout_notify",
    "timeout_graceful_shutdown",
    "timeout_worker_healthcheck",
    "ws_ping_timeout",
}


def _parameters(function: object) -> list[str]:
    return list(inspect.signature(function).parameters)  # type: ignore[arg-type]


def test_the_overridden_methods_keep_their_signatures() -> None:
    for name, parameters in OVERRIDDEN.items():
        assert name in vars(_GuardedProtocol), f"serving.py no longer overrides {name}"
        assert _parameters(getattr(H11Protocol, name)) == parameters, name


def test_uvicorn_still_calls_them_where_the_guards_expect() -> None:
    """The 400 comes from the event loop over h11's events; a complete answer re-arms
    through ``on_response_complete``; arriving bytes cancel the keep-alive timer."""
    handle_events = inspect.getsource(H11Protocol.handle_events)
    assert "self.send_400_response(" in handle_events
    assert "on_response=self.on_response_complete" in handle_events
    assert "self._unset_keepalive_if_required()" in inspect.getsource(H11Protocol.data_received)


def test_the_attributes_read_exist_on_a_protocol() -> None:
    config = uvicorn.Config(app=lambda scope, receive, send: None, http=H11Protocol)
    loop = asyncio.new_event_loop()
    try:
        protocol = H11Protocol(config, ServerState(), {}, _loop=loop)
    finally:
        loop.close()
    for name in READ:
        assert hasattr(protocol, name), name
    assert isinstance(protocol.conn, h11.Connection)
    assert hasattr(protocol.conn, "trailing_data")
    assert protocol.timeout_keep_alive_task is None


def test_the_server_startup_hook_is_there() -> None:
    assert _parameters(uvicorn.Server.startup) == ["self", "sockets"]
    assert "startup" in vars(_Server)
    lifespan = LifespanOn(uvicorn.Config(app=None))
    assert callable(lifespan.startup) and lifespan.should_exit is False


def test_no_uvicorn_setting_bounds_what_the_guards_bound() -> None:
    settings = {p for p in _parameters(uvicorn.Config.__init__) if "timeout" in p}
    assert settings == TIMEOUT_SETTINGS, "a new uvicorn timeout: does serving.py still need it?"
