import anyio
import httpx
import pytest

from ..rails.helpers import balance, funded_payer
from ..support import new_account
from reference_server.domain.open_rails import TEST_DEPOSIT_ADDRESS
from .helpers import PATH, mpp_top_up, owner_headers, x402_top_up


def test_quick(server) -> None:
    acct = new_account(server.url, "test")
    r = httpx.post(server.url + PATH, json={"amount": "2.50"}, headers=owner_headers(acct.owner_jwt))
    print(r.status_code, r.headers, r.text)
    payer = funded_payer(server, "5")
    before = balance(server.url, TEST_DEPOSIT_ADDRESS)
    r = anyio.run(x402_top_up, server.url, acct.owner_jwt, payer, "0.75")
    print(r.status_code, r.text)
    r = anyio.run(mpp_top_up, server.url, acct.owner_jwt, payer, "0.50")
    print(r.status_code, r.text)
    print(balance(server.url, TEST_DEPOSIT_ADDRESS) - before)
    r = httpx.get(server.url + PATH, headers=owner_headers(acct.owner_jwt))
    print(r.text)
    assert 0
