"""SSRF-safe outbound requests (``reference_server.outbound``), against real loopback servers.

No internet: every request that is allowed goes to a server in this process on
127.0.0.1; every request that must be refused is sent through a pool whose network
records any connection asked of it (and, for loopback targets, to the real server, which
counts its hits), so "nothing was sent" is checked, not assumed.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import attrs
import httpcore
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from reference_server import Settings
from reference_server.outbound import (
    AsyncPinnedClients,
    OutboundError,
    OutboundFailed,
    OutboundPolicy,
    OutboundRefused,
    address_refusal,
    check_url,
    send,
    send_sync,
    stream,
)

from ..support import PRODUCTION_KEYS, free_port

pytestmark = pytest.mark.timeout(30)

METADATA_URL = "http://169.254.169.254/latest/meta-data/"
BIG_TOTAL = 256 * 1024 * 1024


# -- a loopback HTTP(S) server that counts what reaches it ----------------------------------


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _reply(self, status: int, body: bytes, **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.record(self.path, dict(self.headers.items()), body)
        path = self.path.partition("?")[0]
        if path == "/echo":
            echoed = {
                "method": self.command,
                "path": self.path,
                "host": self.headers.get("Host"),
                "peer_port": self.client_address[1],  # tells one connection from another
                "headers": dict(self.headers.items()),
                "body": body.decode(),
            }
            self._reply(200, json.dumps(echoed).encode(), Content_Type="application/json")
        elif path == "/redirect":
            self._reply(302, b"", Location=METADATA_URL)
        elif path == "/and-408":  # an answer, then a 408 nobody asked for (idle timeout)
            self._reply(200, b"first")
            self.wfile.flush()
            self.server.stop.wait(0.05)  # after the answer was read
            self.wfile.write(b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n")
            self.wfile.flush()
        elif path == "/close":
            self._reply(200, str(self.client_address[1]).encode(), Connection="close")
            self.close_connection = True
        elif path == "/sized":
            size = int(self.path.partition("=")[2])
            self._reply(200, b"x" * size)
        elif path == "/big":
            self._big()
        elif path == "/slow":
            self.server.stop.wait(5)
            self._reply(200, b"late")
        elif path == "/trickle":
            self._trickle()
        elif path == "/drip":
            self._drip()
        else:
            self._reply(404, b"not found")

    def _big(self) -> None:
        """A body far past any limit, written until the client hangs up."""
        self.send_response(200)
        self.send_header("Content-Length", str(BIG_TOTAL))
        self.end_headers()
        chunk = b"y" * (1024 * 1024)
        try:
            while self.server.big_written < BIG_TOTAL:
                self.wfile.write(chunk)
                self.server.big_written += len(chunk)
        except OSError:
            pass
        finally:
            self.server.big_done.set()

    def _drip(self) -> None:
        """A chunked body: one chunk, then the rest only once the client has read it."""
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for number, chunk in enumerate([b"first", b"second", b"third"]):
            if number == 1:
                self.server.dripped.wait(5)
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")

    def _trickle(self) -> None:
        """Slowloris: headers that never finish."""
        try:
            self.wfile.write(b"HTTP/1.1 200 OK\r\n")
            for _ in range(100):
                if self.server.stop.wait(0.05):
                    break
                self.wfile.write(b"X")
        except OSError:
            pass

    do_GET = do_POST = _handle


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.hits: list[tuple[str, dict[str, str], bytes]] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.big_written = 0
        self.big_done = threading.Event()
        self.dripped = threading.Event()
        if tls is not None:
            self.socket = tls.wrap_socket(self.socket, server_side=True)
        self.port = self.server_address[1]
        self.thread = threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def record(self, path: str, headers: dict[str, str], body: bytes) -> None:
        with self.lock:
            self.hits.append((path, headers, body))

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # refused TLS handshakes and dropped clients are expected here

    def close(self) -> None:
        self.stop.set()
        self.shutdown()
        self.server_close()


@pytest.fixture(scope="module")
def web() -> Iterator[_Server]:
    server = _Server()
    yield server
    server.close()


@pytest.fixture
def fresh() -> Iterator[_Server]:
    """A server of one's own, for tests that look at server-side state."""
    server = _Server()
    yield server
    server.close()


# -- TLS: a private CA and a certificate for a made-up name ---------------------------------


