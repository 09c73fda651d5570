"""Notebook 08's readings (`bertlook_utils.lab.readings.nb08`) on hand-built scores, classifier tables, pattern
shares and similarities whose answers are known by construction."""
from __future__ import annotations

import pandas as pd
import pytest

from bertlook_utils.analyses.finetune import Score, Stage
from bertlook_utils.analyses.patterns import KINDS
from bertlook_utils.core.intervals import wilson_interval
from bertlook_utils.lab.readings import nb08
from bertlook_utils.present import paper


# -- fine-tuning against the baselines --------------------------------------------------------------
def scores(rows: dict[str, tuple[float, float, float, float, float]]) -> pd.DataFrame:
    """`task_scores`-shaped: task -> accuracies (majority, untrained, frozen [CLS], frozen mean-pooled, fine-tuned)."""
    return pd.DataFrame(rows.values(), index=pd.Index(list(rows), name="task"), columns=list(Score))


def test_task_gains_in_points_per_task_in_the_scores_order():
    got = nb08.task_gains(scores({"b_task": (0.50, 0.45, 0.60, 0.70, 0.80),
                                  "a_task": (0.10, 0.12, 0.50, 0.40, 0.62)}))
    assert got.tasks == ("b_task", "a_task")
    assert got.over_untrained == pytest.approx((35.0, 50.0))
    assert got.mean_over_untrained == pytest.approx(42.5) and got.min_over_untrained == pytest.approx(35.0)
    assert got.over_mean == pytest.approx((10.0, 22.0)) and got.min_over_mean == pytest.approx(10.0)
    assert got.over_cls == pytest.approx((20.0, 12.0))
    assert got.mean_beats_cls == 1  # a_task's [CLS] head reads the frozen model better
    assert got.untrained_off_majority == pytest.approx(5.0)  # b_task: 5 below; a_task: 2 above


def test_task_gains_counts_a_tie_as_no_win_and_keeps_a_loss_negative():
    got = nb08.task_gains(scores({"t": (0.5, 0.5, 0.6, 0.6, 0.55)}))
    assert got.mean_beats_cls == 0
    assert got.min_over_mean == pytest.approx(-5.0) and got.untrained_off_majority == 0.0


# -- the classifiers against the hand labels ---------------------------------------------------------
def test_confused_pairs_ignores_order_and_agreement():
    counts = nb08.confused_pairs(["a", "b", "a", "c", "c"], ["b", "a", "a", "a", "c"])
    assert counts.to_dict() == {("a", "b"): 2, ("a", "c"): 1}
    assert nb08.confused_pairs(["a"], ["a"]).empty


def cv_table(learned_f1: dict[str, float]) -> pd.DataFrame:
    per_kind = {"F1 vertical": 0.9, "F1 diagonal": 0.7, "F1 block": 0.4}
    return pd.DataFrame({
        "rules": {"accuracy": 0.70, "macro-F1": 0.60, "macro-F1, five kinds": 0.65, **per_kind},
        "learned (boosted trees)": {"accuracy": 0.80, "macro-F1": 0.68, "macro-F1, five kinds": 0.72, **learned_f1},
        "CNN": {"accuracy": 0.75, "macro-F1": 0.55, "macro-F1, five kinds": 0.58, **per_kind, "F1 block": 0.2},
    }).T


TRUTH = ["v", "v", "d", "d", "d", "b", "b", "h", "v"]
BEST_GUESS = ["v", "d", "v", "vd", "vd", "vd", "h", "b", "v"]  # confusions: (d, v) 2, (d, vd) 2, (b, vd), (b, h) 2


