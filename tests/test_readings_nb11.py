"""Notebook 11's readings (`bertlook_utils.lab.readings.nb11`) on hand-built results whose answers are known by
construction: sink profiles, per-head tables, massive activations, interventions, LayerNorm outliers, position and
register frames, and toy runs."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from bertlook_utils.analyses.sinks.heads import SinkHeads
from bertlook_utils.analyses.sinks.massive import Intervention, LayerNormOutliers, MassiveActivations
from bertlook_utils.lab.readings import nb11


# -- §1 the sink metric ------------------------------------------------------------------------------------
def profile_table(cls_rates, cls_scores, sep_rates=None, other_rate=0.0) -> pd.DataFrame:
    rows = []
    for layer, (rate, score) in enumerate(zip(cls_rates, cls_scores), start=1):
        rows.append((layer, "cls", rate, score))
        for k, sep in enumerate(sep_rates or [], start=1):
            rows.append((layer, f"sep{k}", sep[layer - 1], 0.01 * k))
        rows.append((layer, "punct", 0.0, 0.005))
        rows.append((layer, "other", other_rate, 0.004))
    return pd.DataFrame(rows, columns=["layer", "category", "sink_rate", "sink_score"])


def test_profile_reads_cls_by_layer_the_other_kinds_and_the_curve():
    table = profile_table([0.0, 0.5, 0.75, 0.25], [0.03, 0.3, 0.4, 0.1],
                          sep_rates=[[0, 0.1, 0, 0], [0, 0, 0.2, 0]], other_rate=0.01)
    curve = pd.DataFrame({"eps": [0.1, 0.3, 0.5, 0.7, 0.9], "sink_rate": [0.8, 0.5, 0.1, 0.0, 0.0]})
    reading = nb11.profile(table, curve, eps=0.3)
    assert reading.layers == 4 and reading.middle == (2, 3)
    assert reading.cls_rates == pytest.approx((0.0, 0.5, 0.75, 0.25))
    assert reading.cls_rates_text == "0.00, 0.50, 0.75, 0.25"
    assert (reading.cls_rate_max, reading.cls_rate_max_layer) == (0.75, 3)
    assert reading.cls_rate_middle_min == 0.5
    assert (reading.cls_rate_first, reading.cls_rate_last) == (0.0, 0.25)
    assert (reading.cls_score_middle_min, reading.cls_score_middle_max) == pytest.approx((0.3, 0.4))
    assert reading.sep_rate_max == 0.2 and reading.sep_score_max == pytest.approx(0.02)  # the second separator
    assert (reading.punct_rate_max, reading.other_rate_max) == (0.0, 0.01)
    assert reading.curve_at_eps == 0.5
    assert (reading.curve_smallest_eps, reading.curve_at_smallest) == (0.1, 0.8)
    assert reading.eps_zero == 0.7


def test_profile_without_separators_a_curve_that_never_reaches_zero_and_eps_off_the_grid():
    table = profile_table([0.1, 0.9, 0.2], [0.05, 0.5, 0.1])
    curve = pd.DataFrame({"eps": [0.5, 0.2], "sink_rate": [0.3, 0.6]})  # unsorted on purpose
    reading = nb11.profile(table, curve, eps=0.3)
    assert reading.sep_rate_max == 0.0 and reading.sep_score_max == 0.0
    assert math.isnan(reading.eps_zero) and math.isnan(reading.curve_at_eps)
    assert (reading.curve_smallest_eps, reading.curve_at_smallest) == (0.2, 0.6)


# -- §2 the key-bias reading -------------------------------------------------------------------------------
def sink_heads(mass, **columns) -> SinkHeads:
    """Two inputs alike, one layer: per head the given sink mass and columns (lists over heads)."""
    def twice(values) -> np.ndarray:
        return np.stack([np.array([values], dtype=float)] * 2)  # [2, 1, H]

    values = {"sink_mass": twice(mass)}
    values.update({name: twice(v) for name, v in columns.items()})
    return SinkHeads(values)


def test_key_bias_reads_the_correlations_and_the_sink_heads_medians():
    heads = sink_heads(
        [0.1, 0.2, 0.4, 0.6, 0.8],
        margin=[1.0, 2.0, 3.0, 4.0, 5.0],  # increasing with the mass: rho 1
        margin_direction=[1.0, 2.0, 4.0, 6.0, 8.0],
        margin_length=[0.0, 0.0, -1.0, -2.0, -3.0],
        key_ratio=[1.5, 1.4, 0.8, 0.7, 1.2],  # the sink heads (the last three): two of three shorter
        cos_sink=[0.0, 0.1, 0.4, 0.5, 0.6], cos_other=[0.0, 0.0, -0.2, -0.1, -0.3])
    reading = nb11.key_bias(heads, eps=0.3, n_boot=50, seed=0)
    assert (reading.heads, reading.sink_heads) == (5, 3)
    assert reading.rho_margin == pytest.approx(1.0) and reading.rho_direction == pytest.approx(1.0)
    assert reading.rho_margin_low == pytest.approx(1.0) and reading.rho_margin_high == pytest.approx(1.0)
    assert reading.rho_key_ratio == pytest.approx(-0.7)  # ranks 5 4 2 1 3 against 1..5: 1 - 6 * 34 / 120
    assert reading.key_ratio_median == 0.8 and reading.shorter_share == pytest.approx(2 / 3)
    assert (reading.cos_sink_median, reading.cos_other_median) == (0.5, -0.2)
    assert (reading.direction_median, reading.length_median) == (6.0, -2.0)
    assert reading.direction_share_median == pytest.approx(1.5)  # 4/3, 6/4, 8/5


def test_key_bias_with_no_sink_head_gives_nan_medians():
    heads = sink_heads([0.1, 0.2, 0.25], margin=[1, 2, 3], margin_direction=[1, 2, 3], margin_length=[0, 0, 0],
                       key_ratio=[1.0, 1.1, 1.2], cos_sink=[0, 0, 0], cos_other=[0, 0, 0])
    reading = nb11.key_bias(heads, eps=0.3, n_boot=20)
    assert reading.sink_heads == 0
    assert math.isnan(reading.key_ratio_median) and math.isnan(reading.shorter_share)


# -- §3 massive activations --------------------------------------------------------------------------------
def massive_result() -> MassiveActivations:
    """Two inputs, hidden states 0-2; [CLS] 99 carries the largest value everywhere but in state 0 for input 1."""
    maximum = np.array([[6.0, 10.0, 8.0], [6.0, 12.0, 8.0]])
    median = np.array([[0.3, 0.2, 0.4], [0.3, 0.2, 0.4]])
    top = []
    for layer in range(3):
        for i in range(2):
            kind, dim = ("punct", 63) if (layer, i) == (0, 1) else ("cls", 99)
            top.append((layer, i, 1, 0, "[CLS]", kind, dim, maximum[i, layer], maximum[i, layer],
                        maximum[i, layer] / median[i, layer]))
    frame = pd.DataFrame(top, columns=["layer", "input", "rank", "position", "token", "kind", "dimension", "value",
                                       "magnitude", "ratio"])
    zero = np.zeros((2, 3))
    return MassiveActivations(maximum, median, zero, zero, frame)


def test_massive_reads_the_ratio_the_carrier_and_the_thresholds():
    reading = nb11.massive(massive_result())
    assert reading.states == 3
    assert reading.ratio_max == pytest.approx(55.0) and reading.ratio_max_state == 1  # (50 + 60) / 2
    assert reading.ratio_max_low < 55 < reading.ratio_max_high
    assert reading.ratio_min == pytest.approx(20.0)
    assert reading.largest == pytest.approx(11.0)
    assert reading.above_absolute == 0 and reading.massive == 0
    assert (reading.absolute, reading.relative) == (100.0, 1000.0)
    # state 0 is a tie (one input each): Counter keeps the first seen, [CLS] 99; it leads in all three states
    assert (reading.top_kind, reading.top_dimension, reading.top_states) == ("cls", 99, 3)
    assert reading.top_share_min == 0.5
    assert reading.appearance == 0  # half of the inputs already in state 0


def test_sites_read_the_sum_the_feed_forward_part_and_the_cap_at_the_largest_state():
    """States 0-2 before the LayerNorm; the feed-forward output writes 180 of the 200 at [CLS] 99 in state 1."""
    def result(maximum, site, first_state=0, kinds=None, massive_counts=None):
        maximum = np.array(maximum, dtype=float)
        states = range(first_state, first_state + maximum.shape[1])
        top = [(state, i, 1, 0, "[CLS]", *(kinds or {}).get(state, ("cls", 99)), maximum[i, c], maximum[i, c], 100.0)
               for c, state in enumerate(states) for i in range(2)]
        frame = pd.DataFrame(top, columns=["layer", "input", "rank", "position", "token", "kind", "dimension",
                                           "value", "magnitude", "ratio"])
        counts = np.array(massive_counts, dtype=float) if massive_counts is not None else np.zeros_like(maximum)
        return MassiveActivations(maximum, np.full_like(maximum, 0.2), (maximum > 100).astype(float), counts, frame,
                                  site, first_state)

    pre = result([[3.0, 200.0, 50.0], [3.0, 200.0, 70.0]], "pre_norm", kinds={2: ("other", 223)})
    ffn = result([[180.0, 40.0], [180.0, 40.0]], "ffn", 1, massive_counts=[[1, 0], [0, 0]])
    out = result([[6.0, 8.0, 9.0], [6.0, 8.0, 9.0]], "output")
    reading = nb11.sites(pre, ffn, out, [18.0, 15.0, 16.0])
    assert (reading.state, reading.kind, reading.dimension) == (1, "cls", 99)
    assert reading.value == pytest.approx(200.0) and reading.ratio == pytest.approx(1000.0)
    assert reading.above == 1.0 and reading.both == 0.0
    assert reading.ffn_value == pytest.approx(180.0) and reading.ffn_both == 0.5
    assert reading.ffn_share == pytest.approx(0.9)
    assert (reading.after, reading.cap, reading.after_largest, reading.cap_min) == (8.0, 15.0, 9.0, 15.0)
    assert reading.carried == (0, 1) and (reading.last_kind, reading.last_dimension) == ("other", 223)
    with pytest.raises(ValueError, match="feed-forward"):
        nb11.sites(result([[300.0, 2.0], [300.0, 2.0]], "pre_norm"), ffn, out, [18.0, 15.0])


def intervention(rows, reference=0.5, details=None, edit="zero") -> Intervention:
    """rows: (targets, edit, draw, [sink per input], [distance per input])."""
    flat = [(t, e, d, i, s, p) for t, e, d, sinks, dists in rows for i, (s, p) in enumerate(zip(sinks, dists))]
    frame = pd.DataFrame(flat, columns=["targets", "edit", "draw", "input", "sink_mass", "pooled_distance"])
    details = details if details is not None else pd.DataFrame(
        columns=["targets", "draw", "input", "position", "token", "kind", "dimension", "value", "mean"])
    return Intervention(frame, reference, (2, 3), details)


def test_edited_reads_the_edit_its_control_and_whether_they_are_apart():
    result = intervention([
        ("none", "none", -1, [0.30, 0.32, 0.34], [0, 0, 0]),
        ("massive", "zero", -1, [0.10, 0.12, 0.14], [0.2, 0.25, 0.3]),
        ("massive", "mean", -1, [0.29, 0.31, 0.33], [0.01, 0.02, 0.03]),
        ("random", "zero", 0, [0.30, 0.32, 0.34], [0.0, 0.01, 0.02]),
        ("random", "zero", 1, [0.30, 0.32, 0.34], [0.02, 0.01, 0.0]),
        ("random", "mean", 0, [0.30, 0.32, 0.34], [0.0, 0.0, 0.0]),
    ])
    zero = nb11.edited(result, "zero")
    assert (zero.unedited, zero.sink, zero.random_sink) == pytest.approx((0.32, 0.12, 0.32))
    assert zero.drop == pytest.approx(0.2) and zero.random_drop == pytest.approx(0.0)
    assert zero.draws == 2 and zero.apart
    assert zero.distance == pytest.approx(0.25 / 0.5) and zero.random_distance == pytest.approx(0.01 / 0.5)
    assert zero.reference == 0.5 and zero.sink_low < 0.12 < zero.sink_high
    mean = nb11.edited(result, "mean")
    assert mean.sink == pytest.approx(0.31) and not mean.apart  # intervals overlap
    with pytest.raises(ValueError, match="disable"):
        nb11.edited(result, "disable")


def test_targeted_values_list_the_pairs_by_inputs_and_their_values():
    details = pd.DataFrame(
        [("massive", -1, 0, 0, "[CLS]", "cls", 99, 9.0, 8.0), ("massive", -1, 1, 0, "[CLS]", "cls", 99, 9.0, 8.0),
         ("massive", -1, 2, 5, ".", "punct", 63, 5.0, 1.0), ("random", 0, 0, 0, "[CLS]", "cls", 7, 0.1, 0.0)],
        columns=["targets", "draw", "input", "position", "token", "kind", "dimension", "value", "mean"])
    result = intervention([("none", "none", -1, [0.3, 0.3, 0.3], [0, 0, 0])], details=details)
    found = nb11.targeted_values(result)
    assert found.text == "[CLS] 99 (2 of 3 inputs) and . 63 (1 of 3 inputs)"
    assert (found.value, found.mean) == pytest.approx((23 / 3, 17 / 3))  # the random row left out
    assert found.value_spread == pytest.approx(np.std([9.0, 9.0, 5.0]))


# -- §4 outlier LayerNorm dimensions ---------------------------------------------------------------------
def outliers(dims, bias_dims=(), which="output") -> LayerNormOutliers:
    return LayerNormOutliers(pd.DataFrame(), tuple(dims), tuple(bias_dims), 3.0, 0.5, which)


def test_outliers_meet_the_massive_dimension():
    reading = nb11.outliers(outliers((127, 223), (246,)), outliers((99, 223), (338,), "attention"), 99)
    assert reading.output_text == "127 and 223" and reading.attention_text == "99 and 223"
    assert reading.in_attention and not reading.in_output
    assert reading.shared == (223,)
    assert (reading.k, reading.min_share) == (3.0, 0.5)
    assert reading.output_bias_dims == (246,) and reading.attention_bias_dims == (338,)
    none = nb11.outliers(outliers(()), outliers((5,), which="attention"), 99)
    assert none.output_text == "none" and not none.in_attention and none.shared == ()


# -- §5 position or content ----------------------------------------------------------------------------
def variant_rows(variant, first, content, other, change, width=0.01, swapped=False):
    """Three layers; per layer the given values; intervals +-width."""
    rows = []
    for layer in range(3):
        row = {"variant": variant, "layer": layer + 1, "first": first[layer], "cls_content": content[layer],
               "other": other, "ordinary_change": change[layer]}
        for column in ("first", "cls_content"):
            row[f"{column}_low"], row[f"{column}_high"] = row[column] - width, row[column] + width
        rows.append(row)
    return rows


def test_position_reads_the_stand_ins_the_swap_and_who_leads():
    frame = pd.DataFrame(
        variant_rows("original", [0.05, 0.4, 0.4], [0.05, 0.4, 0.4], 0.005, [0, 0, 0])
        + variant_rows("first=the", [0.04, 0.38, 0.4], [np.nan] * 3, 0.005, [0, 0.001, 0.002])
        + variant_rows("first=[SEP]", [0.05, 0.36, 0.4], [np.nan] * 3, 0.005, [0, 0.001, 0.001])
        + variant_rows("cls<->middle", [0.03, 0.3, 0.2], [0.03, 0.1, 0.25], 0.006, [0.001, 0.004, 0.009]))
    reading = nb11.position(frame, [2, 3])
    assert reading.original == pytest.approx(0.4)
    assert reading.stand_ins == ("the", "[SEP]")
    assert reading.stand_in_first_min == pytest.approx(0.38)  # [SEP]: (0.36 + 0.4) / 2
    assert reading.stand_in_kept == pytest.approx(0.95)
    assert reading.swap == "cls<->middle"
    assert (reading.swap_first, reading.swap_content) == pytest.approx((0.25, 0.175))
    assert reading.first_leads == (2,) and reading.content_leads == (3,)
    assert (reading.first_leads_text, reading.content_leads_text) == ("2", "3")
    assert reading.swap_content_text == "0.10, 0.25"
    assert reading.other == 0.005 and reading.swap_content_over_other == pytest.approx(35)
    assert (reading.change_max, reading.change_max_variant) == (0.009, "cls<->middle")


def register_rows(variant, first, added, added_max, change):
    return [{"variant": variant, "layer": layer + 1, "first": first[layer], "added": added[layer],
             "added_max": added_max[layer], "other": 0.004, "ordinary_change": change[layer]} for layer in range(3)]


def test_registers_read_what_the_added_tokens_take():
    nan = [np.nan] * 3
    frame = pd.DataFrame(
        register_rows("original", [0.03, 0.4, 0.3], nan, nan, [0, 0, 0])
        + register_rows("unused", [0.03, 0.38, 0.3], [0.06, 0.02, 0.01], [0.02, 0.006, 0.003], [0.001, 0.002, 0.003])
        + register_rows("sep", [0.03, 0.36, 0.26], [0.02, 0.04, 0.03], [0.01, 0.012, 0.01], [0.002, 0.006, 0.004]))
    reading = nb11.registers(frame, [2, 3])
    assert reading.kinds == ("unused", "sep")
    assert reading.original == pytest.approx(0.35) and reading.first_min == pytest.approx(0.31)
    assert reading.first_kept == pytest.approx(0.31 / 0.35)
    assert (reading.added_max, reading.added_max_kind) == (pytest.approx(0.035), "sep")
    assert reading.added_one_max == pytest.approx(0.011)
    assert (reading.change_max, reading.change_max_kind) == (0.006, "sep")
    assert (reading.added_elsewhere_max, reading.added_elsewhere_layer) == (0.06, 1)  # layer 1, "unused"
    assert reading.other == 0.004


# -- §6 the no-op ------------------------------------------------------------------------------------------
def no_op_table(mass, update, switch=None) -> pd.DataFrame:
    switch = [-0.5] * len(mass) if switch is None else switch
    return pd.DataFrame({"layer": [1] * len(mass), "head": range(1, len(mass) + 1), "sink_mass": mass,
                         "update_ratio": update, "row_switch": switch})


def test_no_op_reads_sink_heads_against_the_others():
    table = no_op_table([0.1, 0.2, 0.5, 0.6, 0.7], [0.2, 0.4, 0.1, 0.5, 0.3])
    reading = nb11.no_op(table, rho=0.1, interval=(-0.2, 0.4), eps=0.3)
    assert (reading.heads, reading.sink_heads) == (5, 3)
    assert (reading.sink_median, reading.other_median) == pytest.approx((0.3, 0.3))
    assert reading.median_ratio == pytest.approx(1.0)
    assert reading.sink_above_share == pytest.approx(1 / 3)  # 0.5 only
    assert (reading.top_head, reading.top_mass, reading.top_update) == ("1-5", 0.7, 0.3)
    assert reading.top_rank == 3  # 0.5 and 0.4 write more
    assert (reading.rho, reading.rho_low, reading.rho_high) == (0.1, -0.2, 0.4)
    switched = nb11.no_op(no_op_table([0.1, 0.2, 0.5, 0.6, 0.7], [0.2, 0.4, 0.1, 0.5, 0.3],
                                      [0.9, 0.9, -0.9, -0.5, 0.1]), 0.1, (-0.2, 0.4), eps=0.3)
    assert switched.row_median == -0.5 and switched.row_negative == pytest.approx(2 / 3)  # the 3 sink heads only
    assert switched.row_low == pytest.approx(-0.82) and switched.row_high == pytest.approx(-0.02)


def test_no_op_chooses_the_sink_heads_on_other_inputs():
    scored = no_op_table([0.1, 0.2, 0.5, 0.6], [0.2, 0.4, 0.1, 0.5])
    chosen = no_op_table([0.5, 0.1, 0.1, 0.2], [9.0, 9.0, 9.0, 9.0])  # only head 1 is a sink there
    reading = nb11.no_op(scored, rho=0.0, interval=(0.0, 0.0), eps=0.3, chosen=chosen)
    assert reading.sink_heads == 1 and reading.sink_median == 0.2
    assert reading.other_median == pytest.approx(0.4)
    assert (reading.top_head, reading.top_mass, reading.top_update, reading.top_rank) == ("1-1", 0.5, 0.2, 3)
    with pytest.raises(ValueError, match="same heads"):
        nb11.no_op(scored, 0.0, (0.0, 0.0), chosen=chosen.iloc[:3])


# -- §7 the toy -----------------------------------------------------------------------------------------------
def toy_frame(runs) -> pd.DataFrame:
    """runs: (variant, seed, query_accuracy, sink_mass, empty_mass, activation_ratio); the feed-forward maximum is
    the ratio, its kurtosis 3; gated runs' gates 0.3 (non-query rows) and 0.9 (query rows)."""
    frame = pd.DataFrame(runs, columns=["variant", "seed", "query_accuracy", "sink_mass", "empty_mass",
                                        "activation_ratio"])
    gated = frame["variant"] == "gated"
    return frame.assign(steps=1000, seconds=2.0, chance=1 / 32, ffn_max=frame["activation_ratio"],
                        ffn_kurtosis=3.0, gate=np.where(gated, 0.3, np.nan), gate_query=np.where(gated, 0.9, np.nan))


