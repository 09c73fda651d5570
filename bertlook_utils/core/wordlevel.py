"""Token-level attention -> word-level attention (Clark et al. 2019, §4.1).

Attention TO a word split into several tokens is the sum over its tokens' columns; attention FROM it is
the mean of its tokens' rows ("mean", the paper), the first token's row ("first", Clark's released code),
or the row-wise maximum renormalised to sum 1 ("max"). Rows still sum to 1.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .conventions import check_attention

FROM_MODES = ("mean", "first", "max")


def word_matrix(word_ids: Sequence[int]) -> np.ndarray:
    """One-hot [n_tokens, n_words] alignment; word ids must use every number 0 .. n_words-1 (the encoder
    gives them in order of first appearance; any order works)."""
    ids = np.asarray(word_ids)
    if ids.ndim != 1 or ids.size == 0:
        raise ValueError("word_ids must be a non-empty list of integers, one per token")
    n_words = int(ids.max()) + 1
    if ids.min() < 0 or len(np.unique(ids)) != n_words:
        raise ValueError("word_ids must number words 0 .. n_words-1 with none skipped")
    onehot = np.zeros((len(ids), n_words), dtype=np.float64)
    onehot[np.arange(len(ids)), ids] = 1
    return onehot


def to_word_level(attn: np.ndarray, word_ids: Sequence[int], from_mode: str = "mean", signed: bool = False
                  ) -> np.ndarray:
    """attn [..., n_tokens, n_tokens] (rows sum to 1) -> [..., n_words, n_words] (rows sum to 1).

    signed=True takes maps that may hold negative weights and rows that do not sum to 1 (effective attention):
    only finiteness is checked, and "max" (which renormalises) is refused."""
    if from_mode not in FROM_MODES:
        raise ValueError(f"from_mode must be one of {FROM_MODES}, not {from_mode!r}")
    if signed and from_mode == "max":
        raise ValueError('from_mode="max" renormalises rows, which signed maps do not allow; use "mean" or "first"')
    attn = np.asarray(attn)
    onehot = word_matrix(word_ids)
    n_tokens = onehot.shape[0]
    if attn.ndim < 2 or attn.shape[-2:] != (n_tokens, n_tokens):
        raise ValueError(f"attn must end in [{n_tokens}, {n_tokens}] for {n_tokens} word ids, got {attn.shape}")
    if not signed:
        check_attention(attn)
    elif not np.all(np.isfinite(attn)):
        raise ValueError("attention contains NaN or infinite values")
    to_words = attn.astype(np.float64) @ onehot  # [..., n_tokens, n_words]
    if from_mode == "mean":
        rows = np.swapaxes(onehot / onehot.sum(0), 0, 1) @ to_words
    elif from_mode == "first":
        firsts = np.argmax(onehot, axis=0)  # first token of each word
        rows = to_words[..., firsts, :]
    else:
        members = [np.flatnonzero(column) for column in onehot.T]
        rows = np.stack([to_words[..., tokens, :].max(axis=-2) for tokens in members], axis=-2)
        rows = rows / rows.sum(-1, keepdims=True)
    return rows.astype(np.float32)
