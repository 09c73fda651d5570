"""Kovaleva et al. (2019)'s figures and the plots beside them in notebooks 08-09, one function each.

Each function takes the result objects the analyses return, draws with `viz`'s primitives and palette, and
returns its Figure; nothing here computes a statistic. By notebook:

    08  finetuning_loss, pattern_examples, pattern_features, confusions,   (Fig 1, Fig 2, §4.1, §4.3)
        pattern_shares, pattern_share_estimates, map_similarity
    09  relation_scores, special_by_layer, cls_by_type, stripe_types,      (§4.2, §4.4-4.6)
        disabling_scan, held_out_disabling
"""
from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ...analyses.finetune import FineTuned, Stage
from ...analyses.patterns import KINDS
from ...analyses.disabling import PICKS, HeldOut
from ...analyses.relations import RelationScores
from ..viz import ATTENTION_CMAP, DIVERGING_CMAP, LABELS, PALETTE, PATTERN_COLOURS, SEQUENTIAL_CMAP, heatmap_by_head


# -- 08: Dark Secrets ---------------------------------------------------------------------------------
def finetuning_loss(tuned: Mapping[str, FineTuned], window: int = 5):
    """The training loss of each fine-tuned model (task -> FineTuned), a running mean over `window` steps."""
    fig, ax = plt.subplots(figsize=(7, 3))
    for (name, t), colour in zip(tuned.items(), (PALETTE["prev"], PALETTE["cls"], PALETTE["next"])):
        ax.plot(t.history["step"], t.history["loss"].rolling(window, min_periods=1).mean(), color=colour, label=name)
    ax.set(xlabel="training step", ylabel=f"loss (nats, mean of {window} steps)", title="fine-tuning loss")
    ax.legend()
    return fig


def pattern_examples(maps: Mapping[str, np.ndarray], captions: Mapping[str, str] | None = None):
    """Kovaleva et al. Figure 1: one map [n, n] per kind of pattern (kind -> map, e.g. hand-labelled maps of this
    run), side by side without token labels, each titled in its kind's colour. As in the paper, each map's
    colours run to its own 99th percentile (a broad map is not blank beside a stripe), under one colour bar."""
    if not maps:
        raise ValueError("give at least one map: {kind: [n, n] array}")
    fig, axes = plt.subplots(1, len(maps), figsize=(2.4 * len(maps) + 1, 2.9), squeeze=False)
    for ax, (kind, attn) in zip(axes[0], maps.items()):
        attn = np.asarray(attn, dtype=float)
        image = ax.imshow(attn / max(float(np.percentile(attn, 99)), 1e-12), cmap=ATTENTION_CMAP, vmin=0, vmax=1,
                          interpolation="nearest")
        ax.set(xticks=[], yticks=[])
        ax.grid(False)
        ax.set_title(kind, color=PATTERN_COLOURS.get(kind, "black"), fontweight="bold")
        if captions and kind in captions:
            ax.set_xlabel(captions[kind], fontsize=9)
    fig.colorbar(image, ax=axes[0].tolist(), shrink=0.8, label="attention / map's 99th pct.", extend="max")
    return fig


def pattern_features(labelled: pd.DataFrame, thresholds: Mapping[str, float]):
    """Every hand-labelled map (`patterns.labelled_features`) in the rules' feature space, coloured by its label by
    eye, with the rules' thresholds (dashed): diagonal against stripes (left: the diagonal, vertical+diagonal and
    vertical rules) and locality against entropy (right: the block and broad rules)."""
    t = thresholds
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6))
    for kind in KINDS:
        part = labelled[labelled["label"] == kind]
        axes[0].scatter(part["stripes"], part["diagonal"], s=16, color=PATTERN_COLOURS[kind], label=kind, alpha=0.8)
        axes[1].scatter(part["locality"], part["entropy"], s=16, color=PATTERN_COLOURS[kind], label=kind, alpha=0.8)
    rule = dict(ls="--", color="black", lw=0.8)
    axes[0].axhline(t["diagonal"], **rule)
    axes[0].axvline(t["vertical"], **rule)
    axes[0].plot([t["mix_stripes"]] * 2, [t["diagonal"], axes[0].get_ylim()[1]], **rule | {"ls": ":"})
    axes[0].set(xlabel="stripes (3 most-attended columns, 0 = uniform)",
                ylabel="diagonal (offsets -1..+1, above chance)",
                title="rules 1 and 3: diagonal, vertical+diagonal, vertical")
    axes[1].axvline(t["block"], **rule)
    axes[1].axhline(t["broad"], **rule)
    axes[1].set(xlabel="locality (1 = near the diagonal, 0 = spread evenly)", ylabel="entropy / ln n",
                title="rules 2 and 4: block, broad")
    axes[0].legend(fontsize=8, markerscale=1.5)
    return fig


