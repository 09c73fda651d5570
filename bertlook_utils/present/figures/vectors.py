"""Notebook 13's figures: structural probes (Hewitt & Manning 2019) and control tasks (Hewitt & Liang 2019), one
function each.

Each function takes `analyses.structural.StructuralResults` and returns its Figure; nothing here computes a statistic
but the counts a title or an alt text states (how many of one sentence's silver edges its predicted tree finds). By
section of the notebook:

    structural_layers   per layer: the distance probe's UUAS (pretrained, random-init, control task, the chain) and
                        the depth probe's root accuracy
    rank_sweep          at one layer: UUAS on the silver and the control trees, and selectivity, by the probe's rank
    structural_tree     one held-out sentence: its silver tree above the words, the probe's spanning tree below
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.font_manager import FontProperties
from matplotlib.layout_engine import PlaceHolderLayoutEngine
from matplotlib.lines import Line2D
from matplotlib.textpath import TextToPath

from .. import alttext
from ...analyses.structural import StructuralResults
from ...data.parses import Sentence
from ..viz import PALETTE, legend_below, literal

# what each line is, in the palette's colours (tests/test_figures.py checks every pair of them under colour-vision
# deficiencies); each also has its own marker or line style, so that no line is told by colour alone
STYLES = {
    "pretrained": dict(color=PALETTE["run"], ls="-", marker="o", label="pretrained, silver trees"),
    "random-init": dict(color=PALETTE["self"], ls="--", marker="^", label="random-init model, silver trees"),
    "control": dict(color=PALETTE["cls"], ls="-.", marker="s", label="pretrained, control trees"),
    "selectivity": dict(color=PALETTE["next"], ls="-", marker="D", label="selectivity = silver − control"),
    "chain": dict(color=PALETTE["other"], ls=":", lw=1.4, label="left-to-right chain, silver trees"),
}
SILVER_ARC, PUNCT_ARC = PALETTE["other"], PALETTE["uniform"]  # the silver tree's edges; those to punctuation
RIGHT_ARC, WRONG_ARC = PALETTE["right"], PALETTE["wrong"]  # predicted edges that are silver edges, and not
PUNCT_TEXT = "#767676"  # punctuation words: the darkest grey that still reads as grey (4.5:1 on white)
WORD_PT = 11  # the words of `structural_tree`
WIDEST_IN = 10.0  # a sentence wider than this on one line is written upright (the book's column would shrink it)


def _layer_label(layer: int) -> str:
    return "the embeddings (layer 0)" if layer == 0 else f"layer {layer}"


def _line(ax, x, frame: pd.DataFrame, column: str, style: dict) -> None:
    """A line through `column` with markers, its `_low`-`_high` interval shaded in the line's colour."""
    ax.plot(x, frame[column], ms=5, **style)
    if f"{column}_low" in frame and frame[f"{column}_low"].notna().any():
        ax.fill_between(x, frame[f"{column}_low"], frame[f"{column}_high"], color=style["color"], alpha=0.2, lw=0)


def _chain(ax, linear: pd.DataFrame, column: str) -> float:
    """The left-to-right chain's score as a dotted line across the panel, its interval a light band."""
    row = linear.iloc[0]
    ax.axhline(row[column], **STYLES["chain"])
    if f"{column}_low" in linear:
        ax.axhspan(row[f"{column}_low"], row[f"{column}_high"], color=PALETTE["uniform"], alpha=0.3, lw=0)
    return float(row[column])


def _rows(results: StructuralResults, model: str, task: str, rank: int) -> pd.DataFrame:
    scores = results.scores
    found = scores[(scores["model"] == model) & (scores["task"] == task) & (scores["rank"] == rank)]
    return found.sort_values("layer")


def _interval(row: pd.Series, column: str) -> str:
    return (f"{alttext.number(row[column])} % [{alttext.number(row[f'{column}_low'])}, "
            f"{alttext.number(row[f'{column}_high'])}]")


