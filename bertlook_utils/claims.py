"""Prose that cannot drift from the numbers. Every model-dependent sentence of a notebook is either rendered
from the computed results (`say`) or guarded by a claim that is checked when the notebook runs (`check`):
under nbval a claim that stops holding fails the cell, so `make test` fails.

    claims.check({"auxpass beats its offset baseline by more than 5 points": gain["auxpass"] > 5,
                  "the sink is [CLS], not [SEP], in layers 2-5": cls_share > sep_share}, model=MODEL)
    claims.say(f"The best head finds **{acc:.1f} %** of the heads, the next word {base:.1f} %.")

The prose of the notebooks is written for the default model: with `model=None` (the default model) a
failed claim raises `ClaimFailed`; with another model it is reported as "does not hold for this model".
"""
from __future__ import annotations

from typing import Mapping

import numpy as np
from IPython.display import Markdown


class ClaimFailed(AssertionError):
    """A sentence of the notebook's prose no longer holds for the numbers computed above it."""


def _verdict(statement: str, value) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"claim {statement!r} must be a single True/False (a comparison of numbers), got "
                    f"{type(value).__name__}; reduce arrays with .all() or .any() first")


def check(statements: Mapping[str, bool], model: str | None = None) -> None:
    """Print each statement with ✔ (holds) or ✘ (does not hold). For the default model (`model` None) any ✘
    raises ClaimFailed naming every failed statement; for another model the ✘ lines are a warning that the
    prose above was written for the default model."""
    if not statements:
        raise ValueError("no claims given; pass {statement: condition}")
    verdicts = {statement: _verdict(statement, value) for statement, value in statements.items()}
    for statement, holds in verdicts.items():
        print(f"{'✔' if holds else '✘'} {statement}")
    failed = [statement for statement, holds in verdicts.items() if not holds]
    if failed and model is None:
        raise ClaimFailed("the text says what the numbers no longer show; rewrite it or fix the analysis:\n"
                          + "\n".join(f"  ✘ {statement}" for statement in failed))
    if failed:
        print(f"({len(failed)} of {len(verdicts)} statements of the text, written for the default model, do not "
              f"hold for {model})")


def say(text: str) -> Markdown:
    """Markdown rendered from the results (write it as an f-string of the computed numbers)."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("say() needs the Markdown text to render")
    return Markdown(text)
