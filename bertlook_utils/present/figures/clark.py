"""Clark et al. (2019)'s figures and the plots beside them in notebooks 02-07, one function each.

Each function takes the result objects the analyses return, draws with `viz`'s primitives and palette, and
returns its Figure (or the Axes it was given); nothing here computes a statistic. By notebook:

    02  attention_and_gradient, sink_gradient_by_head, sink_ablation,      (Fig 3, the causal test)
        value_norms
    03  entropy_by_layer, broad_definitions                                 (Fig 4)
    04  table1, relation_head, relation_heads, accuracy_grid                (Table 1, Fig 5)
    05  antecedent_attention, table2, accuracy_by_rank                      (Table 2)
    06  probe_curves, probe_weights, weight_against_accuracy                (Table 3)
    07  mds_map, dendrogram, aligned_maps, permutation_tests                (Fig 6)
"""
from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.patches import Rectangle

from .. import alttext, paper
from ...analyses.clustering import BEHAVIOUR_NAMES, BEHAVIOURS, ClusterResult, GroupTest, linkage
from ...core.conventions import check_head, head_label
from ...analyses.coref import COLUMNS as MENTION_TYPES, CorefResult, Reading, System, best_head_label
from ...data.corefdata import Passage
from ...analyses.gradients import CATEGORIES, SINK_HEAD, AblationResult, GradientResult
from ...analyses.probes import RANDOM_INIT, Model, ProbeResults
from ...analyses.surface import BROAD_ENTROPY, BROAD_MAX_WEIGHT
from ...analyses.syntax import DIRECTIONS, ParsedAttention, predictions
from ..viz import (ATTENTION_CMAP, DIVERGING_CMAP, LABELS, PALETTE, SEQUENTIAL_CMAP, heatmap_by_head, literal,
                   plot_by_layer)


# -- 02: the [SEP] no-op argument ---------------------------------------------------------------------
def attention_and_gradient(result: GradientResult):
    """Clark et al. Fig 3's two panels: per layer, the attention mass to [SEP], [CLS], punctuation and other
    tokens (left) and the mean |∂L/∂α| per weight to them (right, log scale), with 95 % intervals over inputs."""
    layers = result.by_layer()
    n_layers = int(layers["layer"].max())
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, value, label in ((axes[0], "attention", "attention mass"),
                             (axes[1], "gradient", "mean |∂L/∂α| per weight")):
        for category in CATEGORIES:
            rows = layers[layers["category"] == category]
            colour = PALETTE[category]
            ax.plot(rows["layer"], rows[value], "o-", color=colour, label=LABELS.get(category, category))
            ax.fill_between(rows["layer"], rows[f"{value}_low"], rows[f"{value}_high"], color=colour, alpha=0.2)
        ax.set(xlabel="layer", ylabel=label, xticks=range(1, n_layers + 1))
    axes[0].set_title("where the attention goes")
    axes[1].set_title(f"gradient importance ({result.objective})")
    axes[1].set_yscale("log")
    axes[0].legend(fontsize=10)
    return fig


def sink_gradient_by_head(result: GradientResult):
    """One dot per head: its attention to [CLS] (left) or [SEP] (right) against the gradient on that attention
    relative to the gradient on other tokens (log scale), coloured by layer."""
    attention, gradient = result.by_head("attention"), result.by_head("gradient")
    fig, axes = plt.subplots(1, 2, figsize=(12, 4), sharey=True)
    for ax, category in zip(axes, ("cls", "sep")):
        points = ax.scatter(attention[category], gradient[category] / gradient["other"], c=attention["layer"],
                            cmap=SEQUENTIAL_CMAP, s=22)
        ax.axhline(1, ls="--", color=PALETTE["uniform"], lw=1)
        ax.set(xlabel=f"attention to {LABELS[category]}", yscale="log",
               title=f"heads: attention to {LABELS[category]} and its gradient")
    axes[0].set_ylabel("gradient ÷ gradient on other tokens")
    fig.colorbar(points, ax=axes, label="layer")
    return fig


