"""The words a body allows (svc.bodies) are the words the domain acts on."""

from __future__ import annotations

import typing

from reference_server.domain import wallets
from svc import bodies
from svc._convert import PERIODS
from svc.schema import fields_of


def test_wallet_policy_words_are_the_domains() -> None:
    shapes = {shape.name: shape for shape in fields_of(bodies.WalletKeyPolicy)}
    assert typing.get_args(shapes["period"].type) == wallets.PERIODS == PERIODS
    assert bodies.RAILS == wallets.RAILS
