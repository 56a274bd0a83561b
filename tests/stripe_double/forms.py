"""Stripe's form encoding (``a[b][0][c]=v``) decoded into nested dicts and lists, the shape
the SDK's parameters had before it flattened them."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl

__all__ = ["decode_form"]

_PART = re.compile(r"\[([^\]]*)\]")


def decode_form(body: bytes | str) -> dict[str, Any]:
    text = body.decode() if isinstance(body, bytes) else body
    root: dict[str, Any] = {}
    for name, value in parse_qsl(text, keep_blank_values=True):
        head, _, rest = name.partition("[")
        keys = [head, *_PART.findall("[" + rest)] if rest else [head]
        _put(root, keys, value)
    decoded: dict[str, Any] = _listify(root)
    return decoded


def _put(node: dict[str, Any], keys: list[str], value: str) -> None:
    for i, key in enumerate(keys[:-1]):
        if key == "":
            key = str(len(node))
            keys[i] = key
        node = node.setdefault(key, {})
    last = keys[-1] if keys[-1] != "" else str(len(node))
    node[last] = value


def _listify(node: Any) -> Any:
    """Dicts keyed ``0..n-1`` become lists, as ``line_items[0]`` means a list."""
    if not isinstance(node, dict):
        return node
    items = {k: _listify(v) for k, v in node.items()}
    if items and all(k.isdigit() for k in items):
        keys = sorted(items, key=int)
        if [int(k) for k in keys] == list(range(len(keys))):
            return [items[k] for k in keys]
    return items
