"""Notebook 12 (what does a head do, causally?): the numbers its prose and checks use.

They are read from the term pairs' relevances (`termheads.relevance`), the patching scan and its controls
(`termheads.scan`, `termheads.confirm`), Vig's pattern scores of the same passages (`surface.vig_scores`) and the
context-mixing scoreboard (`scoreboard.Scoreboard`). Shares are fractions of the relevance gap; layers and heads
are 1-indexed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from ...analyses.surface import VIG_COLUMNS
from ...analyses.termheads import MIN_GAP, component_label
from ...core.conventions import check_index
from ...core.intervals import mean_interval
from ...core.ranks import within_group_spearman
from .words import findings_table


def _listed(values: Sequence[str]) -> str:
    """"a", "a and b", "a, b and c"."""
    words = list(values)
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


# -- the task ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TaskReading:
    """The relevance gaps of the pairs (`termheads.relevance`)."""

    pairs: int
    positive: int  # pairs whose relevant passage is closer to the query
    clear: int  # pairs whose gap is at least min_gap (the ones the shares count)
    min_gap: float
    gap_median: float
    base_median: float  # the base passage's relevance (cosine with the query)


def task(table: pd.DataFrame, min_gap: float = MIN_GAP) -> TaskReading:
    gap = table["gap"].to_numpy()
    return TaskReading(len(table), int((gap > 0).sum()), int((gap >= min_gap).sum()), min_gap,
                       float(np.median(gap)), float(table["base"].median()))


# -- §1 every component alone -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ScanReading:
    """The scan on the first pairs (`termheads.scan`): the strongest block and heads, and the heads chosen there."""

    pairs: int  # pairs with a clear gap
    attention_top: str  # the attention block restoring most, "attention 6"
    attention_share: float
    attention_low: float
    attention_high: float
    mlp_top: str
    mlp_share: float
    chosen: tuple[str, ...]  # the chosen heads' labels
    n_chosen: int
    heads_text: str  # the chosen heads with their shares, "6-11 (0.09), 6-8 (0.07) and 6-9 (0.07)"
    chosen_layers: tuple[int, ...]  # the chosen heads' layers
    heads: int
    heads_above: int  # heads whose interval lies above 0
    heads_below: int  # heads whose interval lies below 0
    last_layer_above: int  # of the heads above 0, those in the last layer
    head_max: float  # the largest share of one head


def scan(found: pd.DataFrame, chosen: Sequence[tuple]) -> ScanReading:
    heads = found[found["kind"] == "head"]
    by_label = found.set_index("component")
    attention = found[found["kind"] == "attention"].iloc[0]
    mlp = found[found["kind"] == "mlp"].iloc[0]
    labels = [component_label(c) for c in chosen]
    above = heads[heads["low"] > 0]
    return ScanReading(
        int(found["pairs"].iloc[0]), attention["component"], float(attention["share"]), float(attention["low"]),
        float(attention["high"]), mlp["component"], float(mlp["share"]), tuple(labels), len(labels),
        _listed([f"{label} ({by_label.loc[label, 'share']:.2f})" for label in labels]),
        tuple(c[1] + 1 for c in chosen), len(heads), len(above), int((heads["high"] < 0).sum()),
        int((above["layer"] == found["layer"].max()).sum()), float(heads["share"].max()))


# -- §2 the chosen heads on other pairs ----------------------------------------------------------------------------
@dataclass(frozen=True)
class ControlsReading:
    """`termheads.confirm`'s table, row by row."""

    pairs: int
    chosen: str  # the chosen set's row name
    chosen_share: float
    chosen_low: float
    chosen_high: float
    random_share: float  # the random sets' mean
    random_low: float  # their 2.5 and 97.5 percentiles
    random_high: float
    best_random: float
    neighbour_share: float  # sets of as many other heads from the chosen heads' layers: their mean
    neighbour_low: float  # their 2.5 and 97.5 percentiles
    neighbour_high: float
    best_neighbour: float
    every_head: float
    every_head_low: float
    every_head_high: float
    last_layer: float  # 1 by construction: the machinery's check
    self_patch: float  # 0 by construction
    exact: bool  # the self-patch restores 0 and the last layer 1, within 1e-6
    apart: bool  # the chosen set's interval lies above the random sets' 97.5 percentile
    beats_best: bool  # and above the best random set
    beats_neighbours: bool  # the chosen set's interval lies above the best same-layer set