def test_toy_reads_each_variant_against_softmax_and_sets_failed_runs_apart():
    frame = toy_frame([
        ("softmax", 0, 1.0, 0.9, 0.0, 4.0), ("softmax", 1, 1.0, 0.5, 0.0, 4.5), ("softmax", 2, 0.99, 0.7, 0.0, 4.2),
        ("softmax1", 0, 1.0, 0.4, 0.2, 4.0), ("softmax1", 1, 1.0, 0.3, 0.3, 4.1), ("softmax1", 2, 1.0, 0.45, 0.1, 4.0),
        ("gated", 0, 0.03, 0.1, 0.0, 3.5), ("gated", 1, 1.0, 0.6, 0.0, 4.4), ("gated", 2, 1.0, 0.7, 0.0, 6.0),
        ("clipped", 0, 1.0, 0.2, 0.1, 4.0), ("clipped", 1, 0.5, 0.1, 0.1, 4.0), ("clipped", 2, 1.0, 0.3, 0.1, 4.0)])
    reading = nb11.toy(frame)
    assert [v.variant for v in reading.variants] == ["softmax", "softmax1", "gated", "clipped"]
    assert (reading.seeds, reading.steps, reading.seconds) == (3, 1000, 24.0)
    assert reading.chance == pytest.approx(1 / 32) and reading.softmax_sink_min == 0.5
    one, gated, clipped = (nb11.toy_variant(reading, v) for v in ("softmax1", "gated", "clipped"))
    assert one.below_softmax and one.learned_below_softmax and one.learned == 3
    assert one.empty_mass == pytest.approx(0.2) and one.sink_mass == pytest.approx(1.15 / 3)
    assert gated.learned == 2 and gated.learned_sink_min == 0.6 and not gated.below_softmax
    assert not gated.learned_below_softmax and gated.activation_ratio_max == 6.0
    assert clipped.learned == 2 and clipped.learned_below_softmax  # the failed run is set apart, the rest below
    assert not clipped.removes and one.removes  # removing the sink needs every seed to learn the task
    assert one.clears_softmax_mean and not gated.clears_softmax_mean  # softmax's mean sink mass: 0.7
    assert reading.removed == ("softmax1",) and reading.removed_text == "softmax1"
    assert reading.kept == ("gated", "clipped") and reading.kept_text == "gated and clipped"
    assert reading.failed == ("gated", "clipped") and reading.ratio_max == 6.0
    assert (gated.gate, gated.gate_query) == (0.3, 0.9) and np.isnan(one.gate)
    assert (one.empty_mass_min, one.empty_mass_max, gated.ffn_max) == (0.1, 0.3, 6.0)
    assert reading.learned_ratio_max == 6.0 and reading.learned_kurtosis_max == 3.0
    assert reading.failed_ffn_min == 3.5  # gated seed 0 and clipped seed 1 did not learn: 3.5 and 4.0
    assert not reading.failed_larger  # 3.5 is below the learners' largest, 6.0
    with pytest.raises(ValueError, match="variant"):
        nb11.toy_variant(reading, "sigmoid")


