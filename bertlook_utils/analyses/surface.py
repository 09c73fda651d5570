"""Surface statistics of attention heads (Clark et al. 2019, §3; SPEC §4.1 and §4.3).

Per head and per input, the mean over from-tokens of the attention mass to: itself (`self`), the previous
token (`prev`), the next token (`next`), [CLS] (`cls`), any [SEP] (`sep`), the tokens "." and "," (`punct`);
`sep_sep` = mass from [SEP] rows to [SEP] columns averaged over [SEP] rows, `rest_sep` = the same from
every other row. `prev` / `next` are divided by the n from-tokens, as Clark's released code does, so a
perfect previous-token head scores (n - 1) / n (`neighbours="tokens"`, the default); `neighbours="pairs"`
divides by the n - 1 tokens that have such a neighbour instead (a perfect head scores 1). Entropy: rows
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

from ..core.conventions import head_frame, head_label, is_punctuation
from ..engine.extract import Batch, KeepExamples, Reducer, encoded_batches, reduce
from ..core.models import Encoded, Encoder

TOKEN_COLUMNS = ("self", "prev", "next", "cls", "sep", "sep_sep", "rest_sep", "punct")
NEIGHBOURS = {  # how `prev` / `next` are normalised per input: name -> what it divides by
    "tokens": "÷ n from-tokens (Clark et al.'s code; a perfect previous-token head scores (n-1)/n)",
    "pairs": "÷ n-1 neighbouring pairs (a perfect previous-token head scores 1)",
}
PAIR_COLUMNS = ("prev_pairs", "next_pairs")  # `prev` / `next` under "pairs", kept beside Clark's in every pass
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


def _check_neighbours(neighbours: str) -> str:
    if neighbours not in NEIGHBOURS:
        raise ValueError(f"neighbours must be one of {sorted(NEIGHBOURS)}, not {neighbours!r}")
    return neighbours


class TokenStats(_MeanOverInputs):
    """Streaming `token_stats`: attention to positions and to special tokens, per head. It sums `prev` /
    `next` under both definitions (NEIGHBOURS); `neighbours` picks the one `frame()` reports."""

    name = "token_stats"
    columns = TOKEN_COLUMNS + PAIR_COLUMNS

    def __init__(self, neighbours: str = "tokens"):
        super().__init__()
        self.neighbours = _check_neighbours(neighbours)

    def frame(self, neighbours: str | None = None) -> pd.DataFrame:
        """One row per head: layer, head and TOKEN_COLUMNS, `prev` / `next` by `neighbours` (default: the
        reducer's own)."""
        means = self.means()
        if _check_neighbours(neighbours or self.neighbours) == "pairs":
            means["prev"], means["next"] = means["prev_pairs"], means["next_pairs"]
        return head_frame({name: means[name] for name in TOKEN_COLUMNS})

    def neighbour_frame(self) -> pd.DataFrame:
        """One row per head: layer, head, prev_tokens, next_tokens (÷ n, Clark) and prev_pairs, next_pairs (÷ n-1)."""
        means = self.means()
        return head_frame({"prev_tokens": means["prev"], "next_tokens": means["next"],
                           "prev_pairs": means["prev_pairs"], "next_pairs": means["next_pairs"]})

    def update(self, batch: Batch) -> None:
        attn, valid = batch.attn, batch.valid.float()  # [B, L, H, T, T], [B, T]
        n = batch.lengths.double()[:, None, None]
        neighbours = valid[:, 1:]  # pairs (i, i+1) inside the input
        n_pairs = neighbours.sum(1)[:, None, None].clamp(min=1)
        self_ = (attn.diagonal(0, -2, -1) * valid[:, None, None]).sum(-1) / n
        next_sum = (attn.diagonal(1, -2, -1) * neighbours[:, None, None]).sum(-1)  # [B, L, H]
        prev_sum = (attn.diagonal(-1, -2, -1) * neighbours[:, None, None]).sum(-1)
        targets = torch.stack([batch.is_cls, batch.is_sep, batch.is_punct], -1).float()  # [B, T, 3]
        mass = attn @ targets[:, None, None]  # [B, L, H, T, 3]: each row's mass on each kind of target
        sep_rows = batch.is_sep.float()
        rest_rows = valid - sep_rows
        rows = torch.stack([valid, sep_rows, rest_rows], -1)  # [B, T, 3] row selections
        row_mean = rows / rows.sum(1, keepdim=True).clamp(min=1)
        by_rows = torch.einsum("blhtk,btr->blhkr", mass, row_mean)  # [B, L, H, target, rows]
        self.add({"self": self_, "prev": prev_sum / n, "next": next_sum / n,
                  "prev_pairs": prev_sum / n_pairs, "next_pairs": next_sum / n_pairs,
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
    for batch in encoded_batches(encodeds):
        reducer.update(batch)
    return reducer.frame()


def token_stats(encodeds: Iterable[Encoded], neighbours: str = "tokens") -> pd.DataFrame:
    """One row per head: layer, head, self, prev, next, cls, sep, sep_sep, rest_sep, punct (means over inputs);
    `prev` / `next` divided by n ("tokens", Clark's code) or by n - 1 ("pairs"), see NEIGHBOURS."""
    return _over_encoded(TokenStats(neighbours), encodeds)


def compare_neighbours(neighbours: pd.DataFrame, threshold: float = 0.5) -> pd.DataFrame:
    """What the two definitions of `prev` / `next` change. `neighbours`: `TokenStats.neighbour_frame()` (one
    row per head). One row per definition and direction: definition, direction ("prev" / "next"), `over`
    (number of heads above `threshold`), `heads` (their labels), `strongest` (label) and `max` (its score),
    `mean` (over all heads)."""
    rows = []
    for definition in NEIGHBOURS:
        for direction in ("prev", "next"):
            values = neighbours[f"{direction}_{definition}"]
            over = neighbours[values > threshold]
            top = neighbours.loc[values.idxmax()]
            rows.append((definition, direction, len(over),
                         ", ".join(head_label(int(layer), int(h)) for layer, h in zip(over["layer"], over["head"])),
                         head_label(int(top["layer"]), int(top["head"])), float(values.max()), float(values.mean())))
    return pd.DataFrame(rows, columns=["definition", "direction", "over", "heads", "strongest", "max", "mean"])


def entropy_stats(encodeds: Iterable[Encoded]) -> pd.DataFrame:
    """One row per head: layer, head, entropy, cls_entropy, uniform (nats), max_weight (means over inputs)."""
    return _over_encoded(EntropyStats(), encodeds)


BROAD_MAX_WEIGHT = 0.10  # Clark et al. §3.3: broad heads put "at most 10 %" on any single word (notebook 03)
BROAD_ENTROPY = 3.8  # nats: Clark et al.'s released Fig 6 colouring ("broad"; clustering uses the same)


def broad_heads(entropy: pd.DataFrame, max_weight: float = BROAD_MAX_WEIGHT,
                entropy_above: float = BROAD_ENTROPY) -> pd.DataFrame:
    """The two definitions of a broad head side by side. `entropy`: `entropy_stats` (one row per head). Returns
    layer, head, entropy, max_weight, `by_max_weight` (mean largest weight per row <= `max_weight`) and
    `by_entropy` (mean row entropy > `entropy_above`). Since a row's entropy is at least -ln of its largest
    weight (and -ln is convex), a head broad by max weight has entropy >= ln(1 / max_weight) (2.30 nats for
    0.10): the max-weight test implies a weaker entropy bound than 3.8, not the entropy test."""
    frame = entropy[["layer", "head", "entropy", "max_weight"]].copy()
    frame["by_max_weight"] = frame["max_weight"] <= max_weight
    frame["by_entropy"] = frame["entropy"] > entropy_above
    return frame


def broad_summary(broad: pd.DataFrame) -> pd.DataFrame:
    """`broad_heads` grouped: one row per group ("both", "entropy only", "max weight only"): n, heads (labels),
    mean entropy and mean max_weight of the group (NaN for an empty group)."""
    groups = {"both": broad["by_max_weight"] & broad["by_entropy"],
              "entropy only": broad["by_entropy"] & ~broad["by_max_weight"],
              "max weight only": broad["by_max_weight"] & ~broad["by_entropy"]}
    rows = []
    for name, mask in groups.items():
        chosen = broad[mask]
        rows.append((name, int(mask.sum()), ", ".join(head_label(int(layer), int(h))
                                                       for layer, h in zip(chosen["layer"], chosen["head"])),
                     chosen["entropy"].mean(), chosen["max_weight"].mean()))
    return pd.DataFrame(rows, columns=["group", "n", "heads", "entropy", "max_weight"])


@dataclass
class SurfaceResult:
    """What the surface notebooks need: per-head tables and a few full maps. `tokens`: `prev` / `next` by the
    `neighbours` definition asked for (Clark's by default); `neighbours`: both definitions per head
    (`TokenStats.neighbour_frame`)."""

    tokens: pd.DataFrame
    entropy: pd.DataFrame
    examples: list[Encoded]
    neighbours: pd.DataFrame | None = None
    definition: str = "tokens"  # the NEIGHBOURS definition of `tokens`' prev / next


def analyse(encoder: Encoder, segments: Sequence, n_examples: int = 8, neighbours: str = "tokens",
            **reduce_options) -> SurfaceResult:
    """Token and entropy statistics over `segments` in one streaming pass (cached), plus `n_examples` maps;
    `neighbours` picks how `prev` / `next` are normalised in `tokens` (NEIGHBOURS)."""
    tokens, entropy, keep = reduce(encoder, segments, [TokenStats(neighbours), EntropyStats(),
                                                       KeepExamples(n_examples)], **reduce_options)
    return SurfaceResult(tokens.frame(), entropy.frame(), keep.examples, tokens.neighbour_frame(), neighbours)


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
    scores = [_vig_one(batch.inputs[0]) for batch in encoded_batches(encodeds)]
    return head_frame({k: np.nanmean(np.stack([s[k] for s in scores]), axis=0) for k in VIG_COLUMNS})


def vig_best(chosen_on: pd.DataFrame, scored_on: pd.DataFrame | None = None) -> pd.DataFrame:
    """The strongest head of each of Vig's patterns, chosen on one `vig_scores` frame and scored on another
    (`scored_on`, e.g. held-out pairs; NaN when not given). One row per pattern (VIG_COLUMNS): pattern, layer,
    head (1-indexed), label, `chosen` (its score where it was chosen, the maximum: biased upwards) and `held_out`
    (its score on the other inputs)."""
    rows = []
    for pattern in VIG_COLUMNS:
        top = chosen_on.loc[chosen_on[pattern].idxmax()]
        layer, head = int(top["layer"]), int(top["head"])
        held_out = np.nan
        if scored_on is not None:
            held_out = float(scored_on[(scored_on["layer"] == layer) & (scored_on["head"] == head)][pattern].iloc[0])
        rows.append((pattern, layer, head, head_label(layer, head), float(top[pattern]), held_out))
    return pd.DataFrame(rows, columns=["pattern", "layer", "head", "label", "chosen", "held_out"])
