"""Who acts: the caller a credential names, as the domain sees it.

The HTTP layer (``reference_server.web.auth``) reads the credential and builds the
:class:`Principal`; the domain only ever receives one, so it needs no notion of headers or
tokens.
"""

from __future__ import annotations

import attrs

from svc import Role

from ..invariant import InvariantError

__all__ = ["Principal"]


@attrs.frozen(kw_only=True)
class Principal:
    role: Role
    environment: str
    owner_id: str
    #: The seller (seller keys) or wallet key (wallet keys) the credential belongs to.
    subject_id: str | None = None
    #: Stable id of the credential itself; idempotency keys and rate limits are scoped to it.
    credential_id: str

    @property
    def seller_id(self) -> str:
        if not (self.role is Role.SELLER and self.subject_id is not None):
            raise InvariantError("seller_id of a credential that is not a seller key")
        return self.subject_id
