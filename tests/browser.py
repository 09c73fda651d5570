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


def run_all(page, url: str, token: str, path: str) -> None:
    """Open `path` in JupyterLab, run every cell and wait until the last has run; no cell may fail."""
    page.goto(f"{url}/lab/tree/{path}?token={token}")
    page.wait_for_function("window.jupyterapp && window.jupyterapp.shell.currentWidget"
                           " && window.jupyterapp.shell.currentWidget.sessionContext.session"
                           " && window.jupyterapp.shell.currentWidget.sessionContext.session.kernel", timeout=90_000)
    page.evaluate("window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs')")
    page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_function("""() => {
        const panel = window.jupyterapp.shell.currentWidget, cells = panel.content.widgets;
        return panel.sessionContext.session.kernel.status === 'idle'
            && cells.every(c => c.model.type !== 'code' || !c.model.sharedModel.source.trim()
                                || c.model.executionCount !== null);
    }""", timeout=900_000, polling=1000)
    errors = page.evaluate("""() => window.jupyterapp.shell.currentWidget.content.widgets
        .filter(c => c.model.type === 'code' && c.model.outputs.toJSON().some(o => o.output_type === 'error'))
        .map(c => c.model.sharedModel.source.slice(0, 80))""")
    assert errors == [], errors