def test_classifier_agreement_reads_the_best_by_macro_f1_and_its_confusions():
    predicted = {"rules": TRUTH, "learned (boosted trees)": BEST_GUESS, "CNN": TRUTH}
    got = nb08.classifier_agreement(cv_table({"F1 vertical": 0.88, "F1 diagonal": 0.75, "F1 block": 0.6}), TRUTH,
                                    predicted, first_look=["d", "b", "v"], second_look=["v", "h", "v"])
    assert got.best == "learned (boosted trees)"
    assert (got.accuracy, got.macro_f1, got.macro_f1_five) == pytest.approx((0.80, 0.68, 0.72))
    assert got.f1_vertical == pytest.approx(0.88) and got.f1_other_max == pytest.approx(0.75)
    assert (got.rules_macro_f1, got.rules_f1_block, got.cnn_macro_f1) == pytest.approx((0.60, 0.4, 0.55))
    assert got.max_macro_f1 == pytest.approx(0.68) and got.max_accuracy == pytest.approx(0.80)
    assert len(got.confused) == 3 and all(n == 2 for _, _, n in got.confused)
    assert {(a, b) for a, b, _ in got.confused} == {("d", "v"), ("d", "vd"), ("b", "h")}
    assert got.n_confused_wavered == 2  # the second look confused d/v and b/h, not d/vd


def test_classifier_agreement_when_vertical_is_not_the_easiest_and_nothing_wavered():
    predicted = {"rules": TRUTH, "learned (boosted trees)": BEST_GUESS, "CNN": TRUTH}
    got = nb08.classifier_agreement(cv_table({"F1 vertical": 0.5, "F1 diagonal": 0.75, "F1 block": 0.6}), TRUTH,
                                    predicted, first_look=["v"], second_look=["v"], top=1)
    assert got.f1_other_max > got.f1_vertical
    assert len(got.confused) == 1 and got.n_confused_wavered == 0


# -- the heterogeneous share -----------------------------------------------------------------------
def long_shares(values: dict[tuple[str, Stage], dict[str, tuple[float, float, float]]]) -> pd.DataFrame:
    """(task, model) -> kind -> (share, low, high); kinds not given have share 0 and band [0, 0]."""
    return pd.DataFrame([{"task": task, "model": model, "kind": kind, "share": s, "low": lo, "high": hi}
                         for (task, model), kinds in values.items()
                         for kind in KINDS for s, lo, hi in [kinds.get(kind, (0.0, 0.0, 0.0))]])


TOPIC_PRE, TOPIC_FT = ("topic", Stage.PRETRAINED), ("topic", Stage.FINE_TUNED)
RULES = long_shares({TOPIC_PRE: {"vertical": (0.8, 0.7, 0.9), "heterogeneous": (0.10, 0.08, 0.12),
                                 "broad": (0.02, 0.01, 0.03)},
                     TOPIC_FT: {"vertical": (0.7, 0.6, 0.8), "heterogeneous": (0.20, 0.15, 0.25),
                                "broad": (0.02, 0.01, 0.03)}})


def learned(tuned_low: float) -> pd.DataFrame:
    return long_shares({TOPIC_PRE: {"vertical": (0.7, 0.6, 0.8), "heterogeneous": (0.12, 0.10, 0.14),
                                    "broad": (0.03, 0.0, 0.05)},
                        TOPIC_FT: {"vertical": (0.5, 0.4, 0.6), "heterogeneous": (0.25, tuned_low, 0.30),
                                   "broad": (0.05, 0.0, 0.07)}})


def by_model() -> pd.DataFrame:
    """Random sample: pre-trained 1 heterogeneous + 1 broad of 10 maps, fine-tuned 4 + 0 of 10; two targeted
    heterogeneous maps that must not count."""
    rows = ([("random", Stage.PRETRAINED, kind) for kind in ["heterogeneous", "broad"] + ["vertical"] * 8]
            + [("random", Stage.FINE_TUNED, kind) for kind in ["heterogeneous"] * 4 + ["diagonal"] * 6]
            + [("targeted", Stage.PRETRAINED, "heterogeneous")] * 2)
    return pd.DataFrame(rows, columns=["sample", "model", "label"]).assign(task="topic")


def layer_shares(first: float, second: float) -> pd.DataFrame:
    """Two layers; heterogeneous + broad = `first` in layer 1 and `second` in layer 2, the rest vertical."""
    frame = pd.DataFrame(0.0, index=pd.Index([1, 2], name="layer"), columns=list(KINDS))
    frame["heterogeneous"], frame["broad"] = [first - 0.05, second - 0.05], [0.05, 0.05]
    frame["vertical"] = 1 - frame["heterogeneous"] - frame["broad"]
    return frame


