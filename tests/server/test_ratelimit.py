"""Rate limits: headers on every limited route, 429 in the envelope, shared through Redis."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import pytest

from ..support import TEST_REDIS_URL, new_account, redis_answers

REDIS_URL = TEST_REDIS_URL


def test_headers_and_429(make_server: Any) -> None:
    live = make_server(rate_limit="5/minute")
    # new_account spends two requests of this credential (POST /sellers, /wallet-keys)
    acct_headers = {"Authorization": f"Bearer {new_account(live.url).owner_jwt}"}
    seen = []
    for _ in range(3):
        r = httpx.get(live.url + "/sellers", headers=acct_headers)
        assert r.status_code == 200
        assert r.headers["x-ratelimit-limit"] == "5"
        seen.append(int(r.headers["x-ratelimit-remaining"]))
        assert int(r.headers["x-ratelimit-reset"]) >= int(time.time())
    assert seen == [2, 1, 0]
    r = httpx.get(live.url + "/sellers", headers=acct_headers)
    assert r.status_code == 429
    body = r.json()
    assert body["error"]["code"] == "rate_limited"
    assert body["request_id"] == r.headers["x-request-id"]
    assert 1 <= int(r.headers["retry-after"]) <= 60
    assert r.headers["x-ratelimit-remaining"] == "0"


def test_limits_are_per_credential(make_server: Any) -> None:
    live = make_server(rate_limit="4/minute")
    a, b = new_account(live.url), new_account(live.url)  # two requests each

    def sellers(owner_jwt: str) -> int:
        return httpx.get(
            live.url + "/sellers", headers={"Authorization": f"Bearer {owner_jwt}"}
        ).status_code

    assert [sellers(a.owner_jwt) for _ in range(3)][-1] == 429
    assert sellers(b.owner_jwt) == 200


def test_signup_has_its_own_tighter_limit(make_server: Any) -> None:
    live = make_server(signup_rate_limit="2/minute")
    codes = [
        httpx.post(live.url + "/owners", json={"email": f"s{i}@example.com"}).status_code
        for i in range(3)
    ]
    assert codes == [201, 201, 429]


def test_unknown_credentials_are_limited_too(make_server: Any) -> None:
    live = make_server(rate_limit="2/minute")
    guess = {"Authorization": "Bearer svc_sk_test_guess"}
    codes = [httpx.get(live.url + "/resources", headers=guess).status_code for _ in range(3)]
    assert codes == [401, 401, 429]


@pytest.mark.skipif(not redis_answers(), reason=f"no Redis answers at {REDIS_URL}")
def test_redis_storage_shares_counts_between_processes(make_server: Any) -> None:
    one = make_server(rate_limit="5/minute", rate_limit_storage=REDIS_URL)
    two = make_server(rate_limit="5/minute", rate_limit_storage=REDIS_URL)
    headers = {"Authorization": f"Bearer {new_account(one.url).owner_jwt}"}
    codes = [
        httpx.get(server.url + "/sellers", headers=headers).status_code
        for server in (one, two, one, two, one, two)
    ]
    assert codes == [200, 200, 200, 429, 429, 429]  # new_account spent two


def test_in_memory_windows_slide_and_start_no_threads() -> None:
    """``memory://`` counts in the process (``_LocalWindows``): a moving window, exact,
    and no timer thread per hit (limits' own memory storage started one every 10 ms)."""
    from reference_server.web.errors import ApiError
    from reference_server.web.ratelimit import RateLimiter

    limiter = RateLimiter("memory://")
    threads = threading.active_count()
    remaining = [
        int(limiter.hit("3/second", "ns", "who")["X-RateLimit-Remaining"]) for _ in range(3)
    ]
    assert remaining == [2, 1, 0] and threading.active_count() == threads
    with pytest.raises(ApiError) as refused:
        limiter.hit("3/second", "ns", "who")
    assert refused.value.code == "rate_limited"
    assert refused.value.headers["Retry-After"] == "1"
    assert limiter.hit("3/second", "ns", "someone else")["X-RateLimit-Remaining"] == "2"
    time.sleep(1.05)  # the first three left the window
    headers = limiter.hit("3/second", "ns", "who")
    assert headers["X-RateLimit-Remaining"] == "2"
    assert int(headers["X-RateLimit-Reset"]) >= int(time.time()) + 1


def test_in_memory_windows_forget_idle_keys() -> None:
    from reference_server.web.ratelimit import _LocalWindows

    windows = _LocalWindows()
    windows.SWEEP_SECONDS = 0.0
    assert windows.hit("a", 2, 0.1)[0] and windows.hit("a", 2, 0.1)[0]
    assert not windows.hit("a", 2, 0.1)[0]
    time.sleep(0.15)
    assert windows.hit("b", 2, 10)[2] == 1  # the sweep dropped "a", idle past its window
    assert set(windows._windows) == {"b"}
    assert windows.hit("a", 2, 0.1)[2] == 1
