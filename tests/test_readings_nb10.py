"""Notebook 10's readings (`bertlook_utils.lab.readings.nb10`) on hand-built results whose answers are known by
construction: norm shares per layer and head, raw and effective sinks and syntax heads, flow's timing, one input's
maps, attribution correlations, and pruning and pattern-removal frames."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from bertlook_utils.analyses.attribution import Explanation
from bertlook_utils.analyses.gradients import CATEGORIES
from bertlook_utils.analyses.norms import MIXING, Mixing, NormResult
from bertlook_utils.data.tasks import TaskData
from bertlook_utils.lab.readings import nb10
from builders import column_map, stack_heads, uniform_map


# -- §1 attention by weight and by norm ------------------------------------------------------------------
def per_category(rows: list[dict[str, float]]) -> np.ndarray:
    """One [4] share vector per row, in `CATEGORIES` order (categories not given: 0)."""
    return np.array([[row.get(c, 0.0) for c in CATEGORIES] for row in rows])


def norm_result(layer_weight, layer_norm, head_weight, head_norm, mixing: dict[str, list[float]]) -> NormResult:
    """Two inputs whose means are the given per-layer (and per-head [L, H]) shares; each input's mixing ratio is the
    given value -/+ 0.01, so its mean is the value."""
    def twice(shares: np.ndarray) -> np.ndarray:  # both inputs alike
        return np.stack([shares, shares])

    def head_share(sep) -> np.ndarray:  # [L, H] -> [L, H, 4]: on [SEP] or on other tokens
        sep = np.array(sep, dtype=float)
        return np.stack([sep if c == "sep" else 1 - sep if c == "other" else 0 * sep for c in CATEGORIES], -1)

    ratios = np.stack([np.array(mixing.get(m, [0.5] * len(layer_weight))) for m in MIXING], -1)  # [L, 4]
    return NormResult({"layer_weight": twice(per_category(layer_weight)), "layer_norm": twice(per_category(layer_norm)),
                       "layer_context": twice(per_category(layer_norm)), "weight": twice(head_share(head_weight)),
                       "norm": twice(head_share(head_norm)), "mixing": np.stack([ratios - 0.01, ratios + 0.01])})


def test_weight_and_norm_reads_the_middle_layers_the_sink_head_and_the_mixing_ratios():
    result = norm_result(
        layer_weight=[{"cls": 0.05, "other": 0.95}, {"cls": 0.4, "other": 0.6}, {"cls": 0.3, "other": 0.7},
                      {"cls": 0.1, "other": 0.9}],
        layer_norm=[{"cls": 0.01, "other": 0.99}, {"cls": 0.02, "other": 0.9, "sep": 0.08},
                    {"cls": 0.05, "other": 0.8, "punct": 0.15}, {"cls": 0.6, "other": 0.4}],  # layer 4: [CLS] first
        head_weight=[[0.1, 0.2], [0.3, 0.4], [0.2, 0.9], [0.5, 0.1]], head_norm=[[0.1] * 2, [0.1] * 2, [0.1, 0.25],
                                                                                [0.1] * 2],
        mixing={Mixing.WEIGHT: [0.95, 0.97, 0.99, 0.96], Mixing.LAYERNORM: [0.2, 0.3, 0.25, 0.22]})
    reading = nb10.weight_and_norm(result)
    assert reading.middle == (2, 3)  # the first and the last layer left out
    assert (reading.cls_weight_min, reading.cls_weight_max) == pytest.approx((0.3, 0.4))
    assert (reading.cls_norm_min, reading.cls_norm_max) == pytest.approx((0.02, 0.05))
    assert reading.cls_shrink_min == pytest.approx(6)  # layer 3: 0.3 / 0.05; layer 2: 0.4 / 0.02 = 20
    assert (reading.other_norm_min, reading.other_norm_max) == pytest.approx((0.8, 0.9))
    assert reading.norm_not_other == (4,)
    assert reading.sink_head == "3-2"
    assert (reading.sink_weight, reading.sink_norm) == pytest.approx((0.9, 0.25))
    assert (reading.mixing_min, reading.mixing_max) == pytest.approx((0.2, 0.3))
    assert (reading.mixing_weight_min, reading.mixing_weight_max) == pytest.approx((0.95, 0.99))


def test_weight_and_norm_with_ordinary_tokens_first_everywhere_and_one_middle_layer():
    result = norm_result(
        layer_weight=[{"cls": 0.1, "other": 0.9}, {"cls": 0.5, "other": 0.5}, {"cls": 0.2, "other": 0.8}],
        layer_norm=[{"cls": 0.1, "other": 0.9}, {"cls": 0.25, "other": 0.75}, {"cls": 0.1, "other": 0.9}],
        head_weight=[[0.8, 0.1], [0.2, 0.3], [0.1, 0.1]], head_norm=[[0.4, 0.1], [0.1, 0.1], [0.1, 0.1]],
        mixing={})
    reading = nb10.weight_and_norm(result)
    assert reading.middle == (2,) and reading.norm_not_other == ()
    assert reading.cls_shrink_min == pytest.approx(2)  # not "5 times less"
    assert reading.sink_head == "1-1"


# -- §2 effective attention ---------------------------------------------------------------------------------
def best_heads(rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["relation", "layer", "head", "direction", "accuracy"]).set_index("relation")


def side_by_side(raw_rows, effective_rows) -> pd.DataFrame:
    return pd.concat({"raw": best_heads(raw_rows), "effective": best_heads(effective_rows)}, axis=1)


SINKS = pd.concat({"raw": pd.DataFrame({"cls": [0.05, 0.38, 0.2], "sep": [0.1, 0.01, 0.02]}, index=[1, 2, 3]),
                   "effective": pd.DataFrame({"cls": [0.001, 0.003, 0.002], "sep": [0.1, 0.01, 0.02]},
                                             index=[1, 2, 3])}, axis=1)


def test_effective_attention_keeps_a_head_only_when_layer_head_and_direction_agree():
    side = side_by_side([("all", 2, 3, "dependent", 0.40), ("nsubj", 4, 1, "head", 0.60), ("det", 3, 5, "head", 0.90)],
                        [("all", 2, 3, "dependent", 0.41), ("nsubj", 4, 1, "dependent", 0.56),  # direction differs
                         ("det", 5, 5, "head", 0.92)])  # layer differs, head number the same
    reading = nb10.effective_attention(SINKS, side)
    assert reading.cls_raw_max == pytest.approx(0.38) and reading.cls_effective_max == pytest.approx(0.003)
    assert (reading.kept, reading.relations) == (1, 3)
    assert reading.accuracy_change_max == pytest.approx(0.04)  # nsubj falls by 4 points


def test_effective_attention_when_every_relation_keeps_its_head():
    rows = [("all", 2, 3, "dependent", 0.5), ("det", 3, 5, "head", 0.9)]
    reading = nb10.effective_attention(SINKS, side_by_side(rows, rows))
    assert (reading.kept, reading.relations) == (2, 2) and reading.accuracy_change_max == 0


# -- §3 rollout and flow -------------------------------------------------------------------------------------
def test_flow_cost_reads_the_limit_and_the_longest_input():
    timing = pd.DataFrame({"tokens": [8, 16, 64, 96], "seconds": [0.01, 0.03, 1.46, 5.93]})
    cost = nb10.flow_cost(timing, 64)
    assert (cost.at_limit, cost.longest, cost.at_longest) == (1.46, 96, 5.93)
    short = nb10.flow_cost(timing.iloc[:3], 64)  # fast mode: the limit is the longest input timed
    assert (short.at_limit, short.longest, short.at_longest) == (1.46, 64, 1.46)


def test_rollout_and_flow_on_a_uniform_then_a_cls_layer():
    n = 4
    attn = stack_heads([[uniform_map(n)] * 2, [column_map(n, [0])] * 2])  # [2 layers, 2 heads, n, n]
    # residual first layer: row 0 = 0.5 * 1/4 + 0.5 on itself, 0.125 on every other token
    flowed = np.zeros((n, n))
    flowed[0] = [0.9, 0.125 + 0.3, 0.125 + 0.301, 0.2]
    reading = nb10.rollout_and_flow(attn, flowed)
    assert reading.offset == pytest.approx((0.3, 0.301))  # tokens 1 and 2: [CLS] and the last token left out
    assert reading.offset_mean == pytest.approx(0.3005) and reading.offset_spread == pytest.approx(0.001)
    # rollout on [CLS]: row 0 keeps layer 1's 0.625; every other row 0.5 * 0.625 + 0.5 * 0.125
    assert reading.rollout_cls == pytest.approx((0.625 + 3 * 0.375) / 4)
    assert reading.last_layer_cls == pytest.approx(1.0)


# -- §4 does attention explain? -------------------------------------------------------------------------------
def correlations(attention, rollout, flow, grad_x_input, inputs=20) -> pd.DataFrame:
    """attention, rollout: per layer (spearman, low, high); flow, grad_x_input: the last layer's spearman."""
    rows = [(method, layer + 1, rho, low, high, inputs) for method, values in (("attention", attention),
                                                                                 ("rollout", rollout))
            for layer, (rho, low, high) in enumerate(values)]
    last = len(attention)
    rows += [("flow", last, flow, flow - 0.1, flow + 0.1, inputs - 2),
             ("grad_x_input", last, grad_x_input, grad_x_input - 0.1, grad_x_input + 0.1, inputs)]
    return pd.DataFrame(rows, columns=["method", "layer", "spearman", "low", "high", "inputs"])


