"""Notebook 08's readings (`bertlook_utils.lab.readings.nb08`) on hand-built scores, classifier tables, pattern
shares and similarities whose answers are known by construction."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bertlook_utils.analyses.finetune import Score, Stage
from bertlook_utils.analyses.patterns import KINDS
from bertlook_utils.core.intervals import wilson_interval
from bertlook_utils.data.tasks import Example, TaskData
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


def task(name: str, n_train: int, n_test: int) -> TaskData:
    return TaskData(name, ("a", "b"), tuple(Example("x", None, 0) for _ in range(n_train)),
                    tuple(Example("y", None, 1) for _ in range(n_test)))


def test_task_sizes_lists_each_distinct_split_size_once_ascending():
    got = nb08.task_sizes({"t": task("t", 48, 16), "u": task("u", 12, 16), "v": task("v", 48, 4)})
    assert got.n_tasks == 3 and got.n_train == (12, 48) and got.n_test == (4, 16)


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


def test_seed_spread_reads_the_range_of_macro_f1_and_the_kind_that_moves_most():
    by_seed = pd.DataFrame({"accuracy": [0.71, 0.73, 0.70], "macro-F1": [0.60, 0.54, 0.62],
                            "F1 vertical": [0.85, 0.86, 0.84], "F1 block": [0.49, 0.30, 0.45],
                            "F1 broad": [0.29, 0.20, float("nan")]},
                           index=["seed 0", "seed 1", "seed 2"])
    got = nb08.seed_spread(by_seed)
    assert got.n_seeds == 3 and (got.macro_f1_low, got.macro_f1_high) == pytest.approx((0.54, 0.62))
    assert got.accuracy_high == pytest.approx(0.73)
    assert got.widest_kind == "block" and got.widest_range == pytest.approx(0.19)
    with pytest.raises(ValueError, match="two seeds"):
        nb08.seed_spread(by_seed.iloc[:1])


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
    assert got.labels_tuned_high == pytest.approx(wilson_interval(4, 10)[1])
    assert got.labels_n == (10,)
    # the paper's lowest share, 0.32, is inside both groups' Wilson intervals (2 of 10 reach 0.51, 4 of 10 0.69)
    assert got.labels_reach_paper == (("topic", "fine-tuned"), ("topic", "pre-trained"))
    assert got.labels_reach == (f"The labels cannot exclude {100 * got.paper_low:.0f} %: their intervals reach it for "
                                "the fine-tuned topic model, the pre-trained topic model")
    assert got.labels_counts == "10"
    assert got.layer_one_min == pytest.approx(0.4) and got.layer_one_max == pytest.approx(0.7)
    assert got.top_layers == (1,)
    assert got.band_gap == pytest.approx(0.02)  # learned: 0.16 - 0.14; rules: 0.15 - 0.12
    assert (got.paper_low, got.paper_high) == paper.DARK_SECRETS["heterogeneous_share"]
    assert (got.paper_low_task, got.paper_high_task) == paper.DARK_SECRETS["heterogeneous_tasks"]


def test_heterogeneous_share_names_no_group_when_no_labels_interval_reaches_the_paper():
    """200 pre-trained maps with 10 heterogeneous (Wilson upper end 0.09) and 100 fine-tuned with 20 (0.29): 0.32 is
    out of both; the groups' sizes differ."""
    rows = ([(Stage.PRETRAINED, "heterogeneous")] * 10 + [(Stage.PRETRAINED, "vertical")] * 190
            + [(Stage.FINE_TUNED, "heterogeneous")] * 20 + [(Stage.FINE_TUNED, "vertical")] * 80)
    labels = pd.DataFrame(rows, columns=["model", "label"]).assign(task="topic", sample="random")
    got = nb08.heterogeneous_share({"rules": RULES}, labels, {TOPIC_PRE: layer_shares(0.4, 0.1)}, ("rules",))
    assert got.labels_reach_paper == () and got.labels_n == (100, 200)
    assert got.labels_reach == "No interval of the labels reaches it" and got.labels_counts == "100 or 200"
    assert got.labels_tuned_high == pytest.approx(wilson_interval(20, 100)[1]) and got.labels_tuned_high < got.paper_low


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


