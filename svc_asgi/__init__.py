"""svc_asgi: a pure ASGI payment gate for any seller app (built in a later issue)."""
