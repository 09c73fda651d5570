"""Surface statistics of attention heads (Clark et al. 2019, §3; SPEC §4.1 and §4.3).

Per head and per input, the mean over from-tokens of the attention mass to: itself (`self`), the previous
token (`prev`), the next token (`next`), [CLS] (`cls`), any [SEP] (`sep`), the tokens "." and "," (`punct`);
`sep_sep` = mass from [SEP] rows to [SEP] columns averaged over [SEP] rows, `rest_sep` = the same from
every other row. `prev` / `next` average over the tokens that have such a neighbour. Entropy: rows
smoothed `0.9999 a + 0.0001 / n`, entropy in nats averaged over rows (`entropy`) and of the [CLS] row
(`cls_entropy`); `uniform` = log n, the entropy of a head that spreads evenly; `max_weight` = the largest
weight in a row, averaged over rows (a broad head puts little on any one token). Every input weighs the
same in the mean over inputs, as in Clark's code.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
import pandas as pd
import torch

from .conventions import check_attention, head_frame, is_punctuation
from .extract import Batch, KeepExamples, Reducer, reduce
from .models import Encoded, Encoder

TOKEN_COLUMNS = ("self", "prev", "next", "cls", "sep", "sep_sep", "rest_sep", "punct")
ENTROPY_COLUMNS = ("entropy", "cls_entropy", "uniform", "max_weight")
SMOOTHING = 1e-4


class _MeanOverInputs(Reducer):
    """Accumulates per-input [L, H] statistics and averages them over inputs."""

    columns: Sequence[str] = ()

    def __init__(self):
        self.sums: dict[str, np.ndarray] = {}
        self.count = 0

    def add(self, per_input: dict[str, torch.Tensor]) -> None:
        """per_input: name -> [B, L, H] statistics of one batch."""
        for name, value in per_input.items():
            total = value.double().sum(0).numpy()
            self.sums[name] = self.sums.get(name, 0) + total
        self.count += next(iter(per_input.values())).shape[0]

    def result(self) -> dict[str, np.ndarray]:
        """Sums over inputs ([L, H] per column) and `count`: summable across blocks."""
        if not self.count:
            raise ValueError(f"{self.name}: no inputs were seen")
        return {**{name: self.sums[name] for name in self.columns}, "count": np.array(self.count)}

    def load(self, result: dict[str, np.ndarray]) -> None:
        self.sums = {name: result[name] for name in self.columns}
        self.count = int(result["count"])

    def means(self) -> dict[str, np.ndarray]:
        """column -> [L, H] mean over inputs."""
        if not self.count:
            raise ValueError(f"{self.name}: no inputs were seen")
        return {name: self.sums[name] / self.count for name in self.columns}

    def frame(self) -> pd.DataFrame:
        return head_frame(self.means())


class TokenStats(_MeanOverInputs):
    """Streaming `token_stats`: attention to positions and to special tokens, per head."""

    name = "token_stats"
    columns = TOKEN_COLUMNS

    def update(self, batch: Batch) -> None:
        attn, valid = batch.attn, batch.valid.float()  # [B, L, H, T, T], [B, T]
        n = batch.lengths.double()[:, None, None]
        neighbours = valid[:, 1:]  # pairs (i, i+1) inside the input
        n_pairs = neighbours.sum(1)[:, None, None].clamp(min=1)
        self_ = (attn.diagonal(0, -2, -1) * valid[:, None, None]).sum(-1) / n
        next_ = (attn.diagonal(1, -2, -1) * neighbours[:, None, None]).sum(-1) / n_pairs
        prev_ = (attn.diagonal(-1, -2, -1) * neighbours[:, None, None]).sum(-1) / n_pairs
        targets = torch.stack([batch.is_cls, batch.is_sep, batch.is_punct], -1).float()  # [B, T, 3]
        mass = attn @ targets[:, None, None]  # [B, L, H, T, 3]: each row's mass on each kind of target
        sep_rows = batch.is_sep.float()
        rest_rows = valid - sep_rows
        rows = torch.stack([valid, sep_rows, rest_rows], -1)  # [B, T, 3] row selections
        row_mean = rows / rows.sum(1, keepdim=True).clamp(min=1)
        by_rows = torch.einsum("blhtk,btr->blhkr", mass, row_mean)  # [B, L, H, target, rows]
        self.add({"self": self_, "prev": prev_, "next": next_,
                  "cls": by_rows[..., 0, 0], "sep": by_rows[..., 1, 0], "punct": by_rows[..., 2, 0],
                  "sep_sep": by_rows[..., 1, 1], "rest_sep": by_rows[..., 1, 2]})


class EntropyStats(_MeanOverInputs):
    """Streaming `entropy_stats`: mean row entropy, [CLS]-row entropy and the uniform reference, per head."""

    name = "entropy_stats"
    columns = ENTROPY_COLUMNS

    def __init__(self):
        super().__init__()
        self._buffers: tuple[torch.Tensor, torch.Tensor] | None = None

    def _scratch(self, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Two work tensors shaped like a batch, reused across batches (fresh 150 MB allocations per batch
        cost more than the arithmetic)."""
        if self._buffers is None or self._buffers[0].shape != like.shape:
            self._buffers = (torch.empty_like(like), torch.empty_like(like))
        return self._buffers

    def update(self, batch: Batch) -> None:
        attn = batch.attn  # [B, L, H, T, T]; padded columns are exactly 0
        width, n = attn.shape[-1], batch.lengths.float()
        floor = SMOOTHING / n  # [B]: what smoothing adds to every weight
        smoothed, logs = self._scratch(attn)
        torch.add(floor[:, None, None, None, None], attn, alpha=1 - SMOOTHING, out=smoothed)
        torch.log(smoothed, out=logs)
        plogp = (smoothed.unsqueeze(-2) @ logs.unsqueeze(-1))[..., 0, 0]  # [B, L, H, T]: sum_j s log s
        padded = (width - n) * floor * floor.log()  # [B]: the padded columns' share of that sum
        rows = padded[:, None, None, None] - plogp  # row entropies over each input's own n columns
        validf = batch.valid.float()[:, None, None]
        entropy = (rows * validf).sum(-1) / n[:, None, None]
        if not batch.is_cls.any(1).all():
            raise ValueError("an input has no start token ([CLS]); cls_entropy is undefined")
        cls_pos = batch.is_cls.float().argmax(1)  # first [CLS] of each input
        cls_entropy = rows[torch.arange(len(cls_pos)), :, :, cls_pos]
        uniform = n.double().log()[:, None, None].expand_as(entropy)
        max_weight = (attn.amax(-1) * validf).sum(-1) / n[:, None, None]
        self.add({"entropy": entropy, "cls_entropy": cls_entropy, "uniform": uniform, "max_weight": max_weight})


