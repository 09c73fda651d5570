"""core.cache_pack: a filled cache as one file, refused when another code made it, it holds anything but cache files
or more than its manifest says, or it is not the file whose digest was published; never written through a link,
never half-written."""
from __future__ import annotations

import io
import json
import os
import shutil
import stat
import tarfile
import time

import pytest

from bertlook_utils import cli
from bertlook_utils.core import cache, cache_pack

ENTRY = "surface_stats-0123456789abcdef01234567.npz"
MODEL = "finetune-topic-0123456789abcdef01234567"
FILES = sorted([ENTRY, f"{MODEL}/bertlook_task.json", f"{MODEL}/model.safetensors"])
RECORD = {"name": "tiny", "fingerprint": "a" * 64, "device": "cpu", "precision": "fp32"}


def filled(folder):
    """A cache with one entry, one fine-tuned model's two files, and files a pack must leave out."""
    folder.mkdir()
    (folder / ENTRY).write_bytes(b"entry")
    (folder / MODEL).mkdir()
    (folder / MODEL / "model.safetensors").write_bytes(b"weights")
    (folder / MODEL / "bertlook_task.json").write_text("{}")
    (folder / MODEL / "run_me.py").write_text("print('a script')")
    (folder / "notes.txt").write_text("not an entry")
    (folder / f"{ENTRY}.x1.tmp").write_bytes(b"a killed writer's")
    (folder / "link.npz").symlink_to(folder / ENTRY)
    return folder


def files(folder) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


@pytest.fixture
def packed(tmp_path):
    """A real pack of `filled`, and its sha256."""
    path = tmp_path / "pack.tar.gz"
    cache_pack.pack(filled(tmp_path / "cache"), path, RECORD)
    return path, cache_pack.file_digest(path)


def test_a_pack_carries_the_entries_and_models_into_an_empty_cache(tmp_path, packed):
    pack, digest = packed
    manifest = cache_pack.pack(tmp_path / "cache", tmp_path / "again.tar.gz", RECORD)
    assert manifest["files"] == 3 and manifest["code"] == cache_pack.code_key() and manifest["model"] == RECORD
    assert [name for name, _ in manifest["members"]] == FILES  # no script, no link, no temporary file
    student = tmp_path / "student"
    done = cache_pack.unpack(pack, student, digest)
    assert (done.written, done.kept, done.incomplete, done.digest) == (3, 0, {}, digest)
    assert files(student) == FILES and (student / MODEL / "model.safetensors").read_bytes() == b"weights"
    again = cache_pack.unpack(pack, student)
    assert (again.written, again.kept, again.incomplete) == (0, 3, {})  # what is there is kept


def forged(path, manifest: dict | None, members: dict[str, bytes]):
    """A pack written by hand; a manifest given as a dict lists `members` unless it says otherwise."""
    if isinstance(manifest, dict) and "members" not in manifest:
        manifest = {**manifest, "members": [[name, len(data)] for name, data in members.items()]}
    with tarfile.open(path, "w:gz") as tar:
        for name, data in ([(cache_pack.MANIFEST, json.dumps(manifest).encode())] if manifest else []) + list(
                members.items()):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def ours(**more) -> dict:
    return {"code": cache_pack.code_key(), **more}


