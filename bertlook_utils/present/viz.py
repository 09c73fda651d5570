"""The kit's drawing primitives: one palette, one style, 1-indexed "layer-head" labels everywhere.

Every function draws on a matplotlib Axes (or makes a Figure) and returns it; nothing here computes
statistics (they come from the analyses). Generic views of attention live here (one head as a heatmap or as
lines, every head as thumbnails, a statistic per head by layer or as a layers x heads grid); the figures of
the papers, built on them, are in `figures`; BertViz's views in `views`.
"""
from __future__ import annotations

import base64
import html
import re
from pathlib import Path
from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import matplotlib.text as mtext
import numpy as np
import pandas as pd
from matplotlib.colors import LinearSegmentedColormap
from matplotlib.patches import Rectangle

from . import alttext
from ..core.conventions import check_head, head_label
from ..core.models import Encoded

# One named colour per quantity, used by every figure and notebook: Okabe & Ito's colours (wine for broad
# attention, black for other, one light grey for references), told apart under simulated deuteranopia, protanopia
# and tritanopia (tests/test_figures.py); right and wrong, best and worst also differ by a mark or a place
PALETTE = {
    "cls": "#d55e00", "sep": "#0072b2", "punct": "#e69f00", "self": "#cc79a7", "prev": "#56b4e9",
    "next": "#009e73", "broad": "#882255", "uniform": "#bbbbbb", "other": "#000000",
    "right": "#009e73", "wrong": "#d55e00", "paper": "#bbbbbb", "run": "#0072b2",
}
# Kovaleva et al.'s patterns, in the colours of what makes them: [CLS] stripes, the previous-token diagonal
PATTERN_COLOURS = {"vertical": PALETTE["cls"], "diagonal": PALETTE["prev"], "vertical+diagonal": PALETTE["punct"],
                   "block": PALETTE["next"], "heterogeneous": PALETTE["other"], "broad": PALETTE["broad"]}
LABELS = {
    "cls": "[CLS]", "sep": "[SEP]", "punct": '". ,"', "self": "self", "prev": "previous token",
    "next": "next token", "entropy": "entropy (nats)", "cls_entropy": "[CLS] entropy (nats)",
    "uniform": "uniform attention", "sep_sep": "[SEP] → [SEP]", "rest_sep": "other → [SEP]",
}
ATTENTION_CMAP = LinearSegmentedColormap.from_list("attention", ["#ffffff", "#9ecae1", "#08306b"])
DIVERGING_CMAP = "RdBu"  # signed values (weights, changes): red below zero, blue above
SEQUENTIAL_CMAP = "viridis"  # an ordered quantity that is not attention (layer, entropy, similarity)


def use_style() -> None:
    """The kit's figure style: readable on slides, light grid, no top/right spines; in a notebook, figures are shown
    through `notebook_figure` (an image with its alt text)."""
    plt.rcParams.update({
        "figure.dpi": 100, "savefig.dpi": 100, "font.size": 11, "axes.titlesize": 12,
        "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True, "grid.alpha": 0.3,
        "legend.frameon": False, "figure.constrained_layout.use": True,
    })
    from IPython import get_ipython
    from matplotlib.figure import Figure

    shell = get_ipython()
    if shell is not None:  # in a notebook: each figure an <img> with its alt text, its smallest text in its PNG
        plt.switch_backend(plt.get_backend())  # load the backend now: loading it later resets the PNG formatter
        shell.display_formatter.formatters["image/png"].for_type(Figure, lambda fig: None)
        shell.display_formatter.formatters["text/html"].for_type(Figure, notebook_figure)


def literal(text: str) -> str:
    """A token or a word as matplotlib text that shows it as it is: "$" escaped, so that "$$" or "$\\frac$" is
    never read as mathtext (which draws it in italics or fails with a ParseException)."""
    return str(text).replace("$", r"\$")


def head_map(enc: Encoded, layer: int, head: int) -> np.ndarray:
    """The map [n_tokens, n_tokens] of one head, `layer` and `head` 1-indexed; a ValueError that gives the
    model's ranges for a head it does not have (never a silent wrap-around: layer 0 is not the last layer)."""
    check_head(layer, head, *enc.attn.shape[:2])
    return enc.attn[layer - 1, head - 1]


