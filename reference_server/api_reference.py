"""``docs/api-reference.md``, rendered from the OpenAPI document the server serves.

    python -m reference_server.api_reference           # write the document's reference
    python -m reference_server.api_reference --check   # exit 1 if it is out of date

No server runs: the document is built from the route table (:func:`openapi_document`, the
same call ``/agent-openapi.json`` makes) with a placeholder base URL, and the Markdown is
made from that document alone, so the reference says what the document says.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .app import served
from .generated import checking, refresh
from .web.openapi import document

__all__ = ["BASE_URL", "TARGET", "main", "openapi_document", "render"]

#: The base URL the generated document names (a served one names the server's own).
BASE_URL = "https://svc.example"
TARGET = Path(__file__).resolve().parents[1] / "docs" / "api-reference.md"
COMMAND = "python -m reference_server.api_reference"

#: Schema keywords shown in a table's constraints column, in this order.
_CONSTRAINTS = (
    ("minLength", "min length {}"),
    ("maxLength", "max length {}"),
    ("minimum", "≥ {}"),
    ("exclusiveMinimum", "> {}"),
    ("maximum", "≤ {}"),
    ("maxItems", "at most {} items"),
    ("format", "{}"),
    ("pattern", "pattern `{}`"),
    ("default", "default `{}`"),
)


def openapi_document(base_url: str = BASE_URL) -> dict[str, Any]:
    """The document a default server serves at ``/agent-openapi.json`` (sandbox routes
    included), naming ``base_url``."""
    return document([ep for ep in served() if ep.contract.listed], base_url)


# --- schemas as table cells ---------------------------------------------------------------


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _ref_name(schema: dict[str, Any]) -> str | None:
    ref = schema.get("$ref")
    return ref.rsplit("/", 1)[-1] if isinstance(ref, str) else None


def _type(schema: dict[str, Any]) -> str:
    """``string``, ``integer | null``, ``array of string``, a link to a named schema."""
    name = _ref_name(schema)
    if name is not None:
        return f"[{name}](#schema-{name.lower()})"
    if "anyOf" in schema:
        return " | ".join(_type(s) for s in schema["anyOf"])
    if "oneOf" in schema:
        return " or ".join(_type(s) for s in schema["oneOf"])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"array of {_type(schema.get('items', {}))}"
    return " | ".join(kind) if isinstance(kind, list) else str(kind)


def _constraints(schema: dict[str, Any]) -> str:
    """A schema's limits in words: lengths, bounds, choices, pattern, default."""
    parts = []
    if "enum" in schema:
        parts.append("one of " + ", ".join(f"`{v}`" for v in schema["enum"]))
    items = schema.get("items")
    if isinstance(items, dict) and "enum" in items:
        parts.append("each one of " + ", ".join(f"`{v}`" for v in items["enum"]))
    elif isinstance(items, dict) and "pattern" in items:
        parts.append(f"each matching `{items['pattern']}`")
    parts += [text.format(schema[key]) for key, text in _CONSTRAINTS if key in schema]
    for alt in schema.get("anyOf", []):
        inner = _constraints(alt)
        if inner:
            parts.append(inner)
    return _cell("; ".join(parts))


