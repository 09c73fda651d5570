"""Rank correlation within groups: Simpson's paradox undone, one group, the interval, bad input."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from bertlook_utils import ranks


def test_a_within_group_spearman_ignores_the_groups_levels():
    groups = np.repeat([0, 1, 2], 5)
    x = np.tile(np.arange(5.0), 3) - 10 * groups  # inside each group y rises with x; across groups it falls
    y = np.tile(np.arange(5.0), 3) + 10 * groups
    assert stats.spearmanr(x, y).statistic < -0.5
    rho, low, high = ranks.within_group_spearman(x, y, groups)
    assert rho == pytest.approx(1.0) and low > 0.9
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=30), rng.normal(size=30)
    rho, low, high = ranks.within_group_spearman(a, b, np.zeros(30))  # one group: the ordinary Spearman
    assert rho == pytest.approx(stats.spearmanr(a, b).statistic) and low < rho < high
    z = np.arctanh(rho)
    assert np.arctanh(high) - z == pytest.approx(1.959964 / np.sqrt(30 - 1 - 2), rel=1e-5)
    with pytest.raises(ValueError, match="too few within groups"):
        ranks.within_group_spearman(x[:5], y[:5], np.array([0, 0, 1, 1, 2]))
    with pytest.raises(ValueError, match="one shape"):
        ranks.within_group_spearman(x, y[:-1], groups)

