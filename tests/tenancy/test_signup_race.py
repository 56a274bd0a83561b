"""Sign-ups racing for one e-mail: one owner, the rest 409 ``email_taken``, never a 500.

Found by the ownership test on PostgreSQL, whose concurrent sign-ups both passed the
"is the e-mail free?" read and one then broke the unique index (SQLite's single writer
serialised them)."""

from __future__ import annotations

import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import httpx

from ..support import LiveServer


def test_one_email_one_owner(server: LiveServer) -> None:
    def sign_up(email: str) -> httpx.Response:
        return httpx.post(server.url + "/owners", json={"email": email}, timeout=30)

    for _ in range(3):
        email = f"race-{uuid.uuid4().hex[:8]}@example.com"
        with ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(sign_up, [email] * 16))
        assert Counter(r.status_code for r in answers) == {201: 1, 409: 15}
        assert {r.json()["error"]["code"] for r in answers if r.status_code == 409} == {
            "email_taken"
        }
