"""A paid fetch (``POST /spend/pay-url``): the service fetches an HTTP 402 URL for an agent,
paying its challenge under the wallet key's policy.

Modules, in the order a request meets them:

* :mod:`.attempts` -- the attempt row: idempotency, status, the answer rendered from it;
* :mod:`.offers` -- reading the 402 (x402 v1/v2, MPP) and signing a credential with the
  official SDKs, for the offers this environment can pay;
* :mod:`.hot_wallet` -- the environment's token and the hot wallet that signs;
* :mod:`.settlement` -- reserving the money, asking the sandbox chain, posting or voiding;
* :mod:`.confirmation` -- live only: the URL's settlement receipt;
* :mod:`.unlocked` -- the bounded body and headers returned to the caller;
* :mod:`.flow` -- the phases, awaited one after another with no transaction held across
  the network.

The route itself is ``reference_server.routes.pay_url``; the whole story is docs/pay-url.md.
"""