def sink_ablation(ablation: AblationResult, distance: str = "pooled_distance"):
    """The causal test, one panel per way of giving the moved mass away: per edited layer (all its heads), the
    mean distance (95 % interval) after moving all of the sink mass, the matched mass, and the same mass between
    random ordinary tokens; the dashed line is the distance between two different inputs (log scale)."""
    summary = ablation.summary(distance)
    per_layer = summary[summary["scope"] == "layer"]
    styles = {("sink", "all"): ("-", "o"), ("sink", "matched"): ("--", "s"), ("random", "matched"): (":", "^")}
    colours = {"sink": PALETTE["cls"], "random": PALETTE["other"]}
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, mode in zip(axes, ("renormalise", "uniform")):
        for (source, amount), (line, marker) in styles.items():
            rows = per_layer[(per_layer["source"] == source) & (per_layer["amount"] == amount)
                             & (per_layer["mode"] == mode)]
            ax.errorbar(rows["layer"], rows["mean"], yerr=[rows["mean"] - rows["low"], rows["high"] - rows["mean"]],
                        ls=line, marker=marker, color=colours[source], capsize=3,
                        label=f"{source} tokens, {amount} mass")
        ax.axhline(ablation.reference, ls="--", color=PALETTE["uniform"], lw=1, label="two different segments")
        ax.set(yscale="log", xlabel="edited layer (all heads)", xticks=sorted(per_layer["layer"].unique()),
               title=f"moved mass given to ordinary tokens:\n{mode}")
    axes[0].set_ylabel("pooled-embedding cosine distance")
    axes[0].legend(fontsize=9, loc="lower center")
    return fig


def value_norms(norms: pd.DataFrame, threshold: float = SINK_HEAD):
    """One dot per head (`gradients.value_norms`): its attention to [CLS] and [SEP] against the length of what
    attending to [CLS] writes, relative to an ordinary token (|v[CLS]| ÷ |v other| through the output
    projection, log scale), coloured by layer; the dotted line marks the sink heads (attention > threshold)."""
    ratio = norms["output_ratio"].where(norms["output_ratio"].notna(), norms["value_ratio"])
    fig, ax = plt.subplots(figsize=(6.5, 4))
    points = ax.scatter(norms["sink"], ratio, c=norms["layer"], cmap=SEQUENTIAL_CMAP, s=22)
    ax.axhline(1, ls="--", color=PALETTE["uniform"], lw=1)
    ax.axvline(threshold, ls=":", color=PALETTE["cls"], lw=1)
    ax.text(threshold, ax.get_ylim()[1], f" sink heads (> {threshold:g})", color=PALETTE["cls"], va="top", fontsize=9)
    ax.set(xlabel="attention to [CLS] and [SEP]", ylabel="|v[CLS]| ÷ |v ordinary token|", yscale="log",
           title="heads: sink attention and the length of the sink's value")
    fig.colorbar(points, ax=ax, label="layer")
    return fig


# -- 03: entropy --------------------------------------------------------------------------------------
def broad_definitions(broad: pd.DataFrame, max_weight: float = BROAD_MAX_WEIGHT, entropy_above: float = BROAD_ENTROPY):
    """One dot per head (`surface.broad_heads`): mean row entropy against mean largest weight per row, with the
    two thresholds of a "broad" head (largest weight <= max_weight: notebook 03; entropy > entropy_above: 07)."""
    fig, ax = plt.subplots(figsize=(6.5, 4))
    points = ax.scatter(broad["max_weight"], broad["entropy"], c=broad["layer"], cmap=SEQUENTIAL_CMAP, s=22)
    ax.axvline(max_weight, ls=":", color=PALETTE["broad"], lw=1, label=f"largest weight ≤ {max_weight:g}")
    ax.axhline(entropy_above, ls="--", color=PALETTE["uniform"], lw=1, label=f"entropy > {entropy_above:g} nats")
    ax.set(xscale="log", xlabel="largest weight in a row (mean over rows)", ylabel="entropy (nats)",
           title="two definitions of a broad head")
    ax.legend(fontsize=9, loc="lower left")
    fig.colorbar(points, ax=ax, label="layer")
    return fig


def entropy_by_layer(entropy: pd.DataFrame):
    """Clark et al. Fig 4: each head's mean entropy and the entropy of [CLS]'s attention, by layer, with the
    entropy of uniform attention (dashed)."""
    uniform = float(entropy["uniform"].mean())
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    plot_by_layer(entropy, ["entropy"], ax=axes[0], ylabel="entropy (nats)", title="attention entropy per head")
    plot_by_layer(entropy, ["cls_entropy"], ax=axes[1], ylabel="entropy (nats)", title="entropy of [CLS] attention")
    for ax in axes:
        ax.axhline(uniform, ls="--", color=PALETTE["uniform"], label="uniform")
        ax.set_ylim(0, uniform + 0.3)
        ax.legend(fontsize=10)
    return fig


