"""The sandbox chain: where ``test`` money lives when it travels on the open rails.

``test`` payments over x402 and MPP must run the official SDKs unmodified, so they need a
chain that answers like Base Sepolia: a USDC token with EIP-3009
``transferWithAuthorization`` (x402 ``exact``) and Permit2 through x402's upto proxy
(``upto``: a signed maximum, the actual amount settled), real signatures, nonces that pay
once.  Instead of a node, the chain is three tables in the service's own database
(:mod:`.chain`), reachable as an x402 facilitator (:mod:`.facilitator`) at
``/sandbox/x402`` and funded by a faucet.

It never touches the service's double-entry ledger and it has no ``live`` counterpart:
``live`` settles through a configured facilitator on a real chain, so nothing done here can
move live money.

Modules:

* :mod:`.token` — the token's identity (Base Sepolia USDC's chain, address and EIP-712
  domain), so stock ``eip155:84532`` configurations sign for it without a change;
* :mod:`.eip3009` — parsing authorizations, EIP-712 hashing and signature recovery;
* :mod:`.permit2` — reading Permit2 ``upto`` authorizations, hashing, recovering;
* :mod:`.chain` — balances, used nonces, transactions, mint and transfer-with-authorization;
* :mod:`.permit2_chain` — the upto proxy's settle (``permitWitnessTransferFrom``);
* :mod:`.facilitator` — the x402 ``/verify``, ``/settle`` and ``/supported`` logic
  (``exact`` there, ``upto`` in :mod:`.upto`, what both share in :mod:`.x402_wire`).
"""
