"""The kit's conventions: head names and indices, what counts as attention, punctuation, layer depth.

Shared by every layer: how heads are named and indexed, what counts as attention, which tokens are
punctuation, and how a shallower model's layers line up with BERT-base's.

Layers and heads are 1-indexed in every label and table ("8-10" = layer 8, head 10, as in the papers);
arrays are 0-indexed, head k of a flattened [L·H] axis being (layer - 1)·H + (head - 1).
"""
from __future__ import annotations

import numbers

import numpy as np
import pandas as pd

PAPER_LAYERS = 12  # BERT-base, the model of both papers
PUNCTUATION = frozenset({".", ","})  # Clark et al.'s "punctuation" tokens
_WORD_MARKERS = ("##", "\u0120", "\u2581")  # WordPiece continuation, byte-level BPE and SentencePiece spaces


def head_label(layer: int, head: int) -> str:
    """1-indexed "layer-head" label, as in the papers ("8-10" = layer 8, head 10)."""
    return f"{layer}-{head}"


def check_index(value, n: int | None, name: str) -> None:
    """Raise unless `value` is a layer or head number, 1-indexed as in the papers: an integer from 1 to `n` (None:
    no upper bound). A TypeError for anything but an integer (a bool too; numpy integers are fine), a ValueError
    naming `name` and the valid range otherwise: 0 or -1 never wraps around to the last layer or head."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, 1-indexed as in the papers; got {value!r}")
    if value < 1 or (n is not None and value > n):
        valid = "1 or more" if n is None else f"1-{n}"
        raise ValueError(f"{name} must be {valid} (1-indexed, as in the papers); got {value}")


def check_head(layer, head, n_layers: int | None, n_heads: int) -> None:
    """Raise unless head `layer-head` (1-indexed) exists in a model of `n_layers` x `n_heads` (see `check_index`)."""
    check_index(layer, n_layers, "layer")
    check_index(head, n_heads, "head")


def head_index(layer: int, head: int, n_heads: int) -> int:
    """Position of head `layer-head` (1-indexed) on a flattened [L·H] axis, e.g. a row of the distance matrix."""
    check_head(layer, head, None, n_heads)
    return (layer - 1) * n_heads + (head - 1)


def head_frame(values: dict[str, np.ndarray]) -> pd.DataFrame:
    """One row per head, `layer` and `head` 1-indexed, one column per [L, H] array in `values`."""
    n_layers, n_heads = next(iter(values.values())).shape
    layer, head = np.meshgrid(np.arange(1, n_layers + 1), np.arange(1, n_heads + 1), indexing="ij")
    frame = {"layer": layer.ravel(), "head": head.ravel()}
    frame.update({k: np.asarray(v, dtype=float).ravel() for k, v in values.items()})
    return pd.DataFrame(frame)


def by_depth(paper_layers: range | tuple, n_layers: int) -> list[int]:
    """BERT-base layers (1-indexed, of 12) -> the layers at the same relative depth in an n-layer model
    (BERT-base layers 6-10 of 12 ~ layers 3-5 of 6)."""
    return sorted({max(1, min(n_layers, round(layer * n_layers / PAPER_LAYERS))) for layer in paper_layers})


def check_attention(attn: np.ndarray, tolerance: float = 1e-3) -> None:
    """Raise ValueError unless `attn` [..., n, n] is finite, non-negative, with rows summing to 1."""
    if not np.all(np.isfinite(attn)):
        raise ValueError("attention contains NaN or infinite values")
    if attn.size and attn.min() < 0:
        raise ValueError("attention contains negative weights; pass probabilities (softmax output)")
    sums = attn.sum(-1)
    if attn.size and np.abs(sums - 1).max() > tolerance:
        raise ValueError(f"attention rows must sum to 1 (found sums from {sums.min():.4f} to {sums.max():.4f}); "
                         "pass softmax probabilities, not scores")


def is_punctuation(token: str) -> bool:
    """True for the tokens "." and "," (also written with a word-boundary marker, as in RoBERTa)."""
    for marker in _WORD_MARKERS:
        token = token.removeprefix(marker)
    return token in PUNCTUATION
