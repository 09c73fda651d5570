"""Helpers for the browser tests: Debian chromium driven by playwright, offline, with a request log.

Nothing here downloads a browser: playwright drives the system chromium through `executable_path`
(tools/browser.py, shared with the slide checks, which also starts JupyterLab).
"""
from __future__ import annotations

import contextlib
from urllib.parse import urlparse

from tools.browser import ROOT, chromium, chromium_available, jupyterlab  # noqa: F401 (the tests' imports)

SCREENSHOTS = ROOT / "build" / "screenshots"
LOCAL_SCHEMES = {"file", "data", "blob", "about", "chrome-extension"}
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}


def is_local(url: str) -> bool:
    """True for file:, data:, blob:, about: URLs and http(s)/ws to this machine."""
    parsed = urlparse(url)
    if parsed.scheme in LOCAL_SCHEMES:
        return True
    return parsed.scheme in {"http", "https", "ws", "wss"} and parsed.hostname in LOCAL_HOSTS


@contextlib.contextmanager
def browser_page(width: int = 1400, height: int = 1000):
    """A fresh chromium page; yields (page, requests) where requests lists every URL the page asked for."""
    with chromium() as browser:
        page = browser.new_page(viewport={"width": width, "height": height})
        requests: list[str] = []
        page.on("request", lambda request: requests.append(request.url))
        yield page, requests


def screenshot(page, name: str):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / name
    page.screenshot(path=str(path), full_page=False)
    return path
