"""The SDK's request specs and namespaces, generated from the route table.

    python -m reference_server.sdk_codegen           # write the SDK's generated files
    python -m reference_server.sdk_codegen --check   # exit 1 if one is out of date

Every route the SDK calls declares it beside its ``Endpoint`` (``sdk=Sdk(...)``,
:mod:`.web.sdk`): the SDK's name and signature, where the route table cannot say them.
The method, path, credential, body class, answer and paging come from the ``Endpoint``.
From each this writes one function of ``svc/_endpoints.py`` returning the call's
``RequestSpec``, and one method of a namespace class in ``svc/_async_namespaces.py`` (plus
``<method>_all`` for a list) sending it; ``python -m tests.unasync`` then writes the
blocking namespaces from that.  What a conversion needs beyond a field's type is a
hand-written function of ``svc/_convert.py``, named by the route (``Sdk(build=...)``).
"""

from __future__ import annotations

import ast
import inspect
import re
import sys
import typing
from collections.abc import Iterator, Sequence
from decimal import Decimal
from pathlib import Path

import attrs

from .app import served
from .generated import ROOT, checking, formatted, refresh
from .web.auth import OptionalAuth, Role
from .web.endpoint import Endpoint
from .web.sdk import Sdk

__all__ = ["ROOT", "Call", "calls", "endpoints_module", "main", "namespaces_module"]

COMMAND = "python -m reference_server.sdk_codegen"
ENDPOINTS = "svc/_endpoints.py"
NAMESPACES = "svc/_async_namespaces.py"
#: The owner dashboard's twins of the seller routes live under this path.
OWNER_ROOT = "/sellers/{seller_id}"
SELLER_ROOT = "/sellers/me"

#: Each namespace's class docstring, in the order the classes are written.
NAMESPACE_DOCS = {
    "owners": "Owner sign-up (``POST /owners``), where the server has it enabled.",
    "sellers": "Seller accounts: owner routes (create, list) and seller-key routes "
    "(``/sellers/me``).",
    "connect": """The seller's payout account at the processor (Connect): onboarding, readiness, the
    payout dashboard and auto payout.

    Seller key; every method also takes ``seller_id`` to act on one of the owner's sellers
    through the owner dashboard (owner JWT).  No call completes onboarding: hand the
    ``onboard_url`` of :meth:`onboard` to a human, then :meth:`sync`.
    """,
    "withdrawals": """Seller balance out to the payout account: ``pending`` ->
    ``in_transit`` -> ``paid``, or ``failed`` (the money is back in the balance).

    Seller key; every method also takes ``seller_id`` for one of the owner's sellers
    (owner JWT).  Withdrawals need ``payouts_enabled`` (see :class:`AsyncConnect`).
    """,
    "resources": "Priced resources (SKUs) of the seller the seller key belongs to.",
    "directory": """The directory: resources their sellers listed, in the client's
    environment.  No credential is needed (none is sent).""",
    "wallet_keys": """Wallet keys (``svc_vw_*``) of the owner: mint, inspect, change policy,
    fund, revoke.

    Owner JWT; the client's ``environment`` picks Test or Live keys.  Amounts are
    ``Decimal``, ``str`` or ``int``, never ``float``.
    """,
    "top_ups": """Money in: the owner pays their account wallet from a wallet they control
    (owner JWT).

    ``POST /owners/me/top-ups`` answers 402 with an x402 ``PAYMENT-REQUIRED`` and an MPP
    ``WWW-Authenticate: Payment`` challenge paying the environment's deposit address (Test:
    the sandbox chain; pay from a faucet wallet).  The same request retried with the
    credential answers the settled :class:`~svc.TopUp`, credited to the account wallet.
    """,
    "spend": "The wallet key's (``svc_vw_*``) spending: what is left, and paying any 402 URL.",
    "handles": "Handles (``@name``): ledger addresses of an owner's account wallet.",
    "access": "Receipt checks for sellers; the route is public.",
    "receipts": """Receipts as their payer (wallet key) or their seller (seller key) reads
    them, and the capture of a metered ledger payment by its seller.""",
    "payments": """Where a payment stands (``claimed``, ``settled``, ``released``,
    ``refunded``), for its payer, its seller or the owner of either.""",
    "refunds": """Refunds (seller key): all or part of a payment given back, never more
    than was paid.""",
    "gates": """Open rails at the seller's own gate (seller key): what ``svc_asgi`` asks
    the service.

    A gate in front of the seller's app gets the x402 / MPP challenge for an unpaid
    request with :meth:`challenge`, verifies and claims a presented credential with
    :meth:`redeem`, serves the request, then :meth:`settle` s the claim when the answer
    succeeded or :meth:`release` s it when it failed; the service holds every key and
    settles, the app holds none.
    """,
    "webhooks": """Webhook endpoints of the owner (owner JWT), in the client's ``environment``.

    An endpoint receives the signed events of its environment (all of them, or the
    ``events`` it lists); check each delivery with :func:`svc.webhooks.verify`.
    """,
}


