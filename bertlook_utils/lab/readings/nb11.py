"""Notebook 11 (from no-op to attention sinks): the numbers its prose and checks use.

They are read from the sink metric by token category (`position.SinkProfile`), the key-bias and no-op tables per
head (`heads.SinkHeads`), the massive activations and the interventions (`massive`), the outlier LayerNorm
dimensions, the position-or-content and register frames (`position`) and the toy's runs (`toy.train_variants`).
Shares, weights and correlations are fractions; layers and heads are 1-indexed (hidden state 0: the embeddings).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from ...analyses.sinks import EPS
from ...analyses.sinks.heads import SinkHeads
from ...analyses.sinks.toy import ALPHA
from ...analyses.sinks.massive import ABSOLUTE, RELATIVE, Intervention, LayerNormOutliers, MassiveActivations
from ...core.conventions import head_label
from .words import findings_table

LEARNED = 0.9  # a toy run "learned the task" when its query accuracy is at least this


def _listed(values: Sequence) -> str:
    """"1", "1 and 2", "1, 2 and 3"; "none" for no values."""
    words = [str(v) for v in values]
    if not words:
        return "none"
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


# -- §1 the sink metric ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ProfileReading:
    """Gu et al.'s sink rate per layer and token category (`SinkProfile.table`) and the first token's rate over
    all heads along eps (`SinkProfile.curve`)."""

    eps: float
    layers: int
    middle: tuple[int, ...]  # every layer but the first and the last
    cls_rates: tuple[float, ...]  # [CLS]'s sink rate per layer
    cls_rates_text: str  # the same, "0.00, 0.47, ..." for the prose
    cls_rate_max: float
    cls_rate_max_layer: int
    cls_rate_middle_min: float  # smallest over the middle layers
    cls_rate_first: float  # in the first layer
    cls_rate_last: float  # in the last layer
    cls_score_middle_min: float  # [CLS]'s mean sink score (attention received, mean over heads), middle layers
    cls_score_middle_max: float
    sep_rate_max: float  # the largest sink rate of any separator in any layer
    punct_rate_max: float  # of ". ,"
    other_rate_max: float  # of an ordinary token
    sep_score_max: float  # the largest mean sink score of a separator in any layer
    curve_at_eps: float  # the first token's rate over all heads at eps
    curve_smallest_eps: float  # the smallest eps of the grid
    curve_at_smallest: float  # the rate there
    eps_zero: float  # the smallest eps of the grid at which the rate is 0 (NaN if none)


def profile(table: pd.DataFrame, curve: pd.DataFrame, eps: float = EPS) -> ProfileReading:
    """table: `SinkProfile.table()` (layer, category, sink_rate, sink_score, ...; at least three layers);
    curve: `SinkProfile.curve()` (eps, sink_rate)."""
    layers = sorted(int(x) for x in table["layer"].unique())
    middle = layers[1:-1]
    category = table["category"].astype(str)
    cls = table[category == "cls"].set_index("layer").sort_index()
    rates = cls["sink_rate"].reindex(layers).to_numpy(dtype=float)
    seps = table[category.str.startswith("sep")]

    def top(frame: pd.DataFrame, column: str) -> float:
        return float(frame[column].max()) if len(frame) else 0.0

    curve = curve.sort_values("eps")
    at = curve[np.isclose(curve["eps"], eps)]
    zero = curve[curve["sink_rate"] <= 0]
    return ProfileReading(
        eps=float(eps), layers=len(layers), middle=tuple(middle), cls_rates=tuple(float(r) for r in rates),
        cls_rates_text=", ".join(f"{r:.2f}" for r in rates), cls_rate_max=float(rates.max()),
        cls_rate_max_layer=int(layers[int(rates.argmax())]),
        cls_rate_middle_min=float(cls.loc[middle, "sink_rate"].min()), cls_rate_first=float(rates[0]),
        cls_rate_last=float(rates[-1]), cls_score_middle_min=float(cls.loc[middle, "sink_score"].min()),
        cls_score_middle_max=float(cls.loc[middle, "sink_score"].max()), sep_rate_max=top(seps, "sink_rate"),
        punct_rate_max=top(table[category == "punct"], "sink_rate"),
        other_rate_max=top(table[category == "other"], "sink_rate"), sep_score_max=top(seps, "sink_score"),
        curve_at_eps=float(at["sink_rate"].iloc[0]) if len(at) else float("nan"),
        curve_smallest_eps=float(curve["eps"].iloc[0]), curve_at_smallest=float(curve["sink_rate"].iloc[0]),
        eps_zero=float(zero["eps"].iloc[0]) if len(zero) else float("nan"))


# -- §2 the key-bias reading -------------------------------------------------------------------------------
@dataclass(frozen=True)
class KeyBiasReading:
    """Per head (`SinkHeads.key_bias`): why the sink key draws the attention. A sink head: mean sink mass above
    eps. Correlations are Spearman's over heads of the means over inputs (`SinkHeads.rank_correlation`), with a
    bootstrap interval over inputs (`rank_interval`)."""

    heads: int
    sink_heads: int
    eps: float
    rho_margin: float  # sink mass against the logit margin
    rho_margin_low: float
    rho_margin_high: float
    rho_direction: float  # sink mass against the margin's direction part
    rho_key_ratio: float  # sink mass against the sink key's length ratio
    key_ratio_median: float  # the sink heads' median |k_sink| / median |k_other|
    shorter_share: float  # share of the sink heads whose sink key is shorter than the others' median
    cos_sink_median: float  # the sink heads' median mean cosine of a query with the sink key
    cos_other_median: float  # and with the other keys
    direction_median: float  # the sink heads' median margin_direction
    length_median: float  # and margin_length
    direction_share_median: float  # the sink heads' median margin_direction / margin


def key_bias(heads: SinkHeads, eps: float = EPS, n_boot: int = 1000, seed: int = 0) -> KeyBiasReading:
    """heads: `heads.sink_heads` (its key_bias table and rank correlations)."""
    table = heads.key_bias()
    sinks = table[table["sink_mass"] > eps]
    low, high = heads.rank_interval("margin", "sink_mass", n_boot=n_boot, seed=seed)

    def median(column: str) -> float:
        return float(sinks[column].median()) if len(sinks) else float("nan")

    return KeyBiasReading(
        heads=len(table), sink_heads=len(sinks), eps=float(eps),
        rho_margin=heads.rank_correlation("margin", "sink_mass"), rho_margin_low=low, rho_margin_high=high,
        rho_direction=heads.rank_correlation("margin_direction", "sink_mass"),
        rho_key_ratio=heads.rank_correlation("key_ratio", "sink_mass"), key_ratio_median=median("key_ratio"),
        shorter_share=float((sinks["key_ratio"] < 1).mean()) if len(sinks) else float("nan"),
        cos_sink_median=median("cos_sink"), cos_other_median=median("cos_other"),
        direction_median=median("margin_direction"), length_median=median("margin_length"),
        direction_share_median=median("direction_share"))


# -- §3 massive activations --------------------------------------------------------------------------------
@dataclass(frozen=True)
class MassiveReading:
    """Sun et al.'s measure per hidden state (`MassiveActivations.by_layer`; 0 = the embeddings)."""

    states: int  # hidden states measured (the embeddings and every layer's output)
    ratio_max: float  # the largest mean max/median ratio over hidden states
    ratio_max_low: float  # its 95 % interval over inputs
    ratio_max_high: float
    ratio_max_state: int  # where
    ratio_min: float  # the smallest mean ratio over hidden states
    largest: float  # the largest mean maximum magnitude over hidden states
    above_absolute: float  # values above Sun et al.'s absolute threshold, summed over states (mean per input)
    massive: float  # values meeting both of their criteria, summed over states (mean per input)
    absolute: float  # their absolute threshold
    relative: float  # their relative factor
    top_kind: str  # the (kind, dimension) most often carrying an input's largest value, over all states
    top_dimension: int
    top_states: int  # in how many hidden states it is the most frequent carrier
    top_share_min: float  # the smallest share of inputs where it carries the largest value, over those states
    appearance: int  # `appearance_layer`: the first state where it carries the largest value in half the inputs


