"""ipywidgets explorers (widgets.head_explorer, widgets.grid_explorer) on synthetic attention."""
from __future__ import annotations

import warnings

import ipywidgets
import matplotlib.pyplot as plt
import numpy as np
import pytest

from bertlook_utils import viz, widgets
from builders import PAIR_TOKENS, identity_map, make_encoded, next_map, prev_map, stack_heads, uniform_map

N = len(PAIR_TOKENS)


@pytest.fixture
def examples():
    """Three inputs of 2 layers x 3 heads; every head is a different, easy-to-see pattern."""
    maps = [prev_map(N), next_map(N), identity_map(N), uniform_map(N)]
    out = []
    for shift in range(3):
        heads = [[maps[(shift + layer * 3 + head) % 4] for head in range(3)] for layer in range(2)]
        tokens = PAIR_TOKENS if shift != 2 else ["[CLS]", "a", "dog", "barked", ".", "[SEP]", "loudly", "at",
                                                  "night", "!", "[SEP]"]
        out.append(make_encoded(tokens, stack_heads(heads)))
    return out


def shown_png(explorer) -> bytes:
    """The PNG the explorer shows, checked to carry the alt text of the figure drawn."""
    (output,) = explorer.output.outputs
    assert output["output_type"] == "display_data"
    ((png, alt),) = viz.shown_figures(output["data"])
    assert png.startswith(b"\x89PNG") and alt == explorer.alt and len(alt) > 20
    return png


def shown_text(explorer) -> str:
    return explorer.output.outputs[0]["data"]["text/plain"]


def test_head_explorer_controls(examples):
    explorer = widgets.head_explorer(examples)
    labels = [label for label, _ in explorer.example.options]
    assert [value for _, value in explorer.example.options] == [0, 1, 2]
    assert labels[0] == "1: the cat sat. | it ran,!"  # a preview without [CLS] / [SEP], the pair's parts split
    assert labels[2].startswith("3: a dog barked")
    assert (list(explorer.layer.options), explorer.layer.value) == ([1, 2], 1)
    assert (list(explorer.head.options), explorer.head.value) == ([1, 2, 3], 1)
    assert (explorer.layer.description, explorer.head.description) == ("layer", "head")
    assert set(explorer.controls) == {"example", "layer", "head"}
    assert "bertlook-head-explorer" in explorer.widget._dom_classes
    assert explorer.draws == 1 and shown_text(explorer) == "example 1, head 1-1"


@pytest.mark.parametrize("control, value, text", [
    ("layer", 2, "example 1, head 2-1"), ("head", 3, "example 1, head 1-3"), ("example", 2, "example 3, head 1-1")])
def test_changing_a_control_redraws(examples, control, value, text):
    explorer = widgets.head_explorer(examples)
    before = shown_png(explorer)
    explorer.controls[control].value = value
    assert explorer.draws == 2
    assert shown_text(explorer) == text
    assert shown_png(explorer) != before  # a different head (or input) is a different picture
    assert len(explorer.output.outputs) == 1  # replaced, not appended


def test_layer_and_head_menus_are_one_indexed(examples, monkeypatch):
    calls = []
    real = viz.head_figure

    def spy(enc, layer, head, **kwargs):
        calls.append((enc, layer, head))
        return real(enc, layer, head, **kwargs)

    monkeypatch.setattr(viz, "head_figure", spy)
    explorer = widgets.head_explorer(examples, layer=2, head=3)
    explorer.example.value = 1
    assert calls[0] == (examples[0], 2, 3)
    assert calls[-1] == (examples[1], 2, 3)
    # what is drawn for layer 2, head 3 is array [1, 2]
    fig = real(examples[1], 2, 3)
    np.testing.assert_array_equal(fig.axes[0].images[0].get_array(), examples[1].attn[1, 2])
    assert fig.axes[0].get_title() == "head 2-3"


@pytest.mark.parametrize("bad", [[], (), "not examples", [np.zeros((2, 2))]])
def test_bad_examples_raise(bad):
    with pytest.raises(ValueError):
        widgets.head_explorer(bad)
    with pytest.raises(ValueError):
        widgets.grid_explorer(bad)


def test_mixed_model_sizes_and_bad_start_raise(examples):
    other = make_encoded(["[CLS]", "x", "[SEP]"], np.stack([np.stack([identity_map(3)] * 4)]))
    with pytest.raises(ValueError, match="different sizes"):
        widgets.head_explorer(examples + [other])
    with pytest.raises(ValueError, match="1-indexed"):
        widgets.head_explorer(examples, layer=0)
    with pytest.raises(ValueError, match="1-indexed"):
        widgets.head_explorer(examples, head=4)


