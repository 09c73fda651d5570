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


def test_twin_reads_the_movable_weight_and_why_effective_attention_drops_cls():
    values = np.zeros((4, 2))
    values[0, 0], values[1, 0], values[2, 1] = 0.1, 1.0, 1.0  # [CLS]'s value a tenth of token 1's; token 3's zero
    attn = np.eye(4)  # effective attention is then the projector itself
    twin_map = np.eye(4)
    twin_map[0] = [0.5, 0.5, 0, 0]  # half of row 0's weight on [CLS] moved: mean over rows 0.25 -> 0.125
    reading = nb10.twin(attn, twin_map, values)
    assert (reading.tokens, reading.head_size, reading.null_dimension) == (4, 2, 1)  # 3 non-zero rows, rank 2
    assert (reading.cls_weight, reading.twin_cls_weight, reading.movable) == pytest.approx((0.25, 0.125, 0.5))
    assert reading.largest_change == pytest.approx(0.5)
    assert reading.output_change == pytest.approx(0.45)  # row 0: 0.5 * 0.1 + 0.5 * 1.0 instead of 0.1
    assert reading.cls_value_ratio == pytest.approx(0.1)  # 0.1 against the median of 1, 1, 0
    assert reading.cls_leverage == pytest.approx(0.01 / 1.01) and reading.mean_leverage == pytest.approx(0.5)
    assert reading.effective_min == pytest.approx(0, abs=1e-12)
    assert (reading.effective_row_min, reading.effective_row_max) == pytest.approx((0, 1.1 / 1.01), abs=1e-12)


def syntax_change_frame(rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["relation", "change", "low", "high", "kept"])


def test_long_inputs_reads_the_lengths_the_null_dimension_and_the_changes():
    change = syntax_change_frame([("all", -0.026, -0.032, -0.020, True), ("dobj", 0.028, 0.0, 0.053, True),
                                  ("aux", -0.005, -0.04, 0.03, False)])
    tokens = np.array([10, 30, 32, 48, 50, 60, 100])
    reading = nb10.long_inputs(change, tokens, head_size=32, threshold=48)
    assert (reading.threshold, reading.head_size, reading.sentences, reading.long) == (48, 32, 7, 4)
    assert reading.pinned_share == pytest.approx(3 / 7)  # 10, 30, 32: at most d tokens
    assert reading.null_median == pytest.approx(23)  # of 16, 18, 28, 68
    assert reading.null_p90 == pytest.approx(28 + 0.7 * 40)
    assert (reading.relations, reading.kept) == (3, 2)
    assert (reading.change_min, reading.change_max, reading.largest_change) == pytest.approx((-0.026, 0.028, 0.028))
    assert reading.shifted == ("all",)  # dobj's interval reaches 0


# -- §3 rollout and flow -------------------------------------------------------------------------------------
def test_flow_cost_reads_the_limit_and_the_longest_input():
    timing = pd.DataFrame({"tokens": [8, 16, 64, 96], "seconds": [0.01, 0.03, 1.46, 5.93]})
    cost = nb10.flow_cost(timing, 64)
    assert (cost.at_limit, cost.longest, cost.at_longest) == (1.46, 96, 5.93)
    short = nb10.flow_cost(timing.iloc[:3], 64)  # fast mode: the limit is the longest input timed
    assert (short.at_limit, short.longest, short.at_longest) == (1.46, 64, 1.46)