def explanation(probability: float, leave_one_out: list[float]) -> Explanation:
    words = [f"w{k}" for k in range(len(leave_one_out))]
    return Explanation(words, 1, probability, pd.DataFrame({"word": words, "leave_one_out": leave_one_out}), {})


EXPLAINED = [explanation(0.6, [0.1, -0.3]), explanation(0.9, [0.05, 0.02]), explanation(0.8, [0.2, 0.0])]


def test_attribution_test_reads_the_best_layer_the_last_layer_and_the_confidence():
    table = correlations(attention=[(0.02, -0.05, 0.09), (0.15, 0.08, 0.21), (0.10, 0.03, 0.17)],
                         rollout=[(0.01, -0.1, 0.1), (0.05, 0.0, 0.1), (0.06, 0.0, 0.12)], flow=0.024,
                         grad_x_input=-0.14)
    reading = nb10.attribution_test(table, EXPLAINED)
    assert reading.best_layer == 2
    assert (reading.best_rho, reading.best_low, reading.best_high) == pytest.approx((0.15, 0.08, 0.21))
    assert reading.first_layer_rho == pytest.approx(0.02)
    assert (reading.last_attention, reading.last_attention_low, reading.last_attention_high) == pytest.approx(
        (0.10, 0.03, 0.17))
    assert (reading.last_rollout, reading.last_flow, reading.last_grad_x_input) == pytest.approx((0.06, 0.024, -0.14))
    assert reading.flow_first_gap == pytest.approx(0.004)
    assert reading.inputs == 20  # raw attention's, not flow's 18
    assert reading.max_rho == pytest.approx(0.15)
    assert reading.median_confidence == pytest.approx(0.8)
    assert reading.median_largest_change == pytest.approx(0.2)  # of 0.3 (|-0.3|), 0.05, 0.2


