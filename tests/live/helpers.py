"""The live tests' set-ups: a live server on the devchain, shops on it, and the official
x402 and pympp clients paying in the devchain's token."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
from eth_account.signers.local import LocalAccount
from mpp.client import Mpp as MppClient
from mpp.methods.evm import EvmAsset
from mpp.methods.evm import client as mpp_evm_client
from sqlalchemy import select
from x402 import x402Client
from x402.http.clients import x402HttpxClient
from x402.mechanisms.evm.exact import register_exact_evm_client
from x402.mechanisms.evm.signers import EthAccountSigner

from reference_server.store import tables as t

from ..devchain.running import RunningDevchain
from ..support import LiveServer

PRICE = 250_000  # $0.25


def live_server(
    make_server: Callable[..., LiveServer], devchain: RunningDevchain, **more: Any
) -> LiveServer:
    """A server whose ``live`` is the devchain, configured from its export lines."""
    return make_server(**{**devchain.live_settings(), **more})


def x402_client(devchain: RunningDevchain, payer: LocalAccount) -> x402Client:
    """x402's own client, allowed the devchain's token (not among its built-in assets)."""
    client = x402Client()
    register_exact_evm_client(client, EthAccountSigner(payer))
    client.set_spend_controls(
        {"allowed_assets": [{"network": devchain.network, "asset": devchain.asset}]}
    )
    return client


def devchain_asset(devchain: RunningDevchain) -> EvmAsset:
    return EvmAsset(
        address=devchain.asset,
        decimals=6,
        chain_id=devchain.chain_id,
        name=devchain.exports["SVC_LIVE_ASSET_NAME"],
        version=devchain.exports["SVC_LIVE_ASSET_VERSION"],
    )


async def x402_pay(devchain: RunningDevchain, url: str, payer: LocalAccount) -> httpx.Response:
    async with x402HttpxClient(x402_client(devchain, payer), timeout=30) as http:
        return await http.get(url)


async def mpp_pay(devchain: RunningDevchain, url: str, payer: LocalAccount) -> httpx.Response:
    """pympp's own client, paying an EIP-3009 authorization in the devchain's token."""
    charge = mpp_evm_client.charge(currency=devchain_asset(devchain), account=payer)
    async with MppClient(methods=[charge]) as client:
        return await client.fetch(url, method="GET")


PAYERS = {"x402": x402_pay, "mpp": mpp_pay}


def receipts_of(live: LiveServer, resource_id: str) -> list[Any]:
    r = t.receipts
    with live.ctx.db.read() as conn:
        return list(conn.execute(select(r).where(r.c.resource_id == resource_id)).all())


def open_holds(live: LiveServer) -> list[str]:
    """Keys of every hold (or unsettled hold) still waiting in the database."""
    c = t.rail_claims
    with live.ctx.db.read() as conn:
        keys = conn.execute(select(c.c.key)).scalars().all()
    return [k for k in keys if k.startswith(("hold:", "unsettled:"))]
