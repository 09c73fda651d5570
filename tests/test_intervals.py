"""Intervals: the cluster bootstrap and the t-interval."""
from __future__ import annotations

import numpy as np
import pytest

from bertlook_utils import intervals


def test_bootstrap_interval_resamples_sentences_and_is_seeded():
    correct = np.array([1, 1, 1, 1, 0, 0, 1, 0], dtype=bool)
    sentence = np.array([0, 0, 0, 0, 1, 1, 2, 2])
    low, high = intervals.bootstrap_interval(correct, sentence, n_boot=2000, seed=1)
    assert 0 <= low < correct.mean() < high <= 1
    assert (low, high) == intervals.bootstrap_interval(correct, sentence, n_boot=2000, seed=1)
    assert intervals.bootstrap_interval(np.ones(5, bool), np.arange(5)) == (1.0, 1.0)


def test_bootstrap_interval_of_one_group_cannot_vary():
    correct = np.array([1] * 30 + [0] * 10, dtype=bool)
    groups = np.repeat(np.arange(8), 5)
    low, high = intervals.bootstrap_interval(correct, groups, n_boot=500, seed=1)
    assert low < 0.75 < high and (low, high) == intervals.bootstrap_interval(correct, groups, n_boot=500, seed=1)
    assert intervals.bootstrap_interval(np.ones(10, bool), np.arange(10)) == (1.0, 1.0)
    # one passage only: resampling passages cannot vary the score
    assert intervals.bootstrap_interval(correct, np.zeros(40)) == (0.75, 0.75)


def test_mean_interval_is_the_t_interval():
    mean, low, high = intervals.mean_interval(np.array([1.0, 2.0, 3.0, np.nan]))
    assert mean == 2 and high - mean == pytest.approx(4.302653 / np.sqrt(3), rel=1e-6) and low == 4 - high
    with pytest.raises(ValueError, match="two"):
        intervals.mean_interval(np.array([1.0]))


def test_bootstrap_interval_refuses_mismatched_shapes_and_is_nan_when_empty():
    with pytest.raises(ValueError, match="same shape"):
        intervals.bootstrap_interval(np.ones(3, bool), np.arange(4))
    assert np.isnan(intervals.bootstrap_interval(np.ones(0, bool), np.arange(0))).all()
