"""The "Implement it yourself" section of every notebook, written from `bertlook_utils.exercises`; idempotent.

    python tools/exercise_cells.py      # update notebooks/NN_*.ipynb

For each exercise of a notebook: its text (`exercises.markdown`), a solution cell (tagged "solution", metadata
`exercise`: the student copy replaces it by the exercise's stub) and a check cell (metadata `exercise_check`). The
section goes just above the notebook's "## Exercises" heading. A solution already in the notebook is kept; a new
exercise starts from its stub, which fails its check until someone writes the solution.
"""
from __future__ import annotations

import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
from navigation import ROOT, notebooks  # noqa: E402

sys.path.insert(0, str(ROOT))
from bertlook_utils import exercises  # noqa: E402

SECTION = "<!-- bertlook:implement -->"
INTRO = (f"{SECTION}\n## Implement it yourself\n"
         "Each function below is one computation of this notebook, written from its definition alone. The check cell "
         "runs your function on small maps whose answers are known by construction, then on a real map of the model, "
         "and says what went wrong (the common mistakes are recognised by name). The student copy "
         "(`notebooks/student/`) starts from an empty function.")
EXERCISES_HEADING = "## Exercises"


def check_source(name: str) -> str:
    return f"from bertlook_utils import exercises\n\nexercises.check(\"{name}\", {name}, encoder);"


def _is_ours(cell) -> bool:
    return SECTION in cell.source or any(k in cell.metadata for k in ("exercise", "exercise_check", "exercise_text"))


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
        text = nbformat.v4.new_markdown_cell(exercises.markdown(name), metadata={
            "exercise_text": name, "slideshow": {"slide_type": "subslide"}})
        solution = nbformat.v4.new_code_cell(kept.get(name, exercises.get(name).stub), metadata={
            "exercise": name, "tags": ["solution"]})
        check = nbformat.v4.new_code_cell(check_source(name), metadata={"exercise_check": name})
        for cell, suffix in ((text, ""), (solution, "-solution"), (check, "-check")):
            cell.id = f"implement-{name.replace('_', '-')}{suffix}"
        cells += [text, solution, check]
    return cells


def update(path: Path) -> bool:
    """Rewrite the section of one notebook; True when the file changed."""
    nb = nbformat.read(path, as_version=4)
    before = nbformat.writes(nb)
    notebook = path.name[:2]
    old = {c.id: c for c in nb.cells if _is_ours(c)}
    new = [old[c.id] if c.id in old and old[c.id].source == c.source and old[c.id].metadata == c.metadata else c
           for c in section(nb, notebook)]  # unchanged cells keep their outputs
    nb.cells = [c for c in nb.cells if not _is_ours(c)]
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
