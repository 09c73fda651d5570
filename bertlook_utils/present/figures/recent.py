"""Notebook 11's figures: from no-op to attention sinks (Gu et al., Sun et al., Kovaleva et al. 2021, Xiao et al.,
Darcet et al., Bondarenko et al.), one function each.

Each function takes the result objects of `analyses.sinks` and returns its Figure; nothing here computes a
statistic (a rank correlation shown in a title is passed in). By section of the notebook:

    1  sink_profile                       where the sink sits: the sink metric by token category and over eps
    2  key_bias                           why the sink token: the logit margin, its direction and its length
    3  massive_activations                the largest hidden values against the median and Sun et al.'s threshold
    3-4  sink_interventions               massive values or LayerNorm outliers edited against random dimensions
    5  position_or_content, registers     does the sink follow position 0 or [CLS]'s content? extra tokens
    6  no_op                              do sink heads write little?
    7  toy_variants                       softmax, softmax1, clipped softmax and a gate on a toy
"""
from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ...analyses.sinks import EPS
from ...analyses.sinks.massive import ABSOLUTE, RELATIVE, Intervention, MassiveActivations
from ...analyses.sinks.position import SinkProfile
from ..viz import LABELS, PALETTE, SEQUENTIAL_CMAP, legend_below, literal

SEP_STYLES = ("-", "--", ":")  # the first, second and third separator
VARIANT_COLOURS = (PALETTE["cls"], PALETTE["sep"], PALETTE["punct"], PALETTE["prev"], PALETTE["next"],
                   PALETTE["self"], PALETTE["broad"])  # "original" is drawn in PALETTE["other"]
EDITS = {"zero": "set to 0", "mean": "set to the mean", "disable": "disabled"}
MEASURES = {  # column -> axis label, for the per-layer variant figures and the toy
    "first": "sink mass on position 0", "cls_content": "sink mass on [CLS]'s content",
    "swapped": "sink mass on the swapped position", "sep": "sink mass on the separators",
    "added": "sink mass on the added tokens", "added_max": "on the added token that draws most",
    "other": "sink mass per ordinary token", "ordinary_change": "ordinary tokens' change (1 − cos)",
    "sink_mass": "sink mass on BOS", "sink_rate": "sink rate on BOS",
    "activation_ratio": "largest max/median |x| before the LayerNorm",
    "accuracy": "accuracy (all positions)", "query_accuracy": "accuracy at the queries",
    "empty_mass": "weight left unspent", "ffn_max": "largest feed-forward output",
    "ffn_kurtosis": "kurtosis of the feed-forward output", "gate": "gate on rows with nothing to do",
    "gate_query": "gate on query rows",
}


def _category_style(category: str) -> dict:
    """Colour, line style and label of a `sink_profile` category (cls, sep1, sep2, ..., punct, other)."""
    if category.startswith("sep"):
        k = int(category[3:])
        return {"color": PALETTE["sep"], "ls": SEP_STYLES[(k - 1) % len(SEP_STYLES)], "label": f"[SEP] {k}"}
    return {"color": PALETTE[category], "ls": "-", "label": LABELS.get(category, category)}


def _interval_line(ax, x, frame: pd.DataFrame, column: str, **style) -> None:
    """A line with markers through `column`, its `_low`-`_high` interval shaded in the line's colour."""
    ax.plot(x, frame[column], marker="o", ms=4, **style)
    if f"{column}_low" in frame:
        ax.fill_between(x, frame[f"{column}_low"], frame[f"{column}_high"], color=style.get("color"), alpha=0.2,
                        lw=0)


