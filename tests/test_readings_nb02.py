"""Notebook 02's readings (bertlook_utils.lab.readings.nb02) on hand-built results whose answers are known by
construction: gradient frames per layer, value norms per head, and a causal test's per-input distances."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from bertlook_utils.analyses.gradients import SINK_HEAD, AblationResult
from bertlook_utils.core.intervals import mean_interval
from bertlook_utils.lab.readings import nb02


# -- the gradient per kind of token -----------------------------------------------------------------
def per_layer(column: str, values: dict[str, list[float]]) -> pd.DataFrame:
    """A `by_layer`/`relative`-shaped frame: one row per layer (1-indexed) and category."""
    return pd.DataFrame([(layer + 1, category, value) for category, column_values in values.items()
                         for layer, value in enumerate(column_values)], columns=["layer", "category", column])


def six_layers(cls_attention, sep_attention, cls_ratio, sep_ratio, punct_ratio):
    attention = per_layer("attention", {"sep": sep_attention, "cls": cls_attention, "punct": [0.05] * 6,
                                        "other": [0.5] * 6})
    ratio = per_layer("ratio", {"sep": sep_ratio, "cls": cls_ratio, "punct": punct_ratio})
    return attention, ratio


def test_sink_gradient_reads_the_cls_sink_and_the_last_layers_sep_drop():
    attention, ratio = six_layers(cls_attention=[0.1, 0.3, 0.4, 0.5, 0.6, 0.2],  # 0.2 is not "more than a fifth"
                                  sep_attention=[0.05, 0.02, 0.02, 0.05, 0.08, 0.1],
                                  cls_ratio=[0.5, 0.1, 0.05, 0.04, 0.02, 0.3],
                                  sep_ratio=[1.1, 0.8, 1.0, 1.0, 0.95, 0.3],
                                  punct_ratio=[1.0, 1.0, 1.0, 1.0, 1.0, 0.26])
    reading = nb02.sink_gradient(attention, ratio, paper_layers=(6, 10), claimed=(2, 5))
    assert reading.middle == (3, 4, 5)  # BERT-base's 6-10 of 12 at the same depth of 6
    assert reading.cls_middle == pytest.approx(0.5) and reading.sep_middle == pytest.approx(0.05)
    assert reading.sink == "[CLS]"
    assert reading.cls_layers == (2, 3, 4, 5)
    assert reading.cls_smaller_low == pytest.approx(10) and reading.cls_smaller_high == pytest.approx(50)
    assert reading.cls_ratio_claimed == pytest.approx(0.1)
    assert reading.sep_deviation == pytest.approx(0.2)  # layer 2's 0.8; the last layer's 0.3 is left out
    assert reading.sep_steady_until == 5
    assert reading.sep_low == (6,)
    assert reading.punct_last == pytest.approx(0.26)
    assert nb02.sink_gradient(attention, ratio, (6, 10), claimed=(3, 4)).cls_ratio_claimed == pytest.approx(0.05)


def test_sink_gradient_with_a_sep_sink_no_heavy_cls_layer_and_several_low_sep_layers():
    attention, ratio = six_layers(cls_attention=[0.1] * 6, sep_attention=[0.05, 0.3, 0.4, 0.5, 0.3, 0.1],
                                  cls_ratio=[0.9] * 6, sep_ratio=[1.0, 1.0, 1.0, 0.6, 0.4, 0.2],
                                  punct_ratio=[1.0] * 6)
    reading = nb02.sink_gradient(attention, ratio, paper_layers=(6, 10), claimed=(2, 5))
    assert reading.sink == "[SEP]"
    assert reading.cls_layers == ()
    assert math.isnan(reading.cls_smaller_low) and math.isnan(reading.cls_smaller_high)
    assert reading.sep_low == (5, 6)
    assert reading.sep_deviation == pytest.approx(0.6)  # layer 5's 0.4


def test_sink_gradient_keeps_bert_base_layers_at_twelve():
    attention = per_layer("attention", {"sep": [0.5] * 12, "cls": [0.1] * 12})
    ratio = per_layer("ratio", {"sep": [1.0] * 12, "cls": [1.0] * 12, "punct": [1.0] * 12})
    reading = nb02.sink_gradient(attention, ratio, paper_layers=(6, 10), claimed=(2, 5))
    assert reading.middle == (6, 7, 8, 9, 10) and reading.sep_steady_until == 11 and reading.sep_low == ()


# -- the sink's value vectors -----------------------------------------------------------------------
def test_sink_values_splits_heads_at_the_sink_threshold():
    norms = pd.DataFrame({
        "sink": [0.5, 0.6, 0.4, 0.1, 0.2, SINK_HEAD],  # the last is not a sink head: "more than" SINK_HEAD
        "output_ratio": [0.05, 0.15, 0.1, 0.2, 0.4, 0.3],  # 0.3 is not "below 0.3"
        "output_sep": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        "output_other": [2.0, 2.0, 2.0, 2.0, 2.0, 2.0],
    })
    reading = nb02.sink_values(norms)
    assert (reading.heads, reading.sink_heads, reading.other_heads) == (6, 3, 3)
    assert reading.sink_max == pytest.approx(0.15) and reading.sink_median == pytest.approx(0.1)
    assert reading.other_median == pytest.approx(0.3)  # median of 0.2, 0.4, 0.3
    assert reading.sep_median == pytest.approx(1.75)  # median of 0.5, 1, 1.5, 2, 2.5, 3
    assert reading.short_heads == 4


def test_sink_values_without_sink_heads():
    norms = pd.DataFrame({"sink": [0.1, 0.2], "output_ratio": [0.5, 0.1], "output_sep": [1.0, 1.0],
                          "output_other": [1.0, 1.0]})
    reading = nb02.sink_values(norms)
    assert (reading.sink_heads, reading.other_heads, reading.short_heads) == (0, 2, 1)
    assert math.isnan(reading.sink_max) and math.isnan(reading.sink_median)


# -- the causal test --------------------------------------------------------------------------------
INPUTS = 3
MILLI = 1e-3


def ablation_result() -> AblationResult:
    """Three layers and head 2-3, three inputs. Matched mass, sink minus random per input (x 1e-3):
    renormalise: layer 1 straddles 0, layers 2 and 3 above; uniform: layer 1 below, 2 straddles, 3 above;
    head 2-3 uniform below. "All the sink mass" is largest in layer 3, uniform (0.06)."""
    rows = []

    def add(scope, layer, head, source, amount, mode, distances):
        for i, distance in enumerate(distances):
            rows.append((scope, layer, head, source, amount, mode, i, distance, distance, 0.1))

    everything = {("renormalise", 1): 0.01, ("renormalise", 2): 0.05, ("renormalise", 3): 0.03,
                  ("uniform", 1): 0.02, ("uniform", 2): 0.04, ("uniform", 3): 0.06}
    shifts = {("renormalise", 1): [-1, 0, 1], ("renormalise", 2): [2, 3, 4], ("renormalise", 3): [1.9, 2, 2.1],
              ("uniform", 1): [-0.5, -0.6, -0.7], ("uniform", 2): [-0.1, 0, 0.1], ("uniform", 3): [0.5, 0.6, 0.7]}
    random = {"renormalise": 1.0, "uniform": 2.0}
    for (mode, layer), value in everything.items():
        add("layer", layer, 0, "sink", "all", mode, [value] * INPUTS)
        add("layer", layer, 0, "random", "matched", mode, [random[mode] * MILLI] * INPUTS)
        add("layer", layer, 0, "sink", "matched", mode, [(random[mode] + s) * MILLI for s in shifts[mode, layer]])
    for mode in random:
        add("head", 2, 3, "sink", "all", mode, [0.002] * INPUTS)
        add("head", 2, 3, "random", "matched", mode, [2 * MILLI] * INPUTS)
        add("head", 2, 3, "sink", "matched", mode, [(2 - s) * MILLI for s in (1.0, 1.1, 1.2)])
    frame = pd.DataFrame(rows, columns=["scope", "layer", "head", "source", "amount", "mode", "input",
                                        "token_distance", "pooled_distance", "moved"])
    return AblationResult(frame, reference=0.6)


def test_sink_ablation_reads_the_largest_edit_and_where_each_mode_differs():
    reading = nb02.sink_ablation(ablation_result())
    assert reading.reference == pytest.approx(0.6) and reading.n_layers == 3
    assert (reading.largest_layer, reading.largest_mode) == (3, "uniform")
    assert reading.largest_mean == pytest.approx(0.06) and reading.largest_share == pytest.approx(0.1)
    renormalise, uniform = reading.renormalise, reading.uniform
    assert (renormalise.above, renormalise.straddle, renormalise.below) == ((2, 3), (1,), ())
    assert renormalise.min_ratio == pytest.approx(1.0) and renormalise.max_ratio == pytest.approx(4.0)
    assert (uniform.above, uniform.straddle, uniform.below) == ((3,), (2,), (1,))
    assert uniform.min_ratio == pytest.approx(0.7) and uniform.max_ratio == pytest.approx(1.3)


def test_sink_ablation_reads_the_single_head_against_its_layer():
    reading = nb02.sink_ablation(ablation_result())
    assert reading.head == "2-3"
    assert reading.head_mean == pytest.approx(0.002) and reading.head_layer_mean == pytest.approx(0.05)
    assert reading.head_ratio == pytest.approx(0.45)  # 0.9 / 2
    expected = mean_interval(-np.array([1.0, 1.1, 1.2]) * MILLI)
    assert (reading.head_difference, reading.head_low, reading.head_high) == pytest.approx(expected)
    assert reading.head_high < 0


def test_sink_ablation_reads_another_distance():
    result = ablation_result()
    result.frame["token_distance"] = 2 * result.frame["token_distance"]
    reading = nb02.sink_ablation(result, "token_distance")
    assert reading.largest_mean == pytest.approx(0.12) and reading.head_mean == pytest.approx(0.004)
    assert reading.renormalise.above == (2, 3)  # ratios and signs do not change with the scale
