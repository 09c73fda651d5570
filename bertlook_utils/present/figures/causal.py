"""Notebook 12's figures: what a head does, causally (activation patching) and the context-mixing scoreboard, one
function each.

Each function takes the frames of `analyses.termheads`, `analyses.mixing` and `analyses.scoreboard` and returns its
Figure; nothing here computes a statistic. By section of the notebook:

    1  patching_scan        the share of the relevance gap each head, attention block and MLP restores alone
    2  patching_controls    the chosen heads on other pairs, beside random sets, every head, the last layer, itself
    4  mixing_maps          one sentence's five contribution maps at one layer
    5  mixing_agreement     per layer, each map's rank correlation with Value Zeroing
    5  deletion_curves      how far the embedding moves as each method's top tokens are deleted, against random
"""
from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ...core.conventions import check_index
from ..viz import ATTENTION_CMAP, DIVERGING_CMAP, PALETTE, legend_below, literal

MAP_TITLES = {"attention": "attention (head mean)", "norm": "‖αf(x)‖ (Kobayashi 2020)",
              "block": "whole block (Kobayashi 2021)", "alti": "ALTI", "value_zeroing": "Value Zeroing"}
METHOD_COLOURS = {"attention": PALETTE["cls"], "norm": PALETTE["sep"], "block": PALETTE["prev"],
                  "alti": PALETTE["punct"], "value_zeroing": PALETTE["self"]}
GRADIENT_COLOURS = {"integrated gradients": PALETTE["next"], "gradient × input": PALETTE["broad"]}


def _method_style(method: str) -> dict:
    """A scoreboard method's colour and line style: a map's colour, dashed for its rollout; grey for random."""
    if method == "random":
        return {"color": PALETTE["uniform"], "ls": ":", "lw": 2}
    if method in GRADIENT_COLOURS:
        return {"color": GRADIENT_COLOURS[method], "ls": "-."}
    base = method.removesuffix(" rollout")
    return {"color": METHOD_COLOURS[base], "ls": "--" if method.endswith("rollout") else "-"}


# -- 1: every component alone -------------------------------------------------------------------------------
def patching_scan(found: pd.DataFrame):
    """A `termheads.scan` frame: left, each head's share as a layer × head grid (0 white; the colour scale is
    symmetric); right, each layer's attention block and MLP with their 95 % intervals."""
    heads = found[found["kind"] == "head"]
    layers, n_heads = int(found["layer"].max()), int(heads["head"].max())
    grid = np.full((layers, n_heads), np.nan)
    grid[heads["layer"].to_numpy() - 1, heads["head"].to_numpy() - 1] = heads["share"].to_numpy()
    fig, axes = plt.subplots(1, 2, figsize=(11.0, 3.9), gridspec_kw={"width_ratios": [1.7, 1], "wspace": 0.15})
    limit = float(np.nanmax(np.abs(grid)))
    image = axes[0].imshow(grid, cmap=DIVERGING_CMAP, vmin=-limit, vmax=limit, aspect="auto")
    axes[0].set_xticks(range(n_heads), range(1, n_heads + 1))
    axes[0].set_yticks(range(layers), range(1, layers + 1))
    axes[0].set(xlabel="head", ylabel="layer", title="each head patched alone")
    axes[0].grid(False)
    fig.colorbar(image, ax=axes[0], label="share (0: white)", shrink=0.9)
    for kind, colour, shift in (("attention", PALETTE["prev"], -0.08), ("mlp", PALETTE["punct"], 0.08)):
        block = found[found["kind"] == kind].sort_values("layer")
        x = block["layer"].to_numpy() + shift
        axes[1].errorbar(x, block["share"], yerr=[block["share"] - block["low"], block["high"] - block["share"]],
                         fmt="o-", color=colour, capsize=3, label="attention block" if kind == "attention" else "MLP")
    axes[1].axhline(0, color="black", lw=0.8)
    axes[1].set(xlabel="layer", ylabel="share of the gap restored", xticks=range(1, layers + 1),
                title="each block patched alone")
    axes[1].legend(fontsize=9)
    return fig


