"""Notebook 01's exercise: surface shares."""
from __future__ import annotations

import numpy as np

from .checker import Case, Exercise, HEAD_LABEL, Mistake, REAL_HEAD, RealInputs, given


def _surface(attn, tokens, swap=False, divide_by_pairs=False, last_sep_only=False):
    attn = np.asarray(attn, dtype=np.float64)
    n = len(tokens)
    prev, next_ = np.trace(attn, -1), np.trace(attn, 1)
    if swap:
        prev, next_ = next_, prev
    sep_columns = [j for j, t in enumerate(tokens) if t == "[SEP]"]
    if last_sep_only:
        sep_columns = sep_columns[-1:]
    cls_columns = [j for j, t in enumerate(tokens) if t == "[CLS]"]
    divisor = n - 1 if divide_by_pairs else n
    return {"prev": prev / divisor, "next": next_ / divisor, "cls": attn[:, cls_columns].sum(1).mean(),
            "sep": attn[:, sep_columns].sum(1).mean()}


def _surface_cases() -> list[Case]:
    single = ["[CLS]", "the", "cat", "sat", ".", "[SEP]"]
    pair = ["[CLS]", "the", "cat", "sat", ".", "[SEP]", "it", "ran", ",", "!", "[SEP]"]
    previous = np.eye(6, k=-1)
    previous[0, 0] = 1  # row 0 has no previous token: it attends to itself ([CLS])
    following = np.eye(6, k=1)
    following[5, 5] = 1
    to_seps = np.zeros((11, 11))
    to_seps[:, [5, 10]] = 0.5
    return [
        Case("a previous-token map of [CLS] the cat sat . [SEP]", given(previous, single),
             {"prev": 5 / 6, "next": 0.0, "cls": 2 / 6, "sep": 0.0}),  # rows 0 and 1 look at [CLS]
        Case("a next-token map of [CLS] the cat sat . [SEP]", given(following, single),
             {"prev": 0.0, "next": 5 / 6, "cls": 0.0, "sep": 2 / 6}),
        Case("a pair whose every row splits its mass between its two [SEP]s", given(to_seps, pair),
             {"prev": 0.5 / 11, "next": 1 / 11, "cls": 0.0, "sep": 1.0}),
    ]


def _surface_real(real: RealInputs) -> Case:
    from dataclasses import replace

    from ...analyses.surface import token_stats

    layer, head = REAL_HEAD
    one_head = replace(real.pair, attn=real.pair.attn[layer - 1:layer, head - 1:head])
    row = token_stats([one_head]).iloc[0]
    return Case(f"the real map of head {HEAD_LABEL} on a sentence pair", given(real.head_map(), list(real.pair.tokens)),
                {k: float(row[k]) for k in ("prev", "next", "cls", "sep")})


EXERCISES = (
    Exercise("surface_shares", "01", "Previous / next / [CLS] / [SEP] shares of one map", "attn, tokens",
             ('attn [n, n], tokens [n] -> {"prev", "next", "cls", "sep"}: the mass each row puts on the previous '
              'token, the next token, [CLS] and any [SEP], averaged over all n rows (a row without a previous / next '
              'token adds 0).'),
             1, 10,
             ("The weights on the previous token are the diagonal just below the main one: np.diagonal(attn, -1).",
              "Divide by n, the number of rows (Clark et al.'s code), not by n - 1.",
              "A pair has two [SEP]s: count the mass on both."),
             _surface_cases, _surface_real,
             (Mistake("prev and next are swapped: the previous token of row i is column i - 1, the diagonal BELOW "
                      "the main one", lambda a, t: _surface(a, t, swap=True)),
              Mistake("divide prev and next by n, the number of rows (Clark et al.'s convention), not by n - 1 pairs",
                      lambda a, t: _surface(a, t, divide_by_pairs=True)),
              Mistake("sep must count every [SEP] of a pair",
                      lambda a, t: _surface(a, t, last_sep_only=True)))),
)
