"""Keep probing (issue 29, item 11): arbitrary text, pairs, items and arrays thrown at the public entry points give a
valid result or a clear `ValueError` / `TypeError` raised by BERTLook itself that names the argument — never an
error from deep inside a library, never NaN.
"""
from __future__ import annotations

import traceback

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from bertlook_utils.clustering import js_distances
from bertlook_utils.patterns import classify_map
from bertlook_utils.surface import entropy_stats, token_stats
from bertlook_utils.wordlevel import to_word_level
from builders import PAIR_TOKENS, make_encoded

TEXT_NAMES = ("text", "word", "item", "pair")  # what an error about an input must name
ANY_CHARACTER = st.characters(codec=None, exclude_categories=())  # surrogates, controls and marks included
texts = st.text(ANY_CHARACTER, max_size=24)
words = st.lists(st.text(ANY_CHARACTER, min_size=0, max_size=8), max_size=6)
odd = st.one_of(st.none(), st.integers(), st.floats(), st.binary(max_size=8))
text_like = st.one_of(texts, words, odd)
items = st.one_of(text_like, st.tuples(text_like, text_like), st.tuples(texts), st.tuples(texts, texts, texts))

probe = settings(max_examples=80, suppress_health_check=[HealthCheck.too_slow])
unknown_ok = pytest.mark.filterwarnings("ignore:every word of text . is the unknown token")  # arbitrary symbols


def assert_clear(error: Exception, names: tuple[str, ...]) -> None:
    """A ValueError / TypeError raised in the package whose message names one of `names`."""
    assert isinstance(error, (ValueError, TypeError)), f"{type(error).__name__}: {error}"
    origin = traceback.extract_tb(error.__traceback__)[-1].filename
    assert "bertlook_utils" in origin, f"raised inside a library ({origin}): {error}"
    assert any(name in str(error) for name in names), f"the message names none of {names}: {error}"


def assert_valid(encoded) -> None:
    attn = encoded.attn
    assert attn.shape[-1] == attn.shape[-2] == encoded.n_tokens == len(encoded.word_ids) == len(encoded.segment_ids)
    assert np.isfinite(attn).all()
    np.testing.assert_allclose(attn.sum(-1), 1, atol=1e-4)


@unknown_ok
@probe
@given(a=text_like, b=st.one_of(st.none(), text_like))
def test_encode_gives_valid_maps_or_a_clear_error(tiny, a, b):
    try:
        encoded = tiny.encode(a, b)
    except Exception as error:  # noqa: BLE001 - the property is about which errors come out
        assert_clear(error, TEXT_NAMES)
    else:
        assert_valid(encoded)


@unknown_ok
@probe
@given(st.lists(items, min_size=1, max_size=3))
def test_encode_many_gives_one_valid_result_per_item_or_a_clear_error(tiny, batch):
    try:
        encoded = list(tiny.encode_many(batch, batch_size=2))
    except Exception as error:  # noqa: BLE001
        assert_clear(error, TEXT_NAMES)
    else:
        assert len(encoded) == len(batch)
        for e in encoded:
            assert_valid(e)


N = len(PAIR_TOKENS)
ENTRY_POINTS = {
    "token_stats": lambda attn: token_stats([make_encoded(PAIR_TOKENS, attn)]),
    "entropy_stats": lambda attn: entropy_stats([make_encoded(PAIR_TOKENS, attn)]),
    "js_distances": lambda attn: js_distances([make_encoded(PAIR_TOKENS, attn)]),
    "classify_map": lambda attn: classify_map(attn[0, 0], PAIR_TOKENS, [0] * 6 + [1] * 5),
    "to_word_level": lambda attn: to_word_level(attn, range(N)),
}
ATTENTION_NAMES = ("attention", "attn", "map", "row", "weights")
maps = arrays(np.float32, st.tuples(st.integers(1, 2), st.integers(1, 2), st.sampled_from([N - 1, N]),
                                    st.sampled_from([N - 1, N])),
              elements=st.one_of(st.floats(0, 1, width=32), st.sampled_from([np.nan, np.inf, -0.5, 0.0])))


def normalised(attn: np.ndarray) -> np.ndarray:
    """Rows scaled to sum to 1 where that is possible (so valid maps are drawn too, not only broken ones)."""
    sums = attn.sum(-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(np.isfinite(sums) & (sums > 0), attn / sums, attn)


@pytest.mark.parametrize("entry", ENTRY_POINTS)
@probe
@given(attn=maps, scale=st.booleans())
def test_analyses_give_finite_numbers_or_a_clear_error(entry, attn, scale):
    attn = normalised(attn) if scale else attn
    try:
        result = ENTRY_POINTS[entry](attn)
    except Exception as error:  # noqa: BLE001
        assert_clear(error, ATTENTION_NAMES)
    else:
        if isinstance(result, str):  # classify_map: the map's kind
            return
        values = result.select_dtypes("number").to_numpy() if hasattr(result, "select_dtypes") else result
        values = values[0] if isinstance(values, tuple) else values
        assert np.isfinite(np.asarray(values, dtype=float)).all()
