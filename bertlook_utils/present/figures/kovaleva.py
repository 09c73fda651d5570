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
from matplotlib.colors import Normalize

from .. import paper
from ...core.conventions import head_label
from ...analyses.finetune import FineTuned, Stage
from ...analyses.patterns import KINDS
from ...analyses.disabling import PICKS, HeldOut
from ...analyses.relations import RelationScores
from ..viz import (ATTENTION_CMAP, DIVERGING_CMAP, LABELS, PALETTE, PATTERN_COLOURS, SEQUENTIAL_CMAP, heatmap_by_head,
                   legend_below)

UNSURE = "#d9d9d9"  # a change whose interval includes 0


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
    run), three to a row without token labels, each titled in its kind's colour. As in the paper, each map's
    colours run to its own 99th percentile (a broad map is not blank beside a stripe), under one colour bar."""
    if not maps:
        raise ValueError("give at least one map: {kind: [n, n] array}")
    columns = min(3, len(maps))
    rows = -(-len(maps) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(2.7 * columns + 1.2, 3.0 * rows), squeeze=False,
                             layout="constrained")
    for ax in axes.flat[len(maps):]:
        fig.delaxes(ax)
    panels = list(axes.flat[:len(maps)])
    for ax, (kind, attn) in zip(panels, maps.items()):
        attn = np.asarray(attn, dtype=float)
        image = ax.imshow(attn / max(float(np.percentile(attn, 99)), 1e-12), cmap=ATTENTION_CMAP, vmin=0, vmax=1,
                          interpolation="nearest")
        ax.set(xticks=[], yticks=[])
        ax.grid(False)
        ax.set_title(kind, color=PATTERN_COLOURS.get(kind, "black"), fontweight="bold")
        if captions and kind in captions:
            ax.set_xlabel(captions[kind], fontsize=9)
    fig.colorbar(image, ax=panels, shrink=0.8, label="attention / map's 99th pct.", extend="max")
    return fig


def pattern_features(labelled: pd.DataFrame, thresholds: Mapping[str, float]):
    """Every hand-labelled map (`patterns.labelled_features`) in the rules' feature space, coloured by its label by
    eye, with the rules' thresholds (dashed): diagonal against stripes (left: the diagonal, vertical+diagonal and
    vertical rules) and locality against entropy (right: the block and broad rules)."""
    t = thresholds
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 4.6), layout="constrained")
    for kind in KINDS:
        part = labelled[labelled["label"] == kind]
        axes[0].scatter(part["stripes"], part["diagonal"], s=12, color=PATTERN_COLOURS[kind], label=kind, alpha=0.7)
        axes[1].scatter(part["locality"], part["entropy"], s=12, color=PATTERN_COLOURS[kind], alpha=0.7)
    rule = dict(ls="--", color="black", lw=0.8)
    axes[0].axhline(t["diagonal"], **rule)
    axes[0].axvline(t["vertical"], **rule)
    axes[0].plot([t["mix_stripes"]] * 2, [t["diagonal"], axes[0].get_ylim()[1]], **rule | {"ls": ":"})
    axes[0].set(xlabel="stripes (3 most-attended columns,\n0 = uniform)",
                ylabel="diagonal (offsets -1..+1, above chance)",
                title="rules 1 and 3: diagonal,\nvertical+diagonal, vertical")
    axes[1].axvline(t["block"], **rule)
    axes[1].axhline(t["broad"], **rule)
    axes[1].set(xlabel="locality (1 = near the diagonal,\n0 = spread evenly)", ylabel="entropy / ln n",
                title="rules 2 and 4: block, broad")
    legend_below(fig, ncol=len(KINDS), markerscale=2)
    return fig


def confusions(matrices: Mapping[str, pd.DataFrame]):
    """Confusion matrices side by side (name -> rows = label by eye, columns = classifier, counts), each cell
    coloured by its share of the row."""
    fig, axes = plt.subplots(1, len(matrices), figsize=(4.8 * len(matrices), 4.6), squeeze=False)
    for ax, (name, matrix) in zip(axes[0], matrices.items()):
        counts = matrix.to_numpy()
        rows = counts / np.maximum(counts.sum(1, keepdims=True), 1)
        image = ax.imshow(rows, cmap=ATTENTION_CMAP, vmin=0, vmax=1)
        for (i, j), value in np.ndenumerate(counts):
            ax.text(j, i, str(value), ha="center", va="center", fontsize=9,
                    color="white" if rows[i, j] > 0.6 else "black")
        ax.set_xticks(range(counts.shape[1]), matrix.columns, rotation=45, ha="right")
        ax.set_yticks(range(counts.shape[0]), matrix.index)
        ax.set(xlabel=matrix.columns.name or "classifier", ylabel=matrix.index.name or "label by eye", title=name)
        ax.grid(False)
        ax.figure.colorbar(image, ax=ax, shrink=0.8, label="share of the row")
    return fig


def pattern_shares(shares: Mapping[tuple[str, str], pd.DataFrame]):
    """The share of each kind per layer as stacked bars, one panel per (task, model) (frames of layers x KINDS,
    e.g. `patterns.shares_by_layer`): a column per task, a row per model, one legend below."""
    tasks = list(dict.fromkeys(name for name, _ in shares))
    models = list(dict.fromkeys(variant for _, variant in shares))
    fig, axes = plt.subplots(len(models), len(tasks), figsize=(3.1 * len(tasks) + 0.6, 2.5 * len(models) + 0.7),
                             sharex=True, sharey=True, squeeze=False, layout="constrained")
    for (name, variant), frame in shares.items():
        ax = axes[models.index(variant), tasks.index(name)]
        bottom = np.zeros(len(frame))
        for kind in KINDS:
            ax.bar(frame.index, frame[kind], bottom=bottom, color=PATTERN_COLOURS[kind], label=kind, width=0.8)
            bottom += frame[kind].to_numpy()
        ax.set(title=f"{name}, {variant}", xticks=list(frame.index))
        ax.grid(False)
    for ax in axes[-1]:
        ax.set_xlabel("layer")
    for ax in axes[:, 0]:
        ax.set_ylabel("share of maps\n(rules)")
    for ax in axes.flat:
        if not ax.has_data():
            fig.delaxes(ax)
    legend_below(fig, ncol=len(KINDS) if len(tasks) >= 3 else 3)
    return fig


def pattern_share_estimates(estimates: Mapping[str, pd.DataFrame], kinds: Sequence[str] = KINDS):
    """Kovaleva et al. Fig 2, with its uncertainty: per kind (a panel), the share of all maps of each (task, model)
    by several estimates (name -> long frame with task, model, kind, share, low, high), side by side with their
    intervals, two panels to a row; on the heterogeneous panel, the paper's range (grey band)."""
    columns = min(2, len(kinds))
    rows = -(-len(kinds) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(5.0 * columns + 0.6, 2.4 * rows + 1.8), sharex=True,
                             sharey=True, squeeze=False, layout="constrained")
    names = list(estimates)
    colours = [PALETTE["run"], PALETTE["cls"], PALETTE["punct"], PALETTE["prev"]]
    groups = list(dict.fromkeys(zip(*(estimates[names[0]][c] for c in ("task", "model")))))
    for ax, kind in zip(axes.flat, kinds):
        if kind == "heterogeneous":
            low, high = paper.DARK_SECRETS["heterogeneous_share"]
            ax.axhspan(low, high, color=PALETTE["paper"], alpha=0.5, lw=0, label="paper (BERT-base, GLUE)")
        for k, (name, colour) in enumerate(zip(names, colours)):
            frame = estimates[name].set_index(["task", "model", "kind"])
            x = np.arange(len(groups)) + (k - (len(names) - 1) / 2) * 0.25
            part = frame.loc[[(t, m, kind) for t, m in groups]]
            ax.errorbar(x, part["share"], yerr=[part["share"] - part["low"], part["high"] - part["share"]], fmt="o",
                        color=colour, capsize=2, ms=4, label=name)
        ax.set_xticks(range(len(groups)), [f"{t}, {m}" for t, m in groups], rotation=40, ha="right", fontsize=9)
        ax.set(title=kind)
    for row in axes:
        row[0].set_ylabel("share of maps")
    for ax in axes.flat[len(kinds):]:
        ax.set_visible(False)
    legend_below(fig, ncol=2)
    return fig