def massive(result: MassiveActivations) -> MassiveReading:
    """result: `massive.massive_activations`."""
    table = result.by_layer()
    best = table.loc[table["ratio"].idxmax()]
    pairs = table.groupby(["top_kind", "top_dimension"]).size().sort_values(ascending=False)
    kind, dimension = pairs.index[0]
    carried = table[(table["top_kind"] == kind) & (table["top_dimension"] == dimension)]
    return MassiveReading(
        states=len(table), ratio_max=float(best["ratio"]), ratio_max_low=float(best["ratio_low"]),
        ratio_max_high=float(best["ratio_high"]), ratio_max_state=int(best["layer"]),
        ratio_min=float(table["ratio"].min()), largest=float(table["maximum"].max()),
        above_absolute=float(table["above_absolute"].sum()), massive=float(table["massive"].sum()),
        absolute=ABSOLUTE, relative=RELATIVE, top_kind=str(kind), top_dimension=int(dimension),
        top_states=len(carried), top_share_min=float(carried["top_share"].min()),
        appearance=int(result.appearance_layer()))


@dataclass(frozen=True)
class SitesReading:
    """Where the massive value lives (`massive_activations` at "pre_norm", "ffn" and "output"), read at the state
    with the largest value before the LayerNorm. Shares are of inputs; values are means over inputs."""

    state: int  # the state (layer) with the largest value before the LayerNorm
    kind: str  # the (kind, dimension) carrying it most often there
    dimension: int
    value: float  # the largest |x| before the LayerNorm there
    ratio: float  # its ratio to the median, with a 95 % interval over inputs
    ratio_low: float
    ratio_high: float
    above: float  # share of inputs with a value above Sun et al.'s absolute threshold there
    both: float  # share of inputs with a value meeting both of their criteria there
    ffn_value: float  # the same for the feed-forward block's output at that layer
    ffn_ratio: float
    ffn_ratio_low: float
    ffn_ratio_high: float
    ffn_above: float
    ffn_both: float
    ffn_share: float  # the feed-forward output's part of the sum at the carrier (mean over inputs where both agree)
    after: float  # the largest |h| after the LayerNorm there
    cap: float  # what that LayerNorm can output at most (`layernorm_cap`)
    after_largest: float  # the largest |h| after a LayerNorm anywhere
    cap_min: float  # the smallest cap over states
    carried: tuple[int, ...]  # states where (kind, dimension) carries the largest value before the LayerNorm
    last_kind: str  # the carrier in the last state
    last_dimension: int


