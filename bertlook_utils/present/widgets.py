"""ipywidgets explorers: pick an example, a layer and a head, and see the attention map.

`head_explorer(examples)`: an example menu and layer / head menus (1-indexed) over `viz.plot_head`;
`grid_explorer(examples)`: an example menu over `viz.plot_model_grid` (every head as a thumbnail); given the
encoder, both add a text box for the learner's own text (`A | B` for a pair).
`gallery_explorer(items)`: maps by group (notebook 08's hand labels); `relation_explorer(scores)`: every
head's accuracy for a chosen relation (notebook 04); `cluster_explorer(result)`: a head on the MDS map beside
its attention (notebook 07). Drawing lives in `viz` and `figures`; here controls are only wired to it. Each
explorer redraws into an `ipywidgets.Output` (its `outputs` are replaced by a PNG, so the saved widget state
holds the figure, as an image with its alt text). Every control is a named menu, text box or toggle, used from the
keyboard (Tab to it, arrow keys to change it); no slider, whose handle a screen reader cannot name.

An explorer is displayed as one output holding the live widget and, as a fallback, a PNG of its first view:
JupyterLab shows only the live widget; a page or book that cannot render widgets shows the PNG. A page that renders
the saved widget state has no kernel behind it: `tools.widget_state.snapshot` disables the saved controls, shows the
parts marked SNAPSHOT_ONLY (the note "snapshot — open in Jupyter to explore"; the gallery's strip of maps) and hides
those marked LIVE_ONLY; a kernel re-creates the explorer live, without the note.
"""
from __future__ import annotations

import re
import warnings
from typing import Callable, Sequence

import ipywidgets as widgets
import numpy as np

from . import alttext, figures, viz
from .figures.kovaleva import pattern_gallery
from ..analyses.clustering import BEHAVIOUR_NAMES, ClusterResult
from ..core.conventions import check_head, head_label
from ..core.models import Encoded
from ..analyses.syntax import HeadScores, accuracy_frame

PREVIEW_CHARS = 48
SNAPSHOT_NOTE = "snapshot — open in Jupyter to explore"
NOTE_STYLE = "background: #fff4d6; border: 1px solid #d9b64c; border-radius: 4px; padding: 1px 8px; font-style: italic"
SNAPSHOT_ONLY = "bertlook-snapshot-only"  # CSS classes that tools.widget_state.snapshot reads: shown without a kernel
LIVE_ONLY = "bertlook-live-only"  # ... and hidden without one
READABLE_TOKENS = 32  # token labels of a 5-inch map stay at 8 pt up to this many tokens


def preview(enc: Encoded, n_chars: int = PREVIEW_CHARS) -> str:
    """A short text preview of an input: its words, the parts of a pair joined by " | ", cut to n_chars."""
    parts, current = [], []
    for word in enc.words:
        if word in (enc.cls_token, enc.sep_token):
            parts.append(" ".join(current))
            current = []
        else:
            current.append(word)
    parts.append(" ".join(current))
    text = " | ".join(p for p in parts if p) or " ".join(enc.tokens)
    text = re.sub(r"\s+([.,;:!?%)])", r"\1", text)
    return text if len(text) <= n_chars else text[: n_chars - 1].rstrip() + "…"


def _check_examples(examples: Sequence[Encoded]) -> list[Encoded]:
    examples = list(examples)
    if not examples:
        raise ValueError("give at least one example (a non-empty list of Encoded inputs)")
    if not all(isinstance(e, Encoded) for e in examples):
        raise ValueError("examples must be Encoded inputs (from Encoder.encode or encode_many)")
    shapes = {e.attn.shape[:2] for e in examples}
    if len(shapes) > 1:
        raise ValueError(f"examples come from models of different sizes (layers, heads): {sorted(shapes)}")
    return examples


def _marked(widget: widgets.DOMWidget, mark: str) -> widgets.DOMWidget:
    """`widget` with the CSS class `mark`; a SNAPSHOT_ONLY widget is hidden while a kernel drives it."""
    widget.add_class(mark)
    if mark == SNAPSHOT_ONLY:
        widget.layout.display = "none"
    return widget


def _figure_output(png: bytes, alt: str, text: str) -> dict:
    """An nbformat display_data output showing a PNG as an image with its alt text (what an Output widget stores)."""
    return {"output_type": "display_data", "metadata": {},
            "data": {"text/html": viz.figure_html(png, alt), "text/plain": text}}


def _drawn(fig) -> tuple[bytes, str]:
    """A drawn Figure's PNG and alt text (`alttext.describe`); the figure is closed."""
    alt = alttext.describe(fig)
    return viz.figure_png(fig), alt