def plot_head(enc: Encoded, layer: int, head: int, ax=None, max_tokens: int | None = 40, title: str | None = None,
              vmax: float | None = 1.0, colorbar: bool = True):
    """Heatmap of one head (layer, head 1-indexed) with token labels; rows = from, columns = to, with a colour
    bar. vmax=None scales the colours to the 99th percentile of the weights shown, so that a broad head is not
    blank beside one large cell (the colour bar marks the clipped top)."""
    n = enc.n_tokens if max_tokens is None else min(max_tokens, enc.n_tokens)
    attn = head_map(enc, layer, head)[:n, :n]
    ax = ax or plt.subplots(figsize=(6, 5.5))[1]
    top = vmax if vmax is not None else float(np.percentile(attn, 99))
    image = ax.imshow(attn, cmap=ATTENTION_CMAP, vmin=0, vmax=top, interpolation="nearest")
    labels = [literal(token) for token in enc.tokens[:n]]
    ax.set_xticks(range(n), labels, rotation=90, fontsize=8)
    ax.set_yticks(range(n), labels, fontsize=8)
    ax.grid(False)
    ax.set_xlabel("attends to")
    ax.set_ylabel("from")
    ax.set_title(title or f"head {head_label(layer, head)}")
    if colorbar:
        ax.figure.colorbar(image, ax=ax, shrink=0.8, pad=0.02, label="attention",
                           extend="max" if top < attn.max() else "neither")
    return ax


def plot_lines(enc: Encoded, layer: int, head: int, ax=None, start: int = 0, stop: int | None = 24,
               title: str | None = None, min_weight: float = 0.02, top_k: int | None = None,
               fade_special: bool = True):
    """Clark et al. Fig 1 style: tokens in two columns, a line from each token (left) to the tokens it
    attends to (right), darker for more weight. Shows tokens [start, stop); top_k: only each token's k
    heaviest lines (long inputs stay readable); fade_special: lines to [CLS] and [SEP] in pale grey, so that
    the sink does not drown the pattern."""
    attn = head_map(enc, layer, head)
    ax = ax or plt.subplots(figsize=(3, 0.23 * ((stop or enc.n_tokens) - start) + 0.6))[1]
    stop = enc.n_tokens if stop is None else min(stop, enc.n_tokens)
    attn = attn[start:stop, start:stop]
    n = stop - start
    special = np.isin(enc.tokens[start:stop], [enc.cls_token, enc.sep_token]) if fade_special else np.zeros(n, bool)
    kept = attn >= min_weight
    if top_k is not None:
        if top_k < 1:
            raise ValueError(f"top_k must be at least 1, not {top_k}")
        kept &= attn >= -np.sort(-attn, axis=1)[:, min(top_k, n) - 1][:, None]
    for i, j in zip(*np.nonzero(kept)):
        colour, alpha = (PALETTE["uniform"], 0.5 * attn[i, j]) if special[j] else (PALETTE["prev"], attn[i, j])
        ax.plot([0, 1], [i, j], color=colour, alpha=float(min(1, alpha)), lw=2.2, zorder=1 if special[j] else 2)
    for side, ha in ((0, "right"), (1, "left")):
        for i, tok in enumerate(enc.tokens[start:stop]):
            ax.text(side + (-0.06 if side == 0 else 0.06), i, literal(tok), ha=ha, va="center", fontsize=9,
                    color=PALETTE["uniform"] if special[i] else "black")
    ax.set_xlim(-0.9, 1.9)
    ax.set_ylim(n - 0.5, -0.5)
    ax.axis("off")
    ax.set_title(title or f"head {head_label(layer, head)}")
    return ax


def plot_model_grid(enc: Encoded, max_tokens: int = 40, size: float = 0.85):
    """Thumbnail of every head: a layers x heads grid of heatmaps (layer 1 at the top), `size` inches each (12
    heads at the default: about 1,000 px wide, so that the book's column shrinks its 9 pt labels little)."""
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
    received = enc.attn[:, :, :n, :n].mean(axis=2).argmax(axis=-1)  # [layers, heads]: the token most attended
    special = [i for i, token in enumerate(enc.tokens[:n]) if token in (enc.cls_token, enc.sep_token)]
    alttext.headline(fig, f"Every head's attention map on one input of {n} tokens, {n_layers} layers (layer 1 at "
                          f"the top) by {n_heads} heads; in {int(np.isin(received, special).sum())} of "
                          f"{n_layers * n_heads} heads the token that receives most attention is {enc.cls_token} or "
                          f"{enc.sep_token}")
    return fig