def sites(pre_norm: MassiveActivations, ffn: MassiveActivations, output: MassiveActivations,
          cap: Sequence[float]) -> SitesReading:
    """pre_norm, ffn, output: `massive_activations` at those sites; cap: `layernorm_cap` (per state)."""
    table = pre_norm.by_layer().set_index("layer")
    state = pre_norm.largest_state()
    ffn_table, out_table = ffn.by_layer().set_index("layer"), output.by_layer().set_index("layer")
    if state not in ffn_table.index:
        raise ValueError(f"the largest value before the LayerNorm is in state {state}, which has no feed-forward block")
    row, ffn_row = table.loc[state], ffn_table.loc[state]
    firsts = [r.top[(r.top["rank"] == 1) & (r.top["layer"] == state)] for r in (pre_norm, ffn)]
    paired = firsts[0].merge(firsts[1], on=["input", "position", "dimension"], suffixes=("", "_ffn"))
    share = float((paired["value_ffn"] / paired["value"]).mean()) if len(paired) else float("nan")

    def counted(result: MassiveActivations, array: np.ndarray) -> float:
        return float((array[:, result.states.index(state)] > 0).mean())

    kind, dimension = str(row["top_kind"]), int(row["top_dimension"])
    carried = tuple(int(s) for s, r in table.iterrows() if (r["top_kind"], r["top_dimension"]) == (kind, dimension))
    last = table.iloc[-1]
    return SitesReading(
        state=state, kind=kind, dimension=dimension, value=float(row["maximum"]), ratio=float(row["ratio"]),
        ratio_low=float(row["ratio_low"]), ratio_high=float(row["ratio_high"]),
        above=counted(pre_norm, pre_norm.above_absolute), both=counted(pre_norm, pre_norm.massive),
        ffn_value=float(ffn_row["maximum"]), ffn_ratio=float(ffn_row["ratio"]),
        ffn_ratio_low=float(ffn_row["ratio_low"]), ffn_ratio_high=float(ffn_row["ratio_high"]),
        ffn_above=counted(ffn, ffn.above_absolute), ffn_both=counted(ffn, ffn.massive), ffn_share=share,
        after=float(out_table.loc[state, "maximum"]), cap=float(cap[state]),
        after_largest=float(out_table["maximum"].max()), cap_min=float(np.min(cap)), carried=carried,
        last_kind=str(last["top_kind"]), last_dimension=int(last["top_dimension"]))


@dataclass(frozen=True)
class EditReading:
    """One edit of an `Intervention` against its random control (`Intervention.summary`): sink mass (mean
    attention to the first token over heads, rows and the layers after the edit) and pooled distance as a share
    of the yardstick (`relative`: two different inputs' distance)."""

    edit: str
    unedited: float  # sink mass with no edit
    unedited_low: float
    unedited_high: float
    sink: float  # with the targeted edit
    sink_low: float
    sink_high: float
    random_sink: float  # with the random-dimension control (mean over draws)
    random_low: float
    random_high: float
    draws: int
    distance: float  # targeted edit's pooled distance / reference
    random_distance: float  # the control's
    reference: float  # the yardstick itself
    drop: float  # unedited - sink
    random_drop: float  # unedited - random_sink
    apart: bool  # the targeted edit's sink interval lies below the control's


