"""The on-disk cache (data/cache, git-ignored): npz entries keyed by model, data and code version.

Each file starts with the sha256 (hex) of the npz payload that follows it and is written atomically
(temporary file in the same folder, then rename): a reader sees a whole entry or none, and a truncated
or tampered entry is detected and ignored, so the caller recomputes it.
"""
from __future__ import annotations

import hashlib
import io
import os
import tempfile
import warnings
from functools import lru_cache
from pathlib import Path

import numpy as np

PACKAGE_DIR = Path(__file__).resolve().parent
DEFAULT_CACHE_DIR = PACKAGE_DIR.parent / "data" / "cache"


# modules that only present results: editing them leaves every cached number valid
PRESENTATION_MODULES = frozenset({"__init__.py", "viz.py", "widgets.py", "assets.py", "report.py", "paper.py"})


@lru_cache(maxsize=1)
def code_version() -> str:
    """sha256 of the source of every module that computes (all but PRESENTATION_MODULES): a change to
    any of them invalidates cached results; a new module counts unless it is listed there."""
    digest = hashlib.sha256()
    for path in sorted(PACKAGE_DIR.glob("*.py")):
        if path.name not in PRESENTATION_MODULES:
            digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


def entry_path(cache_dir: Path | str, name: str, *keys: str) -> Path:
    """cache_dir/<name>-<hash of keys and code version>.npz"""
    key = hashlib.sha256("|".join((*keys, code_version())).encode()).hexdigest()
    return Path(cache_dir) / f"{name}-{key[:24]}.npz"


def save_result(path: Path, result: dict[str, np.ndarray]) -> None:
    """Write a dict of arrays to `path` atomically, prefixed with its checksum."""
    buffer = io.BytesIO()
    np.savez(buffer, **result)
    payload = buffer.getvalue()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(hashlib.sha256(payload).hexdigest().encode() + payload)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_result(path: Path) -> dict[str, np.ndarray] | None:
    """The dict of arrays at `path`, or None when it is missing, truncated or tampered with."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    digest, payload = raw[:64], raw[64:]
    if hashlib.sha256(payload).hexdigest().encode() != digest:
        warnings.warn(f"cache entry {path.name} is corrupted (checksum mismatch); recomputing it")
        return None
    with np.load(io.BytesIO(payload), allow_pickle=False) as data:
        return {k: data[k] for k in data.files}