def confusions(matrices: Mapping[str, pd.DataFrame]):
    """Confusion matrices side by side (name -> rows = label by eye, columns = classifier, counts), each cell
    coloured by its share of the row."""
    fig, axes = plt.subplots(1, len(matrices), figsize=(5.2 * len(matrices), 4.6), squeeze=False)
    for ax, (name, matrix) in zip(axes[0], matrices.items()):
        counts = matrix.to_numpy()
        rows = counts / np.maximum(counts.sum(1, keepdims=True), 1)
        image = ax.imshow(rows, cmap=ATTENTION_CMAP, vmin=0, vmax=1)
        for (i, j), value in np.ndenumerate(counts):
            ax.text(j, i, str(value), ha="center", va="center", fontsize=8,
                    color="white" if rows[i, j] > 0.6 else "black")
        ax.set_xticks(range(counts.shape[1]), matrix.columns, rotation=45, ha="right")
        ax.set_yticks(range(counts.shape[0]), matrix.index)
        ax.set(xlabel=matrix.columns.name or "classifier", ylabel=matrix.index.name or "label by eye", title=name)
        ax.grid(False)
        ax.figure.colorbar(image, ax=ax, shrink=0.8, label="share of the row")
    return fig


def pattern_shares(shares: Mapping[tuple[str, str], pd.DataFrame]):
    """The share of each kind per layer as stacked bars, one panel per (task, model) (frames of layers x KINDS,
    e.g. `patterns.shares_by_layer`)."""
    fig, axes = plt.subplots(1, len(shares), figsize=(3.2 * len(shares) + 1.5, 3.8), sharey=True, squeeze=False)
    for ax, ((name, variant), frame) in zip(axes[0], shares.items()):
        bottom = np.zeros(len(frame))
        for kind in KINDS:
            ax.bar(frame.index, frame[kind], bottom=bottom, color=PATTERN_COLOURS[kind], label=kind, width=0.8)
            bottom += frame[kind].to_numpy()
        ax.set(title=f"{name},\n{variant}", xlabel="layer", xticks=list(frame.index))
        ax.grid(False)
    axes[0, 0].set_ylabel("share of maps (rules)")
    axes[0, -1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1, 1))
    return fig


def pattern_share_estimates(estimates: Mapping[str, pd.DataFrame], kinds: Sequence[str] = KINDS):
    """Kovaleva et al. Fig 2, with its uncertainty: per kind (a panel), the share of all maps of each (task, model)
    by several estimates (name -> long frame with task, model, kind, share, low, high), side by side with their
    intervals."""
    columns = min(3, len(kinds))
    rows = -(-len(kinds) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.4 * columns + 1.5, 3.9 * rows), sharey=True, squeeze=False)
    names = list(estimates)
    colours = [PALETTE["run"], PALETTE["cls"], PALETTE["punct"], PALETTE["prev"]]
    groups = list(dict.fromkeys(zip(*(estimates[names[0]][c] for c in ("task", "model")))))
    for ax, kind in zip(axes.flat, kinds):
        for k, (name, colour) in enumerate(zip(names, colours)):
            frame = estimates[name].set_index(["task", "model", "kind"])
            x = np.arange(len(groups)) + (k - (len(names) - 1) / 2) * 0.25
            rows = frame.loc[[(t, m, kind) for t, m in groups]]
            ax.errorbar(x, rows["share"], yerr=[rows["share"] - rows["low"], rows["high"] - rows["share"]], fmt="o",
                        color=colour, capsize=2, ms=4, label=name)
        ax.set_xticks(range(len(groups)), [f"{t}, {m}" for t, m in groups], rotation=45, ha="right", fontsize=8)
        ax.set(title=kind)
    for row in axes:
        row[0].set_ylabel("share of maps")
    for ax in axes.flat[len(kinds):]:
        ax.set_visible(False)
    axes[0, -1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1, 1))
    return fig


