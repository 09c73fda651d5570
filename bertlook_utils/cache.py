"""The on-disk cache (data/cache, git-ignored): npz entries keyed by model, data and code version.

Each file starts with the sha256 (hex) of the npz payload that follows it and is written atomically
(temporary file in the same folder, then rename): a reader sees a whole entry or none, and a truncated
or tampered entry is detected and ignored, so the caller recomputes it.
"""
from __future__ import annotations

import hashlib
import io
import os
import re
import tempfile
import warnings
from functools import lru_cache
from pathlib import Path

import numpy as np

PACKAGE_DIR = Path(__file__).resolve().parent
ROOT = PACKAGE_DIR.parent  # the checkout: the package is used from an editable install inside it
DATA_DIR = ROOT / "data"  # the kit's own data (coreference set, pattern labels) and the cache
DEFAULT_CACHE_DIR = DATA_DIR / "cache"

_IMPORT = re.compile(r"^[ \t]*from \.(\w*) import ([\w, ]+)", re.MULTILINE)


def _package_imports(name: str) -> set[str]:
    """Names of the package modules that module `name` imports (`from .x import` / `from . import x`)."""
    found = set()
    for module, names in _IMPORT.findall((PACKAGE_DIR / f"{name}.py").read_text()):
        found.update([module] if module else (n.strip() for n in names.split(",")))
    return {m for m in found if (PACKAGE_DIR / f"{m}.py").exists()}


@lru_cache(maxsize=None)
def code_version(name: str) -> str:
    """sha256 of the source of package module `name` (e.g. "surface") and of every package module it
    imports (anywhere in it), directly or not: editing any of them invalidates the results it cached; editing
    another module (a figure, a comparison table, the paper's numbers, a new analysis) leaves them valid,
    since no analysis imports presentation code (tests/test_layers.py)."""
    todo, seen = [name], set()
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(_package_imports(module))
    digest = hashlib.sha256()
    for module in sorted(seen):
        digest.update(module.encode() + (PACKAGE_DIR / f"{module}.py").read_bytes())
    return digest.hexdigest()


def entry_path(cache_dir: Path | str, name: str, *keys: str, version: str) -> Path:
    """cache_dir/<name>-<hash of keys and the code version>.npz"""
    key = hashlib.sha256("|".join((*keys, version)).encode()).hexdigest()
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
