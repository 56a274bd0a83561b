"""HTTP plumbing shared by every route: envelope, request ids, auth, idempotency, limits."""