# -- 04: syntax heads ---------------------------------------------------------------------------------
def _word_lines(ax, words: Sequence[str], weights: np.ndarray, rows: Sequence[int], colour: str, title: str,
                min_weight: float, marks: dict[int, tuple[str, str]] | None = None) -> None:
    """Two columns of words; a line from word i (left) to word j (right) with opacity weights[i, j]; rows in
    `rows` in `colour`, the others faint grey; left labels of `rows` in bold, with `marks[i]` = (colour, sign)
    after the word in that colour."""
    n = len(words)
    highlighted = set(rows)
    for i in range(n):
        for j in range(n):
            w = float(weights[i, j])
            if w >= min_weight:
                ax.plot([0, 1], [i, j], lw=2 if i in highlighted else 1,
                        color=colour if i in highlighted else PALETTE["uniform"],
                        alpha=min(1.0, w) if i in highlighted else 0.25 * min(1.0, w))
    for i, word in enumerate(words):
        bold = i in highlighted
        mark_colour, sign = (marks or {}).get(i, ("black", ""))
        ax.text(-0.05, i, literal(word) + (f" {sign}" if sign else ""), ha="right", va="center", fontsize=9,
                fontweight="bold" if bold else "normal", color=mark_colour)
        ax.text(1.05, i, literal(word), ha="left", va="center", fontsize=9)
    ax.set_xlim(-1.0, 2.0)
    ax.set_ylim(n - 0.5, -0.5)
    ax.axis("off")
    ax.set_title(title, fontsize=10)


def relation_head(example: ParsedAttention, layer: int, head: int, relation: str, direction: str = "dep->head",
                  axes=None, min_weight: float = 0.1, max_words: int = 30):
    """Clark et al. Fig 5 style, for one sentence: (left) head `layer-head`'s attention between the words,
    the rows that matter for `relation` in colour (dep->head: from each dependent; head->dep: from each
    gold head), each renormalised over the other words (no [CLS], [SEP] or self, as the argmax sees them);
    a highlighted word's label is marked ✓ (green) where the head's prediction, as scored, is the gold arc and
    ✗ (orange-red) where it is not, and the title counts them; (right) the gold (spaCy) arcs of `relation` drawn
    the same way. Returns the two axes."""
    check_head(layer, head, *example.word_attn.shape[:2])
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, not {direction!r}")
    if axes is None:
        axes = plt.subplots(1, 2, figsize=(7, 0.26 * min(max_words, len(example.words)) + 0.8))[1]
    n = min(max_words, len(example.words))
    attn = example.word_attn[layer - 1, head - 1, 1:n + 1, 1:n + 1].astype(float)
    np.fill_diagonal(attn, 0)
    attn /= np.maximum(attn.sum(-1, keepdims=True), 1e-12)
    dep = [d for d in range(n) if example.relations[d] == relation and 0 < example.heads[d] <= n]
    gold_head = [int(example.heads[d]) - 1 for d in dep]
    predicted = predictions(example.word_attn)[DIRECTIONS.index(direction), layer - 1, head - 1] - 1  # [n_words]
    gold = np.zeros((n, n))
    if direction == "dep->head":
        rows, gold[dep, gold_head] = dep, 1
        found = {d: predicted[d] == h for d, h in zip(dep, gold_head)}
    else:  # a head's label is marked right when the argmax finds it for every one of its dependents shown
        rows, gold[gold_head, dep] = sorted(set(gold_head)), 1
        found = {h: all(predicted[d] == h for d, g in zip(dep, gold_head) if g == h) for h in gold_head}
    marks = {i: (PALETTE["right"], "✓") if ok else (PALETTE["wrong"], "✗") for i, ok in found.items()}
    arrow = "dependent → head" if direction == "dep->head" else "head → dependent"
    _word_lines(axes[0], example.words[:n], attn, rows, PALETTE["prev"],
                f"{relation}: head {head_label(layer, head)} ({arrow}),\n{sum(found.values())} of {len(found)} "
                f"right on this sentence", min_weight, marks)
    _word_lines(axes[1], example.words[:n], gold, rows, PALETTE["next"], f"gold (spaCy) {relation} arcs", 0.5)
    return axes


