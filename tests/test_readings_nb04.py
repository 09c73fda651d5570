"""Notebook 04's readings on hand-made tables whose answers are known by construction."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from builders import make_encoded

from bertlook_utils import paper
from bertlook_utils.readings import nb04


def heads_frame(rows):
    """rows: (relation, layer, head, accuracy, n[, low, high]) -> a `syntax.head_accuracy` frame (fractions)."""
    full = [(*r[:3], "dep->head", r[3], r[4], *(r[5:] or (r[3] - 0.05, r[3] + 0.05))) for r in rows]
    return pd.DataFrame(full, columns=["relation", "layer", "head", "direction", "accuracy", "n", "low", "high"])


def baseline_frame(rows):
    """rows: (relation, offset, accuracy) -> a `syntax.offset_baseline` frame (fractions)."""
    return pd.DataFrame([(r, o, a, 100) for r, o, a in rows], columns=["relation", "offset", "accuracy", "n"])


# gains (points): dobj +30, det +12 (wide); aux +10, prt +6 (modest, both ends included); amod +2, prep +1 (small)
HEADS = heads_frame([("all", 3, 2, 0.332, 5000), ("dobj", 5, 1, 0.70, 400), ("det", 4, 10, 0.62, 900),
                     ("aux", 2, 2, 0.60, 300), ("prt", 6, 7, 1.0, 74, 1.0, 1.0), ("amod", 4, 10, 0.52, 600),
                     ("prep", 4, 10, 0.41, 800)])
BASELINE = baseline_frame([("all", 1, 0.255), ("dobj", -2, 0.40), ("det", 1, 0.50), ("aux", 1, 0.50),
                           ("prt", -1, 0.94), ("amod", 1, 0.50), ("prep", -1, 0.40)])


def test_code_list_and_listed_put_names_in_backticks():
    assert nb04.code_list(("det", "dobj")) == "`det`, `dobj`"
    assert nb04.code_list(()) == ""
    assert nb04.listed((("dobj", 37.3), ("prep", 0.6))) == "`dobj` (+37.3), `prep` (+0.6)"
    assert nb04.listed(()) == ""


def variants_frame(poss_kit=70.0, all_kit_plus3_baseline=26.5):
    """`syntax.scoring_variants` in % as notebook 04 prints it: Clark's scoring counts the root, so it is lower."""
    rows = []
    for relation, scoring, accuracy, baseline in (("all", "clark", 33.2, 25.5), ("all", "kit", 34.2, 26.5),
                                                  ("poss", "clark", 70.0, 40.0), ("poss", "kit", poss_kit, 40.0)):
        plus3 = all_kit_plus3_baseline if (relation, scoring) == ("all", "kit") else baseline
        rows += [(relation, scoring, "-3..+2", accuracy, baseline), (relation, scoring, "-3..+3", accuracy, plus3)]
    return pd.DataFrame(rows, columns=["relation", "scoring", "offsets", "accuracy", "baseline"])


def test_scoring_variants_reads_the_root_and_the_poss_rule():
    reading = nb04.scoring_variants(variants_frame())
    assert reading.root_head_drop == pytest.approx(1.0) and reading.root_baseline_drop == pytest.approx(1.0)
    assert reading.poss_difference == 0 and reading.plus3_changes == ()


def test_scoring_variants_sees_the_poss_rules_differ_and_offset_plus3_win():
    reading = nb04.scoring_variants(variants_frame(poss_kit=68.0, all_kit_plus3_baseline=27.0))
    assert reading.poss_difference == pytest.approx(2.0)
    assert reading.plus3_changes == ("all (kit)",)


def test_table1_sorts_relations_by_gain_with_inclusive_modest_band():
    reading = nb04.table1(HEADS, BASELINE)
    assert reading.all_head == "3-2" and reading.all_accuracy == 33.2 and reading.all_baseline == pytest.approx(25.5)
    assert (reading.paper_all_accuracy, reading.paper_all_baseline) == (34.5, 26.3)
    assert reading.all_gap_to_paper == pytest.approx(33.2 - 34.5)
    assert reading.wide == (("dobj", 30.0), ("det", 12.0)) and reading.wide_relations == ("dobj", "det")
    assert reading.modest == (("aux", 10.0), ("prt", 6.0))
    assert reading.small == (("amod", 2.0), ("prep", 1.0))
    assert reading.wide_max_baseline == pytest.approx(50.0)  # det's offset, above dobj's 40
    assert reading.small_not_adjacent == ()  # amod +1, prep -1
    assert (reading.small_top_head, reading.small_top_head_wins) == ("4-10", 2)
    assert (reading.paper_nn_accuracy, reading.paper_nn_baseline) == (70.4, 70.2)


