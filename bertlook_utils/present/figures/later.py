"""Notebook 10's figures of the later work (Kobayashi, Brunner, Abnar & Zuidema, Michel), one function each.

Each function takes the result objects the analyses return, draws with `viz`'s primitives and palette, and
returns its Figure; nothing here computes a statistic. By section of the notebook:

    1  norm_shares, weight_against_norm, context_mixing                (Kobayashi et al.: weight vs norm)
    2  null_space_twin, effective_sinks                                (Brunner et al.: effective attention)
    3  flow_seconds, rollout_and_flow                                  (Abnar & Zuidema: rollout and flow)
    4  word_scores, explanation_correlations                           (does attention explain?)
    5  head_importance, pruning_curves, pattern_removal                (Michel et al.: head importance)
"""
from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.colors import PowerNorm

from ...analyses.attribution import METHODS as ATTRIBUTION_METHODS, Explanation
from ...analyses.norms import NormResult
from ...analyses.gradients import CATEGORIES
from ..viz import (ATTENTION_CMAP, DIVERGING_CMAP, LABELS, PALETTE, PATTERN_COLOURS, SEQUENTIAL_CMAP,
                   heatmap_by_head, legend_below, literal)


# -- 10: beyond attention weights ----------------------------------------------------------------------
def norm_shares(result: NormResult):
    """Kobayashi et al.: per layer, the share of each row's contribution that goes to [CLS], [SEP], ". ," and
    other tokens (stacked), by weight, by norm, and by norm with the residual and LayerNorm (context j ≠ i only);
    `norms.NormResult.by_layer`."""
    table = result.by_layer()
    fig, axes = plt.subplots(1, len(table.columns), figsize=(3.6 * len(table.columns) + 0.6, 4.0), sharey=True)
    for ax, measure in zip(axes, table.columns):
        shares = table[measure].unstack("category")[list(CATEGORIES)]
        bottom = np.zeros(len(shares))
        for category in CATEGORIES:
            ax.bar(shares.index, shares[category], bottom=bottom, color=PALETTE[category],
                   label=LABELS.get(category, category))
            bottom += shares[category].to_numpy()
        ax.set(title=measure, xlabel="layer", xticks=list(shares.index))
    axes[0].set_ylabel("share of each row's contribution")
    legend_below(fig, ncol=len(CATEGORIES))
    return fig


def weight_against_norm(heads: pd.DataFrame, what: str = "[CLS] and [SEP]"):
    """One dot per head (`norms.NormResult.by_head`): its share to `what` by weight against by norm, coloured by
    layer; on the diagonal both would agree."""
    fig, ax = plt.subplots(figsize=(5.2, 4.2))
    points = ax.scatter(heads["weight"], heads["norm"], c=heads["layer"], cmap=SEQUENTIAL_CMAP, s=24)
    ax.plot([0, 1], [0, 1], ls="--", color=PALETTE["uniform"], lw=1)
    ax.set(xlim=(0, 1), ylim=(0, 1), xlabel=f"share to {what} by weight", ylabel=f"share to {what} by norm",
           title=f"heads: attention to {what}, weight vs norm")
    fig.colorbar(points, ax=ax, label="layer")
    return fig


def context_mixing(mixing: pd.DataFrame):
    """Per layer, the share of a token's update that comes from other tokens, by each of `norms.MIXING` (mean and
    95 % interval over inputs; `norms.NormResult.mixing`)."""
    fig, ax = plt.subplots(figsize=(6.2, 3.6))
    colours = [PALETTE["uniform"], PALETTE["cls"], PALETTE["sep"], PALETTE["prev"]]
    measures = [c for c in mixing.columns if c != "layer" and not c.endswith((" low", " high"))]
    for colour, measure in zip(colours, measures):
        ax.plot(mixing["layer"], mixing[measure], marker="o", color=colour, label=measure)
        ax.fill_between(mixing["layer"], mixing[f"{measure} low"], mixing[f"{measure} high"], color=colour, alpha=0.2)
    ax.set(xlabel="layer", ylabel="share from other tokens", ylim=(0, 1), xticks=list(mixing["layer"]),
           title="context mixing: how much of a token's update comes from other tokens")
    ax.legend(fontsize=8)
    return fig


