"""A filled cache as one file to hand out (`make cache-pack`, `make cache-unpack`): a class runs the notebooks from
a cache one machine filled instead of fine-tuning and extracting on every laptop.

A pack is a gzipped tar of the cache's entries (`cache.ENTRY`) and its model folders (fine-tuned models, random
initialisations: one level of weights, JSON and text files), led by a manifest that says what it holds: the code
that made it (`code_key`: its source files; a pack from other code would bring entries never read here, so
`unpack` refuses it), the model, device and precision it was filled for (`model_record`; entries are keyed by
them), and every member's name and size. Its sha256 (`Unpacked.digest`, printed by `cache pack`) is what a
teacher publishes: a pack is trusted input, and `unpack(digest=...)` refuses one that is not the published file.

Unpacking reads the pack once, as a stream, into a private temporary folder inside the cache: every name is
checked (entries and model-folder files only, as plain files: no links, no paths outside the cache, no scripts),
every size against the manifest (a member bigger than the manifest says is refused at its header, before its
bytes are read; all of them must fit on the disk), copied in chunks. Only a whole, verified pack is moved into
place: entries one by one and model folders each by one rename, never over what is already there, so an
interruption leaves nothing half-written in the cache (its temporary folder is removed by `cache.prune`).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tarfile
import tempfile
import zlib
import gzip
import io
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from .cache import ENTRY, created_mode
from .source import PACKAGE_DIR

MANIFEST = "bertlook-cache.json"
FORMAT = 2  # the manifest's layout
FOLDER = re.compile(r"[a-z0-9_]+(?:-[a-z0-9_]+)*-[0-9a-f]{16,24}")  # a model folder: "finetune-topic-<hash>"
FILE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\.(?:json|safetensors|pt|txt)")  # a file inside one (no scripts)
STAGING = ".unpack-"  # the prefix of unpack's temporary folder in the cache
CHUNK = 1 << 20


def code_key(package_dir: Path = PACKAGE_DIR) -> str:
    """sha256 over the package's source files (names and bytes): two checkouts agree exactly when their code does
    (stricter than the cache's keys, which ignore comments and docstrings; a pack is one file to make again)."""
    digest = hashlib.sha256()
    for path in sorted(package_dir.rglob("*.py")):
        digest.update(path.relative_to(package_dir).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def model_record(encoder) -> dict[str, str]:
    """What a cache's entries were computed with, as a manifest records it: the model's name and fingerprint (the
    model part of every key), its device type and precision."""
    device, precision = encoder.placement
    return {"name": encoder.name, "fingerprint": encoder.fingerprint, "device": device, "precision": precision}


def serves(packed: dict | None, here: dict[str, str]) -> str | None:
    """Why a pack filled for `packed` (a `model_record`) brings nothing this machine's model (`here`) reads, in
    words; None when they agree (or the pack names no model)."""
    if not isinstance(packed, dict) or packed.get("fingerprint") == here["fingerprint"]:
        return None
    placed = ("{name} on {device} in {precision}".format(**{k: packed.get(k, "?") for k in here}),
              "{name} on {device} in {precision}".format(**here))
    if placed[0] == placed[1]:  # same name and placement, other weights, configuration or tokenizer
        placed = tuple(f"{p} (model fingerprint {f[:12]})" for p, f in zip(placed, (packed.get("fingerprint", "?"),
                                                                                    here["fingerprint"])))
    return (f"this pack was filled for {placed[0]}, and this machine computes with {placed[1]}: its entries are "
            "keyed by model, device and precision, so the notebooks will not read them here. Ask for a pack filled "
            "for this setting (make prefill DEVICE=cpu, then make cache-pack), or run with the pack's")


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


def pack(cache_dir: Path | str, archive: Path | str, model: dict[str, str] | None = None) -> dict:
    """Write `archive` (.tar.gz) from `cache_dir`; returns the manifest: format, code, the model it was filled for
    (`model_record`, when given), members [[name, bytes], ...], files, bytes."""
    cache_dir, archive = Path(cache_dir), Path(archive)
    if not cache_dir.is_dir():
        raise FileNotFoundError(f"no cache at {cache_dir}: run the notebooks (make prefill) first")
    members = [(m.as_posix(), (cache_dir / m).stat().st_size) for m in _members(cache_dir)]
    manifest = {"format": FORMAT, "code": code_key(), "model": model, "members": members, "files": len(members),
                "bytes": sum(size for _, size in members)}
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "w:gz") as tar:
        data = json.dumps(manifest, indent=1).encode()
        info = tarfile.TarInfo(MANIFEST)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))  # first, so unpack reads it before anything else
        for name, size in members:
            info = tar.gettarinfo(cache_dir / name, arcname=name)
            if info.size != size:
                raise RuntimeError(f"{cache_dir / name} changed while packing; pack again")
            with open(cache_dir / name, "rb") as file:
                tar.addfile(info, file)
    return manifest