def test_table1_reads_the_released_notebook_beside_the_paper():
    reading = nb04.table1(HEADS, BASELINE)  # no auxpass row here
    assert (reading.released_all_accuracy, reading.released_all_baseline) == (34.7, 26.7)
    assert reading.all_gap_to_released == pytest.approx(33.2 - 34.7)
    (relation, theirs, released, mine), = reading.disagreements
    assert (relation, theirs, released) == ("auxpass", pytest.approx(42.0), pytest.approx(11.6)) and math.isnan(mine)
    with_auxpass = nb04.table1(pd.concat([HEADS, heads_frame([("auxpass", 3, 9, 0.89, 700)])]),
                               pd.concat([BASELINE, baseline_frame([("auxpass", 1, 0.81)])]))
    assert with_auxpass.disagreements[0][3] == pytest.approx(8.0)


def test_table1_reads_the_rare_relation_and_the_rule_of_three():
    reading = nb04.table1(HEADS, BASELINE)
    assert (reading.rare, reading.rare_n, reading.rare_hits) == ("prt", 74, 74)
    assert reading.rare_interval == "100.0–100.0"
    assert reading.rare_plausible == pytest.approx(100 - 300 / 74)
    missed = HEADS.assign(accuracy=HEADS["accuracy"].where(HEADS["relation"] != "prt", 73 / 74))
    assert nb04.table1(missed, BASELINE).rare_hits == 73


def test_table1_with_no_wide_relation_and_a_small_gain_beyond_the_neighbours():
    heads = HEADS[~HEADS["relation"].isin(["dobj", "det"])]
    baseline = BASELINE.assign(offset=BASELINE["offset"].where(BASELINE["relation"] != "prep", 2))
    reading = nb04.table1(heads, baseline)
    assert reading.wide == () and math.isnan(reading.wide_max_baseline)
    assert reading.small_not_adjacent == ("prep",)


def held_frame():
    """`syntax.heldout_table` in % as printed: (relation, n, selection, heldout, heldout_best)."""
    rows = [("all", 5000, 33.0, 32.0, 32.0), ("det", 1500, 80.0, 79.5, 79.5), ("advmod", 300, 50.0, 46.0, 48.0),
            ("aux", 300, 80.0, 75.0, 78.0), ("mark", 100, 60.0, 57.0, 57.0)]
    return pd.DataFrame(rows, columns=["relation", "n", "selection", "heldout", "heldout_best"])


def test_held_out_counts_kept_heads_and_losses():
    reading = nb04.held_out(held_frame(), watched=("advmod", "aux", "mark"))
    assert (reading.n_relations, reading.still_best) == (5, 3)  # all, det, mark
    assert reading.worst_loss == 5.0 and reading.frequent_worst_loss == 1.0  # aux; all (1) and det (0.5)
    assert reading.watched == ("advmod", "aux", "mark")
    assert (reading.watched_min_loss, reading.watched_max_loss) == (3.0, 5.0)
    assert reading.watched_kept_best == ("mark",)  # no other head looks better for mark


def test_held_out_with_no_frequent_relation():
    reading = nb04.held_out(held_frame(), watched=("advmod", "aux"), frequent_n=10_000)
    assert math.isnan(reading.frequent_worst_loss) and reading.watched_kept_best == ()


def test_parser_agreement_keeps_to_table1_relations_and_reads_the_moves():
    agreement = pd.DataFrame([("all", 900, 93.8, 92.5), ("punct", 80, 50.0, 50.0), ("ccomp", 30, 84.0, 80.0),
                              ("prep", 90, 92.0, 91.0), ("advmod", 50, 92.4, 90.0), ("det", 100, 99.0, 99.0)],
                             columns=["relation", "n", "head_agreement", "labelled_agreement"])
    rescored = pd.DataFrame([("all", 33.2, 35.0, 25.5, 26.0), ("det", 76.0, 76.0, 50.0, 51.0),
                             ("prep", 60.0, 63.7, 58.0, 57.0)],
                            columns=["relation", "accuracy", "accuracy_kept", "baseline", "baseline_kept"])
    reading = nb04.parser_agreement(agreement, rescored, ["all", "prep", "det", "advmod", "ccomp"])
    assert (reading.head_agreement, reading.labelled_agreement) == (93.8, 92.5)
    assert reading.least_agreed == (("ccomp", 84.0), ("prep", 92.0), ("advmod", 92.4))  # not punct, not all
    assert reading.moved_min == pytest.approx(0.0) and reading.moved_max == pytest.approx(3.7)
    assert reading.all_baseline_rise == pytest.approx(0.5)
    assert (reading.baselines_risen, reading.n_relations) == (2, 3)  # prep's baseline falls


