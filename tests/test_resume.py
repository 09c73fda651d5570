"""Resuming: a cached block is keyed by its own inputs and place, so appending inputs or changing one recomputes
only the blocks they touch, and a bad input anywhere fails, named by its index, before any block is computed.
Uses the tiny random BERT."""
from __future__ import annotations

import numpy as np
import pytest

from bertlook_utils import extract
from bertlook_utils.extract import KeepExamples, reduce
from bertlook_utils.surface import EntropyStats, TokenStats

TEXTS = [f"Sentence {i} says that the cat sat on mat number {i}." for i in range(9)]
BLOCK = 3


def run(encoder, texts, cache_dir):
    return reduce(encoder, texts, [TokenStats(), EntropyStats(), KeepExamples(4)], cache_dir=cache_dir,
                  progress=False, block_size=BLOCK, batch_size=2)


@pytest.fixture
def computed(monkeypatch):
    """The start of every block the engine computes (each call to `extract._pass`)."""
    starts = []
    original = extract._pass

    def spy(encoder, items, start, *args):
        starts.append(start)
        return original(encoder, items, start, *args)

    monkeypatch.setattr(extract, "_pass", spy)
    return starts


def assert_same(got, expected) -> None:
    for g, e in zip(got, expected):
        if isinstance(g, KeepExamples):
            assert [x.tokens for x in g.examples] == [x.tokens for x in e.examples]
            for a, b in zip(g.examples, e.examples):
                np.testing.assert_array_equal(a.attn, b.attn)
        else:
            got_arrays, expected_arrays = g.result(), e.result()
            assert got_arrays.keys() == expected_arrays.keys()
            for key in got_arrays:
                np.testing.assert_allclose(got_arrays[key], expected_arrays[key], rtol=1e-12, atol=0)


def test_appending_an_input_computes_only_the_block_it_joins(tiny, tmp_path, computed):
    run(tiny, TEXTS[:7], tmp_path)
    assert computed == [0, 3, 6]
    computed.clear()
    appended = run(tiny, TEXTS[:8], tmp_path)
    assert computed == [6]  # blocks 0-2 and 3-5 are whole and unchanged
    assert_same(appended, run(tiny, TEXTS[:8], None))


def test_changing_one_input_recomputes_only_its_block(tiny, tmp_path, computed):
    run(tiny, TEXTS, tmp_path)
    computed.clear()
    fixed = TEXTS[:4] + ["A corrected fifth sentence."] + TEXTS[5:]
    again = run(tiny, fixed, tmp_path)
    assert computed == [3]  # block 2 of 3 only
    assert_same(again, run(tiny, fixed, None))


@pytest.mark.parametrize("bad, message", [("  ", "text a is empty"), ("word " * 100, "accepts at most 64")],
                         ids=["blank", "too long"])
@pytest.mark.parametrize("cached", [True, False], ids=["cache", "no cache"])
def test_a_bad_input_near_the_end_fails_before_any_block_naming_it(tiny, tmp_path, computed, bad, message, cached):
    texts = TEXTS[:7] + [bad] + TEXTS[7:]
    with pytest.raises(ValueError, match=rf"^item 8 of 10 \(items\[7\]\): .*{message}"):
        run(tiny, texts, tmp_path if cached else None)
    assert computed == [] and not list(tmp_path.iterdir())


def test_a_fully_cached_run_tokenizes_nothing(tiny, tmp_path, monkeypatch):
    first = run(tiny, TEXTS, tmp_path)

    def no_tokenizing(*args, **kwargs):
        raise AssertionError("an input was tokenized although every block was cached")

    monkeypatch.setattr(tiny, "prepare", no_tokenizing)
    assert_same(run(tiny, TEXTS, tmp_path), first)


def test_a_cached_block_is_reused_only_at_its_own_place(tiny, tmp_path, computed):
    run(tiny, TEXTS[:3], tmp_path)
    computed.clear()
    shifted = run(tiny, TEXTS[6:] + TEXTS[:3], tmp_path)  # the same three inputs at index 3, where KeepExamples(4)
    assert computed == [0, 3]                            # keeps only the first of them (at index 0: all three)
    assert_same(shifted, run(tiny, TEXTS[6:] + TEXTS[:3], None))