# -- 1: where the sink sits ---------------------------------------------------------------------------------
def sink_profile(profile: SinkProfile):
    """Gu et al.'s metric per layer and token category ([CLS], each separator, ". ,", other tokens;
    `SinkProfile.table`): the sink rate (the share of the layer's heads whose sink score exceeds eps) and the mean
    sink score, with 95 % intervals over inputs; and the first token's sink rate over all heads along a grid of eps
    (`SinkProfile.curve`), the profile's eps marked."""
    table, curve = profile.table(), profile.curve()
    fig, axes = plt.subplots(1, 3, figsize=(10.8, 3.8))
    for category, part in table.groupby("category", sort=False, observed=True):
        style = _category_style(str(category))
        for ax, column in zip(axes[:2], ("sink_rate", "sink_score")):
            _interval_line(ax, part["layer"], part, column, **style)
    layers = sorted(table["layer"].unique())
    axes[0].set(xlabel="layer", xticks=layers, ylim=(0, 1.02), ylabel=f"share of the layer's heads (eps = "
                f"{profile.eps:g})", title="sink rate")
    axes[1].set(xlabel="layer", xticks=layers, ylim=(0, None), ylabel="mean attention received",
                title="sink score")
    _interval_line(axes[2], curve["eps"], curve, "sink_rate", color=PALETTE["cls"], ls="-")
    axes[2].axvline(profile.eps, color=PALETTE["uniform"], ls="--", lw=1.2, label=f"eps = {profile.eps:g}")
    axes[2].set(xlabel="eps", ylabel="share of all heads", ylim=(0, 1.02), xlim=(0, 1),
                title="first token's sink rate over eps")
    legend_below(fig, ncol=len(table["category"].unique()) + 1)
    return fig


# -- 2: the key-bias reading ------------------------------------------------------------------------------
def key_bias(table: pd.DataFrame, threshold: float = EPS):
    """Per head (`SinkHeads.key_bias`): the sink mass against the logit margin of the sink key over the others,
    and the margin split into what the sink key's direction gives (margin_direction, the margin at the others'
    median key length) and what its length adds (margin_length), both coloured by layer; the heads whose sink
    mass exceeds `threshold` large and filled, the others small and hollow."""
    fig, axes = plt.subplots(1, 2, figsize=(10.4, 4.2))
    layers = table["layer"].to_numpy()
    points = axes[0].scatter(table["margin"], table["sink_mass"], c=layers, cmap=SEQUENTIAL_CMAP, s=26)
    axes[0].set(xlabel="logit margin of the sink key (mean over rows)", ylabel="sink mass (mean attention)",
                title="heads: sink mass against logit margin")
    axes[0].axhline(threshold, color=PALETTE["uniform"], ls=":", lw=1.2)
    sink = table["sink_mass"].to_numpy() > threshold
    split = table[["margin_direction", "margin_length"]].to_numpy()
    axes[1].scatter(*split[~sink].T, facecolors="none", edgecolors=points.cmap(points.norm(layers[~sink])), s=16,
                    linewidths=1, label=f"sink mass ≤ {threshold:g} (dotted line)")
    axes[1].scatter(*split[sink].T, c=layers[sink], cmap=SEQUENTIAL_CMAP, norm=points.norm, s=34,
                    label=f"sink mass > {threshold:g}")
    for line in (axes[1].axhline, axes[1].axvline):
        line(0, color="black", lw=0.8)
    axes[1].set(xlabel="margin from the key's direction", ylabel="margin from the key's length",
                title="the margin: direction or length?")
    fig.colorbar(points, ax=axes, label="layer", ticks=sorted(set(layers)), shrink=0.9)
    legend_below(fig, ncol=2)
    return fig


# -- 6: the no-op, measured -----------------------------------------------------------------------------
def no_op(table: pd.DataFrame, rho: float | None = None, interval: tuple[float, float] | None = None):
    """Per head (`SinkHeads.no_op`): how much it writes (the norm of its output over the residual stream's, on the
    ordinary tokens) against its sink mass, 95 % intervals over inputs as thin bars, coloured by layer; `rho`
    (and its `interval`), the rank correlation the caller computed (`SinkHeads.rank_correlation`), in the title."""
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    if "sink_mass_low" in table:
        ax.errorbar(table["sink_mass"], table["update_ratio"],
                    xerr=[table["sink_mass"] - table["sink_mass_low"], table["sink_mass_high"] - table["sink_mass"]],
                    yerr=[table["update_ratio"] - table["update_ratio_low"],
                          table["update_ratio_high"] - table["update_ratio"]],
                    fmt="none", ecolor=PALETTE["uniform"], alpha=0.5, lw=0.8, zorder=1)
    points = ax.scatter(table["sink_mass"], table["update_ratio"], c=table["layer"], cmap=SEQUENTIAL_CMAP, s=26,
                        zorder=2)
    title = "do sink heads write less?"
    if rho is not None:
        title += f"\nSpearman ρ = {rho:.2f}" + (f" [{interval[0]:.2f}, {interval[1]:.2f}]" if interval else "")
    ax.set(xlabel="sink mass (mean attention to the sink)", ylabel="update ratio |head output| / |residual|",
           title=title, ylim=(0, None))
    fig.colorbar(points, ax=ax, label="layer", ticks=sorted(table["layer"].unique()))
    return fig