def edited(intervention: Intervention, edit: str) -> EditReading:
    """intervention: `massive_intervention` or `layernorm_intervention`; edit: "zero", "mean" or "disable"."""
    summary = intervention.summary()
    none = summary[summary["targets"] == "none"].iloc[0]
    chosen = summary[summary["edit"] == edit]
    if chosen.empty:
        raise ValueError(f"no edit {edit!r}: the intervention has {sorted(set(summary['edit']) - {'none'})}")
    target = chosen[chosen["targets"] != "random"].iloc[0]
    control = chosen[chosen["targets"] == "random"].iloc[0]
    return EditReading(
        edit=edit, unedited=float(none["sink_mass"]), unedited_low=float(none["sink_mass_low"]),
        unedited_high=float(none["sink_mass_high"]), sink=float(target["sink_mass"]),
        sink_low=float(target["sink_mass_low"]), sink_high=float(target["sink_mass_high"]),
        random_sink=float(control["sink_mass"]), random_low=float(control["sink_mass_low"]),
        random_high=float(control["sink_mass_high"]), draws=int(control["draws"]),
        distance=float(target["relative_distance"]), random_distance=float(control["relative_distance"]),
        reference=float(intervention.reference), drop=float(none["sink_mass"] - target["sink_mass"]),
        random_drop=float(none["sink_mass"] - control["sink_mass"]),
        apart=bool(target["sink_mass_high"] < control["sink_mass_low"]))


@dataclass(frozen=True)
class TargetedValues:
    """What the targeted edit of a `massive_intervention` changed (`Intervention.details`, targets not random)."""

    text: str  # "[CLS] 99 (12 of 12 inputs)": the (token, dimension) pairs by how many inputs had them, most first
    value: float  # the mean of the edited values as they were
    mean: float  # the mean of what the "mean" edit put in their place
    value_spread: float  # the standard deviation of the edited values over the inputs (0 for one)


def targeted_values(intervention: Intervention) -> TargetedValues:
    """intervention: `massive.massive_intervention`."""
    details = intervention.details[intervention.details["targets"] != "random"]
    n = details["input"].nunique()
    counts = details.drop_duplicates(["input", "token", "dimension"]).groupby(["token", "dimension"]).size()
    counts = counts.sort_values(ascending=False, kind="stable")
    text = _listed([f"{token} {dimension} ({count} of {n} inputs)" for (token, dimension), count in counts.items()])
    spread = float(details["value"].std(ddof=0)) if len(details) else float("nan")
    return TargetedValues(text=text, value=float(details["value"].mean()), mean=float(details["mean"].mean()),
                          value_spread=spread)


# -- §4 outlier LayerNorm dimensions ---------------------------------------------------------------------
@dataclass(frozen=True)
class OutlierReading:
    """Kovaleva et al. 2021's outlier dimensions (`massive.layernorm_outliers`) of the output and the attention
    LayerNorm, and how they meet the massive activation's dimension."""

    k: float
    min_share: float
    output_dims: tuple[int, ...]
    output_text: str
    output_bias_dims: tuple[int, ...]
    attention_dims: tuple[int, ...]
    attention_text: str
    attention_bias_dims: tuple[int, ...]
    massive_dimension: int
    in_attention: bool  # the massive dimension is an attention-LayerNorm outlier
    in_output: bool  # an output-LayerNorm outlier
    shared: tuple[int, ...]  # outlier dimensions of both LayerNorms


def outliers(output: LayerNormOutliers, attention: LayerNormOutliers, massive_dimension: int) -> OutlierReading:
    """output, attention: `layernorm_outliers(encoder, which=...)`; massive_dimension:
    `MassiveReading.top_dimension`."""
    return OutlierReading(
        k=output.k, min_share=output.min_share, output_dims=tuple(output.dims), output_text=_listed(output.dims),
        output_bias_dims=tuple(output.bias_dims), attention_dims=tuple(attention.dims),
        attention_text=_listed(attention.dims), attention_bias_dims=tuple(attention.bias_dims),
        massive_dimension=int(massive_dimension), in_attention=int(massive_dimension) in attention.dims,
        in_output=int(massive_dimension) in output.dims,
        shared=tuple(sorted(set(output.dims) & set(attention.dims))))


# -- §5 position or content -----------------------------------------------------------------------------
@dataclass(frozen=True)
class PositionReading:
    """`position.position_or_content` (summary frame) over the middle layers: the sink mass on position 0 and on
    [CLS]'s content when position 0 reads another token, and when [CLS]'s content is swapped further in."""

    middle: tuple[int, ...]
    original: float  # sink mass on position 0, mean over the middle layers, unedited
    stand_ins: tuple[str, ...]  # the tokens position 0 read instead ("first=<t>" variants)
    stand_in_first_min: float  # the smallest such mean of position 0's mass over the stand-ins
    stand_in_kept: float  # stand_in_first_min / original
    swap: str  # the swap variant's name
    swap_first: float  # position 0's mass (now an ordinary token's content) with the swap
    swap_content: float  # the mass on [CLS]'s content at its new position
    first_leads: tuple[int, ...]  # middle layers where position 0 draws more than [CLS]'s content (intervals apart)
    content_leads: tuple[int, ...]  # and where the content draws more (intervals apart)
    first_leads_text: str  # the same, "2 and 3" ("none")
    content_leads_text: str
    swap_content_text: str  # the swap's mass on [CLS]'s content per middle layer, "0.05, 0.16, ..."
    other: float  # the mean mass per ordinary token, unedited
    swap_content_over_other: float  # swap_content / other: how far [CLS]'s content stands above an ordinary token
    change_max: float  # the largest ordinary-token change (1 - cos) of any variant, any layer
    change_max_variant: str


