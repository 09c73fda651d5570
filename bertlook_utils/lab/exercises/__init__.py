"""Exercises the learner implements, checked at once (ARENA style).

    exercises.names()                          # the exercises, in notebook order
    exercises.check("mean_entropy", fn)        # True, or CheckFailed (an AssertionError) with a hint
    exercises.get("mean_entropy").cases()      # every input check runs, the real one last

`check(name, fn, encoder)` runs `fn` on small synthetic maps whose answers are known by construction, then on a
real map of `encoder` (the default model when None) whose answer comes from the kit's own code, and names the
mistake when a wrong answer is one it knows (log base 2, a mean where a sum is due, an off-by-one neighbour,
[CLS] / [SEP] counted as words, rows not renormalised, ROOT left out, ...): see `checker`. Each notebook's
exercises are in their own module, `nb00` .. `nb13`. The notebooks hold the solutions (tools/exercise_cells.py);
the student copies replace their bodies with nbgrader's stub (tools/student_copy.py). A check in the learner's kernel
is the learner's to change; `grading` grades a submitted notebook outside it (`python -m bertlook_utils.cli grade`).

Conventions, as everywhere in the kit: maps are numpy arrays whose rows sum to 1; word 0 of a word-level map is
[CLS] and its last word the final [SEP]; dependency heads are 1-based with 0 for ROOT; `intervene` counts
layers and heads from 0.
"""
from __future__ import annotations

from typing import Callable

from . import checker, nb00, nb01, nb02, nb03, nb04, nb05, nb06, nb07, nb08, nb09, nb10, nb11, nb12, nb13
from .checker import Exercise

_MODULES = (nb00, nb01, nb02, nb03, nb04, nb05, nb06, nb07, nb08, nb09, nb10, nb11, nb12,
            nb13)  # one per notebook, in order
POINTS = 1  # per exercise: the nbgrader test cells' points (tools/exercise_cells.py) and the grader's (`grading`)
EXERCISES: tuple[Exercise, ...] = tuple(e for module in _MODULES for e in module.EXERCISES)
_BY_NAME = {e.name: e for e in EXERCISES}


def names(notebook: str | None = None) -> list[str]:
    """The exercises' names in notebook order (only those of `notebook`, "00" .. "13", when given)."""
    return [e.name for e in EXERCISES if notebook is None or e.notebook == notebook]


def get(name: str) -> Exercise:
    if name not in _BY_NAME:
        raise KeyError(f"no exercise {name!r}; the exercises are {', '.join(_BY_NAME)}")
    return _BY_NAME[name]


def check(name: str, fn: Callable, encoder=None) -> bool:
    """Run `fn` on every case of exercise `name` (synthetic, then a real map of `encoder`, the default model when
    None); True when every answer is right, CheckFailed (an AssertionError, shown without a traceback) with the
    first wrong one and a hint, or False with a note while the function is not written yet."""
    return checker.check(get(name), fn, encoder)
