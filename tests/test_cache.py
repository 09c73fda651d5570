"""cache: an entry is the entry written under its name or a miss (never a crash, never another entry's numbers);
a cache can be shared (entries readable as the umask allows, a read-only folder read and never written);
temporary files of killed writers are cleaned; `prune` and the command line's `cache` and `extract` reports."""
from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import re
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from bertlook_utils import cli
from bertlook_utils.core import cache
from bertlook_utils.core.cache import STALE_TEMPORARY_SECONDS, entry_path, load_result, prune, save_result

DAY = 86400


def entry(folder: Path, name: str = "token_stats", key: str = "a") -> Path:
    return entry_path(folder, name, key, version="v1")


def saved(folder: Path, key: str = "a", value: float = 1.0) -> Path:
    path = entry(folder, key=key)
    save_result(path, {"x": np.array([value])})
    return path


def write_with_checksum(path: Path, payload: bytes) -> None:
    """`payload` behind a valid sha256 header: only its contents can tell that it is wrong."""
    path.write_bytes(hashlib.sha256(payload).hexdigest().encode() + payload)


def age(path: Path, seconds: float) -> Path:
    stamp = time.time() - seconds
    os.utime(path, (stamp, stamp))
    return path


def temporary(path: Path, seconds_old: float, tag: str = "k1ll3d") -> Path:
    """A temporary file of the entry at `path`, as a writer killed `seconds_old` ago leaves it."""
    tmp = path.with_name(f"{path.name}{tag}.tmp")
    tmp.write_bytes(b"half an entry")
    return age(tmp, seconds_old)


def assert_miss(path: Path, match: str) -> None:
    with pytest.warns(UserWarning, match=match) as caught:
        assert load_result(path) is None
    assert str(path) in str(caught[0].message)  # the warning names the file


# -- entries that lie ----------------------------------------------------------------------------------
def test_an_entry_copied_over_another_entrys_file_is_a_miss(tmp_path):
    first, second = saved(tmp_path, "a", 1.0), saved(tmp_path, "b", 2.0)
    first.write_bytes(second.read_bytes())
    assert_miss(first, "written for")
    np.testing.assert_array_equal(load_result(second)["x"], [2.0])


def test_a_renamed_entry_is_a_miss(tmp_path):
    first = saved(tmp_path, "a")
    moved = first.rename(entry(tmp_path, key="b"))
    assert_miss(moved, "written for")


def test_an_entry_without_its_name_is_a_miss(tmp_path):
    path = entry(tmp_path)
    buffer = io.BytesIO()
    np.savez(buffer, x=np.array([1.0]))
    write_with_checksum(path, buffer.getvalue())
    assert_miss(path, "written for None")


def _npy(path: Path) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.array([1.0]))
    return buffer.getvalue()


def _object_npz(path: Path) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, x=np.array([{"a": 1}], dtype=object), **{cache.IDENTITY: np.array(path.name)})
    return buffer.getvalue()


@pytest.mark.parametrize("payload", [lambda path: b"not an npz at all", _npy, _object_npz],
                         ids=["not-npz-bytes", "a-bare-npy", "object-array"])
def test_an_undecodable_payload_under_a_valid_checksum_is_a_miss(tmp_path, payload):
    path = entry(tmp_path)
    write_with_checksum(path, payload(path))
    assert_miss(path, "cannot be decoded")


def test_a_folder_in_place_of_an_entry_is_a_miss(tmp_path):
    path = entry(tmp_path)
    path.mkdir()
    assert_miss(path, "cannot be read")


