"""The talk's readings on hand-made results whose answers are known by construction."""
from __future__ import annotations

import pandas as pd
import pytest

from bertlook_utils.disabling import HeldOut
from bertlook_utils.readings import talk as deck


def syntax_frames(auxpass: float = 0.89):
    """`syntax.head_accuracy` and `syntax.offset_baseline` (fractions) with gains (points): dobj +30, det +12
    (above 10), auxpass +8 at 0.89 against 0.81, prt +6, amod +2."""
    rows = [("all", 0.33, 0.25), ("dobj", 0.70, 0.40), ("det", 0.62, 0.50), ("auxpass", auxpass, 0.81),
            ("prt", 1.0, 0.94), ("amod", 0.52, 0.50)]
    heads = pd.DataFrame([(r, 3, 9, "dep->head", a, 100, a - 0.05, a + 0.05) for r, a, _ in rows],
                         columns=["relation", "layer", "head", "direction", "accuracy", "n", "low", "high"])
    baseline = pd.DataFrame([(r, 1, b, 100) for r, _, b in rows], columns=["relation", "offset", "accuracy", "n"])
    return heads, baseline


def test_specialists_counts_the_relations_far_above_the_offset_in_the_paper_its_release_and_the_run():
    reading = deck.specialists(*syntax_frames())
    assert reading.relations == 14  # Table 1 less "all"
    # the paper's table: pobj, det, nsubj, dobj, poss, auxpass (+42.0), ccomp, mark; released: auxpass +11.6, still
    assert (reading.paper, reading.released, reading.run) == (8, 8, 2)
    (relation, theirs, released, mine), = reading.disagreements
    assert relation == "auxpass" and (theirs, released, mine) == (pytest.approx(42.0), pytest.approx(11.6),
                                                                  pytest.approx(8.0))
    assert deck.specialists(*syntax_frames(auxpass=0.95)).run == 3  # auxpass +14 joins dobj and det


def by_layer_frame():
    """`NormResult.by_layer()`: [CLS] takes 0.4 of the weight in layers 2-3 (0.1 elsewhere) and 0.02 by norm."""
    rows = [(layer, category, weight, norm) for layer in (1, 2, 3, 4)
            for category, weight, norm in (("cls", 0.4 if layer in (2, 3) else 0.1, 0.02), ("other", 0.5, 0.9))]
    frame = pd.DataFrame(rows, columns=["layer", "category", "by weight", "by norm"])
    return frame.set_index(["layer", "category"])


def test_norm_sink_averages_the_middle_layers_by_weight_and_by_norm():
    reading = deck.norm_sink(by_layer_frame(), 2, 3)
    assert (reading.first, reading.last) == (2, 3)
    assert reading.by_weight == pytest.approx(0.4) and reading.by_norm == pytest.approx(0.02)
    assert reading.shrink == pytest.approx(20)
    assert deck.norm_sink(by_layer_frame(), 1, 4).by_weight == pytest.approx(0.25)
    with pytest.raises(ValueError, match="first <= last"):
        deck.norm_sink(by_layer_frame(), 3, 2)


def held(task: str, evaluation: float, low: float, high: float) -> HeldOut:
    picks = pd.DataFrame({"label": ["2-1", "5-12"], "selection": [0.02, -0.01], "evaluation": [evaluation, -0.02],
                          "low": [low, -0.05], "high": [high, 0.01]}, index=["best head", "worst head"])
    return HeldOut(task, picks, pd.Series([0.0, 0.01], index=["2-1", "5-12"]),
                   {"selection": 0.8, "evaluation": 0.8}, 96, 90)


def test_held_out_gains_reads_the_best_head_per_task_in_points_and_which_gains_are_confirmed():
    reading = deck.held_out_gains({"topic": held("topic", 0.0, -0.03, 0.03),
                                   "sentiment": held("sentiment", 0.05, 0.01, 0.09)})
    assert reading.tasks == ("topic", "sentiment")
    assert reading.selection == (pytest.approx(2.0), pytest.approx(2.0))
    assert reading.evaluation == (0.0, pytest.approx(5.0)) and reading.low == (pytest.approx(-3.0), pytest.approx(1.0))
    assert reading.n_evaluation == (90, 90)
    assert reading.confirmed == ("sentiment",)
    assert deck.held_out_gains({"topic": held("topic", 0.0, -0.03, 0.03)}, pick="worst head").evaluation == (
        pytest.approx(-2.0),)
    with pytest.raises(ValueError, match="no held-out"):
        deck.held_out_gains({})