def test_rollout_and_flow_on_a_uniform_then_two_cls_layers():
    n = 4
    attn = stack_heads([[uniform_map(n)] * 2, [column_map(n, [0])] * 2, [column_map(n, [0])] * 2])  # [3, 2, n, n]
    # residual first layer: row 0 = 0.5 * 1/4 + 0.5 on itself, 0.125 on every other token
    flowed = np.zeros((n, n))
    flowed[0] = [0.9, 0.125 + 0.3, 0.125 + 0.301, 0.2]
    flowed[1] = [1.0, 0.7, 0.6, 0.9]  # the word token's row
    reading = nb10.rollout_and_flow(attn, flowed, ["[CLS]", "a", "b", "[SEP]"], word=1)
    assert reading.offset == pytest.approx((0.3, 0.301))  # tokens 1 and 2: [CLS] and the last token left out
    assert reading.offset_mean == pytest.approx(0.3005) and reading.offset_spread == pytest.approx(0.001)
    # rollout on [CLS]: row 0 keeps 0.625; every other row 0.375 after layer 2, 0.5 * (0.625 + 0.375) after layer 3
    assert reading.rollout_cls == pytest.approx((0.625 + 3 * 0.5) / 4)
    assert reading.last_layer_cls == pytest.approx(1.0)
    # [CLS] keeps everything in layers 2 and 3: only layer 1 lets 1 - (0.5 + 0.125) out
    assert reading.outflow == pytest.approx((0.375, 0, 0)) and reading.outflow_above_first == pytest.approx(0)
    assert reading.offset_gap == pytest.approx(0.3005)
    assert (reading.cls_self_middle_min, reading.cls_self_middle_max, reading.cls_self_last) == pytest.approx((1, 1, 1))
    assert reading.word == "a" and reading.word_outflow_min == pytest.approx(0.375)  # layers 2-3: 0.5 to [CLS]
    assert (reading.word_flow_min, reading.word_flow_max) == pytest.approx((0.6, 0.7))
    assert (reading.word_flow_self, reading.word_flow_cls) == pytest.approx((0.7, 1.0))


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


UP, DOWN = [1.0, 2.0, 3.0, 4.0], [4.0, 3.0, 2.0, 1.0]


def explanation(probability: float, leave_one_out: list[float], n_layers: int) -> Explanation:
    """Four words whose leave-one-out ranks as given; in the last layer raw attention ranks them the same way,
    rollout the other way and flow the same way, on the [CLS] row and (as relevance against |gradient|) over the
    tokens; gradient x input ranks against zeroing, zeroing like leave-one-out."""
    words = [f"w{k}" for k in range(4)]
    order = np.argsort(np.argsort(leave_one_out)) + 1.0  # leave-one-out's ranks
    scores = pd.DataFrame({"word": words, "leave_one_out": leave_one_out, "flow": order, "grad_x_input": -order,
                           "zeroed": order})
    same, reverse = np.tile(order, (n_layers, 1)), np.tile(5 - order, (n_layers, 1))
    by_token = {"attention": np.tile(UP, (n_layers, 1)), "rollout": np.tile(DOWN, (n_layers, 1)), "flow": UP,
                "gradient": np.array(UP)}
    return Explanation(words, 1, probability, scores, {"attention": same, "rollout": reverse}, by_token)


def explained_inputs(n_layers: int) -> list[Explanation]:
    return [explanation(0.6, [0.1, -0.3, 0.0, 0.2], n_layers), explanation(0.9, [0.05, 0.02, 0.01, 0.0], n_layers),
            explanation(0.8, [0.2, 0.0, 0.1, 0.05], n_layers)]


def released(attention: list[float], rollout: float, flow: float) -> pd.DataFrame:
    """attention: the spearman per layer (interval ± 0.05); rollout, flow: the last layer's."""
    last = len(attention)
    rows = [("attention", layer + 1, rho, rho - 0.05, rho + 0.05, 3) for layer, rho in enumerate(attention)]
    rows += [("rollout", last, rollout, rollout - 0.05, rollout + 0.05, 3),
             ("flow", last, flow, flow - 0.1, flow + 0.1, 3)]
    return pd.DataFrame(rows, columns=["method", "layer", "spearman", "low", "high", "inputs"])


