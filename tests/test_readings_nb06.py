"""Notebook 06's readings (`bertlook_utils.lab.readings.nb06`) on hand-built probe results whose answers are known
by construction."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bertlook_utils.analyses.probe_baselines import BASELINE_SETTINGS, BaselineResults
from bertlook_utils.analyses.probes import Model, ProbeResults
from bertlook_utils.lab.readings import nb06

UAS = {Model.RIGHT_BRANCHING: 20.0, Model.DISTANCES: 60.0, Model.RANDOM_ATTENTION_VECTORS: 25.0,
       Model.RANDOM_ATTENTION: 22.0, Model.ATTENTION: 50.0, Model.ATTENTION_VECTORS: 70.0, Model.ONE_EPOCH: 45.0}


def results(uas=None, curves=None, weights=None, best_heads=None, n_train=0) -> ProbeResults:
    """Table 3 with `uas` (argmax) and MST one point higher, except attention + vectors: 1.5 higher."""
    uas = UAS if uas is None else uas
    table = pd.DataFrame({"model": list(uas), "uas_argmax": list(uas.values())})
    table["uas_mst"] = table["uas_argmax"] + np.where(table["model"] == Model.ATTENTION_VECTORS, 1.5, 1.0)
    weights = np.zeros((2, 1, 1)) if weights is None else np.asarray(weights, dtype=float)
    best_heads = (pd.DataFrame(columns=["relation", "layer", "head", "direction", "accuracy", "n"])
                  if best_heads is None else best_heads)
    return ProbeResults(table, pd.DataFrame() if curves is None else curves, weights, np.zeros_like(weights),
                        np.zeros_like(weights), best_heads, pd.DataFrame(), n_train, 0, "spacy-md")


def curves(heldout_uas, train_loss) -> pd.DataFrame:
    """Attention + vectors' curve, and a distances + vectors curve that must not be read."""
    rows = [(Model.ATTENTION_VECTORS, epoch + 1, loss, value)
            for epoch, (loss, value) in enumerate(zip(train_loss, heldout_uas))]
    rows += [(Model.DISTANCES, epoch + 1, 1.0 + epoch, 10.0 * epoch) for epoch in range(len(train_loss))]
    return pd.DataFrame(rows, columns=["model", "epoch", "train_loss", "heldout_uas"])


# -- the learning curve -----------------------------------------------------------------------------
def test_training_curve_reads_the_last_epochs_of_attention_vectors_and_counts_weights_and_words():
    got = nb06.training_curve(results(curves=curves([40.0, 50.0, 60.0, 60.5, 61.25], [5.0, 4.0, 3.0, 2.5, 2.0]),
                                      weights=np.zeros((2, 2, 3))),
                              [["a", "b"], ["c", "d", "e"]], dim=4)
    assert got.late_spread == pytest.approx(1.25)  # 61.25 - 60 over the last 3 epochs
    assert got.loss_falls is True
    # K = 6 maps, d = 4: W (dep) 2K x d + 2K, W (cand) 2K x d, R 2K x d + 2K, a ROOT bias: 6Kd + 4K + 1
    assert got.n_weights == 6 * 6 * 4 + 4 * 6 + 1
    assert got.n_train_words == 5


def test_training_curve_sees_a_loss_that_rises_once_and_a_shorter_window():
    got = nb06.training_curve(results(curves=curves([40.0, 50.0, 60.0], [5.0, 4.0, 4.5]), weights=np.zeros((2, 1, 1))),
                              [], dim=1, last=2)
    assert got.loss_falls is False
    assert got.late_spread == pytest.approx(10.0)
    assert got.n_train_words == 0


def test_training_curve_of_the_default_model_size_has_about_130000_weights():
    got = nb06.training_curve(results(curves=curves([1.0], [1.0]), weights=np.zeros((2, 6, 12))), [])
    assert got.n_weights == 6 * 72 * 300 + 4 * 72 + 1 == 129_889


# -- the attention-only probe's weights ---------------------------------------------------------------------
def best(rows) -> pd.DataFrame:
    return pd.DataFrame([(relation, layer, head, direction, 50.0, 100) for relation, layer, head, direction in rows],
                        columns=["relation", "layer", "head", "direction", "accuracy", "n"])


