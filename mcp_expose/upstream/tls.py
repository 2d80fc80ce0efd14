"""The certificates an upstream's HTTPS is checked against: the system's, and a deployment's own CA bundle.

Connections to upstreams ignore `SSL_CERT_FILE` and the like (`trust_env=False`: the environment must not
redirect them through a proxy), so a private CA is named in `UPSTREAM_CA_BUNDLE`. It is added to the system's
authorities, never put in their place, and host names are always checked.
"""

from __future__ import annotations

import ssl
from functools import lru_cache

from mcp_expose.core.conf import get_settings


def upstream_tls() -> ssl.SSLContext:
    """The TLS context of every connection to an upstream (calls, discovery, listeners, token endpoints)."""
    return _context(get_settings().UPSTREAM_CA_BUNDLE or "")


def bundle_problem(path: object) -> str | None:
    """Why `path` cannot serve as `UPSTREAM_CA_BUNDLE`, or None (an empty value: the system's authorities alone)."""
    if path in (None, ""):
        return None
    if not isinstance(path, str):
        return "it is not a path"
    try:
        ssl.create_default_context().load_verify_locations(cafile=path)
    except FileNotFoundError:
        return "no such file"
    except (ssl.SSLError, OSError, ValueError) as exc:
        return f"it holds no certificate that can be read ({type(exc).__name__})"
    return None


@lru_cache(maxsize=4)
def _context(bundle: str) -> ssl.SSLContext:
    context = ssl.create_default_context()
    if bundle:
        context.load_verify_locations(cafile=bundle)
    return context