def position(frame: pd.DataFrame, middle: Sequence[int]) -> PositionReading:
    """frame: `position.position_or_content(...)` (summary: variant, layer, first, cls_content, other,
    ordinary_change, with _low/_high); middle: the layers to average over."""
    middle = [int(m) for m in middle]
    part = frame[frame["layer"].isin(middle)]
    mean = part.groupby("variant", sort=False)[["first", "cls_content", "other"]].mean()
    stand_ins = [v for v in mean.index if v.startswith("first=")]
    swap = next(v for v in mean.index if v.startswith("cls<->"))
    firsts = [float(mean.loc[v, "first"]) for v in stand_ins]
    swapped = part[part["variant"] == swap].set_index("layer").sort_index()
    original = float(mean.loc["original", "first"])
    top = frame.loc[frame["ordinary_change"].idxmax()]
    first_leads = tuple(int(x) for x in swapped.index[swapped["first_low"] > swapped["cls_content_high"]])
    content_leads = tuple(int(x) for x in swapped.index[swapped["cls_content_low"] > swapped["first_high"]])
    return PositionReading(
        middle=tuple(middle), original=original, stand_ins=tuple(v[len("first="):] for v in stand_ins),
        stand_in_first_min=min(firsts), stand_in_kept=min(firsts) / original, swap=swap,
        swap_first=float(mean.loc[swap, "first"]), swap_content=float(mean.loc[swap, "cls_content"]),
        first_leads=first_leads, content_leads=content_leads, first_leads_text=_listed(first_leads),
        content_leads_text=_listed(content_leads),
        swap_content_text=", ".join(f"{v:.2f}" for v in swapped.loc[middle, "cls_content"]),
        other=float(mean.loc["original", "other"]),
        swap_content_over_other=float(mean.loc[swap, "cls_content"] / mean.loc["original", "other"]),
        change_max=float(top["ordinary_change"]), change_max_variant=str(top["variant"]))


@dataclass(frozen=True)
class RegisterReading:
    """`position.registers` (summary frame) over the middle layers: what k added tokens take."""

    middle: tuple[int, ...]
    kinds: tuple[str, ...]
    original: float  # position 0's mass, mean over the middle layers, unedited
    first_min: float  # the smallest such mean with added tokens, over the kinds
    first_kept: float  # first_min / original
    added_max: float  # the largest mean (over the middle layers) mass on the added tokens together, over kinds
    added_max_kind: str
    added_one_max: float  # the largest mean mass on the single added token that draws most
    added_elsewhere_max: float  # the largest mass on the added tokens together in a layer outside the middle ones
    added_elsewhere_layer: int  # which layer (0 when every layer is a middle one)
    other: float  # the mean mass per ordinary token, unedited
    change_max: float  # the largest ordinary-token change over kinds and all layers
    change_max_kind: str


def registers(frame: pd.DataFrame, middle: Sequence[int]) -> RegisterReading:
    """frame: `position.registers(...)` (summary: variant, layer, first, added, added_max, other,
    ordinary_change)."""
    middle = [int(m) for m in middle]
    part = frame[frame["layer"].isin(middle)]
    mean = part.groupby("variant", sort=False)[["first", "added", "added_max", "other"]].mean()
    kinds = [v for v in mean.index if v != "original"]
    added = mean.loc[kinds]
    changed = frame[frame["variant"] != "original"]
    top = changed.loc[changed["ordinary_change"].idxmax()]
    outside = changed[~changed["layer"].isin(middle)]
    elsewhere = outside.loc[outside["added"].idxmax()] if len(outside) else None
    original = float(mean.loc["original", "first"])
    return RegisterReading(
        middle=tuple(middle), kinds=tuple(kinds), original=original, first_min=float(added["first"].min()),
        first_kept=float(added["first"].min() / original), added_max=float(added["added"].max()),
        added_max_kind=str(added["added"].idxmax()), added_one_max=float(added["added_max"].max()),
        added_elsewhere_max=float(elsewhere["added"]) if elsewhere is not None else float("nan"),
        added_elsewhere_layer=int(elsewhere["layer"]) if elsewhere is not None else 0,
        other=float(mean.loc["original", "other"]), change_max=float(top["ordinary_change"]),
        change_max_kind=str(top["variant"]))