# -- per layer ------------------------------------------------------------------------------------------------
def structural_layers(results: StructuralResults):
    """Per layer (0 = the embeddings), at the results' rank (`results.rank`): left, the distance probe's UUAS on
    the silver trees (pretrained; random-init from layer 1) and on the control trees (pretrained), each with its
    95 % interval over sentences, the left-to-right chain as a dotted line; right, the depth probe's root accuracy
    (pretrained, random-init, the chain)."""
    rank = results.rank
    silver, control = _rows(results, "pretrained", "silver", rank), _rows(results, "pretrained", "control", rank)
    random = _rows(results, "random-init", "silver", rank)
    if silver.empty:
        raise ValueError(f"results hold no pretrained silver probe at rank {rank}")
    fig, axes = plt.subplots(1, 2, figsize=(10.8, 4.1))
    tops = []
    for ax, column, parts in ((axes[0], "uuas", ((silver, "pretrained"), (random, "random-init"),
                                                  (control, "control"))),
                              (axes[1], "root_acc", ((silver, "pretrained"), (random, "random-init")))):
        for frame, name in parts:
            if not frame.empty and frame[column].notna().any():
                _line(ax, frame["layer"], frame, column, STYLES[name])
                tops.append(float(frame[f"{column}_high"].max()))
        tops.append(_chain(ax, results.linear, column))
    layers = sorted(silver["layer"].unique())
    for ax in axes:
        ax.set(xlabel="layer (0: embeddings)", xticks=layers, ylim=(0, min(100.0, 10 * np.ceil(max(tops) / 10) + 5)))
    axes[0].set(ylabel="UUAS (% of silver edges)", title=f"distance probe (rank {rank}): UUAS")
    axes[1].set(ylabel="root accuracy (% of sentences)", title=f"depth probe (rank {rank}): root accuracy")

    best = silver.loc[silver["uuas"].idxmax()]
    layer = int(best["layer"])
    at = control[control["layer"] == layer]
    said = (f"The distance probe of rank {rank} finds most silver edges at {_layer_label(layer)}: UUAS "
            f"{_interval(best, 'uuas')}, against {alttext.number(results.linear['uuas'].iloc[0])} % for the "
            f"left-to-right chain")
    if not random.empty:
        top = random.loc[random["uuas"].idxmax()]
        said += f" and at most {alttext.number(top['uuas'])} % (layer {int(top['layer'])}) for the random-init model"
    if not at.empty:
        said += (f"; trained on the control trees, the same probe scores {_interval(at.iloc[0], 'uuas')} there, a "
                 f"selectivity of {alttext.number(best['uuas'] - at.iloc[0]['uuas'])} points")
    alttext.headline(axes[0], said)
    depth = silver[silver["root_acc"].notna()]
    if not depth.empty:
        top = depth.loc[depth["root_acc"].idxmax()]
        said = (f"The depth probe's least deep word is the silver root most often at {_layer_label(int(top['layer']))}:"
                f" {_interval(top, 'root_acc')} of sentences, against "
                f"{alttext.number(results.linear['root_acc'].iloc[0])} % for the chain (its first word)")
        if random["root_acc"].notna().any():
            said += f" and at most {alttext.number(random['root_acc'].max())} % for the random-init model"
        alttext.headline(axes[1], said)
    legend_below(fig, ncol=2)
    return fig


# -- by rank ----------------------------------------------------------------------------------------------------
def rank_sweep(results: StructuralResults, layer: int):
    """At one layer of the pretrained model, by the probe's rank (log2 axis): the distance probe's UUAS on the silver
    trees and on the control trees, each with its 95 % interval over sentences, and selectivity (silver − control,
    in points) with its paired interval; the left-to-right chain's UUAS as a dotted line."""
    selectivity = results.selectivity
    here = selectivity[selectivity["layer"] == layer].sort_values("rank")
    if here.empty:
        known = sorted(selectivity["layer"].unique())
        raise ValueError(f"layer must be one of the pretrained model's layers {known} (0: the embeddings), not {layer}")
    scores = results.scores
    pretrained = scores[(scores["model"] == "pretrained") & (scores["layer"] == layer)]
    fig, ax = plt.subplots(figsize=(6.8, 4.4))
    for task in ("silver", "control"):
        frame = pretrained[pretrained["task"] == task].sort_values("rank")
        _line(ax, frame["rank"], frame, "uuas", STYLES["pretrained" if task == "silver" else "control"])
    sel = here.rename(columns={"low": "selectivity_low", "high": "selectivity_high"})
    _line(ax, sel["rank"], sel, "selectivity", STYLES["selectivity"])
    chain = _chain(ax, results.linear, "uuas")
    ranks = sorted(here["rank"].unique())
    ax.set_xscale("log", base=2)
    ax.set_xticks(ranks, [str(r) for r in ranks])
    ax.minorticks_off()
    top = max(float(pretrained["uuas_high"].max()), chain)
    ax.set(xlabel="rank (rows of B; log scale)", ylabel="UUAS (%); selectivity (points)",
           ylim=(0, min(100.0, 10 * np.ceil(top / 10) + 5)),
           title=f"{_layer_label(layer)}: UUAS and selectivity by rank")
    best = here.loc[here["selectivity"].idxmax()]
    first, last = here.iloc[0], here.iloc[-1]
    alttext.headline(ax, f"At {_layer_label(layer)}, UUAS on the silver trees goes from "
                         f"{alttext.number(first['uuas'])} % at rank {int(first['rank'])} to "
                         f"{alttext.number(last['uuas'])} % at rank {int(last['rank'])}, and on the control trees from "
                         f"{alttext.number(first['control'])} % to {alttext.number(last['control'])} %; selectivity is "
                         f"highest at rank {int(best['rank'])}: {alttext.number(best['selectivity'])} points "
                         f"[{alttext.number(best['low'])}, {alttext.number(best['high'])}]")
    legend_below(fig, ncol=2)
    return fig


