"""`manage.py demo` as it serves: production-like by default (DEBUG off), debug pages only with `--debug`.

The command runs as a real process: how it serves is the subject."""

from __future__ import annotations

import re
from pathlib import Path

import httpx2
import pytest

from .live import run_demo

pytestmark = pytest.mark.live

METADATA = "/.well-known/oauth-authorization-server/o"
# What Django's technical error pages carry: a traceback, the settings dump, file paths.
DEBUG_PAGE_MARKERS = ("Traceback", "DisallowedHost", "Django settings", "SECRET_KEY", "site-packages")


def test_by_default_a_forged_host_gets_a_plain_400_and_the_admin_keeps_its_css(demo_data: tuple[Path, str]) -> None:
    with run_demo(demo_data[0]) as demo:
        forged = httpx2.get(demo.base_url + METADATA, headers={"Host": "evil.example"})
        login = httpx2.get(demo.base_url + "/admin/login/")
        stylesheets = re.findall(r'href="(/static/admin/css/[^"]+\.css)"', login.text)
        css = [httpx2.get(demo.base_url + href) for href in stylesheets]
        served = httpx2.get(demo.base_url + METADATA)
    assert forged.status_code == 400
    assert not [marker for marker in DEBUG_PAGE_MARKERS if marker in forged.text], forged.text
    assert login.status_code == 200 and "/static/admin/css/base.css" in stylesheets
    assert css and [(response.status_code, response.headers["content-type"]) for response in css] == [
        (200, "text/css")
    ] * len(css)
    assert served.status_code == 200 and served.json()["issuer"] == demo.base_url + "/o"
    assert "DEBUG:         off" in demo.log()


def test_debug_shows_django_s_debug_pages(demo_data: tuple[Path, str]) -> None:
    with run_demo(demo_data[0], "--debug") as demo:
        forged = httpx2.get(demo.base_url + METADATA, headers={"Host": "evil.example"})
    assert forged.status_code == 400 and "DisallowedHost" in forged.text
    assert "DEBUG:         on" in demo.log()