def _number_menu(description: str, n: int, value: int) -> widgets.Dropdown:
    """A named menu of the numbers 1..n (a layer, a head, a map): a <select> a screen reader names."""
    return widgets.Dropdown(options=list(range(1, n + 1)), value=value, description=description,
                            layout=widgets.Layout(width="11em"))


class Explorer:
    """Controls wired to one draw function; `widget` is the live ipywidgets layout.

    `redraw()` draws the current selection into `output` (and counts it in `draws`); every control in
    `controls` redraws when its value changes. `png` and `alt` hold the last picture drawn and its alt text. The
    layout carries the CSS class `css_class` (e.g. "bertlook-head-explorer"), for styling and browser tests. Its
    first child is `note` (SNAPSHOT_NOTE, hidden while live); given a `static` figure (what a page without a
    kernel shows in place of the controls and their drawing), that figure is the fallback PNG too."""

    css_class = "bertlook-explorer"

    def __init__(self, controls: dict[str, widgets.Widget], draw: Callable[[], object], describe: Callable[[], str],
                 snapshot: bool = True, static=None):
        self.controls = controls
        self.output = widgets.Output()
        self.draws = 0
        self.png, self.alt = b"", ""
        self.snapshot = snapshot
        self._draw, self._describe = draw, describe
        self.note = _marked(widgets.HTML(f'<span style="{NOTE_STYLE}">{SNAPSHOT_NOTE}</span>'), SNAPSHOT_ONLY)
        self.note.add_class("bertlook-snapshot-note")
        parts = [self.note, widgets.HBox(list(controls.values())), self.output]
        if static is not None:
            static_png, static_alt = _drawn(static)
            still = widgets.Output(outputs=(_figure_output(static_png, static_alt, "every map, without a kernel"),))
            parts = [self.note, _marked(still, SNAPSHOT_ONLY)] + [_marked(part, LIVE_ONLY) for part in parts[1:]]
        self.widget = widgets.VBox(parts)
        self.widget.add_class("bertlook-explorer")
        self.widget.add_class(self.css_class)
        for control in controls.values():
            control.observe(self.redraw, names="value")
        self.redraw()
        self._first_png, self._first_alt = (self.png, self.alt) if static is None else (static_png, static_alt)
        self._first_text = self._describe()

    def redraw(self, change=None) -> None:
        """Draw the current selection into the Output (replacing what it held)."""
        self.png, self.alt = _drawn(self._draw())
        self.output.outputs = (_figure_output(self.png, self.alt, self._describe()),)
        self.draws += 1

    def _ipython_display_(self) -> None:
        from IPython.display import display

        if not self.snapshot:
            display(self.widget)
            return
        view = {"model_id": self.widget.model_id, "version_major": 2, "version_minor": 0}
        display({"application/vnd.jupyter.widget-view+json": view, "text/plain": self._first_text,
                 "text/html": viz.figure_html(self._first_png, self._first_alt)}, raw=True)

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {self._describe()}>"


def _example_menu(examples: list[Encoded]) -> widgets.Dropdown:
    options = [(f"{i + 1}: {preview(e)}", i) for i, e in enumerate(examples)]
    return widgets.Dropdown(options=options, value=0, description="example",
                            layout=widgets.Layout(width="28em"))


class _OwnText:
    """A text box over an example menu: Enter encodes the text (`A | B`: a pair) with `encoder`, adds it to
    the examples and selects it; bad input, and text the encoder refuses, is reported beside the box (a Label:
    plain text) and the last figure stays (an error raised in an ipywidgets callback would show nowhere). The
    encoder's warnings (text that is all unknown tokens) are shown there too, not in the log console."""

    def __init__(self, explorer: Explorer, encoder, max_words: int = 60):
        self.explorer, self.encoder, self.max_words = explorer, encoder, max_words
        self.box = widgets.Text(placeholder="your own text, then Enter (A | B for a pair)", description="text",
                                continuous_update=False, layout=widgets.Layout(width="36em"))
        self.message = widgets.Label()
        self.box.observe(lambda change: self.add(change["new"]), names="value")
        note, *rest = explorer.widget.children
        explorer.widget.children = (note, widgets.HBox([self.box, self.message]), *rest)

    def add(self, text: str) -> Encoded | None:
        """Encode `text` and show it; None (and a message) when it is empty, too long or refused by the encoder."""
        parts = [part.strip() for part in text.split("|")]
        if not text.strip() or len(parts) > 2 or not all(parts):
            self.message.value = "type a text, or two texts separated by |" if text.strip() else ""
            return None
        words = sum(len(part.split()) for part in parts)
        if words > self.max_words:
            self.message.value = f"{words} words: at most {self.max_words}, please"
            return None
        try:
            with warnings.catch_warnings(record=True) as caught:  # shown beside the box, not in the log console
                warnings.simplefilter("always")
                enc = self.encoder.encode(*parts)
        except (ValueError, TypeError) as error:
            self.message.value = str(error)
            return None
        if enc.attn.shape[:2] != self.explorer.examples[0].attn.shape[:2]:
            self.message.value = "the encoder is not the model that made the examples"
            return None
        self.explorer.examples.append(enc)
        menu = self.explorer.example
        menu.options = [*menu.options, (f"{len(self.explorer.examples)}: {preview(enc)}", len(menu.options))]
        menu.value = len(menu.options) - 1  # redraws
        self.message.value = "; ".join([f"{enc.n_tokens} tokens", *(f"warning: {w.message}" for w in caught)])
        return enc


