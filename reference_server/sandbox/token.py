"""The sandbox token's identity: Base Sepolia USDC, so off-the-shelf clients just work.

x402's and pympp's defaults for ``eip155:84532`` name this token, its 6 decimals and its
EIP-712 domain (``USDC``/``2``); clients sign ``TransferWithAuthorization`` over that domain.
By carrying exactly the same identity, the sandbox verifies the signatures those clients
already make, and a server configured for Base Sepolia needs only its facilitator URL
pointed at ``/sandbox/x402``.
"""

from __future__ import annotations

import attrs

__all__ = ["SANDBOX_TOKEN", "TokenIdentity"]


@attrs.frozen(kw_only=True)
class TokenIdentity:
    chain_id: int
    #: CAIP-2 id (x402 v2, MPP ``did:pkh``).
    network: str
    #: The legacy network name x402 v1 uses.
    v1_network: str
    #: The token contract address, EIP-55 checksummed as x402 and pympp write it.
    address: str
    #: EIP-712 domain ``name`` and ``version`` the token verifies signatures under.
    name: str
    version: str
    decimals: int
    symbol: str

    def is_token(self, address: object) -> bool:
        """Addresses compare case-insensitively: EIP-55 casing is presentation only."""
        return isinstance(address, str) and address.lower() == self.address.lower()

    def eip712_domain(self) -> dict[str, object]:
        return {
            "name": self.name,
            "version": self.version,
            "chainId": self.chain_id,
            "verifyingContract": self.address,
        }


SANDBOX_TOKEN = TokenIdentity(
    chain_id=84532,
    network="eip155:84532",
    v1_network="base-sepolia",
    address="0x036CbD53842c5426634e7929541eC2318f3dCF7e",
    name="USDC",
    version="2",
    decimals=6,
    symbol="USDC",
)
