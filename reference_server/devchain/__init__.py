"""``svc-server devchain``: a real EVM chain on this machine (anvil), a USDC-like token
deployed on it, Permit2 and x402's upto proxy at their canonical addresses, and the
official x402 facilitator (``exact`` and ``upto``) serving it over HTTP, so live open
rails can be exercised against real peers without a public testnet.

* :mod:`.build` -- compiles ``token.vy``, ``permit2.vy`` and ``upto_proxy.vy`` with the
  pinned Vyper into the ``.json`` artefacts beside them;
* :mod:`.artefact` -- reads the committed ABIs and bytecode;
* :mod:`.node` -- finds and runs anvil;
* :mod:`.chain` -- deploys and mints the token, places Permit2 and the proxy, approves;
* :mod:`.facilitator` -- the x402 facilitator's HTTP app;
* :mod:`.run` -- all of it together, as the command runs it.

web3 and Vyper are the ``devchain`` extra's: nothing here is imported by the server.
"""