def _certificates(directory: Path) -> tuple[Path, Path, bytes]:
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "outbound test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "hooks.test")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        # The name only -- deliberately no 127.0.0.1 SAN: a handshake that verified
        # against the connected IP instead of the name would fail.
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("hooks.test")]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([x509.OID_SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    cert_file, key_file = directory / "leaf.pem", directory / "leaf.key"
    cert_file.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file, ca.public_bytes(serialization.Encoding.PEM)


class _TLS:
    def __init__(self, directory: Path) -> None:
        cert_file, key_file, ca_pem = _certificates(directory)
        self.sni: list[str | None] = []
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_file, key_file)
        context.sni_callback = lambda _sock, name, _ctx: self.sni.append(name)
        self.server = _Server(tls=context)
        self.ca_pem = ca_pem.decode()

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cadata=self.ca_pem)


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_TLS]:
    setup = _TLS(tmp_path_factory.mktemp("tls"))
    yield setup
    setup.server.close()


# -- helpers -------------------------------------------------------------------------------


class _Resolver:
    """A fake DNS: a fixed table, counting its lookups."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.calls: list[tuple[str, int]] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append((host, port))
        if host not in self.table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return list(self.table[host])


class _AsyncResolver(_Resolver):
    async def __call__(self, host: str, port: int) -> list[str]:  # type: ignore[override]
        return super().__call__(host, port)


class _Recording(httpcore.AsyncMockBackend):
    """A network that records every connection asked of it, the TLS name it is asked to
    verify and every byte written to it; each connection answers one empty 200."""

    def __init__(self) -> None:
        super().__init__([b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"])
        self.connects: list[tuple[str, int]] = []
        self.sni: list[str | None] = []
        self.written = bytearray()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's signature
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.AsyncNetworkStream:
        self.connects.append((host, port))
        return _RecordingStream(self, list(self._buffer))

    def pool(self) -> AsyncPinnedClients:
        """A pool over this network (one request per connection, as without a pool)."""
        return AsyncPinnedClients(keep_alive=False, network_backend=self)

    def request(self) -> tuple[str, dict[str, str], bytes]:
        """The one request written: its request line, headers (lowercased names), body."""
        head, _, body = bytes(self.written).partition(b"\r\n\r\n")
        line, *fields = head.decode().split("\r\n")
        pairs = (field.partition(":") for field in fields)
        return line, {name.lower(): value.strip() for name, _, value in pairs}, body


class _RecordingStream(httpcore.AsyncMockStream):
    def __init__(self, network: _Recording, answer: list[bytes]) -> None:
        super().__init__(answer)
        self._network = network

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        self._network.written += buffer

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> httpcore.AsyncNetworkStream:
        self._network.sni.append(server_hostname)
        return self


DNS = {
    "hooks.test": ["127.0.0.1"],
    "internal.test": ["10.1.2.3"],
    "mixed.test": ["93.184.216.34", "10.0.0.5"],
    "mapped.test": ["::ffff:127.0.0.1"],
    "metadata.test": ["169.254.169.254"],
    "public.test": ["93.184.216.34"],
}


def production(**overrides: Any) -> OutboundPolicy:
    return OutboundPolicy(
        **{"allow_private": False, "https_only": False, "resolver": None, **overrides}
    )


def development(**overrides: Any) -> OutboundPolicy:
    return OutboundPolicy(**{"allow_private": True, "https_only": False, **overrides})


async def _pooled(
    url: str, policy: OutboundPolicy, pool: AsyncPinnedClients | None = None, **kwargs: Any
) -> Any:
    """``send`` through a pool (a fresh one unless given, closed afterwards)."""
    own = pool is None
    pool = pool or AsyncPinnedClients(connections=2)
    try:
        return await send(kwargs.pop("method", "GET"), url, policy=policy, pool=pool, **kwargs)
    finally:
        if own:
            await pool.aclose()


async def _send_by(how: str, url: str, policy: OutboundPolicy, **kwargs: Any) -> Any:
    """``send``, ``send_sync`` or ``send`` through a fresh pool (``how``), GET unless given."""
    if how == "pool":
        return await _pooled(url, policy, **kwargs)
    method = kwargs.pop("method", "GET")
    if how == "sync":
        return send_sync(method, url, policy=policy, **kwargs)
    return await send(method, url, policy=policy, **kwargs)


HOW = ["async", "sync", "pool"]


# -- URL and address checks (no I/O) --------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://127.9.9.9:8080/x",
        "http://10.0.0.1/",
        "http://172.16.5.4/",
        "http://192.168.1.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://100.64.0.1/",
        "http://198.18.0.1/",
        "http://0.0.0.0/",
        "http://224.0.0.1/",
        "http://255.255.255.255/",
        "http://240.0.0.1/",
        "http://192.0.2.10/",
        "http://203.0.113.5/",
        "http://[::1]/",
        "http://[::]/",
        "http://[::ffff:127.0.0.1]/",
        "http://[::ffff:7f00:1]/",
        "http://[::ffff:a9fe:a9fe]/",
        "http://[::127.0.0.1]/",
        "http://[64:ff9b::a00:1]/",
        "http://[2002:7f00:1::]/",
        "http://[2002:a9fe:a9fe::1]/",
        "http://[fe80::1]/",
        "http://[fe80::1%25eth0]/",
        "http://[fec0::1]/",
        "http://[fc00::1]/",
        "http://[fd12:3456::1]/",
        "http://[ff02::1]/",
        "http://[2001:db8::1]/",
        "http://[3fff::1]/",
        "http://localhost/",
        "http://LOCALHOST:8080/",
        "http://api.localhost/",
        # odd numeric spellings of 127.0.0.1, refused as ambiguous
        "http://2130706433/",
        "http://0x7f.1/",
        "http://0x7f000001/",
        "http://0177.0.0.1/",
        "http://127.1/",
        "http://127.0.0.1./",
        "http://017700000001/",
        "http://1.2.3.04/",
        "http://8.8.8.8.8/",
        "http://\uff11\uff12\uff17.\uff10.\uff10.\uff11/",  # full-width digits
        # userinfo
        "http://user:pass@example.com/",
        "http://example.com@127.0.0.1/",
        "http://@example.com/",
        "http://example.com\\@127.0.0.1/",
        # schemes and shapes
        "file:///etc/passwd",
        "ftp://example.com/",
        "gopher://example.com:70/",
        "dict://example.com:11211/",
        "javascript:alert(1)",
        "//example.com/",
        "http:///path",
        "http://",
        "http://example.com:0/",
        "http://example.com:65536/",
        "http://example.com:80x/",
        "http://example.com:/",
        "http://[::1/",
        "http://[127.0.0.1]/",
        "http://exa mple.com/",
        "http://example.com/\r\nHost: evil",
        "http://exa%2ample.com/",
        "",
    ],
)
def test_check_url_refuses(url: str) -> None:
    with pytest.raises(OutboundRefused) as info:
        check_url(url, production())
    assert info.value.reason and str(info.value) == info.value.reason
    assert isinstance(info.value, OutboundError)


def test_http_refused_when_https_only() -> None:
    policy = OutboundPolicy(https_only=True)
    with pytest.raises(OutboundRefused, match="only https"):
        check_url("http://example.com/hooks", policy)
    assert check_url("https://example.com/hooks", policy).port == 443


def test_check_url_accepts_and_normalises() -> None:
    policy = production()
    target = check_url("HTTPS://Hooks.Example.COM./a/b?c=d#frag", policy)
    assert (target.scheme, target.host, target.port, target.path, target.ip) == (
        "https",
        "hooks.example.com",
        443,
        "/a/b?c=d",
        None,
    )
    assert target.host_header == "hooks.example.com"
    assert check_url("http://example.com:8080", policy).host_header == "example.com:8080"
    assert check_url("http://example.com:8080", policy).path == "/"
    literal = check_url("https://[2606:4700:4700::1111]:8443/x", policy)
    assert literal.ip == ipaddress.ip_address("2606:4700:4700::1111")
    assert literal.host_header == "[2606:4700:4700::1111]:8443"
    assert check_url("http://8.8.8.8/", policy).ip == ipaddress.ip_address("8.8.8.8")
    assert check_url("https://bücher.example/", policy).host == "xn--bcher-kva.example"
    # outside production, loopback and private literals and localhost are fine ...
    assert check_url("http://127.0.0.1:9/", development()).ip is not None
    assert check_url("http://localhost:9/", development()).host == "localhost"
    # ... but the ambiguous spellings and userinfo are not
    for url in ("http://2130706433/", "http://0x7f.1/", "http://u:p@localhost/"):
        with pytest.raises(OutboundRefused):
            check_url(url, development())


@pytest.mark.parametrize(
    ("address", "forbidden"),
    [
        ("8.8.8.8", False),
        ("93.184.216.34", False),
        ("2606:4700:4700::1111", False),
        ("::ffff:8.8.8.8", False),
        ("64:ff9b::808:808", False),
        ("2002:808:808::1", False),
        ("127.0.0.1", True),
        ("169.254.169.254", True),
        ("100.127.255.255", True),
        ("198.19.255.255", True),
        ("0.0.0.0", True),  # noqa: S104 - an address the guard must refuse, not a bind
        ("224.0.0.251", True),
        ("::ffff:10.0.0.1", True),
        ("::ffff:0:a00:1", True),
        ("64:ff9b::7f00:1", True),
        ("64:ff9b:1::1", True),
        ("2002:c0a8:101::1", True),
        ("2001::1", True),
        ("fd00:ec2::254", True),
        ("fec0::1", True),
        ("::", True),
        ("::1", True),
    ],
)
def test_address_refusal(address: str, forbidden: bool) -> None:
    verdict = address_refusal(ipaddress.ip_address(address))
    assert (verdict is not None) is forbidden, verdict


def test_policy_from_settings_and_bounds() -> None:
    strict = OutboundPolicy.from_settings(Settings(env="production", **PRODUCTION_KEYS))
    assert (strict.allow_private, strict.https_only) == (False, True)
    dev = OutboundPolicy.from_settings(Settings(env="development"), read_timeout=3.0)
    assert (dev.allow_private, dev.https_only, dev.read_timeout) == (True, False, 3.0)
    assert OutboundPolicy().max_response_bytes == 64 * 1024
    for bad in ({"total_timeout": 0}, {"read_timeout": float("inf")}, {"max_response_bytes": 0}):
        with pytest.raises(ValueError):
            OutboundPolicy(**bad)


# -- refused: nothing is sent -------------------------------------------------------------


REFUSED_IN_PRODUCTION = [
    "http://127.0.0.1:{port}/echo",
    "http://localhost:{port}/echo",
    "http://hooks.test:{port}/echo",  # resolves to 127.0.0.1
    "http://mapped.test:{port}/echo",  # resolves to ::ffff:127.0.0.1
    "http://[::ffff:127.0.0.1]:{port}/echo",
    "http://[::1]:{port}/echo",
    "http://0.0.0.0:{port}/echo",
    "http://2130706433:{port}/echo",
    "http://0x7f.1:{port}/echo",
    "http://10.0.0.1/",
    "http://169.254.169.254/latest/meta-data/",
    "http://metadata.test/latest/meta-data/",
    "http://100.64.0.1/",
    "http://internal.test/",  # resolves to 10.1.2.3
    "http://mixed.test/",  # resolves to a public and a private address
    "http://user:pw@public.test/",
    "ftp://public.test/",
]


@pytest.mark.anyio
@pytest.mark.parametrize("template", REFUSED_IN_PRODUCTION)
async def test_refused_in_production_sends_nothing(web: _Server, template: str) -> None:
    url = template.format(port=web.port)
    before = len(web.hits)
    resolver = _Resolver(DNS)
    recording = _Recording()
    with pytest.raises(OutboundRefused):
        await send(
            "POST", url, content=b"{}", policy=production(resolver=resolver), pool=recording.pool()
        )
    # and with the real network stack (no pool), for the loopback ones
    with pytest.raises(OutboundRefused):
        await send("POST", url, content=b"{}", policy=production(resolver=resolver))
    with pytest.raises(OutboundRefused):
        send_sync("POST", url, content=b"{}", policy=production(resolver=resolver))
    assert recording.connects == []
    assert len(web.hits) == before
    assert len(resolver.calls) <= 3  # never more than one lookup per send


@pytest.mark.anyio
async def test_one_private_address_among_public_ones_is_refused() -> None:
    resolver = _Resolver({"mixed.test": ["93.184.216.34", "2606:4700::1", "127.0.0.1"]})
    recording = _Recording()
    with pytest.raises(OutboundRefused, match=r"resolves to 127\.0\.0\.1, a loopback"):
        await send(
            "GET",
            "https://mixed.test/",
            policy=production(resolver=resolver),
            pool=recording.pool(),
        )
    assert recording.connects == []


@pytest.mark.anyio
async def test_allowed_public_name_is_pinned_to_its_address() -> None:
    """With a recording network (no internet): what would go out for a public name."""
    resolver = _Resolver(DNS)
    recording = _Recording()
    response = await send(
        "post",
        "https://public.test/hooks?x=1",
        headers={"X-Svc-Signature": "v1,abc", "Host": "evil.test", "Content-Length": "9"},
        content=b'{"a": 1}',
        policy=production(resolver=resolver),
        pool=recording.pool(),
    )
    assert response.status == 200 and response.ip == "93.184.216.34"
    # connected to the checked address; TLS (SNI and verification) on the name
    assert recording.connects == [("93.184.216.34", 443)]
    assert recording.sni == ["public.test"]
    line, headers, body = recording.request()
    assert line == "POST /hooks?x=1 HTTP/1.1"
    assert headers["host"] == "public.test"  # the caller's Host is not used
    assert headers["content-length"] == "8" and body == b'{"a": 1}'
    assert headers["x-svc-signature"] == "v1,abc"
    assert headers["connection"] == "close"
    assert resolver.calls == [("public.test", 443)]


@pytest.mark.anyio
async def test_request_checks_before_sending() -> None:
    recording = _Recording()
    policy = production(resolver=_Resolver(DNS), max_request_bytes=10)
    url = "https://public.test/"
    for method, headers, content, refusal in [
        ("POST", None, b"x" * 11, "larger than"),
        ("POST", {"X-A": "1\r\nX-B: 2"}, None, "malformed"),
        ("POST", {"X-A": "caf\u00e9"}, None, "malformed"),
        ("GET /x", None, None, "method"),
    ]:
        with pytest.raises(OutboundRefused, match=refusal):
            await send(
                method, url, headers=headers, content=content, policy=policy, pool=recording.pool()
            )
        with pytest.raises(OutboundRefused, match=refusal):
            send_sync(method, url, headers=headers, content=content, policy=policy)
    assert recording.connects == []


# -- allowed outside production, against the real loopback server --------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("how", HOW)
async def test_development_sends_to_localhost_with_host_header(web: _Server, how: str) -> None:
    resolver = _Resolver(DNS)
    headers: Any = [("X-Test", "yes")] if how == "sync" else {"X-Test": "yes"}  # either form
    url = f"http://hooks.test:{web.port}/echo?q=1"
    response = await _send_by(
        how,
        url,
        development(resolver=resolver),
        method="POST",
        headers=headers,
        content=b'{"hello": "world"}',
    )
    assert response.status == 200 and response.is_success and not response.truncated
    echoed = json.loads(response.body)
    assert echoed["method"] == "POST" and echoed["path"] == "/echo?q=1"
    assert echoed["host"] == f"hooks.test:{web.port}"
    assert echoed["body"] == '{"hello": "world"}'
    assert echoed["headers"]["X-Test"] == "yes"
    assert response.ip == "127.0.0.1" and 0 < response.elapsed < 5
    assert response.headers["content-type"] == "application/json"
    assert resolver.calls == [("hooks.test", web.port)]  # resolved once, then pinned


@pytest.mark.anyio
async def test_a_pool_reuses_a_connection_only_for_the_same_name_and_address(
    web: _Server,
) -> None:
    resolver = _Resolver({"a.test": ["127.0.0.1"], "b.test": ["127.0.0.1"]})
    policy = development(resolver=resolver)
    pool = AsyncPinnedClients(connections=1)

    async def echo(host: str, pooled: bool = True) -> dict[str, Any]:
        url = f"http://{host}:{web.port}/echo"
        response = await send("GET", url, policy=policy, pool=pool if pooled else None)
        return dict(json.loads(response.body))

    try:
        first, again, other = await echo("a.test"), await echo("a.test"), await echo("b.test")
        alone = await echo("a.test", pooled=False)
    finally:
        await pool.aclose()
    assert first["peer_port"] == again["peer_port"]  # kept alive, and reused
    assert "Connection" not in first["headers"]
    # the same address under another name is another connection (with TLS it would have
    # been verified for another name)
    assert other["peer_port"] != first["peer_port"] and other["host"] == f"b.test:{web.port}"
    # without a pool, a connection carries one request
    assert alone["headers"]["Connection"] == "close" and alone["peer_port"] != first["peer_port"]
    assert len(resolver.calls) == 4  # every send resolves and checks again


@pytest.mark.anyio
async def test_ip_literal_needs_no_resolver(web: _Server) -> None:
    resolver = _AsyncResolver(DNS)
    response = await send(
        "GET", f"http://127.0.0.1:{web.port}/echo", policy=development(resolver=resolver)
    )
    assert response.status == 200 and json.loads(response.body)["host"] == f"127.0.0.1:{web.port}"
    assert resolver.calls == []


@pytest.mark.anyio
async def test_system_resolver_for_localhost(web: _Server) -> None:
    response = await send("GET", f"http://localhost:{web.port}/echo", policy=development())
    assert response.status == 200 and response.ip == "127.0.0.1"
    assert json.loads(response.body)["host"] == f"localhost:{web.port}"


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["async", "pool"])
async def test_falls_through_to_next_checked_address_once_resolved(web: _Server, how: str) -> None:
    # 127.0.0.2 is loopback too, but nothing listens there on this port: refused.
    resolver = _AsyncResolver({"hooks.test": ["127.0.0.2", "127.0.0.1"]})
    response = await _send_by(
        how, f"http://hooks.test:{web.port}/echo", development(resolver=resolver)
    )
    assert response.status == 200 and response.ip == "127.0.0.1"
    assert len(resolver.calls) == 1


@pytest.mark.anyio
async def test_redirect_is_returned_not_followed(fresh: _Server) -> None:
    response = await send(
        "POST", f"http://127.0.0.1:{fresh.port}/redirect", content=b"{}", policy=development()
    )
    assert response.status == 302 and response.is_redirect and not response.is_success
    assert response.location == METADATA_URL
    assert [path for path, _, _ in fresh.hits] == ["/redirect"]  # one request, no follow-up
    sync = send_sync("GET", f"http://127.0.0.1:{fresh.port}/redirect", policy=development())
    assert (sync.status, sync.location) == (302, METADATA_URL)
    pooled = await _pooled(f"http://127.0.0.1:{fresh.port}/redirect", development())
    assert (pooled.status, pooled.location) == (302, METADATA_URL)
    assert len(fresh.hits) == 3


# -- bounds ---------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(("size", "truncated"), [(999, False), (1000, False), (1001, True)])
async def test_body_cap_boundaries(web: _Server, size: int, truncated: bool) -> None:
    url = f"http://127.0.0.1:{web.port}/sized?n={size}"
    policy = development(max_response_bytes=1000)
    for response in (await send("GET", url, policy=policy), send_sync("GET", url, policy=policy)):
        assert response.body == b"x" * min(size, 1000)
        assert response.truncated is truncated


@pytest.mark.anyio
@pytest.mark.parametrize(("how", "limit"), [("async", 4096), ("sync", 10), ("pool", 4096)])
async def test_big_body_is_cut_and_not_downloaded(fresh: _Server, how: str, limit: int) -> None:
    started = time.monotonic()
    response = await _send_by(
        how, f"http://127.0.0.1:{fresh.port}/big", development(max_response_bytes=limit)
    )
    assert response.body == b"y" * limit and response.truncated
    assert fresh.big_done.wait(5)
    # The server offered 256 MiB; once the client hung up, its writes failed after at
    # most the socket buffers' worth.
    assert fresh.big_written < 64 * 1024 * 1024
    assert time.monotonic() - started < 5


@pytest.mark.anyio
@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize(
    ("path", "limits", "failure"),
    [
        ("/slow", {"read_timeout": 0.3}, "timed out"),
        # Each byte arrives well within the read timeout; the total deadline still holds.
        ("/trickle", {"read_timeout": 3, "total_timeout": 0.5}, r"within 0\.5 s"),
    ],
    ids=["read timeout", "total timeout of a trickling server"],
)
async def test_timeouts_fail_fast(
    web: _Server, how: str, path: str, limits: dict[str, float], failure: str
) -> None:
    started = time.monotonic()
    with pytest.raises(OutboundFailed, match=failure):
        await _send_by(how, f"http://127.0.0.1:{web.port}{path}", development(**limits))
    assert time.monotonic() - started < 2


@pytest.mark.anyio
@pytest.mark.parametrize("sync", [False, True])
async def test_a_resolver_slower_than_the_total_deadline_sends_nothing(
    web: _Server, sync: bool
) -> None:
    """Resolution counts against the deadline on both paths (each enforces it its own way:
    the async one cancels the lookup, the blocking one checks the time left after it)."""
    url = f"http://hooks.test:{web.port}/echo"
    before = len(web.hits)
    started = time.monotonic()
    with pytest.raises(OutboundFailed, match=r"within 0\.3 s"):
        if sync:

            def slow(host: str, port: int) -> list[str]:
                time.sleep(0.6)
                return ["127.0.0.1"]

            send_sync("GET", url, policy=development(resolver=slow, total_timeout=0.3))
        else:

            async def aslow(host: str, port: int) -> list[str]:
                await anyio.sleep(5)
                return ["127.0.0.1"]

            await send("GET", url, policy=development(resolver=aslow, total_timeout=0.3))
    assert time.monotonic() - started < (1.5 if sync else 1)  # the async lookup is cancelled
    assert len(web.hits) == before


@pytest.mark.anyio
@pytest.mark.parametrize("how", HOW)
async def test_network_failures_are_outbound_failed(how: str) -> None:
    with pytest.raises(OutboundFailed, match="could not connect"):  # nothing listens there
        await _send_by(how, f"http://127.0.0.1:{free_port()}/", development())
    with pytest.raises(OutboundFailed, match=r"could not resolve nowhere\.test"):
        await _send_by(how, "http://nowhere.test/", development(resolver=_Resolver({})))
    empty = development(resolver=_Resolver({"empty.test": []}))
    with pytest.raises(OutboundFailed, match="did not resolve"):
        await _send_by(how, "http://empty.test/", empty)


def test_a_coroutine_resolver_works_on_the_sync_path(web: _Server) -> None:
    resolver = _AsyncResolver(DNS)
    url = f"http://hooks.test:{web.port}/echo"
    assert send_sync("GET", url, policy=development(resolver=resolver)).status == 200
    assert len(resolver.calls) == 1


# -- HTTPS: SNI and certificate verification on the name, connection on the pinned IP ------


@pytest.mark.anyio
@pytest.mark.parametrize("how", HOW)
async def test_https_pinned_to_ip_verifies_the_name(tls: _TLS, how: str) -> None:
    resolver = _Resolver({"hooks.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]})
    policy = development(resolver=resolver, https_only=True, tls=tls.client_context())
    url = f"https://hooks.test:{tls.server.port}/echo"
    pool = AsyncPinnedClients()  # one pool for every pooled request: no reuse across names
    pooled: dict[str, Any] = {"pool": pool} if how == "pool" else {}
    try:
        response = await _send_by(how, url, policy, method="POST", content=b"secure", **pooled)
        assert response.status == 200 and response.ip == "127.0.0.1"
        echoed = json.loads(response.body)
        assert (echoed["host"], echoed["body"]) == (f"hooks.test:{tls.server.port}", "secure")
        assert tls.sni[-1] == "hooks.test"
        assert resolver.calls == [("hooks.test", tls.server.port)]
        # Same IP, another name: the certificate does not match the name, so the handshake
        # fails -- verification is against the name, not the address connected to.
        hits = len(tls.server.hits)
        other = f"https://other.test:{tls.server.port}/echo"
        with pytest.raises(OutboundFailed, match=r"TLS .* failed") as info:
            await _send_by(how, other, policy, **pooled)
        assert "other.test" in str(info.value) and tls.sni[-1] == "other.test"
    finally:
        await pool.aclose()
    # And an untrusting policy (the default CA bundle) refuses the private CA.
    with pytest.raises(OutboundFailed, match="TLS"):
        await _send_by(how, url, attrs.evolve(policy, tls=None))
    assert len(tls.server.hits) == hits


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://[fe80::1]/",
        "http://[::ffff:169.254.169.254]/",
    ],
)
def test_link_local_is_refused_even_where_private_addresses_are_allowed(url: str) -> None:
    with pytest.raises(OutboundRefused, match="link-local"):
        check_url(url, OutboundPolicy(allow_private=True, https_only=False))


# -- the kept-alive pool (outbound/_pool.py) -------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(("size", "truncated"), [(0, False), (1000, False), (1001, True)])
async def test_pool_body_cap_and_reuse(web: _Server, size: int, truncated: bool) -> None:
    """A body read whole leaves its connection for the next request; a cut one does not."""
    policy = development(max_response_bytes=1000)
    pool = AsyncPinnedClients(connections=1)
    try:
        response = await _pooled(f"http://127.0.0.1:{web.port}/sized?n={size}", policy, pool)
        assert (response.body, response.truncated) == (b"x" * min(size, 1000), truncated)
        ports = []
        for _ in range(2):
            echoed = await _pooled(f"http://127.0.0.1:{web.port}/echo", policy, pool)
            ports.append(json.loads(echoed.body)["peer_port"])
        posted = await _pooled(
            f"http://127.0.0.1:{web.port}/echo", policy, pool, method="POST", content=b"ping"
        )
    finally:
        await pool.aclose()
    assert ports[0] == ports[1] == json.loads(posted.body)["peer_port"]
    assert json.loads(posted.body)["body"] == "ping"


@pytest.mark.anyio
async def test_pool_does_not_reuse_what_the_server_closes_or_what_idled_too_long(
    web: _Server,
) -> None:
    policy = development()
    pool = AsyncPinnedClients(connections=1, keepalive_expiry=0.2)
    url = f"http://127.0.0.1:{web.port}"
    try:
        closing = [int((await _pooled(url + "/close", policy, pool)).body) for _ in range(2)]
        first = json.loads((await _pooled(url + "/echo", policy, pool)).body)["peer_port"]
        await anyio.sleep(0.3)
        later = json.loads((await _pooled(url + "/echo", policy, pool)).body)["peer_port"]
    finally:
        await pool.aclose()
    assert closing[0] != closing[1] and first not in closing and later != first


@pytest.mark.anyio
async def test_pool_does_not_reuse_a_connection_the_server_wrote_to_while_idle(
    web: _Server,
) -> None:
    """What a server sends between requests (a 408 before it hangs up) is never read as
    the next request's answer: that connection is not reused."""
    policy = development()
    pool = AsyncPinnedClients(connections=1)
    url = f"http://127.0.0.1:{web.port}"
    try:
        first = await _pooled(url + "/and-408", policy, pool)
        await anyio.sleep(0.1)  # the 408 arrives while the connection is idle
        echoed = await _pooled(url + "/echo", policy, pool)
    finally:
        await pool.aclose()
    assert (first.status, first.body) == (200, b"first")
    assert echoed.status == 200 and json.loads(echoed.body)["path"] == "/echo"


