"""Keep query strings out of the ASGI server's access log.

A client that puts a credential in the URL (`/mcp?access_token=...`) has it refused and revoked, but the
server logs the request line before any application code runs. This filter, on the `uvicorn.access` logger,
rewrites the record so the line carries the path only. Plain `logging`: usable from uvicorn's `--log-config`,
gunicorn's `logconfig_dict` or Django's `LOGGING` alike, without importing Django.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable


class StripQueryStrings(logging.Filter):
    """Drop the query string from the request target in an access log record's arguments.

    uvicorn logs `'%s - "%s %s HTTP/%s" %d'` with `(client, method, path?query, http_version, status)`; every
    argument that is a request target (a string starting with `/`) loses everything from its first `?`.
    With `paths`, only those paths lose it (e.g. `["/mcp", "/mcp/"]`); by default every path does.
    The record is never dropped, only rewritten.
    """

    def __init__(self, name: str = "", paths: Iterable[str] | None = None) -> None:
        super().__init__(name)
        self.paths = frozenset(paths) if paths is not None else None

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(self._has_query(arg) for arg in record.args):
            record.args = tuple(self._stripped(arg) for arg in record.args)
        return True

    def _has_query(self, arg: object) -> bool:
        if not (isinstance(arg, str) and arg.startswith("/") and "?" in arg):
            return False
        return self.paths is None or arg.split("?", 1)[0] in self.paths

    def _stripped(self, arg: object) -> object:
        return str(arg).split("?", 1)[0] if self._has_query(arg) else arg