# -- §6 Clark's no-op, per head ---------------------------------------------------------------------------
@dataclass(frozen=True)
class NoOpReading:
    """Per head (`SinkHeads.no_op`): the update ratio (what a head writes over the residual stream's norm, on
    ordinary tokens) against its sink mass; a sink head: mean sink mass above eps."""

    heads: int
    sink_heads: int
    eps: float
    rho: float  # Spearman over heads, update ratio against sink mass
    rho_low: float
    rho_high: float
    sink_median: float  # the sink heads' median update ratio
    other_median: float  # the other heads'
    median_ratio: float  # sink_median / other_median
    sink_above_share: float  # share of the sink heads writing more than the other heads' median
    top_head: str  # the head with the most sink mass
    top_mass: float  # its sink mass (in `chosen`)
    top_update: float  # its update ratio (in `table`)
    top_rank: int  # its rank by update ratio among all heads (1 = writes most)
    row_median: float  # over the sink heads, the median of `row_switch` (a row's sink weight against its update)
    row_low: float  # its 10th percentile over the sink heads
    row_high: float  # its 90th percentile
    row_negative: float  # share of the sink heads whose row_switch is below 0


def no_op(table: pd.DataFrame, rho: float, interval: tuple[float, float], eps: float = EPS,
          chosen: pd.DataFrame | None = None) -> NoOpReading:
    """table: `SinkHeads.no_op()` (the update ratios and row switches read from it); rho, interval:
    `rank_correlation()` and
    `rank_interval()` (update ratio against sink mass); chosen: another `no_op()` table, on other inputs, whose
    sink mass picks the sink heads and the top head (None: `table`'s own)."""
    chosen = table if chosen is None else chosen
    same = chosen[["layer", "head"]].to_numpy(), table[["layer", "head"]].to_numpy()
    if same[0].shape != same[1].shape or not (same[0] == same[1]).all():
        raise ValueError("chosen must list the same heads as table, in the same order")
    sink = (chosen["sink_mass"] > eps).to_numpy()
    top = chosen.loc[chosen["sink_mass"].idxmax()]
    top_update = float(table.loc[chosen["sink_mass"].idxmax(), "update_ratio"])
    sink_median = float(table.loc[sink, "update_ratio"].median())
    other_median = float(table.loc[~sink, "update_ratio"].median())
    rank = int((table["update_ratio"] > top_update).sum()) + 1
    switch = table.loc[sink, "row_switch"]
    return NoOpReading(
        heads=len(table), sink_heads=int(sink.sum()), eps=float(eps), rho=float(rho),
        rho_low=float(interval[0]), rho_high=float(interval[1]), sink_median=sink_median,
        other_median=other_median, median_ratio=sink_median / other_median,
        sink_above_share=float((table.loc[sink, "update_ratio"] > other_median).mean()),
        top_head=head_label(int(top["layer"]), int(top["head"])), top_mass=float(top["sink_mass"]),
        top_update=top_update, top_rank=rank, row_median=float(switch.median()),
        row_low=float(switch.quantile(0.1)), row_high=float(switch.quantile(0.9)),
        row_negative=float((switch < 0).mean()))


# -- §7 the toy -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ToyVariant:
    """One variant's runs over the seeds."""

    variant: str
    seeds: int
    learned: int  # runs whose query accuracy is at least LEARNED
    query_accuracy: float  # mean over seeds
    query_accuracy_min: float
    sink_mass: float  # mean over seeds
    sink_mass_min: float
    sink_mass_max: float
    learned_sink_min: float  # the smallest sink mass among the runs that learned (NaN if none)
    empty_mass: float
    empty_mass_min: float
    empty_mass_max: float
    activation_ratio: float  # mean over seeds (before the LayerNorm)
    activation_ratio_max: float
    ffn_max: float  # the largest feed-forward output over seeds
    gate: float  # the gated variant's mean gate on non-query rows, over the runs that learned (NaN otherwise)
    gate_query: float  # the same on query rows
    below_softmax: bool  # every seed's sink mass below every softmax seed's (the spread does not overlap)
    learned_below_softmax: bool  # the same, among the runs that learned
    removes: bool  # every seed learned the task and sits below every softmax seed
    clears_softmax_mean: bool  # every seed learned the task and sits below the softmax seeds' mean


