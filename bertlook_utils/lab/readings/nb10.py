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
import torch

from ...analyses import attribution, identifiability
from ...analyses.attribution import Explanation
from ...analyses.norms import Mixing, NormResult
from ...core.conventions import head_label
from ...data.tasks import TaskData



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
class TwinReading:
    """One head on one input (`identifiability.head_values`): its map A, the valid twin with the least weight on
    [CLS] (`identifiability.null_space_twin`, column 0), and why effective attention A P drops [CLS]'s column."""

    tokens: int  # n
    head_size: int  # d, the value dimensions
    null_dimension: int  # n minus the rank of the values
    cls_weight: float  # mean over rows of A's weight on [CLS]
    twin_cls_weight: float  # the same for the twin
    movable: float  # 1 - twin_cls_weight / cls_weight: the share of that weight a valid twin can move
    largest_change: float  # largest |twin - A| over entries
    output_change: float  # largest |twin V - A V|
    cls_value_ratio: float  # |v_[CLS]| / the median |v_j| of the other tokens
    cls_leverage: float  # P[0, 0], the projector's diagonal at [CLS]
    mean_leverage: float  # the mean of P's diagonal (rank / n)
    effective_min: float  # the smallest entry of A P
    effective_row_min: float  # the smallest row sum of A P
    effective_row_max: float  # and the largest


def twin(attn: np.ndarray, twin_map: np.ndarray, values: np.ndarray) -> TwinReading:
    """attn, twin_map [n, n] (twin_map: `identifiability.null_space_twin(attn, values, 0)`); values [n, d]."""
    v = torch.from_numpy(np.asarray(values, dtype=np.float64))
    projector = identifiability.column_space_projector(v).numpy()
    effective = attn @ projector
    norms = np.linalg.norm(values, axis=1)
    return TwinReading(
        tokens=attn.shape[0], head_size=values.shape[1], null_dimension=int(identifiability.null_dimension(v)),
        cls_weight=float(attn[:, 0].mean()), twin_cls_weight=float(twin_map[:, 0].mean()),
        movable=float(1 - twin_map[:, 0].mean() / attn[:, 0].mean()),
        largest_change=float(np.abs(twin_map - attn).max()),
        output_change=float(np.abs(twin_map @ values - attn @ values).max()),
        cls_value_ratio=float(norms[0] / np.median(norms[1:])), cls_leverage=float(projector[0, 0]),
        mean_leverage=float(np.diag(projector).mean()), effective_min=float(effective.min()),
        effective_row_min=float(effective.sum(1).min()), effective_row_max=float(effective.sum(1).max()))


@dataclass(frozen=True)
class EffectiveReading:
    """What effective attention does to the sink (mean attention to [CLS] per layer) and to the best syntax head
    of each relation on every sentence (accuracies are fractions)."""

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


@dataclass(frozen=True)
class LongInputReading:
    """The syntax heads on the long sentences only (`identifiability.syntax_change`), where effective attention
    can differ from raw attention (accuracy changes are fractions)."""

    threshold: int  # the least number of tokens of a long sentence
    head_size: int  # d
    sentences: int  # every sentence
    long: int  # sentences of at least `threshold` tokens
    pinned_share: float  # share of all sentences with at most d tokens (there A P = A)
    null_median: float  # median over the long sentences of n - d (the null space's dimension at full rank)
    null_p90: float  # its 90th percentile
    relations: int
    kept: int  # relations whose best head on the long sentences is the same raw and effective
    change_min: float  # smallest effective - raw accuracy of the chosen heads
    change_max: float  # largest
    largest_change: float  # largest |effective - raw|
    shifted: tuple[str, ...]  # relations whose 95 % interval of the change excludes 0


