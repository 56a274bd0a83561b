# pragma version 0.4.3
"""
@title Permit2 (signature transfers only): what x402's upto proxy calls on the devchain
@notice Uniswap's Permit2 is Solidity and its bytecode cannot be fetched here, so the
        devchain carries this Vyper subset at the canonical address instead: unordered
        nonces (``nonceBitmap``, ``invalidateUnorderedNonces``), ``DOMAIN_SEPARATOR`` and
        ``permitWitnessTransferFrom``, hashed and checked as Permit2 does and moving the
        owner's tokens with the ERC-20 allowance the owner gave Permit2.  Signatures are
        an EOA's 65-byte (r, s, v) form.  Reverts carry Permit2's error names as strings,
        which x402's facilitator maps to its error codes.  The domain is computed at call
        time from ``chain.id`` and ``self``, so the runtime code can be placed with
        ``anvil_setCode`` and sign for the address it is placed at.
"""

from ethereum.ercs import IERC20

struct TokenPermissions:
    token: address
    amount: uint256

struct PermitTransferFrom:
    permitted: TokenPermissions
    nonce: uint256
    deadline: uint256

struct SignatureTransferDetails:
    to: address
    requestedAmount: uint256

event UnorderedNonceInvalidation:
    owner: indexed(address)
    word: uint256
    mask: uint256

#: The longest witness type string accepted: x402's is 120 characters.
MAX_WITNESS_TYPE: constant(uint256) = 512

_DOMAIN_TYPEHASH: constant(bytes32) = keccak256(
    "EIP712Domain(string name,uint256 chainId,address verifyingContract)"
)
_HASHED_NAME: constant(bytes32) = keccak256("Permit2")
_TOKEN_PERMISSIONS_TYPEHASH: constant(bytes32) = keccak256(
    "TokenPermissions(address token,uint256 amount)"
)
_PERMIT_WITNESS_TRANSFER_FROM_TYPEHASH_STUB: constant(String[100]) = (
    "PermitWitnessTransferFrom(TokenPermissions permitted,address spender,uint256 nonce,uint256 deadline,"
)

nonceBitmap: public(HashMap[address, HashMap[uint256, uint256]])


@view
@external
def DOMAIN_SEPARATOR() -> bytes32:
    return self._domain_separator()


@view
@internal
def _domain_separator() -> bytes32:
    return keccak256(abi_encode(_DOMAIN_TYPEHASH, _HASHED_NAME, chain.id, self))


@external
def invalidateUnorderedNonces(wordPos: uint256, mask: uint256):
    self.nonceBitmap[msg.sender][wordPos] |= mask
    log UnorderedNonceInvalidation(owner=msg.sender, word=wordPos, mask=mask)


@internal
def _use_unordered_nonce(owner: address, nonce: uint256):
    word: uint256 = nonce >> 8
    bit: uint256 = 1 << (nonce & 255)
    flipped: uint256 = self.nonceBitmap[owner][word] ^ bit
    assert flipped & bit != 0, "InvalidNonce"
    self.nonceBitmap[owner][word] = flipped


@view
@internal
def _verify(digest: bytes32, owner: address, signature: Bytes[65]):
    assert len(signature) == 65, "InvalidSignatureLength"
    r: bytes32 = extract32(signature, 0)
    s: bytes32 = extract32(signature, 32)
    v: uint8 = convert(slice(signature, 64, 1), uint8)
    signer: address = ecrecover(digest, v, r, s)
    assert signer != empty(address), "InvalidSignature"
    assert signer == owner, "InvalidSigner"


@external
def permitWitnessTransferFrom(
    permit: PermitTransferFrom,
    transferDetails: SignatureTransferDetails,
    owner: address,
    witness: bytes32,
    witnessTypeString: String[MAX_WITNESS_TYPE],
    signature: Bytes[65],
):
    assert block.timestamp <= permit.deadline, "SignatureExpired"
    assert transferDetails.requestedAmount <= permit.permitted.amount, "InvalidAmount"
    self._use_unordered_nonce(owner, permit.nonce)
    type_hash: bytes32 = keccak256(
        concat(_PERMIT_WITNESS_TRANSFER_FROM_TYPEHASH_STUB, witnessTypeString)
    )
    permitted_hash: bytes32 = keccak256(
        abi_encode(_TOKEN_PERMISSIONS_TYPEHASH, permit.permitted.token, permit.permitted.amount)
    )
    data_hash: bytes32 = keccak256(
        abi_encode(type_hash, permitted_hash, msg.sender, permit.nonce, permit.deadline, witness)
    )
    self._verify(
        keccak256(concat(b"\x19\x01", self._domain_separator(), data_hash)), owner, signature
    )
    assert extcall IERC20(permit.permitted.token).transferFrom(
        owner, transferDetails.to, transferDetails.requestedAmount, default_return_value=True
    ), "TRANSFER_FROM_FAILED"
