# pragma version 0.4.3
"""
@title Devchain USD: a USDC-like token for the local devchain
@notice ERC-20 with 6 decimals, EIP-2612 permit and EIP-3009 transferWithAuthorization
        (the 65-byte v, r, s form USDC has), signed over an EIP-712 domain of name,
        version, chainId and verifyingContract.  Its revert strings are Circle's
        (``FiatTokenV2: ...``), which x402's facilitator maps to its error codes.
        Only the deployer mints: it is a test token for a local chain, nothing more.
"""

event Transfer:
    sender: indexed(address)
    receiver: indexed(address)
    value: uint256

event Approval:
    owner: indexed(address)
    spender: indexed(address)
    value: uint256

event AuthorizationUsed:
    authorizer: indexed(address)
    nonce: indexed(bytes32)

EIP712_DOMAIN_TYPEHASH: constant(bytes32) = keccak256(
    "EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"
)
PERMIT_TYPEHASH: constant(bytes32) = keccak256(
    "Permit(address owner,address spender,uint256 value,uint256 nonce,uint256 deadline)"
)
TRANSFER_WITH_AUTHORIZATION_TYPEHASH: constant(bytes32) = keccak256(
    "TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)"
)
# secp256k1's n / 2: a signature with a larger s is the malleable twin of another.
HALF_N: constant(uint256) = 57896044618658097711785492504343953926418782139537452191302581570759080747168

name: public(String[64])
symbol: public(String[32])
version: public(String[16])
decimals: public(constant(uint8)) = 6
totalSupply: public(uint256)
balanceOf: public(HashMap[address, uint256])
allowance: public(HashMap[address, HashMap[address, uint256]])
nonces: public(HashMap[address, uint256])
authorizationState: public(HashMap[address, HashMap[bytes32, bool]])
minter: public(address)


@deploy
def __init__(_name: String[64], _symbol: String[32], _version: String[16]):
    self.name = _name
    self.symbol = _symbol
    self.version = _version
    self.minter = msg.sender


@view
@external
def DOMAIN_SEPARATOR() -> bytes32:
    return self._domain_separator()


@view
@internal
def _domain_separator() -> bytes32:
    return keccak256(
        abi_encode(
            EIP712_DOMAIN_TYPEHASH,
            keccak256(convert(self.name, Bytes[64])),
            keccak256(convert(self.version, Bytes[16])),
            chain.id,
            self,
        )
    )


@view
@internal
def _signer(struct_hash: bytes32, v: uint8, r: bytes32, s: bytes32) -> address:
    assert convert(s, uint256) <= HALF_N, "FiatTokenV2: invalid signature"
    digest: bytes32 = keccak256(concat(b"\x19\x01", self._domain_separator(), struct_hash))
    signer: address = ecrecover(digest, v, r, s)
    assert signer != empty(address), "FiatTokenV2: invalid signature"
    return signer


@internal
def _transfer(sender: address, receiver: address, amount: uint256):
    assert receiver != empty(address), "ERC20: transfer to the zero address"
    assert self.balanceOf[sender] >= amount, "ERC20: transfer amount exceeds balance"
    self.balanceOf[sender] -= amount
    self.balanceOf[receiver] += amount
    log Transfer(sender=sender, receiver=receiver, value=amount)


@internal
def _approve(owner: address, spender: address, amount: uint256):
    self.allowance[owner][spender] = amount
    log Approval(owner=owner, spender=spender, value=amount)


@external
def transfer(receiver: address, amount: uint256) -> bool:
    self._transfer(msg.sender, receiver, amount)
    return True


@external
def approve(spender: address, amount: uint256) -> bool:
    self._approve(msg.sender, spender, amount)
    return True


@external
def transferFrom(sender: address, receiver: address, amount: uint256) -> bool:
    allowed: uint256 = self.allowance[sender][msg.sender]
    assert allowed >= amount, "ERC20: transfer amount exceeds allowance"
    if allowed != max_value(uint256):
        self.allowance[sender][msg.sender] = allowed - amount
    self._transfer(sender, receiver, amount)
    return True


@external
def mint(receiver: address, amount: uint256):
    assert msg.sender == self.minter, "FiatToken: caller is not a minter"
    assert receiver != empty(address), "FiatToken: mint to the zero address"
    self.totalSupply += amount
    self.balanceOf[receiver] += amount
    log Transfer(sender=empty(address), receiver=receiver, value=amount)


@external
def permit(
    owner: address,
    spender: address,
    amount: uint256,
    deadline: uint256,
    v: uint8,
    r: bytes32,
    s: bytes32,
):
    assert deadline >= block.timestamp, "FiatTokenV2: permit is expired"
    nonce: uint256 = self.nonces[owner]
    struct_hash: bytes32 = keccak256(
        abi_encode(PERMIT_TYPEHASH, owner, spender, amount, nonce, deadline)
    )
    assert self._signer(struct_hash, v, r, s) == owner, "EIP2612: invalid signature"
    self.nonces[owner] = nonce + 1
    self._approve(owner, spender, amount)


@external
def transferWithAuthorization(
    sender: address,
    receiver: address,
    amount: uint256,
    validAfter: uint256,
    validBefore: uint256,
    nonce: bytes32,
    v: uint8,
    r: bytes32,
    s: bytes32,
):
    assert block.timestamp > validAfter, "FiatTokenV2: authorization is not yet valid"
    assert block.timestamp < validBefore, "FiatTokenV2: authorization is expired"
    assert not self.authorizationState[sender][nonce], "FiatTokenV2: authorization is used or canceled"
    struct_hash: bytes32 = keccak256(
        abi_encode(
            TRANSFER_WITH_AUTHORIZATION_TYPEHASH,
            sender,
            receiver,
            amount,
            validAfter,
            validBefore,
            nonce,
        )
    )
    assert self._signer(struct_hash, v, r, s) == sender, "FiatTokenV2: invalid signature"
    self.authorizationState[sender][nonce] = True
    log AuthorizationUsed(authorizer=sender, nonce=nonce)
    self._transfer(sender, receiver, amount)