def map_similarity(similarity: Mapping[str, np.ndarray]):
    """Per task, the cosine similarity of every head's maps before and after fine-tuning (a layers x heads
    heatmap, one colour scale for all), and its mean per layer (right)."""
    low = min(float(s.min()) for s in similarity.values())
    fig, axes = plt.subplots(1, len(similarity) + 1, figsize=(5 * len(similarity) + 4, 3.6),
                             gridspec_kw={"width_ratios": [3] * len(similarity) + [2]})
    for ax, (name, sim) in zip(axes, similarity.items()):
        heatmap_by_head(sim, ax, f"{name}: cosine before vs after", SEQUENTIAL_CMAP, vmin=low, vmax=1, fmt=None,
                        colorbar="cosine similarity")
        axes[-1].plot(range(1, sim.shape[0] + 1), sim.mean(1), marker="o", label=name)
    axes[-1].set(title="mean over heads", xlabel="layer", ylabel="cosine similarity")
    axes[-1].legend()
    return fig


# -- 09: relation-specific heads, [CLS] and [SEP], vertical stripes, disabling -----------------------
def relation_scores(results: Mapping[str, RelationScores], q: float = 99):
    """Kovaleva et al. §4.2 on the silver proxy: each head's score (mean maximum weight between predicate and
    argument words) as a layers x heads heatmap, one panel per null (name -> RelationScores of the same
    frames); heads above that null's q-th percentile are boxed."""
    fig, axes = plt.subplots(1, len(results), figsize=(8.5 * len(results), 4), squeeze=False)
    for ax, (name, result) in zip(axes[0], results.items()):
        above = np.argwhere(result.above(q)) + 1
        heatmap_by_head(result.score(), ax, f"boxed: above the {name} null's {q:g}th percentile "
                        f"({len(above)} of {result.score().size})", boxes=[tuple(b) for b in above],
                        colorbar="score (max weight, mean over sentences)")
    return fig


def special_by_layer(changes: Mapping[str, pd.DataFrame]):
    """Kovaleva et al. §4.5: attention to [CLS] (solid) and to [SEP] (dashed) per layer, before (grey) and
    after fine-tuning (colour), with 95 % intervals of the change; one panel per task
    (task -> `tokentypes.special_change`)."""
    fig, axes = plt.subplots(1, len(changes), figsize=(4.6 * len(changes), 3.6), sharey=True, squeeze=False)
    for ax, (name, frame) in zip(axes[0], changes.items()):
        layers = frame.index
        for token, ls in (("cls", "-"), ("sep", "--")):
            ax.plot(layers, frame[f"{token}_before"], ls=ls, marker="o", color=PALETTE["uniform"],
                    label=f"{LABELS[token]}, pre-trained")
            ax.plot(layers, frame[f"{token}_after"], ls=ls, marker="o", color=PALETTE[token],
                    label=f"{LABELS[token]}, fine-tuned")
            ax.fill_between(layers, frame[f"{token}_before"] + frame[f"{token}_change_low"],
                            frame[f"{token}_before"] + frame[f"{token}_change_high"], color=PALETTE[token], alpha=0.25)
        ax.set(title=name, xlabel="layer", xticks=list(layers))
    axes[0, 0].set_ylabel("share of attention (mean over rows)")
    axes[0, -1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1, 1))
    return fig


def cls_by_type(changes: Mapping[str, pd.DataFrame], categories: Sequence[str] | None = None):
    """Kovaleva et al. §4.5: what the [CLS] row of one layer attends to, by token category, before and after
    fine-tuning (bars; on the after bar the 95 % interval of the change), and each category's share of the tokens
    (black ticks: what a uniform row would give); one panel per task (task -> `tokentypes.exclusive_cls_change`,
    or `tokentypes.cls_change` for the overlapping types)."""
    fig, axes = plt.subplots(1, len(changes), figsize=(5 * len(changes), 3.8), sharey=True, squeeze=False)
    for ax, (name, frame) in zip(axes[0], changes.items()):
        part = frame if categories is None else frame.set_index("category").loc[list(categories)].reset_index()
        x = np.arange(len(part))
        ax.bar(x - 0.2, part["before"], 0.4, color=PALETTE["uniform"], label=Stage.PRETRAINED)
        ax.bar(x + 0.2, part["after"], 0.4, color=PALETTE["cls"], label=Stage.FINE_TUNED,
               yerr=[part["change"] - part["change_low"], part["change_high"] - part["change"]], capsize=2)
        ax.scatter(x, part["base_rate"], marker="_", s=300, color="black", zorder=3, label="share of tokens")
        ax.set_xticks(x, part["category"], rotation=60, ha="right")
        ax.set(title=name)
    axes[0, 0].set_ylabel("share of the [CLS] row")
    axes[0, -1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1, 1))
    return fig