#: What every list's method and its pager say of paging, after their own docstring.
PAGE_DOC = """One page: ``limit`` 1 to 100 (the service's default is 20); pass the last item's
``id`` as ``starting_after`` for the next page while ``has_more`` is true, or use
:meth:`{pager}`."""
PAGER_DOC = "Pages of ``limit`` are fetched as the iteration reaches them."


@attrs.frozen
class Param:
    """One parameter of a generated signature."""

    name: str
    annotation: str
    default: str | None
    keyword: bool

    def __str__(self) -> str:
        text = f"{self.name}: {self.annotation}"
        return text if self.default is None else f"{text} = {self.default}"


@attrs.frozen
class Call:
    """One SDK call of a route: its ``Endpoint`` and its ``Sdk`` declaration."""

    ep: Endpoint
    sdk: Sdk

    @property
    def function(self) -> str:
        """Its function in ``svc/_endpoints.py``: ``resources.list`` -> ``resources_list``."""
        return self.sdk.name.replace(".", "_")

    @property
    def namespace(self) -> str | None:
        return self.sdk.name.split(".")[0] if "." in self.sdk.name else None

    @property
    def method(self) -> str:
        return self.sdk.name.rsplit(".", 1)[-1]

    @property
    def model(self) -> str:
        if self.sdk.response is not None:
            return self.sdk.response.__name__
        if not isinstance(self.ep.contract.response, type):
            raise ValueError(f"{self.ep.method} {self.ep.path}: the SDK reads one answer model")
        return self.ep.contract.response.__name__

    @property
    def item(self) -> str:
        """What a list's pages hold: its model's ``data`` items."""
        data = typing.get_type_hints(self.ep.contract.response)["data"]
        return str(typing.get_args(data)[0].__name__)

    @property
    def path_names(self) -> list[str]:
        """The path's parameters as the SDK names them."""
        names = re.findall(r"{(\w+)}", self.ep.path)
        return [self.sdk.path_names.get(name, name) for name in names]

    @property
    def path(self) -> str:
        """The path template with the SDK's parameter names."""
        names = self.sdk.path_names
        return re.sub(r"{(\w+)}", lambda m: "{" + names.get(m[1], m[1]) + "}", self.ep.path)

    def params(self) -> list[Param]:
        """The signature: the declared ``params``, then paging's and ``seller_id``."""
        tree = ast.parse(f"def f({self.sdk.params}): pass").body[0]
        if not isinstance(tree, ast.FunctionDef):
            raise TypeError("a signature parses as a function")
        args = tree.args
        positional = args.args
        defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
        params = [
            Param(arg.arg, _unparse(arg.annotation), _unparse(d) if d else None, keyword=False)
            for arg, d in zip(positional, defaults, strict=True)
        ]
        if self.ep.paged:
            params += [
                Param("limit", "int | None", "None", keyword=True),
                Param("starting_after", "str | None", "None", keyword=True),
            ]
        params += [
            Param(arg.arg, _unparse(arg.annotation), _unparse(d) if d else None, keyword=True)
            for arg, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
        ]
        if self.sdk.owner:
            params.append(Param("seller_id", "str | None", "None", keyword=True))
        missing = set(self.path_names) - {p.name for p in params}
        if missing:
            raise ValueError(f"{self.sdk.name}: no parameter for the path's {sorted(missing)}")
        return params

    def spec_params(self) -> list[Param]:
        """The request spec function's parameters: the namespace method's but ``sdk_only``."""
        return [p for p in self.params() if p.name not in self.sdk.sdk_only]

    def sent(self) -> list[Param]:
        """The parameters the body (or a list's query) is made of."""
        skip = {*self.path_names, "seller_id", *self.sdk.sdk_only}
        return [p for p in self.params() if p.name not in skip]


