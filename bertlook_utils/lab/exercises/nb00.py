"""Notebook 00's exercise: word-level attention."""
from __future__ import annotations

import numpy as np

from .checker import Case, Exercise, HEAD_LABEL, Mistake, RealInputs, given


def _word_onehot(word_ids) -> np.ndarray:
    ids = np.asarray(word_ids)
    onehot = np.zeros((len(ids), ids.max() + 1))
    onehot[np.arange(len(ids)), ids] = 1
    return onehot


def _word_level_mistake(to: str, rows: str):
    def fn(attn, word_ids):
        onehot = _word_onehot(word_ids)
        to_words = np.asarray(attn) @ onehot
        if to == "mean":
            to_words = to_words / onehot.sum(0)
        if rows == "first":
            return to_words[onehot.argmax(0)]
        summed = onehot.T @ to_words
        return summed if rows == "sum" else summed / onehot.sum(0)[:, None]
    return fn


def _word_level_cases() -> list[Case]:
    split = np.array([[0.1, 0.2, 0.3, 0.4],  # [CLS] play ##ing [SEP]
                      [0.5, 0.25, 0.25, 0.0],
                      [0.0, 0.5, 0.5, 0.0],
                      [0.2, 0.6, 0.0, 0.2]])
    three = np.full((8, 8), 1 / 8)
    return [
        Case("[CLS] play ##ing [SEP] (word ids 0 1 1 2)", given(split, [0, 1, 1, 2]),
             np.array([[0.1, 0.5, 0.4], [0.25, 0.75, 0.0], [0.2, 0.6, 0.2]])),
        Case("a 5-token identity map with no split word", given(np.eye(5), [0, 1, 2, 3, 4]), np.eye(5)),
        Case("a uniform 8-token map, word ids 0 1 1 1 2 3 3 4", given(three, [0, 1, 1, 1, 2, 3, 3, 4]),
             np.tile([1 / 8, 3 / 8, 1 / 8, 2 / 8, 1 / 8], (5, 1))),
    ]


def _word_level_real(real: RealInputs) -> Case:
    from ...core.wordlevel import to_word_level

    attn, ids = real.head_map(), real.pair.word_ids
    return Case(f"the real map of head {HEAD_LABEL} on a sentence pair ({len(ids)} tokens)", given(attn, ids),
                to_word_level(attn, ids))


EXERCISES = (
    Exercise("word_level", "00", "Word-level attention", "attn, word_ids",
             ("attn [n, n] (rows sum to 1) and word_ids [n] (token -> word) -> the word-level map [w, w]: attention TO "
              "a word is the SUM over its tokens' columns, attention FROM a word the MEAN of its tokens' rows."),
             1, 10,
             ("Build a one-hot [n, w] matrix M with M[t, word_ids[t]] = 1: then attn @ M sums the columns.",
              "Average rows with M.T @ x divided by the number of tokens per word (M.sum(0))."),
             _word_level_cases, _word_level_real,
             (Mistake("attention TO a word must be the SUM over its tokens' columns, not their mean (rows would no "
                      "longer sum to 1)", _word_level_mistake("mean", "mean")),
              Mistake("attention FROM a word must be the MEAN of its tokens' rows, not their sum",
                      _word_level_mistake("sum", "sum")),
              Mistake("you kept the first token's row (Clark et al.'s released code); the paper takes the MEAN of "
                      "the word's rows", _word_level_mistake("sum", "first")))),
)