def map_similarity(similarity: Mapping[str, np.ndarray]):
    """Per task, the cosine similarity of every head's maps before and after fine-tuning (a layers x heads
    heatmap, one colour scale for all), and its mean per layer (the last panel); two panels to a row."""
    low = min(float(s.min()) for s in similarity.values())
    columns = min(2, len(similarity) + 1)
    rows = -(-(len(similarity) + 1) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(5.2 * columns, 3.1 * rows), squeeze=False, layout="constrained")
    mean = axes.flat[len(similarity)]
    for ax, (name, sim) in zip(axes.flat, similarity.items()):
        heatmap_by_head(sim, ax, f"{name}: cosine before vs after", SEQUENTIAL_CMAP, vmin=low, vmax=1, fmt=None,
                        colorbar="cosine similarity")
        mean.plot(range(1, sim.shape[0] + 1), sim.mean(1), marker="o", label=name)
    mean.set(title="mean over heads", xlabel="layer", ylabel="cosine similarity")
    mean.legend(fontsize=10)
    for ax in axes.flat[len(similarity) + 1:]:
        fig.delaxes(ax)
    return fig


# -- 09: relation-specific heads, [CLS] and [SEP], vertical stripes, disabling -----------------------
def relation_scores(results: Mapping[str, RelationScores], q: float = 99):
    """Kovaleva et al. §4.2 on the silver proxy: each head's score (mean maximum weight between predicate and
    argument words) minus its null's q-th percentile, as a layers x heads heatmap, one panel per null (name ->
    RelationScores of the same frames, so the same scores), on one symmetric colour scale: blue heads (a dot)
    beat that null, red ones do not. Boxed, with its margin written in: the paper's pick, the heads above the q-th
    percentile of all heads' scores."""
    margins = {name: result.score() - result.null_percentile(q) for name, result in results.items()}
    limit = max(float(np.abs(margin).max()) for margin in margins.values())
    top = [(int(layer), int(head)) for layer, head in np.argwhere(next(iter(results.values())).top_heads(q)) + 1]
    fig, axes = plt.subplots(len(results), 1, figsize=(7.6, 3.1 * len(results) + 0.5), squeeze=False,
                             layout="constrained")
    for ax, (name, result) in zip(axes[:, 0], results.items()):
        shown = [margins[name][layer - 1, head - 1] for layer, head in top]
        heatmap_by_head(margins[name], ax, f"{name} null: {int(result.above(q).sum())} of {result.score().size} "
                        "heads above it (blue, dot)", DIVERGING_CMAP, -limit, limit, fmt=None, boxes=top,
                        notes={head: f"{round(margin, 2) + 0.0:+.2f}" for head, margin in zip(top, shown)},
                        colorbar=f"score − null's {q:g}th pct.")
        for text, margin in zip(ax.texts, shown):
            text.set_color("white" if abs(margin) > 0.6 * limit else "black")
        above = [head for head in np.argwhere(result.above(q)) if tuple(head + 1) not in top]
        if above:
            ax.scatter(*np.array(above)[:, ::-1].T, s=9, color="black")
    fig.suptitle(f"each head's score minus its null's {q:g}th percentile; boxed: the paper's pick, "
                 f"{', '.join(head_label(*head) for head in top)}\n(above the {q:g}th percentile of all heads' "
                 "scores)", fontsize=11)
    return fig