def _unparse(node: ast.expr | None) -> str:
    if node is None:
        raise ValueError("every SDK parameter is annotated")
    return ast.unparse(node)


def calls() -> list[Call]:
    """Every SDK call the route table declares, in its order."""
    served_routes = served()
    found = []
    for ep in served_routes:
        declared = () if ep.sdk is None else ep.sdk
        for sdk in (declared,) if isinstance(declared, Sdk) else declared:
            found.append(Call(ep, sdk))
    routes = {(ep.method, ep.path) for ep in served_routes}
    for call in found:
        if call.sdk.owner and (call.ep.method, _owner_path(call.ep.path)) not in routes:
            raise ValueError(f"{call.sdk.name}: no owner dashboard twin of {call.ep.path}")
    return found


def _owner_path(path: str) -> str:
    """The owner dashboard's twin of a seller route: ``/sellers/me/x`` (or ``/x``) is
    ``/sellers/{seller_id}/x``."""
    return OWNER_ROOT + (path.removeprefix(SELLER_ROOT) if path.startswith(SELLER_ROOT) else path)


# --- svc/_endpoints.py --------------------------------------------------------------------


def _signature(params: list[Param]) -> str:
    parts = [str(p) for p in params if not p.keyword]
    keyword = [str(p) for p in params if p.keyword]
    if keyword:
        parts += ["*", *keyword]
    return ", ".join(parts)


def _body(call: Call) -> str | None:
    """The ``json=`` expression, or ``None`` for a call that sends no body."""
    sent = call.sent()
    if call.sdk.build is not None:
        return f"{call.sdk.build}({', '.join(f'{p.name}={p.name}' for p in sent)})"
    body = call.ep.body_class
    if body is None:
        return None if call.ep.method == "DELETE" else "{}"
    hints = typing.get_type_hints(body, include_extras=False)
    fields = []
    for p in sent:
        if p.name not in hints:
            raise ValueError(f"{call.sdk.name}: {p.name} is no field of {body.__name__}")
        value = p.name
        if Decimal in (hints[p.name], *typing.get_args(hints[p.name])):
            value = f"positive({p.name})"
            if p.default == "None":
                value = f"None if {p.name} is None else {value}"
        fields.append(f"{p.name}={value}")
    return f"to_json({body.__name__}({', '.join(fields)}))"


def _role_arguments(ep: Endpoint) -> list[str]:
    """The credential the spec sends: the route's role, then the others it takes."""
    if ep.role is None:
        return []
    args = [f"role=Role.{Role(ep.role).name}"]
    also = [f"Role.{role.name}" for role in ep.roles[1:]]
    if also:  # one alone keeps its comma: a tuple
        args.append(f"also_roles=({', '.join(also)}{',' if len(also) == 1 else ''})")
    return args


def _spec_arguments(call: Call) -> list[str]:
    ep = call.ep
    args = [f'method="{ep.method}"']
    if call.sdk.owner:
        paths = f'"{call.path}", "{_owner_path(call.path)}"'
        extra = "".join(f", {name}={name}" for name in call.path_names)
        args.append(f"**seller_route(seller_id, {paths}{extra})")
    else:
        args.append(f'path="{call.path}"')
        args += _role_arguments(ep)
        if call.path_names:
            pairs = ", ".join(f'"{name}": {name}' for name in call.path_names)
            args.append(f"path_params={{{pairs}}}")
    if isinstance(ep.auth, OptionalAuth):
        args.append("role_optional=True")
    if ep.writes:
        body = _body(call)
        if body is not None:
            args.append(f"json={body}")
    elif call.sdk.build is not None:
        args.append(f"query={_body(call)}")
    elif ep.paged:
        args.append("query=page_query(limit, starting_after)")
    if call.sdk.keep_null:
        args.append("keep_null=True")
    args.append(f"parse=as_model({call.model})")
    return args


def _function(call: Call) -> str:
    params = _signature(call.spec_params())
    arguments = ", ".join(_spec_arguments(call))  # no trailing comma: ruff joins what fits
    return (
        f"def {call.function}({params}) -> RequestSpec[{call.model}]:\n"
        f'    """``{call.ep.method} {call.ep.path}``."""\n'
        f"    return RequestSpec({arguments})\n"
    )


