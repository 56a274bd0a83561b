# pragma version 0.4.3
"""
@title x402's upto Permit2 proxy (settle only), for the devchain
@notice The spender every x402 ``upto`` payer names: it moves ``amount`` (at most what
        the payer permitted) to the witness's ``to`` through Permit2, and only when called
        by the witness's ``facilitator``, so neither the payee nor the settler can be
        changed after signing.  Same ``settle`` ABI and checks as x402's Solidity proxy,
        which cannot be fetched here; ``settleWithPermit`` (EIP-2612 gas sponsoring) is
        left out because devchain payers approve Permit2 up front.  Permit2's address
        is a constant, so the runtime code works wherever ``anvil_setCode`` places it.
        Reverts carry the proxy's error names as strings, which x402's facilitator maps.
"""

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

struct Witness:
    to: address
    facilitator: address
    validAfter: uint256

interface Permit2:
    def permitWitnessTransferFrom(
        permit: PermitTransferFrom,
        transferDetails: SignatureTransferDetails,
        owner: address,
        witness: bytes32,
        witnessTypeString: String[512],
        signature: Bytes[65],
    ): nonpayable

event Settled:
    owner: indexed(address)
    to: indexed(address)
    amount: uint256

PERMIT2: public(constant(address)) = 0x000000000022D473030F116dDEE9F6B43aC78BA3
#: Permit2 appends this to its PermitWitnessTransferFrom stub; x402's clients sign it.
WITNESS_TYPE_STRING: public(constant(String[120])) = (
    "Witness witness)TokenPermissions(address token,uint256 amount)Witness(address to,address facilitator,uint256 validAfter)"
)
WITNESS_TYPEHASH: public(constant(bytes32)) = keccak256(
    "Witness(address to,address facilitator,uint256 validAfter)"
)


@external
@nonreentrant
def settle(
    permit: PermitTransferFrom,
    amount: uint256,
    owner: address,
    witness: Witness,
    signature: Bytes[65],
):
    assert amount <= permit.permitted.amount, "AmountExceedsPermitted"
    # A settlement that moves nothing would still burn the payer's nonce.
    assert amount != 0, "InvalidAmount"
    assert msg.sender == witness.facilitator, "UnauthorizedFacilitator"
    assert owner != empty(address), "InvalidOwner"
    assert witness.to != empty(address), "InvalidDestination"
    assert block.timestamp >= witness.validAfter, "PaymentTooEarly"
    witness_hash: bytes32 = keccak256(
        abi_encode(WITNESS_TYPEHASH, witness.to, witness.facilitator, witness.validAfter)
    )
    extcall Permit2(PERMIT2).permitWitnessTransferFrom(
        permit,
        SignatureTransferDetails(to=witness.to, requestedAmount=amount),
        owner,
        witness_hash,
        WITNESS_TYPE_STRING,
        signature,
    )
    log Settled(owner=owner, to=witness.to, amount=amount)