# -- one sentence ------------------------------------------------------------------------------------------------
def _levels(edges: list[tuple[int, int]]) -> list[int]:
    """Each arc's nesting level: 1 + the highest level of the arcs within its span, so an arc clears those."""
    order = sorted(range(len(edges)), key=lambda k: edges[k][1] - edges[k][0])
    levels = [0] * len(edges)
    for k in order:
        a, b = edges[k]
        inside = [levels[j] for j in range(len(edges)) if j != k and a <= edges[j][0] and edges[j][1] <= b
                  and edges[j] != edges[k]]
        levels[k] = 1 + max(inside, default=0)
    return levels


def _text_widths(words, size: float) -> np.ndarray:
    """Each word's width in points, drawn at `size` points."""
    measure, font = TextToPath(), FontProperties(size=size)
    return np.array([measure.get_text_width_height_descent(str(w), font, ismath=False)[0] for w in words])


def _arc(ax, x0: float, x1: float, y0: float, height: float, **style) -> None:
    """A half-ellipse from (x0, y0) to (x1, y0), up for height > 0, down for height < 0."""
    t = np.linspace(0, np.pi, 60)
    ax.plot((x0 + x1) / 2 + (x1 - x0) / 2 * np.cos(t), y0 + height * np.sin(t), solid_capstyle="round", **style)


def _quoted(words, a: int, b: int) -> str:
    return f"“{words[a - 1]}”–“{words[b - 1]}”"


