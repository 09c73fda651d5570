"""Notebook 00's student copy as a learner might hand it in: untouched (the handout), solved with the committed
solution, and three attacks that try to pass without solving. tests/test_nbgrader.py autogrades them in the learner's
kernel; tests/test_grading.py grades them outside it.

Each attack writes a wrong answer of the right shape (zeros) and adds, above it in the solution cell, code that tries
to make the check pass anyway:
- one_liner: the review's line, `checker.same = lambda *a, **k: True`;
- patched_check: `exercises.check` replaced on the module, which every check cell imports;
- skipped_cells: an IPython AST transformer that turns every later cell, the check cells too, into `pass`.
"""
from __future__ import annotations

from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = "00_tour.ipynb"
STUB = "    # YOUR CODE HERE\n    raise NotImplementedError()"
WRONG = "    return np.zeros((max(word_ids) + 1,) * 2)"  # the word-level map's shape [w, w], all zeros
ATTACKS = {
    "one_liner": "from bertlook_utils.lab.exercises import checker\nchecker.same = lambda *a, **k: True\n",
    "patched_check": "from bertlook_utils import exercises\nexercises.check = lambda *a, **k: True\n",
    "skipped_cells": ("import ast\n\n\nclass SkipCells(ast.NodeTransformer):\n"
                      "    def visit_Module(self, module):\n"
                      "        return ast.Module(body=[ast.Pass()], type_ignores=[])\n\n\n"
                      "get_ipython().ast_transformers.append(SkipCells())\n"),
}


def handout():
    """Notebook 00's student copy as handed out."""
    return nbformat.read(ROOT / "notebooks" / "student" / NOTEBOOK, as_version=4)


def points(notebook) -> float:
    """The points of `notebook`'s nbgrader test cells."""
    return sum(c.metadata.get("nbgrader", {}).get("points", 0) for c in notebook.cells)


def _with_solutions(notebook, solution) -> object:
    """A copy of `notebook` whose solution cells hold `solution(name, source)`."""
    copy = nbformat.from_dict(notebook)
    for cell in copy.cells:
        if "exercise" in cell.metadata:
            cell.source = solution(cell.metadata["exercise"], cell.source)
    return copy


def submissions() -> dict[str, object]:
    """who -> notebook: "handout", "solved" (the committed solutions) and each of ATTACKS."""
    student = handout()
    solutions = {c.metadata["exercise"]: c.source
                 for c in nbformat.read(ROOT / "notebooks" / NOTEBOOK, as_version=4).cells if "exercise" in c.metadata}
    assert set(solutions) and all(STUB in c.source for c in student.cells if "exercise" in c.metadata)
    found = {"handout": student, "solved": _with_solutions(student, lambda name, source: solutions[name])}
    for who, attack in ATTACKS.items():
        found[who] = _with_solutions(student, lambda name, source, attack=attack:
                                     attack + "\n\n" + source.replace(STUB, WRONG))
    return found