def controls(table: pd.DataFrame) -> ControlsReading:
    rows = table.set_index("set")
    chosen = next(s for s in rows.index if s.startswith("chosen"))
    random = next(s for s in rows.index if s.startswith("random sets"))
    neighbours = next(s for s in rows.index if s.startswith("same-layer sets"))
    every = rows.loc["every head"]
    return ControlsReading(
        int(table["pairs"].iloc[0]), chosen, *map(float, rows.loc[chosen, ["share", "low", "high"]]),
        *map(float, rows.loc[random, ["share", "low", "high"]]), float(rows.loc["best random set", "share"]),
        *map(float, rows.loc[neighbours, ["share", "low", "high"]]), float(rows.loc["best same-layer set", "share"]),
        *map(float, every[["share", "low", "high"]]), float(rows.loc["the last layer (everything)", "share"]),
        float(rows.loc["self-patch (chosen, from the base)", "share"]),
        bool(abs(rows.loc["self-patch (chosen, from the base)", "share"]) < 1e-6
             and abs(rows.loc["the last layer (everything)", "share"] - 1) < 1e-6),
        bool(rows.loc[chosen, "low"] > rows.loc[random, "high"]),
        bool(rows.loc[chosen, "low"] > rows.loc["best random set", "share"]),
        bool(rows.loc[chosen, "low"] > rows.loc["best same-layer set", "share"]))


@dataclass(frozen=True)
class CopiesReading:
    """`termheads.copies`' table: the chosen heads on the term's second copy and on its first."""

    pairs: int  # pairs where both gaps are clear
    second_gap: float  # median relevance gaps
    first_gap: float
    second: tuple[float, float, float]  # (share, low, high)
    first: tuple[float, float, float]
    difference: tuple[float, float, float]  # first - second, paired


def copies(table: pd.DataFrame) -> CopiesReading:
    rows = table.set_index("copy")
    share = {name: tuple(map(float, rows.loc[name, ["share", "low", "high"]]))
             for name in ("second copy", "first copy", "first - second")}
    return CopiesReading(int(table["pairs"].iloc[0]), float(rows.loc["second copy", "gap"]),
                         float(rows.loc["first copy", "gap"]), share["second copy"], share["first copy"],
                         share["first - second"])


# -- §3 the heads found against notebook 01's patterns ----------------------------------------------------------
@dataclass(frozen=True)
class PatternsReading:
    """Per head, the scan's share against Vig's pattern scores on the relevant passages (`surface.vig_scores`):
    rank correlations over all heads and within layers (`ranks.within_group_spearman`), each (rho, low, high)
    with a 95 % Fisher-z interval."""

    heads: int
    rho: dict[str, tuple[float, float, float]]  # pattern -> Spearman with the share over heads (NaN patterns out)
    within: dict[str, tuple[float, float, float]]  # pattern -> the same, heads ranked within their layer
    rho_text: str  # "next 0.44, other_words 0.50, ..."
    within_text: str
    rho_said: dict[str, str]  # pattern -> "0.44, 0.22 to 0.61": rho and its interval, as the prose says them
    within_said: dict[str, str]
    identical_head: str  # the head that attends most to identical words here
    identical_score: float  # its mass on the other occurrence
    identical_share: float  # its share in the scan
    identical_low: float
    identical_high: float
    identical_rank: int  # its rank by share among the heads (1: the largest)
    chosen_identical_rank: int  # the best rank by identical-word attention among the chosen heads


def patterns(vig: pd.DataFrame, found: pd.DataFrame, chosen: Sequence[tuple]) -> PatternsReading:
    heads = found[found["kind"] == "head"].merge(vig, on=["layer", "head"])
    scored = [p for p in VIG_COLUMNS if heads[p].notna().all()]
    rho = {p: within_group_spearman(heads["share"], heads[p], np.zeros(len(heads))) for p in scored}
    within = {p: within_group_spearman(heads["share"], heads[p], heads["layer"]) for p in scored}
    top = heads.loc[heads["identical"].idxmax()]
    by_share = heads["share"].rank(ascending=False, method="min")
    by_identical = heads["identical"].rank(ascending=False, method="min")
    chosen_rows = [int(np.flatnonzero((heads["layer"] == c[1] + 1) & (heads["head"] == c[2] + 1))[0])
                   for c in chosen]
    return PatternsReading(
        len(heads), rho, within, *(", ".join(f"{p} {r[0]:.2f}" for p, r in table.items()) for table in (rho, within)),
        *({p: "{:.2f}, {:.2f} to {:.2f}".format(*r) for p, r in table.items()} for table in (rho, within)),
        top["component"], float(top["identical"]), float(top["share"]), float(top["low"]), float(top["high"]),
        int(by_share[top.name]), int(by_identical.iloc[chosen_rows].min()))


