"""Notebook 05's readings on hand-made passages and results whose answers are known by construction."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from bertlook_utils import coref
from bertlook_utils.coref import CorefResult, Reading, SameWord, System
from bertlook_utils.corefdata import Mention, Passage
from bertlook_utils.readings import nb05

# Ann Bob Ann Bob Ann Bob: two people, alternating, so every antecedent is exactly two mentions back
WORDS = "Ann Bob Ann Bob Ann Bob".split()
PASSAGE = Passage("alternating", WORDS, [Mention(i, i + 1, i, i % 2, "proper", "sg", "fm"[i % 2], "animate")
                                         for i in range(6)])

BEST, STRICT, LOOSE = (3, 10), (2, 2), (1, 4)  # the best heads under the three readings
KIT, STRICT_SYSTEM, LOOSE_SYSTEM = (coref.best_head_label(BEST), coref.best_head_label(STRICT, Reading.EARLIER_WORDS),
                                    coref.best_head_label(LOOSE, Reading.ALL_WORDS))
# held-out accuracy (fractions) per system: all, pronoun, proper, nominal
ACCURACY = {System.NEAREST: (0.196, 0.30, 0.10, 0.15), System.HEAD_WORD: (0.717, 0.40, 0.95, 0.70),
            System.SIEVE: (0.868, 0.936, 0.95, 0.773), System.COMBINED: (0.875, 0.889, 0.96, 0.826),
            KIT: (0.803, 0.72, 0.90, 0.80), STRICT_SYSTEM: (0.669, 0.50, 0.80, 0.60),
            LOOSE_SYSTEM: (0.581, 0.40, 0.70, 0.55)}


def table_frame(accuracy):
    rows = [(system, t, a, a - 0.05, a + 0.05, 100) for system, values in accuracy.items()
            for t, a in zip(coref.COLUMNS, values)]
    return pd.DataFrame(rows, columns=["system", "type", "accuracy", "low", "high", "n"])


def make_result(accuracy=ACCURACY, heads=None, reading_correct=None, halves=None):
    """A CorefResult with only what the readings use: the passage above, a long-form table, the readings'
    best heads and, where given, per-head scores, per-reading correctness and the mentions' halves."""
    mentions = coref.mention_table([PASSAGE])
    mentions["half"] = halves if halves is not None else ["selection", "selection", "held-out", "held-out"]
    readings = pd.DataFrame([(r, *b, f"{b[0]}-{b[1]}", accuracy[s][0] + 0.01, accuracy[s][0])
                             for r, b, s in ((Reading.MENTION_HEADS, BEST, KIT), (Reading.EARLIER_WORDS, STRICT,
                                              STRICT_SYSTEM), (Reading.ALL_WORDS, LOOSE, LOOSE_SYSTEM))],
                            columns=["reading", "layer", "head", "label", "selection", "held_out"])
    empty = np.zeros((len(mentions), 3, 10), dtype=bool)
    return CorefResult([PASSAGE], mentions, empty.astype(int), empty, heads, BEST, table_frame(accuracy), readings,
                       reading_correct)


def test_positions_on_the_alternating_passage():
    reading = nb05.positions([PASSAGE], coref.mention_table([PASSAGE]))
    assert reading.nearest_share == 0  # the nearest earlier mention is always the other person
    assert (reading.best_k, reading.best_k_accuracy) == (2, 100)
    assert reading.paper_nearest == 27


def test_head_ranking_counts_good_heads_and_the_drift_of_the_best():
    heads = pd.DataFrame({"layer": [1, 1, 2, 2], "head": [1, 2, 1, 2], "all": [0.3, 0.7, 0.65, 0.2],
                          "held_out": [0.31, 0.68, 0.66, 0.1]})
    halves = ["selection", "held-out", "held-out", "held-out"]
    reading = nb05.head_ranking(make_result(heads=heads, halves=halves), threshold=0.6, top=2)
    assert (reading.n_good, reading.n_heads) == (2, 4)
    assert reading.median == pytest.approx(47.5)
    assert reading.drift == pytest.approx(2.0)  # the two best; the worst head's 10 points are not counted
    assert reading.min_per_half == 1
    assert (reading.first, reading.first_accuracy, reading.first_layer) == ("1-2", pytest.approx(70.0), 1)
    assert (reading.second, reading.second_accuracy, reading.second_layer) == ("2-1", pytest.approx(65.0), 2)
    assert (reading.paper_head, reading.paper_layer) == ("5-4", 5)
    assert nb05.head_ranking(make_result(heads=heads), top=4).drift == pytest.approx(10.0)


def test_table2_reads_the_systems_and_where_this_run_beats_the_paper():
    reading = nb05.table2(make_result())
    assert (reading.nearest, reading.head_word, reading.sieve) == pytest.approx((19.6, 71.7, 86.8))
    assert (reading.best, reading.best_accuracy) == ("3-10", pytest.approx(80.3))
    assert (reading.strict, reading.strict_accuracy) == ("2-2", pytest.approx(66.9))
    assert reading.nearest_gap == pytest.approx(52.1)
    # the paper: head-word match 52 47 67 40, sieve 69 70 77 60, head 5-4 65 64 73 58
    assert reading.not_above_paper == (f"{System.HEAD_WORD}: pronoun",)


