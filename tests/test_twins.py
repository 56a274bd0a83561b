"""The blocking twins are generated, current, and the same API as their async sources.

``svc/_client.py`` and ``svc/_namespaces.py`` are written by ``python -m tests.unasync``
from their async sources; the first test fails when one was edited by hand or not
regenerated.  The parity test is found, not listed:
every namespace each client declares and every public method on it, plus the clients'
own methods, compared by signature (modulo ``async``) and docstring.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import svc
from svc import _async_namespaces, _namespaces

from .support import run_python

ROOT = Path(__file__).resolve().parent.parent

#: Async names whose blocking twin is not the same name.
RENAMED = {"aclose": "close", "__aenter__": "__enter__", "__aexit__": "__exit__"}
#: The dunder methods compared too (the rest of ``_*`` is private).
DUNDERS = {"__init__", *RENAMED, *RENAMED.values()}
_ASYNC_TYPE = re.compile(r"(?<!\w)Async(?=[A-Z])")


def test_the_generated_twins_are_current() -> None:
    done = run_python("-m", "tests.unasync", "--check", cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr


def _namespace_pairs() -> list[tuple[str, type, type]]:
    """(attribute, async class, sync class) for every namespace the clients declare (the
    ``cached_property`` attributes they inherit from the generated ``Namespaces``)."""
    pairs = []
    for name, attr in inspect.getmembers(svc.AsyncClient):
        acls = getattr(attr, "func", None)
        if inspect.isclass(acls) and issubclass(acls, _async_namespaces._Namespace):
            pairs.append((name, acls, getattr(svc.Client, name).func))
    return pairs


NAMESPACES = _namespace_pairs()
CLASSES = [("client", svc.AsyncClient, svc.Client), *NAMESPACES]


def _public(cls: type) -> set[str]:
    return {
        name
        for name, value in inspect.getmembers(cls)
        if (not name.startswith("_") or name in DUNDERS)
        and callable(value)
        and not inspect.isclass(value)
    }


def _methods() -> list[tuple[type, type, str]]:
    return [(acls, scls, name) for _, acls, scls in CLASSES for name in sorted(_public(acls))]


METHODS = _methods()


def test_every_namespace_is_found_and_on_both_clients() -> None:
    assert {name for name, _, _ in NAMESPACES} >= {"sellers", "resources", "webhooks", "spend"}
    for name, acls, scls in NAMESPACES:
        assert acls.__name__ == "Async" + scls.__name__, name
        assert issubclass(scls, _namespaces._Namespace), name
    declared = {acls for _, acls, _ in NAMESPACES}
    defined = {
        cls
        for cls in vars(_async_namespaces).values()
        if inspect.isclass(cls)
        and issubclass(cls, _async_namespaces._Namespace)
        and cls is not _async_namespaces._Namespace
    }
    assert defined == declared  # no namespace left off a client
    with svc.Client() as client:
        for name, _, scls in NAMESPACES:
            assert type(getattr(client, name)) is scls


def test_both_classes_have_the_same_public_methods() -> None:
    for label, acls, scls in CLASSES:
        assert {RENAMED.get(n, n) for n in _public(acls)} == _public(scls), label


def _unasync(annotation: Any) -> Any:
    """An async annotation as its blocking twin writes it (they are strings here)."""
    if not isinstance(annotation, str):
        return annotation
    return _ASYNC_TYPE.sub("", annotation).replace("Awaitable[None]", "None")


def _shape(fn: Callable[..., Any], *, unasync: bool) -> inspect.Signature:
    sig = inspect.signature(fn)
    if not unasync:
        return sig
    params = [p.replace(annotation=_unasync(p.annotation)) for p in sig.parameters.values()]
    return sig.replace(parameters=params, return_annotation=_unasync(sig.return_annotation))


@pytest.mark.parametrize(
    ("acls", "scls", "name"), METHODS, ids=[f"{a.__name__}.{n}" for a, _, n in METHODS]
)
def test_the_blocking_twin_has_the_same_signature_and_docstring(
    acls: type, scls: type, name: str
) -> None:
    afn, sfn = getattr(acls, name), getattr(scls, RENAMED.get(name, name))
    assert _shape(sfn, unasync=False) == _shape(afn, unasync=True)
    assert inspect.getdoc(sfn) == inspect.getdoc(afn)
    overloads = typing.get_overloads(afn)
    assert [_shape(o, unasync=False) for o in typing.get_overloads(sfn)] == [
        _shape(o, unasync=True) for o in overloads
    ]
    # a blocking method never returns a coroutine; an async one does, unless it is the
    # constructor or an auto-paging iterator (``list_all``), which returns an AsyncIterator
    assert not inspect.iscoroutinefunction(sfn)
    returns = str(inspect.signature(afn).return_annotation)
    awaited = name != "__init__" and not returns.startswith("AsyncIterator[")
    assert inspect.iscoroutinefunction(afn) == awaited
