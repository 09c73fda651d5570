"""syntax: alignment of parser words with the encoder, and head accuracy / offset baselines on synthetic
maps whose best heads and offsets are known by construction."""
from __future__ import annotations

import numpy as np
import pytest

from bertlook_utils import syntax
from bertlook_utils.parses import Sentence


def sentence(words, heads, relations, k=0, article="A"):
    pos = ["PUNCT" if w in ".," else "NOUN" for w in words]
    return Sentence(tuple(words), tuple(heads), tuple(relations), tuple(pos), tuple("X" for _ in words), article,
                    f"{article}#{k}")


# -- alignment with the real encoder ----------------------------------------------------------------
SPLIT_WORDS = sentence(["Tchaikovsky", "'s", "unaffordable", "symphonies", "re-emerged", "."],
                       [4, 1, 4, 5, 0, 5], ["poss", "case", "amod", "nsubj", "ROOT", "punct"])
SHORT = sentence(["Dogs", "bark", "."], [2, 0, 2], ["nsubj", "ROOT", "punct"], k=1)


def test_alignment_keeps_every_word(encoder):
    examples = syntax.parsed_attention(encoder, [SPLIT_WORDS, SHORT], batch_size=2, progress=False)
    for example, s in zip(examples, [SPLIT_WORDS, SHORT]):
        m = len(s.words) + 2
        assert example.word_attn.shape == (encoder.n_layers, encoder.n_heads, m, m)
        assert example.word_attn.dtype == np.float32
        np.testing.assert_allclose(example.word_attn.sum(-1), 1, atol=1e-4)
        assert example.words == list(s.words) and example.relations == list(s.relations)
        assert example.heads.tolist() == list(s.heads) and example.id == s.id
        assert example.is_punct == s.is_punct
    # split words really were split into several pieces (the test would be vacuous otherwise)
    assert len(encoder.prepare(list(SPLIT_WORDS.words)).tokens) > len(SPLIT_WORDS.words) + 4


def test_batched_alignment_equals_one_at_a_time(encoder):
    together = syntax.parsed_attention(encoder, [SHORT, SPLIT_WORDS], batch_size=2, progress=False)
    alone = [syntax.parsed_attention(encoder, [s], batch_size=1, progress=False)[0] for s in (SHORT, SPLIT_WORDS)]
    for a, b in zip(together, alone):
        np.testing.assert_allclose(a.word_attn, b.word_attn, atol=1e-5)


def test_a_word_without_wordpieces_is_a_clear_error(encoder):
    bad = sentence(["Hello", "\u200b", "world"], [0, 1, 1], ["ROOT", "dep", "dep"], k=5)
    with pytest.raises(ValueError, match=r"A#5.*no wordpieces"):
        syntax.parsed_attention(encoder, [SHORT, bad], progress=False)


def test_parsed_attention_checks_its_shapes():
    with pytest.raises(ValueError, match="word_attn"):
        syntax.ParsedAttention(np.zeros((1, 1, 4, 4), np.float32), np.array([0, 1, 1]), ["a"] * 3, ["w"] * 3,
                               [False] * 3)