class HeadExplorer(Explorer):
    """Example menu + layer and head menus (1-indexed) over a heatmap of one head (`viz.plot_head`)."""

    css_class = "bertlook-head-explorer"

    def __init__(self, examples: Sequence[Encoded], layer: int = 1, head: int = 1, max_tokens: int | None = 40,
                 snapshot: bool = True, encoder=None):
        self.examples = _check_examples(examples)
        n_layers, n_heads = self.examples[0].attn.shape[:2]
        check_head(layer, head, n_layers, n_heads)
        self.max_tokens = max_tokens
        self.example = _example_menu(self.examples)
        self.layer = _number_menu("layer", n_layers, layer)
        self.head = _number_menu("head", n_heads, head)
        super().__init__({"example": self.example, "layer": self.layer, "head": self.head},
                         self._figure, self._text, snapshot)
        self.own_text = _OwnText(self, encoder) if encoder is not None else None

    @property
    def selection(self) -> tuple[Encoded, int, int]:
        """(example, layer, head), layer and head 1-indexed."""
        return self.examples[self.example.value], self.layer.value, self.head.value

    def _figure(self):
        enc, layer, head = self.selection
        return viz.head_figure(enc, layer, head, max_tokens=self.max_tokens)

    def _text(self) -> str:
        return f"example {self.example.value + 1}, head {head_label(self.layer.value, self.head.value)}"


class GridExplorer(Explorer):
    """Example menu over a layers x heads grid of thumbnails (`viz.plot_model_grid`)."""

    css_class = "bertlook-grid-explorer"

    def __init__(self, examples: Sequence[Encoded], max_tokens: int = 40, snapshot: bool = True, encoder=None):
        self.examples = _check_examples(examples)
        self.max_tokens = max_tokens
        self.example = _example_menu(self.examples)
        super().__init__({"example": self.example}, self._figure, self._text, snapshot)
        self.own_text = _OwnText(self, encoder) if encoder is not None else None

    def _figure(self):
        return viz.plot_model_grid(self.examples[self.example.value], max_tokens=self.max_tokens)

    def _text(self) -> str:
        return f"example {self.example.value + 1}, every head"


def head_explorer(examples: Sequence[Encoded], layer: int = 1, head: int = 1, max_tokens: int | None = 40,
                  snapshot: bool = True, encoder=None) -> HeadExplorer:
    """Pick an example (menu with a short preview), a layer and a head (menus, 1-indexed) and see that
    head's attention as a heatmap with token labels (the first `max_tokens` tokens). Given the `encoder` that
    made the examples, a text box adds the learner's own text."""
    return HeadExplorer(examples, layer, head, max_tokens, snapshot, encoder)


def grid_explorer(examples: Sequence[Encoded], max_tokens: int = 40, snapshot: bool = True,
                  encoder=None) -> GridExplorer:
    """Pick an example and see every head as a thumbnail: layers as rows, heads as columns; given the
    `encoder`, a text box adds the learner's own text."""
    return GridExplorer(examples, max_tokens, snapshot, encoder)


