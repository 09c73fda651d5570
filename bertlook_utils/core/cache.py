"""The on-disk cache (data/cache, git-ignored): npz entries keyed by model, data and code version
(`source.code_version`).

Each file starts with the sha256 (hex) of the npz payload that follows it and is written atomically
(temporary file in the same folder, then rename): a reader sees a whole entry or none. The payload also holds
the file name it was written for (`IDENTITY`), so an entry copied over another's file or renamed is not
taken for it. Whatever cannot be read back as the entry written under its name (truncated, tampered with,
moved, not an npz, unreadable) is a miss with a warning: the caller recomputes it.

A cache can be shared: entries are created mode 0666 less the umask, like any new file, and a folder that is
not writable is read but never written (results then stay in memory). A hit refreshes the entry's
modification time, so `prune` can remove the entries not used for a while, and the temporary files and folders
that writers killed mid-write left behind.
"""
from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import os
import re
import secrets
import shutil
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]  # the checkout: the package is used from an editable install inside it
DATA_DIR = ROOT / "data"  # the kit's own data (coreference set, pattern labels) and the cache
DEFAULT_CACHE_DIR = DATA_DIR / "cache"
IDENTITY = "__entry__"  # the payload's 0-d string array naming the file the entry was written for
STALE_TEMPORARY_SECONDS = 3600  # a temporary file this old was left by a killed writer, not a running one
ENTRY = re.compile(r".+-[0-9a-f]{24}\.npz")  # an entry's file name (`entry_path`)
HEADER = re.compile(rb"[0-9a-f]{64}PK")  # how an entry starts: its sha256 in hex, then the npz (a zip)
TEMPORARY = re.compile(r".+-[0-9a-f]{24}\.npz.+\.tmp")  # an entry's temporary file (`save_result`)
TEMPORARY_FOLDER = re.compile(r"\.unpack-.+\.tmp|.+-[0-9a-f]{16,24}\..+\.tmp")  # cache_pack's, models.save_folder's
_unwritable: set[Path] = set()  # the folders `save_result` has warned about


def entry_path(cache_dir: Path | str, name: str, *keys: str, version: str) -> Path:
    """cache_dir/<name>-<hash of keys and the code version>.npz"""
    key = hashlib.sha256("|".join((*keys, version)).encode()).hexdigest()
    return Path(cache_dir) / f"{name}-{key[:24]}.npz"


def save_result(path: Path, result: dict[str, np.ndarray]) -> None:
    """Write a dict of arrays (no object arrays) to `path` atomically, prefixed with its checksum and holding
    `path`'s file name; first remove the stale temporary files of the same entry.

    Where the folder is not writable (permission, read-only file system) it warns once per folder and writes
    nothing; any other failure (a full disk) raises, leaving no temporary file."""
    if IDENTITY in result:
        raise ValueError(f"result: {IDENTITY!r} is the cache's own key; rename that array")
    buffer = io.BytesIO()
    np.savez(buffer, allow_pickle=False, **result, **{IDENTITY: np.array(path.name)})
    payload = buffer.getvalue()
    try:
        _write(path, hashlib.sha256(payload).hexdigest().encode() + payload)
    except OSError as error:
        if not (isinstance(error, PermissionError) or error.errno == errno.EROFS):
            raise
        if path.parent not in _unwritable:
            _unwritable.add(path.parent)
            warnings.warn(f"cache folder {path.parent} is not writable; results are kept in memory only",
                          stacklevel=2)