# -- §4 one sentence's maps -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MapsReading:
    """Where the rows of each map (`mixing.layer_maps`) of one input go at one layer (1-indexed)."""

    layer: int
    own: dict[str, float]  # map -> mean weight of a row on its own token (the diagonal)
    cls: dict[str, float]  # map -> mean weight on [CLS] (position 0) of the other rows


def one_sentence(maps: dict[str, np.ndarray], layer: int) -> MapsReading:
    check_index(layer, len(next(iter(maps.values()))), "layer")
    chosen = {name: np.asarray(value, dtype=np.float64)[layer - 1] for name, value in maps.items()}
    return MapsReading(layer, {name: float(np.diagonal(m).mean()) for name, m in chosen.items()},
                       {name: float(m[1:, 0].mean()) for name, m in chosen.items()})


# -- §5 the scoreboard ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ScoreboardReading:
    """The deletion test (`Scoreboard.deletion`, `.areas`) and the agreement with Value Zeroing (`.agreement`)."""

    inputs: int
    depth: int
    random_area: float
    best: str
    best_gain: float
    best_low: float
    best_high: float
    unseparated: tuple[str, ...]  # other methods whose paired difference with the best reaches 0
    unseparated_text: str  # "norm (−0.004, −0.011 to 0.002)" per such method, or "none"
    worst: str
    worst_gain: float
    worst_low: float
    worst_high: float
    all_above_random: bool  # every method's gain interval lies above 0
    gains: dict[str, float]  # method -> its mean gain over random orders
    rollout_cost: tuple[float, float, float]  # attention − attention rollout, paired over inputs
    alti_over_attention_rollout: tuple[float, float, float]  # alti rollout − attention rollout, paired
    agreement: dict[str, tuple[float, float]]  # map -> (smallest, largest) mean Spearman with VZ over layers
    norm_range: str  # each map's agreement range for the prose, "0.94–0.99"
    block_range: str
    attention_range: str
    alti_range: str
    rollout_cost_text: str  # "0.096 (paired interval 0.080–0.112)"
    alti_gain: float  # alti rollout − attention rollout, mean over inputs
    attention_vs_ig: tuple[float, float, float]  # attention − integrated gradients, paired over inputs
    alti_vs_ig: tuple[float, float, float]  # alti rollout − integrated gradients, paired
    norm_rollout_cost: tuple[float, float, float]  # norm − norm rollout, paired
    vz_rank: int  # the rank of Value Zeroing's rollout by gain (1 = the best)
    methods: int  # methods scored
    closest: str  # the map closest to VZ in every layer, or "" if none is
    alti_least_layers: int  # layers where ALTI agrees least with VZ
    layers: int


def scoreboard(deletion: pd.DataFrame, areas: pd.DataFrame, agreement: pd.DataFrame, depth: int) -> ScoreboardReading:
    """deletion: `Scoreboard.deletion` (with its paired differences with the best); areas: `.areas`."""
    scored = deletion[deletion["method"] != "random"].reset_index(drop=True)
    best, worst = scored.iloc[0], scored.iloc[-1]
    close = scored.iloc[1:][scored.iloc[1:]["vs_best_high"] >= 0]
    unseparated = tuple(close["method"])
    close_text = _listed([f"{m} ({d:+.3f}, {lo:+.3f} to {hi:+.3f})" for m, d, lo, hi in close[
        ["method", "vs_best", "vs_best_low", "vs_best_high"]].itertuples(index=False)]) if len(close) else "none"
    wide = areas.pivot(index="input", columns="method", values="area")
    by_layer = agreement.pivot(index="layer", columns="method", values="spearman")
    closest = by_layer.idxmax(axis=1)
    cost = mean_interval((wide["attention"] - wide["attention rollout"]).to_numpy())
    alti_gain = mean_interval((wide["alti rollout"] - wide["attention rollout"]).to_numpy())
    ig = wide["integrated gradients"]
    return ScoreboardReading(
        len(wide), depth, float(deletion.set_index("method").loc["random", "area"]), best["method"],
        float(best["gain"]), float(best["gain_low"]), float(best["gain_high"]), unseparated, close_text,
        worst["method"],
        float(worst["gain"]), float(worst["gain_low"]), float(worst["gain_high"]), bool((scored["gain_low"] > 0).all()),
        dict(zip(scored["method"], scored["gain"].astype(float))),
        cost, alti_gain,
        {m: (float(by_layer[m].min()), float(by_layer[m].max())) for m in by_layer.columns},
        *(f"{by_layer[m].min():.2f}–{by_layer[m].max():.2f}" for m in ("norm", "block", "attention", "alti")),
        "{:.3f} (paired interval {:.3f}–{:.3f})".format(*cost),
        alti_gain[0], mean_interval((wide["attention"] - ig).to_numpy()),
        mean_interval((wide["alti rollout"] - ig).to_numpy()),
        mean_interval((wide["norm"] - wide["norm rollout"]).to_numpy()),
        int(scored.index[scored["method"] == "value_zeroing rollout"][0]) + 1, len(scored),
        closest.iloc[0] if (closest == closest.iloc[0]).all() else "",
        int((by_layer.idxmin(axis=1) == "alti").sum()), len(by_layer))


