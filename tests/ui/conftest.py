"""Playwright on Debian's Chromium: never a downloaded browser."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import IN_CI, ROOT

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
]
SCREENSHOTS = ROOT / "test-results" / "screenshots"


def _require(ok: bool, reason: str) -> None:
    if ok:
        return
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: browser tests must run)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    _require(CHROMIUM.is_file(), f"{CHROMIUM} is missing: apt-get install -y chromium")
    return {**browser_type_launch_args, "executable_path": str(CHROMIUM), "args": CHROMIUM_ARGS}


@pytest.fixture
def dashboard_built():
    _require(
        (ROOT / "frontend" / "dist" / "index.html").is_file(),
        "frontend/dist is not built: make install",
    )


@pytest.fixture
def screenshot(page):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def take(name: str) -> Path:
        path = SCREENSHOTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take