def long_inputs(change: pd.DataFrame, tokens: np.ndarray, head_size: int, threshold: int) -> LongInputReading:
    """change: `identifiability.syntax_change` on the sentences of at least `threshold` tokens; tokens int [N]:
    every sentence's length (special tokens included)."""
    tokens = np.asarray(tokens)
    null = identifiability.null_dimension_bound(tokens[tokens >= threshold], head_size)
    shifted = change[(change["low"] > 0) | (change["high"] < 0)]
    return LongInputReading(
        threshold=threshold, head_size=head_size, sentences=len(tokens), long=int((tokens >= threshold).sum()),
        pinned_share=float((tokens <= head_size).mean()), null_median=float(np.median(null)),
        null_p90=float(np.quantile(null, 0.9)), relations=len(change), kept=int(change["kept"].sum()),
        change_min=float(change["change"].min()), change_max=float(change["change"].max()),
        largest_change=float(change["change"].abs().max()), shifted=tuple(shifted["relation"]))


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
    `attribution.residual_attention`); `outflow`: per layer, what leaves [CLS] for other positions
    (`attribution.outflow`). The word row: flow from one word token at the last layer."""

    rollout_cls: float  # mean over rows of the last layer's rollout weight on [CLS]
    last_layer_cls: float  # the same for the last layer's attention, mean of heads
    offset: tuple[float, ...]
    offset_mean: float  # the mean of offset
    offset_spread: float  # its largest minus its smallest value
    outflow: tuple[float, ...]  # per layer
    outflow_above_first: float  # its sum over layers 2 to L
    offset_gap: float  # |offset_mean - outflow_above_first|
    cls_self_middle_min: float  # [CLS]'s attention to itself (mean of heads), smallest over layers 2 to L-1
    cls_self_middle_max: float  # and largest
    cls_self_last: float  # in the last layer
    word: str  # the word token
    word_outflow_min: float  # the least that leaves it for other positions in a layer
    word_flow_min: float  # its flow into the tokens between [CLS] and the last token: smallest
    word_flow_max: float  # and largest
    word_flow_self: float  # into its own position
    word_flow_cls: float  # into [CLS]


def rollout_and_flow(attn: np.ndarray, flowed: np.ndarray, tokens: Sequence[str], word: int) -> RolloutFlowReading:
    """attn [L, H, n, n]: one input's maps; flowed [n, n]: `attribution.flow(attn)`; tokens [n]; word: the
    position of a word token."""
    offset = flowed[0, 1:-1] - attribution.residual_attention(attn)[0][0, 1:-1]
    outflow = attribution.outflow(attn)
    cls_self = attn.mean(1)[:, 0, 0]
    return RolloutFlowReading(rollout_cls=float(attribution.rollout(attn)[-1][:, 0].mean()),
                              last_layer_cls=float(attn[-1].mean(0)[:, 0].mean()),
                              offset=tuple(float(x) for x in offset), offset_mean=float(offset.mean()),
                              offset_spread=float(np.ptp(offset)), outflow=tuple(float(x) for x in outflow),
                              outflow_above_first=float(outflow[1:].sum()),
                              offset_gap=float(abs(offset.mean() - outflow[1:].sum())),
                              cls_self_middle_min=float(cls_self[1:-1].min()),
                              cls_self_middle_max=float(cls_self[1:-1].max()), cls_self_last=float(cls_self[-1]),
                              word=tokens[word], word_outflow_min=float(attribution.outflow(attn, word).min()),
                              word_flow_min=float(flowed[word, 1:-1].min()),
                              word_flow_max=float(flowed[word, 1:-1].max()),
                              word_flow_self=float(flowed[word, word]), word_flow_cls=float(flowed[word, 0]))


# -- §4 does attention explain? -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Estimate:
    """A mean over inputs with its 95 % interval: one correlation minus another (`attribution.paired_difference`,
    paired bootstrap) or the Spearman correlation of two word scores (`attribution.agreement`, t-interval)."""

    value: float
    low: float
    high: float
    inputs: int


@dataclass(frozen=True)
class AttributionReading:
    """Spearman correlations with leave-one-out (the kit's [CLS]-row test, `attribution.correlations`: mean over
    inputs, 95 % interval), Abnar & Zuidema's released reading (`attribution.released_correlations`: maximum over
    rows against |gradient|), paired differences in the last layer, gradient × input against zeroing a word's
    embeddings, and the classifier's confidence. "Raw attention" is one layer's map, mean of heads."""

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
    last_grad_x_input_low: float  # its 95 % interval
    last_grad_x_input_high: float
    flow_first_gap: float  # |last_flow - first_layer_rho|
    inputs: int  # inputs behind raw attention's last-layer correlation
    max_rho: float  # the largest correlation of any method and layer (NaN if any is NaN)
    rollout_vs_attention: Estimate  # rollout minus raw attention, last layer
    flow_vs_attention: Estimate  # flow minus raw attention, last layer
    released_attention: float  # the released reading, last layer: raw attention
    released_attention_low: float
    released_attention_high: float
    released_rollout: float  # rollout
    released_flow: float  # flow
    released_best_layer: int  # the layer whose raw attention correlates best with |gradient|
    released_rollout_vs_attention: Estimate
    released_flow_vs_attention: Estimate
    zeroed: Estimate  # gradient x input against zeroing the word's embeddings
    zeroed_loo: Estimate  # zeroing against leave-one-out
    median_confidence: float  # median over inputs of the predicted class's probability
    median_largest_change: float  # median over inputs of the largest |leave-one-out| (probability)


def attribution_test(correlations: pd.DataFrame, released: pd.DataFrame, explained: Sequence[Explanation],
                     seed: int = 0) -> AttributionReading:
    """correlations: `attribution.correlations(explained)`; released: `attribution.released_correlations(explained)`;
    explained: `attribution.explanations`; seed: the paired bootstraps'."""
    n_layers = int(correlations["layer"].max())
    last = correlations[correlations["layer"] == n_layers].set_index("method")
    raw = correlations[correlations["method"] == "attention"].set_index("layer")
    best = raw["spearman"].idxmax()
    released_last = released[released["layer"] == n_layers].set_index("method")
    released_raw = released[released["method"] == "attention"].set_index("layer")["spearman"]

    def paired(frame: pd.DataFrame, method: str) -> Estimate:
        return Estimate(*attribution.paired_difference(frame, (method, n_layers), ("attention", n_layers), seed=seed))

    kit, theirs = attribution.per_input(explained), attribution.released_per_input(explained)
    return AttributionReading(
        best_layer=int(best), best_rho=float(raw.loc[best, "spearman"]), best_low=float(raw.loc[best, "low"]),
        best_high=float(raw.loc[best, "high"]), first_layer_rho=float(raw.loc[1, "spearman"]),
        last_attention=float(last.loc["attention", "spearman"]), last_attention_low=float(last.loc["attention", "low"]),
        last_attention_high=float(last.loc["attention", "high"]), last_rollout=float(last.loc["rollout", "spearman"]),
        last_flow=float(last.loc["flow", "spearman"]), last_grad_x_input=float(last.loc["grad_x_input", "spearman"]),
        last_grad_x_input_low=float(last.loc["grad_x_input", "low"]),
        last_grad_x_input_high=float(last.loc["grad_x_input", "high"]),
        flow_first_gap=float(abs(last.loc["flow", "spearman"] - raw.loc[1, "spearman"])),
        inputs=int(last.loc["attention", "inputs"]), max_rho=float(correlations["spearman"].max(skipna=False)),
        rollout_vs_attention=paired(kit, "rollout"), flow_vs_attention=paired(kit, "flow"),
        released_attention=float(released_last.loc["attention", "spearman"]),
        released_attention_low=float(released_last.loc["attention", "low"]),
        released_attention_high=float(released_last.loc["attention", "high"]),
        released_rollout=float(released_last.loc["rollout", "spearman"]),
        released_flow=float(released_last.loc["flow", "spearman"]), released_best_layer=int(released_raw.idxmax()),
        released_rollout_vs_attention=paired(theirs, "rollout"), released_flow_vs_attention=paired(theirs, "flow"),
        zeroed=Estimate(*attribution.agreement(explained, "grad_x_input", "zeroed")),
        zeroed_loo=Estimate(*attribution.agreement(explained, "zeroed", "leave_one_out")),
        median_confidence=float(np.median([e.probability for e in explained])),
        median_largest_change=float(np.median([np.abs(e.scores["leave_one_out"]).max() for e in explained])))


