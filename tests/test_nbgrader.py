"""nbgrader autogrades a student copy: the copy as handed out runs top to bottom and scores 0 (only its checks fail,
with their hint), the same copy with the exercises solved gets full marks (notebook 00, the quickest to run; a
course folder in a temporary directory, offline)."""
from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = "00_tour.ipynb"


def _nbgrader(course: Path, *args: str) -> None:
    # nbgrader runs alembic: the virtualenv's bin first on PATH
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    subprocess.run([sys.executable, "-m", "nbgrader", *args, f"--CourseDirectory.root={course}",
                    "--ExecutePreprocessor.timeout=600"], cwd=course, env=env, check=True, capture_output=True)


@pytest.mark.slow
def test_autograde_gives_full_marks_to_a_solved_copy_and_none_to_the_handout(tmp_path):
    student = nbformat.read(ROOT / "notebooks" / "student" / NOTEBOOK, as_version=4)
    solutions = {c.metadata["exercise"]: c.source
                 for c in nbformat.read(ROOT / "notebooks" / NOTEBOOK, as_version=4).cells if "exercise" in c.metadata}
    points = sum(c.metadata.get("nbgrader", {}).get("points", 0) for c in student.cells)
    assert points >= 1 and set(solutions)

    course = tmp_path / "course"
    (course / "source" / "00").mkdir(parents=True)
    nbformat.write(student, course / "source" / "00" / NOTEBOOK)
    _nbgrader(course, "generate_assignment", "00", "--force")
    for who in ("handout", "solved"):
        copy = nbformat.from_dict(student)
        if who == "solved":
            for cell in copy.cells:
                if "exercise" in cell.metadata:
                    cell.source = solutions[cell.metadata["exercise"]]
        (course / "submitted" / who / "00").mkdir(parents=True)
        nbformat.write(copy, course / "submitted" / who / "00" / NOTEBOOK)
    _nbgrader(course, "autograde", "00")
    _nbgrader(course, "export", "--to", str(course / "grades.csv"))
    with open(course / "grades.csv") as f:
        scores = {row["student_id"]: (float(row["score"]), float(row["max_score"])) for row in csv.DictReader(f)}
    assert scores == {"handout": (0.0, points), "solved": (points, points)}
    # the handout ran top to bottom: the only errors are the checks of the unwritten functions, which raise under
    # the autograder (elsewhere they print a note), so an empty function scores nothing
    graded = nbformat.read(course / "autograded" / "handout" / "00" / NOTEBOOK, as_version=4)
    errors = [(c.metadata.get("exercise_check"), o) for c in graded.cells if c.cell_type == "code"
              for o in c.outputs if o.output_type == "error"]
    assert errors and all(name and o.ename == "NotWritten" and "is not written yet" in o.evalue
                          for name, o in errors)
