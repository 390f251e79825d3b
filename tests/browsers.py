"""A real browser for the tests: Debian's chromium (``make browser`` installs it where root and
apt-get allow), driven by playwright from the dev extra; a test without either skips and says why.

``chromium()`` is the browser's path; ``launch(driver)`` starts it headless with the flags every
browser test uses; ``SCREENSHOTS`` is where the tests save their screenshots (under build/,
which git ignores)."""

from __future__ import annotations

import shutil
from typing import Any

import pytest
from servers import ROOT

SCREENSHOTS = ROOT / "build" / "screenshots"
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def chromium() -> str:
    """Debian's chromium, or skip."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("Debian's chromium is not installed (make browser installs it as root where apt-get works)")
    return found


def sync_api() -> Any:
    """playwright's sync API, or skip."""
    return pytest.importorskip("playwright.sync_api", reason="playwright (the dev extra) is not installed")


def launch(driver: Any) -> Any:
    """Chromium, headless, started by a playwright driver."""
    return driver.chromium.launch(executable_path=chromium(), headless=True, args=CHROMIUM_FLAGS)