# -- 3: massive activations -------------------------------------------------------------------------------
def _state_label(layer: int) -> str:
    return "emb." if layer == 0 else str(layer)


SITE_STYLES = {  # how each reading site of `massive.SITES` is drawn: colour, marker, line style, label
    "pre_norm": (PALETTE["cls"], "o", "-", "before the LayerNorm (the residual sum)"),
    "ffn": (PALETTE["prev"], "s", "--", "feed-forward output"),
    "output": (PALETTE["uniform"], "^", ":", "after the LayerNorm (the hidden state)"),
}


def massive_activations(found: Mapping[str, MassiveActivations] | MassiveActivations,
                        cap: Sequence[float] | None = None):
    """Left, for the first site of `found` (site -> `massive.massive_activations`, or one result): per state (0 =
    the embeddings) the largest magnitude against the median (95 % interval over inputs) beside Sun et al.'s
    relative criterion (1,000 times), each point labelled with the (token kind, dimension) that most often carries
    an input's largest value and how often. Right, for every site: the largest magnitude beside their absolute
    threshold (100) and, when given, the LayerNorm's `cap` (`massive.layernorm_cap`); log scales."""
    found = found if isinstance(found, Mapping) else {found.site: found}
    first_site, result = next(iter(found.items()))
    table = result.by_layer()
    x = table["layer"].to_numpy()
    fig, axes = plt.subplots(1, 2, figsize=(10.8, 4.2), width_ratios=(1.3, 1))
    ax = axes[0]
    colour, marker, _, name = SITE_STYLES.get(first_site, (PALETTE["cls"], "o", "-", first_site))
    ax.errorbar(x, table["ratio"], yerr=[table["ratio"] - table["ratio_low"], table["ratio_high"] - table["ratio"]],
                marker=marker, color=colour, capsize=3, label=f"max ÷ median, {name}")
    ax.axhline(RELATIVE, color=PALETTE["paper"], ls="--", lw=1.2, label=f"Sun et al.: ×{RELATIVE:,.0f} the "
               f"median (left), > {ABSOLUTE:,.0f} (right)")
    for layer, ratio, kind, dimension, share in table[["layer", "ratio", "top_kind", "top_dimension",
                                                       "top_share"]].itertuples(index=False):
        ax.annotate(f"{LABELS.get(kind, kind)} {dimension}\n{share:.0%}", (layer, ratio), xytext=(0, 8),
                    textcoords="offset points", ha="center", va="bottom", fontsize=9)
    ax.set(yscale="log", xlabel="layer (0: embeddings)", ylabel="max |x| ÷ median |x|", ylim=(1, RELATIVE * 3),
           title=f"largest value against the median, {name.split(' (')[0]}\n(labels: its token and dimension)")
    ax = axes[1]
    lows = []
    for site, each in found.items():
        colour, marker, style, name = SITE_STYLES.get(site, (PALETTE["other"], "o", "-", site))
        rows = each.by_layer()
        ax.plot(rows["layer"], rows["maximum"], marker=marker, ls=style, color=colour, label=f"largest |x|, {name}")
        lows.append(float(rows["maximum"].min()))
    if cap is not None:
        ax.plot(x, [cap[layer] for layer in x], color=PALETTE["other"], lw=1, ls="-.", marker="_",
                label="the most a LayerNorm can output")
    ax.axhline(ABSOLUTE, color=PALETTE["paper"], ls="--", lw=1.2)
    ax.set(yscale="log", xlabel="layer (0: embeddings)", ylabel="|x| (mean over inputs)",
           ylim=(min(lows + [1.0]) / 2, ABSOLUTE * 4),
           title=f"largest magnitude (dashed: Sun et al.'s {ABSOLUTE:,.0f})")
    for ax in axes:
        ax.set_xticks(x, [_state_label(layer) for layer in x])
        ax.margins(x=0.08)
    legend_below(fig, ncol=2)
    return fig


