"""Notebook 01 (surface attention): the numbers its prose reads from `surface.analyse`'s per-head tables, from
`surface.compare_neighbours` and from `surface.vig_best`. Shares are fractions of the attention, 0-1; layers and
heads are 1-indexed."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from ...core.conventions import by_depth
from ...present import paper
from .words import listed  # noqa: F401 - the cells write their lists of layers with it

POSITIONAL = ("prev", "next", "delimiter")  # Vig's patterns whose heads should keep their score on other pairs


@dataclass(frozen=True)
class NeighbourReading:
    """What dividing `prev` / `next` by n (Clark's code, "tokens") instead of n - 1 ("pairs") changes."""

    factor: float  # (n - 1) / n, mean over the inputs: what "tokens" multiplies each input's prev / next by
    drop: float  # 1 - factor: the fraction every position number loses
    mean_tokens: float  # tokens per input, mean
    strongest_prev: str  # label of the strongest previous-token head under "tokens"
    prev_max_tokens: float  # its score divided by n
    prev_max_pairs: float  # the strongest previous-token score divided by n - 1
    prev_over_tokens: int  # previous-token heads above the threshold under "tokens"
    next_over_tokens: int  # next-token heads above it under "tokens"
    prev_over_pairs: int  # previous-token heads above it under "pairs"
    next_over_pairs: int  # next-token heads above it under "pairs"
    same_heads: bool  # the two definitions put the same heads above the threshold, in both directions


def neighbours(compared: pd.DataFrame, lengths: Sequence[int]) -> NeighbourReading:
    """`compared`: `surface.compare_neighbours` (one row per definition and direction, heads counted above its
    threshold); `lengths`: tokens per input."""
    by = compared.set_index(["definition", "direction"])
    factor = float(np.mean([(n - 1) / n for n in lengths]))
    over = {key: int(by.loc[key, "over"]) for key in by.index}
    same = all(by.loc[("tokens", d), "heads"] == by.loc[("pairs", d), "heads"] for d in ("prev", "next"))
    return NeighbourReading(factor, 1 - factor, float(np.mean(lengths)), str(by.loc[("tokens", "prev"), "strongest"]),
                            float(by.loc[("tokens", "prev"), "max"]), float(by.loc[("pairs", "prev"), "max"]),
                            over[("tokens", "prev")], over[("tokens", "next")], over[("pairs", "prev")],
                            over[("pairs", "next")], same)


@dataclass(frozen=True)
class SinkReading:
    """Where the middle layers park their attention: `[CLS]` against `[SEP]`."""

    paper_first: int  # BERT-base's middle layers (of 12), where Clark et al. found [SEP]: the first
    paper_last: int  # and the last
    first: int  # this model's layers at the same relative depth: the first
    last: int  # and the last
    cls: float  # share of all attention on [CLS], mean over the middle layers' heads
    sep: float  # the same for [SEP] (both of a pair's)
    cls_to_sep: float  # cls / sep (inf when only sep is 0, NaN when both are)
    token: str  # the sink: "[CLS]" when cls > sep, else "[SEP]"


def sink(stats: pd.DataFrame) -> SinkReading:
    """`stats`: `SurfaceResult.tokens` (one row per head: layer, head, cls, sep, ...); the model's depth is its
    deepest layer."""
    start, stop = paper.SURFACE["sep_middle_layers"]
    middle = by_depth(range(start, stop + 1), int(stats["layer"].max()))
    inside = stats[stats["layer"].isin(middle)]
    cls, sep = float(inside["cls"].mean()), float(inside["sep"].mean())
    ratio = cls / sep if sep else (float("inf") if cls else float("nan"))
    return SinkReading(start, stop, middle[0], middle[-1], cls, sep, ratio, "[CLS]" if cls > sep else "[SEP]")


@dataclass(frozen=True)
class VigReading:
    """Vig's pattern heads, chosen on some pairs and scored on others."""

    identical: str  # label of the head chosen for identical words
    kept: float  # the smallest held-out / chosen score among the POSITIONAL patterns' heads (1 = all of it kept)


def vig(best: pd.DataFrame) -> VigReading:
    """`best`: `surface.vig_best` with held-out scores (one row per pattern: pattern, label, chosen, held_out).
    A chosen score is the largest of all heads, above 0 in any model that attends at all."""
    by = best.set_index("pattern")
    positional = by.loc[list(POSITIONAL)]
    return VigReading(str(by.loc["identical", "label"]), float((positional["held_out"] / positional["chosen"]).min()))
