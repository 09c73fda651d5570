"""The "Implement it yourself" section of every notebook, written from `bertlook_utils.exercises`; idempotent.

    python -m tools.exercise_cells      # update notebooks/NN_*.ipynb

For each exercise of a notebook: its text (`markdown`), a solution cell and a check cell. The solution cell is
`def name(parameters):` with the exercise's task as its docstring, then the solution's body between
`### BEGIN SOLUTION` and `### END SOLUTION`: the definition is the module's, rewritten on every run; what stands
before it (imports) and the marked body are the notebook's, kept. Both cells carry nbgrader's metadata (a solution
cell, and a locked test cell worth `exercises.POINTS`), so that tools/student_copy.py makes the student copy with
nbgrader's own preprocessors. The section goes just above the notebook's "## Exercises" heading. A cell already there
keeps its outputs and the metadata other tools gave it (slide types); a new exercise's body raises
NotImplementedError until someone writes it.
"""
from __future__ import annotations

import re
import textwrap
from pathlib import Path

import nbformat

from bertlook_utils import exercises
from tools.navigation import ROOT, notebooks

SECTION = "<!-- bertlook:implement -->"
INTRO = (f"{SECTION}\n## Implement it yourself\n"
         "Each function below is one computation of this notebook, written from its definition alone. The check cell "
         "runs your function on small maps whose answers are known by construction, then on a real map of the model, "
         "and says what went wrong (the common mistakes are recognised by name). The student copy "
         "(`notebooks/student/`) starts from an empty function.")
EXERCISES_HEADING = "## Exercises"
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"  # nbgrader's markers (ClearSolutions)
WIDTH = 88  # the longest line of a notebook's code cell (tests/test_notebook_structure.py)
OURS = ("exercise", "exercise_check", "exercise_text")  # the metadata keys that mark the section's cells


def markdown(exercise) -> str:
    """The notebook's text for an exercise: title, difficulty, time, the task and the hints in collapsible blocks."""
    hints = "\n".join(f"<details><summary>Hint {k}</summary>\n\n{hint}\n\n</details>"
                      for k, hint in enumerate(exercise.hints, 1))
    stars = "★" * exercise.difficulty + "☆" * (3 - exercise.difficulty)
    return (f"### Implement `{exercise.name}`: {exercise.title[0].lower() + exercise.title[1:]}\n"
            f"{stars} · about {exercise.minutes} minutes\n\n"
            f"```python\ndef {exercise.name}({exercise.parameters}):\n```\n{exercise.task}\n\n{hints}\n\n"
            f"Write the body in the next cell; the cell after it checks your function (`exercises.check`).")


def definition(exercise) -> str:
    """`def name(parameters):` and the task as its docstring, wrapped at WIDTH characters (the notebooks' code
    width, `ruff format --line-length 88`) but never inside a shape ([B, T]) or a `code` span shorter than half
    a line."""
    task = re.sub(r"\[[^]]*]|`[^`]*`", lambda span: span.group(0).replace(" ", "\0")
                  if len(span.group(0)) < WIDTH // 2 else span.group(0), exercise.task)
    docstring = textwrap.fill(task, WIDTH - 3, initial_indent='    """', subsequent_indent="    ",
                              break_long_words=False, break_on_hyphens=False).replace("\0", " ")
    return f'def {exercise.name}({exercise.parameters}):\n{docstring}"""'


def solution_source(exercise, kept: str | None = None) -> str:
    """The solution cell: what `kept` (the cell now in the notebook) has before the `def` and from `### BEGIN
    SOLUTION` on, around the exercise's `definition`; without `kept`, a body that raises NotImplementedError."""
    if kept is None:
        return f"{definition(exercise)}\n    {BEGIN}\n    raise NotImplementedError\n    {END}"
    before, _, rest = kept.partition(f"def {exercise.name}(")
    body = re.search(rf"^[ \t]*{BEGIN}.*", rest, re.MULTILINE | re.DOTALL)
    if body is None:
        raise ValueError(f"the solution of {exercise.name} has no {BEGIN!r} line")
    return f"{before}{definition(exercise)}\n{body.group(0)}"


def check_source(name: str) -> str:
    return f"from bertlook_utils import exercises\n\nexercises.check(\"{name}\", {name}, encoder);"


def _nbgrader(grade_id: str, solution: bool) -> dict:
    """nbgrader's cell metadata (schema 3): a solution cell, or a locked test cell worth `exercises.POINTS`."""
    return {"schema_version": 3, "grade_id": grade_id, "solution": solution, "grade": not solution,
            "locked": not solution, "task": False, **({} if solution else {"points": exercises.POINTS})}


def is_ours(cell) -> bool:
    return SECTION in cell.source or any(k in cell.metadata for k in OURS)


def _split_heading(nb) -> int:
    """Index of the cell that starts with the Exercises heading; a cell holding it further down is split."""
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown" or EXERCISES_HEADING not in cell.source:
            continue
        if cell.source.startswith(EXERCISES_HEADING):
            return i
        before, _, after = cell.source.partition("\n" + EXERCISES_HEADING)
        cell.source = before.rstrip()
        heading = nbformat.v4.new_markdown_cell(EXERCISES_HEADING + after,
                                                metadata={"slideshow": {"slide_type": "slide"}})
        heading.id = f"{cell.id}-exercises"
        nb.cells.insert(i + 1, heading)
        return i + 1
    raise ValueError("the notebook has no '## Exercises' heading")


def section(nb, notebook: str) -> list:
    """The section's cells for notebook number `notebook` ("03"), keeping the solutions `nb` already holds."""
    kept = {c.metadata["exercise"]: c.source for c in nb.cells if "exercise" in c.metadata}
    cells = [nbformat.v4.new_markdown_cell(INTRO, metadata={"slideshow": {"slide_type": "slide"}})]
    cells[0].id = "implement"
    for name in exercises.names(notebook):
        exercise = exercises.get(name)
        text = nbformat.v4.new_markdown_cell(markdown(exercise), metadata={
            "exercise_text": name, "slideshow": {"slide_type": "subslide"}})
        solution = nbformat.v4.new_code_cell(solution_source(exercise, kept.get(name)), metadata={
            "exercise": name, "tags": ["solution"], "nbgrader": _nbgrader(name, solution=True)})
        check = nbformat.v4.new_code_cell(check_source(name), metadata={
            "exercise_check": name, "nbgrader": _nbgrader(f"{name}-check", solution=False)})
        for cell, suffix in ((text, ""), (solution, "-solution"), (check, "-check")):
            cell.id = f"implement-{name.replace('_', '-')}{suffix}"
        cells += [text, solution, check]
    return cells


def _merged(old, new):
    """`old` with the source and metadata of `new`: its outputs and the metadata other tools set are kept."""
    if old is None or old.cell_type != new.cell_type:
        return new
    old.source = new.source
    old.metadata.update(new.metadata)
    return old


def update(path: Path) -> bool:
    """Rewrite the section of one notebook; True when the file changed."""
    nb = nbformat.read(path, as_version=4)
    before = nbformat.writes(nb)
    old = {c.id: c for c in nb.cells if is_ours(c)}
    new = [_merged(old.get(c.id), c) for c in section(nb, path.name[:2])]
    nb.cells = [c for c in nb.cells if not is_ours(c)]
    if len(new) > 1:
        at = _split_heading(nb)
        nb.cells[at:at] = new
    after = nbformat.writes(nb)
    if after != before:
        path.write_text(after if after.endswith("\n") else after + "\n")
    return after != before


if __name__ == "__main__":
    for path in notebooks():
        if update(path):
            print("updated", path.relative_to(ROOT))