# -- paper vs this run ---------------------------------------------------------------------------------------------
FINDINGS = {  # the papers' findings in words (none of their numbers was checked against their tables)
    "Chen et al. 2024": "patching head outputs between a document and the document with a query term added (the "
                        "TFC1 axiom) localises a term-frequency signal to a few attention heads of a 6 × 12 "
                        "bi-encoder (TAS-B)",
    "Kobayashi et al. 2021": "with the residual and the LayerNorm counted, a token's output draws far less on "
                             "other tokens than its attention weights suggest",
    "Ferrando et al. 2022": "ALTI (the whole block, L1 distances) aggregated over layers; in their token-deletion "
                            "test it ranks tokens more faithfully than gradient methods, raw attention, its rollout "
                            "and the norm-based maps",
    "Mohebbi et al. 2023": "Value Zeroing maps the context mixing of the whole layer; they report its rollout as more "
                           "faithful than attention, norm-based maps and ALTI",
}


def _verdict(paired: tuple[float, float, float]) -> str:
    """"ahead", "behind" or "not separable" by a paired (mean, low, high)."""
    return "ahead" if paired[1] > 0 else "behind" if paired[2] < 0 else "not separable"


def paper_vs_run(scanned: ScanReading, checked: ControlsReading, board: ScoreboardReading,
                 rows: MapsReading, looked: PatternsReading, copied: CopiesReading) -> pd.DataFrame:
    """One row per paper: its finding in words (FINDINGS, marked as such) and this run's, rendered from the
    readings."""
    low, high = board.agreement["alti"]
    run = {
        "Chen et al. 2024": f"one swapped noun: the chosen heads ({', '.join(scanned.chosen)}) restore "
                            f"{checked.chosen_share:.2f} of the gap on other pairs, random sets of as many heads "
                            f"{checked.random_share:.2f}, other heads of their layers {checked.neighbour_share:.2f}; "
                            f"of the gap the term opens where it was absent, {copied.first[0]:.2f}; "
                            f"{scanned.attention_top} alone {scanned.attention_share:.2f}; unlike their early "
                            f"duplicate-token heads, the identical-words head {looked.identical_head} restores "
                            f"{looked.identical_share:.3f} (rank {looked.identical_rank} of {looked.heads})",
        "Kobayashi et al. 2021": f"a token's own share, one sentence, layer {rows.layer}: attention "
                                 f"{rows.own['attention']:.2f}, norm {rows.own['norm']:.2f}, with the residual and the "
                                 f"LayerNorm (block) {rows.own['block']:.2f}; on which tokens mix, the block agrees "
                                 f"with Value Zeroing at {board.agreement['block'][0]:.2f}-"
                                 f"{board.agreement['block'][1]:.2f} per layer, head-mean attention at "
                                 f"{board.agreement['attention'][0]:.2f}-{board.agreement['attention'][1]:.2f}",
        "Ferrando et al. 2022": f"deletion: ALTI rollout against integrated gradients {board.alti_vs_ig[0]:+.3f} "
                                f"(paired {board.alti_vs_ig[1]:+.3f} to {board.alti_vs_ig[2]:+.3f}: "
                                f"{_verdict(board.alti_vs_ig)}); it beats attention rollout by "
                                f"{board.alti_over_attention_rollout[0]:.3f} (paired); its layer maps agree with "
                                f"Value Zeroing at {low:.2f}-{high:.2f}",
        "Mohebbi et al. 2023": f"its rollout ranks {board.vz_rank} of {board.methods} by deletion gain "
                               f"({board.gains['value_zeroing rollout']:.3f}; {board.best}'s {board.best_gain:.3f}); "
                               f"the weighted-value norms agree most with Value Zeroing "
                               f"({board.agreement['norm'][0]:.2f}-{board.agreement['norm'][1]:.2f})",
    }
    return findings_table(FINDINGS, run)
