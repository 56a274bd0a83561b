"""The OpenAPI document keeps honest: one source (the route table) for what the server
serves, what ``svc-server openapi`` prints and ``docs/api-reference.md``; valid OpenAPI
3.1; and body schemas that accept and refuse what the server's own reading does.

Everything is generated from the route table (``served()``, those ``listed``), never
from a hand-kept list of routes.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
from click.testing import CliRunner
from openapi_spec_validator import validate

from reference_server import api_reference
from reference_server.app import served
from reference_server.cli import main as cli
from reference_server.web.endpoint import FOREIGN_JSON, RAW_BODY, Endpoint
from reference_server.web.errors import CODES, ApiError
from reference_server.web.validate import read_body
from svc.schema import example_of, fields_of

from ..support import LiveServer, new_account

LISTED = [ep for ep in served() if ep.contract.listed]
DOC = api_reference.openapi_document()
OPERATIONS = [
    (method, path, op) for path, item in DOC["paths"].items() for method, op in item.items()
]
WITH_BODY = [ep for ep in LISTED if ep.body_class is not None]
_PATH_PARAM = re.compile(r"\{([^}]+)\}")
_CODE_LINE = re.compile(r"^- `([a-z_]+)`: ")


def _ids(eps: list[Endpoint]) -> list[str]:
    return [f"{ep.method} {ep.path}" for ep in eps]


def _op_of(ep: Endpoint) -> dict[str, Any]:
    op: dict[str, Any] = DOC["paths"][ep.path][ep.method.lower()]
    return op


def _resolve(ref: str) -> Any:
    if not ref.startswith("#/"):
        raise LookupError(f"not a local reference: {ref}")
    node: Any = DOC
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


# --- one source ---------------------------------------------------------------------------


def test_the_api_reference_is_current(capsys: pytest.CaptureFixture[str]) -> None:
    status = api_reference.main(["--check"])
    assert status == 0, capsys.readouterr().out


def test_check_fails_on_a_stale_reference(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "api-reference.md"
    target.write_text("# stale\n")
    monkeypatch.setattr(api_reference, "TARGET", target)
    assert api_reference.main(["--check"]) == 1
    assert "out of date" in capsys.readouterr().out
    assert target.read_text() == "# stale\n"
    assert api_reference.main([]) == 0
    assert api_reference.main(["--check"]) == 0


def test_the_served_document_is_the_generated_one(module_server: LiveServer) -> None:
    served_doc = httpx.get(module_server.url + "/agent-openapi.json").json()
    assert served_doc.pop("servers") == [{"url": module_server.url}]
    assert served_doc == {k: v for k, v in DOC.items() if k != "servers"}


def test_svc_server_openapi_prints_the_document() -> None:
    result = CliRunner().invoke(cli, ["openapi", "--base-url", "https://pay.example"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {**DOC, "servers": [{"url": "https://pay.example"}]}


# --- a valid document ---------------------------------------------------------------------


def test_the_document_is_valid_openapi_3_1() -> None:
    assert DOC["openapi"].startswith("3.1")
    validate(DOC)


def test_every_reference_resolves() -> None:
    refs = set(_refs(DOC))
    assert refs
    for ref in refs:
        _resolve(ref)


@pytest.mark.parametrize(("method", "path", "op"), OPERATIONS, ids=lambda v: str(v)[:60])
def test_every_operation_is_complete(method: str, path: str, op: dict[str, Any]) -> None:
    declared = {p["name"] for p in op["parameters"] if p["in"] == "path"}
    assert declared == set(_PATH_PARAM.findall(path))
    assert op["operationId"]
    assert isinstance(op["security"], list)
    assert any(200 <= int(status) < 300 for status in op["responses"]), "no success answer"
    for param in op["parameters"]:
        if param["name"] == "Idempotency-Key":
            assert param["schema"]["minLength"] == 1


def test_operation_ids_are_unique() -> None:
    ids = [op["operationId"] for _, _, op in OPERATIONS]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize(("method", "path", "op"), OPERATIONS, ids=lambda v: str(v)[:60])
def test_error_answers_list_known_codes_under_their_status(
    method: str, path: str, op: dict[str, Any]
) -> None:
    for status, answer in op["responses"].items():
        if int(status) < 400:
            continue
        lines = answer["description"].splitlines()
        codes = [m.group(1) for m in map(_CODE_LINE.match, lines) if m]
        assert codes and len(codes) == len(lines), answer["description"]
        for code in codes:
            assert code in CODES, f"{code} is not in errors.CODES"
            assert str(CODES[code][0]) == status, f"{code} is {CODES[code][0]}, not {status}"


@pytest.mark.parametrize("ep", WITH_BODY, ids=_ids(WITH_BODY))
def test_a_declared_body_refuses_other_fields(ep: Endpoint) -> None:
    ref = _op_of(ep)["requestBody"]["content"]["application/json"]["schema"]
    schema = _resolve(ref["$ref"]) if "$ref" in ref else ref
    assert schema["additionalProperties"] is False


# --- body schemas agree with the server's reading -----------------------------------------


def _validator(ep: Endpoint) -> jsonschema.Draft202012Validator:
    ref = _op_of(ep)["requestBody"]["content"]["application/json"]["schema"]
    return jsonschema.Draft202012Validator({**ref, "components": DOC["components"]})


@pytest.mark.parametrize("ep", WITH_BODY, ids=_ids(WITH_BODY))
def test_the_example_is_read_by_the_server_and_the_schema(ep: Endpoint) -> None:
    assert ep.body_class is not None
    example = example_of(ep.body_class)
    assert example is not None, f"{ep.body_class.__name__} has no EXAMPLE"
    read_body(ep.body_class, example, production=False)
    _validator(ep).validate(example)


@pytest.mark.parametrize("ep", WITH_BODY, ids=_ids(WITH_BODY))
def test_an_unknown_field_is_refused_by_the_server_and_the_schema(ep: Endpoint) -> None:
    assert ep.body_class is not None
    body = {**(example_of(ep.body_class) or {}), "no_such_field": 1}
    with pytest.raises(ApiError) as refused:
        read_body(ep.body_class, body, production=False)
    assert refused.value.code == "validation_error"
    assert {"field": "no_such_field", "message": "is not a known field"} in (
        refused.value.details["errors"]
    )
    assert not _validator(ep).is_valid(body)


def _field_cases(*, required_only: bool) -> list[Any]:
    """One case per field of each declared body's example (or its required fields only)."""
    cases = []
    for ep in WITH_BODY:
        assert ep.body_class is not None
        required = {shape.name for shape in fields_of(ep.body_class) if shape.required}
        for name in example_of(ep.body_class) or {}:
            if name in required or not required_only:
                cases.append(pytest.param(ep, name, id=f"{ep.method} {ep.path} {name}"))
    return cases


