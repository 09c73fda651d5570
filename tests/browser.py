"""Helpers for the browser tests: Debian chromium driven by playwright, offline, with a request log.

Nothing here downloads a browser: playwright drives the system chromium through `executable_path`.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
SCREENSHOTS = ROOT / "build" / "screenshots"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-default-apps", "--disable-quic"]
LOCAL_SCHEMES = {"file", "data", "blob", "about", "chrome-extension"}
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}


def chromium_available() -> bool:
    return Path(CHROMIUM).exists()


def is_local(url: str) -> bool:
    """True for file:, data:, blob:, about: URLs and http(s)/ws to this machine."""
    parsed = urlparse(url)
    if parsed.scheme in LOCAL_SCHEMES:
        return True
    return parsed.scheme in {"http", "https", "ws", "wss"} and parsed.hostname in LOCAL_HOSTS


@contextlib.contextmanager
def browser_page(width: int = 1400, height: int = 1000):
    """A fresh chromium page; yields (page, requests) where requests lists every URL the page asked for."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            requests: list[str] = []
            page.on("request", lambda request: requests.append(request.url))
            yield page, requests
        finally:
            browser.close()


def screenshot(page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / name
    page.screenshot(path=str(path), full_page=False)
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def jupyterlab(root_dir: Path, token: str = "bertlook-test", timeout: float = 90):
    """A JupyterLab server on 127.0.0.1 serving `root_dir`; yields its base URL. Update checks, news and
    the extension manager's index are switched off so that the server asks nothing of the network."""
    port = free_port()
    venv_bin = Path(os.environ.get("VIRTUAL_ENV", ROOT / ".venv")) / "bin"
    jupyter = venv_bin / "jupyter" if (venv_bin / "jupyter").exists() else shutil.which("jupyter")
    log = open(root_dir / "jupyterlab.log", "w")
    process = subprocess.Popen(
        [str(jupyter), "lab", "--no-browser", f"--ServerApp.port={port}", "--ServerApp.ip=127.0.0.1",
         f"--ServerApp.token={token}", f"--ServerApp.root_dir={root_dir}", "--LabApp.expose_app_in_browser=True",
         "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
         "--LabApp.extension_manager=readonly", "--ServerApp.open_browser=False", "--ServerApp.allow_root=True"],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    try:
        deadline = time.time() + timeout
        while True:
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            if process.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"JupyterLab did not start: see {root_dir / 'jupyterlab.log'}")
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}", token
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