def special_by_layer(changes: Mapping[str, pd.DataFrame]):
    """Kovaleva et al. §4.5: attention to [CLS] (solid) and to [SEP] (dashed) per layer, before (grey) and
    after fine-tuning (colour), with 95 % intervals of the change; one panel per task
    (task -> `tokentypes.special_change`)."""
    fig, axes = plt.subplots(1, len(changes), figsize=(3.3 * len(changes) + 0.4, 3.7), sharey=True, squeeze=False,
                             layout="constrained")
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
    axes[0, 0].set_ylabel("share of attention\n(mean over rows)")
    legend_below(fig, ncol=2)
    return fig


def cls_by_type(changes: Mapping[str, pd.DataFrame], categories: Sequence[str] | None = None):
    """Kovaleva et al. §4.5: what the [CLS] row of one layer attends to, by token category, before and after
    fine-tuning (bars; on the after bar the 95 % interval of the change), and each category's share of the tokens
    (black ticks: what a uniform row would give); one panel per task (task -> `tokentypes.exclusive_cls_change`,
    or `tokentypes.cls_change` for the overlapping types)."""
    fig, axes = plt.subplots(1, len(changes), figsize=(3.4 * len(changes) + 0.4, 4.0), sharey=True, squeeze=False,
                             layout="constrained")
    for ax, (name, frame) in zip(axes[0], changes.items()):
        part = frame if categories is None else frame.set_index("category").loc[list(categories)].reset_index()
        x = np.arange(len(part))
        ax.bar(x - 0.2, part["before"], 0.4, color=PALETTE["uniform"], label=Stage.PRETRAINED)
        ax.bar(x + 0.2, part["after"], 0.4, color=PALETTE["cls"], label=Stage.FINE_TUNED,
               yerr=[part["change"] - part["change_low"], part["change_high"] - part["change"]], capsize=2)
        ax.scatter(x, part["base_rate"], marker="_", s=300, color="black", zorder=3, label="share of tokens")
        ax.set_xticks(x, part["category"], rotation=60, ha="right", fontsize=10)
        ax.set(title=name)
    axes[0, 0].set_ylabel("share of the [CLS] row")
    legend_below(fig, ncol=3)
    return fig