# one layer of three heads: dep->head weights, then head->dep weights
WEIGHTS = [[[0.3, 0.05, -0.5]], [[0.2, 0.12, 0.0]]]


def test_probe_weights_counts_best_maps_above_the_threshold_and_reads_the_det_map():
    heads = best([("all", 1, 1, "dep->head"), ("nsubj", 1, 1, "dep->head"), ("det", 1, 2, "dep->head"),
                  ("amod", 1, 2, "dep->head"), ("advmod", 1, 3, "dep->head"), ("pobj", 1, 1, "head->dep")])
    got = nb06.probe_weights(results(weights=WEIGHTS, best_heads=heads))
    # best maps: 1-1 dep->head (0.3), 1-2 dep->head (0.05), 1-3 dep->head (-0.5), 1-1 head->dep (0.2); 1-2 head->dep
    # (0.12) is best for nothing, and the "all" row does not count
    assert got.n_best_clear == 2
    assert got.det_max_abs == pytest.approx(0.05)
    assert (got.min_weight, got.max_weight) == (-0.5, 0.3)
    assert got.min_weight < -got.max_weight  # the largest weight in magnitude is negative
    assert nb06.probe_weights(results(weights=WEIGHTS, best_heads=heads), clear=0.25).n_best_clear == 1


def test_probe_weights_without_a_det_map_reads_zero_and_does_not_take_predet_for_det():
    heads = best([("predet", 1, 3, "dep->head"), ("nsubj", 1, 1, "dep->head")])
    got = nb06.probe_weights(results(weights=WEIGHTS, best_heads=heads))
    assert got.det_max_abs == 0.0
    assert got.n_best_clear == 1


def test_probe_weights_reads_the_largest_det_weight_in_magnitude_when_two_maps_are_best_for_det():
    heads = best([("det", 1, 1, "head->dep"), ("det", 1, 3, "dep->head")])  # weights 0.2 and -0.5
    assert nb06.probe_weights(results(weights=WEIGHTS, best_heads=heads)).det_max_abs == pytest.approx(0.5)


def test_run_size_counts_heads_from_the_weights_and_the_training_sentences():
    assert nb06.run_size(results(weights=np.zeros((2, 6, 12)), n_train=975)) == nb06.RunSize(n_heads=72,
                                                                                             n_sentences=975)


# -- what the evidence shows -------------------------------------------------------------------------------------
def test_paper_uas_is_table3_by_model():
    assert nb06.paper_uas() == {Model.RIGHT_BRANCHING: 26, Model.DISTANCES: 58, Model.RANDOM_ATTENTION_VECTORS: 30,
                                Model.ATTENTION: 61, Model.ATTENTION_VECTORS: 77}


def test_table3_scores_reads_every_probe_the_gaps_and_the_paper():
    got = nb06.table3_scores(results())
    assert (got.right_branching, got.distances, got.attention, got.attention_vectors, got.random_attention_vectors,
            got.one_epoch) == (20.0, 60.0, 50.0, 70.0, 25.0, 45.0)
    assert got.best == Model.ATTENTION_VECTORS
    assert got.tree_gain == pytest.approx(1.5)
    assert got.attention_over_right == 30.0 and got.distances_over_attention == 10.0
    assert (got.paper_right_branching, got.paper_distances, got.paper_attention, got.paper_attention_vectors,
            got.paper_random_attention_vectors) == (26, 58, 61, 77, 30)
    assert got.paper_attention_over_distances == 3
    assert f"{got.paper_attention_over_distances:+d}" == "+3"


def test_table3_scores_names_another_best_probe_and_a_negative_gap():
    got = nb06.table3_scores(results({**UAS, Model.DISTANCES: 80.0, Model.ATTENTION: 10.0}))
    assert got.best == Model.DISTANCES
    assert got.attention_over_right == -10.0 and got.distances_over_attention == 70.0


def test_untrained_attention_reads_the_largest_gap_to_uniform_and_the_largest_weights():
    random = pd.DataFrame({"entropy": [3.375, 3.25], "uniform": [3.5, 3.5], "max_weight": [0.04, 0.06]}, index=[1, 2])
    trained = pd.DataFrame({"entropy": [2.5, 1.5], "uniform": [3.5, 3.5], "max_weight": [0.25, 0.5]}, index=[1, 2])
    got = nb06.untrained_attention(trained, random)
    assert got.entropy_gap == pytest.approx(0.25)  # layer 2: 3.5 - 3.25
    assert got.uniform == pytest.approx(3.5)
    assert got.max_weight == pytest.approx(0.06)
    assert (got.trained_max_weight_min, got.trained_max_weight_max) == (0.25, 0.5)