# -- §5 head importance and pruning ------------------------------------------------------------------------
def _random(frame: pd.DataFrame) -> pd.Series:
    return frame["order"].str.startswith("random")


def at_shares(frame: pd.DataFrame, shares: Sequence[float] | None = None) -> pd.DataFrame:
    """Accuracy at the shares removed (None: every share of the frame): least important first (normalised per
    layer, and raw when the frame has it), and the random orders' mean and 5 % / 95 % quantiles (low, high).
    frame: `importance.pruning_curves(...).frame` (order, share, heads, accuracy); one row per share (index)."""
    if shares is not None:
        frame = frame[frame["share"].round(6).isin(shares)]
    random = frame[_random(frame)].groupby("share")["accuracy"]
    table = {"importance": frame[frame["order"] == "importance"].set_index("share")["accuracy"]}
    if (frame["order"] == "raw importance").any():
        table["raw importance"] = frame[frame["order"] == "raw importance"].set_index("share")["accuracy"]
    return pd.DataFrame({**table, "random mean": random.mean(), "random low": random.quantile(0.05),
                         "random high": random.quantile(0.95)})


@dataclass(frozen=True)
class HalfPruned:
    """One task with half of the heads removed (accuracy on the evaluation half)."""

    task: str
    start: float  # nothing removed
    importance: float  # least important first, importance normalised per layer
    raw: float  # least important first, raw importance
    random_mean: float  # mean over the random orders
    random_low: float  # their 5 % quantile
    random_high: float  # their 95 % quantile


