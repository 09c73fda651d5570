"""extract: streaming reducers equal the list functions, batching equals one-by-one, and the on-disk cache
restores, rekeys, detects corruption and writes atomically. Uses the real default model."""
from __future__ import annotations

import shutil
import warnings

import numpy as np
import pandas as pd
import pytest
import torch

from bertlook_utils import cache, extract
from bertlook_utils.cache import entry_path, load_result, save_result
from bertlook_utils.corpora import Segment
from bertlook_utils.extract import KeepExamples, RowReducer, items_fingerprint, reduce
from bertlook_utils.surface import EntropyStats, TokenStats, analyse, entropy_stats, token_stats

LONG_TEXT = " ".join(f"Sentence number {i} says that attention heads in layer {i % 6} look at separators."
                     for i in range(10))
MIXED_ITEMS = [
    "Hi.",
    ("A short pair.", "And its second half, unbelievably."),
    LONG_TEXT,
    "The cat sat still on the mat.",
    (["pre", "split", "words"], ["here", "too"]),
]


def assert_frames_close(got: pd.DataFrame, expected: pd.DataFrame, atol: float = 1e-5) -> None:
    assert list(got.columns) == list(expected.columns)
    np.testing.assert_array_equal(got[["layer", "head"]].to_numpy(), expected[["layer", "head"]].to_numpy())
    values = [c for c in got.columns if c not in ("layer", "head")]
    np.testing.assert_allclose(got[values].to_numpy(), expected[values].to_numpy(), atol=atol, rtol=0)


def assert_same_encoded(got, expected, atol: float = 1e-5) -> None:
    assert got.tokens == expected.tokens
    assert got.word_ids == expected.word_ids
    assert got.words == expected.words
    assert got.segment_ids == expected.segment_ids
    assert (got.cls_token, got.sep_token) == (expected.cls_token, expected.sep_token)
    assert got.attn.shape == expected.attn.shape
    np.testing.assert_allclose(got.attn, expected.attn, atol=atol, rtol=0)


def items_of(item):
    return item if isinstance(item, tuple) else (item,)


# -- streaming reducers == list functions -------------------------------------------------------------
def test_reference_statistics_are_not_degenerate(reference_encodeds):
    """Guard for the comparisons below: the real heads differ, so equal frames mean something."""
    frame = token_stats(reference_encodeds)
    assert len(frame) == 6 * 12
    for column in ("self", "prev", "next", "cls", "sep"):
        assert frame[column].std() > 0.01, column


def test_analyse_with_ragged_batches_equals_the_list_functions(encoder, segments, reference_encodeds):
    assert len(segments) == 12  # batch_size 5 -> batches of 5, 5 and 2
    result = analyse(encoder, segments, n_examples=3, batch_size=5, cache_dir=None, progress=False)
    assert_frames_close(result.tokens, token_stats(reference_encodeds))
    assert_frames_close(result.entropy, entropy_stats(reference_encodeds))
    assert len(result.examples) == 3
    for got, expected in zip(result.examples, reference_encodeds):
        assert_same_encoded(got, expected)


@pytest.fixture(scope="module")
def mixed_singles(encoder):
    """MIXED_ITEMS encoded one at a time."""
    return [encoder.encode(*items_of(item)) for item in MIXED_ITEMS]


def test_reduce_accepts_texts_and_pairs(encoder, mixed_singles):
    tokens, entropy = reduce(encoder, MIXED_ITEMS, [TokenStats(), EntropyStats()], batch_size=2, cache_dir=None,
                             progress=False)
    assert_frames_close(tokens.frame(), token_stats(mixed_singles))
    assert_frames_close(entropy.frame(), entropy_stats(mixed_singles))


def test_reduce_without_inputs_is_an_error(encoder):
    with pytest.raises(ValueError, match="no inputs"):
        reduce(encoder, [], [TokenStats()], cache_dir=None, progress=False)