def test_attribution_test_reads_both_readings_the_paired_differences_and_the_gradient():
    table = correlations(attention=[(0.02, -0.05, 0.09), (0.15, 0.08, 0.21), (0.10, 0.03, 0.17)],
                         rollout=[(0.01, -0.1, 0.1), (0.05, 0.0, 0.1), (0.06, 0.0, 0.12)], flow=0.024,
                         grad_x_input=-0.14)
    reading = nb10.attribution_test(table, released([0.09, 0.14, 0.22], rollout=0.14, flow=0.16), explained_inputs(3))
    assert reading.best_layer == 2
    assert (reading.best_rho, reading.best_low, reading.best_high) == pytest.approx((0.15, 0.08, 0.21))
    assert reading.first_layer_rho == pytest.approx(0.02)
    assert (reading.last_attention, reading.last_attention_low, reading.last_attention_high) == pytest.approx(
        (0.10, 0.03, 0.17))
    assert (reading.last_rollout, reading.last_flow, reading.last_grad_x_input) == pytest.approx((0.06, 0.024, -0.14))
    assert (reading.last_grad_x_input_low, reading.last_grad_x_input_high) == pytest.approx((-0.24, -0.04))
    assert reading.flow_first_gap == pytest.approx(0.004)
    assert reading.inputs == 20  # raw attention's, not flow's 18
    assert reading.max_rho == pytest.approx(0.15)
    assert (reading.released_attention, reading.released_attention_low, reading.released_attention_high) == \
        pytest.approx((0.22, 0.17, 0.27))
    assert (reading.released_rollout, reading.released_flow, reading.released_best_layer) == pytest.approx(
        (0.14, 0.16, 3))
    # from the explanations: rollout ranks against leave-one-out (-1), attention with it (1), flow with it (1)
    assert reading.rollout_vs_attention == nb10.Estimate(-2, -2, -2, 3)
    assert reading.flow_vs_attention == nb10.Estimate(0, 0, 0, 3)
    assert reading.released_rollout_vs_attention == nb10.Estimate(-2, -2, -2, 3)
    assert reading.released_flow_vs_attention == nb10.Estimate(0, 0, 0, 3)
    assert reading.zeroed.value == pytest.approx(-1)
    assert reading.zeroed_loo.value == pytest.approx(1) and reading.zeroed_loo.inputs == 3
    assert reading.median_confidence == pytest.approx(0.8)
    assert reading.median_largest_change == pytest.approx(0.2)  # of 0.3 (|-0.3|), 0.05, 0.2


def test_attribution_test_when_layer_one_is_best_and_a_correlation_is_missing():
    table = correlations(attention=[(0.3, 0.2, 0.4), (0.1, 0.0, 0.2)], rollout=[(0.2, 0.1, 0.3), (np.nan,) * 3],
                         flow=0.5, grad_x_input=0.0)
    reading = nb10.attribution_test(table, released([0.3, 0.1], rollout=0.0, flow=0.0), explained_inputs(2))
    assert reading.best_layer == 1 and reading.first_layer_rho == reading.best_rho
    assert reading.released_best_layer == 1
    assert math.isnan(reading.last_rollout)
    assert math.isnan(reading.max_rho)  # a missing correlation is not "below 0.4"


# -- §5 head importance and pruning ------------------------------------------------------------------------
SHARES = (0.0, 0.1, 0.30000000000000004, 0.5, 0.7, 0.9, 1.0)  # as `pruning_curves` may ask for them


def curve(start: float, importance: dict[float, float], random: list[dict[float, float]],
          raw: dict[float, float] | None = None) -> pd.DataFrame:
    """A `pruning_curves(...).frame` over 10 heads: share 0 at `start` in every order, 0.0 where not given."""
    rows = []
    orders = [("importance", importance), ("raw importance", raw or importance)]
    for order, values in orders + [(f"random {r + 1}", v) for r, v in enumerate(random)]:
        rows += [(order, s, int(round(10 * s)), start if s == 0 else values.get(round(s, 1), 0.0)) for s in SHARES]
    return pd.DataFrame(rows, columns=["order", "share", "heads", "accuracy"])


def test_at_shares_reads_both_chosen_orders_and_the_random_orders_spread():
    frame = curve(0.7, {0.3: 0.72, 0.5: 0.75}, [{0.3: 0.6, 0.5: 0.4}, {0.3: 0.7, 0.5: 0.5}], raw={0.5: 0.6})
    table = nb10.at_shares(frame)
    assert list(table.index.round(6)) == [0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0]
    assert table.loc[0.0].tolist() == pytest.approx([0.7] * 5)
    assert table.loc[0.5].tolist() == pytest.approx([0.75, 0.6, 0.45, 0.405, 0.495])  # 5 % and 95 % of 0.4, 0.5
    assert nb10.at_shares(frame, (0.3,))["random mean"].tolist() == pytest.approx([0.65])
    assert "raw importance" not in nb10.at_shares(frame[frame["order"] != "raw importance"])


