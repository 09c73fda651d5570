"""core.cache_pack: a filled cache as one file, refused when another code made it or it holds anything but cache
files."""
from __future__ import annotations

import io
import json
import tarfile

import pytest

from bertlook_utils import cli
from bertlook_utils.core import cache_pack

ENTRY = "surface_stats-0123456789abcdef01234567.npz"
MODEL = "finetune-topic-0123456789abcdef01234567"


def filled(folder):
    """A cache with one entry, one fine-tuned model's two files, and files a pack must leave out."""
    folder.mkdir()
    (folder / ENTRY).write_bytes(b"entry")
    (folder / MODEL).mkdir()
    (folder / MODEL / "model.safetensors").write_bytes(b"weights")
    (folder / MODEL / "bertlook_task.json").write_text("{}")
    (folder / "notes.txt").write_text("not an entry")
    (folder / f"{ENTRY}.x1.tmp").write_bytes(b"a killed writer's")
    (folder / "link.npz").symlink_to(folder / ENTRY)
    return folder


def test_a_pack_carries_the_entries_and_models_into_an_empty_cache(tmp_path):
    manifest = cache_pack.pack(filled(tmp_path / "cache"), tmp_path / "pack.tar.gz")
    assert manifest["files"] == 3 and manifest["code"] == cache_pack.code_key()
    assert cache_pack.unpack(tmp_path / "pack.tar.gz", tmp_path / "student") == (3, 0)
    student = tmp_path / "student"
    assert sorted(p.relative_to(student).as_posix() for p in student.rglob("*") if p.is_file()) == sorted([
        ENTRY, f"{MODEL}/bertlook_task.json", f"{MODEL}/model.safetensors"])
    assert (student / MODEL / "model.safetensors").read_bytes() == b"weights"
    assert cache_pack.unpack(tmp_path / "pack.tar.gz", student) == (0, 3)  # what is there is kept


def forged(path, manifest: dict | None, members: dict[str, bytes]):
    with tarfile.open(path, "w:gz") as tar:
        for name, data in ([(cache_pack.MANIFEST, json.dumps(manifest).encode())] if manifest else []) + list(
                members.items()):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_a_pack_from_other_code_is_refused_with_the_reason(tmp_path):
    pack = forged(tmp_path / "old.tar.gz", {"code": "f" * 64}, {ENTRY: b"entry"})
    with pytest.raises(ValueError, match="made by other code .* none of its entries would be read here"):
        cache_pack.unpack(pack, tmp_path / "cache")
    assert not (tmp_path / "cache").exists()
    with pytest.raises(ValueError, match="is not a BERTLook cache pack"):
        cache_pack.unpack(forged(tmp_path / "plain.tar.gz", None, {ENTRY: b"entry"}), tmp_path / "cache")


@pytest.mark.parametrize("name", ["../escape.npz", "/etc/evil.npz", f"{MODEL}/../../x.npz", "run_me.py",
                                  f"{MODEL}/sub/deeper.bin"])
def test_a_pack_with_anything_but_cache_files_writes_nothing(tmp_path, name):
    pack = forged(tmp_path / "bad.tar.gz", {"code": cache_pack.code_key()}, {ENTRY: b"entry", name: b"payload"})
    with pytest.raises(ValueError, match="which is no cache entry"):
        cache_pack.unpack(pack, tmp_path / "cache")
    assert not (tmp_path / "cache").exists() and not (tmp_path / "escape.npz").exists()


def _truncated(tmp_path):
    whole = tmp_path / "whole.tar.gz"
    cache_pack.pack(filled(tmp_path / "filled"), whole)
    (tmp_path / "cut.tar.gz").write_bytes(whole.read_bytes()[:-40])
    return tmp_path / "cut.tar.gz"


@pytest.mark.parametrize("make, words", [
    (lambda tmp_path: tmp_path / "text.tar.gz",
     r"text.tar.gz is not a readable cache pack \(ReadError: not a gzip file"),
    (_truncated, r"cut.tar.gz is not a readable cache pack \((EOFError|ReadError)"),
    (lambda tmp_path: forged(tmp_path / "list.tar.gz", [1, 2], {ENTRY: b"entry"}),
     r"list.tar.gz is not a BERTLook cache pack: its manifest bertlook-cache.json is not a JSON object"),
    (lambda tmp_path: forged(tmp_path / "json.tar.gz", None, {cache_pack.MANIFEST: b"{not json"}),
     r"json.tar.gz is not a BERTLook cache pack: its manifest bertlook-cache.json is not JSON"),
], ids=["not gzip", "truncated", "manifest a list", "manifest not JSON"])
def test_a_pack_that_cannot_be_read_is_refused_with_the_reason(tmp_path, make, words):
    (tmp_path / "text.tar.gz").write_text("a text file, not a pack")
    pack = make(tmp_path)
    with pytest.raises(ValueError, match=words):
        cache_pack.unpack(pack, tmp_path / "cache")
    with pytest.raises(SystemExit, match=words):
        cli.main(["cache", "unpack", str(pack), "--cache-dir", str(tmp_path / "cache")])
    assert not (tmp_path / "cache").exists()


def test_the_command_line_packs_and_unpacks_and_says_why_it_refuses(tmp_path, capsys):
    cache = filled(tmp_path / "cache")
    cli.main(["cache", "pack", str(tmp_path / "p.tar.gz"), "--cache-dir", str(cache)])
    assert capsys.readouterr().out.startswith("packed 3 files")
    cli.main(["cache", "unpack", str(tmp_path / "p.tar.gz"), "--cache-dir", str(tmp_path / "student")])
    assert "unpacked 3 files" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="made by other code"):
        cli.main(["cache", "unpack", str(forged(tmp_path / "o.tar.gz", {"code": "0"}, {})),
                  "--cache-dir", str(tmp_path / "student")])
