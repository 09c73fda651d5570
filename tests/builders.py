"""Builders of synthetic attention maps whose statistics are known by construction, and of a tiny random BERT saved
to disk: plain functions the tests import (`from builders import make_encoded, prev_map`).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from bertlook_utils.models import Encoded

# A small BERT-style pair input used by the surface tests:
#   0 [CLS] | 1 the | 2 cat | 3 sat | 4 . | 5 [SEP] | 6 it | 7 ran | 8 , | 9 ! | 10 [SEP]
# "!" is punctuation but NOT one of Clark et al.'s punctuation tokens ("." and ","), so attention to it
# must not count as `punct`.
PAIR_TOKENS = ["[CLS]", "the", "cat", "sat", ".", "[SEP]", "it", "ran", ",", "!", "[SEP]"]


# -- builders ---------------------------------------------------------------------------------------
def random_tree(rng: np.random.Generator, n: int) -> np.ndarray:
    """heads [n] of a random tree with one word under ROOT (each word attaches to an earlier-placed word)."""
    order = rng.permutation(n) + 1
    heads = np.zeros(n, dtype=np.int64)
    for k, word in enumerate(order[1:], start=1):
        heads[word - 1] = order[rng.integers(0, k)]
    return heads


def one_hot_map(targets: Sequence[int]) -> np.ndarray:
    """[n, n] float32 map in which row i puts all its mass on column targets[i]."""
    n = len(targets)
    attn = np.zeros((n, n), dtype=np.float32)
    attn[np.arange(n), np.asarray(targets)] = 1.0
    return attn


def spread_map(n: int, columns_of_row) -> np.ndarray:
    """[n, n] map in which row i spreads its mass evenly over `columns_of_row(i)` (a list of columns)."""
    attn = np.zeros((n, n), dtype=np.float64)
    for i in range(n):
        cols = list(columns_of_row(i))
        attn[i, cols] = 1.0 / len(cols)
    return attn.astype(np.float32)


def uniform_map(n: int) -> np.ndarray:
    return np.full((n, n), 1.0 / n, dtype=np.float32)


def prev_map(n: int) -> np.ndarray:
    """Every token attends to the previous token; row 0 (no previous token) attends to itself."""
    return one_hot_map([max(i - 1, 0) for i in range(n)])


def next_map(n: int) -> np.ndarray:
    """Every token attends to the next token; the last row (no next token) attends to itself."""
    return one_hot_map([min(i + 1, n - 1) for i in range(n)])


def identity_map(n: int) -> np.ndarray:
    return one_hot_map(list(range(n)))


def column_map(n: int, columns: Sequence[int]) -> np.ndarray:
    """Every row spreads its mass evenly over the given columns."""
    return spread_map(n, lambda i: columns)


def stack_heads(heads: Sequence[Sequence[np.ndarray]]) -> np.ndarray:
    """[[layer 1 head maps...], [layer 2 head maps...]] -> float32 [L, H, n, n]."""
    return np.stack([np.stack(layer) for layer in heads]).astype(np.float32)


def segment_ids_for(tokens: Sequence[str], sep_token: str = "[SEP]") -> list[int]:
    """0 up to and including the first separator, 1 after it (BERT's token type ids)."""
    ids, segment = [], 0
    for token in tokens:
        ids.append(segment)
        if token == sep_token:
            segment = 1
    return ids


def make_encoded(tokens: Sequence[str], attn: np.ndarray, cls_token: str = "[CLS]",
                 sep_token: str = "[SEP]") -> Encoded:
    """An `Encoded` in which every token is its own word. attn: [L, H, n, n] or a single [n, n] map."""
    attn = np.asarray(attn, dtype=np.float32)
    if attn.ndim == 2:
        attn = attn[None, None]
    tokens = list(tokens)
    return Encoded(tokens, list(range(len(tokens))), list(tokens), segment_ids_for(tokens, sep_token), attn,
                   cls_token=cls_token, sep_token=sep_token)


def random_row_stochastic(rng: np.random.Generator, shape: Sequence[int]) -> np.ndarray:
    """float32 maps of `shape` [..., n, n] with positive entries, rows summing to 1."""
    raw = rng.random(tuple(shape)) + 1e-3
    return (raw / raw.sum(-1, keepdims=True)).astype(np.float32)


def smoothed_one_hot_entropy(n: int, smoothing: float = 1e-4) -> float:
    """Entropy (nats) of a one-hot row of length n after a <- (1 - s) a + s / n, computed by hand."""
    peak = (1 - smoothing) + smoothing / n
    rest = smoothing / n
    return float(-(peak * np.log(peak) + (n - 1) * rest * np.log(rest)))


# -- a locally saved tiny random model -----------------------------------------------------------------
TINY_MAX_POSITIONS = 64


def save_tiny_model(folder, tokenizer=None, seed: int = 0):
    """A random BERT (2 layers x 4 heads, hidden 32, 64 positions) saved into `folder`, with `tokenizer`."""
    from transformers import BertConfig, BertModel

    torch.manual_seed(seed)
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=37, max_position_embeddings=TINY_MAX_POSITIONS)
    BertModel(config).save_pretrained(folder)
    if tokenizer is not None:
        tokenizer.save_pretrained(folder)
    return folder
