"""figures: every figure function draws from synthetic results of the analyses, returns its Figure (or Axes),
and renders to PNG; heatmaps carry a colour bar and mark what they say they mark."""
from __future__ import annotations

from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from bertlook_utils import clustering, figures, gradients, patterns, probes, syntax, viz  # noqa: E402

L, H = 2, 3
rng = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def rendered(drawn) -> bytes:
    """PNG bytes of a Figure, of the figure of an Axes, or of the figure of the first of several Axes; each also
    saves for publication (viz.save) as SVG, PDF and PNG."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        for fmt, magic in (("svg", b"<?xml"), ("pdf", b"%PDF"), ("png", b"\x89PNG")):
            path = viz.save(drawn, Path(folder) / f"figure.{fmt}")
            assert path.read_bytes().startswith(magic), fmt
    fig = getattr(drawn, "figure", None) or getattr(np.ravel(drawn)[0], "figure", drawn)
    png = viz.figure_png(fig)
    assert png.startswith(b"\x89PNG") and len(png) > 2000
    return png


def test_save_keeps_text_as_text_and_refuses_an_unknown_format(tmp_path):
    fig, ax = plt.subplots()
    ax.set_title("head 3-9 <det>")
    svg = viz.save(ax, tmp_path / "fig.svg").read_text()
    assert "head 3-9 &lt;det&gt;" in svg  # a searchable, editable label, escaped
    with pytest.raises(ValueError, match="save as one of .png, .svg, .pdf"):
        viz.save(fig, tmp_path / "fig.jpg")


def colour_bars(fig) -> int:
    return sum(ax.get_label() == "<colorbar>" for ax in fig.axes)


def test_sep_noop_figures():
    gradient = rng.random((4, L, H, len(gradients.CATEGORIES))) + 0.1
    attention = rng.dirichlet(np.ones(len(gradients.CATEGORIES)), (4, L, H))
    result = gradients.GradientResult(gradient, attention, "pair-cosine")
    assert len(figures.attention_and_gradient(result).axes) == 2
    assert colour_bars(figures.sink_gradient_by_head(result)) == 1  # coloured by layer
    rows = [("layer", layer, 0, *condition, i, 1e-3 * (i + 1), 2e-3 * (i + layer), 0.3)
            for layer in (1, 2) for condition in gradients.CONDITIONS for i in range(3)]
    frame = pd.DataFrame(rows, columns=["scope", "layer", "head", *gradients.CONDITION_COLUMNS, "input",
                                        *gradients.DISTANCES, "moved"])
    fig = figures.sink_ablation(gradients.AblationResult(frame, reference=0.05))
    assert [len(ax.get_legend_handles_labels()[0]) for ax in fig.axes] == [4, 4]  # 3 edits + the yardstick
    rendered(fig)


def test_value_norms_figure_marks_the_sink_threshold_and_colours_by_layer():
    norms = pd.DataFrame({"layer": np.repeat([1, 2], H), "head": np.tile(range(1, H + 1), L),
                          "sink": rng.random(L * H), "value_ratio": rng.random(L * H) + 0.01,
                          "output_ratio": [np.nan] + list(rng.random(L * H - 1) + 0.01)})
    fig = figures.value_norms(norms, threshold=0.4)
    assert colour_bars(fig) == 1
    ax = fig.axes[0]
    assert any(np.allclose(line.get_xdata(), 0.4) for line in ax.lines)
    assert np.isfinite(ax.collections[0].get_offsets()).all()  # a NaN output ratio falls back to the value ratio
    rendered(fig)


def test_broad_definitions_draws_both_thresholds():
    broad = pd.DataFrame({"layer": np.repeat([1, 2], H), "head": np.tile(range(1, H + 1), L),
                          "entropy": rng.random(L * H) * 4 + 1, "max_weight": rng.random(L * H) * 0.5 + 0.01})
    fig = figures.broad_definitions(broad, max_weight=0.1, entropy_above=3.8)
    ax = fig.axes[0]
    assert any(np.allclose(line.get_xdata(), 0.1) for line in ax.lines)
    assert any(np.allclose(line.get_ydata(), 3.8) for line in ax.lines)
    assert len(ax.get_legend_handles_labels()[0]) == 2
    rendered(fig)


def test_entropy_by_layer_draws_the_uniform_reference():
    entropy = pd.DataFrame({"layer": np.repeat([1, 2], H), "head": np.tile(range(1, H + 1), L),
                            "entropy": rng.random(L * H) * 4, "cls_entropy": rng.random(L * H) * 4,
                            "uniform": np.log(128), "max_weight": 0.2})
    fig = figures.entropy_by_layer(entropy)
    assert all(any(np.allclose(line.get_ydata(), np.log(128)) for line in ax.lines) for ax in fig.axes)
    rendered(fig)


def test_syntax_figures_mark_the_best_head():
    words = ["The", "cat", "sat", "down", "."]
    heads, relations = [2, 3, 0, 3, 3], ["det", "nsubj", "ROOT", "advmod", "punct"]
    attn = rng.dirichlet(np.ones(7), (L, H, 7)).astype(np.float32)
    example = syntax.ParsedAttention(attn, heads, relations, words)
    assert len(figures.relation_head(example, 1, 2, "det")) == 2
    focused = np.zeros((L, H, 7, 7), dtype=np.float32)
    focused[:, :, 1:6, 2] = 1  # every word attends to "cat": right for "The" (det), wrong for "cat" (nsubj)
    focused[:, :, [0, 6], 0] = 1
    left, _ = figures.relation_head(syntax.ParsedAttention(focused, heads, relations, words), 1, 1, "det")
    assert left.get_title() == "det: head 1-1 (dependent → head),\n1 of 1 right on this sentence"
    left, _ = figures.relation_head(syntax.ParsedAttention(focused, heads, relations, words), 1, 1, "nsubj")
    assert left.get_title().endswith("0 of 1 right on this sentence")
    fig = figures.relation_heads([example, example, example], [("det", 1, 1, "dep->head"), ("nsubj", 2, 3, "head->dep"),
                                                               ("det", 2, 1, "dep->head")])
    assert sum(ax.axison for ax in fig.axes) == 0 and len(fig.axes) == 8  # 3 pairs drawn, the 4th left blank
    frame = pd.DataFrame({"layer": np.repeat([1, 2], H), "head": np.tile(range(1, H + 1), L),
                          "accuracy": [0.1, 0.2, 0.3, 0.9, 0.4, 0.5]})
    ax = figures.accuracy_grid(frame, title="det")
    assert ax.get_title() == "det: best head 2-1 = 90.0 %"
    boxes = [p for p in ax.patches if p.get_edgecolor()[:3] == (0, 0, 0)]
    assert len(boxes) == 1 and boxes[0].get_xy() == (-0.5, 0.5)  # head 1 of layer 2
    assert colour_bars(ax.figure) == 1
    rendered(ax)


def test_accuracy_by_rank_labels_the_last_rank_as_that_or_more():
    by_rank = pd.DataFrame({"rank": [1, 2, 3], "n": [10, 5, 2], "nearest mention": [1.0, 0.0, 0.0],
                            "sieve": [0.9, 0.6, 0.5]})
    fig = figures.accuracy_by_rank(by_rank)
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()][-1] == "3+\n(n = 2)"
    rendered(fig)


def synthetic_probes() -> probes.ProbeResults:
    names = [m[0] for m in probes.MODELS]
    table = pd.DataFrame({"model": names, "uas_argmax": np.linspace(20, 70, len(names)),
                          "uas_mst": np.linspace(22, 72, len(names))})
    trained = [name for name, kind, _ in probes.MODELS if kind]
    curves = pd.DataFrame([(name, epoch, 1.0 / epoch, 10.0 * epoch) for name in trained for epoch in (1, 2)],
                          columns=["model", "epoch", "train_loss", "heldout_uas"])
    best = pd.DataFrame({"relation": ["all", "det", "nsubj"], "layer": [1, 1, 2], "head": [2, 2, 3],
                         "direction": ["dep->head", "dep->head", "head->dep"], "accuracy": [30.0, 90.0, 50.0],
                         "n": [100, 40, 30]})
    weights = rng.normal(size=(2, L, H))
    return probes.ProbeResults(table, curves, weights, -weights, 100 * rng.random((2, L, H)), best, pd.DataFrame(),
                               6, 4, "spacy-md")


def test_probe_figures():
    results = synthetic_probes()
    fig = figures.probe_curves(results)
    assert len(fig.axes[0].lines) == 5 + 1  # the trained probes and right-branching
    fig = figures.probe_weights(results)
    assert colour_bars(fig) == 2
    notes = [t.get_text() for t in fig.axes[0].texts] + [t.get_text() for t in fig.axes[1].texts]
    assert "det" in notes and "nsubj" in notes  # the best maps of notebook 04, named in their cells
    rendered(fig)
    rendered(figures.weight_against_accuracy(results))
    table = probes.weight_table(results)
    assert table.set_index(["head", "direction"]).loc[("1-2", "dep->head"), "best for (nb 04)"] == "det"
    assert table.set_index(["head", "direction"]).loc[("2-1", "head->dep"), "best for (nb 04)"] == "-"


def synthetic_clusters() -> clustering.ClusterResult:
    points = rng.normal(size=(L * H, 2))
    distances = np.linalg.norm(points[:, None] - points[None], axis=-1)
    heads = pd.DataFrame({"layer": np.repeat([1, 2], H), "head": np.tile(range(1, H + 1), L)})
    heads["label"] = [f"{l}-{h}" for l, h in zip(heads["layer"], heads["head"])]
    heads["behaviour"] = ["broad", "prev", "other", "cls", "cls", "other"]
    heads[["x", "y"]] = points
    heads["entropy"] = rng.random(L * H) * 4
    return clustering.ClusterResult(distances, 10, heads, [], L, H)


def test_clustering_figures():
    result = synthetic_clusters()
    ax = figures.mds_map(result, "behaviour", highlight=2)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["broad (1)", "previous token (1)", "[CLS] (2)",
                                                                   "other (2)"]
    assert colour_bars(figures.mds_map(result, "entropy").figure) == 1
    with pytest.raises(ValueError, match="colour_by"):
        figures.mds_map(result, "label")
    tree = figures.dendrogram(result)
    assert sorted(tree["ivl"]) == sorted(result.heads["label"])
    rendered(figures.aligned_maps(result, synthetic_clusters()))
    test = clustering.layer_test(result.distances, L, n_permutations=50)
    fig = figures.permutation_tests({"layers": test, "behaviours": None})
    assert fig.axes[0].axison and not fig.axes[1].axison
    rendered(fig)


def test_dark_secrets_figures():
    tuned = {"topic": SimpleNamespace(history=pd.DataFrame({"step": [1, 2, 3], "loss": [2.0, 1.5, 1.0]}))}
    rendered(figures.finetuning_loss(tuned))
    k = len(patterns.KINDS)
    labelled = pd.DataFrame({"label": list(patterns.KINDS), **{f: rng.random(k) for f in patterns.FEATURES}})
    fig = figures.pattern_features(labelled, patterns.THRESHOLDS)
    assert len(fig.axes[0].collections) == k
    confusion = pd.crosstab(pd.Series(["block", "broad"], name="label"), pd.Series(["block", "block"], name="rules"))
    assert colour_bars(figures.confusions({"rules": confusion, "learned": confusion})) == 2
    shares = {("topic", "pre-trained"): pd.DataFrame(rng.dirichlet(np.ones(k), L), columns=list(patterns.KINDS),
                                                     index=pd.Index([1, 2], name="layer"))}
    fig = figures.pattern_shares(shares)
    assert len(fig.axes[0].patches) == L * k
    groups = [("topic", "pre-trained"), ("topic", "fine-tuned")]
    estimate = pd.DataFrame([(t, m, kind, 0.2, 0.1, 0.3) for t, m in groups for kind in patterns.KINDS],
                            columns=["task", "model", "kind", "share", "low", "high"])
    fig = figures.pattern_share_estimates({"rules": estimate, "labels": estimate})
    assert [ax.get_title() for ax in fig.axes if ax.get_visible()] == list(patterns.KINDS)
    similarity = {"topic": 1 - rng.random((L, H)) / 10, "pairs": 1 - rng.random((L, H)) / 5}
    assert colour_bars(figures.map_similarity(similarity)) == 2
    scan = pd.DataFrame([(0, 0, 0.0)] + [(l, h, rng.normal() / 50) for l in (1, 2) for h in range(H + 1)],
                        columns=["layer", "head", "delta_accuracy"])
    fig = figures.disabling_scan({"topic": scan})
    assert colour_bars(fig) == 1 and len(fig.axes[1].patches) == L  # one bar per layer
    rendered(fig)


def test_notebook_09_figures():
    from conftest import random_row_stochastic

    from bertlook_utils import disabling, relations, tokentypes

    logits = rng.normal(size=(20, 1 + L * H + L, 2)).astype(np.float32)
    scan = disabling.Scan("topic", disabling.runs(L, H), logits, np.arange(20) % 2)
    held = disabling.held_out(scan, np.arange(10), np.arange(10, 20))
    fig = figures.held_out_disabling({"topic": held, "again": held})
    assert [ax.get_title() for ax in fig.axes] == ["topic", "again"]
    rendered(fig)
    maps = [random_row_stochastic(rng, (L, H, 6, 6)) for _ in range(4)]
    frames = [relations.Frame(k, 0, ((1, 2),), ("dobj",)) for k in range(4)]
    scores = {null: relations.score_maps(maps, frames, n_draws=100, null=null) for null in relations.NULLS}
    assert colour_bars(figures.relation_scores(scores)) == 2
    layers = pd.Index([1, 2], name="layer")
    change = pd.DataFrame({f"{t}_{q}": rng.random(L) for t in ("cls", "sep") for q in
                           ("before", "after", "change", "change_low", "change_high")}, index=layers)
    assert len(figures.special_by_layer({"topic": change, "pairs": change}).axes) == 2
    types = list(tokentypes.TYPES)
    cls = pd.DataFrame({"category": types, "before": rng.random(len(types)), "after": rng.random(len(types)),
                        "change": np.zeros(len(types)), "change_low": -np.ones(len(types)) / 10,
                        "change_high": np.ones(len(types)) / 10, "base_rate": rng.random(len(types))})
    assert len(figures.cls_by_type({"topic": cls}, types).axes[0].patches) == 2 * len(types)
    stripes = pd.DataFrame({"category": types, "share_of_tokens": rng.random(len(types)),
                            "share_of_stripes": rng.random(len(types))})
    rendered(figures.stripe_types({"topic": stripes}, types))


@pytest.mark.parametrize("kind", ["map", "lines"])
def test_plot_heads_draws_one_titled_panel_per_head(kind):
    from conftest import PAIR_TOKENS, make_encoded, random_row_stochastic

    enc = make_encoded(PAIR_TOKENS, random_row_stochastic(rng, (L, H, len(PAIR_TOKENS), len(PAIR_TOKENS))))
    fig = viz.plot_heads(enc, {"first": (1, 1), "last": (2, 3)}, kind=kind)
    assert [ax.get_title() for ax in fig.axes if ax.get_label() != "<colorbar>"] == ["first", "last"]
    with pytest.raises(ValueError, match="kind"):
        viz.plot_heads(enc, {"x": (1, 1)}, kind="bars")


def _sink_and_prev(tokens):
    """Every token: 0.6 to [CLS], 0.3 to the previous token, 0.1 to itself ([CLS]: 1.0 to itself)."""
    n = len(tokens)
    attn = np.zeros((n, n))
    attn[0, 0] = 1.0
    for i in range(1, n):
        attn[i, 0] += 0.6
        attn[i, i - 1] += 0.3
        attn[i, i] += 0.1
    return attn


def test_plot_lines_fades_the_sink_and_keeps_top_k():
    from matplotlib.colors import to_hex

    from conftest import PAIR_TOKENS, make_encoded

    enc = make_encoded(PAIR_TOKENS, _sink_and_prev(PAIR_TOKENS))
    n = len(PAIR_TOKENS)
    colours = lambda ax: [to_hex(line.get_color()) for line in ax.lines]  # noqa: E731
    every = colours(viz.plot_lines(enc, 1, 1, stop=None))
    assert len(every) == 1 + 3 * (n - 1) - 1  # row 1's "previous token" is [CLS] itself: one line of 0.9
    attn = _sink_and_prev(PAIR_TOKENS)
    into_special = int((attn[:, [j for j, t in enumerate(PAIR_TOKENS) if t in ("[CLS]", "[SEP]")]] > 0).sum())
    assert into_special == n + 3  # every row to [CLS], both [SEP]s to themselves, "it" to the first [SEP]
    assert every.count("#bbbbbb") == into_special and every.count(viz.PALETTE["prev"]) == len(every) - into_special
    top1 = colours(viz.plot_lines(enc, 1, 1, stop=None, top_k=1))
    assert top1 == ["#bbbbbb"] * n  # each token's heaviest line goes to [CLS], drawn pale
    top2 = viz.plot_lines(enc, 1, 1, stop=None, top_k=2)
    assert len(top2.lines) == 1 + 2 * (n - 1)  # [CLS]: one line; every other row its two heaviest
    plain = colours(viz.plot_lines(enc, 1, 1, stop=None, fade_special=False))
    assert set(plain) == {viz.PALETTE["prev"]}
    with pytest.raises(ValueError, match="top_k"):
        viz.plot_lines(enc, 1, 1, top_k=0)


def test_plot_head_scales_a_broad_head_and_shows_a_colour_bar():
    from conftest import PAIR_TOKENS, make_encoded

    n = len(PAIR_TOKENS)
    broad = np.full((n, n), 1 / n)
    broad[0] = 0
    broad[0, 0] = 1.0  # one large cell, as [CLS] -> [CLS] in a broad head
    ax = viz.plot_head(make_encoded(PAIR_TOKENS, broad), 1, 1, vmax=None)
    image, = ax.images
    assert image.norm.vmax == pytest.approx(1 / n)  # not 1.0: the broad rows are not blank
    bars = [a for a in ax.figure.axes if a.get_label() == "<colorbar>"]
    assert len(bars) == 1 and bars[0].get_ylabel() == "attention"
    assert image.colorbar.extend == "max"
    fixed = viz.plot_head(make_encoded(PAIR_TOKENS, broad), 1, 1)
    assert fixed.images[0].norm.vmax == 1.0 and fixed.images[0].colorbar.extend == "neither"
    assert not viz.plot_head(make_encoded(PAIR_TOKENS, broad), 1, 1, colorbar=False).images[0].colorbar


def test_pattern_examples_draws_one_titled_map_per_kind():
    n = 12
    maps = {"vertical": np.tile(np.eye(n)[0], (n, 1)), "diagonal": np.eye(n, k=-1) + np.eye(n)[:, :1] * np.eye(n)[0],
            "heterogeneous": random_row_stochastic_maps(n)}
    fig = figures.pattern_examples(maps, captions={"vertical": "head 2-3"})
    panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert [ax.get_title() for ax in panels] == list(maps)
    assert panels[0].get_xlabel() == "head 2-3" and panels[1].get_xlabel() == ""
    assert len(fig.axes) == len(maps) + 1  # one shared colour bar
    shown = panels[0].images[0].get_array()
    np.testing.assert_allclose(shown, maps["vertical"] / np.percentile(maps["vertical"], 99))  # own 99th pct.
    rendered(fig)
    with pytest.raises(ValueError, match="at least one"):
        figures.pattern_examples({})


def random_row_stochastic_maps(n):
    values = rng.random((n, n))
    return values / values.sum(1, keepdims=True)


def test_table1_dot_plot_puts_paper_and_run_side_by_side():
    from bertlook_utils import compare, paper

    relations = compare.TABLE1_RELATIONS
    heads = pd.DataFrame({"relation": relations, "layer": 1, "head": 2, "direction": "dep->head",
                          "accuracy": np.linspace(0.3, 0.9, len(relations)), "n": 100})
    heads["low"], heads["high"] = heads["accuracy"] - 0.02, heads["accuracy"] + 0.02
    baseline = pd.DataFrame({"relation": relations, "offset": 1, "accuracy": 0.2, "n": 100})
    fig = figures.table1(heads, baseline)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert len(labels) == len(paper.TABLE1) and labels[0] == "all (7-6 | 1-2)"
    assert any(label.startswith("compound (") for label in labels)  # the paper's nn, in spaCy's name
    paper_heads, run_heads = ax.collections[2].get_offsets(), ax.collections[5].get_offsets()  # after lines, offsets
    np.testing.assert_allclose(paper_heads[:, 0], paper.TABLE1["accuracy"])
    np.testing.assert_allclose(run_heads[:, 0], 100 * heads["accuracy"])
    rendered(fig)
    with pytest.raises(ValueError, match="no relation"):
        figures.table1(heads.assign(relation="xyz"), baseline)
