"""Gates: where a resource is sold.

* :mod:`.hosted` -- every resource's ``gate_url`` (``/g/{short_id}``): the service sells
  the resource on the seller's behalf, forwarding paid requests to its ``upstream_url``;
* :mod:`.rails` -- ``POST /gates/challenge``, ``/gates/redeem``, ``/gates/settle`` and
  ``/gates/release``: the open rails a seller's own ``svc_asgi.PaymentGate`` asks for (it
  holds no keys);
* :mod:`.demo` -- ``/demo/echo``, the demonstration gate;
* :mod:`.backend` -- the database answers hosted gates give to the gate core
  (``svc_asgi.GateCore``, the same one a seller's app runs).

The money side of an open-rail payment (pympp's charge, claims, settlement) is the
domain's: :mod:`reference_server.domain.open_rails`.
"""
