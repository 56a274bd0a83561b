"""An agent pays a metered gate with x402's own client: it signs an ``upto`` authorization
for the most the answer may cost, and the gate settles what the answer used."""

import asyncio
import os
from decimal import Decimal

from eth_account import Account
from x402 import x402Client
from x402.http import x402HTTPClient
from x402.http.clients import x402HttpxClient
from x402.mechanisms.evm.signers import EthAccountSigner
from x402.mechanisms.evm.upto import UptoEvmClientScheme

payer = Account.from_key(os.environ["PAYER_KEY"])  # in test: funded by POST /sandbox/faucet
client = x402Client().register("eip155:*", UptoEvmClientScheme(EthAccountSigner(payer)))


async def main() -> None:
    async with x402HttpxClient(client) as http:  # the 402, the signature, the paid answer
        paid = await http.get(os.environ["GATE_URL"])  # metered: at most 0.50
    settled = x402HTTPClient(client).get_payment_settle_response(paid.headers.get)
    print(paid.status_code, paid.headers["X-Svc-Receipt"][:5])  # 200 rcpt_
    print(Decimal(settled.amount) / 10**6, "USDC on", settled.network)  # 0.5 USDC on eip155:…


asyncio.run(main())
