"""A real browser calls the referee through the gateway across origins: Debian's chromium, driven
by playwright, loads a page from another origin that calls a JSON route with fetch (after a CORS
preflight) and makes a gRPC-Web call; a page from an origin the gateway does not allow gets
nothing. A screenshot of the page is saved (build/screenshots/gateway-browser.png)."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from browsers import SCREENSHOTS, chromium, launch, sync_api
from gateways import Gateway
from servers import ROOT

PAGES = ROOT / "tests" / "pages"
SCREENSHOT = SCREENSHOTS / "gateway-browser.png"


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def page_server() -> Iterator[list[str]]:
    """Two origins serving tests/pages: the first one the gateway will allow, the second not."""
    servers = []
    for _ in range(2):
        server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(PAGES)))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
    try:
        yield [f"http://127.0.0.1:{server.server_address[1]}" for server in servers]
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


def test_a_browser_calls_the_referee_across_origins(page_server: list[str], tmp_path: Path) -> None:
    chromium()
    playwright = sync_api()
    allowed, other = page_server
    gateway = Gateway(tmp_path / "gw", cors_origins=(allowed,))
    try:
        with playwright.sync_playwright() as driver:
            browser = launch(driver)
            try:
                page = browser.new_page(viewport={"width": 900, "height": 400})
                page.goto(f"{allowed}/gateway.html?gateway={gateway.url}")
                page.wait_for_selector("body[data-done=yes]", timeout=30_000)
                assert page.inner_text("#json") == "points 9, request id present"
                assert page.inner_text("#grpcweb") == "points 9, grpc-status 0"
                SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(SCREENSHOT))
                # An origin the gateway does not allow: the browser withholds every reply.
                page.goto(f"{other}/gateway.html?gateway={gateway.url}")
                page.wait_for_selector("body[data-done=yes]", timeout=30_000)
                assert page.inner_text("#json").startswith("failed: TypeError")
                assert page.inner_text("#grpcweb").startswith("failed: TypeError")
            finally:
                browser.close()
        assert SCREENSHOT.stat().st_size > 1000

        # The browser asked first (OPTIONS, from the page's origin), as CORS has it.
        def preflighted() -> bool:
            return any(
                line["method"] == "OPTIONS" and line["path"] == "/v1/hands:solve" and line["origin"] == allowed
                for line in gateway.access_log()
            )

        deadline = time.monotonic() + 10  # Envoy writes its access log out every second
        while not preflighted() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert preflighted(), gateway.access_log()
    finally:
        gateway.stop()
