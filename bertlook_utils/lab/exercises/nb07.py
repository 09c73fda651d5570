"""Notebook 07's exercise: the distance between two heads."""
from __future__ import annotations

import numpy as np

from .checker import Case, Exercise, HEAD_LABEL, Mistake, REAL_HEAD, RealInputs, given, smoothed


def _js_sum(a, b, *, log=np.log, reduce=np.sum, smoothing=1e-3, kl=False):
    p = smoothed(np.asarray(a, dtype=np.float64), smoothing)
    q = smoothed(np.asarray(b, dtype=np.float64), smoothing)
    if kl:
        per_row = (p * (log(p) - log(q))).sum(-1)
    else:
        m = (p + q) / 2
        per_row = ((p * (log(p) - log(m))).sum(-1) + (q * (log(q) - log(m))).sum(-1)) / 2
    return float(reduce(per_row))


def _distance_cases() -> list[Case]:
    n, s = 6, 1e-3
    big, small = 1 - s + s / n, s / n  # a one-hot row after smoothing
    middle = (big + small) / 2
    disjoint = (big * np.log(big / middle) + small * np.log(small / middle))  # per row, the same for both rows
    previous, following = np.roll(np.eye(n), -1, 1), np.roll(np.eye(n), 1, 1)  # every row on a different column
    return [Case("a head and itself (6 tokens)", given(np.eye(n), np.eye(n)), 0.0),
            Case("two one-hot heads that never look at the same token (6 tokens)", given(previous, following),
                 n * disjoint),
            Case("a uniform head and itself", given(np.full((4, 4), 0.25), np.full((4, 4), 0.25)), 0.0),
            Case("the same disjoint heads in the other order", given(following, previous), n * disjoint),
            Case("a one-hot head against a uniform head (4 tokens)", given(np.eye(4), np.full((4, 4), 0.25)),
                 _js_sum(np.eye(4), np.full((4, 4), 0.25)))]


def _distance_real(real: RealInputs) -> Case:
    from ...analyses.clustering import js_distances

    layer, head = REAL_HEAD
    other = (1, 1)
    distances = js_distances([real.pair])
    n_heads = real.encoder.n_heads
    i, j = (layer - 1) * n_heads + head - 1, (other[0] - 1) * n_heads + other[1] - 1
    return Case(f"heads {HEAD_LABEL} and 1-1 on a real sentence pair",
                given(real.head_map(), real.head_map(*other)), float(distances[i, j]))


EXERCISES = (
    Exercise("head_distance", "07", "The Jensen–Shannon distance between two heads", "a, b",
             ("a, b [n, n]: two heads' maps of the same input -> the SUM over rows of the Jensen-Shannon divergence "
              "(natural log) between their rows, each row first smoothed to 0.999 * a + 0.001 / n (Clark et al. §6)."),
             2, 15,
             ("JS(P, Q) = (KL(P || M) + KL(Q || M)) / 2 with M = (P + Q) / 2.",
              "scipy.spatial.distance.jensenshannon is something else: the square root, in base 2 by default."),
             _distance_cases, _distance_real,
             (Mistake("use the natural log, not log base 2", lambda a, b: _js_sum(a, b, log=np.log2)),
              Mistake("SUM the divergences over rows (Clark et al. add them over every token), do not average them",
                      lambda a, b: _js_sum(a, b, reduce=np.mean)),
              Mistake("that is KL(P || Q), which is not symmetric; JS compares each row with the mean M = (P + Q) / 2",
                      lambda a, b: _js_sum(a, b, kl=True)),
              Mistake("smooth every row first (0.999 * a + 0.001 / n)", lambda a, b: _js_sum(a, b, smoothing=0.0)))),
)
