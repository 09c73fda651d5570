"""Notebook 03 (attention entropy): the numbers its prose reads from `SurfaceResult.entropy` (one row per head:
layer, head, entropy, cls_entropy, uniform in nats, max_weight 0-1), from `surface.broad_heads` and from
`SurfaceResult.tokens`. Entropies are in nats; layers 1-indexed."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...analyses.surface import broad_summary
from .words import listed  # noqa: F401 - the cells write their lists of layers with it


@dataclass(frozen=True)
class Span:
    """The lowest and the highest of some values; NaN, NaN for none."""

    low: float
    high: float


def _span(values) -> Span:
    values = np.asarray(values, dtype=float)
    return Span(float(values.min()), float(values.max())) if values.size else Span(float("nan"), float("nan"))


@dataclass(frozen=True)
class EntropyProfile:
    """The mean head entropy per layer (Figure 4's layer means)."""

    layer_means: np.ndarray  # [layers] mean head entropy of each layer, layer 1 first
    first: float  # layer 1's mean
    inner_min: float  # the lowest mean of the layers between the first and the last (NaN with 2 layers or fewer)
    inner_max: float  # the highest of them
    inner_last: int  # the last of the layers between (the last but one layer)
    last: float  # the last layer's mean
    u_shaped: bool  # the first and the last layer both above every layer between (False with 2 layers or fewer)
    first_last_gap: float  # |last - first|


def entropy_profile(entropy: pd.DataFrame) -> EntropyProfile:
    """`entropy`: `SurfaceResult.entropy`."""
    means = entropy.groupby("layer")["entropy"].mean().to_numpy()
    inner = _span(means[1:-1])
    first, last = float(means[0]), float(means[-1])
    return EntropyProfile(means, first, inner.low, inner.high, len(means) - 1, last,
                          bool(len(means) > 2 and min(first, last) > inner.high), abs(last - first))


@dataclass(frozen=True)
class BroadReading:
    """The two definitions of a broad head (`surface.broad_heads`): by largest weight and by entropy, and the heads
    broad by entropy only."""

    n_by_max_weight: int  # heads whose mean largest weight is at most the threshold
    n_by_entropy: int  # heads whose mean entropy is above the threshold
    nested: bool  # every head broad by largest weight is broad by entropy too
    n_entropy_only: int  # heads broad by entropy only
    heads: str  # their labels, "2-1, 3-4"
    layers: tuple[int, ...]  # the layers they sit in, ascending
    entropy: Span  # their mean entropy (nats)
    max_weight: Span  # their mean largest weight (0-1)
    cls: Span  # the share of their attention on [CLS] (0-1)


def broad(heads: pd.DataFrame, tokens: pd.DataFrame) -> BroadReading:
    """`heads`: `surface.broad_heads` (one row per head: layer, head, entropy, max_weight, by_max_weight,
    by_entropy); `tokens`: `SurfaceResult.tokens` (one row per head: layer, head, cls, ...)."""
    groups = broad_summary(heads).set_index("group")
    extra = heads[heads["by_entropy"] & ~heads["by_max_weight"]]
    cls = tokens.set_index(["layer", "head"]).loc[list(zip(extra["layer"], extra["head"])), "cls"]
    return BroadReading(int(heads["by_max_weight"].sum()), int(heads["by_entropy"].sum()),
                        int(groups.loc["max weight only", "n"]) == 0, int(groups.loc["entropy only", "n"]),
                        str(groups.loc["entropy only", "heads"]),
                        tuple(sorted(int(layer) for layer in extra["layer"].unique())),
                        _span(extra["entropy"]), _span(extra["max_weight"]), _span(cls))


@dataclass(frozen=True)
class ClsReading:
    """How broadly `[CLS]` attends against the mean row of its layer."""

    last_cls: float  # [CLS]'s entropy in the last layer, mean over its heads
    last_mean: float  # the mean row's entropy there
    last_gap: float  # last_cls - last_mean (negative: [CLS] more focused)
    focused_layers: tuple[int, ...]  # layers where [CLS] is more than `margin` nats below the mean row, ascending
    focused_cls: Span  # [CLS]'s entropy in those layers
    focused_mean: Span  # the mean row's entropy in those layers


def cls_entropy(entropy: pd.DataFrame, margin: float = 1.0) -> ClsReading:
    """`entropy`: `SurfaceResult.entropy`; `margin`: nats below the layer's mean row that make [CLS] "far more
    focused"."""
    by_layer = entropy.groupby("layer")[["cls_entropy", "entropy"]].mean()
    gap = by_layer["cls_entropy"] - by_layer["entropy"]
    last = by_layer.index[-1]
    focused = [int(layer) for layer in gap.index if gap[layer] < -margin]
    return ClsReading(float(by_layer.loc[last, "cls_entropy"]), float(by_layer.loc[last, "entropy"]),
                      float(gap[last]), tuple(focused), _span(by_layer.loc[focused, "cls_entropy"]),
                      _span(by_layer.loc[focused, "entropy"]))


@dataclass(frozen=True)
class UniformReference:
    """Uniform attention over the inputs: the reference entropy, and the input length it stands for."""

    nats: float  # mean of ln n over the inputs
    tokens: float  # exp(nats): the geometric mean input length


def uniform_reference(entropy: pd.DataFrame) -> UniformReference:
    """`entropy`: `SurfaceResult.entropy` (its `uniform` column, the same for every head)."""
    nats = float(entropy["uniform"].mean())
    return UniformReference(nats, float(np.exp(nats)))