def test_attribution_test_when_layer_one_is_best_and_a_correlation_is_missing():
    table = correlations(attention=[(0.3, 0.2, 0.4), (0.1, 0.0, 0.2)], rollout=[(0.2, 0.1, 0.3), (np.nan,) * 3],
                         flow=0.5, grad_x_input=0.0)
    reading = nb10.attribution_test(table, EXPLAINED)
    assert reading.best_layer == 1 and reading.first_layer_rho == reading.best_rho
    assert math.isnan(reading.last_rollout)
    assert math.isnan(reading.max_rho)  # a missing correlation is not "below 0.4"


# -- §5 head importance and pruning ------------------------------------------------------------------------
def curve(start: float, importance: dict[float, float], random: list[dict[float, float]]) -> pd.DataFrame:
    """A `pruning_curves` frame over 10 heads: share 0 at `start` in every order."""
    shares = np.linspace(0, 1, 11)  # 0.30000000000000004 and the like, as `pruning_curves` asks for them
    rows = []
    for order, values in [("importance", importance)] + [(f"random {r + 1}", v) for r, v in enumerate(random)]:
        rows += [(order, s, int(round(10 * s)), start if s == 0 else values.get(round(s, 1), 0.0)) for s in shares]
    return pd.DataFrame(rows, columns=["order", "share", "heads", "accuracy"])