def test_an_unreadable_entry_is_a_miss(tmp_path, monkeypatch):
    path = saved(tmp_path)

    def denied(self):
        raise PermissionError(errno.EACCES, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", denied)
    assert_miss(path, "cannot be read")


def test_a_result_may_not_use_the_caches_own_key(tmp_path):
    with pytest.raises(ValueError, match="result: '__entry__'"):
        save_result(entry(tmp_path), {cache.IDENTITY: np.array("mine")})


# -- a cache a class can share -------------------------------------------------------------------------
@pytest.mark.parametrize("umask", [0o022, 0o002], ids=["022", "002"])
def test_a_new_entry_is_readable_as_the_umask_allows(tmp_path, umask):
    previous = os.umask(umask)
    try:
        path = saved(tmp_path)
    finally:
        os.umask(previous)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask


@pytest.mark.parametrize("error", [PermissionError(errno.EACCES, "Permission denied"),
                                   OSError(errno.EROFS, "Read-only file system")], ids=["denied", "read-only"])
def test_an_unwritable_folder_is_read_and_never_written(tmp_path, monkeypatch, error):
    path = saved(tmp_path)
    age(path, 2 * DAY)

    def refuse(*args, **kwargs):
        raise error

    for name in ("open", "utime"):  # creating a file, touching one: what a read-only folder refuses
        monkeypatch.setattr(cache.os, name, refuse)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(load_result(path)["x"], [1.0])
    with pytest.warns(UserWarning, match=f"cache folder {re.escape(str(tmp_path))} is not writable; results are kept"):
        save_result(entry(tmp_path, key="b"), {"x": np.array([2.0])})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per folder
        save_result(entry(tmp_path, key="c"), {"x": np.array([3.0])})
    monkeypatch.undo()
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file modes (the test above simulates the refusals)")
def test_a_read_only_folder_for_real(tmp_path):
    path = saved(tmp_path)
    tmp_path.chmod(0o555)
    try:
        np.testing.assert_array_equal(load_result(path)["x"], [1.0])
        with pytest.warns(UserWarning, match="is not writable"):
            save_result(entry(tmp_path, key="b"), {"x": np.array([2.0])})
    finally:
        tmp_path.chmod(0o755)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_a_full_disk_still_raises_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    path = saved(tmp_path)

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cache.os, "fsync", full)
    with pytest.raises(OSError, match="No space left"):
        save_result(path, {"x": np.array([2.0])})
    monkeypatch.undo()
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
    np.testing.assert_array_equal(load_result(path)["x"], [1.0])


# -- temporary files and pruning -----------------------------------------------------------------------
def test_saving_an_entry_removes_its_stale_temporary_files_only(tmp_path):
    path, other = entry(tmp_path), entry(tmp_path, key="b")
    stale = temporary(path, STALE_TEMPORARY_SECONDS + 60)
    running = temporary(path, STALE_TEMPORARY_SECONDS - 60, "wr1t1ng")  # a concurrent writer's
    others = temporary(other, STALE_TEMPORARY_SECONDS + 60)  # another entry's: left to `prune`
    save_result(path, {"x": np.array([1.0])})
    assert not stale.exists() and running.exists() and others.exists()


def test_a_hit_marks_the_entry_as_used(tmp_path):
    path = age(saved(tmp_path), 40 * DAY)
    assert load_result(path) is not None
    assert time.time() - path.stat().st_mtime < DAY
    assert prune(tmp_path, 30, dry_run=True) == {}


@pytest.fixture
def aged_cache(tmp_path):
    """A cache with an old and a recent entry, a stale and a fresh temporary file, a folder and a stray file,
    all old; {what: path}."""
    files = {"old": age(saved(tmp_path, "old"), 40 * DAY), "recent": age(saved(tmp_path, "recent"), 10 * DAY),
             "stale tmp": temporary(entry(tmp_path, key="gone"), STALE_TEMPORARY_SECONDS + 60),
             "fresh tmp": temporary(entry(tmp_path, key="busy"), 60)}
    model = tmp_path / "finetune-topic-0123456789abcdef01234567"
    model.mkdir()
    files["folder"] = age(model, 400 * DAY)
    files["stray"] = tmp_path / "notes.npz"
    files["stray"].write_bytes(b"mine")
    age(files["stray"], 400 * DAY)
    return files


def test_prune_dry_run_lists_and_removes_nothing(tmp_path, aged_cache):
    before = sorted(tmp_path.iterdir())
    found = prune(tmp_path, 30, dry_run=True)
    assert found == {aged_cache[k]: aged_cache[k].stat().st_size for k in ("old", "stale tmp")}
    assert sorted(tmp_path.iterdir()) == before


def test_prune_removes_unused_entries_and_stale_temporary_files(tmp_path, aged_cache):
    assert set(prune(tmp_path, 30)) == {aged_cache["old"], aged_cache["stale tmp"]}
    assert {p for p in tmp_path.iterdir()} == {aged_cache[k] for k in ("recent", "fresh tmp", "folder", "stray")}
    assert set(prune(tmp_path, 5)) == {aged_cache["recent"]}


