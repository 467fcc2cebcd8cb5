"""A real browser for the web page's tests: Debian's Chromium driven by Playwright (its own browser
downloads are not possible here). A test that needs it is skipped, with the reason, where either is
missing."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import REPO

CHROMIUM = Path("/usr/bin/chromium")
PAGE_DIR = REPO / "gputui" / "serve" / "page"


def missing() -> str | None:
    """Why the browser tests cannot run here (None: they can)."""
    if importlib.util.find_spec("playwright") is None:
        return "playwright is not installed (pip install playwright; the tests use the system Chromium)"
    if not os.access(CHROMIUM, os.X_OK):
        return f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    return None


@contextmanager
def chromium_page(width: int = 1280, height: int = 900, dark: bool = False, **context: Any) -> Iterator[Any]:
    """A fresh page of a fresh headless Chromium (`context`: more new_context options)."""
    why = missing()
    if why is not None:
        pytest.skip(why)
    from playwright.sync_api import sync_playwright  # only where the browser tests run

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            ctx = browser.new_context(
                viewport={"width": width, "height": height},
                color_scheme="dark" if dark else "light",
                **context,
            )
            yield ctx.new_page()
        finally:
            browser.close()
