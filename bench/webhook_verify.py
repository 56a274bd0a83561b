"""Per-call time of ``svc.webhooks.verify`` against ``standardwebhooks``' ``Webhook.verify``
and against the floor, in the same run.

Run: ``python bench/webhook_verify.py`` (needs the ``standardwebhooks`` package from
``.[dev]``; about 15 s; ``--quick`` about 3 s; ``--json PATH`` writes the protocol rows of
bench/_report.py).

Both libraries verify the same body bytes, each signed under its own scheme (svc: hex
HMAC over ``X-Svc-*`` headers keyed with the secret string; standardwebhooks: base64 HMAC
over ``webhook-*`` headers keyed with the base64-decoded ``whsec_`` secret), with a fresh
timestamp, and both parse the JSON.  svc returns an ``svc.Event`` whose ``data`` is typed
on first read; the typing is timed on its own and printed beside.

The floor is the work no verify can skip: HMAC-SHA256 over ``{id}.{timestamp}.{body}``
(keyed state copied, the fastest way), one constant-time compare, ``json.loads`` of the
body.  Reading the headers, checking the timestamp and the event envelope are what svc
adds to it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import platform
import secrets
import time
import timeit
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from _harness import bench_parser
from _report import time_ratio_row, write_rows
from standardwebhooks import Webhook

import svc
from svc import webhooks
from svc.wire import structure

SIZES = (1024, 64 * 1024)
REPEAT = 7  # best of REPEAT rounds, each at least MIN_ROUND seconds long
MIN_ROUND = 0.2
QUICK_REPEAT, QUICK_MIN_ROUND = 3, 0.05
TARGET_SW = {1024: 1.0, 64 * 1024: 1.05}  # svc / standardwebhooks, at most
TARGET_FLOOR = 1.3  # svc / floor at 1 KB, at most


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


class Times:
    """Best seconds per call at one payload size."""

    def __init__(self, svc_s: float, sw_s: float, floor_s: float, typing_s: float) -> None:
        self.svc, self.sw, self.floor, self.typing = svc_s, sw_s, floor_s, typing_s


def measure(size: int) -> Times:
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

    keyed = hmac.new(svc_secret.encode(), digestmod=hashlib.sha256)
    signed_prefix = f"{event_id}.{now}.".encode()
    signature = svc_headers[webhooks.SIGNATURE_HEADER].removeprefix("v1,")

    def floor() -> Any:
        mac = keyed.copy()
        mac.update(signed_prefix)
        mac.update(body)
        if not hmac.compare_digest(mac.hexdigest(), signature):
            raise AssertionError("the floor's signature does not match")
        return json.loads(body.decode("utf-8"))

    # All must succeed before their speed means anything.
    assert svc_verify().id == event_id
    assert isinstance(svc_verify().data, svc.PaymentSucceededData)
    assert sw_verify()["id"] == event_id
    assert floor()["id"] == event_id

    document = json.loads(body)

    def svc_typing() -> Any:
        return structure(document["data"], svc.PaymentSucceededData)

    svc_s, sw_s, floor_s, typing_s = best_per_call([svc_verify, sw_verify, floor, svc_typing])
    return Times(svc_s, sw_s, floor_s, typing_s)


def protocol_rows(times: dict[int, Times]) -> list[dict[str, Any]]:
    """The issue's three figures: 1 KB vs standardwebhooks and vs the floor, 64 KB vs
    standardwebhooks (time ratios: lower is better)."""
    rows = []
    for size, t in times.items():
        label = f"webhooks.verify {size // 1024} KB"
        baselines = [("standardwebhooks", t.sw, TARGET_SW[size])]
        if size == 1024:
            baselines.append(("floor (HMAC + compare + json.loads)", t.floor, TARGET_FLOOR))
        for name, theirs, target in baselines:
            rows.append(
                time_ratio_row(
                    label, t.svc * 1e6, theirs * 1e6, unit="µs", baseline_name=name, target=target
                )
            )
    return rows


def main() -> None:
    global REPEAT, MIN_ROUND
    args = bench_parser(__doc__, "a short, noisier run").parse_args()
    if args.quick:
        REPEAT, MIN_ROUND = QUICK_REPEAT, QUICK_MIN_ROUND

    print(
        f"webhook verify, Python {platform.python_version()}, "
        f"best of {REPEAT} rounds of >= {MIN_ROUND} s each"
    )
    header = (
        f"{'payload':>8}  {'svc µs':>8}  {'standardwebhooks µs':>20}  {'floor µs':>9}"
        f"  {'svc/sw':>7}  {'svc/floor':>9}"
    )
    print(header)
    print("-" * len(header))
    times: dict[int, Times] = {}
    for size in SIZES:
        t = times[size] = measure(size)
        print(
            f"{size // 1024:>5} KB  {t.svc * 1e6:>8.1f}  {t.sw * 1e6:>20.1f}  {t.floor * 1e6:>9.1f}"
            f"  {t.svc / t.sw:>7.2f}  {t.svc / t.floor:>9.2f}"
        )
    typing_costs = ", ".join(f"{t.typing * 1e6:.1f} µs at {s // 1024} KB" for s, t in times.items())
    print(f"typing event.data on its first read (not in verify): {typing_costs}")
    if args.json:
        write_rows(args.json, protocol_rows(times))


if __name__ == "__main__":
    main()
