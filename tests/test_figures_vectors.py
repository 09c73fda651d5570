"""Notebook 13's figures (`figures.vectors`): drawn from a small synthetic `StructuralResults`, readable in the book's
column, told apart by more than colour, and saying in their alt text what they show with the numbers they plot."""
from __future__ import annotations

import inspect

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from bertlook_utils import figures, parses, structural, viz  # noqa: E402
from bertlook_utils.present import alttext  # noqa: E402
from bertlook_utils.present.figures import vectors  # noqa: E402
from test_figures import readable_figures  # noqa: E402, F401 (autouse: every figure here is readable in the column)

RANKS, RANK, LAYERS = (1, 2, 4), 4, (0, 1, 2)
# "The cat sat on the mat ." : silver edges cat-The, sat-cat, sat-on, on-mat, mat-the; "." hangs from "sat"
CAT = parses.Sentence(("The", "cat", "sat", "on", "the", "mat", "."), (2, 3, 0, 3, 6, 4, 3),
                      ("det", "nsubj", "ROOT", "prep", "det", "pobj", "punct"),
                      ("DET", "NOUN", "VERB", "ADP", "DET", "NOUN", "PUNCT"),
                      ("DT", "NN", "VBD", "IN", "DT", "NN", "."), "Cats", "Cats#0")
# layer 2 finds 4 of the 5 (the-mat is replaced by the-on); layer 0 the chain over the 6 words
PREDICTED = {0: [(1, 2), (2, 3), (3, 4), (4, 5), (5, 6)], 1: [(1, 2), (2, 3), (3, 4), (4, 6), (1, 5)],
             2: [(1, 2), (2, 3), (3, 4), (4, 6), (4, 5)]}


def _metrics(uuas: float, root: float | None) -> dict:
    row = {"uuas": uuas, "uuas_low": uuas - 2, "uuas_high": uuas + 2, "dspr": 0.5, "dspr_low": 0.45, "dspr_high": 0.55}
    depth = (root, root - 3, root + 3, 0.6, 0.55, 0.65) if root is not None else (np.nan,) * 6
    return row | dict(zip(("root_acc", "root_acc_low", "root_acc_high", "nspr", "nspr_low", "nspr_high"), depth))


def fake_results() -> structural.StructuralResults:
    """Known scores: the pretrained silver probe peaks at layer 1 (rank 4: 70 %), control 30 % there; the random-init
    model flat at 40 %; the chain 50 % UUAS, 2 % root accuracy. Sentence 1 of the held-out list is CAT."""
    silver = {0: (40, 45, 50), 1: (50, 60, 70), 2: (45, 55, 65)}  # layer -> UUAS by rank
    control = {0: (10, 15, 20), 1: (12, 20, 30), 2: (11, 18, 25)}
    rows, selectivity = [], []
    for task, table in (("silver", silver), ("control", control)):
        for r, rank in enumerate(RANKS):
            for layer in LAYERS:
                root = (30, 60, 55)[layer] if task == "silver" and rank == RANK else None
                rows.append({"model": "pretrained", "layer": layer, "task": task, "rank": rank,
                             **_metrics(table[layer][r], root)})
    rows += [{"model": "random-init", "layer": layer, "task": "silver", "rank": RANK, **_metrics(40.0, 35.0)}
             for layer in LAYERS[1:]]
    for layer in LAYERS:
        for r, rank in enumerate(RANKS):
            gap = silver[layer][r] - control[layer][r]
            selectivity.append((layer, rank, silver[layer][r], control[layer][r], gap, gap - 1.5, gap + 1.5))
    edges = [(layer, s, a, b) for layer in LAYERS for s, pairs in ((0, [(1, 2), (2, 3)]), (1, PREDICTED[layer]))
             for a, b in pairs]
    linear = {k: [v] for k, v in (_metrics(50.0, 2.0)).items()}
    return structural.StructuralResults(
        scores=pd.DataFrame(rows),
        selectivity=pd.DataFrame(selectivity, columns=["layer", "rank", "uuas", "control", "selectivity", "low",
                                                       "high"]),
        linear=pd.DataFrame(linear), edges=pd.DataFrame(edges, columns=["layer", "sentence", "a", "b"]),
        curves=pd.DataFrame(columns=["model", "layer", "kind", "task", "rank", "epoch", "loss"]),
        rank=RANK, n_train=4, n_test=2)