def _over_encoded(reducer: _MeanOverInputs, encodeds: Iterable[Encoded]) -> pd.DataFrame:
    for enc in encodeds:
        reducer.update(Batch.from_encoded(enc))
    return reducer.frame()


def token_stats(encodeds: Iterable[Encoded]) -> pd.DataFrame:
    """One row per head: layer, head, self, prev, next, cls, sep, sep_sep, rest_sep, punct (means over inputs)."""
    return _over_encoded(TokenStats(), encodeds)


def entropy_stats(encodeds: Iterable[Encoded]) -> pd.DataFrame:
    """One row per head: layer, head, entropy, cls_entropy, uniform (nats), max_weight (means over inputs)."""
    return _over_encoded(EntropyStats(), encodeds)


@dataclass
class SurfaceResult:
    """What the surface notebooks need: per-head tables and a few full maps."""

    tokens: pd.DataFrame
    entropy: pd.DataFrame
    examples: list[Encoded]


def analyse(encoder: Encoder, segments: Sequence, n_examples: int = 8, **reduce_options) -> SurfaceResult:
    """Token and entropy statistics over `segments` in one streaming pass (cached), plus `n_examples` maps."""
    tokens, entropy, keep = reduce(encoder, segments, [TokenStats(), EntropyStats(), KeepExamples(n_examples)],
                                   **reduce_options)
    return SurfaceResult(tokens.frame(), entropy.frame(), keep.examples)


VIG_COLUMNS = ("next", "prev", "identical", "identical_other", "delimiter", "other_words")


def _vig_one(enc: Encoded) -> dict[str, np.ndarray]:
    """Per-head [L, H] scores of Vig's six patterns on one input (NaN where a pattern has no rows)."""
    attn = np.asarray(enc.attn, dtype=np.float64)
    n = enc.n_tokens
    special = enc.is_cls | enc.is_sep
    plain = ~special & ~np.array([is_punctuation(t) for t in enc.tokens])
    tokens = np.array(enc.tokens)
    segment = np.array(enc.segment_ids)
    same = (tokens[:, None] == tokens[None, :]) & plain[:, None] & plain[None, :] & ~np.eye(n, dtype=bool)
    other_side = segment[:, None] != segment[None, :]
    near = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :]) <= 1
    rest = plain[None, :] & ~near & ~same  # columns that are none of the other patterns' targets

    def row_mean(targets: np.ndarray, rows: np.ndarray) -> np.ndarray:
        if not rows.any():
            return np.full(attn.shape[:2], np.nan)
        return (attn * targets).sum(-1)[..., rows].mean(-1)

    every = np.ones(n, dtype=bool)
    return {
        "next": attn.diagonal(1, -2, -1).mean(-1), "prev": attn.diagonal(-1, -2, -1).mean(-1),
        "identical": row_mean(same, same.any(1)),
        "identical_other": row_mean(same & other_side, (same & other_side).any(1)),
        "delimiter": row_mean(np.broadcast_to(special, (n, n)), every),
        "other_words": row_mean(rest, plain),
    }


def vig_scores(encodeds: Iterable[Encoded]) -> pd.DataFrame:
    """One row per head, the mean over inputs of how much it follows each of Vig's six patterns.

    next / prev: mass on the next / previous token; identical: from tokens that occur again, mass on their
    other occurrences; identical_other: the same, counting only occurrences in the other segment;
    delimiter: mass on [CLS] and [SEP]; other_words: from ordinary tokens, mass on ordinary tokens that are
    neither neighbours nor identical. Vig's "words predictive of the word" needs a language model's
    judgement, so `other_words` only bounds it: a head scoring high there is worth looking at."""
    scores = []
    for enc in encodeds:
        attn, n = np.asarray(enc.attn), enc.n_tokens
        if attn.ndim != 4 or attn.shape[2:] != (n, n):
            raise ValueError(f"attn must be [layers, heads, {n}, {n}] for {n} tokens, got {attn.shape}")
        check_attention(attn)
        scores.append(_vig_one(enc))
    if not scores:
        raise ValueError("vig_scores needs at least one input")
    return head_frame({k: np.nanmean(np.stack([s[k] for s in scores]), axis=0) for k in VIG_COLUMNS})
