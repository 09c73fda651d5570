"""Ratios of sums over inputs, Σ numerator / Σ denominator, with percentile bootstrap intervals over inputs.

A share of a gap measured on many inputs is such a ratio: unlike a mean of per-input ratios, an input with a small
denominator cannot swing it.
"""
from __future__ import annotations

import numpy as np


def _inputs(numerators, denominators) -> tuple[np.ndarray, np.ndarray, bool]:
    """(numerators [N, K], denominators [N], whether `numerators` was [N]), checked."""
    numerators, denominators = np.asarray(numerators, dtype=float), np.asarray(denominators, dtype=float)
    flat = numerators.ndim == 1
    numerators = numerators[:, None] if flat else numerators
    if numerators.ndim != 2 or denominators.shape != numerators.shape[:1]:
        raise ValueError(f"numerators {numerators.shape} must be [N] or [N, K] and denominators [N], got "
                         f"{denominators.shape}")
    if len(denominators) < 2:
        raise ValueError("an interval needs at least two inputs")
    if not (np.isfinite(numerators).all() and np.isfinite(denominators).all() and (denominators > 0).all()):
        raise ValueError("numerators must be finite and denominators finite and positive")
    return numerators, denominators, flat


def _weights(n: int, n_boot: int, seed: int) -> np.ndarray:
    """[n_boot, n]: how often each input is drawn in each resample (seeded)."""
    return np.random.default_rng(seed).multinomial(n, np.full(n, 1 / n), size=n_boot).astype(float)


def _resampled(numerators: np.ndarray, denominators: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Σ w·numerator / Σ w·denominator for each resample (row of `weights`): [n_boot, K]."""
    return (weights @ numerators) / (weights @ denominators)[:, None]


def ratio_interval(numerators: np.ndarray, denominators: np.ndarray, n_boot: int = 1000, seed: int = 0,
                   level: float = 0.95) -> tuple:
    """Σ numerators / Σ denominators over N inputs with a percentile interval: (ratio, low, high), floats for
    `numerators` [N], arrays [K] for [N, K] (K ratios over the same resamples). `denominators` [N] > 0."""
    numerators, denominators, flat = _inputs(numerators, denominators)
    ratio = numerators.sum(0) / denominators.sum()
    draws = _resampled(numerators, denominators, _weights(len(denominators), n_boot, seed))
    tail = (1 - level) / 2
    low, high = np.quantile(draws, tail, axis=0), np.quantile(draws, 1 - tail, axis=0)
    return (float(ratio[0]), float(low[0]), float(high[0])) if flat else (ratio, low, high)


def ratio_difference_interval(first: tuple[np.ndarray, np.ndarray], second: tuple[np.ndarray, np.ndarray],
                              n_boot: int = 1000, seed: int = 0, level: float = 0.95
                              ) -> tuple[float, float, float]:
    """The difference of two ratios measured on the same N inputs, `first` and `second` each (numerators [N],
    denominators [N]), with a paired interval (one resample of inputs for both): (difference, low, high)."""
    (a, da, _), (b, db, _) = _inputs(*first), _inputs(*second)
    if len(da) != len(db):
        raise ValueError(f"first and second must hold the same inputs, got {len(da)} and {len(db)}")
    weights = _weights(len(da), n_boot, seed)
    draws = _resampled(a, da, weights)[:, 0] - _resampled(b, db, weights)[:, 0]
    tail = (1 - level) / 2
    return (float(a.sum() / da.sum() - b.sum() / db.sum()), float(np.quantile(draws, tail)),
            float(np.quantile(draws, 1 - tail)))