class GalleryExplorer(Explorer):
    """A group menu (e.g. attention patterns) and a menu of that group's maps (`viz.plot_head`); without a
    kernel, a still of every group's shortest maps (`figures.kovaleva.pattern_gallery`) in their place.

    items: (group, Encoded, layer, head, caption) with layer and head 1-indexed."""

    css_class = "bertlook-gallery-explorer"

    def __init__(self, items: Sequence[tuple[str, Encoded, int, int, str]], max_tokens: int | None = 64,
                 snapshot: bool = True):
        self.items = list(items)
        if not self.items:
            raise ValueError("give at least one (group, Encoded, layer, head, caption) item")
        for _, enc, layer, head, _ in self.items:
            check_head(layer, head, *enc.attn.shape[:2])
        self.groups = list(dict.fromkeys(item[0] for item in self.items))
        self.max_tokens = max_tokens
        self.group = widgets.Dropdown(options=self.groups, value=self.groups[0], description="pattern")
        self.index = _number_menu("map", len(self._members()), 1)
        self.group.observe(self._resize, names="value")
        super().__init__({"group": self.group, "index": self.index}, self._figure, self._text, snapshot,
                         static=pattern_gallery(self.items))

    def _members(self) -> list:
        return [item for item in self.items if item[0] == self.group.value]

    def _resize(self, change=None) -> None:
        self.index.options = list(range(1, len(self._members()) + 1))
        self.index.value = 1

    @property
    def selection(self) -> tuple[str, Encoded, int, int, str]:
        members = self._members()
        return members[min(self.index.value, len(members)) - 1]

    def _figure(self):
        from matplotlib.figure import Figure

        group, enc, layer, head, caption = self.selection
        fig = Figure(figsize=(5.2, 5.2), layout="constrained")
        ax = fig.add_subplot()
        viz.plot_head(enc, layer, head, ax=ax, max_tokens=self.max_tokens, vmax=None, title=caption)
        if min(enc.n_tokens, self.max_tokens or enc.n_tokens) > READABLE_TOKENS:  # labels would be under 8 pt
            ax.set(xticks=[], yticks=[])
        return fig

    def _text(self) -> str:
        members = self._members()
        return f"{self.group.value}: map {min(self.index.value, len(members))} of {len(members)}"


def gallery_explorer(items: Sequence[tuple[str, Encoded, int, int, str]], max_tokens: int | None = 64,
                     snapshot: bool = True) -> GalleryExplorer:
    """Browse maps by group (e.g. the hand label of each attention map): a group menu and a map menu."""
    return GalleryExplorer(items, max_tokens, snapshot)


def relation_explorer(scores: HeadScores, relations: Sequence[str] | None = None, min_n: int = 20,
                      snapshot: bool = True) -> Explorer:
    """A relation menu and a direction toggle over a layers x heads heatmap of every head's accuracy for that
    relation (`figures.accuracy_grid`, the best head boxed); relations with at least `min_n` dependents."""
    from matplotlib.figure import Figure

    counts = scores.relation_counts()
    relations = list(relations) if relations is not None else ["all"] + [r for r, c in counts.items() if c >= min_n]
    size = {r: int(scores.mask(r).sum()) for r in relations}
    menu = widgets.Dropdown(options=[(f"{r} (n={size[r]:,})", r) for r in relations], value=relations[0],
                            description="relation")
    toggle = widgets.ToggleButtons(options=["dep->head", "head->dep", "best"], value="dep->head",
                                   description="direction")

    def draw():
        fig = Figure(figsize=(0.55 * scores.n_heads + 2.4, 0.42 * scores.n_layers + 1.5), layout="constrained")
        figures.accuracy_grid(accuracy_frame(scores, menu.value, toggle.value), ax=fig.add_subplot(),
                              title=f"{menu.value} ({toggle.value}), n = {size[menu.value]:,}")
        return fig

    def describe():
        return f"relation {menu.value}, {toggle.value}"

    return Explorer({"relation": menu, "direction": toggle}, draw, describe, snapshot)


def cluster_explorer(result: ClusterResult, max_tokens: int = 40, snapshot: bool = True) -> Explorer:
    """Pick a head (menu sorted along the map's first axis, with its behaviour) and an example: the MDS map
    ringed at that head (`figures.mds_map`), beside its attention on the example (`viz.plot_head`)."""
    from matplotlib.figure import Figure

    heads = result.heads
    order = np.argsort(heads["x"].to_numpy(), kind="stable")
    options = [(f"{heads['label'].iloc[i]} · {BEHAVIOUR_NAMES[heads['behaviour'].iloc[i]]}", int(i)) for i in order]
    head_menu = widgets.Dropdown(options=options, value=int(order[0]), description="head")
    examples = _check_examples(result.examples)
    example_menu = _example_menu(examples)

    def draw():
        index = head_menu.value
        layer, head = divmod(index, result.n_heads)
        fig = Figure(figsize=(10.4, 5.6), layout="constrained")
        left, right = fig.subplots(1, 2, width_ratios=[1, 1.05])
        figures.mds_map(result, "behaviour", ax=left, highlight=index, annotate=False, title="heads by behaviour")
        broad = heads["behaviour"].iloc[index] == "broad"  # colours up to its 99th percentile, else blank
        viz.plot_head(examples[example_menu.value], layer + 1, head + 1, ax=right, max_tokens=max_tokens,
                      vmax=None if broad else 1.0, title=f"head {heads['label'].iloc[index]}"
                      + (" (colours up to its 99th percentile)" if broad else ""))
        return fig

    def describe():
        return f"head {heads['label'].iloc[head_menu.value]}, example {example_menu.value + 1}"

    return Explorer({"head": head_menu, "example": example_menu}, draw, describe, snapshot)