CASES = {
    "structural_layers": lambda: figures.structural_layers(fake_results()),
    "rank_sweep": lambda: figures.rank_sweep(fake_results(), 1),
    "structural_tree": lambda: figures.structural_tree(fake_results(), CAT, 2, 1),
}


def public() -> dict:
    return {name: f for name, f in inspect.getmembers(vectors, inspect.isfunction)
            if f.__module__ == vectors.__name__ and not name.startswith("_")}


@pytest.mark.parametrize("name", sorted(public().keys() | CASES.keys()))
def test_every_figure_draws_one_readable_described_figure(name, tmp_path):
    assert name in public() and name in CASES
    assert getattr(figures, name) is public()[name], f"figures/__init__.py does not re-export {name}"
    plt.close("all")
    fig = CASES[name]()
    assert isinstance(fig, Figure) and plt.get_fignums() == [fig.number]
    assert not viz.unreadable(fig)
    alt = alttext.describe(fig)
    assert len(alt) >= 80 and any(ch.isdigit() for ch in alt), alt
    from PIL import Image

    assert Image.open(viz.save(fig, tmp_path / "f.png")).text[viz.DESCRIPTION_KEY] == alt
    assert viz.figure_png(fig).startswith(b"\x89PNG")


def _lines(ax) -> dict[str, object]:
    return {line.get_label(): line for line in ax.get_lines() if not line.get_label().startswith("_")}


def test_layers_draw_each_probe_and_the_chain_and_say_the_best_layer_with_its_numbers():
    fig = figures.structural_layers(fake_results())
    uuas, depth = fig.axes
    lines = _lines(uuas)
    assert set(lines) == {"pretrained, silver trees", "random-init model, silver trees", "pretrained, control trees",
                          "left-to-right chain, silver trees"}
    np.testing.assert_allclose(lines["pretrained, silver trees"].get_ydata(), [50, 70, 65])
    np.testing.assert_allclose(lines["random-init model, silver trees"].get_xdata(), [1, 2])  # from layer 1
    np.testing.assert_allclose(lines["pretrained, control trees"].get_ydata(), [20, 30, 25])
    assert set(_lines(depth)) == set(lines) - {"pretrained, control trees"}
    np.testing.assert_allclose(_lines(depth)["pretrained, silver trees"].get_ydata(), [30, 60, 55])
    # no two lines told apart by colour alone: each has its own line style or marker
    looks = [(line.get_linestyle(), line.get_marker()) for line in lines.values()]
    assert len(set(looks)) == len(looks)
    assert {to_hex(line.get_color()) for line in lines.values()} <= set(viz.PALETTE.values())
    assert len(fig.legends) == 1 and not any(ax.get_legend() for ax in fig.axes)
    alt = alttext.describe(fig)
    assert ("finds most silver edges at layer 1: UUAS 70 % [68, 72], against 50 % for the left-to-right chain and "
            "at most 40 % (layer 1) for the random-init model; trained on the control trees, the same probe scores "
            "30 % [28, 32] there, a selectivity of 40 points") in alt
    assert "the silver root most often at layer 1: 60 % [57, 63] of sentences, against 2 % for the chain" in alt
    assert "pretrained, silver trees: 50 at layer 0 to 65 at layer 2, highest 70 at layer 1" in alt