# -- 3-4: the interventions -------------------------------------------------------------------------------
def sink_interventions(named: Mapping[str, Intervention]):
    """name -> Intervention (`massive_intervention`, `layernorm_intervention`): one row per edit, the sink mass
    (left) and the pooled distance to the unedited run (right) of the targeted edit and of its random-dimension
    control (mean over draws), with 95 % intervals over inputs; the unedited sink mass and the yardstick
    (`reference`: two different inputs' pooled distance) as lines."""
    if not named:
        raise ValueError("named: give at least one intervention, {name: Intervention}")
    rows = []  # (label, unedited sink mass, reference, targeted row, random row)
    for name, intervention in named.items():
        summary = intervention.summary()
        base = summary[summary["targets"] == "none"].iloc[0]
        edits = [e for e in dict.fromkeys(summary["edit"]) if e != "none"]
        for edit in edits:
            part = summary[summary["edit"] == edit]
            targeted, random = part[part["targets"] != "random"].iloc[0], part[part["targets"] == "random"]
            label = name if len(edits) == 1 else f"{name}: {EDITS.get(edit, edit)}"
            rows.append((label, base["sink_mass"], intervention.reference, targeted,
                         random.iloc[0] if len(random) else None))
    fig, axes = plt.subplots(1, 2, figsize=(10.4, 0.55 * len(rows) + 2.2), sharey=True)
    y = np.arange(len(rows))
    draws = {int(r[4]["draws"]) for r in rows if r[4] is not None}
    control = "random dimensions" + (f" ({draws.pop()} draws)" if len(draws) == 1 else "")
    for ax, column in zip(axes, ("sink_mass", "pooled_distance")):
        for k, (_, base, reference, targeted, random) in enumerate(rows):
            for row, colour, marker, offset, label in ((targeted, PALETTE["cls"], "o", -0.12, "targeted"),
                                                       (random, PALETTE["uniform"], "s", 0.12, control)):
                if row is None:
                    continue
                error = [[row[column] - row[f"{column}_low"]], [row[f"{column}_high"] - row[column]]]
                ax.errorbar(row[column], k + offset, xerr=np.nan_to_num(error), fmt=marker, color=colour, capsize=3,
                            label=label)
            value, name = (base, "unedited") if column == "sink_mass" else (reference, "yardstick: two inputs")
            ax.plot([value, value], [k - 0.4, k + 0.4], color="black", ls="--" if column != "sink_mass" else "-",
                    lw=1.2, label=name)
        ax.set_xlim(0, None)
    axes[0].set_yticks(y, [literal(r[0]) for r in rows])
    axes[0].invert_yaxis()
    axes[0].set(xlabel="sink mass on the first token", title="sink mass after the edit")
    axes[1].set(xlabel="pooled distance to the unedited run (1 − cos)", title="how far the output moves")
    legend_below(fig, ncol=4)
    return fig


# -- 5: position or content, registers ---------------------------------------------------------------------
def _variant_label(variant: str) -> str:
    if variant.startswith("first="):
        return f'position 0 holds "{literal(variant[6:])}"'
    if variant.startswith("cls<->"):
        return f"[CLS] swapped with the {variant[6:]} token" if not variant[6:].isdigit() else \
            f"[CLS] swapped with position {variant[6:]}"
    return {"unused": "+ [unused] tokens", "sep": "+ [SEP] tokens", "filler": "+ filler words"}.get(variant, variant)