def test_table2_with_every_system_above_the_paper():
    accuracy = ACCURACY | {System.HEAD_WORD: (0.717, 0.50, 0.95, 0.70)}
    assert nb05.table2(make_result(accuracy)).not_above_paper == ()


def test_combined_against_the_best_head_and_the_sieve():
    reading = nb05.combined(make_result())
    assert (reading.combined, reading.best, reading.sieve) == pytest.approx((87.5, 80.3, 86.8))
    assert reading.gap_to_sieve == pytest.approx(0.7)
    assert (reading.combined_nominal, reading.sieve_nominal) == pytest.approx((82.6, 77.3))
    assert (reading.combined_pronoun, reading.sieve_pronoun) == pytest.approx((88.9, 93.6))


def test_definition_reads_each_reading_and_the_mentions_lost_on_the_held_out_half():
    right = np.zeros((4, 3, 10), dtype=bool)
    strict = right.copy()
    right[:, 2, 9] = True  # the kit's best head 3-10 is right on every mention ...
    strict[:, 2, 9] = [False, False, True, False]  # ... over every earlier word on one (the first held-out row)
    reading = nb05.definition(make_result(reading_correct={Reading.MENTION_HEADS: right, Reading.EARLIER_WORDS: strict,
                                                           Reading.ALL_WORDS: strict}))
    assert (reading.kit, reading.kit_head) == (pytest.approx(80.3), "3-10")
    assert (reading.strict, reading.strict_head) == (pytest.approx(66.9), "2-2")
    assert (reading.all_words, reading.all_words_head) == (pytest.approx(58.1), "1-4")
    assert reading.lost == 50  # one of the two held-out rows (75 % if the selection rows counted)
    assert reading.head_word == pytest.approx(71.7) and reading.paper_head == 65


def failure_tables(pronoun_agrees=(False, False, True), nearest_far=0.0):
    split = pd.DataFrame([(t, same, 10, hw, sieve, head) for t, same, hw, sieve, head in (
        ("nominal", SameWord.YES, 1.0, 1.0, 1.0), ("nominal", SameWord.NO, 0.1, 0.3, 0.5),
        ("pronoun", SameWord.YES, 1.0, 1.0, 0.99), ("pronoun", SameWord.NO, 0.05, 0.95, 0.45),
        ("proper", SameWord.YES, 1.0, 1.0, 1.0), ("proper", SameWord.NO, 0.2, 0.4, 0.42))],
        columns=["type", "same_word", "n", System.HEAD_WORD, System.SIEVE, KIT])
    wrong = pd.DataFrame({"type": ["pronoun"] * len(pronoun_agrees) + ["proper"], "picked_agrees": [*pronoun_agrees,
                                                                                                   False]})
    by_rank = pd.DataFrame({"rank": [1, 2, 3, 4], "n": [5, 5, 5, 5], System.NEAREST: [1.0, 0.0, 0.0, nearest_far],
                            KIT: [0.85, 0.8, 0.8, 0.78]})
    return split, wrong, by_rank


def test_failures_read_the_same_word_split_the_pronoun_errors_and_distance():
    reading = nb05.failures(make_result(), *failure_tables())
    assert reading.same_word_min == 0.99 and reading.other_word_max == 0.5
    assert reading.over_head_word_min == pytest.approx(0.22)  # proper: 0.42 against 0.2
    assert reading.over_sieve_names_min == pytest.approx(0.02)  # proper: 0.42 against 0.4; pronouns not counted
    assert reading.pronoun_below_sieve == pytest.approx(0.5)
    assert (reading.weakest_type, reading.pronoun_accuracy) == ("pronoun", pytest.approx(72.0))
    assert reading.pronoun_errors_disagree == pytest.approx(2 / 3)  # the proper error is not counted
    assert reading.rank_loss == pytest.approx(0.07) and reading.nearest_at_last_rank == 0


def test_failures_without_pronoun_errors_and_with_another_weakest_type():
    accuracy = ACCURACY | {KIT: (0.803, 0.90, 0.95, 0.70)}
    split, _, by_rank = failure_tables(nearest_far=0.2)
    reading = nb05.failures(make_result(accuracy), split, pd.DataFrame(), by_rank)
    assert math.isnan(reading.pronoun_errors_disagree)
    assert reading.weakest_type == "nominal" and reading.nearest_at_last_rank == pytest.approx(0.2)


def test_discussion_reads_the_layers_the_data_and_the_sieve():
    reading = nb05.discussion(make_result())
    assert reading.best_layers == (2, 3)  # the kit's 3-10 and the stricter reading's 2-2, not all words' 1-4
    assert reading.paper_head == "5-4"
    assert reading.mean_words == 6 and reading.candidates == 3.5  # mentions 2..5 have 2..5 earlier mentions
    assert (reading.sieve_pronoun, reading.paper_sieve_pronoun) == (pytest.approx(93.6), 70)