# -- batched == one by one ---------------------------------------------------------------------------
def test_encode_many_batched_equals_encoding_one_by_one(encoder, mixed_singles):
    batched = list(encoder.encode_many(MIXED_ITEMS, batch_size=4))  # batches of 4 and 1
    singles = mixed_singles
    lengths = [e.n_tokens for e in singles]
    assert max(lengths) > 10 * min(lengths)  # very different lengths: lots of padding in the first batch
    assert len(batched) == len(MIXED_ITEMS)
    for got, expected in zip(batched, singles):
        n = expected.n_tokens
        assert got.attn.dtype == np.float32
        assert got.attn.shape == (6, 12, n, n)  # cut to the input's own length
        np.testing.assert_allclose(got.attn.sum(-1), 1.0, atol=1e-5)
        assert_same_encoded(got, expected)


def test_padded_columns_get_no_attention(encoder):
    items = [item if isinstance(item, tuple) else (item, None) for item in MIXED_ITEMS[:4]]
    (prepared, attn, valid), = list(encoder.attention_batches(items, batch_size=8))  # 4 inputs, 8 * 128 tokens
    assert attn.shape[:3] == (4, 6, 12)
    for i, p in enumerate(prepared):
        n = len(p.input_ids)
        assert int(valid[i].sum()) == n
        rows = attn[i, :, :, :n].numpy()
        np.testing.assert_allclose(rows[..., :n].sum(-1), 1.0, atol=1e-5)
        assert np.abs(rows[..., n:]).max(initial=0.0) < 1e-6


# -- KeepExamples ------------------------------------------------------------------------------------
def test_keep_examples_keeps_exactly_k_with_correct_tokens_and_maps(encoder, segments, reference_encodeds):
    keeps = reduce(encoder, segments[:5], [KeepExamples(0), KeepExamples(3), KeepExamples(20)], batch_size=2,
                   cache_dir=None, progress=False)  # one pass feeds all three; k = 3 spans two batches (2 + 1)
    assert [len(keep.examples) for keep in keeps] == [0, 3, 5]
    for keep in keeps:
        for got, expected in zip(keep.examples, reference_encodeds):
            assert_same_encoded(got, expected)


# -- RowReducer --------------------------------------------------------------------------------------
class InputLengths(RowReducer):
    """One row per input: its position and its number of tokens; `settings` stands for a shared model."""

    name = "input_lengths"
    needs_attention = False

    def __init__(self, settings: list):
        super().__init__()
        self.settings = settings

    def update(self, batch) -> None:
        self.add(index=batch.start + np.arange(len(batch.inputs)), length=batch.lengths.numpy())


def test_row_reducer_keeps_the_rows_of_every_batch_and_block_in_input_order(encoder, segments):
    settings = []
    (rows,) = reduce(encoder, segments[:5], [InputLengths(settings)], batch_size=2, block_size=3, cache_dir=None,
                     progress=False)  # blocks of 3 + 2 inputs, batches of 2 + 1 and 2
    assert rows.arrays["index"].tolist() == [0, 1, 2, 3, 4]
    assert rows.arrays["length"].tolist() == [e.n_tokens for e in encoder.encode_many([s.pair for s in segments[:5]])]
    assert rows.result() is rows.arrays  # a loaded reducer gives its result back
    fresh = rows.fresh()
    assert fresh.settings is settings and fresh.parts == {} and fresh.arrays == {}  # shared, never copied; no rows


# -- the cache ---------------------------------------------------------------------------------------
def cached_run(encoder, items, cache_dir, k=2):
    return reduce(encoder, items, [TokenStats(), EntropyStats(), KeepExamples(k)], batch_size=3,
                  cache_dir=cache_dir, progress=False)


@pytest.fixture
def model_calls(encoder, monkeypatch):
    """Counts the encoder's passes over the data (each call to `Encoder.batches`, the engine's way in)."""
    calls = []
    original = encoder.batches

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(encoder, "batches", counting)
    return calls