def _resolve(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    name = _ref_name(schema)
    return components[name] if name is not None else schema


# --- tables -------------------------------------------------------------------------------


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def _fields(schema: dict[str, Any], *, constraints: bool) -> list[str]:
    """One row per property of an object schema: name, type, required, constraints (when
    asked), description."""
    required = set(schema.get("required", []))
    rows = []
    for name, prop in schema.get("properties", {}).items():
        row = [f"`{name}`", _cell(_type(prop)), "yes" if name in required else "no"]
        if constraints:
            row.append(_constraints(prop))
        rows.append([*row, _cell(prop.get("description", ""))])
    if not rows:
        return ["No fields."]
    header = ["field", "type", "required", *(["constraints"] if constraints else [])]
    return _table([*header, "description"], rows)


def _parameters(op: dict[str, Any]) -> list[str]:
    rows = [
        [
            f"`{p['name']}`",
            p["in"],
            "yes" if p.get("required") else "no",
            _cell(_type(p.get("schema", {}))),
            _constraints(p.get("schema", {})),
            _cell(p.get("description", "")),
        ]
        for p in op.get("parameters", [])
    ]
    header = ("name", "in", "required", "type", "constraints", "description")
    return ["**Parameters**", "", *_table(header, rows), ""]


# --- one operation ------------------------------------------------------------------------


def _credential(op: dict[str, Any]) -> str:
    schemes = [name for requirement in op.get("security", []) for name in requirement]
    if not schemes:
        return "none"
    optional = " (optional: anonymous callers are served too)" if {} in op["security"] else ""
    return " or ".join(schemes) + optional


def _json_schema_of(part: dict[str, Any]) -> dict[str, Any] | None:
    content = part.get("content", {}).get("application/json")
    return None if content is None else dict(content["schema"])


def _request_body(op: dict[str, Any], components: dict[str, Any]) -> list[str]:
    body = op.get("requestBody")
    if body is None:
        return []
    ref = _json_schema_of(body) or {}
    schema = _resolve(ref, components)
    lines = [f"**Request body**: {_type(ref)}", ""]
    lines += [*_fields(schema, constraints=True), ""]
    for example in schema.get("examples", []):
        lines += ["Example:", "", "```json", json.dumps(example, indent=2), "```", ""]
    if schema.get("additionalProperties") is False:
        lines += ["Other fields are refused (422 `validation_error`).", ""]
    return lines


def _success(status: str, answer: dict[str, Any], components: dict[str, Any]) -> list[str]:
    ref = _json_schema_of(answer)
    if ref is None:
        return [f"**Response** {status}.", ""]
    lines = [f"**Response** {status}: {_type(ref)}", ""]
    for shape in ref.get("oneOf", [ref]):
        if "oneOf" in ref:
            lines += [f"{_type(shape)}:", ""]
        lines += [*_fields(_resolve(shape, components), constraints=False), ""]
    return lines


def _errors(responses: dict[str, Any]) -> list[str]:
    lines = ["**Errors**", ""]
    for status, answer in responses.items():
        if int(status) >= 400:
            lines.append(f"- {status}")
            lines += ["  " + line for line in answer["description"].splitlines()]
    return [*lines, ""]


def _operation(method: str, path: str, op: dict[str, Any], components: dict[str, Any]) -> list[str]:
    lines = [f"### {method.upper()} {path}", "", op["summary"], ""]
    if op.get("description") and op["description"] != op["summary"]:
        lines += [op["description"].split("\n", 1)[1].strip(), ""]
    lines += [f"Credential: {_credential(op)}. Operation id: `{op['operationId']}`.", ""]
    lines += _parameters(op) + _request_body(op, components)
    responses = op["responses"]
    status, answer = next((s, a) for s, a in responses.items() if int(s) < 400)
    return lines + _success(status, answer, components) + _errors(responses)


# --- the page -----------------------------------------------------------------------------


def _areas(doc: dict[str, Any]) -> dict[str, list[tuple[str, str, dict[str, Any]]]]:
    """Operations by their path's first segment, in the document's order."""
    areas: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, item in doc["paths"].items():
        area = path.strip("/").split("/")[0]
        for method, op in item.items():
            areas.setdefault(area, []).append((method, path, op))
    return areas


def _intro(areas: list[str]) -> list[str]:
    return [
        "# API reference",
        "",
        "<!-- Generated: do not edit by hand. -->",
        "",
        f"Generated from the OpenAPI document by `{COMMAND}` (no server needed); "
        f"`{COMMAND} --check` fails when it is out of date. A server serves the same "
        "document at `/agent-openapi.json`; `svc-server openapi` prints it.",
        "",
        "Every route is also served under `/api`. Errors answer "
        "`{ok: false, error: {code, message, details}, request_id}` (see "
        "[errors.md](errors.md)); the rules that hold on every route are in "
        "[api.md](api.md).",
        "",
        "Areas: " + ", ".join(f"[{a}](#{a})" for a in areas) + ", [schemas](#schemas).",
        "",
    ]


def _schemas(components: dict[str, Any]) -> list[str]:
    lines = ["## schemas", ""]
    for name, schema in components.items():
        lines += [f'<a id="schema-{name.lower()}"></a>', "", f"### {name}", ""]
        if schema.get("description"):
            lines += [schema["description"], ""]
        request = schema.get("additionalProperties") is False
        lines += [*_fields(schema, constraints=request), ""]
    return lines


def render(doc: dict[str, Any]) -> str:
    """The Markdown reference of an OpenAPI document built by :func:`document`."""
    components = doc["components"]["schemas"]
    areas = _areas(doc)
    lines = _intro(list(areas))
    for area, operations in areas.items():
        lines += [f"## {area}", ""]
        for method, path, op in operations:
            lines += _operation(method, path, op, components)
    lines += _schemas(components)
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    check = checking(argv)
    name = "docs/api-reference.md"
    if refresh(TARGET, render(openapi_document()), check=check, name=name) or not check:
        return 0
    print(f"out of date: {name}; run `{COMMAND}`")
    return 1


if __name__ == "__main__":
    sys.exit(main())