@pytest.mark.anyio
async def test_pool_waits_for_a_free_connection(web: _Server) -> None:
    """Past ``connections`` at once, a request waits for one to be released."""
    policy = development()
    pool = AsyncPinnedClients(connections=1)
    ports: list[int] = []

    async def echo() -> None:
        response = await _pooled(f"http://127.0.0.1:{web.port}/echo", policy, pool)
        ports.append(json.loads(response.body)["peer_port"])

    try:
        async with anyio.create_task_group() as group:
            for _ in range(4):
                group.start_soon(echo)
    finally:
        await pool.aclose()
    assert len(ports) == 4 and len(set(ports)) == 1


# -- streaming (hosted gates relay a streamed answer as it arrives) -------------------------


@pytest.mark.anyio
async def test_a_stream_yields_each_chunk_before_the_upstream_sends_the_next(
    fresh: _Server,
) -> None:
    url = f"http://127.0.0.1:{fresh.port}/drip"
    async with stream("GET", url, policy=development()) as answer:
        assert answer.status == 200 and answer.ip == "127.0.0.1"
        chunks = answer.chunks()
        first = await chunks.__anext__()
        assert not fresh.dripped.is_set()  # the upstream is still waiting for us
        fresh.dripped.set()
        rest = b"".join([chunk async for chunk in chunks])
    assert first == b"first" and rest == b"secondthird"


@pytest.mark.anyio
async def test_a_stream_past_its_cap_fails_midway(fresh: _Server) -> None:
    fresh.dripped.set()
    url = f"http://127.0.0.1:{fresh.port}/drip"
    read = b""
    async with stream("GET", url, policy=development(max_response_bytes=8)) as answer:
        with pytest.raises(OutboundFailed, match="more than 8 bytes"):
            async for chunk in answer.chunks():
                read += chunk
    assert read == b"first"


@pytest.mark.anyio
@pytest.mark.parametrize("template", REFUSED_IN_PRODUCTION)
async def test_a_stream_refused_in_production_sends_nothing(web: _Server, template: str) -> None:
    before = len(web.hits)
    with pytest.raises(OutboundRefused):
        async with stream(
            "GET", template.format(port=web.port), policy=production(resolver=_Resolver(DNS))
        ):
            raise AssertionError("refused URLs are never opened")
    assert len(web.hits) == before
