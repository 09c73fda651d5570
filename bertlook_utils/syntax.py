"""Syntax heads (Clark et al. 2019, §4.2, Table 1): which attention head points from a word to its
syntactic head, relation by relation, compared with the best fixed-offset baseline.

    examples = parsed_attention(encoder, sentences)     # word-level maps aligned with silver parses
    head_accuracy(examples)                             # best head per relation (+ "all")
    offset_baseline(examples)                           # best fixed offset per relation

For long runs `score_sentences(encoder, sentences)` streams the same computation without keeping any map
and caches the per-dependent outcomes (`HeadScores`), from which every table here is built.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from .cache import DEFAULT_CACHE_DIR, code_version, entry_path, load_result, save_result
from .models import Encoder
from .parses import POSSESSIVE_MARKERS, Sentence, to_conllu
from .wordlevel import to_word_level

DIRECTIONS = ("dep->head", "head->dep")
OFFSETS = tuple(range(-3, 4))


@dataclass
class ParsedAttention:
    """Word-level attention of one parsed sentence.

    word_attn: float32 [L, H, m, m], [CLS] as word 0, the final [SEP] as word m-1 (m = n_words + 2), rows
    sum to 1; heads: int [m-2] (0 = ROOT, i = the i-th word, 1-based); relations, words, is_punct: [m-2];
    id: the sentence's id."""

    word_attn: np.ndarray
    heads: np.ndarray
    relations: list[str]
    words: list[str]
    is_punct: list[bool]
    id: str = ""

    def __post_init__(self):
        self.heads = np.asarray(self.heads, dtype=np.int64)
        n = len(self.heads)
        if self.word_attn.ndim != 4 or self.word_attn.shape[2:] != (n + 2, n + 2):
            raise ValueError(f"word_attn must be [layers, heads, {n + 2}, {n + 2}] for {n} words plus [CLS] and "
                             f"[SEP], got {self.word_attn.shape}")
        if not (len(self.relations) == len(self.words) == len(self.is_punct) == n):
            raise ValueError("heads, relations, words and is_punct must have one entry per word")
        if n and (self.heads.min() < 0 or self.heads.max() > n):
            raise ValueError(f"heads must be 0 (ROOT) or a 1-based word index up to {n}")


# -- alignment ------------------------------------------------------------------------------------
def _prepare(encoder: Encoder, sentence: Sentence):
    """The encoder's prepared input for a sentence's words, checked to keep every word as one word."""
    try:
        prepared = encoder.prepare(list(sentence.words))
    except ValueError as error:
        raise ValueError(f"sentence {sentence.id!r} cannot be aligned: {error}") from error
    n = len(sentence.words)
    if (max(prepared.word_ids) + 1 != n + 2 or prepared.words[1:-1] != list(sentence.words)
            or prepared.tokens[0] != encoder.cls_token or prepared.tokens[-1] != encoder.sep_token):
        raise ValueError(f"sentence {sentence.id!r}: the encoder's words do not match the parser's {n} words "
                         "one to one between [CLS] and [SEP]")
    return prepared


def _batches(encoder: Encoder, sentences: Sequence[Sentence], batch_size: int, from_mode: str, progress: bool
             ) -> Iterator[tuple[int, ParsedAttention]]:
    """(index in `sentences`, ParsedAttention) for every sentence, batched by similar length (less padding)."""
    if not sentences:
        raise ValueError("no sentences to align")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, not {batch_size}")
    prepared = [_prepare(encoder, s) for s in sentences]
    order = sorted(range(len(sentences)), key=lambda i: len(prepared[i].input_ids))
    bar = tqdm(total=len(sentences), desc=f"word-level attention of {encoder.name}", unit="sentence",
               disable=not progress)
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        attn, _ = encoder.forward([prepared[i] for i in chunk])
        for row, i in enumerate(chunk):
            p, s = prepared[i], sentences[i]
            n = len(p.input_ids)
            word_attn = to_word_level(attn[row, :, :, :n, :n].numpy(), p.word_ids, from_mode)
            yield i, ParsedAttention(word_attn, np.array(s.heads), list(s.relations), list(s.words), s.is_punct, s.id)
        bar.update(len(chunk))
    bar.close()


def parsed_attention(encoder: Encoder, sentences: Sequence[Sentence], batch_size: int = 32, progress: bool = True,
                     from_mode: str = "mean") -> list[ParsedAttention]:
    """Word-level attention (float32 [L, H, m, m]) of every sentence, in the order given.

    Each sentence is encoded from its parser words (pre-split), so every parser word is one word of the map;
    a word that gives no wordpieces raises ValueError naming the sentence. Attention from a split word is
    the mean of its tokens' rows (`from_mode`, see `wordlevel.to_word_level`). Memory: about
    4·L·H·m² bytes per sentence (~0.2 MB for 6 x 12 heads and 25 words); for thousands of sentences prefer
    `score_sentences`, which streams."""
    out: list[ParsedAttention | None] = [None] * len(sentences)
    for i, example in _batches(encoder, sentences, batch_size, from_mode, progress):
        out[i] = example
    return out  # type: ignore[return-value]
