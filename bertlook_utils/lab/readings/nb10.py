"""Notebook 10 (beyond attention weights: norms, effective attention, rollout and flow, attribution, head
importance): the numbers its prose and checks use.

They are read from the norm shares (`norms.NormResult`), the raw and effective sinks and syntax heads, flow's timing
and one sentence's rollout and flow (`attribution`), the attribution correlations (`attribution.correlations`) and
the pruning and pattern-removal runs (`importance`). Shares, accuracies and weights are fractions; layers are
1-indexed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from ...analyses import attribution
from ...analyses.attribution import Explanation
from ...analyses.norms import Mixing, NormResult
from ...core.conventions import head_label
from ...data.tasks import TaskData

SHARES = (0.0, 0.3, 0.5, 0.7, 0.9)  # the shares of heads removed that the pruning table shows


# -- §1 attention by weight and by norm ------------------------------------------------------------------
@dataclass(frozen=True)
class NormReading:
    """Where a row's contribution goes by weight and by norm (`NormResult.by_layer`: mean share per layer), the
    head that puts most weight on [CLS] and [SEP] (`by_head`), and the context-mixing ratio (`mixing`: the mean
    share of a token's update that comes from the other tokens, per layer)."""

    middle: tuple[int, ...]  # every layer but the first and the last
    cls_weight_min: float  # [CLS]'s share by weight, smallest over the middle layers
    cls_weight_max: float  # and largest
    cls_norm_min: float  # [CLS]'s share by norm, smallest over the middle layers
    cls_norm_max: float  # and largest
    cls_shrink_min: float  # smallest (by weight / by norm) of [CLS]'s share over the middle layers ("n times less")
    other_norm_min: float  # ordinary tokens' share by norm, smallest over the middle layers
    other_norm_max: float  # and largest
    norm_not_other: tuple[int, ...]  # layers whose largest share by norm is not the ordinary tokens'
    sink_head: str  # the head with the largest weight on [CLS] and [SEP], "layer-head"
    sink_weight: float  # its share of weight on [CLS] and [SEP]
    sink_norm: float  # its share by norm
    mixing_min: float  # context-mixing ratio with residual and LayerNorm, smallest over all layers
    mixing_max: float  # and largest
    mixing_weight_min: float  # the same ratio by weight alone, smallest over all layers
    mixing_weight_max: float  # and largest


def weight_and_norm(result: NormResult) -> NormReading:
    """result: `norms.norm_shares` (at least three layers)."""
    wide = result.by_layer().unstack("category")
    middle = list(wide.index[1:-1])
    cls_weight, cls_norm = wide[("by weight", "cls")][middle], wide[("by norm", "cls")][middle]
    other_norm = wide[("by norm", "other")][middle]
    top = result.by_head(("cls", "sep")).sort_values("weight", ascending=False).iloc[0]
    mixing = result.mixing()
    full, weight = mixing[Mixing.LAYERNORM], mixing[Mixing.WEIGHT]
    return NormReading(
        middle=tuple(int(layer) for layer in middle), cls_weight_min=float(cls_weight.min()),
        cls_weight_max=float(cls_weight.max()), cls_norm_min=float(cls_norm.min()),
        cls_norm_max=float(cls_norm.max()), cls_shrink_min=float((cls_weight / cls_norm).min()),
        other_norm_min=float(other_norm.min()), other_norm_max=float(other_norm.max()),
        norm_not_other=tuple(int(layer) for layer in wide.index[wide["by norm"].idxmax(axis=1) != "other"]),
        sink_head=head_label(int(top["layer"]), int(top["head"])), sink_weight=float(top["weight"]),
        sink_norm=float(top["norm"]), mixing_min=float(full.min()), mixing_max=float(full.max()),
        mixing_weight_min=float(weight.min()), mixing_weight_max=float(weight.max()))


# -- §2 effective attention ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class EffectiveReading:
    """What effective attention does to the sink (mean attention to [CLS] per layer) and to the best syntax head
    of each relation (accuracies are fractions)."""

    cls_raw_max: float  # the largest layer mean of raw attention to [CLS]
    cls_effective_max: float  # the same with effective attention
    relations: int  # relations scored ("all" included)
    kept: int  # relations whose best head (layer, head and direction) is the same with effective attention
    accuracy_change_max: float  # largest |effective - raw| accuracy of a relation's best head


def effective_attention(sinks: pd.DataFrame, heads: pd.DataFrame) -> EffectiveReading:
    """sinks: per layer, ("raw" | "effective", "cls" | ...) mean attention; heads: per relation, ("raw" |
    "effective", "layer" | "head" | "direction" | "accuracy"), as two `syntax.head_accuracy` frames side by side."""
    best = ["layer", "head", "direction"]
    same = (heads["raw"][best] == heads["effective"][best]).all(axis=1)
    change = (heads[("effective", "accuracy")] - heads[("raw", "accuracy")]).abs()
    return EffectiveReading(cls_raw_max=float(sinks[("raw", "cls")].max()),
                            cls_effective_max=float(sinks[("effective", "cls")].max()), relations=len(heads),
                            kept=int(same.sum()), accuracy_change_max=float(change.max()))


# -- §3 rollout and flow -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FlowCost:
    """Seconds flow took for all n² pairs (`attribution.flow_seconds`)."""

    at_limit: float  # at the longest input flow is used on
    longest: int  # the longest input timed (tokens)
    at_longest: float  # at that length


def flow_cost(timing: pd.DataFrame, limit: int) -> FlowCost:
    """timing: `attribution.flow_seconds` (tokens, seconds); limit: the longest input flow is used on (timed)."""
    seconds = timing.set_index("tokens")["seconds"]
    return FlowCost(at_limit=float(seconds[limit]), longest=int(seconds.index.max()),
                    at_longest=float(seconds[seconds.index.max()]))


@dataclass(frozen=True)
class RolloutFlowReading:
    """One input's rollout and flow against attention (weights are fractions of a row). `offset`: per token
    between [CLS] and the last token, the flow from [CLS] minus [CLS]'s first-layer weight (residual included,
    `attribution.residual_attention`)."""

    rollout_cls: float  # mean over rows of the last layer's rollout weight on [CLS]
    last_layer_cls: float  # the same for the last layer's attention, mean of heads
    offset: tuple[float, ...]
    offset_mean: float  # the mean of offset
    offset_spread: float  # its largest minus its smallest value


def rollout_and_flow(attn: np.ndarray, flowed: np.ndarray) -> RolloutFlowReading:
    """attn [L, H, n, n]: one input's maps; flowed [n, n]: `attribution.flow(attn)`."""
    offset = flowed[0, 1:-1] - attribution.residual_attention(attn)[0][0, 1:-1]
    return RolloutFlowReading(rollout_cls=float(attribution.rollout(attn)[-1][:, 0].mean()),
                              last_layer_cls=float(attn[-1].mean(0)[:, 0].mean()),
                              offset=tuple(float(x) for x in offset), offset_mean=float(offset.mean()),
                              offset_spread=float(np.ptp(offset)))


# -- §4 does attention explain? -------------------------------------------------------------------------------
@dataclass(frozen=True)
class AttributionReading:
    """Spearman correlations with leave-one-out (`attribution.correlations`: mean over inputs, 95 % interval) and
    the classifier's confidence. "Raw attention" is the [CLS] row of one layer, mean of heads."""

    best_layer: int  # the layer whose raw attention correlates best
    best_rho: float  # its correlation
    best_low: float  # its 95 % interval
    best_high: float
    first_layer_rho: float  # raw attention's correlation in layer 1
    last_attention: float  # raw attention's correlation in the last layer
    last_attention_low: float  # its 95 % interval
    last_attention_high: float
    last_rollout: float  # rollout's in the last layer
    last_flow: float  # flow's (the whole model)
    last_grad_x_input: float  # gradient x input's
    flow_first_gap: float  # |last_flow - first_layer_rho|
    inputs: int  # inputs behind raw attention's last-layer correlation
    max_rho: float  # the largest correlation of any method and layer (NaN if any is NaN)
    median_confidence: float  # median over inputs of the predicted class's probability
    median_largest_change: float  # median over inputs of the largest |leave-one-out| (probability)


def attribution_test(correlations: pd.DataFrame, explained: Sequence[Explanation]) -> AttributionReading:
    """correlations: `attribution.correlations(explained)`; explained: `attribution.explanations`."""
    last = correlations[correlations["layer"] == correlations["layer"].max()].set_index("method")
    raw = correlations[correlations["method"] == "attention"].set_index("layer")
    best = raw["spearman"].idxmax()
    return AttributionReading(
        best_layer=int(best), best_rho=float(raw.loc[best, "spearman"]), best_low=float(raw.loc[best, "low"]),
        best_high=float(raw.loc[best, "high"]), first_layer_rho=float(raw.loc[1, "spearman"]),
        last_attention=float(last.loc["attention", "spearman"]), last_attention_low=float(last.loc["attention", "low"]),
        last_attention_high=float(last.loc["attention", "high"]), last_rollout=float(last.loc["rollout", "spearman"]),
        last_flow=float(last.loc["flow", "spearman"]), last_grad_x_input=float(last.loc["grad_x_input", "spearman"]),
        flow_first_gap=float(abs(last.loc["flow", "spearman"] - raw.loc[1, "spearman"])),
        inputs=int(last.loc["attention", "inputs"]), max_rho=float(correlations["spearman"].max(skipna=False)),
        median_confidence=float(np.median([e.probability for e in explained])),
        median_largest_change=float(np.median([np.abs(e.scores["leave_one_out"]).max() for e in explained])))


# -- §5 head importance and pruning ------------------------------------------------------------------------
def at_shares(frame: pd.DataFrame, shares: Sequence[float] = SHARES) -> pd.DataFrame:
    """Accuracy at a few shares removed: least important first, and the random orders' mean, lowest and highest.
    frame: `importance.pruning_curves` (order, share, heads, accuracy); one row per share (index)."""
    frame = frame[frame["share"].round(6).isin(shares)]
    random = frame[frame["order"] != "importance"].groupby("share")["accuracy"]
    chosen = frame[frame["order"] == "importance"].set_index("share")["accuracy"]
    return pd.DataFrame({"importance": chosen, "random mean": random.mean(), "random low": random.min(),
                         "random high": random.max()})


@dataclass(frozen=True)
class HalfPruned:
    """One task with half of the heads removed (accuracy on the evaluation half)."""

    task: str
    start: float  # nothing removed
    importance: float  # least important first
    random_mean: float  # mean over the random orders


@dataclass(frozen=True)
class VerticalRemoval:
    """One task with every head whose dominant pattern is vertical removed, beside random sets of as many heads."""

    task: str
    heads: int  # the vertical heads
    accuracy: float  # accuracy without them
    random_low: float  # lowest accuracy of the random sets
    random_high: float  # highest


@dataclass(frozen=True)
class PruningReading:
    """Michel et al.'s pruning at half of the heads and the removal of the vertical heads, per task (in the order of
    `curves` and `removal`)."""

    half: tuple[HalfPruned, ...]
    largest_loss: float  # largest start - importance over tasks, 0 when no task loses
    least_lead: float  # smallest importance - random_mean over tasks (> 0: importance beats random everywhere)
    vertical: tuple[VerticalRemoval, ...]
    vertical_excess: float  # largest accuracy - random_low over tasks (<= 0: as harmful as the worst random set)
    two_class_min: float  # lowest accuracy without the vertical heads among two-class tasks (NaN if none)
    two_class_max: float  # highest (NaN if none)


def pruning(curves: Mapping[str, pd.DataFrame], removal: Mapping[str, pd.DataFrame],
            tasks: Mapping[str, TaskData]) -> PruningReading:
    """curves: task -> `importance.pruning_curves` (with share 0.5 and at least one random order); removal: task
    -> `importance.pattern_removal` (with a "vertical" row); tasks: task -> its data (for the number of labels)."""
    half = []
    for task, frame in curves.items():
        row = at_shares(frame, (0.5,)).iloc[0]
        half.append(HalfPruned(task, float(frame.query("heads == 0")["accuracy"].iloc[0]), float(row["importance"]),
                               float(row["random mean"])))
    vertical = []
    for task, frame in removal.items():
        row = frame.set_index("kind").loc["vertical"]
        vertical.append(VerticalRemoval(task, int(row["heads"]), float(row["accuracy"]), float(row["random low"]),
                                        float(row["random high"])))
    two_class = [v.accuracy for v in vertical if len(tasks[v.task].labels) == 2]
    return PruningReading(
        half=tuple(half), largest_loss=max(0.0, *(h.start - h.importance for h in half)),
        least_lead=min(h.importance - h.random_mean for h in half), vertical=tuple(vertical),
        vertical_excess=max(v.accuracy - v.random_low for v in vertical),
        two_class_min=min(two_class, default=float("nan")), two_class_max=max(two_class, default=float("nan")))
