"""readings.nb01 (notebook 01's prose) on per-head tables built by hand, whose answers are known by
construction."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from bertlook_utils import surface
from bertlook_utils.conventions import head_frame
from bertlook_utils.readings import nb01


# -- n or n - 1 ---------------------------------------------------------------------------------------
def neighbour_frame(prev_tokens, next_tokens, lengths_factor):
    """2 layers x 2 heads; `pairs` = `tokens` / `lengths_factor` (the same factor for every head)."""
    prev_tokens, next_tokens = np.array(prev_tokens).reshape(2, 2), np.array(next_tokens).reshape(2, 2)
    return head_frame({"prev_tokens": prev_tokens, "next_tokens": next_tokens,
                       "prev_pairs": prev_tokens / lengths_factor, "next_pairs": next_tokens / lengths_factor})


def test_neighbours_when_a_head_crosses_the_line():
    lengths = [4, 5]  # (n - 1) / n: 0.75 and 0.8, mean 0.775
    # head 1-2 scores 0.45 on the previous token under n and 0.45 / 0.775 = 0.58 under n - 1: it crosses 0.5
    compared = surface.compare_neighbours(neighbour_frame([0.1, 0.45, 0.7, 0.2], [0.6, 0.1, 0.0, 0.3], 0.775))
    near = nb01.neighbours(compared, lengths)
    assert near.factor == pytest.approx(0.775) and near.drop == pytest.approx(0.225)
    assert near.mean_tokens == pytest.approx(4.5)
    assert near.strongest_prev == "2-1"
    assert near.prev_max_tokens == pytest.approx(0.7) and near.prev_max_pairs == pytest.approx(0.7 / 0.775)
    assert (near.prev_over_tokens, near.next_over_tokens) == (1, 1)
    assert (near.prev_over_pairs, near.next_over_pairs) == (2, 1)
    assert not near.same_heads


def test_neighbours_when_the_definitions_agree():
    compared = surface.compare_neighbours(neighbour_frame([0.9, 0.1, 0.1, 0.1], [0.1, 0.1, 0.1, 0.8], 0.9))
    near = nb01.neighbours(compared, [10, 10])
    assert near.factor == pytest.approx(0.9) and near.mean_tokens == 10
    assert (near.prev_over_tokens, near.next_over_tokens, near.prev_over_pairs, near.next_over_pairs) == (1, 1, 1, 1)
    assert near.same_heads and near.strongest_prev == "1-1"


# -- the sink -----------------------------------------------------------------------------------------
def sink_stats(cls_by_layer, sep_by_layer, n_heads=2):
    """Every head of a layer gives that layer's shares to [CLS] and [SEP]."""
    cls = np.repeat(np.array(cls_by_layer, float)[:, None], n_heads, axis=1)
    sep = np.repeat(np.array(sep_by_layer, float)[:, None], n_heads, axis=1)
    return head_frame({"cls": cls, "sep": sep})


def test_sink_reads_the_middle_layers_by_relative_depth():
    # 6 layers: BERT-base's 6-10 of 12 are layers 3-5 here; layers 1, 2 and 6 must not count
    sink = nb01.sink(sink_stats([0.9, 0.9, 0.5, 0.6, 0.7, 0.0], [0.0, 0.0, 0.1, 0.05, 0.0, 0.9]))
    assert (sink.paper_first, sink.paper_last, sink.first, sink.last) == (6, 10, 3, 5)
    assert sink.cls == pytest.approx(0.6) and sink.sep == pytest.approx(0.05)
    assert sink.cls_to_sep == pytest.approx(12) and sink.token == "[CLS]"


def test_sink_of_a_twelve_layer_model_is_the_papers_layers():
    cls, sep = [0.0] * 12, [0.0] * 12
    for layer in range(6, 11):
        cls[layer - 1], sep[layer - 1] = 0.1, 0.6
    sink = nb01.sink(sink_stats(cls, sep))
    assert (sink.first, sink.last) == (6, 10)
    assert sink.sep == pytest.approx(0.6) and sink.token == "[SEP]" and sink.cls_to_sep == pytest.approx(1 / 6)


def test_sink_ratio_without_any_sep():
    only_cls = nb01.sink(sink_stats([0.5] * 6, [0.0] * 6))
    assert only_cls.cls_to_sep == math.inf and only_cls.token == "[CLS]"
    neither = nb01.sink(sink_stats([0.0] * 6, [0.0] * 6))
    assert math.isnan(neither.cls_to_sep) and neither.token == "[SEP]"


# -- Vig's heads --------------------------------------------------------------------------------------
def best_frame(chosen, held_out, identical_label="3-10"):
    """One row per pattern (surface.VIG_COLUMNS order) as `surface.vig_best` returns it."""
    labels = {pattern: f"1-{i + 1}" for i, pattern in enumerate(surface.VIG_COLUMNS)} | {"identical": identical_label}
    return pd.DataFrame({"pattern": list(surface.VIG_COLUMNS), "label": [labels[p] for p in surface.VIG_COLUMNS],
                         "chosen": chosen, "held_out": held_out})


def test_vig_keeps_the_weakest_positional_ratio():
    # next, prev, identical, identical_other, delimiter, other_words
    best = best_frame([0.8, 0.9, 0.5, 0.4, 0.6, 0.3], [0.8, 0.72, 0.1, 0.1, 0.54, 0.01])
    vig = nb01.vig(best)
    assert vig.identical == "3-10"
    assert vig.kept == pytest.approx(0.8)  # prev keeps 0.72 / 0.9; identical and other_words do not count


def test_vig_when_a_positional_head_falls_on_the_other_pairs():
    vig = nb01.vig(best_frame([0.8, 0.9, 0.5, 0.4, 0.6, 0.3], [0.8, 0.9, 0.5, 0.4, 0.3, 0.3], "2-7"))
    assert vig.identical == "2-7" and vig.kept == pytest.approx(0.5)