def test_grid_explorer_redraws_per_example(examples):
    open_before = plt.get_fignums()
    explorer = widgets.grid_explorer(examples)
    assert len(explorer.example.options) == 3 and set(explorer.controls) == {"example"}
    assert "bertlook-grid-explorer" in explorer.widget._dom_classes
    first = shown_png(explorer)
    explorer.example.value = 1
    assert explorer.draws == 2 and shown_png(explorer) != first
    assert shown_text(explorer) == "example 2, every head"
    assert plt.get_fignums() == open_before  # nothing left for the inline backend to show twice


def test_display_is_one_output_live_widget_first_snapshot_as_fallback(examples, monkeypatch):
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj, **kwargs: shown.append((obj, kwargs)))
    explorer = widgets.head_explorer(examples)
    first = shown_png(explorer)
    explorer.head.value = 2  # the snapshot stays the first view
    explorer._ipython_display_()
    assert len(shown) == 1  # JupyterLab renders the widget view and nothing else
    (bundle, kwargs), = shown
    assert kwargs == {"raw": True}
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == explorer.widget.model_id
    assert viz.shown_figures(bundle)[0][0] == first and "image/png" not in bundle
    assert bundle["text/plain"] == "example 1, head 1-1"
    assert explorer.output in explorer.widget.children

    shown.clear()
    explorer = widgets.head_explorer(examples, snapshot=False)
    explorer._ipython_display_()
    assert [obj for obj, _ in shown] == [explorer.widget]


class FakeEncoder:
    """encode(a, b=None): the words of a (and b) as tokens, every head attending to the previous token."""

    def __init__(self, n_layers=2, n_heads=3):
        self.shape = (n_layers, n_heads)
        self.calls = []

    def encode(self, a, b=None):
        self.calls.append((a, b))
        tokens = ["[CLS]", *a.split(), "[SEP]", *(b.split() + ["[SEP]"] if b else [])]
        return make_encoded(tokens, np.broadcast_to(prev_map(len(tokens)), (*self.shape, len(tokens), len(tokens))))


@pytest.mark.parametrize("make", [widgets.head_explorer, widgets.grid_explorer], ids=["head", "grid"])
def test_own_text_is_encoded_added_and_shown(examples, make):
    encoder = FakeEncoder()
    explorer = make(examples, encoder=encoder)
    box = explorer.own_text.box
    assert explorer.widget.children[0] is explorer.note and box in explorer.widget.children[1].children
    first = shown_png(explorer)
    box.value = "the cat sat | it ran"
    assert encoder.calls == [("the cat sat", "it ran")]
    assert len(explorer.examples) == 4 and explorer.example.value == 3
    assert explorer.example.options[-1][0].startswith("4: the cat sat | it ran")
    assert shown_png(explorer) != first and explorer.own_text.message.value == "8 tokens"
    box.value = "a dog barked"  # a single text
    assert encoder.calls[-1] == ("a dog barked",) + (None,) and len(explorer.examples) == 5


@pytest.mark.parametrize("text, message", [("   ", ""), ("a | b | c", "type a text, or two texts separated by |"),
                                           ("a |", "type a text, or two texts separated by |"),
                                           (" ".join(["word"] * 61), "61 words: at most 60, please")])
def test_own_text_refuses_bad_input_with_a_message(examples, text, message):
    encoder = FakeEncoder()
    explorer = widgets.head_explorer(examples, encoder=encoder)
    assert explorer.own_text.add(text) is None
    assert explorer.own_text.message.value == message and not encoder.calls and len(explorer.examples) == 3


def test_own_text_from_another_model_is_refused(examples):
    explorer = widgets.head_explorer(examples, encoder=FakeEncoder(n_layers=4))
    explorer.own_text.box.value = "the cat sat"  # through the callback: nothing may escape it
    assert explorer.own_text.message.value == "the encoder is not the model that made the examples"
    assert len(explorer.examples) == 3 and explorer.draws == 1


class RefusingEncoder:
    """An encoder that refuses every text, as `Encoder.encode` refuses a text too long or with no wordpieces."""

    def __init__(self, error: Exception):
        self.error = error

    def encode(self, a, b=None):
        raise self.error


@pytest.mark.parametrize("error", [ValueError("662 tokens: <b>at most 512</b>"), TypeError("text must be a str")])
@pytest.mark.parametrize("make", [widgets.head_explorer, widgets.grid_explorer], ids=["head", "grid"])
def test_text_the_encoder_refuses_is_shown_beside_the_box_and_the_figure_stays(examples, make, error):
    """The box's callback runs inside ipywidgets: an error raised there shows nowhere, so it becomes the message
    (a Label: shown as plain text, never as markup) and the last figure stays."""
    explorer = make(examples, encoder=RefusingEncoder(error))
    first = shown_png(explorer)
    explorer.own_text.box.value = "the cat sat | it ran"
    assert explorer.own_text.message.value == str(error)
    assert isinstance(explorer.own_text.message, ipywidgets.Label)
    assert shown_png(explorer) == first and explorer.draws == 1 and len(explorer.examples) == 3


