"""ipywidgets explorers: pick an example, a layer and a head, and see the attention map.

`head_explorer(examples)`: an example menu and layer / head sliders (1-indexed) over `viz.plot_head`;
`grid_explorer(examples)`: an example menu over `viz.plot_model_grid` (every head as a thumbnail);
`gallery_explorer(items)`: maps by group (notebook 08's hand labels); `relation_explorer(scores)`: every
head's accuracy for a chosen relation (notebook 04); `cluster_explorer(result)`: a head on the MDS map beside
its attention (notebook 07). Drawing lives in `viz` and `figures`; here controls are only wired to it. Each explorer redraws into an
`ipywidgets.Output` (its `outputs` are replaced by a PNG, so the saved widget state holds the figure).

Exported HTML (nbconvert) runs no Python callbacks and, offline, cannot load the widget manager either,
so displaying an explorer also shows a static snapshot of its first view below the live controls.
"""
from __future__ import annotations

import base64
import re
from typing import Callable, Sequence

import ipywidgets as widgets
import numpy as np

from . import figures, viz
from .clustering import BEHAVIOUR_NAMES, ClusterResult
from .conventions import head_label
from .models import Encoded
from .syntax import HeadScores, accuracy_frame

PREVIEW_CHARS = 48


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


def _png_output(png: bytes, text: str) -> dict:
    """An nbformat display_data output holding a PNG (what an Output widget stores)."""
    return {"output_type": "display_data", "metadata": {},
            "data": {"image/png": base64.b64encode(png).decode("ascii"), "text/plain": text}}


class Explorer:
    """Controls wired to one draw function; `widget` is the live ipywidgets layout.

    `redraw()` draws the current selection into `output` (and counts it in `draws`); every control in
    `controls` redraws when its value changes. `png` holds the last picture drawn. The layout carries the
    CSS class `css_class` (e.g. "bertlook-head-explorer"), for styling and browser tests."""

    css_class = "bertlook-explorer"

    snapshot_caption = ("Snapshot of the explorer's first view, for readers of an exported page: "
                        "its controls need a running notebook kernel.")

    def __init__(self, controls: dict[str, widgets.Widget], draw: Callable[[], object], describe: Callable[[], str],
                 snapshot: bool = True):
        self.controls = controls
        self.output = widgets.Output()
        self.draws = 0
        self.png = b""
        self.snapshot = snapshot
        self._draw, self._describe = draw, describe
        self.widget = widgets.VBox([widgets.HBox(list(controls.values())), self.output])
        self.widget.add_class("bertlook-explorer")
        self.widget.add_class(self.css_class)
        for control in controls.values():
            control.observe(self.redraw, names="value")
        self.redraw()
        self._first_png, self._first_text = self.png, self._describe()

    def redraw(self, change=None) -> None:
        """Draw the current selection into the Output (replacing what it held)."""
        self.png = viz.figure_png(self._draw())
        self.output.outputs = (_png_output(self.png, self._describe()),)
        self.draws += 1

    def _ipython_display_(self) -> None:
        from IPython.display import Markdown, display

        display(self.widget)
        if self.snapshot:
            display(Markdown(f"*{self.snapshot_caption}* ({self._first_text})"))
            display({"image/png": base64.b64encode(self._first_png).decode("ascii"), "text/plain": self._first_text},
                    raw=True)

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {self._describe()}>"


def _example_menu(examples: list[Encoded]) -> widgets.Dropdown:
    options = [(f"{i + 1}: {preview(e)}", i) for i, e in enumerate(examples)]
    return widgets.Dropdown(options=options, value=0, description="example",
                            layout=widgets.Layout(width="28em"))


