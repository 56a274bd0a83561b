"""Record the SDK's vcrpy cassettes from our own reference server.

Run from the repository root (either form)::

    python -m tests.sdk.record_cassettes
    python tests/sdk/record_cassettes.py

It starts ``reference_server`` on a fresh temporary SQLite file (``tests.support.
start_server``), drives the whole seller flow, the public probes and discovery documents,
and a set of error responses through :class:`svc.Client`, and rewrites every YAML file in
``tests/sdk/cassettes/``.  ``test_cassettes.py`` replays them offline through both
``svc.Client`` and ``svc.AsyncClient``.

Two rules make the cassettes safe to commit and replayable from any ``base_url``:

* **Scrubbing.** Credentials are learnt as the server hands them out (``owner_jwt`` from
  ``POST /owners``, ``seller_key`` from ``POST /sellers``) and replaced, wherever they
  appear -- request headers and bodies, response bodies -- by fixed placeholders
  (:data:`OWNER_JWT`, :data:`SELLER_KEY`).  The replacement is the same everywhere, so the
  key a replayed ``sellers.create`` returns is the key the replayed seller calls send.
  Before anything is written the recorder checks that no credential-shaped string is left.
* **Host-free matching.** The recorded host is rewritten to :data:`RECORDED_HOST`, and
  interactions match on :data:`MATCH_ON`: method, path, query and JSON body plus the
  request headers the SDK is responsible for (credential, environment, ``Accept``,
  ``Content-Type``, ``Idempotency-Key``), never on scheme, host or port.

This module is imported by the replay tests for those shared settings; the server is only
imported when recording.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import vcr
import yaml
from vcr.cassette import Cassette
from vcr.request import Request as VcrRequest

import svc

CASSETTE_DIR = Path(__file__).resolve().parent / "cassettes"
REPO_ROOT = Path(__file__).resolve().parents[2]

#: Placeholders written in place of the real credentials.
OWNER_JWT = "owner_jwt_REDACTED"
SELLER_KEY = "svc_sk_test_REDACTED"
#: A well-formed seller key the server has never issued (for the 401); not a secret.
UNKNOWN_SELLER_KEY = "svc_sk_test_unknown-key-recorded-for-401"
#: The server's ``public_url``: every ``gate_url``/``pay_url``/discovery link is under it.
PUBLIC_URL = "https://svc.example.test"
#: Scheme and host recorded in place of the loopback address the server listened on.
RECORDED_HOST = "http://recorded.invalid"

#: Fixed inputs of the recorded flow; the replay tests send the same ones.
OWNER_EMAIL = "cassette-owner@example.com"
SELLER_NAME = "Cassette Shop"
PAYOUT_WALLET = "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed"
IDEMPOTENCY_KEY = "cassette-reprice-1"
UNKNOWN_RESOURCE_ID = "res_doesnotexist"
HTTP_METADATA: dict[str, Any] = {
    "sku_kind": "credit_topup",
    "credits": 100,
    "credit_unit": "call",
    "tier": "gold",
}

#: Request headers whose values the SDK decides and the cassettes therefore pin.
MATCHED_HEADERS = ("authorization", "x-svc-environment", "accept", "content-type")

_SECRET_PATTERNS = (
    re.compile(r"svc_(?:sk|vw)_(?:test|live)_[A-Za-z0-9_-]+"),
    re.compile(r"eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*"),  # any JWT
)
_ALLOWED_SECRET_LOOKALIKES = frozenset({SELLER_KEY, UNKNOWN_SELLER_KEY})


# --- matching (shared with the replay tests) --------------------------------------------------


def _header(request: VcrRequest, name: str) -> str | None:
    value = request.headers.get(name)
    if isinstance(value, list | tuple):
        value = value[0] if value else None
    return value


def sdk_headers(r1: VcrRequest, r2: VcrRequest) -> None:
    """The credential, environment, ``Accept`` and ``Content-Type`` the SDK sent agree."""
    for name in MATCHED_HEADERS:
        a, b = _header(r1, name), _header(r2, name)
        if a != b:
            raise AssertionError(f"{name}: {a!r} != {b!r}")


def _is_uuid(value: str) -> bool:
    try:
        return str(uuid.UUID(value)) == value
    except ValueError:
        return False


def idempotency_key(r1: VcrRequest, r2: VcrRequest) -> None:
    """``Idempotency-Key``: present on the same calls; a caller's own key is pinned exactly.

    A key the SDK generated is a fresh UUID on every run, so a recorded UUID only requires
    another UUID; a key passed through ``RequestOptions`` must be sent unchanged.
    """
    a, b = _header(r1, "idempotency-key"), _header(r2, "idempotency-key")
    if a is None or b is None:
        if a != b:
            raise AssertionError(f"Idempotency-Key: {a!r} != {b!r}")
        return
    if _is_uuid(a) and _is_uuid(b):
        return
    if a != b:
        raise AssertionError(f"Idempotency-Key: {a!r} != {b!r}")


#: Everything but scheme, host and port; ``body`` compares JSON bodies as JSON values.
MATCH_ON = ("method", "path", "query", "body", "sdk_headers", "idempotency_key")


def make_vcr(**kwargs: Any) -> vcr.VCR:
    """A ``VCR`` with the cassette directory, YAML and the host-free matchers."""
    recorder = vcr.VCR(
        cassette_library_dir=str(CASSETTE_DIR),
        serializer="yaml",
        match_on=MATCH_ON,
        decode_compressed_response=True,
        **kwargs,
    )
    recorder.register_matcher("sdk_headers", sdk_headers)
    recorder.register_matcher("idempotency_key", idempotency_key)
    return recorder


# --- scrubbing ---------------------------------------------------------------------------------


class Scrubber:
    """Replaces learnt credentials and the loopback origin, the same way everywhere."""

    def __init__(self, origin: str) -> None:
        self.origin = origin.rstrip("/")
        self.replacements: dict[str, str] = {}

    def learn(self, secret: str, placeholder: str) -> None:
        self.replacements[secret] = placeholder

    def text(self, value: str) -> str:
        for secret, placeholder in self.replacements.items():
            value = value.replace(secret, placeholder)
        return value.replace(self.origin, RECORDED_HOST)

    def before_record_request(self, request: VcrRequest) -> VcrRequest:
        origin = urlsplit(self.origin)
        request.uri = self.text(request.uri)
        headers = {}
        for name, value in request.headers.items():
            if name.lower() == "host" and value == origin.netloc:
                value = urlsplit(RECORDED_HOST).netloc
            headers[name] = self.text(value)
        request.headers = headers
        if request.body:
            request.body = self.text(request.body.decode())
        return request

    def before_record_response(self, response: dict[str, Any]) -> dict[str, Any]:
        raw = response["body"]["string"]
        text = raw.decode() if isinstance(raw, bytes) else raw
        self._learn_from(text)
        body = self.text(text).encode()
        response["body"]["string"] = body
        headers = response["headers"]
        for name in list(headers):
            if name.lower() == "content-length":
                headers[name] = [str(len(body))]
            else:
                headers[name] = [self.text(v) for v in headers[name]]
        return response

    def _learn_from(self, text: str) -> None:
        try:
            data = json.loads(text)
        except ValueError:
            return
        if not isinstance(data, dict):
            return
        if isinstance(data.get("owner_jwt"), str):
            self.learn(data["owner_jwt"], OWNER_JWT)
        key = data.get("seller_key")
        if isinstance(key, str):
            # svc_sk_test_REDACTED (= SELLER_KEY) for a test seller
            self.learn(key, f"svc_sk_{data.get('environment', 'test')}_REDACTED")


def leaked_secrets(text: str, known: dict[str, str]) -> list[str]:
    """Real credentials, or credential-shaped strings that are not placeholders, in ``text``."""
    found = [secret[:12] + "..." for secret in known if secret in text]
    for pattern in _SECRET_PATTERNS:
        for match in pattern.findall(text):
            if match not in _ALLOWED_SECRET_LOOKALIKES and not match.endswith("_REDACTED"):
                found.append(match[:12] + "...")
    return found


# --- the recorded scenarios --------------------------------------------------------------------


def record_seller_flow(base_url: str, record: Callable[[str], Any]) -> str:
    """The seller flow; returns the (real) seller key for the other scenarios."""
    with record("seller_flow.yaml"), svc.Client(base_url=base_url, max_retries=0) as anon:
        owner = anon.owners.create(OWNER_EMAIL)
        with svc.Client(
            base_url=base_url, owner_jwt=owner.owner_jwt, environment="test", max_retries=0
        ) as as_owner:
            seller = as_owner.sellers.create(name=SELLER_NAME)
            as_owner.sellers.list()
        with svc.Client(
            base_url=base_url, seller_key=seller.seller_key, environment="test", max_retries=0
        ) as client:
            client.sellers.me()
            report = client.resources.create(
                kind="http",
                path="/v1/report",
                amount=Decimal("0.05"),
                description="Quarterly report",
                metadata=HTTP_METADATA,
                upstream_url="https://upstream.example.test/v1/report",
                listed=True,
            )
            tool = client.resources.create(kind="mcp", tool="summarize", amount="0.002")
            client.resources.list()
            client.resources.get(report.id)
            client.resources.update(report.id, amount="0.10", description="Quarterly report v2")
            client.resources.deactivate(tool.id)
            client.sellers.enable_payments(payout_wallet_address=PAYOUT_WALLET)
            client.sellers.balance()
    return seller.seller_key


def record_discovery(base_url: str, record: Callable[[str], Any]) -> None:
    with record("discovery.yaml"), svc.Client(base_url=base_url, max_retries=0) as client:
        client.health()
        client.ready()
        client.capabilities()
        client.discovery("llms.txt")
        client.discovery(".well-known/agent.json")


def record_errors(base_url: str, record: Callable[[str], Any], seller_key: str) -> None:
    options = svc.RequestOptions(idempotency_key=IDEMPOTENCY_KEY)
    with (
        record("errors.yaml"),
        svc.Client(
            base_url=base_url, seller_key=seller_key, environment="test", max_retries=0
        ) as client,
    ):
        _expect(svc.NotFoundError, lambda: client.resources.get(UNKNOWN_RESOURCE_ID))
        _expect(
            svc.AuthenticationError,
            lambda: client.sellers.me(options=svc.RequestOptions(seller_key=UNKNOWN_SELLER_KEY)),
        )
        _expect(
            svc.PermissionDeniedError,
            lambda: client.sellers.me(options=svc.RequestOptions(environment="live")),
        )
        _expect(
            svc.UnprocessableEntityError,
            lambda: client.resources.create(kind="http", amount="0.05"),  # no path
        )
        first = client.resources.create(
            kind="http", path="/v1/idem", amount="0.05", options=options
        )
        again = client.resources.create(
            kind="http", path="/v1/idem", amount="0.05", options=options
        )
        assert again.id == first.id, "the same key and body must replay the first answer"
        _expect(
            svc.UnprocessableEntityError,
            lambda: client.resources.create(
                kind="http", path="/v1/idem", amount="0.07", options=options
            ),
        )


def _expect(error: type[svc.APIError], call: Callable[[], object]) -> None:
    try:
        call()
    except error:
        return
    raise AssertionError(f"expected {error.__name__}")


def _add_unknown_fields(path: str, body: dict[str, Any]) -> None:
    """What a newer server might add: top-level, nested and error-envelope fields."""
    body["introduced_in_a_newer_server"] = {"nested": [1, 2, 3]}
    if path == "/resources":
        for resource in body["data"]:
            resource["carbon_offset_grams"] = 12
            resource["metadata"]["bundle"] = {"size": 3}
    elif path == "/sellers/me/balance":
        body["pending_balance"] = "1.25"
        body["rails"] = ["x402", "mpp", "future-rail"]
    elif "error" in body:
        body["error"]["docs_url"] = "https://svc.example.test/docs/errors#not_found"
        body["error"]["retryable"] = False


#: (cassette, method, path) of the answers copied into ``newer_server.yaml``.
NEWER_SERVER_SOURCES = (
    ("seller_flow.yaml", "GET", "/sellers/me"),
    ("seller_flow.yaml", "GET", "/resources"),
    ("seller_flow.yaml", "GET", "/sellers/me/balance"),
    ("errors.yaml", "GET", f"/resources/{UNKNOWN_RESOURCE_ID}"),
)


def derive_newer_server(target: Path) -> None:
    """``newer_server.yaml``: recorded answers plus fields this SDK does not know.

    It stands for a server newer than the SDK; the replay test checks the SDK still reads
    every answer (and still maps the error).
    """
    interactions = []
    for name, method, path in NEWER_SERVER_SOURCES:
        recorded = yaml.safe_load((CASSETTE_DIR / name).read_text())["interactions"]
        (item,) = (
            i
            for i in recorded
            if i["request"]["method"] == method and urlsplit(i["request"]["uri"]).path == path
        )
        response = item["response"]
        body = json.loads(response["body"]["string"])
        _add_unknown_fields(path, body)
        text = json.dumps(body, separators=(",", ":"))
        response["body"]["string"] = text
        response["headers"]["content-length"] = [str(len(text.encode()))]
        interactions.append(item)
    header = (
        "# Derived by tests/sdk/record_cassettes.py from seller_flow.yaml and errors.yaml:\n"
        "# recorded answers plus fields this SDK does not know, as a newer server sends them.\n"
    )
    data = {"interactions": interactions, "version": 1}
    target.write_text(header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True))


# --- driver ------------------------------------------------------------------------------------


@contextmanager
def _server(directory: Path) -> Iterator[str]:
    if str(REPO_ROOT) not in sys.path:  # ``python tests/sdk/record_cassettes.py``
        sys.path.insert(0, str(REPO_ROOT))
    from reference_server import Settings
    from tests.support import TEST_SETTINGS, start_server

    settings = Settings(
        **TEST_SETTINGS,
        database_url=f"sqlite:///{directory / 'svc.db'}",
        public_url=PUBLIC_URL,
    )
    live = start_server(settings)
    try:
        yield live.url
    finally:
        live.stop()


def record_all() -> list[Path]:
    CASSETTE_DIR.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, _server(Path(tmp)) as base_url:
        scrubber = Scrubber(base_url)
        recorder = make_vcr(
            record_mode="all",
            drop_unused_requests=True,
            before_record_request=scrubber.before_record_request,
            before_record_response=scrubber.before_record_response,
        )

        @contextmanager
        def record(name: str) -> Iterator[Cassette]:
            (CASSETTE_DIR / name).unlink(missing_ok=True)
            with recorder.use_cassette(name) as cassette:
                yield cassette

        seller_key = record_seller_flow(base_url, record)
        record_discovery(base_url, record)
        record_errors(base_url, record, seller_key)

        written = [CASSETTE_DIR / n for n in ("seller_flow.yaml", "discovery.yaml", "errors.yaml")]
        newer = CASSETTE_DIR / "newer_server.yaml"
        derive_newer_server(newer)
        written.append(newer)
        for path in written:
            leaks = leaked_secrets(path.read_text(), scrubber.replacements)
            if leaks:
                for p in written:
                    p.unlink(missing_ok=True)
                raise SystemExit(f"{path.name} still holds credentials {leaks}; nothing kept")
    return written


def main() -> None:
    for path in record_all():
        count = len(yaml.safe_load(path.read_text())["interactions"])
        print(f"wrote {path.relative_to(REPO_ROOT)} ({count} interactions)")


if __name__ == "__main__":
    main()