@pytest.mark.parametrize("text", ["\u200b", " ".join(["Pneumonoultramicroscopicsilicovolcanoconiosis"] * 60)],
                         ids=["zero-width space", "over 512 tokens"])
def test_text_the_real_encoder_refuses_is_shown_beside_the_box(examples, encoder, text):
    explorer = widgets.head_explorer(examples, encoder=encoder)
    explorer.own_text.box.value = text
    assert explorer.own_text.message.value and len(explorer.examples) == 3 and explorer.draws == 1


def test_explorer_draws_tokens_with_dollars_as_they_are(tmp_path):
    """Paired "$" would start mathtext ("$$", "$\\frac$" fail to parse): the explorer draws them as text."""
    tokens = ["[CLS]", "$$", r"$\frac$", "[SEP]"]
    explorer = widgets.head_explorer([make_encoded(tokens, stack_heads([[uniform_map(len(tokens))] * 3] * 2))])
    assert shown_png(explorer)
    svg = viz.save(explorer._draw(), tmp_path / "explorer.svg").read_text()
    assert all(f">{token}</text>" in svg for token in tokens[1:3])


def test_the_encoders_warning_is_shown_beside_the_box_not_in_the_log(encoder):
    explorer = widgets.head_explorer([encoder.encode("The cat sat.")], encoder=encoder)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning that escaped the box would fail here
        explorer.own_text.box.value = "😀 😀"
    message = explorer.own_text.message.value
    assert message.startswith("4 tokens; warning: every word of text a is the unknown token '[UNK]'")
    assert len(explorer.examples) == 2


def test_the_snapshot_note_leads_every_explorer_and_is_hidden_while_live(examples):
    for explorer in (widgets.head_explorer(examples), widgets.grid_explorer(examples)):
        note, controls, output = explorer.widget.children
        assert note is explorer.note and output is explorer.output
        assert "snapshot — open in Jupyter to explore" in note.value and note.layout.display == "none"
        assert widgets.SNAPSHOT_ONLY in note._dom_classes
        assert not any(control.disabled for control in explorer.controls.values())  # a kernel drives them
        assert set(controls.children) == set(explorer.controls.values())


def gallery_items(examples):
    """(kind, Encoded, layer, head, caption): two vertical maps (the second one the shorter), one diagonal."""
    short = make_encoded(["[CLS]", "hi", "[SEP]"], stack_heads([[uniform_map(3)] * 3] * 2))
    return [("vertical", examples[0], 1, 1, "v1"), ("vertical", short, 1, 2, "v2"),
            ("diagonal", examples[1], 2, 1, "d1")]


def test_the_gallery_holds_a_still_of_every_kind_for_pages_without_a_kernel(examples):
    explorer = widgets.gallery_explorer(gallery_items(examples))
    note, still, controls, output = explorer.widget.children
    assert note is explorer.note and output is explorer.output
    assert widgets.SNAPSHOT_ONLY in still._dom_classes and still.layout.display == "none"
    assert widgets.LIVE_ONLY in controls._dom_classes and widgets.LIVE_ONLY in output._dom_classes
    (picture,) = still.outputs
    ((png, alt),) = viz.shown_figures(picture["data"])
    assert "grid of" in alt or "panels" in alt
    assert png.startswith(b"\x89PNG") and png != shown_png(explorer)
    explorer.group.value = "diagonal"  # the still stays; the live map follows the menu
    assert still.outputs == (picture,) and shown_text(explorer) == "diagonal: map 1 of 1"
    assert list(explorer.index.options) == [1] and explorer.index.value == 1  # the map menu follows the group


def test_pattern_gallery_draws_the_shortest_maps_of_each_kind_with_their_tokens(examples):
    from bertlook_utils.present.figures.kovaleva import pattern_gallery

    items = gallery_items(examples)
    fig = pattern_gallery(items, per_kind=1, max_tokens=10)
    shown = [ax for ax in fig.axes if ax.get_visible()]
    assert len(shown) == 2  # a row per kind, in the items' order
    assert [ax.get_title() for ax in shown] == ["vertical\nv2", "diagonal (first 10 tokens)\nd1"]
    assert [t.get_text() for t in shown[0].get_xticklabels()] == ["[CLS]", "hi", "[SEP]"]
    assert [t.get_text() for t in shown[1].get_xticklabels()] == examples[1].tokens[:10]
    fig = pattern_gallery(items, per_kind=2, max_tokens=32, columns=2)
    assert [ax.get_visible() for ax in fig.axes] == [True, True, True, False]  # diagonal has one map
    assert viz.unreadable(fig) == []
    plt.close("all")
    with pytest.raises(ValueError, match="at least one"):
        pattern_gallery([])