def null_space_twin(attn: np.ndarray, twin: np.ndarray, tokens: Sequence[str], title: str = ""):
    """Brunner et al.: one head's map, a different map with the same output (`identifiability.null_space_twin`),
    and their difference; attn, twin [n, n] (readable in the book's column up to about 20 tokens)."""
    fig, axes = plt.subplots(1, 3, figsize=(0.48 * len(tokens) + 2.4, 0.16 * len(tokens) + 1.4), sharey=True)
    labels = [literal(token) for token in tokens]
    limit = float(np.abs(twin - attn).max())
    for ax, values, name, cmap, low, high in ((axes[0], attn, "the head's map", ATTENTION_CMAP, 0, 1),
                                              (axes[1], twin, "another map, same output", ATTENTION_CMAP, 0, 1),
                                              (axes[2], twin - attn, "difference", DIVERGING_CMAP, -limit, limit)):
        image = ax.imshow(values, cmap=cmap, vmin=low, vmax=high)
        ax.set_xticks(range(len(tokens)), labels, rotation=90, fontsize=10)
        ax.set_title(name, fontsize=11)
        ax.grid(False)
        if ax is not axes[0]:  # one colour bar for the two maps (both 0 to 1), one for the difference
            fig.colorbar(image, ax=ax, shrink=0.75, label="attention" if ax is axes[1] else "twin − map")
    axes[0].set_yticks(range(len(tokens)), labels, fontsize=10)
    if title:
        fig.suptitle(title)
    return fig


def effective_sinks(raw: pd.DataFrame, effective: pd.DataFrame, columns: Sequence[str] = ("cls", "sep", "punct")):
    """Per layer, the mean share of attention on [CLS], [SEP] and ". ," (per-head `surface` tables, 1-indexed
    `layer`) in the raw maps (dashed) and in effective attention (solid)."""
    fig, ax = plt.subplots(figsize=(6.2, 3.6))
    for column in columns:
        for frame, style, name in ((raw, "--", "raw"), (effective, "-", "effective")):
            means = frame.groupby("layer")[column].mean()
            ax.plot(means.index, means.values, style, marker="o", color=PALETTE[column],
                    label=f"{LABELS.get(column, column)}, {name}")
    ax.axhline(0, color="black", lw=0.8)
    ax.set(xlabel="layer", ylabel="mean attention", xticks=sorted(raw["layer"].unique()),
           title="attention to special tokens: raw vs effective")
    ax.legend(fontsize=8, ncol=2)
    return fig


def flow_seconds(timing: pd.DataFrame, limit: float | None = None):
    """Seconds one input's full flow matrix takes against its length (log-log); `limit`: a dotted budget line."""
    fig, ax = plt.subplots(figsize=(5.2, 3.4))
    ax.plot(timing["tokens"], timing["seconds"], marker="o", color=PALETTE["run"])
    if limit is not None:
        ax.axhline(limit, ls=":", color=PALETTE["cls"], lw=1)
    ax.set(xscale="log", yscale="log", xlabel="tokens", ylabel="seconds (all n² flows)",
           title="attention flow: cost against input length")
    return fig