def file_digest(archive: Path | str) -> str:
    """sha256 (hex) of the file at `archive`, as `sha256sum` prints it."""
    digest = hashlib.sha256()
    with open(archive, "rb") as file:
        for chunk in iter(lambda: file.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


class _Hashing(io.RawIOBase):
    """A file read through sha256: `digest()` once it has been read to the end."""

    def __init__(self, file: BinaryIO):
        self.file, self.sha = file, hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self.file.readinto(buffer)
        self.sha.update(memoryview(buffer)[:n])
        return n

    def digest(self) -> str:
        while self.read(CHUNK):
            pass
        return self.sha.hexdigest()


@dataclass(frozen=True)
class Unpacked:
    """What `unpack` did: files written, files kept (already there), the model folders there already but without
    some of the pack's files ({folder: missing files}), the pack's sha256 and its manifest."""

    written: int
    kept: int
    incomplete: dict[str, list[str]]
    digest: str
    manifest: dict


def _refuse(archive: Path, why: str) -> ValueError:
    return ValueError(f"{archive} {why}: refusing the pack, nothing written")


def _manifest(tar: tarfile.TarFile, archive: Path) -> dict:
    """The manifest, the pack's first member; ValueError where it is missing, not a JSON object, from other code,
    or does not list its members."""
    first = tar.next()
    if first is None or first.name != MANIFEST or not first.isfile() or first.size > 64 * CHUNK:
        raise ValueError(f"{archive} is not a BERTLook cache pack (it does not start with {MANIFEST})")
    try:
        manifest = json.load(tar.extractfile(first))
    except ValueError as error:  # not JSON, not UTF-8
        raise ValueError(f"{archive} is not a BERTLook cache pack: its manifest {MANIFEST} is not JSON ({error})"
                         ) from None
    if not isinstance(manifest, dict):
        raise ValueError(f"{archive} is not a BERTLook cache pack: its manifest {MANIFEST} is not a JSON object "
                         f"(it holds a {type(manifest).__name__})")
    here = code_key()
    if manifest.get("code") != here:
        raise ValueError(f"{archive} was made by other code (code {str(manifest.get('code'))[:12]}, this checkout "
                         f"{here[:12]}): none of its entries would be read here. Pack it again from this "
                         "checkout, or check out the commit it was made with")
    members = manifest.get("members")
    if not (isinstance(members, list) and all(
            isinstance(m, list) and len(m) == 2 and isinstance(m[0], str) and type(m[1]) is int and m[1] >= 0
            for m in members)):
        raise ValueError(f"{archive} is not a BERTLook cache pack of format {FORMAT}: its manifest lists no members "
                         "with their sizes. Pack it again from this checkout")
    return manifest


def _extract(tar: tarfile.TarFile, sizes: dict[str, int], staging: Path, archive: Path) -> None:
    """Copy every member after the manifest into `staging` as plain files, checking each name and size against the
    manifest (`sizes`) before reading its bytes; ValueError at the first that does not match."""
    seen = set()
    while (member := tar.next()) is not None:
        name = member.name
        if not (member.isfile() and _allowed(name)):
            raise _refuse(archive, f"holds {name!r}, which is no cache entry")
        if name in seen or name not in sizes:
            raise _refuse(archive, f"holds {name!r} {'twice' if name in seen else 'which its manifest does not list'}")
        if member.size != sizes[name]:
            raise _refuse(archive, f"holds {name!r} of {member.size:,} bytes where its manifest says {sizes[name]:,}")
        seen.add(name)
        target = staging / name
        if "/" in name and not target.parent.exists():
            target.parent.mkdir(mode=0o700)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)  # the umask applies
        with tar.extractfile(member) as source, os.fdopen(fd, "wb") as out:
            shutil.copyfileobj(source, out, CHUNK)
    missing = sorted(set(sizes) - seen)
    if missing:
        raise _refuse(archive, f"lacks {missing[0]!r}, which its manifest lists")


