"""nbgrader autogrades a student copy in the learner's kernel: the copy as handed out runs top to bottom and scores 0
(only its checks fail, with their hint), the same copy with the exercises solved gets full marks, and the kernel's
verdict is the learner's to change: the review's one-liner (`checker.same = ...`) no longer passes a wrong answer,
but replacing `exercises.check` or skipping the check cells still does (tests/submissions.py; the grade of record
comes from tests/test_grading.py's `grade`). Notebook 00, the quickest to run; a course folder in a temporary
directory, offline."""
from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from submissions import NOTEBOOK, handout, points, submissions


def _nbgrader(course: Path, *args: str) -> None:
    # nbgrader runs alembic: the virtualenv's bin first on PATH
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    subprocess.run([sys.executable, "-m", "nbgrader", *args, f"--CourseDirectory.root={course}",
                    "--ExecutePreprocessor.timeout=600"], cwd=course, env=env, check=True, capture_output=True)


@pytest.fixture(scope="module")
def autograded(tmp_path_factory) -> tuple[Path, dict[str, tuple[float, float]]]:
    """Every submission (tests/submissions.py) autograded once: the course folder, and who -> (score, max score)."""
    course = tmp_path_factory.mktemp("nbgrader") / "course"
    (course / "source" / "00").mkdir(parents=True)
    nbformat.write(handout(), course / "source" / "00" / NOTEBOOK)
    _nbgrader(course, "generate_assignment", "00", "--force")
    for who, notebook in submissions().items():
        (course / "submitted" / who / "00").mkdir(parents=True)
        nbformat.write(notebook, course / "submitted" / who / "00" / NOTEBOOK)
    _nbgrader(course, "autograde", "00")
    _nbgrader(course, "export", "--to", str(course / "grades.csv"))
    with open(course / "grades.csv") as f:
        return course, {row["student_id"]: (float(row["score"]), float(row["max_score"])) for row in csv.DictReader(f)}


@pytest.mark.slow
def test_autograde_gives_full_marks_to_a_solved_copy_and_none_to_the_handout(autograded):
    course, scores = autograded
    full = points(handout())
    assert full >= 1
    assert (scores["handout"], scores["solved"]) == ((0.0, full), (full, full))
    # the handout ran top to bottom: the only errors are the checks of the unwritten functions, which raise under
    # the autograder (elsewhere they print a note), so an empty function scores nothing
    graded = nbformat.read(course / "autograded" / "handout" / "00" / NOTEBOOK, as_version=4)
    errors = [(c.metadata.get("exercise_check"), o) for c in graded.cells if c.cell_type == "code"
              for o in c.outputs if o.output_type == "error"]
    assert errors and all(name and o.ename == "NotWritten" and "is not written yet" in o.evalue
                          for name, o in errors)


@pytest.mark.slow
def test_in_the_kernel_the_reviews_one_liner_no_longer_passes_but_other_attacks_do(autograded):
    """The checker judges with names bound privately, so rebinding `checker.same` changes no verdict; code in the
    kernel can still replace `exercises.check` or skip the check cells, and autograde gives those full marks."""
    course, scores = autograded
    full = points(handout())
    assert {who: scores[who] for who in ("one_liner", "patched_check", "skipped_cells")} == {
        "one_liner": (0.0, full), "patched_check": (full, full), "skipped_cells": (full, full)}
    graded = nbformat.read(course / "autograded" / "one_liner" / "00" / NOTEBOOK, as_version=4)
    errors = [o for c in graded.cells if "exercise_check" in c.metadata for o in c.outputs if o.output_type == "error"]
    assert errors and all(o.ename == "CheckFailed" and "it returns zeros" in o.evalue for o in errors)