def test_heterogeneous_share_reads_the_learned_model_labels_and_layers():
    per_layer = {TOPIC_PRE: layer_shares(0.4, 0.1), TOPIC_FT: layer_shares(0.7, 0.2)}
    got = nb08.heterogeneous_share({"rules": RULES, "learned": learned(0.16)}, by_model(), per_layer,
                                   ("rules", "learned"))
    assert got.classifier == "learned"
    assert got.unpatterned_min == pytest.approx(0.15) and got.unpatterned_max == pytest.approx(0.30)
    assert got.largest_kinds == ("vertical",)
    assert got.labels_min == pytest.approx(0.2) and got.labels_max == pytest.approx(0.4)  # broad counted
    assert got.labels_high_max == pytest.approx(wilson_interval(4, 10)[1])
    assert got.labels_tuned_low == pytest.approx(wilson_interval(4, 10)[0])
    assert got.labels_pretrained_high == pytest.approx(wilson_interval(2, 10)[1])
    assert got.layer_one_min == pytest.approx(0.4) and got.layer_one_max == pytest.approx(0.7)
    assert got.top_layers == (1,)
    assert got.band_gap == pytest.approx(0.02)  # learned: 0.16 - 0.14; rules: 0.15 - 0.12
    assert (got.paper_low, got.paper_high) == paper.DARK_SECRETS["heterogeneous_share"]


def test_heterogeneous_share_with_overlapping_bands_another_top_layer_and_rules_only():
    per_layer = {TOPIC_PRE: layer_shares(0.4, 0.1), TOPIC_FT: layer_shares(0.2, 0.3)}
    both = nb08.heterogeneous_share({"rules": RULES, "learned": learned(0.13)}, by_model(), per_layer,
                                    ("rules", "learned"))
    assert both.band_gap == pytest.approx(-0.01) and both.top_layers == (1, 2)
    rules = nb08.heterogeneous_share({"rules": RULES}, by_model(), per_layer, ("rules",))
    assert rules.classifier == "rules"
    assert rules.unpatterned_min == pytest.approx(0.12) and rules.unpatterned_max == pytest.approx(0.22)
    assert rules.band_gap == pytest.approx(0.03)


def test_heterogeneous_share_names_every_largest_kind():
    shares = long_shares({TOPIC_PRE: {"vertical": (0.6, 0.5, 0.7)}, TOPIC_FT: {"diagonal": (0.6, 0.5, 0.7)}})
    got = nb08.heterogeneous_share({"rules": shares}, by_model(), {TOPIC_PRE: layer_shares(0.4, 0.1)}, ("rules",))
    assert got.largest_kinds == ("diagonal", "vertical")
    assert got.unpatterned_max == 0.0


# -- which layers fine-tuning changes -------------------------------------------------------------
def similarity(**columns: list[float]) -> pd.DataFrame:
    return pd.DataFrame(columns, index=pd.Index(range(1, len(next(iter(columns.values()))) + 1), name="layer"))


def test_layer_change_when_the_last_two_layers_change_most_on_every_task():
    got = nb08.layer_change(similarity(a=[1.0, 0.99, 0.95, 0.90], b=[0.995, 0.985, 0.97, 0.96]))
    assert got.most_changed == (3, 4) and got.last_two == (3, 4)
    assert got.first_two_min == pytest.approx(0.985)


def test_layer_change_names_a_middle_layer_that_changes_most_on_one_task():
    got = nb08.layer_change(similarity(a=[1.0, 0.97, 0.95, 0.90], b=[1.0, 0.80, 0.97, 0.96]))
    assert got.most_changed == (2, 3, 4) and got.most_changed != got.last_two
    assert got.first_two_min == pytest.approx(0.80)


# -- the hand labels --------------------------------------------------------------------------------
def test_label_sample_counts_all_maps_and_the_random_ones():
    got = nb08.label_sample(by_model())
    assert (got.n_maps, got.n_random) == (22, 20)