@pytest.fixture(scope="module")
def filled_cache(encoder, segments, tmp_path_factory):
    """A cache folder filled by one run over 2 segments, and that run's reducers."""
    folder = tmp_path_factory.mktemp("filled_cache")
    return folder, cached_run(encoder, segments[:2], folder)


@pytest.fixture
def cache_copy(filled_cache, tmp_path):
    """A private copy of the filled cache folder: (folder, the reducers of the run that filled it)."""
    folder, reducers = filled_cache
    shutil.copytree(folder, tmp_path, dirs_exist_ok=True)
    return tmp_path, reducers


def test_second_call_restores_from_the_cache_without_the_model(encoder, segments, cache_copy, monkeypatch):
    tmp_path, first = cache_copy
    files = sorted(p.name for p in tmp_path.iterdir())
    assert len(files) == 3 and all(name.endswith(".npz") for name in files)
    assert {name.split("-")[0] for name in files} == {"token_stats", "entropy_stats", "examples"}
    assert not list(tmp_path.glob("*.tmp"))

    def no_model(*args, **kwargs):
        raise AssertionError("the model ran although every result was cached")

    monkeypatch.setattr(encoder, "batches", no_model)
    second = cached_run(encoder, segments[:2], tmp_path)
    pd.testing.assert_frame_equal(second[0].frame(), first[0].frame())
    pd.testing.assert_frame_equal(second[1].frame(), first[1].frame())
    assert len(second[2].examples) == 2
    for got, expected in zip(second[2].examples, first[2].examples):
        assert_same_encoded(got, expected, atol=0)
    assert sorted(p.name for p in tmp_path.iterdir()) == files


def test_only_reducers_without_an_entry_are_computed(encoder, segments, tmp_path, model_calls):
    reduce(encoder, segments[:1], [TokenStats()], cache_dir=tmp_path, progress=False)
    assert len(model_calls) == 1
    reduce(encoder, segments[:1], [TokenStats(), EntropyStats()], cache_dir=tmp_path, progress=False)
    assert len(model_calls) == 2  # one pass, for EntropyStats only
    reduce(encoder, segments[:1], [TokenStats(), EntropyStats()], cache_dir=tmp_path, progress=False)
    assert len(model_calls) == 2
    assert len(list(tmp_path.glob("*.npz"))) == 2


def test_different_model_data_or_code_gives_a_different_file(encoder, segments, tmp_path, monkeypatch):
    def files():
        return {p.name for p in tmp_path.glob("*.npz")}

    reduce(encoder, segments[:1], [TokenStats()], cache_dir=tmp_path, progress=False)
    seen = files()
    assert len(seen) == 1

    changed = [Segment(segments[0].article, segments[0].a, segments[0].b + " Extra.")]
    reduce(encoder, changed, [TokenStats()], cache_dir=tmp_path, progress=False)  # data key
    assert len(files()) == 2
    seen = files()

    edited = encoder.copy()  # model key: the weights in memory
    with torch.no_grad():
        next(edited.model.parameters()).add_(1e-3)
    reduce(edited, segments[:1], [TokenStats()], cache_dir=tmp_path, progress=False)
    assert len(files()) == 3
    seen = files()

    monkeypatch.setattr(extract, "code_version", lambda name: "another code version")  # code key
    reduce(encoder, segments[:1], [TokenStats()], cache_dir=tmp_path, progress=False)
    assert len(files()) == 4 and seen < files()


def test_entry_path_depends_on_every_key(tmp_path):
    def path(name="token_stats", model="model", data="data", key="token_stats", version="v1"):
        return entry_path(tmp_path, name, model, data, key, version=version)

    base = path()
    assert base == path()
    assert base.parent == tmp_path and base.name.startswith("token_stats-") and base.suffix == ".npz"
    variants = {path(model="model2"), path(data="data2"), path("examples", key="examples-3"),
                path("examples", key="examples-4"), path(version="v2")}
    assert len(variants) == 5 and base not in variants