def structural_tree(results: StructuralResults, sentence: Sentence, layer: int, index: int):
    """One held-out sentence, `index` its place in the held-out list (`results.edges`' sentence column), as words on
    a line: its silver (spaCy) tree's edges as arcs above, the edges of the pretrained model's silver distance
    probe's minimum spanning tree at `layer` (as `results.edges` holds them) as arcs below: solid green where they
    are silver edges, dashed orange-red where not. Punctuation is grey and not scored (the spanning tree joins the
    other words). Readable in the book's column up to about 25 words: a sentence too wide for one line at 10 in is
    written upright."""
    edges = results.edges
    mine = edges[(edges["sentence"] == index) & (edges["layer"] == layer)]
    if not len(edges[edges["layer"] == layer]):
        raise ValueError(f"layer must be one of {sorted(edges['layer'].unique())} (0: the embeddings), not {layer}")
    words, punct, n = list(sentence.words), np.asarray(sentence.is_punct, dtype=bool), len(sentence)
    scored = int((~punct).sum())
    predicted = sorted({(int(a), int(b)) for a, b in zip(mine["a"], mine["b"])})
    if (len(predicted) != max(scored - 1, 0) or any(not 1 <= a < b <= n or punct[a - 1] or punct[b - 1]
                                                    for a, b in predicted)):
        raise ValueError(f"results.edges' sentence {index} is not this sentence ({sentence.id!r}, {n} words, "
                         f"{scored} not punctuation): give the index of the sentence in the held-out list the results "
                         "were scored on")
    silver = sorted((min(i + 1, h), max(i + 1, h)) for i, h in enumerate(sentence.heads) if h)
    to_punct = {e for e in silver if punct[e[0] - 1] or punct[e[1] - 1]}
    gold = set(silver) - to_punct
    hits = [e for e in predicted if e in gold]
    wrong = [e for e in predicted if e not in gold]

    widths = _text_widths(words, WORD_PT)
    gap = 0.9 * WORD_PT
    upright = widths.sum() + gap * (n - 1) > (WIDEST_IN - 0.6) * 72
    if upright:  # one line height per word
        step_x = 1.5 * WORD_PT
        x = step_x * np.arange(n)
        band = float(widths.max())
    else:
        x = np.concatenate([[0.0], np.cumsum((widths[:-1] + widths[1:]) / 2 + gap)])
        band = 1.25 * WORD_PT
    level_pt = 0.95 * WORD_PT
    ups, downs = _levels(silver), _levels(predicted)
    heights_up = [level_pt * lv + 0.04 * (x[b - 1] - x[a - 1]) for (a, b), lv in zip(silver, ups)]
    heights_down = [level_pt * lv + 0.04 * (x[b - 1] - x[a - 1]) for (a, b), lv in zip(predicted, downs)]
    pad = 3.0
    top, bottom = band / 2 + pad + max(heights_up, default=0), band / 2 + pad + max(heights_down, default=0)
    left, right = x[0] - (widths[0] / 2 if not upright else WORD_PT), x[-1] + (widths[-1] / 2 if not upright
                                                                                  else WORD_PT)
    span_in, height_in = (right - left) / 72 + 0.3, (top + bottom) / 72 + 0.2
    width_in = max(span_in, 6.4)
    ncol = 4 if width_in >= 9.5 else 2
    title_in, legend_in = 0.75, 0.35 * (4 // ncol) + 0.2
    fig = plt.figure(figsize=(width_in, height_in + title_in + legend_in))
    # placed by hand (the words' spacing is in points); not layout=None, which a tight savefig turns into the style's
    # constrained layout when it restores the figure's engine
    fig.set_layout_engine(PlaceHolderLayoutEngine(adjust_compatible=True, colorbar_gridspec=False))
    ax = fig.add_axes([(width_in - span_in) / 2 / width_in, legend_in / fig.get_figheight(), span_in / width_in,
                       height_in / fig.get_figheight()])
    ax.set_xlim(left - 0.15 * 72, right + 0.15 * 72)
    ax.set_ylim(-bottom - 0.1 * 72, top + 0.1 * 72)
    ax.set_axis_off()

    for i, word in enumerate(words):
        ax.text(x[i], 0, literal(word), ha="center", va="center", fontsize=WORD_PT, rotation=90 if upright else 0,
                color=PUNCT_TEXT if punct[i] else "black")
    for (a, b), height in zip(silver, heights_up):
        grey = (a, b) in to_punct
        _arc(ax, x[a - 1], x[b - 1], band / 2 + pad, height, color=PUNCT_ARC if grey else SILVER_ARC,
             lw=1.2 if grey else 1.6)
    for (a, b), height in zip(predicted, heights_down):
        right_edge = (a, b) in gold
        _arc(ax, x[a - 1], x[b - 1], -band / 2 - pad, -height, color=RIGHT_ARC if right_edge else WRONG_ARC,
             ls="-" if right_edge else (0, (4, 2)), lw=1.8)
    found = f"{len(hits)} of {len(gold)}"
    ax.set_title(f"held-out sentence {index}, {_layer_label(layer)}: the probe's spanning tree finds {found} silver "
                 "edges;\nabove: the silver (spaCy) tree, below: the probe's tree", fontsize=12)
    handles = [Line2D([], [], color=SILVER_ARC, lw=1.6, label="silver edge (above)"),
               Line2D([], [], color=PUNCT_ARC, lw=1.2, label="to punctuation (not scored)"),
               Line2D([], [], color=RIGHT_ARC, lw=1.8, label="probe's edge, silver too (below)"),
               Line2D([], [], color=WRONG_ARC, lw=1.8, ls=(0, (4, 2)), label="probe's edge, not silver")]
    fig.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 0.02), ncol=ncol, fontsize=WORD_PT,
               handlelength=2.6)

    said = (f"Held-out sentence {index}, {n} words: “{' '.join(words)}”. Above the words, its {len(gold)} silver "
            f"edges between words that are not punctuation")
    said += f" (and {len(to_punct)} to punctuation, grey)" if to_punct else ""
    said += (f"; below, the {len(predicted)} edges of the distance probe's minimum spanning tree at "
             f"{_layer_label(layer)}: {len(hits)} are silver edges (solid)")
    if wrong:
        listed = ", ".join(_quoted(words, a, b) for a, b in wrong[:8])
        said += (f" and {len(wrong)} {'is' if len(wrong) == 1 else 'are'} not (dashed): {listed}"
                 + (", …" if len(wrong) > 8 else ""))
    missed = sorted(gold - set(hits))
    if missed:
        said += f"; it misses {', '.join(_quoted(words, a, b) for a, b in missed[:8])}" + (
            ", …" if len(missed) > 8 else "")
    alttext.headline(ax, said)
    return fig