# -- 2: the chosen heads on other pairs, with their controls ------------------------------------------------
def patching_controls(table: pd.DataFrame):
    """A `termheads.confirm` table as horizontal bars with their intervals (95 % bootstrap over pairs; for the
    random sets the 2.5-97.5 percentiles over sets), the chosen set first; lines at 0 (nothing) and 1 (the whole
    gap)."""
    fig, ax = plt.subplots(figsize=(7.6, 0.5 * len(table) + 1.3))
    y = np.arange(len(table))[::-1]
    colours = [PALETTE["run"] if s.startswith("chosen") else PALETTE["uniform"] for s in table["set"]]
    ax.barh(y, table["share"], color=colours, height=0.6)
    known = table["low"].notna().to_numpy()
    ax.errorbar(table["share"][known], y[known], xerr=[(table["share"] - table["low"])[known],
                                                       (table["high"] - table["share"])[known]],
                fmt="none", ecolor="black", capsize=3, lw=1)
    for x in (0, 1):
        ax.axvline(x, color="black", lw=0.8, ls="-" if x == 0 else ":")
    ax.set_yticks(y, table["set"])
    ax.set(xlabel="share of the relevance gap restored", title=f"on other pairs ({int(table['pairs'].iloc[0])})")
    return fig


# -- 4: five maps of one sentence -----------------------------------------------------------------------------
def mixing_maps(tokens: Sequence[str], maps: Mapping[str, np.ndarray], layer: int):
    """maps: name -> [L, n, n] (`mixing.layer_maps`) drawn at `layer` (1-indexed), one panel each, all on one
    colour scale (0 to the largest entry shown); row i: what token i's output of the layer draws on."""
    names = list(maps)
    check_index(layer, len(maps[names[0]]), "layer")
    rows = -(-len(names) // 3)
    side = 0.19 * len(tokens) + 0.9
    fig, axes = plt.subplots(rows, 3, figsize=(3 * side + 1.4, rows * (side + 0.5)), squeeze=False)
    labels = [literal(token) for token in tokens]
    top = max(float(maps[name][layer - 1].max()) for name in names)
    for ax, name in zip(axes.flat, names):
        image = ax.imshow(maps[name][layer - 1], cmap=ATTENTION_CMAP, vmin=0, vmax=top)
        ax.set_xticks(range(len(tokens)), labels, rotation=90, fontsize=9)
        ax.set_yticks(range(len(tokens)), labels, fontsize=9)
        ax.set_title(MAP_TITLES.get(name, name), fontsize=10)
        ax.grid(False)
    for ax in axes.flat[len(names):]:
        ax.remove()
    fig.colorbar(image, ax=list(axes.flat[:len(names)]), shrink=0.6, label=f"contribution, layer {layer}")
    return fig


# -- 5: the scoreboard ----------------------------------------------------------------------------------------
def mixing_agreement(agreement: pd.DataFrame):
    """`Scoreboard.agreement`: per layer, each map's mean Spearman correlation with the reference map (Value
    Zeroing), with its 95 % interval."""
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for method, rows in agreement.groupby("method", sort=False):
        style = _method_style(method)
        ax.plot(rows["layer"], rows["spearman"], marker="o", label=MAP_TITLES.get(method, method), **style)
        ax.fill_between(rows["layer"], rows["low"], rows["high"], color=style["color"], alpha=0.2, lw=0)
    ax.set(xlabel="layer", ylabel="Spearman with Value Zeroing", ylim=(0, 1),
           xticks=sorted(agreement["layer"].unique()), title="which maps agree with Value Zeroing?")
    legend_below(fig, ncol=2)
    return fig


def deletion_curves(means: pd.DataFrame):
    """`Scoreboard.curve_means`: per method, the mean distance of the pooled embedding (1 − cosine) after deleting
    its k top tokens; random orders dotted grey, with their 95 % interval."""
    fig, ax = plt.subplots(figsize=(6.8, 4.2))
    for method, rows in means.groupby("method", sort=False):
        style = _method_style(method)
        ax.plot(rows["k"], rows["distance"], marker="o", ms=4, label=method, **style)
        if method == "random":
            ax.fill_between(rows["k"], rows["low"], rows["high"], color=style["color"], alpha=0.2, lw=0)
    ax.set(xlabel="tokens deleted (each method's top k)", ylabel="embedding change (1 − cos)",
           xticks=sorted(means["k"].unique()), ylim=(0, None), title="deletion: whose top tokens matter most?")
    legend_below(fig, ncol=3)
    return fig
