"""readings.nb13 on small synthetic results whose answers are known."""
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from bertlook_utils.analyses.probes import Model
from bertlook_utils.analyses.structural import StructuralResults
from bertlook_utils.readings import nb13


def _scores() -> pd.DataFrame:
    """Three layers at rank 4: layer 1 parses best (UUAS 60), layer 2 finds the root best; the random-init model
    peaks at layer 2 (40); the control task reaches 20 at layer 1."""
    rows = []
    for layer, uuas, root in ((0, 45.0, 30.0), (1, 60.0, 50.0), (2, 55.0, 70.0)):
        rows.append(("pretrained", layer, "silver", 4, uuas, uuas - 1, uuas + 1, uuas / 100, root, root / 100))
        rows.append(("pretrained", layer, "control", 4, uuas / 3, 0, 0, 0.2, np.nan, np.nan))
    rows += [("random-init", 1, "silver", 4, 38.0, 37.0, 39.0, 0.5, 20.0, 0.4),
             ("random-init", 2, "silver", 4, 40.0, 39.0, 41.0, 0.5, 25.0, 0.4)]
    frame = pd.DataFrame(rows, columns=["model", "layer", "task", "rank", "uuas", "uuas_low", "uuas_high", "dspr",
                                        "root_acc", "nspr"])
    return frame


def _results() -> StructuralResults:
    selectivity = pd.DataFrame({"layer": [1, 1, 1], "rank": [1, 2, 4], "uuas": [30.0, 50.0, 60.0],
                                "control": [10.0, 15.0, 20.0]})
    selectivity["selectivity"] = selectivity["uuas"] - selectivity["control"]
    selectivity["low"], selectivity["high"] = selectivity["selectivity"] - 1, selectivity["selectivity"] + 1
    edges = pd.DataFrame({"layer": [1, 1, 1], "sentence": [0, 0, 0], "a": [1, 2, 3], "b": [2, 3, 4]})
    return StructuralResults(scores=_scores(), selectivity=selectivity,
                             linear=pd.DataFrame({"uuas": [50.0], "root_acc": [1.0]}), edges=edges,
                             curves=pd.DataFrame(), rank=4, n_train=10, n_test=10)


def test_the_layers_reading_finds_the_best_layers_and_the_baselines():
    reading = nb13.layers(_results())
    assert (reading.best, reading.root_layer, reading.layers, reading.rank) == (1, 2, 2, 4)
    assert (reading.uuas, reading.uuas_low, reading.root_acc) == (60.0, 59.0, 70.0)
    assert (reading.embeddings, reading.last, reading.random_best, reading.random_high) == (45.0, 55.0, 40.0, 41.0)
    assert reading.control == pytest.approx(20.0) and reading.selectivity == pytest.approx(40.0)
    assert (reading.linear, reading.linear_root) == (50.0, 1.0)


def test_the_rank_sweep_reads_the_nearest_rank_and_the_most_selective():
    reading = nb13.ranks(_results(), layer=1, within=12.0)
    assert (reading.lowest, reading.highest, reading.near, reading.most_selective) == (1, 4, 2, 4)
    assert (reading.uuas_lowest, reading.control_highest, reading.selectivity) == (30.0, 20.0, 40.0)
    assert nb13.ranks(_results(), layer=1, within=5.0).near == 4
    with pytest.raises(ValueError, match="layer: no rank sweep at layer 3"):
        nb13.ranks(_results(), layer=3)


def _sentence(heads, punct):
    return SimpleNamespace(heads=np.array(heads), is_punct=np.array(punct, dtype=bool), words=["w"] * len(heads))


def test_versus_attention_scores_every_method_on_the_same_sentences():
    # one sentence 2 <- 1 -> 3 (1 the root), 4 punctuation under 3
    heldout = [_sentence([0, 1, 1, 3], [False, False, False, True])]
    right = [0, 1, 1, 3]  # finds both edges between words
    half = [0, 1, 2, 3]  # finds 1-2, misses 1-3
    predictions = pd.DataFrame({"sentence": [0] * 4, **{f"{m} (MST)": half for m in Model}})
    predictions[f"{Model.ATTENTION_VECTORS} (MST)"] = right
    heads = pd.DataFrame({"layer": [1, 1, 2], "head": [1, 2, 1], "selection": [50.0, 70.0, 60.0],
                          "heldout": [40.0, 65.0, 66.0], "heldout_low": [0.0] * 3, "heldout_high": [70.0] * 3})
    probes = SimpleNamespace(predictions=predictions,
                             best_heads=pd.DataFrame({"relation": ["all"], "layer": [2], "head": [1]}))
    reading = nb13.versus_attention(_results(), heads, probes, heldout)
    assert (reading.chosen_head, reading.chosen_head_uuas, reading.nb04_head, reading.nb04_head_uuas) == (
        "1-2", 65.0, "2-1", 66.0)
    assert (reading.attention_probe, reading.distances_vectors, reading.attention_vectors) == (50.0, 50.0, 100.0)
    assert (reading.probe, reading.linear) == (60.0, 50.0)
    assert len(reading.table) == 8 and reading.table["UUAS"].iloc[2] == 60.0


def test_the_example_sentence_is_short_with_little_punctuation():
    sentences = [_sentence([0] * 20, [False] * 20), _sentence([0] * 10, [True, True] + [False] * 8),
                 _sentence([0] * 10, [False] * 9 + [True])]
    assert nb13.example_sentence(sentences) == 2
    with pytest.raises(ValueError, match="no held-out sentence"):
        nb13.example_sentence(sentences[:2])


def test_the_sentence_tree_counts_the_silver_edges_found():
    heldout = [_sentence([2, 0, 2, 3], [False] * 4)]  # edges 1-2, 2-3, 3-4
    reading = nb13.sentence_tree(_results(), heldout, 0, 1)  # predicted 1-2, 2-3, 3-4
    assert (reading.found, reading.edges) == (3, 3)
    heldout = [_sentence([0, 1, 1, 1], [False] * 4)]  # edges 1-2, 1-3, 1-4
    assert nb13.sentence_tree(_results(), heldout, 0, 1).found == 1
    with pytest.raises(ValueError, match="index, layer"):
        nb13.sentence_tree(_results(), heldout, 0, 2)


def test_paper_vs_run_marks_the_findings_as_words():
    results = _results()
    table = nb13.paper_vs_run(nb13.layers(results), nb13.ranks(results, 1))
    assert list(table["paper"]) == list(nb13.FINDINGS)
    assert "not checked" in table.columns[1]
    assert "layer 1 of 2 is best: UUAS 60.0 [59.0, 61.0]" in table["this run"].iloc[0]


def test_the_layer_table_holds_every_layer_with_its_baselines():
    table = nb13.layer_table(_results())
    assert list(table["layer"]) == [0, 1, 2]
    assert list(table["UUAS"]) == [45.0, 60.0, 55.0] and list(table["root %"]) == [30.0, 50.0, 70.0]
    assert table["control UUAS"].tolist() == pytest.approx([15.0, 20.0, 55.0 / 3])
    assert np.isnan(table["random-init UUAS"].iloc[0]) and table["random-init UUAS"].iloc[2] == 40.0
