"""Hostile input on every route of the route table never earns a 5xx, on either database.

The routes come from the application itself (``create_app(...).routes``), so a route added
tomorrow is attacked here without a line of its own.  For each route the test finds the
credential it takes, learns the body fields its handler reads (by recording what
:class:`~reference_server.web.validate.Fields` is asked for, and what a 422 names), and
then sends: hostile path parameters, hostile query parameters, hostile whole bodies and
each field set to each hostile value (nulls, wrong types, huge numbers, NUL and other
control characters, lone surrogates, over-long strings, malformed URLs and amounts).
Every answer must be below 500 and, when an error, the spec's envelope with a known code.
After the module, the ledger audit of the shared server must still balance.
"""

from __future__ import annotations

import re
import secrets
import threading
from collections.abc import Iterator
from typing import Any

import attrs
import httpx
import pytest
from starlette.routing import Route

import svc
from reference_server.app import served
from reference_server.web import validate
from reference_server.web.errors import CODES

from ..support import LiveServer, new_account, unopened_app


def _route_table() -> list[tuple[str, str]]:
    table = set()
    for route in unopened_app().routes:
        if not isinstance(route, Route) or route.path.startswith("/api/"):
            continue  # /api/... is the same handler under a prefix
        for method in route.methods or ():
            if method != "HEAD":
                table.add((method, route.path))
    return sorted(table, key=lambda mp: (mp[1], mp[0]))


ROUTES = _route_table()
#: The routes that answer people in HTML, refusals included (``Endpoint.page``).
PAGES = {(ep.method, ep.path) for ep in served() if ep.page}

# --- hostile values ------------------------------------------------------------------------

#: Path parameter values, already percent-encoded as a client would put them in a URL.
HOSTILE_SEGMENTS = [
    "%00",
    "a%01b",
    "%7F",
    "%C2%85",  # NEL, a C1 control
    "%C3%28",  # not UTF-8
    "%ED%A0%80",  # an encoded surrogate
    "x" * 3000,
    "..%2F..%2Fetc%2Fpasswd",
    "%E2%80%AE",  # right-to-left override: printable, must simply not be found
    "%20",
    "'%20OR%201=1--",
]
#: Query strings, raw.
HOSTILE_QUERIES = [
    "limit=abc",
    "limit=-1",
    "limit=0",
    "limit=99999999999999999999999",
    "limit=1e999",
    "limit=%00",
    "starting_after=%00",
    "starting_after=" + "x" * 3000,
    "starting_after=%FF",
    "starting_after=",
    "%00=1",
    "limit=1&limit=2",
]
#: Whole bodies, raw bytes with a JSON content type.
HOSTILE_BODIES = [
    b"null",
    b"[]",
    b'"text"',
    b"1e999999999",
    b"123456789012345678901234567890",
    b'{"a": 1, "a": 2}',
    b"{" * 40,
    b"[" * 5000,
    b"\xff\xfe{}",
    b'{"\\u0000": 1}',
    b'{"unterminated": "',
    b"NaN",
]
#: Field values, as JSON text.
HOSTILE_VALUES = [
    "null",
    "true",
    "0",
    "-1",
    "1e308",
    "-1e308",
    "1e-400",
    "9223372036854775807",
    "9223372036854775808",
    "0.0000001",
    '""',
    '"\\u0000"',
    '"a\\u0001b"',
    '"\\ud800"',
    '"\\u0085"',
    '"' + "x" * 20_000 + '"',
    '"http://[::1"',
    '"http://example.com:99999/"',
    '"javascript:alert(1)"',
    '"0.0500000"',
    '" 0.05"',
    '"00.05"',
    '"-0.05"',
    "[]",
    "{}",
    '[null, "\\u0000", 1e308]',
    '{"a": {"b": "\\u0000"}}',
]


# --- the world every route is attacked in ----------------------------------------------------


@attrs.frozen
class World:
    url: str
    credentials: dict[str, dict[str, str]]
    #: A real value for every path parameter name, so a body reaches its handler.
    params: dict[str, str]