def test_a_pack_from_other_code_is_refused_with_the_reason(tmp_path):
    pack = forged(tmp_path / "old.tar.gz", {"code": "f" * 64}, {ENTRY: b"entry"})
    with pytest.raises(ValueError, match="made by other code .* none of its entries would be read here"):
        cache_pack.unpack(pack, tmp_path / "cache")
    assert not (tmp_path / "cache").exists()
    with pytest.raises(ValueError, match="is not a BERTLook cache pack"):
        cache_pack.unpack(forged(tmp_path / "plain.tar.gz", None, {ENTRY: b"entry"}), tmp_path / "cache")
    with pytest.raises(ValueError, match="lists no members with their sizes"):  # a pack of the first format
        cache_pack.unpack(forged(tmp_path / "v1.tar.gz", ours(members=None), {ENTRY: b"entry"}), tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize("name", ["../escape.npz", "/etc/evil.npz", f"{MODEL}/../../x.npz", "run_me.py",
                                  f"{MODEL}/sub/deeper.bin", f"{MODEL}/run_me.py", f"{MODEL}/pytorch_model.bin"])
def test_a_pack_with_anything_but_cache_files_writes_nothing(tmp_path, name):
    pack = forged(tmp_path / "bad.tar.gz", ours(), {ENTRY: b"entry", name: b"payload"})
    with pytest.raises(ValueError, match="which is no cache entry"):
        cache_pack.unpack(pack, tmp_path / "cache")
    assert not (tmp_path / "cache").exists() and not (tmp_path / "escape.npz").exists()


def test_a_pack_that_is_not_what_its_manifest_says_writes_nothing(tmp_path):
    config = f"{MODEL}/config.json"
    for manifest, members, words in [
            (ours(members=[[ENTRY, 5], [config, 1]]), {ENTRY: b"entry", config: b"{}"},
             f"holds '{config}' of 2 bytes where its manifest says 1"),
            (ours(members=[[ENTRY, 5], [config, 2]]), {ENTRY: b"entry"}, f"lacks '{config}', which its manifest lists"),
            (ours(members=[[ENTRY, 5]]), {ENTRY: b"entry", config: b"{}"}, f"'{config}' which its manifest does not"),
            (ours(members=[[ENTRY, 5]]), {ENTRY: b"entry", f"{ENTRY} ": b"entry"}, "which is no cache entry")]:
        with pytest.raises(ValueError, match=words):
            cache_pack.unpack(forged(tmp_path / "bad.tar.gz", manifest, members), tmp_path / "cache")
        assert not (tmp_path / "cache").exists()


def test_a_pack_bomb_is_refused_at_its_header_without_reading_it(tmp_path):
    """Review reliability-4, problem 5: a small pack holding a huge member was read whole into memory."""
    pack = tmp_path / "bomb.tar.gz"
    with tarfile.open(pack, "w:gz", compresslevel=1) as tar:
        data = json.dumps(ours(members=[[ENTRY, 10]])).encode()
        info = tarfile.TarInfo(cache_pack.MANIFEST)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        info = tarfile.TarInfo(ENTRY)
        info.size = 256 * 2**20  # 256 MiB of zeros: about 250 KiB packed
        tar.addfile(info, io.BytesIO(bytes(info.size)))
    start = time.perf_counter()
    with pytest.raises(ValueError, match=f"holds '{ENTRY}' of 268,435,456 bytes where its manifest says 10"):
        cache_pack.unpack(pack, tmp_path / "cache")
    assert time.perf_counter() - start < 1.0  # refused at the header, not after decompressing the member
    assert not (tmp_path / "cache").exists()


def test_a_pack_that_would_not_fit_on_the_disk_writes_nothing(tmp_path, packed, monkeypatch):
    monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10**9, 10**9 - 10, 10))
    with pytest.raises(ValueError, match="has 0.0 GiB free"):
        cache_pack.unpack(packed[0], tmp_path / "student")
    assert not (tmp_path / "student").exists()


def test_a_pack_that_is_not_the_published_file_is_refused(tmp_path, packed):
    """Review reliability-4, problem 3: arrays rewritten under the right names unpacked without a word."""
    pack, digest = packed
    evil = forged(tmp_path / "evil.tar.gz", ours(model=RECORD),
                  {ENTRY: b"forged", f"{MODEL}/bertlook_task.json": b"{}", f"{MODEL}/model.safetensors": b"weights"})
    with pytest.raises(ValueError, match=f"has sha256 {cache_pack.file_digest(evil)}, not the published {digest}"):
        cache_pack.unpack(evil, tmp_path / "student", digest)
    assert not (tmp_path / "student").exists()
    with pytest.raises(ValueError, match="digest must be a sha256 in hex"):
        cache_pack.unpack(pack, tmp_path / "student", "abc")
    with pytest.raises(ValueError, match="is a file, not a cache folder"):
        cache_pack.unpack(pack, evil, digest)
    assert cache_pack.unpack(pack, tmp_path / "student", digest.upper()).written == 3


