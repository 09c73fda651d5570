"""The on-disk cache (data/cache, git-ignored): npz entries keyed by model, data and code version
(`source.code_version`).

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
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]  # the checkout: the package is used from an editable install inside it
DATA_DIR = ROOT / "data"  # the kit's own data (coreference set, pattern labels) and the cache
DEFAULT_CACHE_DIR = DATA_DIR / "cache"


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
        warnings.warn(f"cache entry {path.name} is corrupted (checksum mismatch); recomputing it", stacklevel=2)
        return None
    with np.load(io.BytesIO(payload), allow_pickle=False) as data:
        return {k: data[k] for k in data.files}
