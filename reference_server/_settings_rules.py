"""The rules every :class:`~reference_server.settings.Settings` obeys, as pydantic models
generated from its attrs fields (pydantic-settings reads the environment).

Why generated rather than a second hand-written class: the attrs class is the one list of
settings; a field added there is at once read from ``SVC_<NAME>``, type-checked, and
constrained by the ``checks`` in its metadata, with nothing else to keep in step.  Two
models share the fields and validators: one validates keyword values only (code-built
``Settings``, ``attrs.evolve``), the other reads the environment first (``from_env``).

Production must not start insecure: its JWT secret and data key come from outside the
database (never generated and stored beside what they protect), URLs it publishes or
calls are HTTPS.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import urlsplit

import attrs
from pydantic import BeforeValidator, ValidationError, ValidationInfo, create_model, field_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from .settings import Settings, SettingsError, env_variable

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["ENVIRONMENTS", "checked", "env_fields", "from_environment"]

ENVIRONMENTS = ("development", "production")
PROCESSORS = ("sandbox", "stripe")
_MIN_PRODUCTION_JWT_SECRET = 32
_HEX_KEY = re.compile(r"(0x)?[0-9a-fA-F]{64}")


def env_fields() -> list[attrs.Attribute[Any]]:
    """The settings that can be set from the environment, in declaration order."""
    return [f for f in attrs.fields(Settings) if f.metadata.get("env", True)]


def _comma_list(value: Any) -> Any:
    """``SVC_WEBHOOK_RETRY_SCHEDULE=5,300,1800``: tuples are comma-separated in the
    environment (JSON is not what operators type)."""
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value


def _production(info: ValidationInfo) -> bool:
    return info.data.get("env") == "production"


def _url(value: str, *, https: bool) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"must be an absolute http(s) URL, not {value[:60]!r}")
    if https and parts.scheme != "https":
        raise ValueError("must be an https:// URL in production")
    return value


class _Rules(BaseSettings):
    """Validators shared by both generated models (fields come from ``Settings``)."""

    model_config = SettingsConfigDict(
        env_prefix="SVC_",
        case_sensitive=False,
        env_ignore_empty=True,  # SVC_X= means unset, as before
        extra="forbid",
        validate_default=True,  # production rules apply to defaults too (no keys set)
        frozen=True,
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)  # code-built settings ignore the environment

    @field_validator("env", check_fields=False)
    @classmethod
    def _env(cls, value: str) -> str:
        if value not in ENVIRONMENTS:
            raise ValueError(f"must be exactly 'development' or 'production', not {value[:40]!r}")
        return value

    @field_validator("database_url", check_fields=False)
    @classmethod
    def _database_url(cls, value: str) -> str:
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        try:
            backend = make_url(value).get_backend_name()
        except ArgumentError:
            raise ValueError("is not a database URL (sqlite:///… or postgresql://…)") from None
        if backend not in ("sqlite", "postgresql"):
            raise ValueError(f"names {backend!r}; only sqlite and postgresql are supported")
        return value

    @field_validator(
        "public_url", "live_facilitator_url", "live_rpc_url", "stripe_api_base", check_fields=False
    )
    @classmethod
    def _urls(cls, value: str | None, info: ValidationInfo) -> str | None:
        return None if value is None else _url(value, https=_production(info))

    @field_validator("jwt_secret", check_fields=False)
    @classmethod
    def _jwt_secret(cls, value: str | None, info: ValidationInfo) -> str | None:
        if _production(info):
            if value is None:
                raise ValueError("is required in production (it is never generated there)")
            if len(value) < _MIN_PRODUCTION_JWT_SECRET:
                raise ValueError(
                    f"must be at least {_MIN_PRODUCTION_JWT_SECRET} characters in production"
                )
        if value == "":
            raise ValueError("must not be empty")
        return value

    @field_validator("jwt_previous_secrets", check_fields=False)
    @classmethod
    def _jwt_previous(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any(not s for s in value):
            raise ValueError("must not contain an empty secret")
        return value

    @field_validator("data_key", check_fields=False)
    @classmethod
    def _data_key(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None and _production(info):
            raise ValueError("is required in production (it is never generated there)")
        if value is not None:
            _fernet_key(value)
        return value

    @field_validator("data_previous_keys", check_fields=False)
    @classmethod
    def _data_previous(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for key in value:
            _fernet_key(key)
        return value

    @field_validator("rate_limit", "signup_rate_limit", check_fields=False)
    @classmethod
    def _rate(cls, value: str) -> str:
        from limits import parse_many

        try:
            parse_many(value)
        except ValueError:
            raise ValueError(
                f"is not a rate limit like '100/second' or '20/minute', not {value[:40]!r}"
            ) from None
        return value

    @field_validator("rate_limit_storage", check_fields=False)
    @classmethod
    def _rate_storage(cls, value: str) -> str:
        # limits keeps its scheme registry out of __all__, yet has no public way to ask
        # whether a scheme is known without constructing (and connecting) a storage.
        from limits.storage import SCHEMES  # type: ignore[attr-defined]  # registry not in __all__

        if urlsplit(value).scheme not in SCHEMES:
            raise ValueError("must be memory:// or a storage URL such as redis://host:6379")
        return value

    @field_validator("webhook_retry_schedule", check_fields=False)
    @classmethod
    def _schedule(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if any(delay < 0 for delay in value):
            raise ValueError("delays must be 0 or more seconds")
        return value

    @field_validator("live_asset_address", "live_deposit_address", check_fields=False)
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        from eth_utils import is_address

        if value is not None and not is_address(value):
            raise ValueError("is not an EVM address (0x and 40 hex digits)")
        return value

    @field_validator("processor", check_fields=False)
    @classmethod
    def _processor(cls, value: str, info: ValidationInfo) -> str:
        if value not in PROCESSORS:
            raise ValueError(f"must be 'sandbox' or 'stripe', not {value[:40]!r}")
        if value == "stripe":
            for needed in ("stripe_secret_key", "stripe_webhook_secret"):
                if not info.data.get(needed):
                    raise ValueError(f"'stripe' needs {env_variable(needed)} as well")
        return value

    @field_validator("live_hot_wallet_key", check_fields=False)
    @classmethod
    def _hot_wallet(cls, value: str | None) -> str | None:
        if value is not None and not _HEX_KEY.fullmatch(value):
            raise ValueError("is not a private key (64 hex digits)")
        return value


class _FromEnvironment(BaseSettings):
    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings)  # CLI flags (init) win over SVC_*


def _fernet_key(key: str) -> None:
    from cryptography.fernet import Fernet

    try:
        Fernet(key.encode())
    except (ValueError, TypeError):
        raise ValueError(
            "is not a Fernet key (32 url-safe base64 bytes; make one with "
            "python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key())')"
        ) from None


def _annotation(field: attrs.Attribute[Any]) -> Any:
    checks = field.metadata.get("checks", ())
    kind: Any = field.type
    if getattr(kind, "__origin__", None) is tuple:
        return Annotated[kind, NoDecode, BeforeValidator(_comma_list), *checks]
    return Annotated[kind, *checks] if checks else kind


@functools.cache
def _models() -> tuple[type[BaseSettings], type[BaseSettings]]:
    attrs.resolve_types(Settings)
    fields: dict[str, Any] = {f.name: (_annotation(f), f.default) for f in env_fields()}
    from_code = create_model("SettingsRules", __base__=_Rules, **fields)
    from_env = create_model("SettingsFromEnvironment", __base__=(_FromEnvironment, from_code))
    return from_code, from_env


def _error(exc: ValidationError) -> SettingsError:
    """The first problem, as one line naming the variable (secrets are not echoed)."""
    first = exc.errors()[0]
    name = str(first["loc"][0]) if first["loc"] else "env"
    message = str(first["msg"]).removeprefix("Value error, ")
    secret = next((f.metadata["secret"] for f in env_fields() if f.name == name), True)
    if first["type"] != "value_error" and not secret:
        message += f" (got {str(first.get('input'))[:60]!r})"
    return SettingsError(name, message)


def _validate(model: type[BaseSettings], values: Mapping[str, Any]) -> dict[str, Any]:
    try:
        return model(**values).model_dump()
    except ValidationError as exc:
        raise _error(exc) from None


def checked(settings: Settings) -> dict[str, Any]:
    """The settings' environment-settable values, validated and normalised."""
    from_code, _ = _models()
    return _validate(from_code, {f.name: getattr(settings, f.name) for f in env_fields()})


def from_environment(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Values for ``Settings(**…)`` from ``SVC_*`` variables, ``overrides`` winning."""
    _, from_env = _models()
    return _validate(from_env, overrides)