def _both_refuse(ep: Endpoint, body: dict[str, Any], field: str) -> None:
    assert ep.body_class is not None
    with pytest.raises(ApiError) as refused:
        read_body(ep.body_class, body, production=False)
    assert field in [e["field"] for e in refused.value.details["errors"]]
    assert not _validator(ep).is_valid(body), f"the schema accepts {body}"


@pytest.mark.parametrize(("ep", "field"), _field_cases(required_only=False))
def test_a_value_of_the_wrong_type_is_refused_by_both(ep: Endpoint, field: str) -> None:
    example = example_of(ep.body_class) or {}
    wrong = "yes" if isinstance(example[field], bool) else True
    _both_refuse(ep, {**example, field: wrong}, field)


@pytest.mark.parametrize(("ep", "field"), _field_cases(required_only=True))
def test_a_required_field_left_out_is_refused_by_both(ep: Endpoint, field: str) -> None:
    example = example_of(ep.body_class) or {}
    _both_refuse(ep, {k: v for k, v in example.items() if k != field}, field)


# --- every route declares its shapes ---------------------------------------------------

NO_BODY = [ep for ep in LISTED if ep.writes and ep.body is not RAW_BODY and ep.body_class is None]


@pytest.mark.parametrize("ep", NO_BODY, ids=_ids(NO_BODY))
def test_a_route_that_declares_no_body_takes_none(ep: Endpoint, module_server: LiveServer) -> None:
    """Undeclared fields are refused, not ignored, on every route -- so a route cannot read
    a field its document does not show (the x402 facilitator's foreign body excepted)."""
    account = new_account(module_server.url)
    headers = {"Idempotency-Key": secrets.token_hex(8), "X-Svc-Environment": "test"}
    if ep.role is not None:
        headers.update(account.bearer(ep.role))
    path = _PATH_PARAM.sub("unknown_id", ep.path)
    r = httpx.request(ep.method, module_server.url + path, json={"unexpected": 1}, headers=headers)
    if ep.body is FOREIGN_JSON:
        assert r.status_code < 500
        return
    assert r.status_code == CODES[ep.contract.invalid_body][0], r.text
    assert r.json()["error"]["details"]["errors"] == [
        {"field": "unexpected", "message": "is not a known field"}
    ]


def test_every_listed_json_route_declares_its_answer() -> None:
    # A gate (the demo gate, a hosted gate) answers 402 or its upstream's answer.
    gates = {"/demo/echo", "/g/{short_id}"}
    missing = [ep for ep in LISTED if ep.contract.response is None and ep.path not in gates]
    assert _ids(missing) == []


@pytest.mark.parametrize("ep", LISTED, ids=_ids(LISTED))
def test_every_declared_error_code_is_a_known_code(ep: Endpoint) -> None:
    """A typo in ``errors=`` would vanish from the document silently: refuse it here."""
    unknown = [code for code in ep.contract.errors if code not in CODES]
    assert unknown == [], f"{ep.method} {ep.path} declares unknown codes {unknown}"
