"""Notebook 09's exercise: vertical stripes."""
from __future__ import annotations

import numpy as np

from .checker import Case, Exercise, HEAD_LABEL, Mistake, RealInputs, given


def _stripe_columns(attn, threshold, *, how="mean"):
    attn = np.asarray(attn, dtype=np.float64)
    column = {"mean": attn.mean(0), "sum": attn.sum(0), "min": attn.min(0)}[how if how != "strict" else "mean"]
    found = column > threshold if how == "strict" else column >= threshold
    return [int(j) for j in np.flatnonzero(found)]


def _stripe_column_cases() -> list[Case]:
    split = np.zeros((6, 6))
    split[:, [0, 5]] = 0.5
    mixed = np.eye(6) * 0.6
    mixed[:, 0] += 0.4
    mixed[0, 0] = 1.0
    return [Case("every row splits its mass between columns 0 and 5; threshold 0.5", given(split, 0.5), [0, 5]),
            Case("0.4 of every row to column 0, 0.6 to the token itself; threshold 0.2", given(mixed, 0.2), [0]),
            Case("an identity map of 6 tokens; threshold 0.2", given(np.eye(6), 0.2), [])]


def _stripe_column_real(real: RealInputs) -> Case:
    attn = real.head_map()
    return Case(f"the real map of head {HEAD_LABEL} on a sentence pair, threshold 0.2", given(attn, 0.2),
                [int(j) for j in np.flatnonzero(attn.mean(0) >= 0.2)])


EXERCISES = (
    Exercise("stripe_columns", "09", "Vertical stripes", "attn, threshold",
             ("attn [n, n] -> the sorted list of columns j whose attention, averaged over the n rows, is at least "
              "`threshold` (Kovaleva et al.'s vertical stripes)."),
             1, 5,
             ("attn.mean(0) is each column's attention averaged over rows.",),
             _stripe_column_cases, _stripe_column_real,
             (Mistake("average each column over the rows; a sum over rows grows with n",
                      lambda a, t: _stripe_columns(a, t, how="sum")),
              Mistake("a stripe needs a large MEAN over rows, not a large weight in every row",
                      lambda a, t: _stripe_columns(a, t, how="min")),
              Mistake("'at least' the threshold: use >=, not >", lambda a, t: _stripe_columns(a, t, how="strict")))),
)
