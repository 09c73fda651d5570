"""wordlevel.to_word_level on hand-built token maps whose word-level answers are computed by hand."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bertlook_utils.wordlevel import FROM_MODES, to_word_level, word_matrix
from builders import random_row_stochastic

# [CLS] un ##believ ##ably good [SEP]: word 1 ("unbelievably") is split into tokens 1, 2, 3.
WORD_IDS = [0, 1, 1, 1, 2, 3]
TOKEN_ATTN = np.array([
    # to: CLS   un    ##b   ##a   good  SEP
    [0.5, 0.1, 0.1, 0.1, 0.1, 0.1],  # from [CLS]
    [0.1, 0.2, 0.3, 0.1, 0.2, 0.1],  # from un
    [0.0, 0.1, 0.0, 0.2, 0.5, 0.2],  # from ##believ
    [0.3, 0.0, 0.3, 0.3, 0.0, 0.1],  # from ##ably
    [0.2, 0.2, 0.2, 0.2, 0.1, 0.1],  # from good
    [0.0, 0.0, 0.0, 0.0, 0.0, 1.0],  # from [SEP]
], dtype=np.float32)
# Attention TO the split word = sum of columns 1..3. The three rows of the split word become
#   un       -> [0.1, 0.6, 0.2, 0.1]
#   ##believ -> [0.0, 0.3, 0.5, 0.2]
#   ##ably   -> [0.3, 0.6, 0.0, 0.1]
UNSPLIT_ROWS = {
    0: [0.5, 0.3, 0.1, 0.1],
    2: [0.2, 0.6, 0.1, 0.1],
    3: [0.0, 0.0, 0.0, 1.0],
}
SPLIT_WORD_ROW = {
    "mean": [0.4 / 3, 1.5 / 3, 0.7 / 3, 0.4 / 3],  # mean of the three rows
    "first": [0.1, 0.6, 0.2, 0.1],  # the row of "un"
    "max": [0.3 / 1.6, 0.6 / 1.6, 0.5 / 1.6, 0.2 / 1.6],  # column-wise max [.3 .6 .5 .2], renormalised
}


def expected_word_map(mode: str) -> np.ndarray:
    rows = dict(UNSPLIT_ROWS)
    rows[1] = SPLIT_WORD_ROW[mode]
    return np.array([rows[w] for w in range(4)])


@pytest.mark.parametrize("mode", FROM_MODES)
def test_hand_computed_example_for_each_from_mode(mode):
    got = to_word_level(TOKEN_ATTN, WORD_IDS, from_mode=mode)
    assert got.shape == (4, 4)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, expected_word_map(mode), atol=1e-6)


def test_default_from_mode_is_mean():
    np.testing.assert_allclose(to_word_level(TOKEN_ATTN, WORD_IDS), expected_word_map("mean"), atol=1e-6)


def test_attention_to_a_split_word_is_the_sum_of_its_columns():
    got = to_word_level(TOKEN_ATTN, WORD_IDS, from_mode="first")
    # rows of unsplit words are unchanged except that columns 1..3 are summed
    for word, token in [(0, 0), (2, 4), (3, 5)]:
        assert got[word, 1] == pytest.approx(TOKEN_ATTN[token, 1:4].sum(), abs=1e-6)
        np.testing.assert_allclose(got[word, [0, 2, 3]], TOKEN_ATTN[token, [0, 4, 5]], atol=1e-7)


def test_two_split_words_with_leading_layer_and_head_dims():
    # [CLS] a ##b c ##d ##e [SEP]  ->  words [CLS], ab, cde, [SEP]
    word_ids = [0, 1, 1, 2, 2, 2, 3]
    rng = np.random.default_rng(0)
    attn = random_row_stochastic(rng, (2, 3, 7, 7))
    got = to_word_level(attn, word_ids, from_mode="mean")
    assert got.shape == (2, 3, 4, 4)
    a = attn.astype(np.float64)
    for layer in range(2):
        for head in range(3):
            m = a[layer, head]
            to_words = np.stack([m[:, 0], m[:, 1:3].sum(1), m[:, 3:6].sum(1), m[:, 6]], axis=1)
            expected = np.stack([to_words[0], to_words[1:3].mean(0), to_words[3:6].mean(0), to_words[6]])
            np.testing.assert_allclose(got[layer, head], expected, atol=1e-6)
            # each [L, H] slice equals the 2-D call on that slice
            np.testing.assert_allclose(got[layer, head], to_word_level(attn[layer, head], word_ids), atol=1e-7)


@pytest.mark.parametrize("mode", FROM_MODES)
def test_one_token_per_word_returns_the_map_unchanged(mode):
    attn = random_row_stochastic(np.random.default_rng(1), (2, 2, 5, 5))
    np.testing.assert_allclose(to_word_level(attn, range(5), from_mode=mode), attn, atol=1e-6)


def test_word_matrix_is_the_one_hot_alignment():
    np.testing.assert_array_equal(word_matrix([0, 1, 1, 2]),
                                  [[1, 0, 0], [0, 1, 0], [0, 1, 0], [0, 0, 1]])


# -- properties over random maps and random word splits ----------------------------------------------
@st.composite
def maps_and_word_ids(draw):
    """A random row-stochastic [L, H, n, n] map and random word ids: half the time monotone 0, 0, 1, 2, 2, ...
    (as the encoder numbers words), else any numbering of 0 .. k-1 (a word's tokens need not be adjacent)."""
    n = draw(st.integers(1, 12))
    if draw(st.booleans()):
        starts = [True] + draw(st.lists(st.booleans(), min_size=n - 1, max_size=n - 1))
        word_ids = list(np.cumsum(starts) - 1)
    else:
        raw = draw(st.lists(st.integers(0, n - 1), min_size=n, max_size=n))
        word_ids = np.unique(raw, return_inverse=True)[1].tolist()
    layers, heads = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    attn = random_row_stochastic(rng, (layers, heads, n, n))
    if draw(st.booleans()):  # sometimes very peaked rows (one-hot, exact zeros elsewhere)
        attn = np.eye(n, dtype=np.float32)[rng.integers(0, n, size=(layers, heads, n))]
    return attn, word_ids


@given(maps_and_word_ids(), st.sampled_from(FROM_MODES))
def test_rows_always_sum_to_one_and_shape_is_words(case, mode):
    attn, word_ids = case
    n_words = max(word_ids) + 1
    got = to_word_level(attn, word_ids, from_mode=mode)
    assert got.shape == attn.shape[:2] + (n_words, n_words)
    assert np.all(got >= 0)
    np.testing.assert_allclose(got.sum(-1), 1.0, atol=1e-5)


@given(maps_and_word_ids())
def test_mean_mode_preserves_the_mass_each_word_receives(case):
    """With from=mean, weighting each word row by its number of tokens gives back, per word, the total
    token-level mass its tokens receive; the grand total is the number of tokens."""
    attn, word_ids = case
    ids = np.asarray(word_ids)
    n_words = ids.max() + 1
    sizes = np.bincount(ids, minlength=n_words).astype(np.float64)
    got = to_word_level(attn, word_ids, from_mode="mean").astype(np.float64)
    received_words = (sizes[:, None] * got).sum(-2)  # [L, H, n_words]
    received_tokens = attn.astype(np.float64).sum(-2)  # [L, H, n_tokens]
    expected = np.stack([received_tokens[..., ids == w].sum(-1) for w in range(n_words)], -1)
    np.testing.assert_allclose(received_words, expected, atol=1e-4)
    np.testing.assert_allclose(received_words.sum(-1), len(ids), rtol=1e-5)


@given(maps_and_word_ids())
def test_first_mode_takes_the_row_of_each_words_first_token(case):
    attn, word_ids = case
    ids = np.asarray(word_ids)
    firsts = [int(np.flatnonzero(ids == w)[0]) for w in range(ids.max() + 1)]
    got = to_word_level(attn, word_ids, from_mode="first")
    for w, token in enumerate(firsts):
        to_words = np.stack([attn[..., token, ids == v].sum(-1) for v in range(ids.max() + 1)], -1)
        np.testing.assert_allclose(got[..., w, :], to_words, atol=1e-5)


# -- bad input ------------------------------------------------------------------------------------------
def test_unknown_from_mode_is_rejected():
    with pytest.raises(ValueError, match="from_mode"):
        to_word_level(TOKEN_ATTN, WORD_IDS, from_mode="median")


@pytest.mark.parametrize("attn, word_ids", [
    (TOKEN_ATTN, WORD_IDS[:-1]),  # one word id short
    (TOKEN_ATTN, WORD_IDS + [4]),  # one word id too many
    (TOKEN_ATTN[:, :5], WORD_IDS),  # not square
    (TOKEN_ATTN[0], WORD_IDS),  # 1-D
], ids=["ids-short", "ids-long", "not-square", "one-dim"])
def test_mismatched_shapes_are_rejected(attn, word_ids):
    with pytest.raises(ValueError):
        to_word_level(attn, word_ids)


def test_nan_is_rejected():
    attn = TOKEN_ATTN.copy()
    attn[2, 3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        to_word_level(attn, WORD_IDS)


@pytest.mark.parametrize("scale", [0.5, 2.0])
def test_rows_not_summing_to_one_are_rejected(scale):
    attn = TOKEN_ATTN.copy()
    attn[4] *= scale
    with pytest.raises(ValueError, match="sum to 1"):
        to_word_level(attn, WORD_IDS)


def test_negative_weights_are_rejected():
    attn = TOKEN_ATTN.copy()
    attn[0, :2] = [0.7, -0.1]
    with pytest.raises(ValueError, match="negative"):
        to_word_level(attn, WORD_IDS)


@pytest.mark.parametrize("word_ids", [
    [0, 1, 1, 1, 3, 4],  # word 2 skipped
    [1, 2, 2, 2, 3, 4],  # word 0 skipped
    [-1, 0, 0, 0, 1, 2],  # negative id
], ids=["skips-2", "skips-0", "negative"])
def test_word_ids_must_number_words_without_gaps(word_ids):
    with pytest.raises(ValueError, match="word"):
        to_word_level(TOKEN_ATTN, word_ids)


def test_empty_word_ids_are_rejected():
    with pytest.raises(ValueError):
        to_word_level(np.zeros((0, 0), dtype=np.float32), [])