def plot_heads(enc: Encoded, heads: Mapping[str, tuple[int, int]], kind: str = "map", width: float | None = None,
               height: float = 5.4, columns: int | None = None, **options):
    """One panel per head of `heads` (panel title -> (layer, head), 1-indexed) on one input, in rows of `columns`
    (default: at most 2 maps or 4 line panels a row, rows as even as possible, so that the figure stays about
    10 in wide and its token labels readable in the book's column); `height` is one row's. kind "map" draws
    `plot_head`, "lines" `plot_lines` (`options` go to it). Returns the Figure."""
    if kind not in ("map", "lines"):
        raise ValueError(f"kind must be 'map' or 'lines', not {kind!r}")
    if not heads:
        raise ValueError("give at least one head: {title: (layer, head)}")
    for layer, head in heads.values():
        check_head(layer, head, *enc.attn.shape[:2])
    draw = plot_head if kind == "map" else plot_lines
    widest = 2 if kind == "map" else 4
    columns = columns or -(-len(heads) // -(-len(heads) // widest))  # n rows of at most `widest`, evened out
    rows = -(-len(heads) // columns)
    width = width or (5.0 if kind == "map" else 2.6) * columns
    fig, axes = plt.subplots(rows, columns, figsize=(width, height * rows), squeeze=False)
    for ax, (title, (layer, head)) in zip(axes.ravel(), heads.items()):
        draw(enc, layer, head, ax=ax, title=title, **options)
    for ax in axes.ravel()[len(heads):]:
        ax.set_axis_off()
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
    ax.legend(loc="best", fontsize=10)
    return ax


def legend_below(fig, ncol: int, markerscale: float = 1.0) -> None:
    """One legend below all panels of `fig` (constrained layout), of every labelled artist, each label once."""
    found: dict[str, object] = {}
    for ax in fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            found.setdefault(label, handle)
    fig.legend(list(found.values()), list(found), loc="outside lower center", ncol=ncol, fontsize=10,
               markerscale=markerscale)


def heatmap_by_head(values: np.ndarray, ax=None, title: str | None = None, cmap=ATTENTION_CMAP, vmin: float = 0.0,
                    vmax: float | None = None, fmt: str | None = "{:.2f}", colorbar: str = "",
                    boxes: Sequence[tuple[int, int]] = (), notes: Mapping[tuple[int, int], str] | None = None):
    """values [L, H] as a layers x heads heatmap with 1-indexed ticks, a colour bar (labelled `colorbar`), each
    cell's value written with `fmt` (None: no numbers), black boxes around the heads in `boxes` and text in the
    cells of `notes` ((layer, head) 1-indexed)."""
    values = np.asarray(values, dtype=float)
    n_layers, n_heads = values.shape
    for layer, head in [*boxes, *(notes or {})]:
        check_head(layer, head, n_layers, n_heads)
    ax = ax or plt.subplots(figsize=(0.55 * n_heads + 2.2, 0.45 * n_layers + 1.2))[1]
    vmax = vmax if vmax is not None else float(np.nanmax(values))
    image = ax.imshow(values, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    if fmt is not None:
        dark = image.norm(values) > 0.6 if cmap is ATTENTION_CMAP else np.abs(image.norm(values) - 0.5) > 0.35
        for (i, j), value in np.ndenumerate(values):
            ax.text(j, i, fmt.format(value), ha="center", va="center", fontsize=8,
                    color="white" if dark[i, j] else "black")
    for layer, head in boxes:
        ax.add_patch(Rectangle((head - 1.5, layer - 1.5), 1, 1, fill=False, edgecolor="black", lw=2))
    for (layer, head), text in (notes or {}).items():
        ax.text(head - 1, layer - 1, text, ha="center", va="center", fontsize=8)
    ax.set_xticks(range(n_heads), range(1, n_heads + 1))
    ax.set_yticks(range(n_layers), range(1, n_layers + 1))
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.grid(False)
    if title:
        ax.set_title(title)
    ax.figure.colorbar(image, ax=ax, shrink=0.8, label=colorbar)  # not plt.colorbar: it opens a pyplot figure
    return ax


def plot_head_grid(stats: pd.DataFrame, column: str, ax=None, title: str | None = None, vmax: float | None = None,
                   fmt: str | None = "{:.2f}", cmap=ATTENTION_CMAP, colorbar: str = ""):
    """One statistic of a per-head table (1-indexed `layer`, `head` columns) as a layers x heads heatmap."""
    table = stats.pivot(index="layer", columns="head", values=column)
    return heatmap_by_head(table.to_numpy(), ax, title or LABELS.get(column, column), cmap, vmax=vmax, fmt=fmt,
                           colorbar=colorbar)


def head_figure(enc: Encoded, layer: int, head: int, max_tokens: int | None = 40, figsize=(6, 5.5)):
    """A Figure (not registered with pyplot, so never shown twice) with `plot_head` of one head."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, layout="constrained")
    plot_head(enc, layer, head, ax=fig.add_subplot(), max_tokens=max_tokens)
    return fig


BOOK_COLUMN_PX = 757  # the book's text column (sphinx-book-theme in a 1366 px window): wider figures shrink to it
WIDEST_PX = 1400  # a notebook figure's widest (at the inline backend's 100 dpi, cropped to what is drawn)
SMALLEST_TEXT_PX = 8  # the smallest text a reader can read, once the column has shrunk the figure


SMALLEST_TEXT_KEY = "Smallest text pt"  # the PNG text chunk where a notebook figure records its smallest text
DESCRIPTION_KEY = "Description"  # the PNG's standard text chunk for what it shows: the figure's alt text
FIGURE_CLASS = "bertlook-figure"  # the class of a figure's <img>, for the slides' style and the tools that read it


def smallest_text_pt(fig) -> float:
    """The size in points of the smallest visible, non-empty text in `fig` (inf when it has none)."""
    sizes = [text.get_fontsize() for text in fig.findobj(lambda artist: isinstance(artist, mtext.Text))
             if text.get_visible() and text.get_text().strip()]
    return min(sizes, default=float("inf"))


def readability(width_px: float, smallest_pt: float, dpi: float = 100, column_px: int = BOOK_COLUMN_PX,
                widest_px: int = WIDEST_PX, smallest_px: float = SMALLEST_TEXT_PX) -> list[str]:
    """What a reader could not read in a figure `width_px` wide (as the notebook shows it, at `dpi`) whose smallest
    text is `smallest_pt`: wider than `widest_px`, or text under `smallest_px` once the book's column shrinks the
    figure to `column_px`. [] when readable."""
    problems = [f"{width_px:.0f} px wide, more than {widest_px}"] if width_px > widest_px else []
    shown = smallest_pt * dpi / 72 * min(1.0, column_px / width_px)
    if shown < smallest_px:
        problems.append(f"{smallest_pt:g} pt text is {shown:.1f} px in the book's {column_px} px column, under "
                        f"{smallest_px}")
    return problems


def unreadable(fig) -> list[str]:
    """`readability` of `fig` as a notebook shows it: cropped to what is drawn, at the figure's dpi."""
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)
    return readability(fig.get_tightbbox(renderer).width * fig.dpi, smallest_text_pt(fig), fig.dpi)


def png_metadata(fig) -> dict[str, str]:
    """What a figure's PNG records: its smallest text (`SMALLEST_TEXT_KEY`) and its alt text (`DESCRIPTION_KEY`)."""
    return {SMALLEST_TEXT_KEY: f"{smallest_text_pt(fig):g}", DESCRIPTION_KEY: alttext.describe(fig)}


def figure_html(png: bytes, alt: str) -> str:
    """An <img> of `png` (inline, as a data URI) with `alt` as its alt text, escaped (a token in a title stays text)."""
    data = base64.b64encode(png).decode("ascii")
    return (f'<img class="{FIGURE_CLASS}" alt="{html.escape(alt, quote=True)}" '
            f'src="data:image/png;base64,{data}">')


def notebook_figure(fig) -> str:
    """The inline backend's PNG of `fig` (cropped to what is drawn, `png_metadata` recorded) as an <img> whose alt
    text says what it shows (`alttext.describe`): JupyterLab, the book and the slides read it from there."""
    from IPython.core.pylabtools import print_figure

    metadata = png_metadata(fig)
    png = print_figure(fig, fmt="png", metadata=metadata)
    return figure_html(png, metadata[DESCRIPTION_KEY])


def shown_figures(data: dict) -> list[tuple[bytes, str | None]]:
    """The PNGs an output's `data` bundle shows, each with its alt text: a bare image/png (no alt: None) or the
    kit's figure <img> elements in its text/html."""
    if "image/png" in data:
        return [(base64.b64decode(data["image/png"]), None)]
    markup = data.get("text/html", "")
    markup = "".join(markup) if isinstance(markup, list) else markup
    return [(base64.b64decode(src), html.unescape(alt)) for alt, src in re.findall(
        rf'<img class="{FIGURE_CLASS}" alt="([^"]*)" src="data:image/png;base64,([A-Za-z0-9+/=]+)">', markup)]


EXPORT_FORMATS = ("png", "svg", "pdf")


def save(drawn, path, dpi: int = 200) -> Path:
    """Save a figure for a paper or a slide: `drawn` is what a figure function returns (a Figure, an Axes, or
    an array of Axes); the format comes from the suffix of `path` (.png at `dpi`, .svg, .pdf; text stays text
    in SVG and PDF). Returns the path."""
    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"save as one of {', '.join('.' + f for f in EXPORT_FORMATS)}, not {path.name!r}")
    fig = getattr(drawn, "figure", None) or getattr(np.ravel(drawn)[0], "figure", drawn)
    described = {"png": DESCRIPTION_KEY, "svg": "Description", "pdf": "Subject"}[fmt]  # each format's own key
    with plt.rc_context({"svg.fonttype": "none", "pdf.fonttype": 42}):
        fig.savefig(path, format=fmt, dpi=dpi, bbox_inches="tight", metadata={described: alttext.describe(fig)})
    return path


def figure_png(fig) -> bytes:
    """PNG bytes of a Figure (`png_metadata` recorded); closes it in pyplot so that the notebook does not show it a
    second time."""
    import io

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata=png_metadata(fig))
    plt.close(fig)
    return buffer.getvalue()
