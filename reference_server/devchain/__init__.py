"""``svc-server devchain``: a real EVM chain on this machine (anvil), a USDC-like token
deployed on it, and the official x402 facilitator serving it over HTTP, so live open
rails can be exercised against real peers without a public testnet.

* :mod:`.build` -- compiles ``token.vy`` with the pinned Vyper into ``token.json``;
* :mod:`.artefact` -- reads the committed ABI and bytecode;
* :mod:`.node` -- finds and runs anvil;
* :mod:`.chain` -- deploys and mints the token with web3;
* :mod:`.facilitator` -- the x402 facilitator's HTTP app;
* :mod:`.run` -- all of it together, as the command runs it.

web3 and Vyper are the ``devchain`` extra's: nothing here is imported by the server.
"""