def areas(difference: float, low: float, raw_difference: float, raw_low: float, inputs: int = 96) -> pd.DataFrame:
    """An `importance.curve_areas` frame with a random area of 0.5."""
    return pd.DataFrame([("importance", 0.5 + difference, 0.5, difference, low, difference + 0.05, inputs),
                         ("raw importance", 0.5 + raw_difference, 0.5, raw_difference, raw_low, raw_difference + 0.05,
                          inputs)], columns=["order", "area", "random", "difference", "low", "high", "inputs"])


def removal(vertical: float, low: float, high: float, heads: int = 5, p: float = 0.02, drained: float = 0.7,
            sets: int = 50, full: int = 0) -> pd.DataFrame:
    return pd.DataFrame([("block", 3, 0.6, 0.6, 0.5, 0.7, 0.5, np.nan, 5, 0, 0.7),
                         ("vertical", heads, vertical, 0.6, low, high, p, drained, sets, full, 0.7)],
                        columns=["kind", "heads", "accuracy", "random", "random low", "random high", "p",
                                 "cls drained", "sets", "full layers", "none"])


def task(name: str, n_labels: int) -> TaskData:
    return TaskData(name, tuple(f"label {k}" for k in range(n_labels)), (), ())


TASKS = {"topic": task("topic", 12), "pair": task("pair", 2), "sentiment": task("sentiment", 2)}


def test_pruning_reads_half_the_heads_the_areas_and_the_vertical_heads_per_task():
    curves = {"topic": curve(0.74, {0.5: 0.75}, [{0.5: 0.4}, {0.5: 0.46}], raw={0.5: 0.7}),  # gains: no loss
              "pair": curve(0.72, {0.3: 0.64, 0.5: 0.65}, [{0.3: 0.66, 0.5: 0.55}]),  # below random at 0.3
              "sentiment": curve(0.74, {0.5: 0.70}, [{0.5: 0.60}, {0.5: 0.62}])}
    area = {"topic": areas(0.2, 0.15, 0.1, 0.05), "pair": areas(0.03, -0.01, 0.05, 0.01),
            "sentiment": areas(0.05, 0.02, 0.02, -0.02)}
    removed = {"topic": removal(0.20, 0.62, 0.71, 35, p=0.02, drained=0.73), "pair": removal(0.50, 0.54, 0.67),
               "sentiment": removal(0.48, 0.58, 0.69, 45, p=0.06, drained=0.60, sets=60, full=1)}
    reading = nb10.pruning(curves, area, removed, TASKS)
    assert [h.task for h in reading.half] == ["topic", "pair", "sentiment"]
    topic = reading.half[0]
    assert (topic.start, topic.importance, topic.raw, topic.random_mean) == pytest.approx((0.74, 0.75, 0.7, 0.43))
    assert (topic.random_low, topic.random_high) == pytest.approx((0.403, 0.457))
    assert reading.orders == 1  # pair has one random order
    assert reading.largest_loss == pytest.approx(0.07)  # pair: 0.72 -> 0.65
    assert reading.least_lead == pytest.approx(0.09)  # sentiment: 0.70 against 0.61
    assert [(b.task, round(b.share, 6), b.importance, b.random_mean) for b in reading.below_random] == [
        ("pair", 0.3, 0.64, 0.66)]
    assert (reading.areas[1].inputs, reading.areas[1].difference, reading.areas[1].raw_low) == (96, 0.03, 0.01)
    assert reading.least_area_low == -0.01 and reading.raw_least_area_low == -0.02
    assert reading.normalised_minus_raw == pytest.approx(-0.02)  # pair: raw ahead
    assert (reading.random_drop_task, reading.random_drop) == ("topic", pytest.approx(0.31))
    assert [(v.task, v.heads, v.sets, v.full_layers) for v in reading.vertical] == [
        ("topic", 35, 50, 0), ("pair", 5, 50, 0), ("sentiment", 45, 60, 1)]
    assert (reading.vertical[0].accuracy, reading.vertical[0].random_low, reading.vertical[0].random_high,
            reading.vertical[0].cls_drained) == (0.20, 0.62, 0.71, 0.73)
    assert reading.vertical_sets == 50 and reading.smallest_p == 0.02
    assert reading.removal_loss_min == pytest.approx(0.2)  # pair: 0.7 -> 0.5
    assert reading.drain_loss_min == pytest.approx(-0.03)  # topic gains: 0.7 -> 0.73
    assert reading.drain_loss_max == pytest.approx(0.1)  # sentiment: 0.7 -> 0.6
    assert (reading.two_class_min, reading.two_class_max) == (0.48, 0.50)  # topic's 12 labels left out
    assert reading.half_importance == "0.75 on topic, 0.65 on pair, 0.70 on sentiment"
    assert (reading.half_start, reading.half_raw) == ("0.74, 0.72, 0.74", "0.70, 0.65, 0.70")
    assert reading.half_random == "0.43 (0.40–0.46), 0.55 (0.55–0.55), 0.61 (0.60–0.62)"
    assert reading.area_leads == "+0.200 [+0.150, +0.250] on topic, +0.030 [-0.010, +0.080] on pair, " \
                                 "+0.050 [+0.020, +0.100] on sentiment"
    assert reading.raw_area_leads == "+0.100 [+0.050, +0.150], +0.050 [+0.010, +0.100], +0.020 [-0.020, +0.070]"
    assert reading.area_inputs == "96, 96, 96"
    assert reading.areas_against_raw == ("0.70 against 0.60 raw on topic, 0.53 against 0.55 raw on pair, "
                                         "0.55 against 0.52 raw on sentiment")
    assert reading.below_random_sentence == ("Single points can still fall below the random mean: pair with 30% "
                                             "removed scores 0.64 by importance against 0.66.")
    assert reading.vertical_heads == "35 on topic, 5 on pair, 45 on sentiment"
    assert reading.vertical_drops == "topic from 0.70 to 0.20, pair from 0.70 to 0.50, sentiment from 0.70 to 0.48"
    assert reading.vertical_random.startswith("0.60 (0.62–0.71, p = 0.02 over 50 sets) on topic, ")
    assert reading.full_layers_sentence.startswith("On sentiment (1 whole layer) the vertical heads fill every head")
    assert reading.cls_drained_text == ("0.73 on topic (nothing removed: 0.70), 0.70 on pair (nothing removed: 0.70), "
                                        "0.60 on sentiment (nothing removed: 0.70)")