class HeadExplorer(Explorer):
    """Example menu + layer and head sliders (1-indexed) over a heatmap of one head (`viz.plot_head`)."""

    css_class = "bertlook-head-explorer"

    def __init__(self, examples: Sequence[Encoded], layer: int = 1, head: int = 1, max_tokens: int | None = 40,
                 snapshot: bool = True):
        self.examples = _check_examples(examples)
        n_layers, n_heads = self.examples[0].attn.shape[:2]
        if not (1 <= layer <= n_layers and 1 <= head <= n_heads):
            raise ValueError(f"layer and head are 1-indexed: layer 1-{n_layers}, head 1-{n_heads}; "
                             f"got layer {layer}, head {head}")
        self.max_tokens = max_tokens
        self.example = _example_menu(self.examples)
        self.layer = widgets.IntSlider(value=layer, min=1, max=n_layers, description="layer", continuous_update=False)
        self.head = widgets.IntSlider(value=head, min=1, max=n_heads, description="head", continuous_update=False)
        super().__init__({"example": self.example, "layer": self.layer, "head": self.head},
                         self._figure, self._text, snapshot)

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

    def __init__(self, examples: Sequence[Encoded], max_tokens: int = 40, snapshot: bool = True):
        self.examples = _check_examples(examples)
        self.max_tokens = max_tokens
        self.example = _example_menu(self.examples)
        super().__init__({"example": self.example}, self._figure, self._text, snapshot)

    def _figure(self):
        return viz.plot_model_grid(self.examples[self.example.value], max_tokens=self.max_tokens)

    def _text(self) -> str:
        return f"example {self.example.value + 1}, every head"


def head_explorer(examples: Sequence[Encoded], layer: int = 1, head: int = 1, max_tokens: int | None = 40,
                  snapshot: bool = True) -> HeadExplorer:
    """Pick an example (menu with a short preview), a layer and a head (sliders, 1-indexed) and see that
    head's attention as a heatmap with token labels (the first `max_tokens` tokens)."""
    return HeadExplorer(examples, layer, head, max_tokens, snapshot)


def grid_explorer(examples: Sequence[Encoded], max_tokens: int = 40, snapshot: bool = True) -> GridExplorer:
    """Pick an example and see every head as a thumbnail: layers as rows, heads as columns."""
    return GridExplorer(examples, max_tokens, snapshot)


class GalleryExplorer(Explorer):
    """A group menu (e.g. attention patterns) and a slider over that group's maps (`viz.plot_head`).

    items: (group, Encoded, layer, head, caption) with layer and head 1-indexed."""

    css_class = "bertlook-gallery-explorer"

    def __init__(self, items: Sequence[tuple[str, Encoded, int, int, str]], max_tokens: int | None = 64,
                 snapshot: bool = True):
        self.items = list(items)
        if not self.items:
            raise ValueError("give at least one (group, Encoded, layer, head, caption) item")
        self.groups = list(dict.fromkeys(item[0] for item in self.items))
        self.max_tokens = max_tokens
        self.group = widgets.Dropdown(options=self.groups, value=self.groups[0], description="pattern")
        self.index = widgets.IntSlider(value=1, min=1, max=len(self._members()), description="map",
                                       continuous_update=False)
        self.group.observe(self._resize, names="value")
        super().__init__({"group": self.group, "index": self.index}, self._figure, self._text, snapshot)

    def _members(self) -> list:
        return [item for item in self.items if item[0] == self.group.value]

    def _resize(self, change=None) -> None:
        self.index.value = 1
        self.index.max = len(self._members())

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
        ax.tick_params(labelsize=5)
        return fig

    def _text(self) -> str:
        members = self._members()
        return f"{self.group.value}: map {min(self.index.value, len(members))} of {len(members)}"


def gallery_explorer(items: Sequence[tuple[str, Encoded, int, int, str]], max_tokens: int | None = 64,
                     snapshot: bool = True) -> GalleryExplorer:
    """Browse maps by group (e.g. the hand label of each attention map): a group menu and a map slider."""
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
        fig = Figure(figsize=(12, 5.6), layout="constrained")
        left, right = fig.subplots(1, 2, width_ratios=[1, 1.05])
        figures.mds_map(result, "behaviour", ax=left, highlight=index, annotate=False, title="heads by behaviour")
        broad = heads["behaviour"].iloc[index] == "broad"  # colours scaled to its largest weight, else blank
        viz.plot_head(examples[example_menu.value], layer + 1, head + 1, ax=right, max_tokens=max_tokens,
                      vmax=None if broad else 1.0, title=f"head {heads['label'].iloc[index]}"
                      + (" (colours scaled to its largest weight)" if broad else ""))
        return fig

    def describe():
        return f"head {heads['label'].iloc[head_menu.value]}, example {example_menu.value + 1}"

    return Explorer({"head": head_menu, "example": example_menu}, draw, describe, snapshot)