@dataclass(frozen=True)
class CurveArea:
    """One task's areas under the accuracy-vs-share curve (`importance.curve_areas`: a mean accuracy over the
    shares), each importance order minus the random orders' mean, with a 95 % bootstrap interval over inputs."""

    task: str
    inputs: int  # evaluation inputs
    area: float  # normalised importance
    raw_area: float  # raw importance
    random_area: float  # mean of the random orders
    difference: float  # area - random_area
    low: float
    high: float
    raw_difference: float  # raw_area - random_area
    raw_low: float
    raw_high: float


@dataclass(frozen=True)
class BelowRandom:
    """A share (strictly between none and all) at which the normalised importance order scores below the random
    orders' mean."""

    task: str
    share: float
    importance: float
    random_mean: float


@dataclass(frozen=True)
class VerticalRemoval:
    """One task with every head whose dominant pattern is vertical removed, beside random sets with as many heads
    in each layer, and with only those heads' [CLS] column removed (renormalised)."""

    task: str
    heads: int  # the vertical heads
    accuracy: float  # accuracy without them
    random_mean: float  # mean accuracy of the random sets
    random_low: float  # their 5 % quantile
    random_high: float  # their 95 % quantile
    p: float  # permutation p: (1 + sets at or below accuracy) / (1 + sets)
    sets: int  # random sets
    cls_drained: float  # accuracy with only their [CLS] column removed
    full_layers: int  # layers whose every head is vertical: there every matched set removes the same heads
    start: float  # nothing removed


