"""Figures: one palette, one style, 1-indexed "layer-head" labels everywhere.

Every function draws on a matplotlib Axes (or makes a Figure) and returns it; nothing here computes
statistics (they come from `surface` and friends).
"""
from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.colors import LinearSegmentedColormap

from .models import Encoded

# One named colour per quantity, used by every notebook
PALETTE = {
    "cls": "#d1495b", "sep": "#00798c", "punct": "#edae49", "self": "#8e7dbe", "prev": "#30638e",
    "next": "#66a182", "broad": "#9c6644", "uniform": "#7f7f7f", "other": "#4a4a4a",
}
LABELS = {
    "cls": "[CLS]", "sep": "[SEP]", "punct": '". ,"', "self": "self", "prev": "previous token",
    "next": "next token", "entropy": "entropy (nats)", "cls_entropy": "[CLS] entropy (nats)",
    "uniform": "uniform attention", "sep_sep": "[SEP] → [SEP]", "rest_sep": "other → [SEP]",
}
ATTENTION_CMAP = LinearSegmentedColormap.from_list("attention", ["#ffffff", "#9ecae1", "#08306b"])


def use_style() -> None:
    """The kit's figure style: readable on slides, light grid, no top/right spines."""
    plt.rcParams.update({
        "figure.dpi": 100, "savefig.dpi": 100, "font.size": 11, "axes.titlesize": 12,
        "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True, "grid.alpha": 0.3,
        "legend.frameon": False, "figure.constrained_layout.use": True,
    })


def head_label(layer: int, head: int) -> str:
    """1-indexed "layer-head" label, as in the papers ("8-10" = layer 8, head 10)."""
    return f"{layer}-{head}"


def plot_head(enc: Encoded, layer: int, head: int, ax=None, max_tokens: int | None = 40, title: str | None = None,
              vmax: float | None = 1.0):
    """Heatmap of one head (layer, head 1-indexed) with token labels; rows = from, columns = to.
    vmax=None scales the colours to the largest weight shown (for broad heads)."""
    ax = ax or plt.subplots(figsize=(6, 5.5))[1]
    n = enc.n_tokens if max_tokens is None else min(max_tokens, enc.n_tokens)
    attn = enc.attn[layer - 1, head - 1, :n, :n]
    ax.imshow(attn, cmap=ATTENTION_CMAP, vmin=0, vmax=vmax if vmax is not None else attn.max(), interpolation="nearest")
    ax.set_xticks(range(n), enc.tokens[:n], rotation=90, fontsize=8)
    ax.set_yticks(range(n), enc.tokens[:n], fontsize=8)
    ax.grid(False)
    ax.set_xlabel("attends to")
    ax.set_ylabel("from")
    ax.set_title(title or f"head {head_label(layer, head)}")
    return ax


def plot_lines(enc: Encoded, layer: int, head: int, ax=None, start: int = 0, stop: int | None = 24,
               title: str | None = None, min_weight: float = 0.02):
    """Clark et al. Fig 1 style: tokens in two columns, a line from each token (left) to the tokens it
    attends to (right), darker for more weight. Shows tokens [start, stop)."""
    ax = ax or plt.subplots(figsize=(3, 0.23 * ((stop or enc.n_tokens) - start) + 0.6))[1]
    stop = enc.n_tokens if stop is None else min(stop, enc.n_tokens)
    attn = enc.attn[layer - 1, head - 1, start:stop, start:stop]
    n = stop - start
    for i in range(n):
        for j in range(n):
            if attn[i, j] >= min_weight:
                ax.plot([0, 1], [i, j], color=PALETTE["prev"], alpha=float(min(1, attn[i, j])), lw=2.2)
    for side, ha in ((0, "right"), (1, "left")):
        for i, tok in enumerate(enc.tokens[start:stop]):
            ax.text(side + (-0.06 if side == 0 else 0.06), i, tok, ha=ha, va="center", fontsize=9)
    ax.set_xlim(-0.9, 1.9)
    ax.set_ylim(n - 0.5, -0.5)
    ax.axis("off")
    ax.set_title(title or f"head {head_label(layer, head)}")
    return ax


def plot_model_grid(enc: Encoded, max_tokens: int = 40, size: float = 1.1):
    """Thumbnail of every head: a layers x heads grid of heatmaps (layer 1 at the top)."""
    n_layers, n_heads = enc.attn.shape[:2]
    n = min(max_tokens, enc.n_tokens)
    fig, axes = plt.subplots(n_layers, n_heads, figsize=(size * n_heads, size * n_layers),
                             squeeze=False, layout="constrained")
    for layer in range(n_layers):
        for head in range(n_heads):
            ax = axes[layer, head]
            ax.imshow(enc.attn[layer, head, :n, :n], cmap=ATTENTION_CMAP, vmin=0, vmax=1, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            ax.grid(False)
            if layer == 0:
                ax.set_title(f"head {head + 1}", fontsize=9)
            if head == 0:
                ax.set_ylabel(f"layer {layer + 1}", fontsize=9)
    return fig


def plot_by_layer(stats: pd.DataFrame, columns: Sequence[str], ax=None, title: str | None = None,
                  ylabel: str = "average attention", jitter: float = 0.12, seed: int = 0):
    """Clark et al. Fig 2 / Fig 4 style: one dot per head at its layer (jittered), a line through each
    layer's mean, one colour per column of `stats` (which has 1-indexed `layer`)."""
    ax = ax or plt.subplots(figsize=(6, 3.6))[1]
    rng = np.random.default_rng(seed)
    offsets = np.linspace(-0.15, 0.15, len(columns)) if len(columns) > 1 else [0.0]
    for column, offset in zip(columns, offsets):
        colour = PALETTE.get(column, PALETTE["other"])
        x = stats["layer"] + offset + rng.uniform(-jitter, jitter, len(stats)) / max(1, len(columns))
        ax.scatter(x, stats[column], s=14, color=colour, alpha=0.55, linewidths=0)
        means = stats.groupby("layer")[column].mean()
        ax.plot(means.index, means.values, color=colour, lw=2, label=LABELS.get(column, column))
    ax.set_xticks(sorted(stats["layer"].unique()))
    ax.set_xlabel("layer")
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.legend(loc="best", fontsize=9)
    return ax


def plot_head_grid(stats: pd.DataFrame, column: str, ax=None, title: str | None = None, vmax: float | None = None,
                   fmt: str = "{:.2f}", cmap=ATTENTION_CMAP):
    """A layers x heads table of one statistic as an annotated heatmap (1-indexed labels)."""
    table = stats.pivot(index="layer", columns="head", values=column)
    ax = ax or plt.subplots(figsize=(0.55 * table.shape[1] + 1.5, 0.45 * table.shape[0] + 1))[1]
    vmax = vmax if vmax is not None else float(np.nanmax(table.values))
    image = ax.imshow(table.values, cmap=cmap, vmin=0, vmax=vmax, aspect="auto")
    for (i, j), value in np.ndenumerate(table.values):
        ax.text(j, i, fmt.format(value), ha="center", va="center", fontsize=7,
                color="white" if value > 0.6 * vmax else "black")
    ax.set_xticks(range(table.shape[1]), table.columns)
    ax.set_yticks(range(table.shape[0]), table.index)
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.grid(False)
    ax.set_title(title or LABELS.get(column, column))
    plt.colorbar(image, ax=ax, shrink=0.8)
    return ax
