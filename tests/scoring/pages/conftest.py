"""What the page tests share: one headless Chromium per test module."""

from __future__ import annotations

import os

import pytest

from tests.fixtures.browser import CHROMIUM, FLAGS, INSTALL


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        pytest.fail(f"the Python package playwright is missing ({exc}): {INSTALL}")
    if not (CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK)):
        pytest.fail(f"no Chromium at {CHROMIUM}: {INSTALL}")
    with sync_playwright() as p:
        # launch() gives every browser a fresh, empty user-data-dir of its own, removed on close.
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=FLAGS, timeout=60_000)
        try:
            yield b
        finally:
            b.close()
