"""Confidence intervals shared by the analyses: a cluster bootstrap for accuracies, a t-interval for means."""
from __future__ import annotations

import numpy as np
from scipy import stats


def bootstrap_interval(correct: np.ndarray, groups: np.ndarray, n_boot: int = 1000, seed: int = 0,
                       level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of the accuracy of bool `correct` [N], resampling whole groups (`groups` [N]: the
    sentence or passage of each outcome, whose outcomes are not independent). (nan, nan) when N = 0."""
    correct, groups = np.asarray(correct, dtype=float), np.asarray(groups)
    if correct.shape != groups.shape:
        raise ValueError(f"correct {correct.shape} and groups {groups.shape} must have the same shape")
    if correct.size == 0:
        return float("nan"), float("nan")
    labels, index = np.unique(groups, return_inverse=True)
    hits = np.bincount(index, weights=correct, minlength=len(labels))
    counts = np.bincount(index, minlength=len(labels)).astype(float)
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(len(labels), np.full(len(labels), 1 / len(labels)), size=n_boot)
    scores = (weights @ hits) / np.maximum(weights @ counts, 1)
    tail = (1 - level) / 2
    return float(np.quantile(scores, tail)), float(np.quantile(scores, 1 - tail))


def mean_interval(values: np.ndarray, level: float = 0.95) -> tuple[float, float, float]:
    """Mean and two-sided t-interval over the finite values of `values` [N]."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    if len(values) < 2:
        raise ValueError("an interval needs at least two inputs")
    mean, sem = values.mean(), values.std(ddof=1) / np.sqrt(len(values))
    half = stats.t.ppf(0.5 + level / 2, len(values) - 1) * sem
    return float(mean), float(mean - half), float(mean + half)


def wilson_interval(successes: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion `successes` / `n` (fractions, two-sided at `level`);
    (nan, nan) when n = 0. Unlike the normal approximation it stays inside [0, 1] and is not empty at 0 or n."""
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n; got {successes} of {n}")
    if n == 0:
        return float("nan"), float("nan")
    z = stats.norm.ppf(0.5 + level / 2)
    p, z2 = successes / n, z * z / n
    centre = (p + z2 / 2) / (1 + z2)
    half = z * np.sqrt(p * (1 - p) / n + z2 / (4 * n)) / (1 + z2)
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return float(low), float(high)
