"""Rank correlation within groups (heads within their layer), with a Fisher-z interval."""
from __future__ import annotations

import numpy as np
from scipy import stats


def within_group_spearman(x: np.ndarray, y: np.ndarray, groups: np.ndarray, level: float = 0.95
                          ) -> tuple[float, float, float]:
    """Spearman's correlation of `x` and `y` [N] within groups [N]: both ranked inside each group, centred on the
    group's mean rank and pooled, so a difference between groups (a layer's level) cannot make it; with one group,
    the ordinary Spearman. A Fisher-z interval with the groups' means as controlled variables: (rho, low, high)."""
    x, y, groups = np.asarray(x, dtype=float), np.asarray(y, dtype=float), np.asarray(groups)
    if not x.shape == y.shape == groups.shape or x.ndim != 1:
        raise ValueError(f"x {x.shape}, y {y.shape} and groups {groups.shape} must be one shape [N]")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("x and y must be finite")
    labels = np.unique(groups)
    if len(x) - len(labels) < 3:
        raise ValueError(f"{len(x)} values in {len(labels)} groups: too few within groups for an interval")
    centred = []
    for values in (x, y):
        ranks = np.empty_like(values)
        for label in labels:
            inside = groups == label
            ranks[inside] = stats.rankdata(values[inside]) - (inside.sum() + 1) / 2
        centred.append(ranks)
    if not all(np.any(c) for c in centred):
        raise ValueError("x or y is constant within every group: no rank correlation")
    rho = float(np.clip(np.corrcoef(*centred)[0, 1], -1, 1))
    half = stats.norm.ppf(0.5 + level / 2) / np.sqrt(len(x) - len(labels) - 2)
    with np.errstate(divide="ignore"):
        z = np.arctanh(rho)  # ±inf at ±1: the interval shrinks to the point
    return rho, float(np.tanh(z - half)), float(np.tanh(z + half))