def _variant_lines(frame: pd.DataFrame, columns: Sequence[str], title: str):
    """One panel per column, per layer, one line per variant (intervals shaded where the frame has them)."""
    missing = [c for c in ("variant", "layer", *columns) if c not in frame]
    if missing:
        raise ValueError(f"frame lacks the columns {missing}")
    fig, axes = plt.subplots(1, len(columns), figsize=(min(10.8, 3.1 * len(columns) + 0.8), 3.7), squeeze=False)
    colours = iter(VARIANT_COLOURS * 2)
    for variant, part in frame.groupby("variant", sort=False):
        part = part.sort_values("layer")
        original = variant == "original"
        style = dict(color=PALETTE["other"] if original else next(colours), lw=2.4 if original else 1.6,
                     label=_variant_label(str(variant)))
        for ax, column in zip(axes[0], columns):
            if part[column].notna().any():
                _interval_line(ax, part["layer"], part, column, **style)
    layers = sorted(frame["layer"].unique())
    for ax, column in zip(axes[0], columns):
        ax.set(xlabel="layer", xticks=layers, ylim=(0, None), title=MEASURES.get(column, column))
    axes[0, 0].set_ylabel("mean attention received")
    fig.suptitle(title)
    legend_below(fig, ncol=min(4, frame["variant"].nunique()))
    return fig


def position_or_content(frame: pd.DataFrame, columns: Sequence[str] = ("first", "cls_content", "other")):
    """`position.position_or_content`'s frame: per layer, the sink mass on position 0, on the position holding
    [CLS]'s word embedding, and per ordinary token (`columns`), one line per variant (original; position 0 reading
    another token; [CLS]'s content swapped further in), 95 % intervals over inputs shaded."""
    return _variant_lines(frame, columns, "does the sink follow position 0 or [CLS]'s content?")


def registers(frame: pd.DataFrame, columns: Sequence[str] = ("first", "added", "sep", "other")):
    """`position.registers`' frame: per layer, the sink mass on position 0, on the k added tokens together (the
    registers' share), on the separators and per ordinary token (`columns`), one line per variant (original; k
    [unused], [SEP] or filler tokens added), 95 % intervals over inputs shaded."""
    return _variant_lines(frame, columns, "do added tokens take the sink's attention?")


# -- 7: the toy ---------------------------------------------------------------------------------------------
def toy_variants(frame: pd.DataFrame, columns: Sequence[str] = ("sink_mass", "activation_ratio", "accuracy",
                                                                 "query_accuracy")):
    """`toy.train_variants`' frame: per variant (rows) and measure (panels), each seed a dot and the mean over seeds
    a bar; on the query accuracy, chance (the frame's `chance`) as a dotted line."""
    missing = [c for c in ("variant", "seed", *columns) if c not in frame]
    if missing:
        raise ValueError(f"frame lacks the columns {missing}")
    variants = list(dict.fromkeys(frame["variant"]))
    fig, axes = plt.subplots(1, len(columns), figsize=(min(10.8, 2.4 * len(columns) + 1.4), 0.5 * len(variants)
                                                        + 2.0), sharey=True, squeeze=False)
    seeds = sorted(frame["seed"].unique())
    offsets = dict(zip(seeds, np.linspace(-0.2, 0.2, len(seeds)) if len(seeds) > 1 else [0.0]))
    for ax, column in zip(axes[0], columns):
        for k, variant in enumerate(variants):
            part = frame[frame["variant"] == variant]
            colour = VARIANT_COLOURS[k % len(VARIANT_COLOURS)] if variant != "softmax" else PALETTE["other"]
            ax.barh(k, part[column].mean(), height=0.6, color=colour, alpha=0.3,
                    label="mean over seeds" if k == 0 else None)
            ax.scatter(part[column], k + part["seed"].map(offsets), color=colour, s=22, zorder=3,
                       label=f"one seed ({len(seeds)} each)" if k == 0 else None)
        if column == "query_accuracy" and "chance" in frame:
            ax.axvline(float(frame["chance"].iloc[0]), color=PALETTE["uniform"], ls=":", lw=1.4, label="chance")
        ax.set(xlabel=MEASURES.get(column, column), xlim=(0, None))
    axes[0, 0].set_yticks(range(len(variants)), variants)
    axes[0, 0].invert_yaxis()
    fig.suptitle("the toy: which normaliser lets a head do nothing without a sink?")
    legend_below(fig, ncol=3)
    return fig