def word_scores(explanation: Explanation, labels: Sequence[str] | None = None,
                methods: Sequence[str] = ATTRIBUTION_METHODS + ("leave_one_out",)):
    """One input's words scored by each method (`attribution.explain`), each row scaled to its largest absolute
    value (a diverging colour: leave-one-out and gradient × input can be negative); `labels`: the task's class names
    (`TaskData.labels`), for the predicted class in the title."""
    scores = explanation.scores
    values = np.stack([scores[m].to_numpy() / max(float(np.nanmax(np.abs(scores[m]))), 1e-12) for m in methods])
    fig, ax = plt.subplots(figsize=(0.3 * len(scores) + 2.8, 0.4 * len(methods) + 1.8))
    image = ax.imshow(values, cmap=DIVERGING_CMAP, vmin=-1, vmax=1, aspect="auto")
    ax.set_xticks(range(len(scores)), [literal(word) for word in scores["word"]], rotation=60, ha="right",
                  rotation_mode="anchor", fontsize=10)
    ax.set_yticks(range(len(methods)), [m.replace("_", " ") for m in methods])
    ax.grid(False)
    fig.colorbar(image, ax=ax, shrink=0.8, label="score ÷ largest |score|")
    predicted = f'"{labels[explanation.predicted]}"' if labels else f"label {explanation.predicted}"
    ax.set_title(f"predicted {predicted} (p = {explanation.probability:.2f}): what each method credits")
    return fig


def explanation_correlations(table: pd.DataFrame):
    """Spearman correlation with leave-one-out per layer (`attribution.correlations`): raw [CLS] attention and
    rollout as lines with 95 % intervals, flow and gradient × input as points at the last layer."""
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    colours = {"attention": PALETTE["cls"], "rollout": PALETTE["sep"], "flow": PALETTE["prev"],
               "grad_x_input": PALETTE["punct"]}
    for method, part in table.groupby("method", sort=False):
        part = part.sort_values("layer")
        label = method.replace("_", " ")
        if len(part) > 1:
            ax.plot(part["layer"], part["spearman"], marker="o", color=colours[method], label=label)
            ax.fill_between(part["layer"], part["low"], part["high"], color=colours[method], alpha=0.2)
        else:
            ax.errorbar(part["layer"] + 0.1 * (method == "grad_x_input"), part["spearman"],
                        yerr=[part["spearman"] - part["low"], part["high"] - part["spearman"]], fmt="s",
                        color=colours[method], capsize=3, label=label)
    ax.axhline(0, color="black", lw=0.8)
    ax.set(xlabel="layer", ylabel="Spearman ρ with leave-one-out", xticks=sorted(table["layer"].unique()),
           title="which scores rank words like leave-one-out?")
    ax.legend(fontsize=8)
    return fig


def head_importance(importances: Mapping[str, pd.DataFrame], column: str = "normalised"):
    """Michel et al.'s head importance (`importance.head_importance`), one heatmap per task: `column`
    "normalised" (divided by each layer's ℓ2 norm, the pruning order's scores) or "importance" (raw)."""
    title = {"normalised": "|∂L/∂ξ|, normalised per layer", "importance": "mean |∂L/∂ξ|"}[column]
    fig, axes = plt.subplots(1, len(importances), figsize=(3.9 * len(importances), 3.4), squeeze=False)
    for ax, (name, frame) in zip(axes[0], importances.items()):
        values = frame.pivot(index="layer", columns="head", values=column).to_numpy()
        heatmap_by_head(values, ax, name, fmt=None, colorbar="importance")
        ax.set_xticks(range(1, values.shape[1], 2), range(2, values.shape[1] + 1, 2))  # every other head
    fig.suptitle(f"head importance {title}")
    return fig


def pruning_curves(curves: Mapping[str, pd.DataFrame]):
    """Accuracy against the share of heads removed (`importance.pruning_curves(...).frame`), one panel per task:
    least important first, normalised per layer and raw (lines), random orders (5-95 % of them shaded, their
    mean dashed)."""
    fig, axes = plt.subplots(1, len(curves), figsize=(3.6 * len(curves) + 0.6, 4.0), sharey=True, squeeze=False)
    for ax, (name, frame) in zip(axes[0], curves.items()):
        random = frame[frame["order"].str.startswith("random")].groupby("share")["accuracy"]
        n = frame.loc[frame["order"].str.startswith("random"), "order"].nunique()
        ax.fill_between(random.mean().index, random.quantile(0.05), random.quantile(0.95), color=PALETTE["uniform"],
                        alpha=0.3, label=f"{n} random orders (5-95 %)")
        ax.plot(random.mean().index, random.mean(), "--", color=PALETTE["uniform"], label="random orders (mean)")
        for order, style in (("importance", "-"), ("raw importance", ":")):
            chosen = frame[frame["order"] == order]
            label = "least important first" + (" (normalised per layer)" if order == "importance" else " (raw)")
            ax.plot(chosen["share"], chosen["accuracy"], style, marker="o", color=PALETTE["run"], label=label,
                    alpha=1 if order == "importance" else 0.6)
        ax.set(title=name, xlabel="share of heads removed")
    axes[0, 0].set_ylabel("accuracy (evaluation half)")
    legend_below(fig, ncol=2)
    return fig