@dataclass(frozen=True)
class ToyReading:
    """`toy.train_variants` per variant (in the frame's order), softmax the control."""

    variants: tuple[ToyVariant, ...]
    seeds: int
    chance: float
    steps: int
    seconds: float  # training time, all runs together
    softmax_sink_min: float  # the control's smallest sink mass over seeds
    removed: tuple[str, ...]  # variants whose every seed learned the task and sits below every softmax seed
    removed_text: str
    kept: tuple[str, ...]  # the other variants but softmax
    kept_text: str
    failed: tuple[str, ...]  # variants with a run that did not learn the task
    failed_text: str
    ratio_max: float  # the largest activation ratio (before the LayerNorm) of any run
    learned_ratio_max: float  # ... of any run that learned
    learned_ffn_max: float  # the largest feed-forward output of any run that learned
    learned_kurtosis_max: float  # the largest kurtosis of a feed-forward output of any run that learned
    failed_ffn_min: float  # the smallest largest feed-forward output of the runs that did not learn (NaN if none)
    failed_larger: bool  # some run did not learn, and each such run's feed-forward output exceeds every learner's


def toy(frame: pd.DataFrame, control: str = "softmax") -> ToyReading:
    """frame: `toy.train_variants(...)` (variant, seed, steps, seconds, query_accuracy, chance, sink_mass,
    empty_mass, activation_ratio, ffn_max, ffn_kurtosis, gate, gate_query), with the `control` variant among
    them."""
    base = frame[frame["variant"] == control]
    if base.empty:
        raise ValueError(f"the frame has no {control!r} runs to compare with")
    base_min = float(base["sink_mass"].min())
    variants = []
    for name, runs in frame.groupby("variant", sort=False):
        learned = runs[runs["query_accuracy"] >= LEARNED]
        gates = learned if len(learned) else runs.iloc[:0]
        variants.append(ToyVariant(
            variant=str(name), seeds=len(runs), learned=len(learned),
            query_accuracy=float(runs["query_accuracy"].mean()), query_accuracy_min=float(runs["query_accuracy"].min()),
            sink_mass=float(runs["sink_mass"].mean()), sink_mass_min=float(runs["sink_mass"].min()),
            sink_mass_max=float(runs["sink_mass"].max()),
            learned_sink_min=float(learned["sink_mass"].min()) if len(learned) else float("nan"),
            empty_mass=float(runs["empty_mass"].mean()), empty_mass_min=float(runs["empty_mass"].min()),
            empty_mass_max=float(runs["empty_mass"].max()), activation_ratio=float(runs["activation_ratio"].mean()),
            activation_ratio_max=float(runs["activation_ratio"].max()), ffn_max=float(runs["ffn_max"].max()),
            gate=float(gates["gate"].mean()) if len(gates) else float("nan"),
            gate_query=float(gates["gate_query"].mean()) if len(gates) else float("nan"),
            below_softmax=bool(runs["sink_mass"].max() < base_min),
            learned_below_softmax=bool(len(learned) and learned["sink_mass"].max() < base_min),
            removes=bool(len(learned) == len(runs) and runs["sink_mass"].max() < base_min),
            clears_softmax_mean=bool(len(learned) == len(runs) and runs["sink_mass"].max() < base["sink_mass"].mean())))
    others = [v for v in variants if v.variant != control]
    removed = tuple(v.variant for v in others if v.removes)
    kept = tuple(v.variant for v in others if not v.removes)
    failed = tuple(v.variant for v in variants if v.learned < v.seeds)
    learned = frame[frame["query_accuracy"] >= LEARNED]
    unlearned = frame[frame["query_accuracy"] < LEARNED]
    return ToyReading(
        variants=tuple(variants), seeds=int(frame.groupby("variant")["seed"].nunique().min()),
        chance=float(frame["chance"].iloc[0]), steps=int(frame["steps"].iloc[0]), seconds=float(frame["seconds"].sum()),
        softmax_sink_min=base_min, removed=removed, removed_text=_listed(removed), kept=kept, kept_text=_listed(kept),
        failed=failed, failed_text=_listed(failed), ratio_max=float(frame["activation_ratio"].max()),
        learned_ratio_max=float(learned["activation_ratio"].max()), learned_ffn_max=float(learned["ffn_max"].max()),
        learned_kurtosis_max=float(learned["ffn_kurtosis"].max()),
        failed_ffn_min=float(unlearned["ffn_max"].min()) if len(unlearned) else float("nan"),
        failed_larger=bool(len(unlearned) and unlearned["ffn_max"].min() > learned["ffn_max"].max()))


def toy_variant(reading: ToyReading, variant: str) -> ToyVariant:
    """One variant's record of a ToyReading."""
    for record in reading.variants:
        if record.variant == variant:
            return record
    raise ValueError(f"no variant {variant!r}: the reading has {[v.variant for v in reading.variants]}")


