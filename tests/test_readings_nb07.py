"""Notebook 07's readings (`bertlook_utils.lab.readings.nb07`) on hand-built head tables and permutation tests whose
answers are known by construction."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from bertlook_utils.analyses import clustering
from bertlook_utils.analyses.clustering import ClusterResult, GroupTest
from bertlook_utils.lab.readings import nb07


def cluster_result(behaviours, n_layers: int, cls=None, sep=None) -> ClusterResult:
    """Heads ordered layer by layer with the given behaviours; heads of one layer at distance 1, of different
    layers at 4."""
    k = len(behaviours)
    layer = np.repeat(np.arange(1, n_layers + 1), k // n_layers)
    heads = pd.DataFrame({"layer": layer, "head": np.tile(np.arange(1, k // n_layers + 1), n_layers),
                          "behaviour": list(behaviours), "cls": np.zeros(k) if cls is None else cls,
                          "sep": np.zeros(k) if sep is None else sep, "x": np.arange(float(k)), "y": np.zeros(k)})
    heads["label"] = [f"{a}-{b}" for a, b in zip(heads["layer"], heads["head"])]
    distances = np.where(layer[:, None] == layer[None], 1.0, 4.0) - np.eye(k)
    return ClusterResult(distances, 1, heads, [], n_layers, k // n_layers)


def group_test(ratio: float, p: float, null_max: float) -> GroupTest:
    return GroupTest(within=1.0, between=ratio, ratio=ratio, p_value=p, n_permutations=9,
                     null_ratios=np.array([1.0, null_max, 0.5]), heads=4)


def robustness(without_broad=None, behaviours_without_broad=None) -> dict:
    return {"layers": group_test(1.3, 0.001, 1.1), "layers without broad heads": without_broad,
            "layers within behaviours": group_test(1.2, 0.002, 1.15), "behaviours": group_test(3.4, 0.004, 3.0),
            "behaviours without broad heads": behaviours_without_broad}


# 4 layers x 3 heads: broad heads in layer 1 (2), layer 3 (1) and the last layer (2)
BEHAVIOURS = ["broad", "broad", "other", "other", "other", "cls", "broad", "other", "other", "broad", "broad", "other"]


def test_layer_robustness_counts_the_broad_heads_by_layer_and_reads_every_test():
    got = nb07.layer_robustness(cluster_result(BEHAVIOURS, 4), robustness(without_broad=group_test(1.25, 0.003, 1.2)))
    assert (got.n_broad, got.n_broad_first, got.n_broad_last, got.n_broad_edge) == (5, 2, 2, 4)
    assert got.ratio == 1.3
    assert (got.ratio_without_broad, got.null_max_without_broad, got.p_without_broad) == (1.25, 1.2, 0.003)
    assert (got.ratio_within_behaviours, got.p_within_behaviours) == (1.2, 0.002)
    assert (got.behaviour_ratio, got.behaviour_p) == (3.4, 0.004)
    assert got.behaviours_without_broad_tested is False


def test_layer_robustness_where_a_test_could_not_run_reads_nan_and_where_one_could_says_so():
    got = nb07.layer_robustness(cluster_result(BEHAVIOURS, 4),
                                robustness(behaviours_without_broad=group_test(2.0, 0.01, 1.5)))
    assert math.isnan(got.ratio_without_broad) and math.isnan(got.p_without_broad)
    assert not got.p_without_broad < 0.01  # a test that did not run supports no claim
    assert got.behaviours_without_broad_tested is True


def test_layer_robustness_without_broad_heads_counts_none():
    got = nb07.layer_robustness(cluster_result(["other", "cls", "other", "prev"], 2), robustness())
    assert (got.n_broad, got.n_broad_first, got.n_broad_last, got.n_broad_edge) == (0, 0, 0, 0)


def test_layer_robustness_on_the_real_tests_of_a_map_with_known_distances():
    # 3 layers x 2 heads: layer 1 broad, layer 2 [CLS], layer 3 other; within a layer 1, between layers 4
    result = cluster_result(["broad", "broad", "cls", "cls", "other", "other"], 3)
    got = nb07.layer_robustness(result, result.robustness_tests(n_permutations=50))
    assert got.ratio == got.ratio_without_broad == got.behaviour_ratio == pytest.approx(4.0)
    assert (got.n_broad, got.n_broad_first, got.n_broad_last) == (2, 2, 0)
    assert got.behaviours_without_broad_tested is False  # only [CLS] is left: nothing to test


def test_broad_definitions_counts_notebook_03s_heads_and_lists_the_others():
    got = nb07.broad_definitions({"both": ["1-1", "1-2"], "entropy only": ["6-1", "6-3"], "largest weight only": []})
    assert got == nb07.BroadDefinitions(n_nb03=2, entropy_only=("6-1", "6-3"), largest_weight_only=())


def test_broad_definitions_where_notebook_03_has_a_head_the_entropy_misses_and_adds_none():
    got = nb07.broad_definitions({"both": ["1-1"], "entropy only": [], "largest weight only": ["2-4"]})
    assert got.n_nb03 == 2
    assert got.entropy_only == () and got.largest_weight_only == ("2-4",)


def test_label_counts_counts_position_and_token_heads_and_averages_the_sink_shares():
    behaviours = ["broad", "prev", "next", "cls", "sep", "punct", "other", "other"]
    result = cluster_result(behaviours, 2, cls=np.linspace(0.0, 0.7, 8), sep=np.full(8, 0.25))
    got = nb07.label_counts(result)
    assert got.n_token_heads == 5  # prev, next, cls, sep, punct; not broad, not other
    assert (got.n_other, got.n_sep, got.n_punct) == (2, 1, 1)
    assert got.cls_share == pytest.approx(0.35) and got.sep_share == pytest.approx(0.25)


def test_label_counts_where_no_head_has_a_token_label():
    got = nb07.label_counts(cluster_result(["broad", "other", "other", "other"], 2))
    assert (got.n_token_heads, got.n_other, got.n_sep, got.n_punct) == (0, 3, 0, 0)


def test_token_behaviours_are_the_labels_but_broad_and_other():
    assert set(nb07.TOKEN_BEHAVIOURS) == set(clustering.BEHAVIOURS) - {"broad", "other"}