def relation_heads(examples: Sequence[ParsedAttention], heads: Sequence[tuple[str, int, int, str]], columns: int = 2):
    """Fig 5: `relation_head` of each (relation, layer, head, direction) on its example sentence, `columns`
    pairs of panels per row. Returns the Figure."""
    if len(examples) != len(heads):
        raise ValueError(f"one example per head: {len(examples)} examples for {len(heads)} heads")
    for example, (_, layer, head, _) in zip(examples, heads):
        check_head(layer, head, *example.word_attn.shape[:2])
    rows = -(-len(heads) // columns)
    words = min(30, max(len(example.words) for example in examples))  # relation_head's max_words
    fig, axes = plt.subplots(rows, 2 * columns, figsize=(5.6 * columns, (0.24 * words + 1.1) * rows), squeeze=False)
    for example, (relation, layer, head, direction), pair in zip(examples, heads, axes.reshape(-1, 2)):
        relation_head(example, layer, head, relation, direction, axes=pair)
    for ax in axes.reshape(-1)[2 * len(heads):]:
        ax.set_axis_off()
    return fig


def accuracy_grid(frame: pd.DataFrame, ax=None, title: str = ""):
    """Every head's accuracy for one relation (a `syntax.accuracy_frame`) as a layers x heads heatmap in %,
    the best head boxed and named in the title."""
    table = frame.pivot(index="layer", columns="head", values="accuracy")
    values = 100 * table.to_numpy()
    layer, head = (int(i) + 1 for i in np.unravel_index(np.argmax(values), values.shape))
    label = f"{title}{': ' if title else ''}best head {head_label(layer, head)} = {values.max():.1f} %"
    return heatmap_by_head(values, ax, label, vmax=100, fmt="{:.0f}", colorbar="accuracy (%)", boxes=[(layer, head)])


def table1(heads: pd.DataFrame, baseline: pd.DataFrame, title: str | None = None):
    """Table 1 as a dot plot, one row per relation of the paper (`syntax.head_accuracy`, `offset_baseline` of the
    same relations, spaCy's names): the best head (filled, with this run's 95 % interval) and the best fixed offset
    (hollow), the paper's in grey and this run's in colour; the line between them is the head's gain over the
    offset. Grey diamonds: Clark et al.'s released notebook, on the rows where it prints other numbers."""
    reported = paper.TABLE1.assign(relation=[paper.SD_TO_SPACY.get(r, r) for r in paper.TABLE1["relation"]])
    reported = reported.set_index("relation")  # in spaCy's names: nn -> compound
    ours, offsets = heads.set_index("relation"), baseline.set_index("relation")
    relations = [r for r in reported.index if r in ours.index and r in offsets.index]
    if not relations:
        raise ValueError("heads and baseline share no relation with the paper's Table 1")
    fig, ax = plt.subplots(figsize=(11, 0.3 * len(relations) + 1.1))
    y = np.arange(len(relations))
    for shift, colour, head, base, name in (
            (-0.17, PALETTE["paper"], reported.loc[relations, "accuracy"], reported.loc[relations, "baseline"],
             "paper (BERT-base, WSJ)"),
            (0.17, PALETTE["run"], 100 * ours.loc[relations, "accuracy"], 100 * offsets.loc[relations, "accuracy"],
             "this run")):
        ax.hlines(y + shift, base, head, color=colour, lw=1.5, alpha=0.6)
        ax.scatter(base, y + shift, s=36, facecolors="white", edgecolors=colour, zorder=3, label=f"{name}: best offset")
        ax.scatter(head, y + shift, s=40, color=colour, zorder=3, label=f"{name}: best head")
    released = [i for i, r in enumerate(relations) if (reported.loc[r, ["accuracy", "baseline"]].to_numpy()
                                                       != reported.loc[r, ["released_accuracy", "released_baseline"]]
                                                       .to_numpy()).any()]
    if released:
        rows = reported.loc[[relations[i] for i in released]]
        ax.hlines(y[released] - 0.17, rows["released_baseline"], rows["released_accuracy"], color=PALETTE["paper"],
                  lw=1, ls=":", zorder=2)
        ax.scatter(rows["released_baseline"], y[released] - 0.17, s=36, marker="D", facecolors="white",
                   edgecolors=PALETTE["paper"], zorder=3, label="released notebook, where it differs: best offset")
        ax.scatter(rows["released_accuracy"], y[released] - 0.17, s=40, marker="D", color=PALETTE["paper"], zorder=3,
                   label="released notebook, where it differs: best head")
    low, high = 100 * ours.loc[relations, "low"], 100 * ours.loc[relations, "high"]
    ax.errorbar(100 * ours.loc[relations, "accuracy"], y + 0.17, xerr=[100 * ours.loc[relations, "accuracy"] - low,
                high - 100 * ours.loc[relations, "accuracy"]], fmt="none", ecolor=PALETTE["run"], capsize=2)
    names = [f"{r} ({reported.loc[r, 'head']} | {head_label(int(ours.loc[r, 'layer']), int(ours.loc[r, 'head']))})"
             for r in relations]
    ax.set_yticks(y, names, fontsize=9)
    ax.set_ylim(len(relations) - 0.5, -0.5)
    ax.set(xlim=(0, 100), xlabel="accuracy (%): the word with most attention is the syntactic head")
    ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1))
    ax.set_title(title or "Table 1: best head vs best fixed offset (head: paper | this run)")
    gain = 100 * (ours.loc[relations, "accuracy"] - offsets.loc[relations, "accuracy"])
    most = gain.idxmax()
    alttext.headline(fig, f"In this run the best head beats the best fixed offset on {int((gain > 0).sum())} of "
                          f"{len(relations)} relations of the paper's Table 1, most on {most} (by "
                          f"{alttext.number(gain[most])} points, {alttext.number(100 * ours.loc[most, 'accuracy'])} % "
                          f"against {alttext.number(100 * offsets.loc[most, 'accuracy'])} %)")
    return fig


