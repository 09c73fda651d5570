"""Notebook 08's exercise: the stripes feature."""
from __future__ import annotations

import numpy as np

from .checker import Case, Exercise, HEAD_LABEL, Mistake, RealInputs, given


def _stripes(attn, *, columns=3, rescale=True, per_row=False):
    attn = np.asarray(attn, dtype=np.float64)
    n = attn.shape[-1]
    if per_row:
        top = np.sort(attn, -1)[:, -columns:].sum(-1).mean()
    else:
        top = np.sort(attn.mean(0))[-columns:].sum()
    if not rescale:
        return float(top)
    chance = min(columns / n, 1.0)
    return float(max((top - chance) / max(1 - chance, 1e-6), 0.0))


def _stripes_cases() -> list[Case]:
    half = np.full((10, 10), 0.05)
    half[:, 0] += 0.5
    two = np.zeros((10, 10))
    two[:, [0, 9]] = 0.5
    return [Case("a uniform 10-token map", given(np.full((10, 10), 0.1)), 0.0),
            Case("a 10-token map whose every row splits its mass between columns 0 and 9", given(two), 1.0),
            Case("a 10-token map: half of every row on column 0, half spread evenly", given(half), 0.5),
            Case("a 10-token identity map", given(np.eye(10)), 0.0)]


def _stripes_real(real: RealInputs) -> Case:
    from ...analyses.patterns import map_features

    return Case(f"the real map of head {HEAD_LABEL} on a sentence pair", given(real.head_map()),
                map_features(real.head_map(), real.pair.tokens, real.pair.segment_ids)["stripes"])


EXERCISES = (
    Exercise("stripes_feature", "08", "The stripes feature of a map", "attn",
             ("attn [n, n] -> the pattern classifier's `stripes` feature: the mean over rows of the mass on the 3 "
              "columns that receive the most attention overall (by their mean over rows), rescaled so that a uniform "
              "map gives 0 and a map on at most 3 columns gives 1: (top - 3/n) / (1 - 3/n), never below 0."),
             2, 10,
             ("First the column means attn.mean(0); the 3 largest of them, summed, are `top`.",
              "A uniform map puts 3/n on any 3 columns: that is the chance level to subtract."),
             _stripes_cases, _stripes_real,
             (Mistake("rescale: (top - 3/n) / (1 - 3/n), so that a uniform map gives 0",
                      lambda a: _stripes(a, rescale=False)),
              Mistake("choose the 3 columns once, by their mean over rows; you took each row's own 3 largest weights",
                      lambda a: _stripes(a, per_row=True)),
              Mistake("the feature sums the 3 largest columns, not only the largest one",
                      lambda a: _stripes(a, columns=1)))),
)
