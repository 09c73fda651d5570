"""sinks: the sink score and rate on maps with planted sink columns, softmax1 and the clipped softmax on
hand-computed values and extreme logits, and clear errors for what is not a map."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from bertlook_utils import sinks


def planted(n: int = 5, sink_heads: int = 3, heads: int = 4, layers: int = 2, sink: int = 0, mass: float = 0.8):
    """Maps [layers, heads, n, n]: the first `sink_heads` heads (counted over layers, then heads) put `mass` of
    every row on key `sink` and spread the rest evenly; the other heads are uniform."""
    attn = np.full((layers, heads, n, n), 1 / n)
    for k in range(sink_heads):
        layer, head = divmod(k, heads)
        attn[layer, head] = (1 - mass) / (n - 1)
        attn[layer, head, :, sink] = mass
    return attn


def test_sink_scores_are_the_mean_weight_each_key_receives_per_head():
    attn = planted(n=5, sink_heads=3, mass=0.8)
    scores = sinks.sink_scores(attn)
    assert scores.shape == (2, 4, 5)
    assert scores[0, 0] == pytest.approx([0.8, 0.05, 0.05, 0.05, 0.05])
    assert scores[1, 3] == pytest.approx([0.2] * 5)  # uniform: every key 1/n
    assert scores.sum(-1) == pytest.approx(np.ones((2, 4)))  # rows sum to 1, so scores do too
    one_row = np.zeros((1, 1, 3, 3))
    one_row[0, 0] = [[1, 0, 0], [0, 1, 0], [0, 1, 0]]  # rows 2 and 3 both look at key 2
    assert sinks.sink_scores(one_row)[0, 0] == pytest.approx([1 / 3, 2 / 3, 0])


def test_sink_rate_counts_the_heads_above_eps_over_all_layers_and_heads():
    attn = planted(n=5, sink_heads=3, mass=0.8)  # 3 of 8 heads score 0.8 on key 0; the rest score 0.2 or 0.05
    assert sinks.sink_rate(attn) == pytest.approx([3 / 8, 0, 0, 0, 0])
    assert sinks.sink_rate(attn, eps=0.1) == pytest.approx([1, 5 / 8, 5 / 8, 5 / 8, 5 / 8])  # uniform: 0.2 > 0.1
    assert sinks.sink_rate(planted(sink=2, sink_heads=8, mass=0.31)) == pytest.approx([0, 0, 1, 0, 0])
    assert sinks.sink_rate(planted(sink_heads=8, mass=0.3)).max() == 0  # exceed, not reach
    for eps in (0, 1, -0.1):
        with pytest.raises(ValueError, match="eps"):
            sinks.sink_rate(attn, eps=eps)


def test_a_padded_input_is_refused_without_a_mask_and_read_with_one():
    real = planted(n=4, sink_heads=2, mass=0.7)
    padded = np.zeros((2, 4, 6, 6))
    padded[..., :4, :4] = real  # two padded positions: their rows empty, no real row attends to them
    with pytest.raises(ValueError, match="pass mask"):
        sinks.sink_scores(padded)
    mask = np.array([True] * 4 + [False] * 2)
    assert sinks.sink_scores(padded, mask) == pytest.approx(sinks.sink_scores(real))
    assert sinks.sink_rate(padded, mask=mask) == pytest.approx(sinks.sink_rate(real))
    leaky = padded.copy()
    leaky[0, 0, 0] = [0.5, 0, 0, 0, 0.5, 0]  # a real row puts weight on a padded key
    with pytest.raises(ValueError, match="does not match"):
        sinks.sink_scores(leaky, mask)
    for bad in (mask[:5], mask.astype(int), np.zeros(6, bool)):
        with pytest.raises(ValueError, match="mask"):
            sinks.sink_scores(padded, bad)


@pytest.mark.parametrize("bad, message", [
    (np.ones((4, 4)) / 4, r"\[layers, heads, n, n\]"),
    (np.ones((1, 1, 3, 4)) / 4, r"\[layers, heads, n, n\]"),
    (np.full((1, 1, 2, 2), np.nan), "NaN"),
    (np.full((1, 1, 2, 2), 0.7), "sum to 1"),
    (np.array([[[[1.5, -0.5], [0.5, 0.5]]]]), r"\[0, 1\]"),
])
def test_what_is_not_a_map_is_refused(bad, message):
    with pytest.raises(ValueError, match=message):
        sinks.sink_scores(bad)


def test_softmax1_leaves_room_for_an_empty_slot():
    assert sinks.softmax1(np.array([0.0, 0.0])) == pytest.approx([1 / 3, 1 / 3])
    assert sinks.softmax1(np.array([math.log(2)])) == pytest.approx([2 / 3])
    x = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 0.0]])
    expected = np.exp(x) / (1 + np.exp(x).sum(-1, keepdims=True))
    assert sinks.softmax1(x) == pytest.approx(expected)
    assert sinks.softmax1(x.T, dim=0) == pytest.approx(expected.T)
    assert (sinks.softmax1(x).sum(-1) < 1).all()


def test_softmax1_is_stable_for_extreme_logits_and_keeps_the_type():
    huge = sinks.softmax1(np.array([1000.0, 1000.0]))
    assert huge == pytest.approx([0.5, 0.5]) and np.isfinite(huge).all()  # the empty slot's share is exp(-1000)
    tiny = sinks.softmax1(np.array([-1000.0, -1000.0]))
    assert np.isfinite(tiny).all() and tiny.max() < 1e-300  # everything goes to the empty slot
    mixed = sinks.softmax1(torch.tensor([[1000.0, -1000.0, 0.0]]))
    assert isinstance(mixed, torch.Tensor) and mixed.dtype == torch.float32
    assert mixed.tolist()[0] == pytest.approx([1.0, 0.0, 0.0])
    assert torch.isfinite(mixed).all()
    with pytest.raises(ValueError, match="NaN"):
        sinks.softmax1(np.array([0.0, np.nan]))
    with pytest.raises(ValueError, match="at least one dimension"):
        sinks.softmax1(np.float64(1.0))


def test_softmax1_gives_a_row_with_infinite_logits_to_them_alone():
    assert sinks.softmax1(np.array([np.inf, 0.0])).tolist() == [1.0, 0.0]  # the limit, not NaN
    both = sinks.softmax1(torch.tensor([[np.inf, -np.inf, np.inf], [0.0, 0.0, -np.inf]]))
    assert both.tolist() == [[0.5, 0.0, 0.5], pytest.approx([1 / 3, 1 / 3, 0.0])]  # equal logits, equal shares
    assert sinks.softmax1(np.array([[np.inf, 0.0], [0.0, np.inf]]), dim=0).tolist() == [[1.0, 0.0], [0.0, 1.0]]


def test_clipped_softmax_refuses_an_infinite_gamma_or_zeta():
    for gamma, zeta in ((-0.025, np.inf), (-np.inf, 1.0)):
        with pytest.raises(ValueError, match="gamma and zeta must be finite"):
            sinks.clipped_softmax(np.zeros(3), gamma=gamma, zeta=zeta)


def test_clipped_softmax_reaches_exact_zeros_and_ones():
    gamma = -0.025
    p = np.array([0.5, 0.49, 0.01])  # softmax of its logs
    got = sinks.clipped_softmax(np.log(p), gamma=gamma, zeta=1.0)
    assert got == pytest.approx([1.025 * 0.5 + gamma, 1.025 * 0.49 + gamma, 0.0])
    assert got[2] == 0.0  # 1.025 * 0.01 - 0.025 < 0: clipped to exactly 0
    one = sinks.clipped_softmax(torch.tensor([50.0, 0.0, 0.0]), gamma=gamma, zeta=1.0)
    assert one.tolist() == [1.0, 0.0, 0.0]
    stretched = sinks.clipped_softmax(np.log(np.array([0.99, 0.01])), gamma=0.0, zeta=1.1)
    assert stretched == pytest.approx([1.0, 0.011])  # 1.089 clipped to 1
    assert sinks.clipped_softmax(np.zeros(4), gamma=0.0, zeta=1.0) == pytest.approx([0.25] * 4)  # the softmax
    for gamma, zeta in ((0.1, 1.0), (-0.1, 0.9)):
        with pytest.raises(ValueError, match="gamma <= 0 and zeta >= 1"):
            sinks.clipped_softmax(np.zeros(3), gamma=gamma, zeta=zeta)
