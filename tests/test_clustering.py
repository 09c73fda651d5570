"""Jensen–Shannon distances between heads, on synthetic maps whose divergences are computed by hand."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from builders import (PAIR_TOKENS, make_encoded, next_map, prev_map, random_row_stochastic,
                      stack_heads, uniform_map)

from bertlook_utils import clustering, compare, widgets
from bertlook_utils.conventions import head_index
from bertlook_utils.extract import Batch, reduce


def direct_js(maps: np.ndarray) -> np.ndarray:
    """The definition, pair by pair and row by row: [K, n, n] maps -> [K, K] summed JS (nats)."""
    n = maps.shape[-1]
    s = clustering.SMOOTHING / n + (1 - clustering.SMOOTHING) * maps.astype(np.float64)
    k = len(s)
    out = np.zeros((k, k))
    for i in range(k):
        for j in range(k):
            for p, q in zip(s[i], s[j]):
                m = (p + q) / 2
                out[i, j] += 0.5 * np.sum(p * np.log(p / m)) + 0.5 * np.sum(q * np.log(q / m))
    return out


def test_matches_the_direct_formula_on_random_maps():
    rng = np.random.default_rng(0)
    encs = [make_encoded(PAIR_TOKENS[:n], random_row_stochastic(rng, (2, 3, n, n))) for n in (11, 7, 5)]
    expected = sum(direct_js(e.attn.reshape(6, e.n_tokens, e.n_tokens)) for e in encs)
    got = clustering.js_distances(encs)
    assert got.shape == (6, 6)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_known_pairs_by_hand():
    n = 11
    # prev vs next: one-hot rows on different columns (except where both fall on the same token)
    attn = stack_heads([[prev_map(n), next_map(n), uniform_map(n)]])
    got = clustering.js_distances([make_encoded(PAIR_TOKENS, attn)])
    f = clustering.SMOOTHING / n
    peak = 1 - clustering.SMOOTHING + f
    # two smoothed one-hots on different columns: each of those two columns has (peak, f) -> mean (peak+f)/2
    apart = 2 * (0.5 * peak * np.log(peak / ((peak + f) / 2)) + 0.5 * f * np.log(f / ((peak + f) / 2)))
    rows_prev = [max(i - 1, 0) for i in range(n)]
    rows_next = [min(i + 1, n - 1) for i in range(n)]
    n_apart = sum(a != b for a, b in zip(rows_prev, rows_next))
    assert got[0, 1] == pytest.approx(n_apart * apart, rel=1e-5)
    assert got[0, 1] == pytest.approx(direct_js(attn[0])[0, 1], rel=1e-5)
    # a smoothed uniform row stays uniform; JS(one-hot, uniform) the same for every row
    assert got[0, 2] == pytest.approx(got[1, 2], rel=1e-5)


def test_identical_heads_are_at_distance_zero_and_the_matrix_is_symmetric():
    rng = np.random.default_rng(1)
    maps = random_row_stochastic(rng, (2, 4, 11, 11))
    maps[1, 2] = maps[0, 1]  # head 2-3 copies head 1-2
    d = clustering.js_distances([make_encoded(PAIR_TOKENS, maps)])
    i, j = head_index(1, 2, 4), head_index(2, 3, 4)
    assert d[i, j] == pytest.approx(0, abs=1e-6)
    np.testing.assert_array_equal(d, d.T)
    np.testing.assert_array_equal(np.diag(d), 0)
    off = ~np.eye(len(d), dtype=bool)
    off[i, j] = off[j, i] = False
    assert (d[off] > 1e-3).all()  # distinct random heads are not at distance 0
    assert (d <= np.log(2) * 11 + 1e-6).all()  # at most ln 2 per row


def test_padding_does_not_change_the_distances():
    """Inputs of different lengths in one padded batch: the same as one at a time."""
    rng = np.random.default_rng(2)
    encs = [make_encoded(PAIR_TOKENS[:n], random_row_stochastic(rng, (1, 3, n, n))) for n in (11, 6)]
    width = 11
    attn = torch.zeros(2, 1, 3, width, width)
    valid = torch.zeros(2, width, dtype=torch.bool)
    for b, e in enumerate(encs):
        n = e.n_tokens
        attn[b, :, :, :n, :n] = torch.from_numpy(e.attn)
        attn[b, :, :, n:, :] = 0.5  # padded rows are meaningless: they must be ignored
        valid[b, :n] = True
    reducer = clustering.JSDistances()
    reducer.update(Batch.build(attn, valid, encs, "[CLS]", "[SEP]"))
    np.testing.assert_allclose(reducer.distances(), clustering.js_distances(encs), rtol=1e-6)
    assert reducer.rows == 17


def test_streaming_over_the_real_model_equals_all_at_once(encoder, segments, reference_encodeds, tmp_path):
    (js,) = reduce(encoder, segments[:6], [clustering.JSDistances()], batch_size=4, cache_dir=tmp_path, progress=False)
    expected = clustering.js_distances(reference_encodeds[:6])
    assert js.distances().shape == (encoder.n_layers * encoder.n_heads,) * 2
    np.testing.assert_allclose(js.distances(), expected, rtol=1e-3, atol=1e-3)
    (again,) = reduce(encoder, segments[:6], [clustering.JSDistances()], cache_dir=tmp_path, progress=False)
    np.testing.assert_array_equal(again.distances(), js.distances())  # restored from the cache
    assert again.rows == js.rows == sum(e.n_tokens for e in reference_encodeds[:6])


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="at least one"):
        clustering.js_distances([])
    bad = np.full((1, 1, 11, 11), 0.5, dtype=np.float32)
    with pytest.raises(ValueError, match="sum to 1"):
        clustering.js_distances([make_encoded(PAIR_TOKENS, bad)])
    with pytest.raises(ValueError, match="symmetric"):
        clustering.mds(np.array([[0.0, 1.0], [2.0, 0.0]]))


def test_behaviour_labels_follow_the_paper_thresholds():
    heads = pd.DataFrame({"layer": [1] * 7, "head": range(1, 8)})
    zeros = np.zeros(7)
    tokens = heads.assign(prev=zeros, next=zeros, cls=zeros, sep=zeros, punct=zeros)
    tokens.loc[1, "prev"] = 0.51
    tokens.loc[2, "next"] = 0.9
    tokens.loc[3, "cls"] = 0.61
    tokens.loc[4, "sep"] = 0.7
    tokens.loc[5, "punct"] = 0.65
    tokens.loc[6, "cls"] = 0.59  # under 0.6: other
    entropy = heads.assign(entropy=[3.9, 1, 1, 1, 1, 1, 1])
    labels = clustering.behaviour_labels(tokens, entropy)
    assert labels.tolist() == ["broad", "prev", "next", "cls", "sep", "punct", "other"]


def test_layer_test_finds_layers_that_cluster_and_not_random_ones():
    rng = np.random.default_rng(3)
    centres = rng.normal(size=(4, 2)) * 5
    points = np.repeat(centres, 5, axis=0) + rng.normal(size=(20, 2)) * 0.3
    d = np.linalg.norm(points[:, None] - points[None], axis=-1)
    clustered = clustering.layer_test(d, n_layers=4, n_permutations=2000)
    assert clustered.ratio > 3 and clustered.p_value < 0.01
    noise = rng.normal(size=(20, 2))
    d = np.linalg.norm(noise[:, None] - noise[None], axis=-1)
    assert clustering.layer_test(d, n_layers=4, n_permutations=2000).p_value > 0.05
    assert clustering.layer_test(d, 4, 500, seed=7).p_value == clustering.layer_test(d, 4, 500, seed=7).p_value
    labels = ["a"] * 5 + ["b"] * 5 + ["other"] * 10
    distances = np.linalg.norm(points[:, None] - points[None], axis=-1)
    assert clustering.behaviour_test(distances, labels, 500).p_value < 0.01
    assert clustering.behaviour_test(d, ["a"] + ["other"] * 19) is None


def test_mds_recovers_planar_points_and_compare_sees_the_same_map():
    rng = np.random.default_rng(4)
    points = rng.normal(size=(12, 2))
    d = np.linalg.norm(points[:, None] - points[None], axis=-1)
    coords = clustering.mds(d, seed=0)
    same = clustering.compare(d, d * 3, coords, clustering.mds(d * 3, seed=1))
    assert same["spearman"] == pytest.approx(1)
    assert same["procrustes"] < 1e-3 and same["neighbours"] == 1
    other = rng.normal(size=(12, 2))
    d2 = np.linalg.norm(other[:, None] - other[None], axis=-1)
    assert clustering.compare(d, d2, coords, clustering.mds(d2))["procrustes"] > 0.1


def _synthetic_result(n_layers: int = 2, n_heads: int = 3) -> clustering.ClusterResult:
    rng = np.random.default_rng(5)
    attn = random_row_stochastic(rng, (n_layers, n_heads, 11, 11))
    attn[0, 0] = prev_map(11)
    enc = make_encoded(PAIR_TOKENS, attn)
    d = clustering.js_distances([enc])
    heads = pd.DataFrame({"layer": np.repeat(np.arange(1, n_layers + 1), n_heads),
                          "head": np.tile(np.arange(1, n_heads + 1), n_layers)})
    heads["label"] = [f"{layer}-{h}" for layer, h in zip(heads["layer"], heads["head"])]
    heads["behaviour"] = ["prev"] + ["other"] * (len(heads) - 1)
    heads[["x", "y"]] = clustering.mds(d)
    return clustering.ClusterResult(d, 11, heads, [enc], n_layers, n_heads)


def test_closest_pairs_lists_every_pair_once_in_order():
    result = _synthetic_result()
    pairs = clustering.closest_pairs(result)
    assert len(pairs) == 6 * 5 // 2
    assert pairs["JS per token"].is_monotonic_increasing
    first = pairs.iloc[0]
    i, j = (head_index(*map(int, label.split("-")), 3) for label in (first["head"], first["other head"]))
    assert first["JS per token"] == pytest.approx(result.distances[i, j] / 11)


def test_explorer_redraws_the_chosen_head():
    import matplotlib
    matplotlib.use("Agg")
    result = _synthetic_result()
    explorer = widgets.cluster_explorer(result, snapshot=False)
    first = explorer.png
    head = explorer.controls["head"]
    head.value = head_index(2, 3, 3)
    assert explorer.draws == 2 and explorer.png != first
    assert "head 2-3" in repr(explorer)


def test_inputs_split_over_threads_give_the_same_sums():
    rng = np.random.default_rng(6)
    encs = [make_encoded(PAIR_TOKENS, random_row_stochastic(rng, (2, 2, 11, 11))) for _ in range(5)]
    attn = torch.from_numpy(np.stack([e.attn for e in encs]))
    batch = Batch.build(attn, torch.ones(5, 11, dtype=torch.bool), encs, "[CLS]", "[SEP]")
    threads = torch.get_num_threads()
    sums = []
    for n in (1, 3):
        torch.set_num_threads(n)
        try:
            reducer = clustering.JSDistances()
            reducer.update(batch)
            assert torch.get_num_threads() == n  # restored after the threaded update
        finally:
            torch.set_num_threads(threads)
        sums.append(reducer.distances())
    np.testing.assert_allclose(sums[0], sums[1], rtol=1e-9)
    np.testing.assert_allclose(sums[0], clustering.js_distances(encs), rtol=1e-9)


def test_comparison_says_why_there_is_no_behaviour_test():
    """2 layers x 2 heads, all broad but one 'other': one behaviour only, so no behaviour test (96 broad heads of
    an untrained 12 x 12 model are not "too few")."""
    points = np.array([0.0, 0.1, 1.0, 1.2])
    heads = pd.DataFrame({"layer": [1, 1, 2, 2], "head": [1, 2, 1, 2], "behaviour": ["broad"] * 3 + ["other"]})
    result = clustering.ClusterResult(np.abs(points[:, None] - points[None]), 10, heads, [], 2, 2)
    table = compare.clustering(result, n_permutations=10).set_index("quantity")
    row = table.loc["heads of the same behaviour are close"]
    assert row["this run"] == "no test: it needs two behaviours besides 'other', one with two heads"


def broad_driven(seed: int = 5):
    """4 layers x 6 heads, every distance 1 (+- 0.05 noise) but between two 'broad' heads, 0.1: five broad heads
    in each of layers 1 and 4 (close by construction), one 'prev' head per layer, the rest 'other'. Layers
    have no structure of their own. -> distances [24, 24], behaviours [24]."""
    rng = np.random.default_rng(seed)
    behaviours = np.array(["other"] * 24, dtype=object)
    behaviours[[0, 1, 2, 3, 4, 18, 19, 20, 21, 22]] = "broad"
    behaviours[[5, 11, 17, 23]] = "prev"
    broad = behaviours == "broad"
    noise = rng.uniform(-0.05, 0.05, size=(24, 24))
    d = np.where(broad[:, None] & broad[None], 0.1, 1.0) + (noise + noise.T) / 2
    np.fill_diagonal(d, 0)
    return d, behaviours


def test_a_layer_effect_made_by_broad_heads_vanishes_without_them_and_within_behaviours():
    d, behaviours = broad_driven()
    tests = clustering.robustness_tests(d, behaviours, n_layers=4, n_permutations=2000)
    assert list(tests) == list(clustering.ROBUSTNESS)
    assert tests["layers"].p_value < 0.01 and tests["layers"].heads == 24  # looks like layers cluster ...
    assert tests["layers without broad heads"].p_value > 0.1 and tests["layers without broad heads"].heads == 14
    assert tests["layers within behaviours"].p_value > 0.1 and tests["layers within behaviours"].stratified
    assert tests["behaviours"].p_value < 0.01  # broad heads are close: true by construction
    assert tests["behaviours without broad heads"] is None  # 'prev' alone: nothing left to test
    frame = clustering.tests_frame(tests, rows=2).set_index("test")
    assert frame.loc["layers", "within"] == pytest.approx(tests["layers"].within / 2)
    assert np.isnan(frame.loc["behaviours without broad heads", "p"])


def test_a_real_layer_effect_survives_stratification():
    """Every layer's heads sit around the layer's own centre, in both behaviours: the stratified test and the
    test without broad heads still find the layers."""
    rng = np.random.default_rng(2)
    centres = rng.normal(size=(4, 2)) * 5
    points = np.repeat(centres, 6, axis=0) + rng.normal(size=(24, 2)) * 0.3
    behaviours = np.tile(["broad", "broad", "other", "other", "other", "prev"], 4)
    d = np.linalg.norm(points[:, None] - points[None], axis=-1)
    tests = clustering.robustness_tests(d, behaviours, n_layers=4, n_permutations=2000)
    for name in ("layers", "layers without broad heads", "layers within behaviours"):
        assert tests[name].ratio > 3 and tests[name].p_value < 0.01, name
    again = clustering.layer_test(d, 4, 500, seed=3, strata=behaviours)
    assert again.p_value == clustering.layer_test(d, 4, 500, seed=3, strata=behaviours).p_value
    with pytest.raises(ValueError, match="one stratum per head"):
        clustering.group_test(d, np.repeat(np.arange(4), 6), 10, strata=behaviours[:5])
    with pytest.raises(ValueError, match="same group and in different groups"):
        clustering.group_test(d, np.repeat(np.arange(4), 6), 10, strata=np.arange(24))  # no pair in a stratum
    with pytest.raises(ValueError, match="one bool per head"):
        clustering.layer_test(d, 4, 10, keep=np.ones(5, dtype=bool))


def test_stratified_shuffles_keep_every_layers_behaviour_counts():
    """Within strata, a shuffle moves layer labels only between heads of the same behaviour: the number of
    broad heads per layer is that of the data in every shuffle, so their closeness is in the null too."""
    d, behaviours = broad_driven()
    plain = clustering.layer_test(d, 4, 2000)
    stratified = clustering.layer_test(d, 4, 2000, strata=behaviours)
    assert stratified.null_ratios.mean() > plain.null_ratios.mean()  # the null carries the broad heads' effect
    assert stratified.within != plain.within  # only pairs of one behaviour are compared


def test_broad_overlap_compares_the_two_definitions():
    heads = pd.DataFrame({"label": ["1-1", "1-2", "2-1", "2-2"], "layer": [1, 1, 2, 2], "head": [1, 2, 1, 2],
                          "behaviour": ["broad", "broad", "other", "prev"], "entropy": [4.5, 3.9, 3.0, 1.0],
                          "max_weight": [0.05, 0.2, 0.09, 0.6]})
    assert clustering.broad_overlap(heads) == {"both": ["1-1"], "entropy only": ["1-2"],
                                               "largest weight only": ["2-1"]}


def test_comparison_shows_the_layer_test_without_broad_heads_and_within_behaviours():
    d, behaviours = broad_driven()
    heads = pd.DataFrame({"layer": np.repeat(np.arange(1, 5), 6), "head": np.tile(np.arange(1, 7), 4),
                          "behaviour": behaviours})
    result = clustering.ClusterResult(d, 1, heads, [], 4, 6)
    table = compare.clustering(result, n_permutations=200).set_index("quantity")
    assert table.loc["heads of the same layer are close", "this run"].endswith("p = 0.0050 (the smallest possible)")
    assert not table.loc["… without the broad heads", "this run"].endswith("(the smallest possible)")
    assert "10 broad heads" in table.loc["… without the broad heads", "what differs"]
    assert "without them: no behaviour has two heads" in table.loc["heads of the same behaviour are close",
                                                                      "what differs"]


def test_the_robustness_figure_has_a_panel_per_test_and_says_which_could_not_run():
    import matplotlib.pyplot as plt

    from bertlook_utils import figures

    d, behaviours = broad_driven()
    tests = clustering.robustness_tests(d, behaviours, n_layers=4, n_permutations=100)
    fig = figures.permutation_tests(tests)  # 5 tests: 2 rows of 3, the sixth panel blank
    assert len(fig.axes) == 6 and sum(ax.axison for ax in fig.axes) == 4
    assert any("no test" in t.get_text() for ax in fig.axes for t in ax.texts)
    plt.close(fig)
