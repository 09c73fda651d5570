"""The Implement exercises' solution cells rebuilt from their bodies (as tools/exercise_cells.py writes them), and
the checker's message for a function that fails: helpers the per-notebook exercise tests import."""
from __future__ import annotations

import numpy as np
import pytest

from bertlook_utils.lab.exercises import checker
from tools import exercise_cells


def source(exercise, body: str) -> str:
    """The solution cell of `exercise` holding `body` between nbgrader's markers."""
    kept = (f"import numpy as np\n\n\ndef {exercise.name}(\n    {exercise_cells.BEGIN}\n{body}\n"
            f"    {exercise_cells.END}")
    return exercise_cells.solution_source(exercise, kept)


def solution(exercise, body: str):
    """The function the solution cell defines."""
    namespace: dict = {}
    exec(source(exercise, body), namespace)
    return namespace[exercise.name]


def failure(exercise, fn, encoder) -> str:
    """The message of the checker's AssertionError for `fn` (which must fail)."""
    with pytest.raises(AssertionError) as error, np.errstate(all="ignore"):
        checker.check(exercise, fn, encoder)
    return str(error.value)


def by_name(exercises: dict, bodies: dict) -> tuple:
    """(source, solution, failure) taking an exercise's name: the helpers above, with the exercise and its body
    looked up in `exercises` and `bodies` (name -> body)."""
    return (lambda name: source(exercises[name], bodies[name]),
            lambda name: solution(exercises[name], bodies[name]),
            lambda name, fn, encoder: failure(exercises[name], fn, encoder))