def test_unpacking_never_writes_through_a_link(tmp_path, packed):
    """Review reliability-4, problem 2: a link planted at the fixed temporary name, or as a model folder, was
    written through."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "README.md").write_text("precious")
    student = tmp_path / "student"
    student.mkdir()
    (student / f"{ENTRY}.unpack.tmp").symlink_to(outside / "README.md")
    (student / ENTRY).symlink_to(outside / "README.md")
    (student / MODEL).symlink_to(outside, target_is_directory=True)
    done = cache_pack.unpack(packed[0], student)
    assert (outside / "README.md").read_text() == "precious" and sorted(os.listdir(outside)) == ["README.md"]
    assert done.written == 0 and done.incomplete == {MODEL: ["bertlook_task.json", "model.safetensors"]}
    assert sorted(os.listdir(student)) == sorted([ENTRY, f"{ENTRY}.unpack.tmp", MODEL])  # no staging left


def test_an_interrupted_unpack_leaves_nothing_half_written(tmp_path, packed):
    """Review reliability-4, problem 7: files landed one at a time, and a model folder cut short failed forever."""
    whole = packed[0].read_bytes()
    cut = tmp_path / "cut.tar.gz"
    for end in (len(whole) // 2, len(whole) - 40):
        cut.write_bytes(whole[:end])
        with pytest.raises(ValueError, match="is not a readable cache pack"):
            cache_pack.unpack(cut, tmp_path / "student")
        assert not (tmp_path / "student").exists()
    student = tmp_path / "student"
    (student / MODEL).mkdir(parents=True)  # a folder an older unpack left with one file of two
    (student / MODEL / "bertlook_task.json").write_text("{}")
    done = cache_pack.unpack(packed[0], student)
    assert (done.written, done.kept, done.incomplete) == (1, 1, {MODEL: ["model.safetensors"]})


def test_unpacked_folders_and_files_are_readable_by_a_shared_caches_other_users(tmp_path, packed):
    """Review reliability-4, problem 8: model folders came out 0700 with 0600 files."""
    old = os.umask(0o022)
    try:
        cache_pack.unpack(packed[0], tmp_path / "student")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "student" / MODEL).stat().st_mode) == 0o755
    assert {stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "student").rglob("*") if p.is_file()} == {0o644}


def test_a_saved_model_folder_is_readable_by_a_shared_caches_other_users(tiny, tmp_path):
    from bertlook_utils.core.models import save_folder

    old = os.umask(0o002)  # a group that shares the cache
    try:
        folder = save_folder(tmp_path / "random-init-0123456789abcdef", tiny.model, tiny.tokenizer)
    finally:
        os.umask(old)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o775
    assert {stat.S_IMODE(p.stat().st_mode) for p in folder.iterdir()} == {0o664}


def test_prune_removes_what_killed_unpacks_and_savers_left(tmp_path):
    folder = filled(tmp_path / "cache")
    (folder / ENTRY).write_bytes(b"0" * 64 + b"PK entry")  # an entry, as prune recognises one
    left = [folder / ".unpack-x1y2.tmp", folder / f"{MODEL}.a1b2.tmp"]
    for path in left:
        (path / MODEL).mkdir(parents=True)
        (path / MODEL / "model.safetensors").write_bytes(b"12345")
        os.utime(path, (time.time() - 2 * cache.STALE_TEMPORARY_SECONDS,) * 2)
    (folder / ".unpack-now.tmp").mkdir()  # a running unpack's
    found = cache.prune(folder, 30)
    assert {p.name: size for p, size in found.items() if p.is_relative_to(folder)}.items() >= {
        ".unpack-x1y2.tmp": 5, f"{MODEL}.a1b2.tmp": 5}.items()
    assert not any(p.exists() for p in left) and (folder / ".unpack-now.tmp").exists() and (folder / MODEL).exists()


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


def test_a_pack_filled_for_another_device_or_model_says_so():
    """Review reliability-4, problem 6: a pack filled on a GPU or in bf16 unpacked, then gave 0 hits in silence."""
    assert cache_pack.serves(RECORD, RECORD) is None and cache_pack.serves(None, RECORD) is None
    gpu = {**RECORD, "fingerprint": "b" * 64, "device": "cuda", "precision": "bf16"}
    assert "filled for tiny on cuda in bf16, and this machine computes with tiny on cpu in fp32" in \
        cache_pack.serves(gpu, RECORD)
    other = cache_pack.serves({**RECORD, "fingerprint": "c" * 64}, RECORD)
    assert "tiny on cpu in fp32 (model fingerprint cccccccccccc)" in other and "will not read them here" in other


def test_the_command_line_packs_and_unpacks_and_says_why_it_refuses(tmp_path, capsys, tiny, tiny_folder):
    cache_dir = filled(tmp_path / "cache")
    cli.main(["cache", "pack", str(tmp_path / "p.tar.gz"), "--cache-dir", str(cache_dir), "--model", str(tiny_folder)])
    out = capsys.readouterr().out
    digest = cache_pack.file_digest(tmp_path / "p.tar.gz")
    assert out.startswith("packed 3 files") and f"filled for {tiny.name} on cpu in fp32" in out
    assert f"sha256 {digest}: publish it" in out
    cli.main(["cache", "unpack", str(tmp_path / "p.tar.gz"), "--cache-dir", str(tmp_path / "student"),
              "--digest", digest, "--model", str(tiny_folder)])
    out = capsys.readouterr().out
    assert "unpacked 3 files" in out and f"sha256 {digest}: the published one" in out and "warning" not in out
    gpu = tmp_path / "gpu.tar.gz"
    cache_pack.pack(cache_dir, gpu, {**cache_pack.model_record(tiny), "fingerprint": "d" * 64, "device": "cuda"})
    cli.main(["cache", "unpack", str(gpu), "--cache-dir", str(tmp_path / "other"), "--model", str(tiny_folder)])
    out = capsys.readouterr().out
    assert "compare it with the one your teacher published" in out
    assert f"warning: this pack was filled for {tiny.name} on cuda in fp32" in out
    with pytest.raises(SystemExit, match="made by other code"):
        cli.main(["cache", "unpack", str(forged(tmp_path / "o.tar.gz", {"code": "0"}, {})),
                  "--cache-dir", str(tmp_path / "student")])
    with pytest.raises(SystemExit, match="not the published"):
        cli.main(["cache", "unpack", str(gpu), "--cache-dir", str(tmp_path / "student"), "--digest", digest])


def test_a_cached_model_folder_cut_short_says_to_remove_it(tiny, tmp_path):
    """Review reliability-4, problem 7: such a folder failed every time, with advice to save a model into it."""
    from bertlook_utils.core.models import random_init_encoder

    random_init_encoder(tiny, cache_dir=tmp_path)
    folder = next(p for p in tmp_path.iterdir() if p.is_dir())
    (folder / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match=f"the cache's model folder {folder} is incomplete or damaged .* "
                                                "remove that folder and it is made again"):
        random_init_encoder(tiny, cache_dir=tmp_path)
    shutil.rmtree(folder)
    assert random_init_encoder(tiny, cache_dir=tmp_path).n_layers == tiny.n_layers


def test_two_unpacks_of_one_pack_into_one_cache_both_finish(tmp_path, packed):
    """Review reliability-4, row 8.1: one of two died on the shared temporary name."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:
        done = list(pool.map(lambda _: cache_pack.unpack(packed[0], tmp_path / "student"), range(2)))
    assert sorted(d.written + d.kept for d in done) == [3, 3] and sum(d.written for d in done) == 3
    assert files(tmp_path / "student") == FILES
