"""A filled cache as one file to hand out (`make cache-pack`, `make cache-unpack`): a class runs the notebooks from
a cache one machine filled instead of fine-tuning and extracting on every laptop.

A pack is a gzipped tar of the cache's entries (`cache.ENTRY`) and its model folders (fine-tuned models, random
initialisations: one level of plain files), with a manifest naming the code that made it (`code_key`: its
source files). Entries are keyed by model, data and code already, so a pack from other code would bring entries
that are never read here (those of every module that changed): `unpack` refuses it, saying so. Unpacking checks
every name first and writes nothing but entries and model-folder files, as plain files (no links, no paths outside
the cache), keeping what is already there.
"""
from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import tarfile
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .cache import ENTRY
from .source import PACKAGE_DIR

MANIFEST = "bertlook-cache.json"
FOLDER = re.compile(r"[a-z0-9_]+(?:-[a-z0-9_]+)*-[0-9a-f]{16,24}")  # a model folder: "finetune-topic-<hash>"
FILE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")  # a file inside one


def code_key(package_dir: Path = PACKAGE_DIR) -> str:
    """sha256 over the package's source files (names and bytes): two checkouts agree exactly when their code does
    (stricter than the cache's keys, which ignore comments and docstrings; a pack is one file to make again)."""
    digest = hashlib.sha256()
    for path in sorted(package_dir.rglob("*.py")):
        digest.update(path.relative_to(package_dir).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _members(cache_dir: Path) -> list[Path]:
    """The cache's entries and its model folders' files, relative to `cache_dir`, in sorted order."""
    found = [p for p in cache_dir.iterdir() if ENTRY.fullmatch(p.name) and p.is_file() and not p.is_symlink()]
    for folder in cache_dir.iterdir():
        if FOLDER.fullmatch(folder.name) and folder.is_dir() and not folder.is_symlink():
            found += [p for p in folder.iterdir() if FILE.fullmatch(p.name) and p.is_file() and not p.is_symlink()]
    return sorted(p.relative_to(cache_dir) for p in found)


def _allowed(name: str) -> bool:
    parts = name.split("/")
    return (len(parts) == 1 and bool(ENTRY.fullmatch(parts[0]))) or (
        len(parts) == 2 and bool(FOLDER.fullmatch(parts[0])) and bool(FILE.fullmatch(parts[1])))


def pack(cache_dir: Path | str, archive: Path | str) -> dict:
    """Write `archive` (.tar.gz) from `cache_dir`; the manifest: code, files, bytes."""
    cache_dir, archive = Path(cache_dir), Path(archive)
    if not cache_dir.is_dir():
        raise FileNotFoundError(f"no cache at {cache_dir}: run the notebooks (make prefill) first")
    members = _members(cache_dir)
    manifest = {"code": code_key(), "files": len(members),
                "bytes": sum((cache_dir / m).stat().st_size for m in members)}
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "w:gz") as tar:
        data = json.dumps(manifest, indent=1).encode()
        info = tarfile.TarInfo(MANIFEST)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))  # first, so unpack reads it before anything else
        for member in members:
            tar.add(cache_dir / member, arcname=member.as_posix(), recursive=False)
    return manifest


@contextmanager
def _readable(archive: Path) -> Iterator[tarfile.TarFile]:
    """`archive` open as a gzipped tar; ValueError with the reason where it cannot be read (not gzip, truncated)."""
    try:
        with tarfile.open(archive, "r:gz") as tar:
            yield tar
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as error:
        raise ValueError(f"{archive} is not a readable cache pack ({type(error).__name__}: {error}): copy it again "
                         "whole, or pack it again") from error


def _manifest(tar: tarfile.TarFile, member: tarfile.TarInfo, archive: Path) -> dict:
    """The manifest in `member`; ValueError where it is not a JSON object."""
    try:
        manifest = json.load(tar.extractfile(member))
    except ValueError as error:  # not JSON, not UTF-8
        raise ValueError(f"{archive} is not a BERTLook cache pack: its manifest {MANIFEST} is not JSON ({error})"
                         ) from None
    if not isinstance(manifest, dict):
        raise ValueError(f"{archive} is not a BERTLook cache pack: its manifest {MANIFEST} is not a JSON object "
                         f"(it holds a {type(manifest).__name__})")
    return manifest


def unpack(archive: Path | str, cache_dir: Path | str) -> tuple[int, int]:
    """Extract `archive` into `cache_dir`: (files written, files already there). ValueError when it is no pack of
    this kit, cannot be read (not gzip, truncated: found before anything is written), or was made by other code."""
    archive, cache_dir = Path(archive), Path(cache_dir)
    with _readable(archive) as tar:
        members = tar.getmembers()  # reads the whole pack: a truncated one fails here
        if not members or members[0].name != MANIFEST or not members[0].isfile():
            raise ValueError(f"{archive} is not a BERTLook cache pack (it does not start with {MANIFEST})")
        manifest = _manifest(tar, members[0], archive)
        here = code_key()
        if manifest.get("code") != here:
            raise ValueError(f"{archive} was made by other code (code {str(manifest.get('code'))[:12]}, this checkout "
                             f"{here[:12]}): none of its entries would be read here. Pack it again from this "
                             "checkout, or check out the commit it was made with")
        refused = [m.name for m in members[1:] if not (m.isfile() and _allowed(m.name))]
        if refused:  # checked before anything is written
            raise ValueError(f"{archive} holds {refused[0]!r}, which is no cache entry: refusing the pack")
        written = kept = 0
        for member in members[1:]:
            target = cache_dir / member.name
            if target.exists():
                kept += 1
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(target.name + ".unpack.tmp")
            with tar.extractfile(member) as source, open(tmp, "wb") as out:
                out.write(source.read())
            tmp.replace(target)
            written += 1
    return written, kept