def stripe_types(tables: Mapping[str, pd.DataFrame], categories: Sequence[str] | None = None):
    """Kovaleva et al. §4.4: the token types that vertical stripes fall on (share of all stripes, colour)
    against each type's share of the tokens (grey); one panel per name -> `TokenTypeAttention.stripe_table`."""
    fig, axes = plt.subplots(1, len(tables), figsize=(3.4 * len(tables) + 0.4, 4.0), sharey=True, squeeze=False,
                             layout="constrained")
    for ax, (name, frame) in zip(axes[0], tables.items()):
        part = frame if categories is None else frame.set_index("category").loc[list(categories)].reset_index()
        x = np.arange(len(part))
        ax.bar(x - 0.2, part["share_of_tokens"], 0.4, color=PALETTE["uniform"], label="share of tokens")
        ax.bar(x + 0.2, part["share_of_stripes"], 0.4, color=PALETTE["cls"], label="share of stripes")
        ax.set_xticks(x, part["category"], rotation=60, ha="right", fontsize=10)
        ax.set(title=name)
    axes[0, 0].set_ylabel("share")
    legend_below(fig, ncol=2)
    return fig


def disabling_scan(scans: Mapping[str, pd.DataFrame]):
    """Per task (a row of panels): the change in accuracy (points) when each head is disabled (left, a heatmap)
    and when each whole layer is (right, bars), all on one symmetric scale over every task (blue: disabling
    helps, red: it hurts; the bars' axis spans the same ±limit). Frames of `disabling.Scan.frame`; where a frame
    also has `low` and `high` (the change's interval, e.g. from `disabling.evaluate` of every run), the changes
    whose interval includes 0 are grey (`UNSURE`)."""
    changed = [100 * scan.loc[scan["layer"] > 0, "delta_accuracy"].abs().max() for scan in scans.values()]
    limit = max(1.0, float(max(changed)))
    cmap = plt.get_cmap(DIVERGING_CMAP).with_extremes(bad=UNSURE)
    norm = Normalize(-limit, limit)
    intervals = all({"low", "high"} <= set(scan) for scan in scans.values())
    fig, axes = plt.subplots(len(scans), 2, figsize=(9.6, 2.8 * len(scans) + 0.5),
                             gridspec_kw={"width_ratios": [3, 1.3]}, squeeze=False, layout="constrained")
    for row, (name, scan) in zip(axes, scans.items()):
        unsure = (scan["low"] <= 0) & (scan["high"] >= 0) if intervals else pd.Series(False, index=scan.index)
        scan = scan.assign(points=(100 * scan["delta_accuracy"]).mask(unsure))
        heads = scan[scan["head"] > 0].pivot(index="layer", columns="head", values="points").to_numpy()
        heatmap_by_head(heads, row[0], f"{name}: one head disabled", cmap, -limit, limit, fmt=None,
                        colorbar="accuracy change (points)")
        layers = scan[(scan["head"] == 0) & (scan["layer"] > 0)]
        row[1].bar(layers["layer"], 100 * layers["delta_accuracy"], edgecolor="black", lw=0.6,
                   color=[UNSURE if np.isnan(p) else cmap(norm(p)) for p in layers["points"]])
        row[1].axhline(0, color="black", lw=1)
        row[1].set(title="whole layer", xlabel="layer", ylabel="points", ylim=(-limit, limit),
                   xticks=list(layers["layer"]))
    fig.suptitle("accuracy change when disabled, one scale for all tasks; " +
                 ("grey: its 95 % interval includes 0" if intervals else "no intervals: see the held-out test"),
                 fontsize=11)
    return fig