@pytest.fixture(scope="module")
def world(module_server: LiveServer) -> World:
    me = new_account(module_server.url)
    bystander = new_account(module_server.url)  # targets of destructive routes
    owner = svc.Client(
        base_url=module_server.url, owner_jwt=me.owner_jwt, environment="test", max_retries=0
    )
    seller = svc.Client(base_url=module_server.url, seller_key=me.seller_key, max_retries=0)
    resource = seller.resources.create(kind="http", path="/fuzz", amount="0.05")
    owner.wallet_keys.fund(me.wallet_key_id, "50.00")
    metered = seller.resources.create(
        kind="http",
        path="/fuzz/tokens",
        pricing="metered",
        unit_price="0.001",
        unit="token",
        max_amount="1",
    )
    agent = svc.Client(base_url=module_server.url, wallet_key=me.wallet_key, max_retries=0)
    authorized = agent.pay(resource_id=metered.id)  # held, so capture reaches its handler
    other_key = owner.wallet_keys.create(name="target")
    handle = owner.handles.create("fz" + secrets.token_hex(4))
    hook = owner.webhooks.create(url="http://127.0.0.1:9/hook", events=["payment.succeeded"])
    delivery = owner.webhooks.test(hook.id)
    faucet = httpx.post(
        module_server.url + "/sandbox/faucet",
        json={"address": "0x" + "ab" * 20, "amount": "1.00"},
        headers={"X-Svc-Environment": "test"},
    )
    tx_hash = faucet.json().get("tx_hash", "0x" + "cd" * 32)
    owner_headers = {"Authorization": f"Bearer {me.owner_jwt}", "X-Svc-Environment": "test"}
    onboarding = httpx.post(
        module_server.url + "/sellers/me/connect/onboard",
        json={"country": "US"},
        headers={"Authorization": f"Bearer {me.seller_key}"},
    )
    return World(
        url=module_server.url,
        credentials={
            "owner": owner_headers,
            "seller": {"Authorization": f"Bearer {me.seller_key}"},
            "wallet": {"Authorization": f"Bearer {me.wallet_key}"},
            "anonymous": {"X-Svc-Environment": "test"},
        },
        params={
            "seller_id": bystander.seller_id,
            "resource_id": resource.id,
            "short_id": resource.short_id,
            "key_id": other_key.id,
            "webhook_id": hook.id,
            "delivery_id": delivery.id,
            "destination": "@" + handle.handle,
            "address": "0x" + "ab" * 20,
            "tx_hash": tx_hash,
            "withdrawal_id": "wd_" + "0" * 26,
            "top_up_id": "tu_" + "0" * 26,
            "refund_id": "rfnd_" + "0" * 26,
            "approval_id": "appr_" + "0" * 26,
            "token": onboarding.json()["onboard_url"].rsplit("/", 1)[1],
            "receipt_id": authorized.receipt_id,
        },
    )


# --- recording which fields a handler reads --------------------------------------------------


