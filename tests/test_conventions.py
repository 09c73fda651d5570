"""conventions: head labels and indices, per-head frames, relative depth, what counts as attention and as
punctuation."""
from __future__ import annotations

import numpy as np
import pytest

from bertlook_utils.conventions import (
    by_depth, check_attention, check_head, head_frame, head_index, head_label, is_punctuation)


def test_by_depth_maps_bert_base_layers_to_the_same_relative_depth():
    assert by_depth(range(6, 11), 12) == [6, 7, 8, 9, 10]
    assert by_depth(range(6, 11), 6) == [3, 4, 5]
    assert by_depth((1,), 2) == [1]


@pytest.mark.parametrize("layer, head, message", [(0, 1, "layer must be 1 or more"), (1, 0, "head must be 1-4"),
                                                   (1, 5, "head must be 1-4"), (-1, 2, "layer must be 1 or more")])
def test_head_index_refuses_a_head_that_would_wrap_around(layer, head, message):
    assert head_index(2, 4, 4) == 7
    with pytest.raises(ValueError, match=rf"{message} \(1-indexed, as in the papers\); got -?[0-9]"):
        head_index(layer, head, 4)


def test_check_head_accepts_numpy_integers_and_refuses_bools_and_floats():
    check_head(np.int64(6), np.int32(12), 6, 12)
    for layer, head, name in [(True, 1, "layer"), (1, np.bool_(True), "head"), (2.0, 1, "layer"), (1, "3", "head")]:
        with pytest.raises(TypeError, match=f"{name} must be an integer"):
            check_head(layer, head, 6, 12)
    with pytest.raises(ValueError, match=r"layer must be 1-6 \(1-indexed, as in the papers\); got 7"):
        check_head(7, 1, 6, 12)


def test_head_frame_has_one_row_per_head_in_layer_then_head_order():
    values = np.arange(6).reshape(2, 3)
    frame = head_frame({"x": values, "y": -values})
    assert list(frame.columns) == ["layer", "head", "x", "y"]
    assert list(zip(frame["layer"], frame["head"])) == [(1, 1), (1, 2), (1, 3), (2, 1), (2, 2), (2, 3)]
    assert frame["x"].tolist() == [0, 1, 2, 3, 4, 5]
    assert [head_label(layer, h) for layer, h in zip(frame["layer"], frame["head"])][-1] == "2-3"
    assert frame["x"].iloc[head_index(2, 1, 3)] == 3


@pytest.mark.parametrize("token, expected", [
    (".", True), (",", True), ("\u0120.", True), ("\u0120,", True), ("\u2581.", True),
    ("!", False), (";", False), ("...", False), ("a.", False), ("[SEP]", False), ("\u0120the", False),
])
def test_is_punctuation_means_the_tokens_period_and_comma(token, expected):
    assert is_punctuation(token) is expected


def test_check_attention_rejects_infinities_and_accepts_small_rounding():
    attn = np.full((2, 4, 4), 0.25, dtype=np.float32)
    check_attention(attn + 1e-5)  # float rounding is fine
    bad = attn.copy()
    bad[1, 2, 3] = np.inf
    with pytest.raises(ValueError, match="infinite"):
        check_attention(bad)