def _header(what: str) -> str:
    return f"# Generated from the route table by `{COMMAND}` -- do not edit.\n{what}"


_ENDPOINTS_DOC = '''"""Every route the SDK calls, as a function returning its ``RequestSpec``.

The namespace classes of the sync and async clients only call these functions and send
the result, so the route, credential, body and response model of an endpoint live in
exactly one place: its ``Endpoint`` in the reference server's route table, from which
this file is written.  Arguments are checked (:mod:`svc._convert`) before anything is sent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._convert import *  # noqa: F403
from ._models import *  # noqa: F403
from ._spec import RequestSpec, Role, as_model
from ._types import NOT_GIVEN, NotGiven
from .bodies import *  # noqa: F403
'''


def endpoints_module(found: Sequence[Call]) -> str:
    """The text of ``svc/_endpoints.py``."""
    names = sorted(call.function for call in found)
    body = "\n\n".join(_function(call) for call in found)
    exported = "".join(f'    "{name}",\n' for name in names)
    text = _header(_ENDPOINTS_DOC) + f"\n__all__ = [\n{exported}]\n\n\n{body}"
    return formatted(_explicit_imports(text), ENDPOINTS)


def _explicit_imports(text: str) -> str:
    """Replace each ``import *`` by the names the text uses from that module (read from
    the SDK's files, not imported: the server uses no private ``svc`` module)."""
    words = set(re.findall(r"\b\w+\b", text))
    for module in ("_async_send", "_convert", "_models", "bodies"):
        used = sorted(words & _exported(ROOT / "svc" / f"{module}.py") - {"__all__"})
        words -= set(used)
        line = f"from .{module} import *  # noqa: F403\n"
        text = text.replace(line, f"from .{module} import {', '.join(used)}\n" if used else "")
    return text


def _exported(path: Path) -> set[str]:
    """The public names a module of the SDK defines or lists in ``__all__``."""
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                names |= set(ast.literal_eval(node.value)) if node.value else set()
    return {name for name in names if not name.startswith("_")}


# --- svc/_async_namespaces.py ------------------------------------------------------------


_NAMESPACES_DOC = '''"""Endpoint namespaces of the clients (``client.sellers.me()``...).

Each method builds its spec with ``_endpoints`` and sends it through the client, so every
namespace is the same API on both clients by construction.  Both are generated: this
file from the route table, ``_namespaces`` from this one by ``python -m tests.unasync``.
Adding a namespace: its class docstring in ``reference_server.sdk_codegen``, then
regenerate; the client takes every namespace from :class:`AsyncNamespaces`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from functools import cached_property
from typing import Any, Literal, overload

from . import _endpoints as ep
from ._async_send import *  # noqa: F403
from ._convert import *  # noqa: F403
from ._models import *  # noqa: F403
from ._options import RequestOptions
from ._paging import aiterate
from ._types import NOT_GIVEN, NotGiven
from .bodies import *  # noqa: F403
'''

_NAMESPACE_BASE = """

class _Namespace:
    def __init__(self, client: AsyncRequester) -> None:
        self._client = client
"""


def _class_name(namespace: str) -> str:
    return "Async" + "".join(part.title() for part in namespace.split("_"))


def _docstring(text: str, indent: str) -> str:
    """A docstring as written in the class body: closing quotes on their own line after
    several paragraphs."""
    lines = inspect.cleandoc(text).split("\n")
    body = lines[0] + "".join("\n" + (indent + line if line else "") for line in lines[1:])
    closing = "\n" + indent if "" in lines else ""
    return f'{indent}"""{body}{closing}"""\n'


def _paragraphs(*texts: str) -> str:
    return "\n\n".join(inspect.cleandoc(text) for text in texts if text)


def _arguments(params: list[Param], **override: str) -> str:
    """The call passing ``params`` on as they were taken."""
    values = [override.get(p.name, p.name) for p in params]
    return ", ".join(
        f"{p.name}={value}" if p.keyword else value for p, value in zip(params, values, strict=True)
    )