def test_prune_and_info_of_a_file_say_it_is_no_cache_folder(tmp_path):
    file = tmp_path / "notes.txt"
    file.write_text("mine")
    with pytest.raises(ValueError, match="notes.txt is a file, not a cache folder"):
        prune(file, 30)
    for command in (["cache", "prune"], ["cache", "info"]):
        with pytest.raises(SystemExit, match=r"--cache-dir .*notes.txt is a file, not a cache folder"):
            cli.main([*command, "--cache-dir", str(file)])
    assert file.read_text() == "mine"


def test_prune_of_a_missing_folder_finds_nothing_and_rejects_negative_days(tmp_path):
    assert prune(tmp_path / "none", 30) == {}
    with pytest.raises(ValueError, match="older_than_days must be 0 or more, not -1"):
        prune(tmp_path, -1)


def test_prune_removes_only_files_that_are_entries_and_refuses_a_folder_that_is_not_a_cache(tmp_path):
    cache_dir, other = tmp_path / "cache", tmp_path / "results"
    real, lookalike = age(saved(cache_dir), 40 * DAY), entry(cache_dir, key="b")
    np.savez(lookalike, x=np.ones(3))  # a numpy file of the same name, not an entry: left alone
    age(lookalike, 40 * DAY)
    assert set(prune(cache_dir, 30)) == {real} and lookalike.exists()
    other.mkdir()
    mine = other / "scores-0123456789abcdef01234567.npz"
    np.savez(mine, x=np.ones(3))
    age(mine, 40 * DAY)
    with pytest.raises(ValueError, match=r"results is not a BERTLook cache: scores-0123456789abcdef01234567.npz is "
                                         r"named like an entry but is none; nothing removed"):
        prune(other, 30)
    with pytest.raises(SystemExit, match=r"--cache-dir .*results is not a BERTLook cache"):
        cli.main(["cache", "prune", "--cache-dir", str(other)])
    assert mine.exists()


# -- the command line ---------------------------------------------------------------------------------
def test_cache_prune_and_info_commands(tmp_path, aged_cache, capsys):
    old, stale = aged_cache["old"], aged_cache["stale tmp"]
    freed = old.stat().st_size + stale.stat().st_size
    cli.main(["cache", "prune", "--older-than", "30", "--dry-run", "--cache-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert f"would remove {old.name} ({old.stat().st_size:,} bytes)" in out and stale.name in out
    assert f"would remove 2 files from {tmp_path}: " in out and f"({freed:,} bytes)" in out
    assert old.exists() and stale.exists()

    cli.main(["cache", "prune", "--cache-dir", str(tmp_path)])  # 30 days by default
    assert f"removed 2 files from {tmp_path}" in capsys.readouterr().out
    assert not old.exists() and not stale.exists()

    cli.main(["cache", "info", "--cache-dir", str(tmp_path)])
    assert capsys.readouterr().out.startswith(f"{tmp_path}: 1 entries, ")
    with pytest.raises(SystemExit):
        cli.main(["cache", "prune", "--older-than", "-2", "--cache-dir", str(tmp_path)])
    assert "expected a number of days, 0 or more, not -2" in capsys.readouterr().err


def test_extract_reports_computed_and_restored_inputs(tiny_folder, tmp_path, capsys):
    items = tmp_path / "items.json"
    items.write_text(json.dumps([f"Text number {i} is about a cat on a mat." for i in range(10)]))
    command = ["extract", "--model", str(tiny_folder), "--items", str(items), "--cache-dir", str(tmp_path / "c"),
               "--block-size", "5", "--batch-size", "4"]
    report = re.compile(r"over 10 inputs in [\d.]+ s: (.*), peak memory")

    def run() -> str:
        cli.main(command)
        return report.search(capsys.readouterr().out).group(1)

    assert re.fullmatch(r"10 computed \([\d.]+ inputs/s\), 0 restored from the cache", run())
    assert run() == "all 10 restored from the cache"  # no rate: no input went through the model
    next((tmp_path / "c").glob("entropy_stats-*.npz")).unlink()  # one block of 5
    assert re.fullmatch(r"5 computed \([\d.]+ inputs/s\), 5 restored from the cache", run())
