"""Alt text read from what a figure draws (`alttext`), and the image that carries it (`viz.figure_html`,
`viz.shown_figures`): known figures give known sentences with their numbers."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from bertlook_utils import viz  # noqa: E402
from bertlook_utils.present import alttext  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_a_line_chart_says_where_each_labelled_line_starts_peaks_and_ends():
    fig, ax = plt.subplots()
    layers = [1, 2, 3, 4, 5, 6]
    ax.plot(layers, [0.02, 0.3, 0.5, 0.71, 0.4, 0.3], label="[CLS]")
    ax.plot(layers, [0.1, 0.1, 0.2, 0.1, 0.1, 0.05], label="[SEP]")
    ax.axhline(0.1, color="k")  # an unlabelled reference line is not read as a series
    ax.axhline(0.5, label="uniform")  # a labelled one is read as a level
    ax.set(xlabel="layer (1 = the input side)", ylabel="attention", title="Attention by layer")
    assert alttext.describe(fig) == (
        "Attention by layer: line chart of attention by layer; [CLS]: 0.02 at layer 1 to 0.3 at layer 6, highest "
        "0.71 at layer 4; [SEP]: 0.1 at layer 1 to 0.05 at layer 6, highest 0.2 at layer 3; uniform: 0.5 throughout.")


def test_bars_name_their_categories_and_a_long_row_its_extremes():
    fig, (few, many) = plt.subplots(1, 2)
    few.bar(["vertical", "diagonal", "block"], [0.5, 0.25, 0.125])
    few.set_ylabel("share of maps")
    many.barh([f"h{i}" for i in range(10)], np.arange(10.0) - 3)
    text = alttext.describe(fig)
    assert text.startswith("2 panels. Panel 1, bar chart of share of maps; vertical 0.5, diagonal 0.25, block 0.125.")
    assert "Panel 2, bar chart; 10 bars, highest 6 at h9, lowest -3 at h0." in text


def test_a_heatmap_says_its_size_its_range_and_where_it_peaks_by_tick_names():
    fig, ax = plt.subplots()
    values = np.zeros((3, 4))
    values[2, 1] = 0.9
    image = ax.imshow(values)
    fig.colorbar(image, ax=ax)  # the colour bar is not a panel
    ax.set_xticks(range(4), ["[CLS]", "the", "cat", "[SEP]"])
    ax.set_yticks(range(3), ["[CLS]", "the", "cat"])
    ax.set_title("head 1-2")
    assert alttext.describe(fig) == ("Head 1-2: heatmap; a 3 by 4 map from 0 to 0.9, highest at (row “cat”, "
                                     "column “the”).")


def test_points_give_their_count_ranges_and_correlation():
    fig, ax = plt.subplots()
    ax.scatter([1, 2, 3, 4], [2, 4, 6, 8])
    ax.set(xlabel="weight", ylabel="accuracy")
    assert alttext.describe(fig) == ("Scatter plot of accuracy by weight; 4 points, weight from 1 to 4, accuracy "
                                     "from 2 to 8 (correlation 1).")


def test_a_headline_comes_first_and_a_large_grid_is_summed_up():
    fig, axes = plt.subplots(3, 4)
    for i, ax in enumerate(axes.flat):
        ax.imshow(np.eye(3) * (i + 1))
        ax.set_title(f"1-{i + 1}")
        ax.axis("off")  # thumbnails without axes still count
    alttext.headline(fig, "Every head  of layer 1:\n the diagonal everywhere")
    assert alttext.describe(fig) == ("Every head of layer 1: the diagonal everywhere. A grid of 12 panels (heatmap), "
                                     "the first titled 1-1, 1-2, 1-3, 1-4.")
    ax = plt.figure().add_subplot()
    alttext.headline(ax, "A panel's own sentence")
    assert alttext.describe(ax.figure) == "A panel's own sentence."


def test_numbers_and_labels_read_aloud():
    assert [alttext._numeric(t) for t in ("12", "-0.5", "1e-3", "40%", ",", ".", "head")] == [True] * 4 + [False] * 3
    assert [alttext.number(v) for v in (0.012345, 12345.6, float("nan"), float("inf"), 3.0)] == [
        "0.0123", "12,346", "missing", "infinity", "3"]
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 2], label=r"$\alpha$ share")
    ax.set_title("costs $5")
    assert "α" not in alttext.describe(fig) and "alpha share: 1 at" in alttext.describe(fig)
    assert alttext.describe(plt.figure()) == "A figure with no labelled content."


def test_the_image_escapes_its_alt_text_and_the_tools_read_it_back():
    fig, ax = plt.subplots()
    ax.plot([1, 2], [3, 4], label='<img src=x onerror=alert(1)> "quoted"')
    ax.legend()
    markup = viz.notebook_figure(fig)
    assert "<img src=x" not in markup and "&lt;img src=x onerror=alert(1)&gt; &quot;quoted&quot;" in markup
    ((png, alt),) = viz.shown_figures({"text/html": markup, "text/plain": "<Figure>"})
    assert png.startswith(b"\x89PNG") and alt == alttext.describe(fig)
    assert '<img src=x onerror=alert(1)> "quoted": 3 at' in alt
    assert viz.shown_figures({"image/png": "iVBORw0KGgo="}) == [(b"\x89PNG\r\n\x1a\n", None)]
    assert viz.shown_figures({"text/html": "<img src='data:image/png;base64,iVBORw0KGgo='>"}) == []  # not a figure


def test_a_saved_figure_carries_its_description(tmp_path):
    from PIL import Image

    fig, ax = plt.subplots()
    ax.plot([1, 2], [3, 4], label="rise")
    path = viz.save(fig, tmp_path / "rise.png")
    assert Image.open(path).text[viz.DESCRIPTION_KEY] == alttext.describe(fig)
    assert f"<dc:description>{alttext.describe(fig)}</dc:description>" in viz.save(fig, tmp_path / "r.svg").read_text()


def test_the_grid_of_every_head_says_how_many_heads_look_at_the_special_tokens():
    from builders import make_encoded, stack_heads

    to = [np.tile(np.eye(4)[k], (4, 1)) for k in range(4)]  # every token attends to token k
    enc = make_encoded(["[CLS]", "a", "b", "[SEP]"], stack_heads([[to[3], to[1]], [to[2], to[0]]]))
    assert alttext.describe(viz.plot_model_grid(enc)) == (
        "Every head's attention map on one input of 4 tokens, 2 layers (layer 1 at the top) by 2 heads; in 2 of 4 "
        "heads the token that receives most attention is [CLS] or [SEP]. A grid of 4 panels (heatmap), the first "
        "titled head 1, head 2.")


def test_reference_lines_and_drawn_lines_are_not_read_as_data():
    fig, (scatter, drawing) = plt.subplots(1, 2)
    scatter.scatter([0.1, 0.5, 0.9], [0.2, 0.4, 0.8])
    scatter.plot([0, 1], [0, 1], color="grey")  # the diagonal y = x, unlabelled
    scatter.set(xlabel="weight", ylabel="norm")
    drawing.plot([0, 1], [0, 3])  # an attention line between two words
    drawing.axis("off")
    drawing.set_title("det: 3 of 4 right")
    assert alttext.describe(fig) == (
        "2 panels. Panel 1, scatter plot of norm by weight; 3 points, weight from 0.1 to 0.9, norm from 0.2 to 0.8 "
        "(correlation 0.982). Panel 2, det: 3 of 4 right: diagram.")


def test_estimates_with_error_bars_are_read_and_a_layer_by_head_map_names_its_cell():
    fig, (estimates, grid) = plt.subplots(1, 2)
    estimates.errorbar([1, 2, 3], [0.2, 0.5, 0.4], yerr=0.1, fmt="o", capsize=3, label="sink mass")
    estimates.errorbar([1, 2, 3], [0.1, 0.1, 0.1], yerr=0.05, fmt="none")  # unlabelled: not read
    estimates.set(xlabel="layer", ylabel="mass")
    values = np.zeros((2, 3))
    values[1, 2] = 1.0
    grid.imshow(values)
    grid.set_xticks(range(3), ["1", "2", "3"])
    grid.set_yticks(range(2), ["1", "2"])
    grid.set(xlabel="head", ylabel="layer")
    assert alttext.describe(fig) == (
        "2 panels. Panel 1, line chart of mass by layer; sink mass: 0.2 at layer 1, 0.5 at layer 2, 0.4 at layer 3. "
        "Panel 2, heatmap; a 2 by 3 map from 0 to 1, highest at (layer 2, head 3).")