def test_pruning_with_no_loss_and_no_two_class_task():
    curves = {"topic": curve(0.70, {0.5: 0.72}, [{0.5: 0.75}])}
    reading = nb10.pruning(curves, {"topic": areas(-0.02, -0.05, 0.0, -0.03)},
                           {"topic": removal(0.65, 0.6, 0.7)}, TASKS)
    assert reading.largest_loss == 0.0  # the gain is not a negative loss
    assert reading.least_lead == pytest.approx(-0.03)  # a random order does better
    assert [round(b.share, 6) for b in reading.below_random] == [0.5]  # the other shares tie at 0: not below
    assert math.isnan(reading.two_class_min) and math.isnan(reading.two_class_max)
    assert reading.full_layers_sentence == ""
    two = nb10.pruning({**curves, "sentiment": curves["topic"]},
                       {"topic": areas(0.1, 0.05, 0.0, -0.03), "sentiment": areas(0.1, 0.05, 0.0, -0.03)},
                       {"topic": removal(0.65, 0.6, 0.7, full=2), "sentiment": removal(0.65, 0.6, 0.7, full=1)}, TASKS)
    assert two.full_layers_sentence.startswith("On topic (2 whole layers) and sentiment (1 whole layer) the")
    ahead = nb10.pruning({"topic": curve(0.70, {0.5: 0.8}, [{0.5: 0.6}])}, {"topic": areas(0.1, 0.05, 0.0, -0.03)},
                         {"topic": removal(0.65, 0.6, 0.7)}, TASKS)
    assert ahead.below_random == () and ahead.below_random_sentence == (
        "No share between none and all scores below the random mean.")