def test_rank_sweep_puts_ranks_on_a_log2_axis_and_shows_selectivity_with_its_interval():
    fig = figures.rank_sweep(fake_results(), 1)
    (ax,) = fig.axes
    assert ax.get_xscale() == "log" and [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "4"]
    lines = _lines(ax)
    np.testing.assert_allclose(lines["pretrained, silver trees"].get_ydata(), [50, 60, 70])
    np.testing.assert_allclose(lines["pretrained, control trees"].get_ydata(), [12, 20, 30])
    np.testing.assert_allclose(lines["selectivity = silver − control"].get_ydata(), [38, 40, 40])
    assert len(ax.collections) == 3  # three intervals shaded
    alt = alttext.describe(fig)
    assert ("At layer 1, UUAS on the silver trees goes from 50 % at rank 1 to 70 % at rank 4, and on the control "
            "trees from 12 % to 30 %; selectivity is highest at rank 2: 40 points [38.5, 41.5]") in alt
    assert "selectivity = silver − control: 38 at rank 1 to 40 at rank 4" in alt
    with pytest.raises(ValueError, match="layer must be one of"):
        figures.rank_sweep(fake_results(), 7)


def _arcs(ax, side: int) -> list:
    """The arcs above (side 1) or below (side -1) the words."""
    return [line for line in ax.get_lines() if np.sign(np.asarray(line.get_ydata()).mean()) == side]


def test_the_tree_draws_silver_above_and_the_probe_below_right_solid_and_wrong_dashed():
    fig = figures.structural_tree(fake_results(), CAT, 2, 1)
    (ax,) = fig.axes
    above, below = _arcs(ax, 1), _arcs(ax, -1)
    assert len(above) == 6 and len(below) == 5  # 5 silver edges and the one to ".", the probe's 5
    assert sum(to_hex(line.get_color()) == vectors.PUNCT_ARC for line in above) == 1
    right = [line for line in below if to_hex(line.get_color()) == viz.PALETTE["right"]]
    wrong = [line for line in below if to_hex(line.get_color()) == viz.PALETTE["wrong"]]
    assert len(right) == 4 and len(wrong) == 1
    assert {line.get_linestyle() for line in right} == {"-"} and wrong[0].get_linestyle() != "-"  # not colour alone
    words = {t.get_text(): to_hex(t.get_color()) for t in ax.texts}
    assert words["."] == vectors.PUNCT_TEXT and words["cat"] == "#000000"
    assert len(fig.legends) == 1 and len(fig.legends[0].get_texts()) == 4
    assert "finds 4 of 5 silver edges" in ax.get_title()
    alt = alttext.describe(fig)
    assert ("Held-out sentence 1, 7 words: “The cat sat on the mat .”. Above the words, its 5 silver edges between "
            "words that are not punctuation (and 1 to punctuation, grey); below, the 5 edges of the distance probe's "
            "minimum spanning tree at layer 2: 4 are silver edges (solid) and 1 is not (dashed): “on”–“the”; it "
            "misses “the”–“mat”") in alt


def test_the_tree_refuses_a_sentence_that_is_not_the_one_at_index_and_an_unknown_layer():
    with pytest.raises(ValueError, match="is not this sentence"):
        figures.structural_tree(fake_results(), CAT, 2, 0)  # sentence 0 has two edges, CAT needs five
    with pytest.raises(ValueError, match="layer must be one of"):
        figures.structural_tree(fake_results(), CAT, 9, 1)


def test_a_long_sentence_is_written_upright_and_stays_readable_in_the_column():
    n = 30
    words = tuple(f"word{i}" for i in range(n))
    long = parses.Sentence(words, tuple(range(n)), ("dep",) * n, ("NOUN",) * n, ("NN",) * n, "Long", "Long#0")
    results = fake_results()
    results.edges = pd.DataFrame([(2, 0, i, i + 1) for i in range(1, n)], columns=["layer", "sentence", "a", "b"])
    fig = figures.structural_tree(results, long, 2, 0)
    assert {t.get_rotation() for t in fig.axes[0].texts} == {90.0}
    assert fig.get_figwidth() <= vectors.WIDEST_IN and not viz.unreadable(fig)
    short = figures.structural_tree(fake_results(), CAT, 2, 1)
    assert {t.get_rotation() for t in short.axes[0].texts} == {0.0}
