"""The notebooks' generated structure: header and navigation cells, contents tables, student copies."""
from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest

from tools import navigation, student_copy

ROOT = Path(__file__).resolve().parents[1]

NOTEBOOKS = navigation.notebooks()


@pytest.fixture
def repo_copy(tmp_path):
    """README.md and the notebooks (with the student folder) copied to a scratch root."""
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks")
    return tmp_path


def test_there_are_notebooks():
    assert [p.name[:2] for p in NOTEBOOKS] == sorted(p.name[:2] for p in NOTEBOOKS)
    assert len(NOTEBOOKS) >= 3


def test_committed_navigation_and_contents_are_up_to_date(repo_copy):
    assert navigation.update(repo_copy) == [], "run `python -m tools.navigation` (or `make notebooks`)"


def test_navigation_is_idempotent_and_keeps_one_header_and_footer(repo_copy):
    first = repo_copy / "notebooks" / NOTEBOOKS[0].name
    nb = nbformat.read(first, as_version=4)
    nb.cells = [c for c in nb.cells if navigation.HEADER not in c.source and navigation.NAV not in c.source]
    nbformat.write(nb, first)  # as if the header and footer had never been added
    assert first in navigation.update(repo_copy)
    assert navigation.update(repo_copy) == []
    cells = nbformat.read(first, as_version=4).cells
    assert navigation.HEADER in cells[0].source and navigation.NAV in cells[-1].source
    assert sum(navigation.HEADER in c.source or navigation.NAV in c.source for c in cells) == 2


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_notebook_links_its_neighbours(path):
    cells = nbformat.read(path, as_version=4).cells
    i = NOTEBOOKS.index(path)
    for cell in (cells[0], cells[-1]):
        assert "[Contents](README.md)" in cell.source
        if i > 0:
            assert f"({NOTEBOOKS[i - 1].name})" in cell.source
        if i + 1 < len(NOTEBOOKS):
            assert f"({NOTEBOOKS[i + 1].name})" in cell.source
    assert navigation.course()["notebooks"][path.stem]["reproduces"] in cells[0].source


def test_readme_lists_every_notebook():
    readme = (ROOT / "README.md").read_text()
    for path in NOTEBOOKS:
        assert f"(notebooks/{path.name})" in readme


def test_student_copies_are_in_sync():
    stale = [str(p.relative_to(ROOT)) for p, text in student_copy.expected().items()
             if not p.exists() or p.read_text() != text]
    assert not stale, f"run `python -m tools.student_copy`: {stale}"
    extra = set((ROOT / "notebooks" / "student").iterdir()) - set(student_copy.expected())
    assert not extra
    for path in (ROOT / "notebooks" / "student").glob("*.ipynb"):
        nb = nbformat.read(path, as_version=4)
        assert "widgets" not in nb.metadata, f"{path.name} keeps saved widget state"
        assert not any(cell.get("outputs") for cell in nb.cells), f"{path.name} keeps outputs"


def test_student_version_strips_outputs_and_solutions_only():
    nb = nbformat.v4.new_notebook()
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {"x": {}}}}
    nb.cells = [nbformat.v4.new_markdown_cell("# 01 · x\n1. Find the head."),
                nbformat.v4.new_code_cell("print(1)", outputs=[nbformat.v4.new_output("stream", text="1\n")],
                                          execution_count=3),
                nbformat.v4.new_code_cell("answer = 42", metadata={"tags": ["solution"]})]
    student = student_copy.student_version(nb)
    assert student.cells[0].source == nb.cells[0].source
    assert student.cells[1].source == "print(1)" and student.cells[1].outputs == []
    assert student.cells[1].execution_count is None
    assert student.cells[2].source == student_copy.ANSWER and "answer" in student.cells[2].metadata["tags"]
    assert "widgets" not in student.metadata and "widgets" in nb.metadata  # no saved widget state
    assert nb.cells[2].source == "answer = 42"  # the original is untouched


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_notebook_has_its_frame_recall_questions_and_solutions(path):
    cells = nbformat.read(path, as_version=4).cells
    title = next(i for i, c in enumerate(cells) if c.cell_type == "markdown" and c.source.startswith("# "))
    assert "**The claim.**" in cells[title + 1].source and "**Predict first.**" in cells[title + 1].source
    sources = [c.source for c in cells]
    takeaways = sources.index("## Takeaways")
    assert cells[takeaways + 1].cell_type == "code" and "claims.takeaways(" in sources[takeaways + 1]
    recall = next(s for s in sources if s.startswith("## Check your understanding"))
    questions = recall.split("<details>")[1:]
    assert len(questions) >= 3
    for question, before in zip(questions, recall.split("<details>")[:-1]):
        options = [line for line in before.split("</details>")[-1].splitlines() if line.startswith("- (")]
        explained = [line for line in question.split("</details>")[0].splitlines() if line.startswith("- (")]
        assert len(options) >= 3 and len(explained) == len(options), "every option needs its explanation"
    assert any(s.startswith("### Solutions") for s in sources)
    assert any("solution" in c.metadata.get("tags", []) and "exercise" not in c.metadata for c in cells)
    assert sources.index("## Takeaways") < next(i for i, s in enumerate(sources) if s.startswith("## Exercises"))


def test_student_copies_rename_the_solutions_and_carry_nbgrader_metadata():
    student = student_copy.student_version(nbformat.read(NOTEBOOKS[0], as_version=4))
    assert not any(c.source.startswith("### Solutions") for c in student.cells)
    assert any(c.source.startswith("### Your answers") for c in student.cells)
    graded = [c.metadata["nbgrader"] for c in student.cells if "nbgrader" in c.metadata]
    solutions = [g for g in graded if g["solution"]]
    tests = [g for g in graded if g["grade"]]
    assert solutions and len(tests) == len(solutions) and all(t["locked"] and t["points"] > 0 for t in tests)
    assert all(c.metadata["editable"] is False for c in student.cells if c.metadata.get("nbgrader", {}).get("grade"))
    assert len({g["grade_id"] for g in graded}) == len(graded)
    assert all(c.source.startswith("# Your answer") for c in student.cells if "answer" in c.metadata.get("tags", [])
               and "exercise" not in c.metadata)


def test_the_syllabus_covers_every_notebook_and_plans_three_labs_and_a_lecture():
    index = (ROOT / "notebooks" / "README.md").read_text()
    syllabus = index[index.index("## Syllabus"):]
    assert all(f"({p.name})" in syllabus for p in NOTEBOOKS)
    assert syllabus.count("- **Lab ") == 3 and "90-minute lecture" in syllabus
    course = navigation.course()
    assert list(course["notebooks"]) == [p.stem for p in NOTEBOOKS]
    fields = {"paper", "reproduces", "shows", "goals", "needs", "walk_minutes", "exercise_minutes"}
    assert all(set(about) == fields for about in course["notebooks"].values())
    assert {s for session in course["sessions"] for s in session["notebooks"]} == {p.stem for p in NOTEBOOKS}
