"""Per-call time of ``svc.webhooks.verify`` against ``standardwebhooks``' ``Webhook.verify``.

Run: ``python bench/webhook_verify.py`` (needs the ``standardwebhooks`` package from
``.[dev]``; about 15 s).

Both libraries verify the same body bytes, each signed under its own scheme (svc: hex
HMAC over ``X-Svc-*`` headers keyed with the secret string; standardwebhooks: base64 HMAC
over ``webhook-*`` headers keyed with the base64-decoded ``whsec_`` secret), with a fresh
timestamp, and both parse the JSON.  svc then also builds a typed ``svc.Event`` (cattrs),
which standardwebhooks does not: that extra work is part of what is measured.
"""

from __future__ import annotations

import base64
import json
import platform
import secrets
import time
import timeit
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from standardwebhooks import Webhook

import svc
from svc import webhooks
from svc.wire import structure

SIZES = (1024, 64 * 1024)
REPEAT = 7  # best of REPEAT rounds, each at least MIN_ROUND seconds long
MIN_ROUND = 0.2


def event_body(event_id: str, size: int) -> bytes:
    """A payment.succeeded event of exactly ``size`` bytes (padded in metadata)."""
    document: dict[str, Any] = {
        "id": event_id,
        "type": "payment.succeeded",
        "created_at": "2026-11-21T12:00:00Z",
        "data": {
            "ok": True,
            "type": "resource",
            "rail": "x402",
            "receipt_id": "rcpt_01JD7Q4V",
            "request_id": "req_01JD7Q4V",
            "resource_id": "res_01JD7Q4V",
            "short_id": "r7q4v",
            "path_or_tool": "/v1/report",
            "metadata": {"sku_kind": "credit_topup", "credits": 100, "note": ""},
            "seller_id": "sel_01JD7Q4V",
            "amount": "0.05",
            "platform_fee": "0.001",
            "processor_payment_intent_id": "pi_01JD7Q4V",
            "seller_balance": "12.30",
            "environment": "test",
            "settlement": "processor_deposit",
        },
    }
    base = len(json.dumps(document, separators=(",", ":")).encode())
    if base > size:
        raise ValueError(f"the event alone is {base} bytes, more than {size}")
    document["data"]["metadata"]["note"] = "x" * (size - base)
    body = json.dumps(document, separators=(",", ":")).encode()
    assert len(body) == size
    return body


def best_per_call(calls: Sequence[Callable[[], object]]) -> list[float]:
    """Seconds per call of each: the fastest of REPEAT rounds (the least disturbed).

    Rounds of the different calls alternate, so a busy machine slows them alike.
    """
    numbers = [calls_per_round(call) for call in calls]
    best = [float("inf")] * len(calls)
    for _ in range(REPEAT):
        for i, (call, number) in enumerate(zip(calls, numbers, strict=True)):
            best[i] = min(best[i], timeit.timeit(call, number=number) / number)
    return best


def calls_per_round(call: Callable[[], object]) -> int:
    number = 1
    while True:
        elapsed = timeit.timeit(call, number=number)
        if elapsed >= MIN_ROUND:
            return number
        number = max(number * 2, int(number * MIN_ROUND / max(elapsed, 1e-9) * 1.1))


def measure(size: int) -> tuple[float, float, float]:
    event_id = "evt_01JD7Q4V"
    body = event_body(event_id, size)
    now = int(time.time())  # the run takes seconds, well inside the 300 s tolerance

    svc_secret = "whsec_" + secrets.token_hex(16)
    svc_headers = webhooks.headers(svc_secret, webhook_id=event_id, timestamp=now, body=body)

    sw_secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    sw = Webhook(sw_secret)
    sw_headers = {
        "webhook-id": event_id,
        "webhook-timestamp": str(now),
        "webhook-signature": sw.sign(
            event_id, datetime.fromtimestamp(now, tz=UTC), body.decode("utf-8")
        ),
    }

    def svc_verify() -> svc.Event:
        return webhooks.verify(svc_secret, body, svc_headers)

    def sw_verify() -> Any:
        return sw.verify(body, sw_headers)

    # Both must succeed before their speed means anything.
    assert svc_verify().id == event_id
    assert sw_verify()["id"] == event_id

    document = json.loads(body)

    def svc_typing() -> svc.Event:
        return structure(document, svc.Event)

    svc_s, sw_s, typing_s = best_per_call([svc_verify, sw_verify, svc_typing])
    return svc_s, sw_s, typing_s


def main() -> None:
    print(
        f"webhook verify, Python {platform.python_version()}, "
        f"best of {REPEAT} rounds of >= {MIN_ROUND} s each"
    )
    header = (
        f"{'payload':>8}  {'svc µs/call':>12}  {'standardwebhooks µs/call':>25}"
        f"  {'svc/standardwebhooks':>20}"
    )
    print(header)
    print("-" * len(header))
    typing_costs = []
    for size in SIZES:
        svc_s, sw_s, typing_s = measure(size)
        typing_costs.append(f"{typing_s * 1e6:.1f} µs at {size // 1024} KB")
        print(
            f"{size // 1024:>5} KB  {svc_s * 1e6:>12.1f}  {sw_s * 1e6:>25.1f}"
            f"  {svc_s / sw_s:>20.2f}"
        )
    print(
        "svc's time includes building the typed svc.Event from the parsed JSON "
        f"({', '.join(typing_costs)}), which standardwebhooks does not do."
    )


if __name__ == "__main__":
    main()
