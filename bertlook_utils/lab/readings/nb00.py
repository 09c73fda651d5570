"""Notebook 00 (a tour of attention): the numbers its prose reads from the loaded encoder, from one input's maps
(`Encoded.attn`, [layers, heads, n, n]) and from `surface.token_stats` on that input. Shares are fractions of a
row's attention, 0-1."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np
import pandas as pd

from ...core.conventions import head_label
from ...core.models import Encoded, Encoder

DEFAULT_TRAINING = ("attention distillation (MiniLM), every second layer kept, then contrastive sentence-pair "
                    "training with mean pooling")  # how the default model (all-MiniLM-L6-v2) was trained
ROW_TOLERANCE = 1e-5  # how far a row's sum may be from 1


@dataclass(frozen=True)
class ModelCard:
    """The loaded encoder's geometry and vocabulary, as the model check and the "paper vs this run" table read
    them."""

    name: str  # the encoder's name
    n_layers: int
    n_heads: int  # heads per layer
    hidden_size: int  # units per token vector
    vocab_size: int  # entries of the tokenizer's vocabulary
    casing: str  # "uncased", "cased" or "casing unknown" (the tokenizer's do_lower_case)
    training: str  # how it was trained: DEFAULT_TRAINING for the default model, else a pointer to its card
    maps_per_input: int  # n_layers * n_heads


def model_card(encoder: Encoder, model: str | None) -> ModelCard:
    """`encoder`: the loaded encoder; `model`: the notebook's MODEL (None: the embedded default)."""
    lower = getattr(encoder.tokenizer, "do_lower_case", None)
    casing = {True: "uncased", False: "cased"}.get(lower, "casing unknown")
    return ModelCard(encoder.name, encoder.n_layers, encoder.n_heads, encoder.model.config.hidden_size,
                     len(encoder.tokenizer), casing, DEFAULT_TRAINING if model is None else "see its model card",
                     encoder.n_layers * encoder.n_heads)


@dataclass(frozen=True)
class StrongestHead:
    """The head that gives the largest share of its attention to one target (a `token_stats` column)."""

    layer: int  # 1-indexed
    head: int  # 1-indexed
    label: str  # "layer-head"
    share: float  # its share of attention on the target, 0-1


def strongest_head(by_head: pd.DataFrame, column: str) -> StrongestHead:
    """`by_head`: `surface.token_stats` (one row per head); `column`: "prev", "next", "cls", ... The first head
    with the largest value wins a tie."""
    row = by_head.loc[by_head[column].idxmax()]
    layer, head = int(row["layer"]), int(row["head"])
    return StrongestHead(layer, head, head_label(layer, head), float(row[column]))


def rows_sum_to_one(attn: np.ndarray) -> bool:
    """Whether every row of `attn` [..., n] sums to 1 within ROW_TOLERANCE."""
    return bool(np.allclose(np.asarray(attn).sum(-1), 1, atol=ROW_TOLERANCE))


@dataclass(frozen=True)
class TourTakeaways:
    """The tour's takeaways: one input's maps, its habit heads, and a split input's word-level maps."""

    n_tokens: int  # tokens of the input
    n_layers: int
    n_heads: int  # heads per layer
    n_maps: int  # n_layers * n_heads maps of n_tokens x n_tokens
    rows_sum_to_one: bool  # every row of every map sums to 1
    weakest_habit: float  # the smallest share among the habit heads (0-1); NaN when none are given
    split_tokens: int  # tokens of the split input
    split_words: int  # its words
    word_rows_sum_to_one: bool  # every row of its word-level maps sums to 1


def takeaways(example: Encoded, habits: Iterable[StrongestHead], split: Encoded,
              words: np.ndarray) -> TourTakeaways:
    """`example`: the input every map comes from; `habits`: its strongest heads (`strongest_head`); `split`: an
    input whose words are split into pieces; `words`: its word-level maps [layers, heads, w, w]."""
    n_layers, n_heads, n = example.attn.shape[:3]
    shares = [top.share for top in habits]
    return TourTakeaways(n, n_layers, n_heads, n_layers * n_heads, rows_sum_to_one(example.attn),
                         min(shares) if shares else float("nan"), split.n_tokens, len(split.words),
                         rows_sum_to_one(words))
