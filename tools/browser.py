"""Debian's chromium driven by playwright, and JupyterLab on localhost: what the slide checks and the browser tests
open pages with. Nothing here downloads a browser: playwright drives the system chromium through `executable_path`.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-default-apps", "--disable-quic"]
PROJECTOR = {"width": 1024, "height": 768}


def chromium_available() -> bool:
    return Path(CHROMIUM).exists()


@contextlib.contextmanager
def chromium():
    """A headless chromium (playwright's Browser), closed on exit."""
    from playwright.sync_api import sync_playwright

    if not chromium_available():
        raise SystemExit(f"no chromium at {CHROMIUM} (`make browser`)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def jupyterlab(root_dir: Path, token: str = "bertlook-test", timeout: float = 90, kit_root: Path | None = None,
               log: Path | None = None, env: dict | None = None):
    """A JupyterLab server on 127.0.0.1 serving `root_dir`, configured as `make lab` configures it (the lecture
    copy; `kit_root`: the kit folder it protects, default this checkout), with settings and workspaces of its
    own, so that nothing a test does (a slideshow left open, a changed setting) reaches the next run; update
    checks, news and the extension manager's index switched off, so that it asks nothing of the network; `env`:
    more environment variables for it. Yields (its base URL, its token)."""
    port = free_port()
    venv_bin = Path(os.environ.get("VIRTUAL_ENV", ROOT / ".venv")) / "bin"
    jupyter = venv_bin / "jupyter" if (venv_bin / "jupyter").exists() else shutil.which("jupyter")
    state = Path(tempfile.mkdtemp(prefix="bertlook-lab-"))
    log_file = open(log or state / "jupyterlab.log", "w")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "JUPYTERLAB_SETTINGS_DIR": str(state / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(state / "workspaces"), **(env or {})}
    process = subprocess.Popen(
        [str(jupyter), "lab", "--no-browser", f"--ServerApp.port={port}", "--ServerApp.ip=127.0.0.1",
         f"--ServerApp.token={token}", f"--ServerApp.root_dir={root_dir}", "--LabApp.expose_app_in_browser=True",
         "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
         "--LabApp.extension_manager=readonly", "--ServerApp.open_browser=False", "--ServerApp.allow_root=True",
         f"--LectureContentsManager.kit_root={kit_root or ROOT}"],
        stdout=log_file, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.time() + timeout
        while True:
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            if process.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"JupyterLab did not start: see {log_file.name}")
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}", token
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        log_file.close()
        shutil.rmtree(state / "settings", ignore_errors=True)
        shutil.rmtree(state / "workspaces", ignore_errors=True)
