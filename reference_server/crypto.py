"""Encryption at rest for the few secrets the service must be able to read back.

Keys (seller keys, wallet keys) are only ever hashed.  A few things must be recoverable:
webhook signing secrets (to sign deliveries) and the stored first response of an
idempotent request that created a credential (so a retry after a dropped connection still
receives it).  Those are sealed with Fernet (AES-128-CBC + HMAC-SHA256, from the
``cryptography`` package).  The key is ``SVC_DATA_KEY`` in production; on a laptop it is
generated once and kept in the database, which protects less and is documented so.

Keys rotate: the current key seals, it and every previous key (``SVC_DATA_PREVIOUS_KEYS``)
open (Fernet's ``MultiFernet``), so values sealed before a rotation stay readable.
"""

from __future__ import annotations

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from .recursion import keeping_recursion_limit

__all__ = ["SecretBox", "new_data_key"]

_PREFIX = "enc:v1:"


def new_data_key() -> str:
    return Fernet.generate_key().decode()


def new_evm_key() -> str:
    """A new EVM account's private key, ``0x`` and hex (eth-account imported only here:
    it is slow to import and needed once per database)."""
    with keeping_recursion_limit():
        from eth_account import Account
    return "0x" + bytes(Account.create().key).hex()


class SecretBox:
    def __init__(self, key: str, *previous: str) -> None:
        """``key`` seals and opens; each of ``previous`` (retired keys) only opens."""
        self._fernet = MultiFernet([Fernet(k.encode()) for k in (key, *previous)])

    def seal(self, plaintext: str) -> str:
        return _PREFIX + self._fernet.encrypt(plaintext.encode()).decode()

    def open(self, sealed: str) -> str:
        if not sealed.startswith(_PREFIX):
            raise ValueError("not a sealed value")
        try:
            return self._fernet.decrypt(sealed[len(_PREFIX) :].encode()).decode()
        except InvalidToken:
            raise ValueError("sealed with an unknown data key, or tampered with") from None

    @staticmethod
    def is_sealed(value: str) -> bool:
        return value.startswith(_PREFIX)