# -- the heterogeneous share over fine-tuning seeds and inputs --------------------------------------
def kinds_of(counted: list[int], maps: int = 4) -> np.ndarray:
    """[N inputs, 1 layer, `maps` heads]: input i has counted[i] maps of the paper's heterogeneous kind (alternately
    heterogeneous and broad), the rest vertical."""
    rows = [[("heterogeneous", "broad")[j % 2] if j < c else "vertical" for j in range(maps)] for c in counted]
    return np.array(rows, dtype=object)[:, None, :]


def test_share_change_counts_broad_as_heterogeneous_and_pairs_before_and_after():
    """Inputs differ (0 to 3 of 4 maps), but every input gains exactly one map with seed 0 and none with seed 1:
    paired over inputs, the resamples cannot move the change."""
    before = [0, 1, 2, 3] * 5
    got = nb08.share_change(kinds_of(before), {0: kinds_of([c + 1 for c in before]), 1: kinds_of(before)}, n_boot=200)
    assert got.seeds == (0, 1) and got.n_seeds == 2 and got.n_inputs == 20 and got.n_boot == 200
    assert got.pretrained == pytest.approx(1.5 / 4) and got.tuned == pytest.approx((2.5 / 4, 1.5 / 4))
    assert got.change == pytest.approx((0.25, 0.0))
    assert got.low == pytest.approx((0.25, 0.0)) and got.high == pytest.approx((0.25, 0.0))
    assert (got.mean_change, got.mean_low, got.mean_high) == pytest.approx((0.125, 0.125, 0.125))
    assert got.n_raised == 1 and got.n_lowered == 0  # an interval [0, 0] lies neither above nor below 0
    assert (got.smallest, got.largest) == pytest.approx((0.0, 0.25)) and got.sizes_differ
    assert got.seed_list == "0, 1" and got.tuned_percent == "62, 38"  # 62.5 rounds to even
    assert got.changes == "+25.0 [+25.0, +25.0], +0.0 [+0.0, +0.0]"
    assert got.verdict == ("The rise does not hold across seeds: 1 of 2 intervals lie above zero, 0 below; its size "
                           "depends on the run (some seeds' intervals do not overlap)")
    same = nb08.share_change(kinds_of(before), {0: kinds_of(before), 4: kinds_of(before)}, n_boot=200)
    assert not same.sizes_differ and same.n_seeds == 2
    raised = nb08.share_change(kinds_of(before), {0: kinds_of([c + 1 for c in before])}, n_boot=200)
    assert raised.verdict == "The rise holds across these seeds: every interval lies above zero"


def test_share_change_interval_is_the_bootstrap_of_a_mean_over_inputs():
    """400 inputs: half gain 2 of 4 maps (+0.5), half none: change 0.25, standard error 0.25 / 20 = 0.0125, so
    the 95 % interval is about 0.25 +- 0.0245. A second seed loses one map everywhere."""
    n = 400
    before = kinds_of([1] * n)
    got = nb08.share_change(before, {3: kinds_of([3, 1] * (n // 2)), 7: kinds_of([0] * n)}, n_boot=4000, seed=1)
    assert got.seeds == (3, 7) and got.change == pytest.approx((0.25, -0.25))
    assert got.low[0] == pytest.approx(0.2255, abs=0.006) and got.high[0] == pytest.approx(0.2745, abs=0.006)
    assert (got.low[1], got.high[1]) == pytest.approx((-0.25, -0.25))
    assert got.mean_change == pytest.approx(0.0) and got.mean_low < 0 < got.mean_high
    assert got.mean_high - got.mean_low == pytest.approx((got.high[0] - got.low[0]) / 2, rel=0.1)
    assert got.n_raised == 1 and got.n_lowered == 1 and got.sizes_differ
    again = nb08.share_change(before, {3: kinds_of([3, 1] * (n // 2)), 7: kinds_of([0] * n)}, n_boot=4000, seed=1)
    assert again == got  # seeded


def test_share_change_counts_only_the_kinds_asked_and_refuses_mismatched_maps():
    one = kinds_of([1, 1])  # one heterogeneous map per input
    got = nb08.share_change(one, {0: kinds_of([2, 2])}, kinds=("broad",), n_boot=50)
    assert (got.pretrained, *got.tuned, *got.change) == pytest.approx((0.0, 0.25, 0.25))
    assert got.smallest == got.largest == got.mean_change and not got.sizes_differ  # one seed
    with pytest.raises(ValueError, match="shape"):
        nb08.share_change(one, {0: kinds_of([1, 1, 1])})
    with pytest.raises(ValueError, match="at least one"):
        nb08.share_change(one, {})


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