@dataclass(frozen=True)
class PruningReading:
    """Michel et al.'s pruning (at half of the heads, and the areas under the curves), the random orders' loss
    (Budhraja et al.'s baseline) and the removal of the vertical heads, per task (in the order of `curves`)."""

    half: tuple[HalfPruned, ...]
    areas: tuple[CurveArea, ...]
    below_random: tuple[BelowRandom, ...]  # every such point, over tasks
    orders: int  # random orders per task (the smallest over tasks)
    largest_loss: float  # largest start - importance at half over tasks, 0 when no task loses
    least_lead: float  # smallest importance - random_mean at half over tasks
    least_area_low: float  # smallest lower end of the normalised order's area difference over tasks
    raw_least_area_low: float  # the same for the raw order
    normalised_minus_raw: float  # smallest area - raw_area over tasks (> 0: normalising helps on every task)
    random_drop_task: str  # the task whose random orders lose most at half
    random_drop: float  # its start - random_mean at half
    vertical: tuple[VerticalRemoval, ...]
    vertical_sets: int  # random sets behind the vertical heads' p (the smallest over tasks)
    smallest_p: float  # smallest permutation p of the vertical heads over tasks
    removal_loss_min: float  # smallest start - accuracy without the vertical heads over tasks
    drain_loss_min: float  # smallest start - cls_drained over tasks (negative: a gain)
    drain_loss_max: float  # largest start - cls_drained over tasks
    two_class_min: float  # lowest accuracy without the vertical heads among two-class tasks (NaN if none)
    two_class_max: float  # highest (NaN if none)

    # -- the lists the prose writes, per task in order -------------------------------------------------
    @property
    def half_importance(self) -> str:
        """Accuracy at half the heads, least important first: "0.85 on topic, 0.80 on sentiment"."""
        return ", ".join(f"{h.importance:.2f} on {h.task}" for h in self.half)

    @property
    def half_start(self) -> str:
        """Accuracy with nothing removed: "0.88, 0.84"."""
        return ", ".join(f"{h.start:.2f}" for h in self.half)

    @property
    def half_raw(self) -> str:
        """Accuracy at half the heads by raw importance: "0.83, 0.79"."""
        return ", ".join(f"{h.raw:.2f}" for h in self.half)

    @property
    def half_random(self) -> str:
        """The random orders at half the heads, mean (5-95 %): "0.61 (0.45–0.80), ..."."""
        return ", ".join(f"{h.random_mean:.2f} ({h.random_low:.2f}–{h.random_high:.2f})" for h in self.half)

    @property
    def area_leads(self) -> str:
        """The normalised order's area minus the random orders', with its interval: "+0.120 [+0.090, +0.150] on
        topic, ..."."""
        return ", ".join(f"{a.difference:+.3f} [{a.low:+.3f}, {a.high:+.3f}] on {a.task}" for a in self.areas)

    @property
    def raw_area_leads(self) -> str:
        """The same for the raw order, without the tasks: "+0.110 [+0.080, +0.140], ..."."""
        return ", ".join(f"{a.raw_difference:+.3f} [{a.raw_low:+.3f}, {a.raw_high:+.3f}]" for a in self.areas)

    @property
    def area_inputs(self) -> str:
        """The evaluation inputs per task: "96, 96"."""
        return ", ".join(str(a.inputs) for a in self.areas)

    @property
    def areas_against_raw(self) -> str:
        """The normalised order's area against the raw one's: "0.80 against 0.79 raw on topic, ..."."""
        return ", ".join(f"{a.area:.2f} against {a.raw_area:.2f} raw on {a.task}" for a in self.areas)

    @property
    def below_random_sentence(self) -> str:
        """Every share at which the importance order scores below the random mean, as a sentence."""
        if not self.below_random:
            return "No share between none and all scores below the random mean."
        points = "; ".join(f"{b.task} with {b.share:.0%} removed scores {b.importance:.2f} by importance against "
                           f"{b.random_mean:.2f}" for b in self.below_random)
        return f"Single points can still fall below the random mean: {points}."

    @property
    def vertical_heads(self) -> str:
        """The vertical heads per task: "12 on topic, 9 on sentiment"."""
        return ", ".join(f"{v.heads} on {v.task}" for v in self.vertical)

    @property
    def vertical_drops(self) -> str:
        """Accuracy before and without the vertical heads: "topic from 0.88 to 0.40, ..."."""
        return ", ".join(f"{v.task} from {v.start:.2f} to {v.accuracy:.2f}" for v in self.vertical)

    @property
    def vertical_random(self) -> str:
        """The layer-matched random sets: "0.42 (0.30–0.55, p = 0.40 over 50 sets) on topic, ..."."""
        return ", ".join(f"{v.random_mean:.2f} ({v.random_low:.2f}–{v.random_high:.2f}, p = {v.p:.2f} over {v.sets} "
                         f"sets) on {v.task}" for v in self.vertical)

    @property
    def full_layers_sentence(self) -> str:
        """Where the vertical heads fill whole layers (so the matched sets cannot separate them), as a sentence;
        "" where they fill none."""
        filled = [v for v in self.vertical if v.full_layers]
        if not filled:
            return ""
        where = " and ".join(f"{v.task} ({v.full_layers} whole layer{'s' if v.full_layers > 1 else ''})"
                             for v in filled)
        return (f"On {where} the vertical heads fill every head of a layer, so every matched set removes that layer "
                "too and lands where they do: there the comparison cannot separate them.")

    @property
    def cls_drained_text(self) -> str:
        """Accuracy with only the vertical heads' [CLS] column drained: "0.87 on topic (nothing removed: 0.88),
        ..."."""
        return ", ".join(f"{v.cls_drained:.2f} on {v.task} (nothing removed: {v.start:.2f})" for v in self.vertical)