# -- paper vs this run ----------------------------------------------------------------------------------
FINDINGS = {  # the later papers' findings in words (none of their numbers was checked against their tables)
    "Gu et al. 2025": "sinks emerge in pre-trained LMs on the first token; the metric counts heads above eps; the "
                      "sink works like a key bias born of softmax normalisation",
    "Sun et al. 2024": f"a few activations in the residual stream are massive (above {ABSOLUTE:g}, about "
                       f"{RELATIVE:,.0f} times the median), on the sink tokens and fixed dimensions; setting them to "
                       "zero destroys the model, to their mean does not",
    "Kovaleva et al. 2021": "a few LayerNorm dimensions are outliers consistently across layers; disabling them "
                            "degrades the model far more than random dimensions",
    "Xiao et al. 2024": "the sink follows the initial position, not its content: any first tokens keep it",
    "Darcet et al. 2024": "added register tokens take over the high-norm, low-information role",
    "Bondarenko et al. 2023": "no-op heads cause the outliers; clipped softmax and gated attention let heads do "
                              "nothing without them, and shrink the outliers (max and kurtosis of the feed-forward "
                              "output)",
}


def _toy_words(reading: ToyReading) -> list[str]:
    """The toy's outcome per variant in words (those present), for a table whose text must hold on every CPU: the
    toys' numbers move with the vector kernels that trained them, their verdicts less."""
    found = {v.variant: v for v in reading.variants}
    words = [f"softmax parks on BOS in {'every' if found['softmax'].learned == found['softmax'].seeds else 'some'} "
             f"seed"] if "softmax" in found else []
    if "sigmoid" in found:
        words.append("sigmoid attention (the positive control) " + (
            "learns with less sink mass than softmax's mean in every seed" if found["sigmoid"].clears_softmax_mean
            else "keeps a sink"))
    if "softmax1" in found:
        words.append("softmax1 " + ("removes it" if found["softmax1"].clears_softmax_mean else "keeps it"))
    if "clipped" in found:
        clipped = found["clipped"]
        words.append(f"clipped softmax (alpha {ALPHA:g}) " + (
            "leaves rows empty and fails to learn in some seeds" if clipped.learned < clipped.seeds
            else "learns in every seed"))
    if "gated" in found:
        gated = found["gated"]
        words.append("the gate " + ("is low on rows with nothing to do and high on queries"
                                    if gated.gate < 0.5 < gated.gate_query else "does not tell the rows apart"))
    return words


def paper_vs_run(profile_reading: ProfileReading, bias: KeyBiasReading, big: SitesReading,
                 zero: EditReading, mean: EditReading, outlier: OutlierReading, output_edit: EditReading,
                 attention_edit: EditReading, place: PositionReading, extra: RegisterReading,
                 toy_reading: ToyReading) -> pd.DataFrame:
    """One row per paper: its finding in words (FINDINGS, marked as such) and this run's, rendered from the
    readings."""
    run = {
        "Gu et al. 2025": f"[CLS] (the first token) holds a sink rate up to {profile_reading.cls_rate_max:.2f} at eps "
                          f"{profile_reading.eps:g}; sink mass tracks the logit margin across heads (Spearman "
                          f"{bias.rho_margin:.2f}); the margin is direction, the sink key being "
                          f"{bias.key_ratio_median:.2f} of the others' length",
        "Sun et al. 2024": f"before the LayerNorm of layer {big.state}, {big.kind} dimension {big.dimension}: "
                           f"{big.value:.0f}, {big.ratio:.0f} times the median (its feed-forward output "
                           f"{big.ffn_value:.0f}, {big.ffn_ratio:,.0f} times); after the LayerNorm at most "
                           f"{big.after_largest:.1f}; zeroing it: sink {zero.unedited:.2f} -> {zero.sink:.2f}, pooled "
                           f"change {zero.distance:.2f} of the yardstick; its mean: {mean.sink:.2f}, "
                           f"{mean.distance:.2f}",
        "Kovaleva et al. 2021": f"(outliers: in at least half of the layers) output LayerNorm outliers "
                                f"{outlier.output_text}: sink {output_edit.unedited:.2f} -> "
                                f"{output_edit.sink:.2f}; attention LayerNorm outliers {outlier.attention_text}: "
                                f"-> {attention_edit.sink:.2f} (random dimensions: {attention_edit.random_sink:.2f})",
        "Xiao et al. 2024": f"position 0 keeps {place.stand_in_kept:.0%} of its sink mass whatever it reads; with "
                            f"[CLS] swapped in, position 0 {place.swap_first:.2f}, [CLS]'s content "
                            f"{place.swap_content:.2f} (middle layers)",
        "Darcet et al. 2024": f"added tokens take at most {extra.added_max:.3f} of the attention together in layers "
                              f"{extra.middle[0]}-{extra.middle[-1]} (layer {extra.added_elsewhere_layer}: "
                              f"{extra.added_elsewhere_max:.3f}); position 0 keeps {extra.first_kept:.0%}",
        "Bondarenko et al. 2023": "toy (in words: its numbers depend on the CPU it trained on): "
                                  + "; ".join(_toy_words(toy_reading)),
    }
    return findings_table(FINDINGS, run)