# -- 05: coreference ----------------------------------------------------------------------------------
def antecedent_attention(passage: Passage, head_map: np.ndarray, ax=None, title: str | None = None,
                         first_word: int = 1, max_label: int = 18):
    """One head's attention from each coreferent mention's head word (rows) to every mention's head word
    (columns; only earlier mentions are candidates, later ones are blank). head_map: [m, m] word-level map.
    A green frame marks the antecedents, a dot the mention the head picks (white: right, orange-red: wrong)."""
    head_map = np.asarray(head_map)
    if head_map.ndim != 2:
        raise ValueError(f"head_map must be one head's [m, m] word-level map, got {head_map.shape}")
    mentions = passage.mentions
    rows = passage.coreferent()
    heads = np.array([m.head for m in mentions]) + first_word
    grid = np.full((len(rows), len(mentions)), np.nan)
    for r, i in enumerate(rows):
        grid[r, :i] = head_map[heads[i], heads[:i]]
    ax = ax or plt.subplots(figsize=(0.27 * len(mentions) + 2.5, 0.3 * len(rows) + 2))[1]
    vmax = np.nanmax(grid) if np.isfinite(grid).any() else 1
    image = ax.imshow(np.ma.masked_invalid(grid), cmap=ATTENTION_CMAP, vmin=0, vmax=vmax, aspect="auto",
                      interpolation="nearest")
    for r, i in enumerate(rows):
        for j in passage.antecedents(i):
            ax.add_patch(Rectangle((j - 0.5, r - 0.5), 1, 1, fill=False, edgecolor=PALETTE["right"], lw=1.6))
        pick = int(np.nanargmax(grid[r, :i]))
        right = mentions[pick].entity == mentions[i].entity
        ax.plot(pick, r, "o", ms=4.5, color="white" if right else PALETTE["wrong"], mec="black", mew=0.6)

    def short(j):
        text = passage.mention_text(j)
        return literal(text if len(text) <= max_label else text[: max_label - 1] + "…")

    ax.set_xticks(range(len(mentions)), [f"{short(j)} ({j})" for j in range(len(mentions))], rotation=90, fontsize=9)
    ax.set_yticks(range(len(rows)), [f"({i}) {short(i)}" for i in rows], fontsize=9)
    ax.set_xlabel("earlier mention (its head word)")
    ax.set_ylabel("coreferent mention")
    ax.grid(False)
    ax.set_title(title or "attention from a mention to earlier mentions")
    ax.figure.colorbar(image, ax=ax, shrink=0.7, label="attention weight")
    return ax