def test_toy_where_nothing_removes_the_sink_and_without_a_control():
    frame = toy_frame([("softmax", 0, 1.0, 0.5, 0.0, 4.0), ("softmax", 1, 1.0, 0.8, 0.0, 4.0),
                       ("gated", 0, 1.0, 0.6, 0.0, 4.0), ("gated", 1, 1.0, 0.4, 0.0, 4.0)])
    reading = nb11.toy(frame)
    assert reading.removed == () and reading.removed_text == "none" and reading.failed == ()
    assert not nb11.toy_variant(reading, "gated").below_softmax  # 0.6 is above softmax's smallest
    with pytest.raises(ValueError, match="softmax"):
        nb11.toy(frame[frame["variant"] == "gated"])


# -- paper vs this run ---------------------------------------------------------------------------------------
def test_paper_vs_run_marks_every_finding_as_words_and_renders_this_run():
    profile = nb11.profile(profile_table([0.0, 0.8, 0.1], [0.03, 0.4, 0.1]),
                           pd.DataFrame({"eps": [0.3], "sink_rate": [0.5]}))
    bias = nb11.key_bias(sink_heads([0.1, 0.5], margin=[1, 2], margin_direction=[1, 3], margin_length=[0, -1],
                                    key_ratio=[1, 0.7], cos_sink=[0, 0.5], cos_other=[0, -0.2]), n_boot=10)
    big = nb11.SitesReading(1, "cls", 99, 220.0, 500.0, 490.0, 510.0, 1.0, 0.0, 190.0, 1100.0, 1090.0, 1110.0, 1.0,
                            1.0, 0.87, 8.1, 14.9, 10.5, 14.3, (0, 1), "other", 223)
    edit = nb11.edited(intervention([("none", "none", -1, [0.3, 0.3], [0, 0]),
                                     ("massive", "zero", -1, [0.1, 0.1], [0.2, 0.2]),
                                     ("random", "zero", 0, [0.3, 0.3], [0, 0])]), "zero")
    dims = nb11.outliers(outliers((1,)), outliers((99,), which="attention"), 99)
    place = nb11.position(pd.DataFrame(
        variant_rows("original", [0.1, 0.4, 0.4], [0.1, 0.4, 0.4], 0.005, [0, 0, 0])
        + variant_rows("first=the", [0.1, 0.4, 0.4], [np.nan] * 3, 0.005, [0, 0, 0])
        + variant_rows("cls<->middle", [0.1, 0.3, 0.3], [0.1, 0.1, 0.1], 0.005, [0, 0, 0])), [2])
    nan = [np.nan] * 3
    added = nb11.registers(pd.DataFrame(register_rows("original", [0.1, 0.4, 0.4], nan, nan, [0, 0, 0])
                                        + register_rows("sep", [0.1, 0.4, 0.4], [0.01] * 3, [0.005] * 3,
                                                        [0.001] * 3)), [2])
    fixes = nb11.toy(toy_frame([("softmax", 0, 1.0, 0.5, 0.0, 4.0), ("gated", 0, 1.0, 0.6, 0.0, 4.0),
                                ("clipped", 0, 0.2, 0.1, 0.8, 20.0)]))
    table = nb11.paper_vs_run(profile, bias, big, edit, edit, dims, edit, edit, place, added, fixes)
    assert list(table["paper"]) == list(nb11.FINDINGS)
    assert all("in words" in column for column in table.columns if column.startswith("their finding"))
    run = dict(zip(table["paper"], table["this run"]))
    assert "up to 0.80 at eps 0.3" in run["Gu et al. 2025"]
    assert "layer 1, cls dimension 99: 220, 500 times" in run["Sun et al. 2024"]
    assert "1,100 times" in run["Sun et al. 2024"] and "0.30 -> 0.10" in run["Sun et al. 2024"]
    assert "keeps 100%" in run["Xiao et al. 2024"]
    assert "0.010 of the attention together in layers 2-2 (layer 1: 0.010)" in run["Darcet et al. 2024"]
    assert run["Bondarenko et al. 2023"].endswith(
        "softmax parks on BOS in every seed; clipped softmax (alpha 4) leaves rows empty and fails to learn in some "
        "seeds; the gate is low on rows with nothing to do and high on queries")