def stripe_types(tables: Mapping[str, pd.DataFrame], categories: Sequence[str] | None = None):
    """Kovaleva et al. §4.4: the token types that vertical stripes fall on (share of all stripes, colour)
    against each type's share of the tokens (grey); one panel per name -> `TokenTypeAttention.stripe_table`."""
    fig, axes = plt.subplots(1, len(tables), figsize=(4.6 * len(tables), 3.8), sharey=True, squeeze=False)
    for ax, (name, frame) in zip(axes[0], tables.items()):
        part = frame if categories is None else frame.set_index("category").loc[list(categories)].reset_index()
        x = np.arange(len(part))
        ax.bar(x - 0.2, part["share_of_tokens"], 0.4, color=PALETTE["uniform"], label="share of tokens")
        ax.bar(x + 0.2, part["share_of_stripes"], 0.4, color=PALETTE["cls"], label="share of stripes")
        ax.set_xticks(x, part["category"], rotation=60, ha="right")
        ax.set(title=name)
    axes[0, 0].set_ylabel("share")
    axes[0, -1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1, 1))
    return fig


def disabling_scan(scans: Mapping[str, pd.DataFrame]):
    """Per task (a row of panels): the change in accuracy (points) when each head is disabled (left,
    diverging colours) and when each whole layer is (right); frames of `disabling.Scan.frame`."""
    fig, axes = plt.subplots(len(scans), 2, figsize=(14, 3.3 * len(scans)), gridspec_kw={"width_ratios": [3, 1]},
                             squeeze=False)
    for row, (name, scan) in zip(axes, scans.items()):
        heads = 100 * scan[scan["head"] > 0].pivot(index="layer", columns="head", values="delta_accuracy").to_numpy()
        limit = max(1.0, float(np.abs(heads).max()))
        heatmap_by_head(heads, row[0], f"{name}: accuracy change (points) when one head is disabled", DIVERGING_CMAP,
                        -limit, limit, fmt=None, colorbar="points")
        layers = scan[(scan["head"] == 0) & (scan["layer"] > 0)]
        row[1].bar(layers["layer"], 100 * layers["delta_accuracy"],
                   color=[PALETTE["prev"] if d >= 0 else PALETTE["cls"] for d in layers["delta_accuracy"]])
        row[1].axhline(0, color="black", lw=0.8)
        row[1].set(title="whole layer disabled", xlabel="layer", ylabel="accuracy change (points)",
                   xticks=list(layers["layer"]))
    return fig


def held_out_disabling(results: Mapping[str, HeldOut]):
    """Kovaleva et al. §4.6 judged on fresh inputs, one panel per result (a task, a seed): grey dots, the accuracy
    change on the evaluation half when each single head is disabled ("random heads"); for the best and worst head
    and layer chosen on the selection half, the change there (hollow) and on the evaluation half (filled, with
    its 95 % paired interval)."""
    fig, axes = plt.subplots(1, len(results), figsize=(3.9 * len(results) + 1.5, 4.2), sharey=True, squeeze=False)
    colours = {"best head": PALETTE["right"], "worst head": PALETTE["wrong"], "best layer": PALETTE["next"],
               "worst layer": PALETTE["punct"]}
    for ax, (name, result) in zip(axes[0], results.items()):
        jitter = np.random.default_rng(0).uniform(-0.25, 0.25, len(result.heads))
        ax.scatter(jitter, 100 * result.heads, s=9, color=PALETTE["uniform"], alpha=0.6,
                   label="every head (evaluation)")
        for k, pick in enumerate(PICKS, start=1):
            row = result.picks.loc[pick]
            ax.scatter(k, 100 * row["selection"], s=40, facecolors="none", edgecolors=colours[pick],
                       label="chosen (selection half)" if k == 1 else None)
            ax.errorbar(k, 100 * row["evaluation"], yerr=[[100 * (row["evaluation"] - row["low"])],
                                                          [100 * (row["high"] - row["evaluation"])]],
                        fmt="o", color=colours[pick], capsize=3, label="chosen (evaluation half)" if k == 1 else None)
        ax.axhline(0, color="black", lw=0.8)
        ax.set_xticks(range(len(PICKS) + 1),
                      ["all\nheads"] + ["{}\n{}\n{}".format(*p.split(), result.picks.loc[p, "label"]) for p in PICKS],
                      fontsize=8)
        ax.set(title=name)
    axes[0, 0].set_ylabel("accuracy change when disabled (points)")
    axes[0, -1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1, 1))
    return fig
