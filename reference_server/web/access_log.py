"""The access log names a secret path by its route's template, never the secret.

A one-time link's token (``/sandbox/connect/onboard/{token}``) opens an account's page:
whoever reads the access log could use it.  Routes whose path holds one declare
``Page(secret_path=True)`` (:class:`.endpoint.Page`), and uvicorn's access log line of any
request under such a route -- its path up to the secret, bare or under ``/api`` -- shows
the template without the query string, whatever the answer (the page, a 404, a
trailing-slash redirect, a refusal at the input boundary).  A buy page's ``short_id`` is
not a secret (it is in every ``pay_url`` and ``gate_url`` the API and the directory
answer, and it lets one pay, not take), so ``/buy/...`` is logged as requested.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from .endpoint import API_PREFIX, Endpoint

__all__ = ["SecretPathFilter", "hide_secret_paths", "loggable_path"]

#: The logger uvicorn writes its access log to; its records' arguments are
#: ``(client, method, path with query, http version, status)``.
ACCESS_LOGGER = "uvicorn.access"
_PATH_ARG = 2


def _templates(endpoints: Iterable[Endpoint]) -> dict[str, str]:
    """Each secret route's path up to its first parameter -> its template."""
    found = {}
    for ep in endpoints:
        if ep.page is not None and ep.page.secret_path:
            for prefix in ("", API_PREFIX):
                template = prefix + ep.path
                found[template[: template.index("{")]] = template
    return found


def loggable_path(path: str, templates: dict[str, str]) -> str:
    """``path`` (with its query) as the access log may show it."""
    bare = path.partition("?")[0]
    for start, template in templates.items():
        if bare.startswith(start) and len(bare) > len(start):
            return template
    return path


class SecretPathFilter(logging.Filter):
    """Rewrites an access log record's path to its secret route's template."""

    def __init__(self, endpoints: Iterable[Endpoint]) -> None:
        super().__init__()
        self.templates = _templates(endpoints)

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) > _PATH_ARG:
            path = args[_PATH_ARG]
            if isinstance(path, str):
                shown = loggable_path(path, self.templates)
                record.args = (*args[:_PATH_ARG], shown, *args[_PATH_ARG + 1 :])
        return True


def hide_secret_paths(endpoints: Iterable[Endpoint]) -> None:
    """Install the filter on uvicorn's access logger (once: installing again replaces
    it), after uvicorn configured its logging."""
    logger = logging.getLogger(ACCESS_LOGGER)
    for old in [f for f in logger.filters if isinstance(f, SecretPathFilter)]:
        logger.removeFilter(old)
    logger.addFilter(SecretPathFilter(endpoints))