def pruning(curves: Mapping[str, pd.DataFrame], areas: Mapping[str, pd.DataFrame], removal: Mapping[str, pd.DataFrame],
            tasks: Mapping[str, TaskData]) -> PruningReading:
    """curves: task -> `importance.pruning_curves(...).frame` (with share 0.5, both importance orders and at
    least one random order); areas: task -> `importance.curve_areas`; removal: task -> `importance.pattern_removal`
    (with a "vertical" row whose [CLS] column was drained); tasks: task -> its data (for the number of labels)."""
    half, area_rows, below = [], [], []
    for task, frame in curves.items():
        row = at_shares(frame, (0.5,)).iloc[0]
        half.append(HalfPruned(task, float(frame.query("heads == 0")["accuracy"].iloc[0]), float(row["importance"]),
                               float(row["raw importance"]), float(row["random mean"]), float(row["random low"]),
                               float(row["random high"])))
        table = at_shares(frame)
        inner = table[(table.index > 0) & (table.index < 1) & (table["importance"] < table["random mean"])]
        below += [BelowRandom(task, float(share), float(r["importance"]), float(r["random mean"]))
                  for share, r in inner.iterrows()]
        by_order = areas[task].set_index("order")
        norm, raw = by_order.loc["importance"], by_order.loc["raw importance"]
        area_rows.append(CurveArea(task, int(norm["inputs"]), float(norm["area"]), float(raw["area"]),
                                   float(norm["random"]), float(norm["difference"]), float(norm["low"]),
                                   float(norm["high"]), float(raw["difference"]), float(raw["low"]),
                                   float(raw["high"])))
    vertical = []
    for task, frame in removal.items():
        row = frame.set_index("kind").loc["vertical"]
        vertical.append(VerticalRemoval(task, int(row["heads"]), float(row["accuracy"]), float(row["random"]),
                                        float(row["random low"]), float(row["random high"]), float(row["p"]),
                                        int(row["sets"]), float(row["cls drained"]), int(row["full layers"]),
                                        float(row["none"])))
    two_class = [v.accuracy for v in vertical if len(tasks[v.task].labels) == 2]
    drop = max(half, key=lambda h: h.start - h.random_mean)
    return PruningReading(
        half=tuple(half), areas=tuple(area_rows), below_random=tuple(below),
        orders=min(int(frame.loc[_random(frame), "order"].nunique()) for frame in curves.values()),
        largest_loss=max(0.0, *(h.start - h.importance for h in half)),
        least_lead=min(h.importance - h.random_mean for h in half),
        least_area_low=min(a.low for a in area_rows), raw_least_area_low=min(a.raw_low for a in area_rows),
        normalised_minus_raw=min(a.area - a.raw_area for a in area_rows),
        random_drop_task=drop.task, random_drop=drop.start - drop.random_mean, vertical=tuple(vertical),
        vertical_sets=min(v.sets for v in vertical), smallest_p=min(v.p for v in vertical),
        removal_loss_min=min(v.start - v.accuracy for v in vertical),
        drain_loss_min=min(v.start - v.cls_drained for v in vertical),
        drain_loss_max=max(v.start - v.cls_drained for v in vertical),
        two_class_min=min(two_class, default=float("nan")), two_class_max=max(two_class, default=float("nan")))