def pattern_removal(tables: Mapping[str, pd.DataFrame]):
    """Accuracy with every head of one dominant Kovaleva pattern removed (bars) against random sets of as many
    heads matched by layer (mean, with their 5-95 % as a range), and, where measured, with only those heads'
    [CLS] column removed (open circle), one panel per task (`importance.pattern_removal`)."""
    fig, axes = plt.subplots(1, len(tables), figsize=(3.6 * len(tables) + 0.6, 4.0), sharey=True, squeeze=False)
    for ax, (name, frame) in zip(axes[0], tables.items()):
        x = np.arange(len(frame))
        ax.bar(x, frame["accuracy"], color=[PATTERN_COLOURS.get(k, PALETTE["other"]) for k in frame["kind"]],
               label="that pattern's heads removed")
        spread = [frame["random"] - frame["random low"], frame["random high"] - frame["random"]]
        ax.errorbar(x, frame["random"], yerr=np.clip(spread, 0, None),  # a mean can sit outside 5-95 %
                    fmt="D", color="black", capsize=3, label="as many random heads per layer (5-95 %)")
        drained = frame["cls drained"].notna()
        ax.plot(x[drained], frame.loc[drained, "cls drained"], "o", mfc="white", mec="black", ms=8,
                label="only their [CLS] column removed")
        ax.axhline(frame["none"].iloc[0], ls="--", color=PALETTE["uniform"], label="nothing removed")
        ax.set_xticks(x, [f"{k} ({n})" for k, n in zip(frame["kind"], frame["heads"])], fontsize=10, rotation=40,
                      ha="right")
        ax.set(title=name)
    axes[0, 0].set_ylabel("accuracy (evaluation half)")
    legend_below(fig, ncol=2)
    return fig


def rollout_and_flow(tokens: Sequence[str], maps: Mapping[str, np.ndarray], gamma: float = 0.5):
    """One input's token-to-token maps [n, n] side by side (e.g. last-layer attention averaged over heads, rollout,
    flow), rows = output positions, columns = input positions, all on one colour scale from 0 to the largest value
    (a flow value is a maximum flow, up to 1 per pair, so a row of flows does not sum to 1). Colours are spaced by
    value**gamma in a many-hued map: gamma < 1 spreads the small weights, and the hues still part a flow's values
    near 1. Readable in the book's column up to about 20 tokens."""
    n = len(tokens)
    fig, axes = plt.subplots(1, len(maps), figsize=(0.16 * n * len(maps) + 2.2, 0.16 * n + 1.6), sharey=True,
                             squeeze=False)
    labels = [literal(token) for token in tokens]
    norm = PowerNorm(gamma, vmin=0, vmax=max(float(np.max(values)) for values in maps.values()))
    for ax, (name, values) in zip(axes[0], maps.items()):
        image = ax.imshow(values, cmap=SEQUENTIAL_CMAP, norm=norm)
        ax.set_xticks(range(n), labels, rotation=90, fontsize=10)
        ax.set_title(name, fontsize=11)
        ax.grid(False)
    axes[0, 0].set_yticks(range(n), labels, fontsize=10)
    fig.colorbar(image, ax=axes[0], shrink=0.8, label=f"weight or flow (colour ∝ value^{gamma:g})")
    return fig