def baselines(clark=52.0, vectors=58.0, half=44.0, long=61.0) -> BaselineResults:
    """The four settings' UAS, in another order than BASELINE_SETTINGS: they are read by name."""
    clark_name, vectors_name, half_name, long_name = (s.name for s in BASELINE_SETTINGS)
    table = pd.DataFrame({"model": [long_name, half_name, clark_name, vectors_name],
                          "uas_argmax": [long, half, clark, vectors]})
    return BaselineResults(table, pd.DataFrame())


def test_clark_baseline_reads_the_settings_by_name_and_the_gaps():
    got = nb06.clark_baseline(results(), baselines())
    assert (got.clark, got.vectors_300d, got.half, got.long) == (52.0, 58.0, 44.0, 61.0)
    assert got.one_epoch_over_clark == -7.0  # attention only, 1 epoch (45) - Clark's (52)
    assert (got.half_cost, got.long_gain, got.vectors_gain) == (8.0, 9.0, 6.0)
    assert got.long_over_attention == 11.0  # 61 - attention only (50)
    assert got.training_gain == 5.0  # attention only: 50 (6 epochs) - 45 (1 epoch)


def test_clark_baseline_where_the_baseline_trained_longer_loses():
    got = nb06.clark_baseline(results(), baselines(long=48.0))
    assert got.long_over_attention == -2.0 and got.long_gain == -4.0


def shares(plus1_nonpunct=27.5, plus1_every=25.0) -> pd.DataFrame:
    return pd.DataFrame({"offset": ["-1", "+1", "ROOT"], "non-punct": [20.0, plus1_nonpunct, 4.5],
                         "every word": [20.0, plus1_every, 3.9]}).set_index("offset")


def subsets() -> pd.DataFrame:
    """UAS on all arcs, agreed arcs and against md; the 1-epoch probe (not a main probe) gains 10 on agreed arcs."""
    rows = [(Model.RIGHT_BRANCHING, 20.0, 21.0, 20.0), (Model.DISTANCES, 60.0, 63.0, 59.0),
            (Model.ATTENTION, 50.0, 52.0, 50.0), (Model.ATTENTION_VECTORS, 70.0, 72.5, 70.0),
            (Model.ONE_EPOCH, 40.0, 50.0, 40.0)]
    table = pd.DataFrame(rows, columns=["model", "all", "agreed arcs", "against md"])
    return table.assign(**{"n all": 200, "n agreed arcs": 180})


def test_tree_shape_reads_the_next_word_shares_the_agreed_arcs_and_the_baselines_lead():
    got = nb06.tree_shape(shares(), subsets())
    assert (got.plus1_nonpunct, got.plus1_every_word, got.paper_plus1_all) == (27.5, 25.0, 26.3)
    assert got.plus1_vs_paper == pytest.approx(1.5)  # 27.5 - Table 3's right-branching 26
    assert got.plus1_all_vs_paper == pytest.approx(-1.3)  # 25 - Table 1's 26.3
    assert got.agreed_share == pytest.approx(90.0)
    assert (got.gain_min, got.gain_max) == (1.0, 3.0)  # the 1-epoch probe's 10 is left out
    assert (got.lead_all, got.lead_agreed, got.lead_md) == (10.0, 11.0, 9.0)
    assert (got.agreed_shift, got.md_shift) == (1.0, -1.0)


def test_evidence_is_its_four_parts():
    trained = pd.DataFrame({"entropy": [2.0], "uniform": [3.0], "max_weight": [0.5]})
    random = pd.DataFrame({"entropy": [2.9], "uniform": [3.0], "max_weight": [0.1]})
    got = nb06.evidence(results(), baselines(), subsets(), shares(), trained, random)
    assert got == nb06.Evidence(nb06.table3_scores(results()), nb06.untrained_attention(trained, random),
                                nb06.clark_baseline(results(), baselines()), nb06.tree_shape(shares(), subsets()))
