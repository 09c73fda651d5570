"""Ratios of sums with bootstrap intervals: known answers, pairing, bad input."""
from __future__ import annotations

import numpy as np
import pytest

from bertlook_utils import ratios


def test_a_ratio_of_sums_is_not_a_mean_of_ratios_and_small_denominators_cannot_swing_it():
    gaps = np.array([0.1] * 10 + [0.001])
    restored = np.array([0.05] * 10 + [0.003])  # per-input ratios 0.5 ten times, then 3
    ratio, low, high = ratios.ratio_interval(restored, gaps, n_boot=500, seed=0)
    assert ratio == pytest.approx(0.503 / 1.001) and (restored / gaps).mean() == pytest.approx(8 / 11)
    assert low <= ratio <= high < 0.6
    assert ratios.ratio_interval(restored, gaps, n_boot=500, seed=0) == (ratio, low, high)  # seeded
    same = ratios.ratio_interval(0.25 * gaps, gaps)  # every input restores a quarter: nothing to vary
    np.testing.assert_allclose(same, 0.25)
    columns = ratios.ratio_interval(np.stack([restored, 0.25 * gaps], 1), gaps, n_boot=500, seed=0)
    np.testing.assert_allclose([c[0] for c in columns], (ratio, low, high))  # column by column, same resamples
    with pytest.raises(ValueError, match="denominators finite and positive"):
        ratios.ratio_interval(restored, -gaps)
    with pytest.raises(ValueError, match=r"must be \[N\] or \[N, K\]"):
        ratios.ratio_interval(restored, gaps[:2])
    with pytest.raises(ValueError, match="at least two inputs"):
        ratios.ratio_interval(restored[:1], gaps[:1])


def test_a_paired_ratio_difference_resamples_both_ratios_together():
    rng = np.random.default_rng(0)
    gaps = rng.uniform(0.02, 0.1, 40)
    first = gaps * rng.uniform(0.1, 0.5, 40)
    shifted = first + 0.01 * gaps  # the second ratio lies exactly 0.01 above the first on every input
    difference, low, high = ratios.ratio_difference_interval((shifted, gaps), (first, gaps))
    assert difference == pytest.approx(0.01) and low == pytest.approx(0.01) and high == pytest.approx(0.01)
    unpaired = [ratios.ratio_interval(x, gaps) for x in (shifted, first)]
    assert unpaired[0][1] < unpaired[1][2]  # unpaired, the two intervals overlap
    with pytest.raises(ValueError, match="the same inputs"):
        ratios.ratio_difference_interval((shifted, gaps), (first[:-1], gaps[:-1]))

