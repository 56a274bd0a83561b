"""The shortcuts of svc._webhook_headers give what the general rule gives, or step aside.

``from_dict`` and ``from_raw`` must return exactly what ``read`` returns when they return
anything, and ``None`` whenever ``read`` would refuse; ``verify`` then behaves the same
whichever path ran.  Each mapping below is read twice, so the second read goes through the
cached shape of its names.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from starlette.datastructures import Headers

from svc import WebhookVerificationError, _webhook_headers, webhooks

ID, TS, SIG = "X-Svc-Webhook-Id", "X-Svc-Timestamp", "X-Svc-Signature"
GOOD = {ID: "evt_1", TS: "1795003200", SIG: "v1," + "ab" * 32}
EXTRA = {"Content-Type": "application/json", "Host": "example.test", "X-Svc-Signature-Old": "x"}


def spellings(name: str) -> list[str]:
    return [name, name.lower(), name.upper(), name.swapcase(), "x-SVC-" + name[6:].lower()]


def dict_cases() -> dict[str, dict[Any, Any]]:
    cases: dict[str, dict[Any, Any]] = {}
    for i, (a, b, c) in enumerate(
        itertools.islice(itertools.product(spellings(ID), spellings(TS), spellings(SIG)), 40)
    ):
        cases[f"spelling {i}"] = {a: GOOD[ID], b: GOOD[TS], c: GOOD[SIG]}
    cases["extra headers first"] = {**EXTRA, **GOOD}
    cases["extra headers after"] = {**GOOD, **EXTRA}
    cases["repeated in two cases"] = {**GOOD, SIG.lower(): GOOD[SIG]}
    cases["repeated in mixed case"] = {**GOOD, "x-Svc-Timestamp": GOOD[TS]}
    for name in GOOD:
        cases[f"{name} missing"] = {k: v for k, v in GOOD.items() if k != name}
        cases[f"{name} empty"] = {**GOOD, name: ""}
        cases[f"{name} bytes"] = {**GOOD, name: GOOD[name].encode()}
        cases[f"{name} None"] = {**GOOD, name: None}
        cases[f"{name} str subclass"] = {**GOOD, name: type("S", (str,), {})(GOOD[name])}
    cases["a bytes name beside"] = {**GOOD, b"x-svc-timestamp": b"1"}
    cases["an int name beside"] = {**GOOD, 7: "x"}
    cases["a non-ASCII name beside"] = {**GOOD, "X-Ünicode": "x"}
    cases["Kelvin sign in the id's name"] = {
        **GOOD,
        "X-Svc-Webhoo\u212a-Id": "evt_2",  # str.lower() makes it "x-svc-webhook-id"
    }
    cases["Kelvin sign only"] = {
        "X-Svc-Webhoo\u212a-Id": GOOD[ID],
        TS: GOOD[TS],
        SIG: GOOD[SIG],
    }
    cases["a longer name containing ours"] = {**GOOD, "X-Svc-Timestamp-Sent": "1"}
    cases["empty"] = {}
    return cases


def raw_cases() -> dict[str, list[tuple[Any, Any]]]:
    pairs = [(k.lower().encode(), v.encode()) for k, v in GOOD.items()]
    extra = [(k.lower().encode(), v.encode()) for k, v in EXTRA.items()]
    sig = (SIG.lower().encode(), GOOD[SIG].encode())
    return {
        "lowercase": pairs,
        "canonical case": [(k.encode(), v.encode()) for k, v in GOOD.items()],
        "mixed case": [(k.swapcase().encode(), v.encode()) for k, v in GOOD.items()],
        "with extra headers": extra + pairs,
        "repeated signature": [*pairs, sig],
        "repeated in two cases": [*pairs, (SIG.encode(), GOOD[SIG].encode())],
        "signature missing": pairs[:2],
        "empty value": [*pairs[:2], (sig[0], b"")],
        "non-ASCII value": [*pairs[:2], (sig[0], "v1,\u00e9".encode("latin-1"))],
        "UTF-8 value": [*pairs[:2], (sig[0], "v1,\u00e9".encode())],
        "non-ASCII name beside": [*pairs, ("x-\u00fc".encode("latin-1"), b"x")],
        "non-ASCII value beside": [*pairs, (b"x-note", "\u00fc".encode())],
        "a longer name containing ours": [*pairs, (b"x-svc-signature-old", b"x")],
        "empty": [],
    }


def outcome(call: Callable[[], Any]) -> Any:
    try:
        return ("ok", call())
    except WebhookVerificationError as exc:
        return ("refused", str(exc))
    except Exception as exc:
        return ("error", type(exc).__name__, str(exc))


def check_agrees(mapping: Any, shortcut: Callable[[Any], Any]) -> None:
    expected = outcome(lambda: _webhook_headers.read(mapping))
    for _ in range(2):  # the second read uses the cached shape
        got = shortcut(mapping)
        if got is not None:
            assert ("ok", got) == expected
            assert all(type(value) is str for value in got)


@pytest.mark.parametrize("case", list(dict_cases()))
def test_dict_shortcut_agrees_with_the_rule(case: str) -> None:
    check_agrees(dict_cases()[case], _webhook_headers.from_dict)


RAW_KINDS: dict[str, Callable[[list[tuple[Any, Any]]], Any]] = {
    "starlette": lambda raw: Headers(raw=raw),
    "httpx": lambda raw: httpx.Headers(raw),
}


@pytest.mark.parametrize("case", list(raw_cases()))
@pytest.mark.parametrize("kind", RAW_KINDS)
def test_raw_shortcut_agrees_with_the_rule(case: str, kind: str) -> None:
    check_agrees(RAW_KINDS[kind](raw_cases()[case]), _webhook_headers.from_raw)


@pytest.mark.parametrize(
    "case", ["lowercase", "canonical case", "mixed case", "with extra headers"]
)
def test_the_usual_raw_headers_take_the_shortcut(case: str) -> None:
    for headers in (Headers(raw=raw_cases()[case]), httpx.Headers(raw_cases()[case])):
        assert _webhook_headers.from_raw(headers) == tuple(GOOD.values())


def test_the_usual_dicts_take_the_shortcut() -> None:
    for case in ("spelling 0", "spelling 7", "extra headers first", "extra headers after"):
        assert _webhook_headers.from_dict(dict_cases()[case]) == tuple(GOOD.values())


def test_a_cached_shape_still_checks_each_value() -> None:
    assert _webhook_headers.from_dict(dict(GOOD)) == tuple(GOOD.values())
    assert _webhook_headers.from_dict({**GOOD, TS: ""}) is None  # same names, empty value
    with pytest.raises(WebhookVerificationError, match="X-Svc-Timestamp is empty"):
        _webhook_headers.read({**GOOD, TS: ""})


def test_other_mappings_and_header_classes_are_left_to_the_rule() -> None:
    class MyHeaders(dict[str, str]):
        pass

    assert _webhook_headers.from_raw(MyHeaders(GOOD)) is None
    assert _webhook_headers.from_raw(list(GOOD.items())) is None

    class StarletteSubclass(Headers):
        @property
        def raw(self) -> list[tuple[bytes, bytes]]:
            raise AssertionError("a subclass's raw is not trusted")

    headers = StarletteSubclass(headers={k.lower(): v for k, v in GOOD.items()})
    assert _webhook_headers.from_raw(headers) is None
    assert _webhook_headers.read(headers) == tuple(GOOD.values())


def test_raw_pairs_that_are_not_byte_pairs_are_left_to_the_rule() -> None:
    for raw in ([("x-svc-timestamp", "1")], [(b"a",)], [{"a": 1}], [([1], b"x")]):
        assert _webhook_headers.from_raw(Headers(raw=raw)) is None  # type: ignore[arg-type]


def test_the_shape_caches_stay_bounded() -> None:
    for i in range(3 * _webhook_headers._SHAPES_MAX):
        _webhook_headers.from_dict({**GOOD, f"x-extra-{i}": "1"})
        _webhook_headers.from_raw(Headers(raw=[*raw_cases()["lowercase"], (b"x-%d" % i, b"1")]))
    assert len(_webhook_headers._DICT_SHAPES) <= _webhook_headers._SHAPES_MAX
    assert len(_webhook_headers._RAW_SHAPES) <= _webhook_headers._SHAPES_MAX


# --- through verify -----------------------------------------------------------------------

SECRET = "whsec_shortcuts"
NOW = 1_795_003_200
BODY = (
    b'{"id":"evt_1","type":"payment.succeeded","created_at":"2026-11-21T12:00:00Z",'
    b'"data":{"receipt_id":"rcpt_1"}}'
)


def signed(**changes: str) -> dict[str, str]:
    headers = webhooks.headers(SECRET, webhook_id="evt_1", timestamp=NOW, body=BODY)
    headers.update(changes)
    return headers


def verify(headers: Any, **kwargs: Any) -> Any:
    return webhooks.verify(SECRET, BODY, headers, now=lambda: NOW, **kwargs)


SHAPES: dict[str, Callable[[dict[str, str]], Any]] = {
    "mixed-case dict": lambda h: {k.swapcase(): v for k, v in h.items()},
    "lowercase dict with extras": lambda h: {**EXTRA, **{k.lower(): v for k, v in h.items()}},
    "starlette mixed-case raw": lambda h: Headers(
        raw=[(k.encode(), v.encode()) for k, v in h.items()]
    ),
    "httpx": lambda h: httpx.Headers(h),
}


@pytest.mark.parametrize("shape", SHAPES)
def test_verify_reads_any_case_through_the_shortcuts(shape: str) -> None:
    assert verify(SHAPES[shape](signed())).id == "evt_1"


def test_verify_refuses_a_header_repeated_in_a_multi_value_mapping() -> None:
    good = signed()
    raw = [(k.lower().encode(), v.encode()) for k, v in good.items()]
    with pytest.raises(WebhookVerificationError, match="X-Svc-Timestamp appears more than once"):
        verify(Headers(raw=[*raw, (TS.lower().encode(), good[TS].encode())]))
    # httpx joins a repeat with ", ": no longer integer seconds.
    with pytest.raises(WebhookVerificationError, match="X-Svc-Timestamp must be integer"):
        verify(httpx.Headers([*raw, (TS.lower().encode(), good[TS].encode())]))


def test_verify_with_several_signatures_and_secrets() -> None:
    good = signed()[SIG]
    other = "v1," + "0" * 64
    assert verify(signed(**{SIG: f"{other} {good}"})).id == "evt_1"
    assert verify(signed(**{SIG: f"{good} {other}"})).id == "evt_1"
    event = webhooks.verify(("whsec_old", SECRET), BODY, signed(), now=lambda: NOW)
    assert event.id == "evt_1"
    with pytest.raises(WebhookVerificationError, match="no signature in X-Svc-Signature"):
        webhooks.verify(("whsec_old", "whsec_older"), BODY, signed(), now=lambda: NOW)
    with pytest.raises(WebhookVerificationError, match="no signature in X-Svc-Signature"):
        verify(signed(**{SIG: f"{other} {other}"}))


def test_verify_words_a_stale_timestamp_on_the_usual_path() -> None:
    stale = str(int(time.time()) - 3600)  # the timestamp is checked before the signature
    with pytest.raises(WebhookVerificationError, match=r"too old: 360\d s away"):
        webhooks.verify(SECRET, BODY, signed(**{TS: stale}))
    with pytest.raises(WebhookVerificationError, match="too far in the future"):
        webhooks.verify(SECRET, BODY, signed(**{TS: str(10**11)}))