def test_at_shares_reads_the_chosen_order_and_the_random_orders_spread():
    frame = curve(0.7, {0.3: 0.72, 0.5: 0.75}, [{0.3: 0.6, 0.5: 0.4}, {0.3: 0.7, 0.5: 0.5}])
    table = nb10.at_shares(frame)
    assert list(table.index.round(6)) == [0.0, 0.3, 0.5, 0.7, 0.9]
    assert table.loc[0.0].tolist() == pytest.approx([0.7] * 4)
    assert table.iloc[2].tolist() == pytest.approx([0.75, 0.45, 0.4, 0.5])
    assert nb10.at_shares(frame, (0.3,))["random high"].tolist() == pytest.approx([0.7])


def removal(vertical: float, low: float, high: float, heads: int = 5) -> pd.DataFrame:
    return pd.DataFrame([("block", 3, 0.6, 0.6, 0.5, 0.7, 0.7), ("vertical", heads, vertical, 0.6, low, high, 0.7)],
                        columns=["kind", "heads", "accuracy", "random", "random low", "random high", "none"])


def task(name: str, n_labels: int) -> TaskData:
    return TaskData(name, tuple(f"label {k}" for k in range(n_labels)), (), ())


TASKS = {"topic": task("topic", 12), "pair": task("pair", 2), "sentiment": task("sentiment", 2)}


def test_pruning_reads_half_the_heads_and_the_vertical_heads_per_task():
    curves = {"topic": curve(0.74, {0.5: 0.75}, [{0.5: 0.4}, {0.5: 0.46}]),  # gains: no loss
              "pair": curve(0.72, {0.5: 0.65}, [{0.5: 0.55}]),
              "sentiment": curve(0.74, {0.5: 0.70}, [{0.5: 0.60}, {0.5: 0.62}])}
    removed = {"topic": removal(0.20, 0.62, 0.71, 35), "pair": removal(0.50, 0.54, 0.67),
               "sentiment": removal(0.48, 0.58, 0.69, 45)}
    reading = nb10.pruning(curves, removed, TASKS)
    assert [h.task for h in reading.half] == ["topic", "pair", "sentiment"]
    topic = reading.half[0]
    assert (topic.start, topic.importance, topic.random_mean) == pytest.approx((0.74, 0.75, 0.43))
    assert reading.largest_loss == pytest.approx(0.07)  # pair: 0.72 -> 0.65
    assert reading.least_lead == pytest.approx(0.09)  # sentiment: 0.70 against 0.61
    assert [(v.task, v.heads) for v in reading.vertical] == [("topic", 35), ("pair", 5), ("sentiment", 45)]
    assert (reading.vertical[0].accuracy, reading.vertical[0].random_low, reading.vertical[0].random_high) == (
        0.20, 0.62, 0.71)
    assert reading.vertical_excess == pytest.approx(-0.04)  # pair: 0.50 against 0.54, the closest
    assert (reading.two_class_min, reading.two_class_max) == (0.48, 0.50)  # topic's 12 labels left out


def test_pruning_with_no_loss_a_random_order_ahead_and_no_two_class_task():
    curves = {"topic": curve(0.70, {0.5: 0.72}, [{0.5: 0.75}])}
    reading = nb10.pruning(curves, {"topic": removal(0.65, 0.6, 0.7)}, TASKS)
    assert reading.largest_loss == 0.0  # the gain is not a negative loss
    assert reading.least_lead == pytest.approx(-0.03)  # a random order does better
    assert reading.vertical_excess == pytest.approx(0.05)  # less harm than the worst random set
    assert math.isnan(reading.two_class_min) and math.isnan(reading.two_class_max)
