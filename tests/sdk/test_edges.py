"""SDK edges: every error carries ``request_id``; models never show a secret in ``repr``;
``svc.webhooks`` comes with ``import svc``."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from typing import Any

import attrs
import pytest

import svc
from svc import _errors, _models


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _error_classes() -> list[type[svc.SvcError]]:
    found: list[type[svc.SvcError]] = []
    todo: list[type[svc.SvcError]] = [svc.SvcError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


def test_the_error_tree_is_walked_whole() -> None:
    names = {cls.__name__ for cls in _error_classes()}
    assert names >= {n for n in _errors.__all__ if n.endswith("Error")}


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda c: c.__name__)
def test_every_error_carries_request_id(cls: type[svc.SvcError]) -> None:
    kwargs: dict[str, Any] = {"status": 400} if issubclass(cls, svc.APIError) else {}
    bare = cls("boom", **kwargs)
    assert bare.request_id is None
    assert bare.message == "boom"
    given = cls("boom", request_id="req_1", **kwargs)
    assert given.request_id == "req_1"


def test_connection_error_has_no_request_id() -> None:
    client = svc.Client(
        base_url=f"http://127.0.0.1:{free_port()}", seller_key="svc_sk_test_x", max_retries=0
    )
    with pytest.raises(svc.SvcError) as caught:
        client.resources.list()
    assert isinstance(caught.value, svc.APIConnectionError)
    assert caught.value.request_id is None


def test_webhook_verification_error_has_no_request_id() -> None:
    with pytest.raises(svc.SvcError) as caught:
        svc.webhooks.verify("whsec_x", b"{}", {})
    assert isinstance(caught.value, svc.WebhookVerificationError)
    assert caught.value.request_id is None


def test_configuration_error_has_no_request_id() -> None:
    client = svc.Client(base_url="http://127.0.0.1:9", max_retries=0)
    with pytest.raises(svc.SvcError) as caught:
        client.resources.list()  # a seller route on a client holding no seller key
    assert isinstance(caught.value, svc.ConfigurationError)
    assert caught.value.request_id is None


# --- secrets in repr --------------------------------------------------------------------------

#: Field names that hold a credential: a key, a JWT, a secret, a token, a password.
SECRET_NAME = re.compile(r"(^|_)(key|jwt|secret|token|password|credential)$")


def _models_with_fields() -> list[tuple[type[Any], attrs.Attribute[Any]]]:
    return [
        (cls, field)
        for cls in vars(_models).values()
        if isinstance(cls, type) and attrs.has(cls)
        for field in attrs.fields(cls)
    ]


def _secret_fields() -> list[tuple[type[Any], attrs.Attribute[Any]]]:
    return [(cls, f) for cls, f in _models_with_fields() if SECRET_NAME.search(f.name)]


def _build(cls: type[Any], **values: Any) -> Any:
    """An instance with a placeholder for every required field (attrs does not check types)."""
    required = {f.name: "x" for f in attrs.fields(cls) if f.default is attrs.NOTHING and f.init}
    return cls(**{**required, **values})


def test_the_known_secrets_are_found() -> None:
    found = {(cls.__name__, f.name) for cls, f in _secret_fields()}
    assert found >= {
        ("OwnerCreated", "owner_jwt"),
        ("SellerCreated", "seller_key"),
        ("WalletKeyCreated", "key"),
        ("WebhookEndpointCreated", "signing_secret"),
    }


@pytest.mark.parametrize(
    ("cls", "field"),
    _secret_fields(),
    ids=lambda v: v.__name__ if isinstance(v, type) else getattr(v, "name", str(v)),
)
@pytest.mark.parametrize(
    "value",
    [
        "svc_sk_test_4eC39HqLyjWDarjtT1zdp7dc",
        "svc_vw_live_0123456789abcdefWXYZ",
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJvd25fMSJ9.c2lnbmF0dXJlLXNpZ25hdHVyZQ",
        "abcdefgh1234",
    ],
)
def test_secret_fields_are_masked_in_repr(
    cls: type[Any], field: attrs.Attribute[Any], value: str
) -> None:
    model = _build(cls, **{field.name: value})
    assert getattr(model, field.name) == value  # attribute access is the real value
    shown = repr(model)
    assert value not in shown
    assert value[-12:-4] not in shown  # nothing but a known prefix and the last four
    assert f"{field.name}='" in shown  # still named, masked
    assert field.metadata.get("secret") is True


def test_created_models_mask_in_repr_and_str() -> None:
    created = svc.SellerCreated(
        id="sel_1", environment="test", seller_key="svc_sk_test_4eC39HqLyjWDarjtT1zdp7dc"
    )
    assert "seller_key='svc_sk_test_…p7dc'" in repr(created)
    assert "4eC39HqLyjWDarjtT1zd" not in str(created)
    assert created.seller_key == "svc_sk_test_4eC39HqLyjWDarjtT1zdp7dc"
    assert (
        svc.WalletKeyCreated(
            id="vw_1", environment="test", policy=svc.WalletPolicy(), balance=0, key="short"
        )
        .__repr__()
        .endswith("key='***')")
    )


# --- import svc ----------------------------------------------------------------------------------


def test_webhooks_come_with_a_bare_import() -> None:
    out = subprocess.run(
        [sys.executable, "-c", "import svc; print(svc.webhooks.verify.__name__)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "verify"
