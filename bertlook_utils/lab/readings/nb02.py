"""Notebook 02 (the [SEP] no-op argument): the numbers its prose reads from the attention gradients
(`GradientResult.by_layer` and `.relative`), the value norms (`gradients.value_norms`) and the causal test
(`gradients.sink_ablation`). Shares and ratios are fractions; distances are cosine distances."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ...analyses.gradients import SINK_HEAD, AblationResult
from ...core.conventions import by_depth, head_label
from .words import layer_words, listed, plural  # noqa: F401 - the cells write their lists with them

CLS_HEAVY = 0.2  # a layer whose [CLS] column holds more than this share of the attention ("more than a fifth")
SEP_LOW = 0.5  # a [SEP] gradient below this multiple of an ordinary token's ("below half of it")
SHORT_CLS = 0.3  # a head in which [CLS] writes less than this multiple of what an ordinary token writes


# -- the gradient per kind of token -----------------------------------------------------------------
@dataclass(frozen=True)
class SinkGradientReading:
    """Which special token is the sink here and how the gradient on attention to it compares with an ordinary
    token's, per layer (layers 1-indexed; gradient ratios are the `relative` frame's, 1 = an ordinary token)."""

    middle: tuple[int, ...]  # the layers at the relative depth of BERT-base's middle layers (`paper_layers`)
    cls_middle: float  # share of all attention that goes to [CLS], mean over the middle layers
    sep_middle: float  # the same for [SEP]
    sink: str  # "[CLS]" when the middle layers attend more to [CLS] than to [SEP], else "[SEP]"
    cls_layers: tuple[int, ...]  # layers whose [CLS] column holds more than CLS_HEAVY of the attention
    cls_smaller_low: float  # in cls_layers, 1 / the largest [CLS] gradient ratio ("n times smaller"); NaN if none
    cls_smaller_high: float  # 1 / the smallest [CLS] gradient ratio there; NaN if none
    cls_ratio_claimed: float  # the largest [CLS] gradient ratio in the layers `claimed` (first, last)
    sep_deviation: float  # largest |[SEP] gradient ratio - 1| over every layer but the last
    sep_steady_until: int  # the last layer that sep_deviation covers (the last but one)
    sep_low: tuple[int, ...]  # layers whose [SEP] gradient ratio is below SEP_LOW
    punct_last: float  # the ". ," gradient ratio in the last layer


def sink_gradient(layers: pd.DataFrame, relative: pd.DataFrame, paper_layers: tuple[int, int],
                  claimed: tuple[int, int]) -> SinkGradientReading:
    """`layers`: `GradientResult.by_layer()` (layer, category, attention, ...); `relative`:
    `GradientResult.relative()` (layer, category, ratio, ...); `paper_layers`: BERT-base's middle layers
    (first, last, of 12); `claimed`: the layers (first, last) a sentence says the [CLS] gradient is small in."""
    share = layers.pivot(index="layer", columns="category", values="attention")
    ratio = relative.pivot(index="layer", columns="category", values="ratio")
    middle = by_depth(range(paper_layers[0], paper_layers[1] + 1), len(share))
    cls_middle, sep_middle = share.loc[middle, "cls"].mean(), share.loc[middle, "sep"].mean()
    cls_layers = tuple(int(layer) for layer in share.index[share["cls"] > CLS_HEAVY])
    cls_ratio = ratio.loc[list(cls_layers), "cls"]
    return SinkGradientReading(
        middle=tuple(middle), cls_middle=float(cls_middle), sep_middle=float(sep_middle),
        sink="[CLS]" if cls_middle > sep_middle else "[SEP]", cls_layers=cls_layers,
        cls_smaller_low=float(1 / cls_ratio.max()), cls_smaller_high=float(1 / cls_ratio.min()),
        cls_ratio_claimed=float(ratio.loc[claimed[0]:claimed[1], "cls"].max()),
        sep_deviation=float((ratio["sep"].iloc[:-1] - 1).abs().max()), sep_steady_until=int(ratio.index[-2]),
        sep_low=tuple(int(layer) for layer in ratio.index[ratio["sep"] < SEP_LOW]),
        punct_last=float(ratio["punct"].iloc[-1]))


# -- the sink's value vectors -----------------------------------------------------------------------
@dataclass(frozen=True)
class SinkValuesReading:
    """How long what [CLS] and [SEP] write is (through the output projection) against an ordinary token, in the
    sink heads (more than `gradients.SINK_HEAD` of their attention on [CLS] and [SEP]) and the other heads."""

    heads: int  # all heads
    sink_heads: int  # heads with more than SINK_HEAD of their attention on [CLS] and [SEP]
    other_heads: int  # the rest
    sink_max: float  # largest |[CLS] written| / |ordinary written| (`output_ratio`) among the sink heads; NaN if none
    sink_median: float  # its median among the sink heads
    other_median: float  # its median among the other heads
    sep_median: float  # median over all heads of |[SEP] written| / |ordinary written|
    short_heads: int  # heads whose output_ratio is below SHORT_CLS


def sink_values(norms: pd.DataFrame) -> SinkValuesReading:
    """`norms`: `gradients.value_norms` (one row per head: sink, output_sep, output_other, output_ratio, ...)."""
    sink = norms["sink"] > SINK_HEAD
    ratio = norms["output_ratio"]
    return SinkValuesReading(
        heads=len(norms), sink_heads=int(sink.sum()), other_heads=int((~sink).sum()),
        sink_max=float(ratio[sink].max()), sink_median=float(ratio[sink].median()),
        other_median=float(ratio[~sink].median()),
        sep_median=float((norms["output_sep"] / norms["output_other"]).median()),
        short_heads=int((ratio < SHORT_CLS).sum()))


# -- the causal test --------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModeContrast:
    """Matched mass, one redistribution mode, per layer: moving it away from the sinks against moving it between
    random ordinary tokens (`AblationResult.contrast`; "significantly": the paired 95 % interval)."""

    min_ratio: float  # smallest mean sink / mean random distance over the layers (NaN ratios skipped)
    max_ratio: float  # largest
    above: tuple[int, ...]  # layers where the sink edit moves the output significantly more (interval above 0)
    straddle: tuple[int, ...]  # layers where the interval contains 0
    below: tuple[int, ...]  # layers where it moves the output significantly less (interval below 0)


@dataclass(frozen=True)
class SinkAblationReading:
    """The causal test of one `AblationResult`, in one distance (cosine distances; layers 1-indexed)."""

    reference: float  # distance between two different inputs (the yardstick)
    largest_layer: int  # the layer whose "all the sink mass" edit moves the output most, in either mode
    largest_mode: str  # that edit's redistribution mode
    largest_mean: float  # its mean distance over inputs
    largest_share: float  # largest_mean / reference
    n_layers: int  # layers edited one at a time
    renormalise: ModeContrast
    uniform: ModeContrast
    head: str  # the single edited head, "layer-head"
    head_mean: float  # its mean distance after moving all its sink mass (renormalised)
    head_layer_mean: float  # the same edit on all heads of its layer
    head_ratio: float  # uniform, matched mass: the head's sink / random ratio
    head_difference: float  # and the paired difference sink - random, mean over inputs
    head_low: float  # its 95 % interval
    head_high: float


def _mode_contrast(contrast: pd.DataFrame) -> ModeContrast:
    layer = contrast[contrast["scope"] == "layer"]

    def layers(chosen: pd.Series) -> tuple[int, ...]:
        return tuple(int(n) for n in layer["layer"][chosen])

    return ModeContrast(float(layer["ratio"].min()), float(layer["ratio"].max()), layers(layer["low"] > 0),
                        layers((layer["low"] <= 0) & (layer["high"] >= 0)), layers(layer["high"] < 0))


def sink_ablation(ablation: AblationResult, distance: str = "pooled_distance") -> SinkAblationReading:
    """`ablation`: `gradients.sink_ablation` run with every layer and at least one single head (the first is
    read)."""
    summary = ablation.summary(distance)
    all_mass = summary[(summary["scope"] == "layer") & (summary["amount"] == "all")]
    largest = all_mass.loc[all_mass["mean"].idxmax()]
    one_head = summary[(summary["scope"] == "head") & (summary["amount"] == "all")
                       & (summary["mode"] == "renormalise")].iloc[0]
    its_layer = all_mass[(all_mass["layer"] == one_head["layer"]) & (all_mass["mode"] == "renormalise")].iloc[0]
    contrasts = {mode: ablation.contrast(distance, mode) for mode in ("renormalise", "uniform")}
    head_uniform = contrasts["uniform"][contrasts["uniform"]["scope"] == "head"].iloc[0]
    return SinkAblationReading(
        reference=float(ablation.reference), largest_layer=int(largest["layer"]), largest_mode=str(largest["mode"]),
        largest_mean=float(largest["mean"]), largest_share=float(largest["mean"] / ablation.reference),
        n_layers=int((contrasts["renormalise"]["scope"] == "layer").sum()),
        renormalise=_mode_contrast(contrasts["renormalise"]), uniform=_mode_contrast(contrasts["uniform"]),
        head=head_label(int(one_head["layer"]), int(one_head["head"])), head_mean=float(one_head["mean"]),
        head_layer_mean=float(its_layer["mean"]), head_ratio=float(head_uniform["ratio"]),
        head_difference=float(head_uniform["difference"]), head_low=float(head_uniform["low"]),
        head_high=float(head_uniform["high"]))