def _place(staging: Path, cache_dir: Path, names: list[str]) -> tuple[int, int, dict[str, list[str]]]:
    """Move the staged files into `cache_dir`, never over what is there: entries one by one (a hard link, which
    fails where the name exists, even as a link), model folders each by one rename. (written, kept, incomplete)."""
    written = kept = 0
    incomplete = {}
    folders: dict[str, list[str]] = {}
    for name in names:
        if "/" in name:
            folder, file = name.split("/")
            folders.setdefault(folder, []).append(file)
            continue
        try:
            os.link(staging / name, cache_dir / name, follow_symlinks=False)
            written += 1
        except FileExistsError:
            kept += 1
    for folder, files in folders.items():
        target = cache_dir / folder
        if os.path.lexists(target):
            there = [f for f in files if os.path.lexists(target / f)] if target.is_dir() and not target.is_symlink() \
                else []
            kept += len(there)
            if len(there) < len(files):
                incomplete[folder] = sorted(set(files) - set(there))
            continue
        (staging / folder).chmod(created_mode(0o777))  # readable by the others a shared cache serves
        try:
            os.rename(staging / folder, target)
            written += len(files)
        except OSError:  # another unpack or fine-tuning put the folder there meanwhile
            if not os.path.lexists(target):
                raise
            kept += len(files)
    return written, kept, incomplete


def unpack(archive: Path | str, cache_dir: Path | str, digest: str | None = None) -> Unpacked:
    """Extract `archive` into `cache_dir` (see the module's docstring), keeping what is there. ValueError, nothing
    written, when it is no pack of this kit, cannot be read (not gzip, truncated), was made by other code, holds
    anything but cache files or more than its manifest says, would not fit on the disk, or its sha256 is not
    `digest` (the one the teacher published, when given)."""
    archive, cache_dir = Path(archive), Path(cache_dir)
    if digest is not None and not re.fullmatch(r"[0-9a-fA-F]{64}", digest):
        raise ValueError(f"digest must be a sha256 in hex (64 characters, as `cache pack` prints it), not {digest!r}")
    if os.path.lexists(cache_dir) and not cache_dir.is_dir():
        raise ValueError(f"{cache_dir} is a file, not a cache folder")
    created = not os.path.lexists(cache_dir)
    staging = placed = None
    try:
        with open(archive, "rb") as file:
            reader = _Hashing(file)
            try:
                with tarfile.open(fileobj=io.BufferedReader(reader, CHUNK), mode="r|gz") as tar:
                    manifest = _manifest(tar, archive)
                    sizes = dict(manifest["members"])
                    cache_dir.mkdir(parents=True, exist_ok=True)
                    needed, free = sum(sizes.values()), shutil.disk_usage(cache_dir).free
                    if needed > free:
                        raise _refuse(archive, f"holds {needed / 2**30:.1f} GiB and {cache_dir} has "
                                               f"{free / 2**30:.1f} GiB free")
                    staging = Path(tempfile.mkdtemp(dir=cache_dir, prefix=STAGING, suffix=".tmp"))
                    _extract(tar, sizes, staging, archive)
            except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as error:
                raise ValueError(f"{archive} is not a readable cache pack ({type(error).__name__}: {error}): copy it "
                                 "again whole, or pack it again") from error
            found = reader.digest()
        if digest is not None and found != digest.lower():
            raise _refuse(archive, f"has sha256 {found}, not the published {digest.lower()}: it is not the file your "
                                   "teacher packed (copied in part, or changed)")
        placed = _place(staging, cache_dir, [name for name, _ in manifest["members"]])
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        if created and placed is None:
            with contextlib.suppress(OSError):  # the folder this call made, should it be empty
                cache_dir.rmdir()
    written, kept, incomplete = placed
    return Unpacked(written, kept, incomplete, found, manifest)
