"""Browser assets from npm (d3, jQuery, RequireJS) that the offline BertViz views inline.

`make assets` (`npm ci` in the repository root) installs them into <repo>/node_modules, which is where
they are looked for; the environment variable BERTLOOK_ASSETS can name another node_modules folder (or a
folder that holds one). Files are read once and cached. Nothing here touches the network.
"""
from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from ..core.cache import ROOT as REPO_ROOT

ENV_VAR = "BERTLOOK_ASSETS"

# name -> (path inside node_modules, version pinned in package.json)
ASSETS = {
    "d3": ("d3/dist/d3.min.js", "5.7.0"),
    "jquery": ("jquery/dist/jquery.min.js", "2.2.4"),
    "requirejs": ("requirejs/require.js", "2.3.6"),
}


class AssetsMissingError(FileNotFoundError):
    """The npm assets are not installed (run `make assets`); `missing` is the file looked for, if any."""

    def __init__(self, message: str, missing: Path | None = None):
        super().__init__(message)
        self.missing = missing


def assets_dir() -> Path:
    """The node_modules folder to read from: $BERTLOOK_ASSETS if set, else <repo>/node_modules."""
    named = os.environ.get(ENV_VAR, "").strip()
    folder = Path(named).expanduser() if named else REPO_ROOT / "node_modules"
    if named and (folder / "node_modules").is_dir():
        folder = folder / "node_modules"
    return folder


def asset_path(name: str) -> Path:
    """Path of one asset (a key of ASSETS); AssetsMissingError when it is not there."""
    if name not in ASSETS:
        raise KeyError(f"unknown asset {name!r}; known: {', '.join(ASSETS)}")
    folder = assets_dir()
    path = folder / ASSETS[name][0]
    if not path.is_file():
        source = f"${ENV_VAR}={os.environ[ENV_VAR]}" if os.environ.get(ENV_VAR, "").strip() else "the repository"
        raise AssetsMissingError(
            f"the browser asset {name} {ASSETS[name][1]} is missing: no {path} (looked in {source}). "
            f"Install the assets with `make assets` (that is, `npm ci` in {REPO_ROOT}), or set {ENV_VAR} "
            "to a node_modules folder that has d3, jquery and requirejs.", missing=path)
    return path


def read_asset(name: str) -> str:
    """The text of one asset, read once per file (cached by path, size and modification time)."""
    path = asset_path(name)
    stat = path.stat()
    return _read(str(path), stat.st_size, stat.st_mtime_ns)


def read_assets(names=tuple(ASSETS)) -> dict[str, str]:
    """{name: text} for several assets; AssetsMissingError naming the first one missing."""
    return {name: read_asset(name) for name in names}


def assets_available(names=tuple(ASSETS)) -> bool:
    try:
        for name in names:
            asset_path(name)
    except AssetsMissingError:
        return False
    return True


@lru_cache(maxsize=16)
def _read(path: str, size: int, mtime_ns: int) -> str:
    return Path(path).read_text(encoding="utf-8")