class _FieldRecorder:
    """Records the names handlers ask ``Fields`` for while a probe runs (the server
    serves from threads of this process)."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self._lock = threading.Lock()
        self._original = validate.Fields._get

    def __enter__(self) -> _FieldRecorder:
        recorder = self

        def recording_get(fields: validate.Fields, name: str, required: bool) -> Any:
            with recorder._lock:
                recorder.names.add(fields._prefix + name)
            return recorder._original(fields, name, required)

        validate.Fields._get = recording_get  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        validate.Fields._get = self._original  # type: ignore[method-assign]


# --- the attack ----------------------------------------------------------------------------


@attrs.define
class Attack:
    world: World
    method: str
    path: str
    headers: dict[str, str]
    http: httpx.Client
    failures: list[str] = attrs.field(factory=list)
    sent: int = 0

    def url(self, **overrides: str) -> str:
        def fill(match: re.Match[str]) -> str:
            name = match.group(1)
            return overrides.get(name, self.world.params[name])

        return self.world.url + re.sub(r"\{(\w+)(?::\w+)?\}", fill, self.path)

    def send(
        self,
        *,
        body: bytes | None = None,
        query: str = "",
        headers: dict[str, str] | list[tuple[str, str]] | None = None,
        what: str,
        **segments: str,
    ) -> httpx.Response:
        url = self.url(**segments) + (f"?{query}" if query else "")
        all_headers: list[tuple[str, str]] = [
            *self.headers.items(),
            ("Idempotency-Key", secrets.token_hex(8)),
        ]
        if body is not None:
            all_headers.append(("Content-Type", "application/json"))
        if isinstance(headers, dict):
            all_headers = [(k, v) for k, v in all_headers if k.lower() not in _lower(headers)]
            all_headers += list(headers.items())
        elif headers is not None:
            all_headers += headers
        request = self.http.build_request(
            self.method, url, content=body, headers=httpx.Headers(all_headers)
        )
        response = self.http.send(request)
        self.sent += 1
        self.check(response, what)
        return response

    def check(self, r: httpx.Response, what: str) -> None:
        where = f"{self.method} {self.path} with {what[:120]}"
        if r.status_code >= 500:
            self.failures.append(f"{where}: {r.status_code} {r.text[:200]}")
            return
        if r.status_code < 400 or (self.path.startswith("/g/") and r.status_code == 402):
            return
        if (self.method, self.path) in PAGES and r.headers.get("content-type", "").startswith(
            "text/html"
        ):
            return  # pages for people answer in HTML (Endpoint.page)
        if self.path == "/mcp" and _is_json_rpc_error(r):
            return  # MCP refuses a message in its own protocol (the pipeline's stay ours)
        try:
            body = r.json()
            code = body["error"]["code"]
        except (ValueError, KeyError, TypeError):
            self.failures.append(f"{where}: {r.status_code} is not the envelope: {r.text[:200]}")
            return
        if code not in CODES or body.get("request_id") != r.headers.get("x-request-id"):
            self.failures.append(f"{where}: bad envelope {r.text[:200]}")


def _is_json_rpc_error(r: httpx.Response) -> bool:
    """A JSON-RPC 2.0 error object: what the MCP endpoint answers a message it refuses."""
    try:
        body = r.json()
        return bool(body["jsonrpc"] == "2.0" and isinstance(body["error"]["code"], int))
    except (ValueError, KeyError, TypeError):
        return False


def _lower(headers: dict[str, str]) -> set[str]:
    return {k.lower() for k in headers}


def _credential_for(attack: Attack) -> dict[str, str]:
    """The first credential the route does not refuse as unauthenticated or forbidden."""
    for role in ("anonymous", "owner", "seller", "wallet"):
        headers = attack.world.credentials[role]
        attack.headers = headers
        r = attack.send(body=b"{}" if attack.method != "GET" else None, what=f"probe {role}")
        if r.status_code not in (401, 403):
            return headers
    return attack.world.credentials["owner"]


def _fields_of(attack: Attack) -> list[str]:
    """The body fields the handler reads (and, one level down, those of object fields)."""
    with _FieldRecorder() as recorder:
        r = attack.send(body=b"{}", what="field probe")
    names = set(recorder.names)
    names |= _named_in_422(r)
    for name in sorted(names):
        if "." in name:
            continue
        with _FieldRecorder() as recorder:
            r = attack.send(body=_json_body({name: "{}"}), what=f"field probe {name}")
        names |= recorder.names | _named_in_422(r)
    return sorted(n for n in names if n != "body")


def _named_in_422(r: httpx.Response) -> set[str]:
    if r.status_code != 422:
        return set()
    errors = r.json().get("error", {}).get("details", {}).get("errors", [])
    return {e["field"] for e in errors if isinstance(e, dict) and isinstance(e.get("field"), str)}


def _json_body(fields: dict[str, str]) -> bytes:
    """A JSON object whose (possibly dotted) fields hold raw JSON texts."""
    tree: dict[str, Any] = {}
    for dotted, raw in fields.items():
        node = tree
        *parents, leaf = dotted.split(".")
        for parent in parents:
            if not isinstance(node.get(parent), dict):
                node[parent] = {}  # an object field's own fields replace its hostile value
            node = node[parent]
        node[leaf] = _Raw(raw)
    return _render(tree).encode()


@attrs.frozen
class _Raw:
    text: str


def _render(value: Any) -> str:
    if isinstance(value, _Raw):
        return value.text
    return "{" + ",".join(f'"{k}":{_render(v)}' for k, v in value.items()) + "}"


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=30) as client:
        yield client


@pytest.mark.parametrize(("method", "path"), ROUTES, ids=[f"{m} {p}" for m, p in ROUTES])
def test_hostile_input_never_earns_a_5xx(
    world: World, http: httpx.Client, method: str, path: str
) -> None:
    for name in re.findall(r"\{(\w+)", path):
        if name not in world.params:
            pytest.fail(f"{path}: give the world a real value for the path parameter {name!r}")
    attack = Attack(world=world, method=method, path=path, headers={}, http=http)
    attack.headers = _credential_for(attack)
    writes = method != "GET"
    empty = b"{}" if writes else None

    for name in re.findall(r"\{(\w+)", path):
        for segment in HOSTILE_SEGMENTS:
            attack.send(body=empty, what=f"{name}={segment}", **{name: segment})
    for query in HOSTILE_QUERIES:
        attack.send(body=empty, query=query, what=f"?{query}")
    if writes:
        _send_hostile_bodies(attack)

    assert attack.sent > 0
    assert not attack.failures, "\n".join(attack.failures[:30])


def _send_hostile_bodies(attack: Attack) -> None:
    """Bodies that are not JSON objects, the wrong content type, and hostile values in
    each field the route reads and in all of them at once."""
    for body in HOSTILE_BODIES:
        attack.send(body=body, what=f"body {body[:40]!r}")
    attack.send(body=b"{}", headers={"Content-Type": "text/plain"}, what="text/plain")
    fields = _fields_of(attack)
    for field in fields:
        for value in HOSTILE_VALUES:
            attack.send(body=_json_body({field: value}), what=f"{field}={value[:40]}")
    for value in HOSTILE_VALUES:
        everything = _json_body(dict.fromkeys(fields, value))
        attack.send(body=everything, what=f"every field={value[:40]}")


@pytest.mark.parametrize(("method", "path"), ROUTES, ids=[f"{m} {p}" for m, p in ROUTES])
def test_every_route_refuses_ambiguous_money_headers(
    world: World, http: httpx.Client, method: str, path: str
) -> None:
    """Two credentials, two environments, two keys: refused before any route runs."""
    attack = Attack(world=world, method=method, path=path, headers={}, http=http)
    body = b"{}" if method != "GET" else None
    owner, wallet = world.credentials["owner"], world.credentials["wallet"]
    duplicated: list[list[tuple[str, str]]] = [
        [("Authorization", owner["Authorization"]), ("Authorization", wallet["Authorization"])],
        [("X-Svc-Environment", "test"), ("X-Svc-Environment", "live")],
        [("x-svc-vw-key", "svc_vw_test_a"), ("x-svc-vw-key", "svc_vw_test_b")],
        [("Idempotency-Key", "again")],  # a second one beside ours
        [("X-Svc-Receipt", "rcpt_a"), ("X-Svc-Receipt", "rcpt_b")],
    ]
    for extra in duplicated:
        r = attack.send(body=body, headers=extra, what=str(extra))
        assert (r.status_code, r.json()["error"]["code"]) == (400, "duplicate_header"), r.text
    json_type = (b"Content-Type", b"application/json")
    unreadable: list[tuple[list[tuple[bytes, bytes]], str]] = [
        *(
            ([(b"Idempotency-Key", key.encode()), json_type], "invalid_idempotency_key")
            for key in ("caf\u00e9", "tab\there", "", "x" * 256)
        ),
        ([(b"X-Svc-Environment", "t\u00e9st".encode())], "invalid_header"),
    ]
    for headers, code in unreadable:
        r = http.send(http.build_request(method, attack.url(), content=body, headers=headers))
        assert (r.status_code, r.json()["error"]["code"]) == (400, code), (headers, r.text)
