"""Notebook 09's readings (`bertlook_utils.lab.readings.nb09`) on hand-built relation scores, per-layer and per-type
attention tables, stripe counts and held-out disabling results whose answers are known by construction."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bertlook_utils.analyses.disabling import PICKS, HeldOut, NearTies
from bertlook_utils.analyses.finetune import Stage
from bertlook_utils.analyses.relations import Frame, RelationScores
from bertlook_utils.analyses.tokentypes import (CATEGORIES, EXCLUSIVE, STRIPE_THRESHOLDS, UNTYPED, Stripes,
                                                TokenTypeAttention)
from bertlook_utils.lab.readings import nb09
from bertlook_utils.present import paper


# -- §4.2 relation-specific heads ---------------------------------------------------------------------
SCORE = [[0.6, 0.3], [0.25, 0.2]]  # heads 1-1, 1-2, 2-1, 2-2: the table's order


def relation_scores(null: list[list[float]], null_kind: str) -> RelationScores:
    """2 layers x 2 heads scoring SCORE on every frame (one argument each, one frame per sentence), against a null
    whose every draw is `null` [L, H] (its 99th percentile, its mean and every sentence's mean): each head's effect
    is SCORE - null, an interval of zero width."""
    frames = [Frame(sentence, 0, ((1, 2),), ("dobj",)) for sentence in range(2)]
    frame_scores = np.broadcast_to(np.array(SCORE), (2, 2, 2, 2)).astype(np.float64)
    draws = np.broadcast_to(np.array(null), (5, 2, 2)).astype(float)
    return RelationScores(frames, frame_scores, draws, draws, draws[:2], null_kind=null_kind)


def test_relation_heads_reads_the_papers_statistic_and_the_effects_over_both_nulls():
    scores = {"relocated": relation_scores([[0.4, 0.2], [0.2, 0.3]], "relocated"),  # 1-1, 1-2, 2-1 above
              "shifted": relation_scores([[0.61, 0.35], [0.22, 0.1]], "shifted")}  # 2-1, 2-2 above
    reading = nb09.relation_heads(scores)
    assert (reading.n_heads, reading.n_arguments) == (4, 2)
    # the 99th percentile of 0.2, 0.25, 0.3, 0.6 (linear): 0.3 + 0.97 * 0.3; only the top head is above it
    assert reading.percentile == pytest.approx(0.591) and reading.paper_heads == ("1-1",)
    assert reading.top == "1-1" and reading.top_score == pytest.approx(0.6)
    assert reading.paper_best == 0.209 == max(paper.DARK_SECRETS["framenet_scores"])
    assert reading.paper_scores == paper.DARK_SECRETS["framenet_scores"]
    assert reading.top_relocated == nb09.Effect("1-1", 1, 1, pytest.approx(0.2), pytest.approx(0.2), pytest.approx(0.2))
    assert reading.top_shifted.effect == pytest.approx(-0.01) and reading.top_shifted.high == pytest.approx(-0.01)
    assert reading.strongest == nb09.Effect("2-2", 2, 2, pytest.approx(0.1), pytest.approx(0.1), pytest.approx(0.1))
    assert (reading.n_relocated, reading.n_shifted, reading.n_effect_shifted) == (3, 2, 2)  # 2-1 (+0.03) and 2-2


def test_syntax_overlap_reads_the_named_relations_in_their_order():
    overlap = pd.DataFrame({"relation": ["pobj", "ccomp", "nsubj", "xcomp", "dobj"],
                            "rank": [4, 60, 11, 2, 7], "spearman": [0.72, 0.05, 0.51, 0.9, 0.6]})
    reading = nb09.syntax_overlap(overlap)
    assert reading.ranks == (11, 7, 4)  # nsubj, dobj, pobj; ccomp and xcomp are left out
    assert reading.spearman_min == pytest.approx(0.51) and reading.spearman_max == pytest.approx(0.72)
    assert reading.worst_rank == 11
    assert nb09.syntax_overlap(overlap, ("xcomp",)).ranks == (2,)


# -- §4.5 [CLS] and [SEP] ---------------------------------------------------------------------------------
def special_frame(cls_change, sep_after, sep_change) -> pd.DataFrame:
    """A `tokentypes.special_change` frame (the columns read), layers 1..L."""
    return pd.DataFrame({"cls_change": cls_change, "sep_after": sep_after, "sep_change": sep_change},
                        index=pd.Index(range(1, len(cls_change) + 1), name="layer"))


def test_sink_shift_finds_each_tasks_largest_fall_and_the_largest_sep_move():
    special = {"topic": special_frame([0.001, -0.1, -0.3], [0.02, 0.03, 0.05], [0.0, 0.01, -0.015]),
               "sentiment": special_frame([-0.004, -0.2, -0.05], [0.01, 0.04, 0.06], [0.002, -0.003, 0.004])}
    reading = nb09.sink_shift(special)
    assert reading.falls == (("topic", 3, pytest.approx(-0.3)), ("sentiment", 2, pytest.approx(-0.2)))
    assert reading.first_layer == pytest.approx(0.004)  # a fall counts by its size
    assert (reading.sep_after_min, reading.sep_after_max) == (pytest.approx(0.01), pytest.approx(0.06))
    assert reading.sep_change == pytest.approx(0.015)


def cls_frame(before: dict[str, float], after: dict[str, float]) -> pd.DataFrame:
    """A `tokentypes.exclusive_cls_change` frame: every category 0.05 before and after unless given, noun 0.3 of
    the tokens; the change's interval +-0.01 around it."""
    frame = pd.DataFrame({"category": EXCLUSIVE, "base_rate": 0.1, "before": 0.05, "after": 0.05}).set_index("category")
    frame.loc[list(before), "before"] = list(before.values())
    frame.loc[list(after), "after"] = list(after.values())
    frame.loc["noun", "base_rate"] = 0.3
    frame["change"] = frame["after"] - frame["before"]
    frame["change_low"], frame["change_high"] = frame["change"] - 0.01, frame["change"] + 0.01
    return frame.reset_index()


def test_cls_reads_reads_nouns_the_untyped_words_sep_and_the_largest_categories():
    cls_rows = {
        # the untyped words outweigh nouns after fine-tuning, but only the typed categories compete for "largest"
        "topic": cls_frame({"noun": 0.45, "[SEP]": 0.04, "[CLS]": 0.17}, {"noun": 0.5, UNTYPED: 0.6, "[SEP]": 0.02,
                                                                          "[CLS]": 0.1}),
        "sentiment": cls_frame({"noun": 0.35, "[CLS]": 0.5, "[SEP]": 0.03},
                               {"noun": 0.35, "[CLS]": 0.4, "[SEP]": 0.03}),
    }
    reading = nb09.cls_reads(cls_rows)
    assert reading.nouns == (("topic", 0.45, 0.5, 0.3), ("sentiment", 0.35, 0.35, 0.3))
    assert reading.noun_changes == (("topic", pytest.approx(0.05), pytest.approx(0.04), pytest.approx(0.06)),
                                    ("sentiment", 0.0, -0.01, 0.01))
    assert reading.largest_before == ("noun", "[CLS]") and reading.largest_after == ("noun", "[CLS]")
    assert reading.largest_overall == (UNTYPED, "[CLS]")
    assert reading.untyped[0] == ("topic", 0.6, pytest.approx(0.55), pytest.approx(0.54), pytest.approx(0.56))
    assert not reading.noun_largest
    assert (reading.sep_after_min, reading.sep_after_max) == (0.02, 0.03)
    assert reading.sep_most == 0.04  # before fine-tuning
    assert reading.cls_changes == (("topic", pytest.approx(-0.07)), ("sentiment", pytest.approx(-0.1)))
    nouns = nb09.cls_reads({"topic": cls_frame({"noun": 0.4}, {"noun": 0.5})})
    assert nouns.noun_largest and nouns.largest_overall == ("noun",)


# -- §4.4 vertical stripes --------------------------------------------------------------------------------
def summary_row(task, model, threshold, special, special_tokens, linguistic, linguistic_tokens):
    return (task, model, threshold, 100, special, special - 0.01, special_tokens, linguistic, linguistic_tokens)


def stripe_counts(last: dict[str, int]) -> TokenTypeAttention:
    """2 layers x 1 head, one input: layer 1 has 10 stripes all on [CLS]; the last layer 10 stripes, `last`
    (category -> count) of them on the categories given, at every threshold."""
    n_categories, index = len(CATEGORIES), CATEGORIES.index
    stripes = np.zeros((len(STRIPE_THRESHOLDS), n_categories, 2, 1), dtype=int)
    stripes[:, index("[CLS]"), 0] = 10
    for category, count in last.items():
        stripes[:, index(category), 1] = count
    columns = np.full((len(STRIPE_THRESHOLDS), 2, 1), 10)
    zeros = np.zeros((n_categories, 2, 1))
    return TokenTypeAttention(zeros, zeros, np.zeros((1, n_categories, 2)), np.zeros((1, n_categories, 2)), stripes,
                              columns, np.ones_like(columns), np.ones(n_categories, dtype=int),
                              np.zeros(n_categories), 1, 12, STRIPE_THRESHOLDS, "key")


def test_stripe_places_reads_the_main_threshold_and_the_pretrained_models_last_layer():
    rows = []
    for task, special in (("topic", 0.92), ("sentiment", 0.98)):
        for model in Stage:
            rows += [summary_row(task, model, 0.1, 0.65, 0.2, 0.2, 0.5),  # the other thresholds: not the ranges
                     summary_row(task, model, 0.2, special, 0.14 if task == "topic" else 0.18, 1 - special,
                                 0.41 if model == Stage.PRETRAINED else 0.45),
                     summary_row(task, model, 0.4, 0.99, 0.2, 0.0, 0.5)]
    summary = pd.DataFrame(rows, columns=["task", "model", "threshold", "stripes", *Stripes])
    by_type = {"topic": {Stage.PRETRAINED: stripe_counts({"[CLS]": 7, "linguistic": 3, "noun": 2}),
                         Stage.FINE_TUNED: stripe_counts({"[CLS]": 10})},
               "sentiment": {Stage.PRETRAINED: stripe_counts({"[CLS]": 9, "linguistic": 1, "noun": 0}),
                             Stage.FINE_TUNED: stripe_counts({"[CLS]": 10})}}
    reading = nb09.stripe_places(summary, by_type)
    assert (reading.special_min, reading.special_max) == (0.92, 0.98)
    assert (reading.special_tokens_min, reading.special_tokens_max) == (0.14, 0.18)
    assert (reading.linguistic_tokens_min, reading.linguistic_tokens_max) == (0.41, 0.45)
    assert (reading.linguistic_min, reading.linguistic_max) == (pytest.approx(0.02), pytest.approx(0.08))
    assert reading.special_any_threshold == 0.65  # the lowest threshold's
    assert reading.last_layer == (("topic", 0.3, 0.2), ("sentiment", 0.1, 0.0))  # layer 1 has no linguistic stripe


# -- §4.6 disabling, held out ------------------------------------------------------------------------------
def held(task: str, best: tuple, worst_head: tuple, worst_layer: tuple, heads: list[float], n: int = 96) -> HeldOut:
    """A `disabling.HeldOut` of n + n inputs with picks (label, selection, evaluation, low, high; the best head
    gains 3 evaluation inputs and loses 1, the others 0 and 2) and every head's evaluation change `heads`."""
    picks = pd.DataFrame([best, worst_head, ("layer 6", 0.01, 0.0, -0.05, 0.05), worst_layer], index=list(PICKS),
                         columns=["label", "selection", "evaluation", "low", "high"])
    picks["gained"], picks["lost"] = [3, 0, 0, 0], [1, 2, 2, 2]
    changes = pd.Series(heads, index=[f"1-{k + 1}" for k in range(len(heads))])
    return HeldOut(task, picks, changes, {"selection": 0.8, "evaluation": 0.8}, n, n)


HARMLESS = ("1-2", -0.01, -0.01, -0.05, 0.01)
HELD = {"topic": held("topic", ("1-1", 0.03, 0.0, -0.04, 0.04), HARMLESS, ("layer 1", 0.0, 0.0, -0.02, 0.02),
                      [0.01, 0.01]),
        "next_paragraph": held("next_paragraph", ("2-3", 0.021, -0.01, -0.06, 0.04),
                               ("4-4", -0.1, -0.146, -0.241, -0.045), ("layer 4", -0.05, -0.083, -0.155, -0.009),
                               [-0.02, -0.01]),
        "sentiment": held("sentiment", ("1-1", 0.042, 0.042, -0.02, 0.1), HARMLESS,
                          ("layer 2", -0.03, -0.05, -0.09, -0.02), [-0.01, 0.0])}
SEEDS = {0: HELD["sentiment"],
         1: held("sentiment", ("3-2", 0.025, 0.01, 0.005, 0.08), HARMLESS, HARMLESS, [0.0]),  # interval above 0
         2: held("sentiment", ("1-1", 0.03, 0.02, -0.03, 0.07), HARMLESS, HARMLESS, [0.0], n=95)}


def test_held_out_disabling_reads_the_best_heads_the_harm_and_the_random_heads():
    reading = nb09.held_out_disabling(HELD, SEEDS, seed=0)
    assert reading.tries == 5 and reading.heads_chosen == 3  # 1-1 (three times), 2-3, 3-2
    assert (reading.selection_min, reading.selection_max) == (0.021, 0.042)
    assert (reading.evaluation_min, reading.evaluation_max) == (-0.01, 0.042)
    assert reading.including_zero == 4  # seed 1's interval lies above 0
    assert reading.containing_paper == 4  # the paper's +0.1 to +1.2 points; seed 1's interval starts at +0.5
    assert (reading.paper_low, reading.paper_high) == (pytest.approx(0.001), pytest.approx(0.012))
    assert reading.evaluation_sizes == (95, 96) and reading.evaluation_inputs == "95 or 96"
    assert reading.test_sizes == (190, 192) and reading.test_inputs == "190 or 192"
    assert reading.gained_lost == (("topic", "1-1", 3, 1), ("next_paragraph", "2-3", 3, 1), ("sentiment", "1-1", 3, 1),
                                   ("sentiment, seed 1", "3-2", 3, 1), ("sentiment, seed 2", "1-1", 3, 1))
    assert reading.gained_lost_text == ("1-1 3/1 (topic), 2-3 3/1 (next_paragraph), 1-1 3/1 (sentiment), "
                                        "3-2 3/1 (sentiment, seed 1), 1-1 3/1 (sentiment, seed 2)")
    assert reading.half_width == pytest.approx(0.05)  # of 0.04, 0.05, 0.06, 0.0375, 0.05
    assert [(h.task, h.label) for h in reading.harmful] == [("next_paragraph", "4-4"), ("next_paragraph", "layer 4"),
                                                            ("sentiment", "layer 2")]
    assert reading.harmful[0] == nb09.Harm("next_paragraph", "4-4", -0.146, -0.241, -0.045)
    assert reading.harm_text.startswith("disabling 4-4 on next_paragraph (-14.6, interval -24.1 to -4.5), "
                                        "disabling layer 4 on next_paragraph (")
    assert reading.seed_heads == 2  # seeds 0 and 2 both choose 1-1
    assert reading.pair_random == pytest.approx(-0.015)
    assert reading.other_random == (("topic", pytest.approx(0.01)), ("sentiment", pytest.approx(-0.005)))
    assert reading.costliest == "next_paragraph"


def test_held_out_disabling_with_no_harm_another_costliest_task_and_a_seed_outside_the_seeds():
    calm = {task: held(task, ("1-1", 0.02, 0.0, -0.04, 0.04), HARMLESS, HARMLESS, heads)
            for task, heads in (("topic", [-0.03]), ("next_paragraph", [0.0]), ("sentiment", [0.01]))}
    reading = nb09.held_out_disabling(calm, SEEDS, seed=5)
    assert reading.harmful == () and reading.harm_text == "nothing"
    assert reading.tries == 6  # every seed counts when `seed` is none of them
    assert reading.costliest == "topic" and reading.pair_random == 0.0


def ties(task: str, close: int, close_right: int, flips: int, close_flips: int, mean: float, far: float,
         margin: float = 0.1) -> NearTies:
    return NearTies(task, 96, 72, margin, close, close_right, flips, close_flips, 0, 0, mean, far)


def test_drift_reads_the_near_ties_share_of_the_flips_and_whether_the_sign_follows_them():
    reading = nb09.drift({"topic": ties("topic", 6, 1, 71, 62, 0.009, 0.001),  # mostly wrong: heads "help"
                          "next_paragraph": ties("next_paragraph", 13, 9, 453, 326, -0.018, -0.0007)})
    assert [t.task for t in reading.ties] == ["topic", "next_paragraph"] and reading.margin == 0.1
    assert reading.close_share_min == pytest.approx(326 / 453) and reading.far_largest == pytest.approx(0.001)
    assert reading.follows_ties and reading.wrong == (("topic", 5, 6), ("next_paragraph", 4, 13))
    assert reading.mean_changes == "+0.9 (topic), -1.8 (next_paragraph)"
    assert reading.close_counts == "6 on topic, 13 on next_paragraph"
    assert reading.close_flips == "62 of 71, 326 of 453"
    assert reading.wrong_counts == "5 of 6 wrong on topic, 4 of 13 wrong on next_paragraph"
    assert reading.far_changes == "+0.10, -0.07"
    against = nb09.drift({"topic": ties("topic", 6, 5, 71, 62, 0.009, 0.001)})  # mostly right, yet heads "help"
    assert not against.follows_ties
    with pytest.raises(ValueError, match="one margin"):
        nb09.drift({"topic": ties("topic", 6, 1, 71, 62, 0.009, 0.001),
                    "sentiment": ties("sentiment", 3, 3, 60, 42, -0.007, -0.001, margin=0.2)})
