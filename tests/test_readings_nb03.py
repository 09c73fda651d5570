"""readings.nb03 (notebook 03's prose) on per-head entropy tables built by hand, whose answers are known by
construction (entropies in nats)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from bertlook_utils import surface
from bertlook_utils.conventions import head_frame
from bertlook_utils.readings import nb03


def by_layer(values, n_heads=2):
    """[L] per-layer values -> [L, n_heads], every head of a layer the same."""
    return np.repeat(np.asarray(values, float)[:, None], n_heads, axis=1)


# -- the profile --------------------------------------------------------------------------------------
def test_a_u_shaped_profile():
    # heads of a layer differ, their mean is the layer's: 3.0, 1.0, 2.0, 3.1
    entropy = head_frame({"entropy": np.array([[2.5, 3.5], [0.5, 1.5], [2.0, 2.0], [3.0, 3.2]])})
    profile = nb03.entropy_profile(entropy)
    np.testing.assert_allclose(profile.layer_means, [3.0, 1.0, 2.0, 3.1])
    assert (profile.first, profile.inner_min, profile.inner_max, profile.last) == pytest.approx((3.0, 1.0, 2.0, 3.1))
    assert profile.inner_last == 3 and profile.u_shaped
    assert profile.first_last_gap == pytest.approx(0.1)


def test_a_profile_that_does_not_rise_at_the_end():
    profile = nb03.entropy_profile(head_frame({"entropy": by_layer([3.0, 1.0, 3.5, 2.0])}))
    assert not profile.u_shaped  # layer 3 is above the last
    assert profile.first_last_gap == pytest.approx(1.0)


def test_two_layers_have_nothing_between():
    profile = nb03.entropy_profile(head_frame({"entropy": by_layer([3.0, 3.5])}))
    assert math.isnan(profile.inner_min) and math.isnan(profile.inner_max)
    assert profile.inner_last == 1 and not profile.u_shaped


# -- two definitions of broad ---------------------------------------------------------------------------
def broad_tables(entropy, max_weight, cls):
    """`surface.broad_heads` (3.8 nats, 0.10) of a 3 x 2 model and its token table with `cls`."""
    entropy = head_frame({"entropy": np.array(entropy).reshape(3, 2), "max_weight": np.array(max_weight).reshape(3, 2)})
    return surface.broad_heads(entropy), head_frame({"cls": np.array(cls).reshape(3, 2)})


def test_broad_heads_by_entropy_only_and_by_weight_only():
    # 1-1 both; 1-2 and 3-2 entropy only; 2-1 largest weight only; 2-2 and 3-1 neither
    heads, tokens = broad_tables([4.0, 3.9, 2.5, 1.0, 2.0, 4.2], [0.05, 0.3, 0.08, 0.9, 0.5, 0.5],
                                 [0.0, 0.4, 0.0, 0.9, 0.1, 0.2])
    wide = nb03.broad(heads, tokens)
    assert (wide.n_by_max_weight, wide.n_by_entropy, wide.n_entropy_only) == (2, 3, 2)
    assert not wide.nested  # 2-1 is broad by largest weight but not by entropy
    assert wide.heads == "1-2, 3-2" and wide.layers == (1, 3)
    assert (wide.entropy.low, wide.entropy.high) == pytest.approx((3.9, 4.2))
    assert (wide.max_weight.low, wide.max_weight.high) == pytest.approx((0.3, 0.5))
    assert (wide.cls.low, wide.cls.high) == pytest.approx((0.2, 0.4))


def test_broad_heads_nested_and_without_entropy_only_heads():
    heads, tokens = broad_tables([4.0, 1.0, 1.0, 1.0, 1.0, 1.0], [0.05, 0.9, 0.9, 0.9, 0.9, 0.9], [0.0] * 6)
    wide = nb03.broad(heads, tokens)
    assert wide.nested and (wide.n_by_max_weight, wide.n_by_entropy, wide.n_entropy_only) == (1, 1, 0)
    assert wide.heads == "" and wide.layers == ()
    assert all(math.isnan(v) for span in (wide.entropy, wide.max_weight, wide.cls) for v in (span.low, span.high))


# -- [CLS] against the mean row ------------------------------------------------------------------------
def test_cls_focused_layers_and_the_last_layer():
    # [CLS] minus the mean row: -0.5, -1.5, -2.0, +0.1
    entropy = head_frame({"entropy": by_layer([3.0, 2.5, 3.0, 3.9]), "cls_entropy": by_layer([2.5, 1.0, 1.0, 4.0])})
    cls = nb03.cls_entropy(entropy)
    assert cls.focused_layers == (2, 3)
    assert (cls.focused_cls.low, cls.focused_cls.high) == pytest.approx((1.0, 1.0))
    assert (cls.focused_mean.low, cls.focused_mean.high) == pytest.approx((2.5, 3.0))
    assert (cls.last_cls, cls.last_mean, cls.last_gap) == pytest.approx((4.0, 3.9, 0.1))
    assert nb03.cls_entropy(entropy, margin=0.4).focused_layers == (1, 2, 3)


def test_cls_close_to_the_mean_everywhere():
    entropy = head_frame({"entropy": by_layer([3.0, 3.0]), "cls_entropy": by_layer([2.5, 3.2])})
    cls = nb03.cls_entropy(entropy)
    assert cls.focused_layers == () and math.isnan(cls.focused_cls.low) and math.isnan(cls.focused_mean.high)
    assert cls.last_gap == pytest.approx(0.2)


def test_uniform_reference_is_the_geometric_mean_length():
    # half the inputs of 10 tokens, half of 40: mean ln n = ln 20
    uniform = nb03.uniform_reference(head_frame({"uniform": np.full((2, 2), (math.log(10) + math.log(40)) / 2)}))
    assert uniform.nats == pytest.approx(math.log(20)) and uniform.tokens == pytest.approx(20)