def table2(result: CorefResult, title: str | None = None):
    """Table 2 as bars, one panel per mention type (two a row): the paper's accuracy and this run's (held-out half,
    95 % bootstrap interval) for every system; the paper's head 5-4 beside this run's best head under each
    reading of the argmax (earlier mentions' head words; every earlier word), the paper's neural system
    (Wiseman et al. 2015) alone. Returns the Figure."""
    rows = -(-len(MENTION_TYPES) // 2)
    fig, axes = plt.subplots(rows, 2, figsize=(10, 3.4 * rows + 0.8), sharey=True, layout="constrained")
    axes = axes.ravel()
    ours = result.table.set_index(["system", "type"])
    best = result.readings.set_index("reading")
    heads = {r: best_head_label((int(best.loc[r, "layer"]), int(best.loc[r, "head"])), r)
             for r in (Reading.MENTION_HEADS, Reading.EARLIER_WORDS)}
    pairs = [(System.NEAREST, System.NEAREST), (System.HEAD_WORD, System.HEAD_WORD), (System.SIEVE, System.SIEVE),
             (paper.TABLE2_HEAD, heads[Reading.MENTION_HEADS]), (paper.TABLE2_HEAD, heads[Reading.EARLIER_WORDS]),
             (paper.TABLE2_NEURAL, None)]
    names = ["nearest", "head\nword", "sieves", f"head\n{best.loc[Reading.MENTION_HEADS, 'label']}\n(mention\nheads)",
             f"head\n{best.loc[Reading.EARLIER_WORDS, 'label']}\n(earlier\nwords)", "neural\n(paper\nonly)"]
    reported = paper.TABLE2.set_index("system")
    x = np.arange(len(pairs))
    for ax, t in zip(axes, MENTION_TYPES):
        theirs = [reported.loc[p, t] for p, _ in pairs]
        mine = np.array([[np.nan] * 3 if s is None else [ours.loc[(s, t), c] for c in ("accuracy", "low", "high")]
                         for _, s in pairs]) * 100
        ax.bar(x - 0.2, [np.nan if v is None else v for v in theirs], 0.4, color=PALETTE["paper"],
               label=f"paper: BERT-base on CoNLL-2012 (best head 5-4, argmax not stated; neural: "
                     f"{paper.TABLE2_NEURAL_CITATION})")
        ax.bar(x + 0.2, mine[:, 0], 0.4, color=PALETTE["run"], yerr=[mine[:, 0] - mine[:, 1], mine[:, 2] - mine[:, 0]],
               capsize=2, label="this run: the kit's stories, held-out half (best head per reading, chosen on the "
                                "selection half)")
        ax.set_xticks(x, names, fontsize=9)
        ax.set_ylim(0, 100)
        ax.set_title(t)
    for ax in axes[len(MENTION_TYPES):]:
        ax.set_axis_off()
    for ax in axes[::2]:
        ax.set_ylabel("antecedent selection\naccuracy (%)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=1, fontsize=10)
    if title:
        fig.suptitle(title)
    return fig


def accuracy_by_rank(by_rank: pd.DataFrame):
    """Accuracy (%) of each system (`coref.accuracy_by_rank`) by how many mentions back the nearest antecedent
    is; the last rank counts that many or more."""
    fig, ax = plt.subplots(figsize=(7, 3.6))
    colours = [PALETTE["uniform"], PALETTE["punct"], PALETTE["next"], PALETTE["sep"], PALETTE["cls"]]
    for name, colour in zip(by_rank.columns[2:], colours):
        ax.plot(by_rank["rank"], 100 * by_rank[name], "o-", color=colour, label=name)
    last = by_rank["rank"].max()
    ax.set_xticks(by_rank["rank"], [f"{r}{'+' if r == last else ''}\n(n = {n})" for r, n in zip(by_rank["rank"],
                                                                                                by_rank["n"])])
    ax.set(xlabel="how many mentions back the nearest antecedent is (rank)", ylabel="accuracy (%), held-out half",
           ylim=(0, 102), title="accuracy by distance to the antecedent")
    ax.legend(fontsize=8, loc="lower right")
    return fig


# -- 06: probes ---------------------------------------------------------------------------------------
PROBE_COLOURS = {Model.DISTANCES: PALETTE["other"], Model.ATTENTION: PALETTE["prev"],
                 Model.ATTENTION_VECTORS: PALETTE["cls"]}


def probe_curves(results: ProbeResults):
    """Held-out UAS (argmax) and training loss per epoch of every trained probe (dashed: on the randomly
    initialised model), with right-branching as a floor."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for model, curve in results.curves.groupby("model", sort=False):
        pretrained = RANDOM_INIT.get(model, model)
        style = dict(color=PROBE_COLOURS[pretrained], ls="--" if model != pretrained else "-", marker="o", ms=3,
                     label=model)
        axes[0].plot(curve["epoch"], curve["heldout_uas"], **style)
        axes[1].plot(curve["epoch"], curve["train_loss"], **style)
    right = results.table.set_index("model").loc[Model.RIGHT_BRANCHING, "uas_argmax"]
    axes[0].axhline(right, ls=":", color=PALETTE["uniform"], label=Model.RIGHT_BRANCHING)
    axes[0].set(xlabel="epoch", ylabel="held-out UAS (%)", title="held-out UAS (argmax)", ylim=(0, 100))
    axes[1].set(xlabel="epoch", ylabel="cross-entropy (nats per word)", title="training loss")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=3, fontsize=10)
    return fig


def probe_weights(results: ProbeResults):
    """The attention-only probe's weight of every map, one panel per direction, one above the other (diverging
    colours), with the
    best map of each relation in notebook 04's sense boxed and named."""
    best = results.best_heads[results.best_heads["relation"] != "all"]
    limit = float(np.abs(results.weights).max())
    n_layers, n_heads = results.weights.shape[1:3]
    fig, axes = plt.subplots(2, 1, figsize=(0.6 * n_heads + 2, 2 * (0.6 * n_layers + 1.2)), sharex=True)
    for ax, d, direction in zip(axes, range(2), DIRECTIONS):
        marked = best[best["direction"] == direction].groupby(["layer", "head"])["relation"].apply(list)
        notes = {key: "\n".join(r if len(r) <= 3 else r[:2] + [f"+{len(r) - 2} more"]) for key, r in marked.items()}
        heatmap_by_head(results.weights[d], ax, f"attention-only probe: {direction} weights", DIVERGING_CMAP,
                        -limit, limit, fmt=None, colorbar="weight (per RMS of the map)", boxes=list(marked.index),
                        notes=notes)
    return fig


def weight_against_accuracy(results: ProbeResults):
    """Each map's probe weight against its accuracy alone (notebook 04's measure), per direction."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for d, (direction, colour) in enumerate(zip(DIRECTIONS, (PALETTE["prev"], PALETTE["next"]))):
        ax.scatter(results.head_accuracy[d].ravel(), results.weights[d].ravel(), s=18, color=colour, label=direction)
    ax.axhline(0, color=PALETTE["uniform"], lw=0.8)
    ax.set(xlabel="accuracy of the map alone (%)", ylabel="probe weight (per RMS of the map)",
           title="probe weight against single-head accuracy")
    ax.legend()
    return fig


# -- 07: clustering -----------------------------------------------------------------------------------
def _labels_apart(ax, points: np.ndarray, labels: Sequence[str], fontsize: float = 9) -> None:
    """Write each label beside its point [k, 2] at the first of a few places, nearest first, where its box
    overlaps no label written before (the last place tried when none is free)."""
    renderer = ax.figure.canvas.get_renderer()
    ax.figure.draw(renderer)  # the final layout, so that the boxes measured below are the drawn ones
    places = [(dx * r, dy * r, "left" if dx > 0 else "right" if dx < 0 else "center",
               "bottom" if dy > 0 else "top" if dy < 0 else "center")
              for r in (1, 2.5) for dx, dy in ((4, 2), (-4, 2), (4, -2), (-4, -2), (0, 4), (0, -4))]
    written = []
    for (x, y), label in zip(points, labels):
        for dx, dy, ha, va in places:
            note = ax.annotate(label, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va,
                               fontsize=fontsize, in_layout=False)  # in_layout: labels never move the axes
            box = note.get_window_extent(renderer)
            if not any(box.overlaps(other) for other in written) or (dx, dy) == places[-1][:2]:
                written.append(box)
                break
            note.remove()


def mds_map(result: ClusterResult, colour_by: str = "behaviour", ax=None, highlight: int | None = None,
            annotate: bool | Sequence[str] = True, title: str | None = None):
    """Clark et al. Fig 6: one dot per head at its MDS position, coloured by behaviour (heads of no behaviour,
    "other", small and pale), by layer, or by a numeric column of `result.heads` (e.g. "entropy", with a colour
    bar). annotate: True labels the heads that have a behaviour, a list labels those heads ("layer-head"), each
    label where it overlaps no other; highlight: a head index to ring. The legend sits right of the map."""
    ax = ax or plt.subplots(figsize=(7.5, 5.5))[1]
    heads = result.heads
    if colour_by == "behaviour":
        for name in BEHAVIOURS:
            chosen = heads[heads["behaviour"] == name]
            if len(chosen):
                other = name == "other"
                ax.scatter(chosen["x"], chosen["y"], s=22 if other else 60, zorder=1 if other else 3,
                           color="#cccccc" if other else PALETTE.get(name, PALETTE["other"]),
                           label=f"{BEHAVIOUR_NAMES[name]} ({len(chosen)})", edgecolors="white", linewidths=0.5)
    elif colour_by == "layer":
        shades = plt.get_cmap(SEQUENTIAL_CMAP)(np.linspace(0, 0.85, result.n_layers))  # no pale yellow on white
        for layer in range(1, result.n_layers + 1):
            chosen = heads[heads["layer"] == layer]
            ax.scatter(chosen["x"], chosen["y"], s=46, color=shades[layer - 1], label=f"layer {layer}",
                       edgecolors="white", linewidths=0.5)
    elif colour_by in heads and pd.api.types.is_numeric_dtype(heads[colour_by]):
        points = ax.scatter(heads["x"], heads["y"], c=heads[colour_by], cmap=SEQUENTIAL_CMAP, s=50)
        ax.figure.colorbar(points, ax=ax, label=LABELS.get(colour_by, colour_by))
    else:
        raise ValueError(f"colour_by must be 'behaviour', 'layer' or a numeric column of result.heads, "
                         f"not {colour_by!r}")
    if highlight is not None:
        row = heads.iloc[highlight]
        ax.scatter([row["x"]], [row["y"]], s=260, facecolors="none", edgecolors="black", linewidths=2)
    ax.set(xticks=[], yticks=[], xlabel="MDS 1", ylabel="MDS 2", title=title or f"heads by {colour_by}")
    ax.set_aspect("equal", adjustable="datalim")
    if colour_by in ("behaviour", "layer"):
        ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.0, 1.0), markerscale=0.8,
                  title="behaviour" if colour_by == "behaviour" else None, title_fontsize=9)
    if annotate is not False:
        shown = heads[heads["behaviour"] != "other"] if annotate is True else heads[heads["label"].isin(annotate)]
        _labels_apart(ax, shown[["x", "y"]].to_numpy(), shown["label"].tolist())
    return ax


def dendrogram(result: ClusterResult, ax=None, method: str = "average"):
    """The heads as an average-linkage tree of their JS divergence per token, drawn sideways so that every
    head's label is horizontal text at 8 pt; labels coloured by behaviour."""
    from scipy.cluster.hierarchy import dendrogram as draw_tree

    ax = ax or plt.subplots(figsize=(7, 0.17 * len(result.heads) + 1))[1]
    merges = linkage(result.mean_distances, method)
    tree = draw_tree(merges, ax=ax, labels=result.heads["label"].tolist(),
                     orientation="left", color_threshold=0, above_threshold_color=PALETTE["other"], leaf_font_size=8)
    behaviour = dict(zip(result.heads["label"], result.heads["behaviour"]))
    for text in ax.get_yticklabels():
        text.set_color(PALETTE.get(behaviour[text.get_text()], PALETTE["other"]))
    ax.set_xlabel("JS divergence per token (nats)")
    ax.grid(False)
    ax.set_title(f"{method}-linkage tree of the heads\n(labels coloured by behaviour)")
    closest = merges[0, :2].astype(int)
    alttext.headline(ax, f"The {len(result.heads)} heads joined as a tree by the JS divergence of their attention: "
                         f"the first two to join are {result.heads['label'].iloc[closest[0]]} and "
                         f"{result.heads['label'].iloc[closest[1]]} at {alttext.number(merges[0, 2])} nats, the last "
                         f"join at {alttext.number(merges[-1, 2])}")
    return tree


def aligned_maps(result: ClusterResult, other: ClusterResult, ax=None, names: tuple[str, str] = ("pairs", "A alone")):
    """Two maps of the same heads aligned by Procrustes (filled: `result`, open: `other`, coloured by the
    behaviour in `result`), a line joining each head's two places."""
    from scipy.spatial import procrustes

    ax = ax or plt.subplots(figsize=(7.5, 6.4))[1]
    first, second, disparity = procrustes(result.coords, other.coords)
    for a, b in zip(first, second):
        ax.plot(*np.stack([a, b]).T, color=PALETTE["uniform"], lw=0.7, alpha=0.6)
    behaviour = result.heads["behaviour"].to_numpy()
    for name in BEHAVIOURS:
        mask = behaviour == name
        if mask.any():
            colour = PALETTE.get(name, PALETTE["other"])
            alpha = 0.9 if name != "other" else 0.5  # heads of no behaviour faded
            ax.scatter(*first[mask].T, color=colour, s=40, alpha=alpha, label=BEHAVIOUR_NAMES[name])
            ax.scatter(*second[mask].T, facecolors="none", edgecolors=colour, s=40, alpha=alpha)
    ax.set(xticks=[], yticks=[], title="the two maps aligned (Procrustes); lines join each head's two places")
    ax.set_aspect("equal", adjustable="datalim")
    ax.legend(fontsize=8, title=f"filled: {names[0]}, open: {names[1]}", title_fontsize=8)
    moved = np.linalg.norm(first - second, axis=1)
    alttext.headline(ax, f"Two maps of the {len(first)} heads ({names[0]}; {names[1]}) aligned by Procrustes "
                         f"(disparity {alttext.number(disparity)}): a head moves "
                         f"{alttext.number(moved.mean())} on average, at most {alttext.number(moved.max())} "
                         f"({result.heads['label'].iloc[int(moved.argmax())]}), on a map scaled to 1")
    return ax


def permutation_tests(tests: Mapping[str, GroupTest | None]):
    """One panel per grouping (name -> `clustering.GroupTest`, None: not testable, left blank): the
    between/within distance ratio of every shuffled labelling, and the observed one."""
    ncols = min(len(tests), 2 if len(tests) % 2 == 0 else 3)
    nrows = -(-len(tests) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5 * ncols, 3.4 * nrows), squeeze=False, layout="constrained")
    for ax in axes.ravel()[len(tests):]:
        ax.set_axis_off()
    for ax, (name, test) in zip(axes.ravel(), tests.items()):
        if test is None:
            ax.text(0.5, 0.5, f"grouping by {name}:\nno test (no group with two heads)", ha="center", va="center",
                    transform=ax.transAxes)
            ax.set_axis_off()
            continue
        ax.hist(test.null_ratios, bins=40, color=PALETTE["uniform"], alpha=0.8, label="shuffled labels")
        ax.axvline(test.ratio, color=PALETTE["cls"], lw=2.5, label="observed")
        ax.set(xlabel="mean distance between / within groups", ylabel="shuffles", title=f"grouping by {name}")
        ax.legend(fontsize=9)
    return fig
