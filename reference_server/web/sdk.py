"""What the SDK's call of a route is, where the route table cannot say it.

``Endpoint.sdk`` holds one (or a tuple: one route, several SDK methods); ``python -m
reference_server.sdk_codegen`` writes ``svc/_endpoints.py`` and the clients' namespaces
from the route (method, path, credential, body class, answer, paging) and this.
"""

from __future__ import annotations

import attrs

__all__ = ["Sdk"]


@attrs.frozen
class Sdk:
    """One SDK method calling the route.

    ``name``: ``"namespace.method"`` (``"resources.list"`` is ``client.resources.list``),
    or a bare name for a method the client declares itself (``"pay"``).

    ``params``: the Python signature the SDK takes, without ``options``; a list's
    ``limit`` and ``starting_after``, and an ``owner`` route's ``seller_id``, are added as
    keyword arguments.  A path parameter is one of them, named as in the path unless
    ``path_names`` renames it.

    ``build``: the function of ``svc/_convert.py`` that makes the JSON body (a list's
    query) from the other arguments; without it each body field is the argument of its
    name, an amount checked with ``positive``.

    ``owner``: given ``seller_id``, the call goes to the owner dashboard's twin of the
    route (under ``/sellers/{seller_id}``) with the owner JWT.

    ``keep_null``: a top-level ``None`` in the body is sent as ``null`` (a PATCH whose
    builder puts only the fields given).

    ``doc``, ``all_doc``: the docstrings of the namespace method and of a list's
    ``<method>_all``.

    ``response``: which of the route's answers (a tuple) this call reads.

    ``sdk_only``, ``send``: parameters the request spec does not take, for ``send``, the
    function of ``svc/_async_send.py`` that sends the spec instead of the client (a
    top-up paying its own 402).

    ``streams``: the class a ``stream=True`` call returns instead of ``response`` (the
    ``stream`` parameter, in ``params`` and ``sdk_only``, types as two overloads).
    """

    name: str
    params: str = ""
    doc: str = ""
    all_doc: str = ""
    path_names: dict[str, str] = attrs.field(factory=dict)
    build: str | None = None
    owner: bool = False
    keep_null: bool = False
    response: type | None = None
    sdk_only: tuple[str, ...] = ()
    send: str | None = None
    streams: str | None = None
