"""Gates: where a resource is sold -- hosted gates (:mod:`.hosted`), the open rails a
seller's own ``svc_asgi.PaymentGate`` asks for (:mod:`.rails`), the demo gate
(:mod:`.demo`) and the database answers they give the gate core (:mod:`.backend`).  The
money side of an open-rail payment is :mod:`reference_server.domain.open_rails`'s.
"""
