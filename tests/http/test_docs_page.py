"""`/docs` works offline: Swagger UI's files come from Maya itself, and a real browser renders every route.

The browser is Debian's headless Chromium with every non-loopback name made unresolvable, so
anything the page tried to load from elsewhere would fail. Without Chromium (`apt-get install
chromium`; .ci/run installs it) the browser test is skipped, saying so; the page's own test runs.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def test_the_page_and_its_files_are_maya_s_own(start_server):
    server = start_server(api_keys=("k1",))
    with server.http() as http:
        page = http.get("/docs")
        assets = {name: http.get(f"/docs/assets/{name}") for name in ("swagger-ui-bundle.js", "swagger-ui.css")}
        unknown = http.get("/docs/assets/../../config.py")
        missing = http.get("/docs/assets/redoc.standalone.js")
    assert page.status_code == 200
    urls = re.findall(r'(?:src|href)="([^"]+)"', page.text) + re.findall(r"url: '([^']+)'", page.text)
    assert urls and all(url.startswith("/") for url in urls), urls  # nothing from another host
    assert all(a.status_code == 200 and len(a.content) > 10_000 for a in assets.values())
    assert assets["swagger-ui.css"].headers["content-type"].startswith("text/css")
    assert unknown.status_code == 404 and missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium): the offline "
                                               "/docs page is not rendered in a browser here")
def test_a_headless_browser_renders_every_route_with_no_network(start_server, tmp_path):
    server = start_server()
    result = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
         "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--virtual-time-budget=20000",
         "--dump-dom", server.url + "/docs"],
        capture_output=True, text=True, timeout=180,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    dom = result.stdout
    rendered = set(re.findall(r'data-path="([^"]+)"', dom))
    assert {"/v1/responses", "/v1/chat/completions", "/v1/models", "/health"} <= rendered, rendered
    assert 'class="title">Maya' in dom