def _method(call: Call) -> str:
    params = call.params()
    options = Param("options", "RequestOptions | None", "None", keyword=True)
    signature = _signature([*params, options])
    text = _overloads(call, params, options)
    returns = call.model if call.sdk.streams is None else f"{call.model} | {call.sdk.streams}"
    text += f"    async def {call.method}(self, {signature}) -> {returns}:\n"
    doc = call.sdk.doc
    if call.ep.paged:
        doc = _paragraphs(doc, PAGE_DOC.format(pager=f"{call.method}_all"))
    if doc:
        text += _docstring(doc, " " * 8)
    text += f"        spec = ep.{call.function}({_arguments(call.spec_params())})\n"
    if call.sdk.send is None:
        return text + "        return await self._client._request(spec, options)\n"
    sent = ", ".join(f"{p.name}={p.name}" for p in params)
    return text + f"        return await {call.sdk.send}(self._client, spec, options, {sent})\n"


def _overloads(call: Call, params: list[Param], options: Param) -> str:
    """A streaming call's two typings: ``stream=False`` answers the model, ``True`` the
    stream class."""
    if call.sdk.streams is None:
        return ""
    text = ""
    for flag, default, returns in (
        ("False", "False", call.model),
        ("True", None, call.sdk.streams),
    ):
        typed = [
            attrs.evolve(p, annotation=f"Literal[{flag}]", default=default)
            if p.name == "stream"
            else p
            for p in params
        ]
        signature = _signature([*typed, options])
        text += f"    @overload\n    async def {call.method}(self, {signature}) -> {returns}: ...\n"
    return text


def _pager(call: Call) -> str:
    """``<method>_all``: every item of a list, page by page."""
    params = [p for p in call.params() if p.name != "starting_after"]
    options = Param("options", "RequestOptions | None", "None", keyword=True)
    signature = _signature([*params, options])
    text = f"    def {call.method}_all(self, {signature}) -> AsyncIterator[{call.item}]:\n"
    text += _docstring(_paragraphs(call.sdk.all_doc, PAGER_DOC), " " * 8)
    page = call.params()
    arguments = _arguments([*page, options], starting_after="after")
    return text + f"        return aiterate(lambda after: self.{call.method}({arguments}))\n"


def _namespace_class(namespace: str, members: list[Call]) -> str:
    text = f"class {_class_name(namespace)}(_Namespace):\n"
    text += _docstring(NAMESPACE_DOCS[namespace], " " * 4)
    for call in members:
        text += "\n" + _method(call)
        if call.ep.paged:
            text += "\n" + _pager(call)
    return text


_NAMESPACES_CLASS = '''class AsyncNamespaces:
    """Every namespace of the client (``client.sellers``...), made on first use and kept:
    the client inherits them, so a new namespace needs no line of the client."""

'''


def _attribute(namespace: str) -> str:
    return f"    {namespace} = cached_property({_class_name(namespace)})\n"


def namespaces_module(found: Sequence[Call]) -> str:
    """The text of ``svc/_async_namespaces.py``."""
    by_namespace: dict[str, list[Call]] = {name: [] for name in NAMESPACE_DOCS}
    for call in found:
        if call.namespace is not None:
            by_namespace[call.namespace].append(call)
    classes = [_namespace_class(name, members) for name, members in by_namespace.items()]
    classes.append(_NAMESPACES_CLASS + "".join(_attribute(name) for name in by_namespace))
    names = ["AsyncNamespaces", "AsyncRequester", *(_class_name(name) for name in by_namespace)]
    exported = "".join(f'    "{name}",\n' for name in sorted(names))
    text = _header(_NAMESPACES_DOC) + f"\n__all__ = [\n{exported}]\n{_NAMESPACE_BASE}"
    text += "".join(f"\n\n{cls}" for cls in classes)
    return formatted(_explicit_imports(text), NAMESPACES)


def _targets() -> Iterator[tuple[str, str]]:
    found = calls()
    yield ENDPOINTS, endpoints_module(found)
    yield NAMESPACES, namespaces_module(found)


def main(argv: list[str] | None = None) -> int:
    check = checking(argv)
    stale = [
        name
        for name, text in _targets()
        if not refresh(ROOT / name, text, check=check, name=name, source="the route table")
    ]
    if check and stale:
        print(f"out of date: {', '.join(stale)}; run `{COMMAND}`")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