def held_out_disabling(results: Mapping[str, HeldOut]):
    """Kovaleva et al. §4.6 judged on fresh inputs, one panel per result (a task, a seed): grey dots, the accuracy
    change on the evaluation half when each single head is disabled ("random heads"); for the best and worst head
    and layer chosen on the selection half, the change there (hollow) and on the evaluation half (filled, with
    its 95 % paired interval)."""
    fig, axes = plt.subplots(1, len(results), figsize=(3.3 * len(results) + 0.4, 4.2), sharey=True, squeeze=False,
                             layout="constrained")
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
                      fontsize=9)
        ax.set(title=name)
    axes[0, 0].set_ylabel("accuracy change when disabled\n(points)")
    legend_below(fig, ncol=3)
    return fig


def pattern_gallery(items: Sequence[tuple], per_kind: int = 1, max_tokens: int = 20, columns: int = 3):
    """Notebook 08's gallery as one still figure (what a page without a kernel shows): each kind's `per_kind`
    shortest maps, kinds in the order the items give them, `columns` maps a row, with token labels (the first
    `max_tokens` tokens: more would overlap at 8 pt on a 3.4-inch map), each titled in its kind's colour with its
    caption; colours up to each map's 99th percentile. items: (kind, Encoded, layer, head, caption), layer and
    head 1-indexed."""
    from ..viz import plot_head

    kinds = list(dict.fromkeys(item[0] for item in items))
    if not kinds:
        raise ValueError("give at least one (kind, Encoded, layer, head, caption) item")
    shown = [item for kind in kinds
             for item in sorted((i for i in items if i[0] == kind), key=lambda i: i[1].n_tokens)[:per_kind]]
    rows = -(-len(shown) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(3.4 * columns, 3.7 * rows), squeeze=False,
                             layout="constrained")
    for ax, (kind, enc, layer, head, caption) in zip(axes.flat, shown):
        cut = f" (first {max_tokens} tokens)" if enc.n_tokens > max_tokens else ""
        plot_head(enc, layer, head, ax=ax, max_tokens=max_tokens, vmax=None, colorbar=False,
                  title=f"{kind}{cut}\n{caption}")
        ax.title.set(color=PATTERN_COLOURS.get(kind, "black"), fontsize=9)
    for ax in axes.flat[len(shown):]:
        ax.set_visible(False)
    fig.suptitle("the gallery's shortest map of each kind (colours up to each map's 99th percentile)")
    return fig
