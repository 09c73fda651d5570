"""Notebook 03's exercise: entropy."""
from __future__ import annotations

import numpy as np

from .checker import Case, Exercise, HEAD_LABEL, Mistake, REAL_HEAD, RealInputs, given, smoothed


def _row_entropy(p: np.ndarray, log=np.log) -> np.ndarray:
    return -(p * log(np.where(p > 0, p, 1.0))).sum(-1)


def _entropy(attn, smoothing=1e-4, log=np.log, reduce=np.mean):
    return float(reduce(_row_entropy(smoothed(np.asarray(attn, dtype=np.float64), smoothing), log)))


def _entropy_cases() -> list[Case]:
    s, n = 1e-4, 8
    big, small = 1 - s + s / n, s / n
    one_hot = -(big * np.log(big) + (n - 1) * small * np.log(small))
    halves = np.zeros((6, 6))
    halves[:, :2] = 0.5
    big, small = 0.5 * (1 - s) + s / 6, s / 6
    two = -(2 * big * np.log(big) + 4 * small * np.log(small))
    return [Case("a uniform 5-token map", given(np.full((5, 5), 0.2)), np.log(5)),
            Case("an 8-token identity map (one-hot rows)", given(np.eye(8)), one_hot),
            Case("a 6-token map whose rows split their mass over the first two tokens", given(halves), two)]


def _entropy_real(real: RealInputs) -> Case:
    from dataclasses import replace

    from ...analyses.surface import entropy_stats

    layer, head = REAL_HEAD
    one_head = replace(real.pair, attn=real.pair.attn[layer - 1:layer, head - 1:head])
    return Case(f"the real map of head {HEAD_LABEL} on a sentence pair", given(real.head_map()),
                float(entropy_stats([one_head]).iloc[0]["entropy"]))


EXERCISES = (
    Exercise("mean_entropy", "03", "The mean entropy of a head", "attn",
             ("attn [n, n] -> the mean over rows of each row's entropy in nats, after smoothing every weight to 0.9999 "
              "* a + 0.0001 / n (so that log 0 never happens)."),
             1, 10,
             ("Entropy of a row p: -sum(p * log(p)), natural log.", "Smooth first, then take the entropy, then the "
              "mean over rows."),
             _entropy_cases, _entropy_real,
             (Mistake("entropy here is in nats: use the natural log (np.log), not log base 2",
                      lambda a: _entropy(a, log=np.log2)),
              Mistake("smooth every weight first (0.9999 * a + 0.0001 / n); without it a one-hot row gives 0",
                      lambda a: _entropy(a, smoothing=0.0)),
              Mistake("average over rows (np.mean), not sum", lambda a: _entropy(a, reduce=np.sum)),
              Mistake("the smoothing is 0.0001 / n (notebook 03), not the clustering's 0.001 / n",
                      lambda a: _entropy(a, smoothing=1e-3)))),
)
