"""Streaming attention extraction: batches flow through reducers that keep running sums, never every map.

    results = reduce(encoder, segments, [TokenStats(), EntropyStats(), KeepExamples(8)])

Each reducer's result is cached on disk (`cache`), keyed by model fingerprint + data fingerprint + the
version of the reducer's code (its module and what that imports) + the reducer's own key; a missing, stale, truncated or tampered entry is recomputed. Only
reducers without a valid entry take part in the (single) pass.
"""
from __future__ import annotations

import hashlib
import inspect
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from .cache import DEFAULT_CACHE_DIR, code_version, entry_path, load_result, save_result
from .corpora import Segment, segments_fingerprint
from .models import Encoded, Encoder

PUNCTUATION = frozenset({".", ","})  # Clark et al.'s "punctuation" tokens
_WORD_MARKERS = ("##", "\u0120", "\u2581")  # WordPiece continuation, byte-level BPE and SentencePiece spaces


def is_punctuation(token: str) -> bool:
    """True for the tokens "." and "," (also written with a word-boundary marker, as in RoBERTa)."""
    for marker in _WORD_MARKERS:
        token = token.removeprefix(marker)
    return token in PUNCTUATION


@dataclass
class Batch:
    """A padded batch of attention maps and what reducers need to know about its tokens.

    attn: float32 [B, L, H, T, T]: columns beyond an input's length are exactly 0 (the padding mask
    underflows to 0 in the softmax), rows beyond it are meaningless; valid, is_cls, is_sep,
    is_punct: bool [B, T], False at padding; lengths: long [B]; inputs: B objects with tokens, word_ids,
    words and segment_ids (`Encoded` or the encoder's prepared inputs)."""

    attn: torch.Tensor
    valid: torch.Tensor
    is_cls: torch.Tensor
    is_sep: torch.Tensor
    is_punct: torch.Tensor
    lengths: torch.Tensor
    inputs: Sequence
    cls_token: str
    sep_token: str

    @classmethod
    def build(cls, attn: torch.Tensor, valid: torch.Tensor, inputs: Sequence, cls_token: str, sep_token: str
              ) -> "Batch":
        width = valid.shape[1]

        def flags(test):
            return torch.tensor([[test(t) for t in x.tokens] + [False] * (width - len(x.tokens)) for x in inputs])

        return cls(attn, valid, flags(lambda t: t == cls_token), flags(lambda t: t == sep_token),
                   flags(is_punctuation), valid.sum(1), inputs, cls_token, sep_token)

    @classmethod
    def from_encoded(cls, enc: Encoded) -> "Batch":
        """A batch of one, after checking that `enc.attn` is a finite, row-normalised [L, H, n, n] array."""
        attn = np.asarray(enc.attn)
        n = len(enc.tokens)
        if attn.ndim != 4 or attn.shape[2:] != (n, n):
            raise ValueError(f"attn must be [layers, heads, {n}, {n}] for {n} tokens, got {attn.shape}")
        check_attention(attn)
        return cls.build(torch.from_numpy(attn.astype(np.float32)).unsqueeze(0), torch.ones(1, n, dtype=torch.bool),
                         [enc], enc.cls_token, enc.sep_token)


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


class Reducer:
    """Consumes batches, keeps running sums. `key` names its settings in the cache key; `result()` is a
    dict of numpy arrays (what is cached); `load(result)` restores a reducer from a cached result."""

    name = "reducer"

    @property
    def key(self) -> str:
        return self.name

    def update(self, batch: Batch) -> None:
        raise NotImplementedError

    def result(self) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def load(self, result: dict[str, np.ndarray]) -> None:
        raise NotImplementedError


class KeepExamples(Reducer):
    """Keeps the full maps of the first `k` inputs, for figures: `.examples` is a list of `Encoded`."""

    name = "examples"

    def __init__(self, k: int = 8):
        self.k = k
        self.examples: list[Encoded] = []

    @property
    def key(self) -> str:
        return f"{self.name}-{self.k}"

    def update(self, batch: Batch) -> None:
        for i, x in enumerate(batch.inputs[:self.k - len(self.examples)]):
            n = len(x.tokens)
            self.examples.append(Encoded(x.tokens, x.word_ids, x.words, x.segment_ids,
                                         batch.attn[i, :, :, :n, :n].numpy().copy(), batch.cls_token, batch.sep_token))

    def result(self) -> dict[str, np.ndarray]:
        meta = [dict(tokens=e.tokens, word_ids=e.word_ids, words=e.words, segment_ids=e.segment_ids,
                     cls_token=e.cls_token, sep_token=e.sep_token) for e in self.examples]
        arrays = {f"attn{i}": e.attn for i, e in enumerate(self.examples)}
        return {"meta": np.array(json.dumps(meta)), **arrays}

    def load(self, result: dict[str, np.ndarray]) -> None:
        meta = json.loads(str(result["meta"]))
        self.examples = [Encoded(attn=result[f"attn{i}"], **m) for i, m in enumerate(meta)]


# -- the pass ---------------------------------------------------------------------------------------
def items_fingerprint(items: Sequence) -> str:
    """sha256 of the inputs: segments or texts / pairs."""
    if items and all(isinstance(s, Segment) for s in items):
        return segments_fingerprint(list(items))
    return hashlib.sha256(json.dumps(list(items), ensure_ascii=False).encode()).hexdigest()


def reducer_version(reducer: Reducer) -> str:
    """Code version of a reducer: its package module with everything that imports; for a reducer
    defined outside the package, the source file of its class plus this engine."""
    package, _, module = type(reducer).__module__.rpartition(".")
    if package == __package__:
        return code_version(module)
    source = Path(inspect.getfile(type(reducer))).read_bytes()
    return hashlib.sha256(source + code_version("extract").encode()).hexdigest()


def _as_item(item):
    return item.pair if isinstance(item, Segment) else item


def reduce(encoder: Encoder, items: Sequence, reducers: Iterable[Reducer], batch_size: int = 32,
           cache_dir: Path | str | None = DEFAULT_CACHE_DIR, progress: bool = True) -> list[Reducer]:
    """Run every reducer over the attention of `items` (segments, texts or (a, b) pairs) in one pass.

    Reducers with a valid cache entry are restored instead of recomputed; pass cache_dir=None to skip the
    cache. Returns the reducers, filled."""
    reducers = list(reducers)
    if not items:
        raise ValueError("no inputs to extract attention from")
    todo, paths = [], {}
    data_key = items_fingerprint(items)
    for reducer in reducers:
        if cache_dir is not None:
            path = entry_path(cache_dir, reducer.name, encoder.fingerprint, data_key, reducer.key,
                              version=reducer_version(reducer))
            paths[id(reducer)] = path
            cached = load_result(path)
            if cached is not None:
                reducer.load(cached)
                continue
        todo.append(reducer)
    if not todo:
        return reducers
    bar = tqdm(total=len(items), desc=f"attention of {encoder.name}", unit="input", disable=not progress)
    for prepared, attn, valid in encoder.attention_batches(map(_as_item, items), batch_size):
        batch = Batch.build(attn, valid, prepared, encoder.cls_token, encoder.sep_token)
        for reducer in todo:
            reducer.update(batch)
        bar.update(len(prepared))
    bar.close()
    for reducer in todo:
        if cache_dir is not None:
            save_result(paths[id(reducer)], reducer.result())
    return reducers
