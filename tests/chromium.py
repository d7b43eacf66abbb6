"""Debian's Chromium, as the browser tests and the README's screenshots launch it:
Playwright's own browser download cannot work on a machine without the internet."""

from __future__ import annotations

import os

CHROMIUM_PATH = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    # Without these Chromium keeps dialling out to a network it cannot reach.
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
