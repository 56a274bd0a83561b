"""A running double for tests: localstripe as a subprocess and the double in a uvicorn
thread, both on loopback, with typed helpers for the control API."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import suppress
from typing import Any

import attrs
import httpx
import stripe

from ..support import free_port, serve_asgi
from .app import build_app

__all__ = ["StripeDouble", "running_stripe_double"]

# The SDK reports request timings to Stripe by default; nothing leaves loopback here.
stripe.enable_telemetry = False


@attrs.define
class StripeDouble:
    api_base: str
    localstripe: str
    http: httpx.Client

    def client(
        self,
        secret_key: str,
        *,
        max_network_retries: int = 0,
        stripe_account: str | None = None,
    ) -> stripe.StripeClient:
        return stripe.StripeClient(
            secret_key,
            base_addresses={"api": self.api_base},
            max_network_retries=max_network_retries,
            stripe_account=stripe_account,
        )

    def _post(self, path: str, body: dict[str, Any] | None = None) -> Any:
        answer = self.http.post(path, json=body or {})
        if answer.status_code >= 400 and answer.status_code != 402:
            raise RuntimeError(f"{path}: {answer.status_code} {answer.text}")
        return answer.json()

    def set_webhook(self, url: str, secret: str) -> None:
        self._post("/_double/webhooks", {"url": url, "secret": secret})

    def complete_account(self, acct: str) -> dict[str, Any]:
        result: dict[str, Any] = self._post(f"/_double/accounts/{acct}/complete")
        return result

    def require(self, acct: str, due: list[str]) -> dict[str, Any]:
        result: dict[str, Any] = self._post(
            f"/_double/accounts/{acct}/requirements", {"currently_due": due}
        )
        return result

    def settle_payout(
        self,
        po: str,
        outcome: str = "paid",
        *,
        failure_code: str | None = None,
        failure_message: str | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"outcome": outcome}
        if failure_code is not None:
            body["failure_code"] = failure_code
        if failure_message is not None:
            body["failure_message"] = failure_message
        result: dict[str, Any] = self._post(f"/_double/payouts/{po}/settle", body)
        return result

    def pay_checkout(self, cs: str, card: str = "4242424242424242") -> dict[str, Any]:
        """``{"paid": bool, "object": the session (paid) or the failed PaymentIntent}``."""
        result: dict[str, Any] = self._post(f"/_double/checkout/{cs}/pay", {"card": card})
        return result

    def abandon_checkout(self, cs: str) -> dict[str, Any]:
        result: dict[str, Any] = self._post(f"/_double/checkout/{cs}/abandon")
        return result

    def fault(
        self, path_prefix: str, status: int | None = None, times: int = 1, *, drop: bool = False
    ) -> None:
        body: dict[str, Any] = {"path_prefix": path_prefix, "times": times}
        if drop:
            body["drop"] = True
        else:
            body["status"] = status
        self._post("/_double/faults", body)

    def pend_refunds(self, times: int = 1) -> None:
        """The next ``times`` refunds answer ``pending`` and send no ``charge.refunded``."""
        self._post("/_double/refunds/pending", {"times": times})

    def set_platform_balance(self, available: int) -> None:
        self._post("/_double/platform-balance", {"available": available})

    def requests(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.http.get("/_double/requests").json()
        return result

    def deliveries(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.http.get("/_double/deliveries").json()
        return result

    def redeliver(self, evt: str) -> None:
        self._post(f"/_double/events/{evt}/redeliver")

    def reset(self) -> None:
        self._post("/_double/reset")


def _start_localstripe() -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "localstripe", "--port", str(port), "--from-scratch"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        with suppress(httpx.HTTPError):
            if httpx.get(f"{url}/v1/balance", auth=("sk_test_probe", "")).status_code == 200:
                return proc, url
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("localstripe did not start")
        time.sleep(0.1)


def running_stripe_double() -> Iterator[StripeDouble]:
    proc, localstripe = _start_localstripe()
    try:
        app, _state = build_app(localstripe)
        live = serve_asgi(app, lifespan="on")
        try:
            with httpx.Client(base_url=live.url, timeout=30) as http:
                double = StripeDouble(api_base=live.url, localstripe=localstripe, http=http)
                double.reset()
                yield double
        finally:
            live.server.should_exit = True
            live.thread.join(10)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