def _truncate(raw: bytes) -> bytes:
    return raw[: len(raw) // 2]


def _flip_payload(raw: bytes) -> bytes:
    i = 64 + (len(raw) - 64) // 2
    return raw[:i] + bytes([raw[i] ^ 0xFF]) + raw[i + 1:]


def _flip_checksum(raw: bytes) -> bytes:
    return (b"0" if raw[:1] != b"0" else b"1") + raw[1:]


@pytest.mark.parametrize("corrupt", [_truncate, _flip_payload, _flip_checksum, lambda raw: b""],
                         ids=["truncated", "payload-byte-flipped", "checksum-byte-flipped", "empty"])
def test_a_corrupted_entry_is_detected_and_recomputed(encoder, segments, cache_copy, model_calls, corrupt):
    tmp_path, first = cache_copy
    (path,) = tmp_path.glob("token_stats-*.npz")
    path.write_bytes(corrupt(path.read_bytes()))

    with pytest.warns(UserWarning, match="corrupted"):
        second = cached_run(encoder, segments[:2], tmp_path)
    assert len(model_calls) == 1  # recomputed
    assert_frames_close(second[0].frame(), first[0].frame(), atol=1e-9)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the entry is whole again
        assert load_result(path) is not None
    assert not list(tmp_path.glob("*.tmp"))


def test_save_and_load_result_roundtrip(tmp_path):
    result = {"stats": np.arange(12, dtype=np.float64).reshape(3, 4) / 7,
              "attn0": np.random.default_rng(0).random((2, 3, 5, 5)).astype(np.float32),
              "count": np.array([1, 2, 3], dtype=np.int64),
              "meta": np.array('{"tokens": ["[CLS]", "café", "[SEP]"]}')}
    path = tmp_path / "not" / "yet" / "there.npz"
    save_result(path, result)
    assert path.exists() and path.read_bytes()[:64].isalnum()  # a hex sha256 header
    loaded = load_result(path)
    assert set(loaded) == set(result)
    for key, value in result.items():
        assert loaded[key].dtype == value.dtype
        np.testing.assert_array_equal(loaded[key], value)
    assert not list(path.parent.glob("*.tmp"))


def test_load_result_of_a_missing_file_is_none_without_warning(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_result(tmp_path / "missing.npz") is None


def test_a_failed_write_leaves_the_old_entry_and_no_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "entry.npz"
    save_result(path, {"x": np.array([1.0])})

    def failing_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(cache.os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        save_result(path, {"x": np.array([2.0])})
    monkeypatch.undo()
    np.testing.assert_array_equal(load_result(path)["x"], [1.0])
    assert [p.name for p in tmp_path.iterdir()] == ["entry.npz"]


# -- small pieces ------------------------------------------------------------------------------------
def test_items_fingerprint_changes_with_the_text_only():
    segs = [Segment("T", "First part.", "Second part."), Segment("T", "Third.", "Fourth.")]
    same = [Segment("T", "First part.", "Second part."), Segment("T", "Third.", "Fourth.")]
    other = [Segment("T", "First part.", "Second part!"), Segment("T", "Third.", "Fourth.")]
    assert items_fingerprint(segs) == items_fingerprint(same)
    assert items_fingerprint(segs) != items_fingerprint(other)
    assert items_fingerprint(["a b", ("c", "d")]) != items_fingerprint(["a b", ("c", "e")])
    assert items_fingerprint([("a", "b")]) != items_fingerprint([["a", "b"]])  # a pair is not a list of two words
    assert items_fingerprint([segs[0]]) == items_fingerprint([segs[0].pair])
    assert items_fingerprint([np.array(["a", "b"])]) == items_fingerprint([["a", "b"]])
    with pytest.raises(TypeError, match="iterator"):
        items_fingerprint([iter(["a", "b"])])