def _write(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file in its folder, removed whatever happens."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in _stale(_files(path.parent, re.compile(re.escape(path.name) + r".+\.tmp")), STALE_TEMPORARY_SECONDS):
        with contextlib.suppress(OSError):  # removed meanwhile, or the folder is not writable (raised below)
            stale.unlink()
    tmp = path.with_name(f"{path.name}{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the kernel applies the umask: no race
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def load_result(path: Path) -> dict[str, np.ndarray] | None:
    """The dict of arrays saved at `path`; None when it is missing, and None with a warning naming the file when
    it is not the whole entry written under that name (truncated, tampered with, copied from another entry's
    file, not an npz, an object array, a folder, unreadable). A hit refreshes the file's modification time
    (for `prune`) unless the cache is read-only."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        return _miss(path, f"cannot be read ({error.strerror or error})")
    digest, payload = raw[:64], raw[64:]
    if hashlib.sha256(payload).hexdigest().encode() != digest:
        return _miss(path, "is corrupted (checksum mismatch)")
    try:
        with np.lib.npyio.NpzFile(io.BytesIO(payload), allow_pickle=False) as data:
            result = {k: data[k] for k in data.files}
    except Exception as error:  # arbitrary bytes make zipfile and numpy raise many kinds (BadZipFile, ValueError, ...)
        return _miss(path, f"cannot be decoded ({type(error).__name__}: {error})")
    written_for = result.pop(IDENTITY, np.array(None)).tolist()
    if written_for != path.name:
        return _miss(path, f"was written for {written_for!r:.80}, not for this file name")
    with contextlib.suppress(OSError):  # a read-only cache is used as it is
        os.utime(path)
    return result


def created_mode(mode: int) -> int:
    """`mode` less this process's umask: the permissions a file or folder created with `mode` gets."""
    umask = os.umask(0o022)
    os.umask(umask)
    return mode & ~umask


def _miss(path: Path, why: str) -> None:
    warnings.warn(f"cache entry {path} {why}; recomputing it", stacklevel=3)


def _files(folder: Path, name: re.Pattern) -> dict[Path, os.stat_result]:
    """The plain files (not links, not folders) in `folder` whose name matches `name`, with their status; none
    when the folder is missing."""
    found = {}
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(folder):
            if name.fullmatch(entry.name):
                with contextlib.suppress(FileNotFoundError):  # removed meanwhile by another process
                    if entry.is_file(follow_symlinks=False):
                        found[Path(entry.path)] = entry.stat(follow_symlinks=False)
    return found


def _folders(folder: Path, name: re.Pattern) -> dict[Path, os.stat_result]:
    """The folders (not links) in `folder` whose name matches `name`, with their status."""
    found = {}
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(folder):
            if name.fullmatch(entry.name):
                with contextlib.suppress(FileNotFoundError):
                    if entry.is_dir(follow_symlinks=False):
                        found[Path(entry.path)] = entry.stat(follow_symlinks=False)
    return found


def _stale(files: dict[Path, os.stat_result], seconds: float) -> dict[Path, int]:
    """{path: bytes} of the `files` last modified more than `seconds` ago."""
    cutoff = time.time() - seconds
    return {path: status.st_size for path, status in files.items() if status.st_mtime < cutoff}


def _folder(cache_dir: Path | str) -> Path:
    """`cache_dir` as a Path; ValueError when it is a file (a missing folder is an empty cache)."""
    folder = Path(cache_dir)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{folder} is a file, not a cache folder")
    return folder


def _is_entry(path: Path) -> bool:
    """Whether the file at `path` starts as an entry does (`HEADER`): not just any npz of an entry-like name."""
    with contextlib.suppress(OSError), open(path, "rb") as file:
        return bool(HEADER.fullmatch(file.read(66)))
    return False


def prune(cache_dir: Path | str, older_than_days: float, dry_run: bool = False) -> dict[Path, int]:
    """Remove (with dry_run, only find) the entries in `cache_dir` not used for `older_than_days` days and what
    killed writers left (temporary files and folders older than STALE_TEMPORARY_SECONDS); {path: bytes} of those.
    Other files and folders (fine-tuned models, an npz of an entry's name that is none) are left alone; a folder
    whose files of an entry's name are all something else is no cache: ValueError, nothing removed."""
    if not older_than_days >= 0:
        raise ValueError(f"older_than_days must be 0 or more, not {older_than_days}")
    folder = _folder(cache_dir)
    named = _files(folder, ENTRY)
    entries = {path: status for path, status in named.items() if _is_entry(path)}
    if named and not entries:
        raise ValueError(f"{folder} is not a BERTLook cache: {min(named).name} is named like an entry but is none; "
                         "nothing removed")
    found = {**_stale(entries, older_than_days * 86400),
             **_stale(_files(folder, TEMPORARY), STALE_TEMPORARY_SECONDS)}
    left = {path: sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())
            for path in _stale(_folders(folder, TEMPORARY_FOLDER), STALE_TEMPORARY_SECONDS)}
    if not dry_run:
        for path in found:
            path.unlink(missing_ok=True)
        for path in left:
            shutil.rmtree(path, ignore_errors=True)
    return {**found, **left}


def usage(cache_dir: Path | str) -> tuple[int, int]:
    """(number of entries, their bytes) in `cache_dir`."""
    sizes = [status.st_size for status in _files(_folder(cache_dir), ENTRY).values()]
    return len(sizes), sum(sizes)