def checked_frame(det_low=85.0, dobj_low=80.0, pobj_low=95.0):
    """`parsecheck.precision_table` (%): the far relations, a weak one, and the pooled row."""
    rows = [("det", 22, 21, 95.5, det_low, 99.0, 95.5), ("dobj", 22, 20, 90.9, dobj_low, 97.0, 90.9),
            ("pobj", 22, 22, 100.0, pobj_low, 100.0, 100.0), ("ccomp", 22, 18, 81.8, 61.5, 92.7, 77.3),
            ("all checked", 88, 81, 92.0, 84.5, 96.1, 90.9)]
    return pd.DataFrame(rows, columns=["relation", "n", "head_ok", "head_precision", "head_low", "head_high",
                                       "labelled_precision"])


# this run's far relations against the paper's det 94.3, dobj 86.8, pobj 76.3: gaps 24.3, 6.8, 6.3 points
FAR_HEADS = heads_frame([("det", 4, 10, 0.70, 900), ("dobj", 5, 1, 0.80, 400), ("pobj", 3, 3, 0.70, 700)])
FAR_BASELINE = baseline_frame([("det", 1, 0.5), ("dobj", -2, 0.4), ("pobj", -2, 0.3)])


def test_hand_check_reads_the_pool_and_the_weakest_relation():
    reading = nb04.hand_check(checked_frame(), FAR_HEADS, FAR_BASELINE)
    assert (reading.head_ok, reading.n) == (81, 88)
    assert (reading.precision, reading.low, reading.high, reading.labelled) == (92.0, 84.5, 96.1, 90.9)
    assert reading.worst == "ccomp"  # the lowest relation; the pooled row is no relation
    assert (reading.worst_precision, reading.worst_low, reading.worst_high) == (81.8, 61.5, 92.7)


def test_hand_check_splits_the_gaps_parse_errors_cannot_explain():
    reading = nb04.hand_check(checked_frame(), FAR_HEADS, FAR_BASELINE)
    assert [r for r, _ in reading.gaps] == ["det", "dobj", "pobj"]
    assert [g for _, g in reading.gaps] == pytest.approx([24.3, 6.8, 6.3])
    assert [w for _, w in reading.most_wrong] == pytest.approx([15.0, 20.0, 5.0])
    assert reading.beyond == ("det", "pobj") and reading.undecided == ("dobj",)


def test_hand_check_when_every_gap_or_none_is_beyond_the_errors():
    every = nb04.hand_check(checked_frame(dobj_low=95.0), FAR_HEADS, FAR_BASELINE)
    assert every.beyond == ("det", "dobj", "pobj") and every.undecided == ()
    none = nb04.hand_check(checked_frame(det_low=70.0, pobj_low=90.0), FAR_HEADS, FAR_BASELINE)
    assert none.beyond == () and none.undecided == ("det", "dobj", "pobj")


def test_differences_reads_sizes_layers_and_the_far_relations():
    heads = pd.concat([heads_frame([("all", 3, 2, 0.33, 5000), ("compound", 1, 1, 0.86, 500)]), FAR_HEADS])
    baseline = pd.concat([baseline_frame([("all", 1, 0.255), ("compound", 1, 0.85)]), FAR_BASELINE])
    reading = nb04.differences(heads, baseline, n_layers=6, n_heads=12)
    assert (reading.compound_baseline, reading.paper_nn_baseline) == (pytest.approx(85.0), 70.2)
    assert (reading.n_heads, reading.n_candidates) == (72, 144)
    assert (reading.layers_min, reading.layers_max, reading.layers_median) == (1, 5, 3.5)  # 1, 4, 5, 3; not all's
    paper_layers = [int(h.split("-")[0]) for r, h in zip(paper.TABLE1["relation"], paper.TABLE1["head"]) if r != "all"]
    assert (reading.paper_layers_min, reading.paper_layers_max) == (min(paper_layers), max(paper_layers)) == (4, 9)
    assert reading.paper_layers_median == 7
    assert reading.far_vs_paper == (("det", 70.0, 94.3), ("dobj", 80.0, 86.8), ("pobj", 70.0, 76.3))


def test_strongest_targets_reads_the_first_occurrence_of_the_token_in_one_head():
    tokens = ["[CLS]", "our", "mind", "our", "[SEP]"]
    attn = np.full((2, 2, 5, 5), 0.2)
    attn[1, 0, 1] = [0.3, 0.0, 0.6, 0.1, 0.0]  # layer 2, head 1: the first "our" -> mind, then [CLS]
    attn[1, 0, 3] = [0.0, 0.9, 0.1, 0.0, 0.0]  # the second "our" is not read
    enc = make_encoded(tokens, attn)
    assert nb04.strongest_targets(enc, 2, 1, "our") == ("mind", "[CLS]")
    assert nb04.strongest_targets(enc, 2, 1, "our", k=1) == ("mind",)
    with pytest.raises(ValueError, match="'her' is not in the input"):
        nb04.strongest_targets(enc, 2, 1, "her")
    with pytest.raises(ValueError):
        nb04.strongest_targets(enc, 3, 1, "our")  # no layer 3
