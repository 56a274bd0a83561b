"""The devchain's accounts and contracts: the token deployed and minted with web3 on a
fresh anvil, Permit2 and x402's upto proxy placed at their canonical addresses.

anvil funds the standard test mnemonic's first ten accounts with ether and unlocks them,
so the deployer sends plain ``eth_sendTransaction``; every role below has its own
account, so the facilitator's settlement nonces never race the deployer's.  Every
account the token is minted to approves Permit2 for all of it, as an x402 ``upto`` payer
must once before its first payment.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
from eth_account import Account

from .artefact import load

if TYPE_CHECKING:
    from web3 import Web3

__all__ = [
    "ASSET_NAME",
    "ASSET_VERSION",
    "PAYER_FUNDS",
    "Devchain",
    "deploy",
    "mnemonic_key",
]

#: anvil's (and hardhat's) well-known development mnemonic: its keys are public, so the
#: devchain's money is play money by construction.
TEST_MNEMONIC = "test test test test test test test test test test test junk"
ASSET_NAME = "Devchain USD"
ASSET_SYMBOL = "dUSDC"
ASSET_VERSION = "2"
#: What each payer and the hot wallet start with: 1000 USDC (6 decimals).
PAYER_FUNDS = 1000 * 1_000_000

#: Accounts of the mnemonic, by role.
_DEPLOYER, _FACILITATOR, _HOT_WALLET, _DEPOSIT, _PAYERS = 0, 1, 2, 3, (4, 5)


def mnemonic_key(index: int) -> str:
    """The private key (0x and 64 hex digits) of the test mnemonic's account ``index``."""
    Account.enable_unaudited_hdwallet_features()
    account = Account.from_mnemonic(TEST_MNEMONIC, account_path=f"m/44'/60'/0'/0/{index}")
    return "0x" + bytes(account.key).hex()


def _address(key: str) -> str:
    return str(Account.from_key(key).address)


@attrs.frozen
class Devchain:
    """What a deployed devchain is: where its node answers, its token, and its keys."""

    rpc_url: str
    chain_id: int
    asset_address: str
    facilitator_key: str
    hot_wallet_key: str
    deposit_address: str
    payer_keys: tuple[str, ...]
    asset_name: str = ASSET_NAME
    asset_version: str = ASSET_VERSION

    @property
    def network(self) -> str:
        """The CAIP-2 network x402 names the chain by."""
        return f"eip155:{self.chain_id}"

    def exports(self, facilitator_url: str) -> list[str]:
        """Shell ``export`` lines: every ``SVC_LIVE_*`` setting this chain implies, then
        the payers' keys."""
        values = {
            "SVC_LIVE_FACILITATOR_URL": facilitator_url,
            "SVC_LIVE_RPC_URL": self.rpc_url,
            "SVC_LIVE_CHAIN_ID": str(self.chain_id),
            "SVC_LIVE_ASSET_ADDRESS": self.asset_address,
            "SVC_LIVE_ASSET_NAME": self.asset_name,
            "SVC_LIVE_ASSET_VERSION": self.asset_version,
            "SVC_LIVE_DEPOSIT_ADDRESS": self.deposit_address,
            "SVC_LIVE_UPTO_FACILITATOR_ADDRESS": Account.from_key(self.facilitator_key).address,
            "SVC_LIVE_HOT_WALLET_KEY": self.hot_wallet_key,
        }
        for number, key in enumerate(self.payer_keys, start=1):
            values[f"DEVCHAIN_PAYER_{number}_KEY"] = key
        return [f"export {name}='{value}'" for name, value in values.items()]


def _web3(rpc_url: str) -> Web3:
    from web3 import Web3

    return Web3(Web3.HTTPProvider(rpc_url, request_kwargs={"timeout": 10}))


def _transact(w3: Web3, call: Any, sender: str) -> Any:
    """Send ``call`` from the unlocked ``sender`` and refuse unless it succeeded."""
    receipt = w3.eth.wait_for_transaction_receipt(call.transact({"from": sender}), timeout=30)
    if receipt["status"] != 1:
        raise RuntimeError(f"devchain transaction {receipt['transactionHash'].hex()} reverted")
    return receipt


def _place_permit2(w3: Web3) -> None:
    """Permit2 and x402's upto proxy at the addresses x402 signs for and calls (their
    runtime code, placed with ``anvil_setCode``: no deployment can reach those addresses)."""
    from web3.types import RPCEndpoint
    from x402.mechanisms.evm.constants import PERMIT2_ADDRESS, X402_UPTO_PERMIT2_PROXY_ADDRESS

    for name, address in (
        ("permit2", PERMIT2_ADDRESS),
        ("upto_proxy", X402_UPTO_PERMIT2_PROXY_ADDRESS),
    ):
        w3.provider.make_request(
            RPCEndpoint("anvil_setCode"), [address, load(name)["bytecode_runtime"]]
        )
        if not w3.eth.get_code(w3.to_checksum_address(address)):
            raise RuntimeError(f"anvil did not place the devchain's {name} at {address}")


def deploy(rpc_url: str) -> Devchain:
    """Place Permit2 and the upto proxy; deploy the token from the first account, mint to
    the hot wallet and payers, and have each approve Permit2 for all of its tokens."""
    from x402.mechanisms.evm.constants import PERMIT2_ADDRESS

    w3 = _web3(rpc_url)
    _place_permit2(w3)
    artefact = load()
    deployer = _address(mnemonic_key(_DEPLOYER))
    factory = w3.eth.contract(abi=artefact["abi"], bytecode=artefact["bytecode"])
    receipt = _transact(w3, factory.constructor(ASSET_NAME, ASSET_SYMBOL, ASSET_VERSION), deployer)
    token = w3.eth.contract(address=receipt["contractAddress"], abi=artefact["abi"])
    hot_wallet_key = mnemonic_key(_HOT_WALLET)
    payer_keys = tuple(mnemonic_key(index) for index in _PAYERS)
    for key in (hot_wallet_key, *payer_keys):
        _transact(w3, token.functions.mint(_address(key), PAYER_FUNDS), deployer)
        _transact(w3, token.functions.approve(PERMIT2_ADDRESS, 2**256 - 1), _address(key))
    return Devchain(
        rpc_url=rpc_url,
        chain_id=w3.eth.chain_id,
        asset_address=str(receipt["contractAddress"]),
        facilitator_key=mnemonic_key(_FACILITATOR),
        hot_wallet_key=hot_wallet_key,
        deposit_address=_address(mnemonic_key(_DEPOSIT)),
        payer_keys=payer_keys,
    )
