"""The notebooks' generated structure: header and navigation cells, contents tables, student copies."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import nbformat
import pytest

from tools import exercise_cells, navigation, student_copy

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
    cells = [c for c in nbformat.read(path, as_version=4).cells if not c.source.startswith("<!-- notes -->")]
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


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_student_reads_all_the_code_that_slides_collapse(path):
    nb = nbformat.read(path, as_version=4)
    student = student_copy.student_version(nb)
    collapsed = [c for c in nb.cells if c.metadata.get("jupyter", {}).get("source_hidden")]
    assert any("hide-input" not in c.metadata.get("tags", []) for c in collapsed)  # long code, on the slides
    assert all("hide-input" in c.metadata.get("tags", []) for c in student.cells
               if c.metadata.get("jupyter", {}).get("source_hidden"))  # only prose stays collapsed


def test_no_test_marker_in_a_cell_a_class_reads():
    for path in [*NOTEBOOKS, ROOT / "slides" / "bertlook_talk.ipynb"]:
        sources = [c.source for c in nbformat.read(path, as_version=4).cells]
        assert not any("NBVAL_" in source for source in sources), f"{path.name}: nbval reads tags (nbval-check-output)"


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


def test_the_syllabus_covers_every_notebook_and_plans_four_labs_and_a_lecture():
    index = (ROOT / "notebooks" / "README.md").read_text()
    syllabus = index[index.index("## Syllabus"):]
    assert all(f"({p.name})" in syllabus for p in NOTEBOOKS)
    assert syllabus.count("- **Lab ") == 4 and "90-minute lecture" in syllabus
    course = navigation.course()
    assert list(course["notebooks"]) == [p.stem for p in NOTEBOOKS]
    fields = {"paper", "reproduces", "shows", "goals", "needs", "walk_minutes", "exercise_minutes"}
    assert all(set(about) == fields for about in course["notebooks"].values())
    assert {s for session in course["sessions"] for s in session["notebooks"]} == {p.stem for p in NOTEBOOKS}


def tagged(cells, tag: str) -> list[int]:
    return [k for k, cell in enumerate(cells) if tag in cell.metadata.get("tags", [])]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_notebook_asks_one_written_analysis_with_its_rubric_after_it(path):
    """One open question about a figure, in the exercises section, and right after it the instructor's rubric:
    what a full answer mentions, in words (results are read off the rendered notebook, never typed), on no slide."""
    cells = nbformat.read(path, as_version=4).cells
    questions, rubrics = tagged(cells, student_copy.QUESTION), tagged(cells, student_copy.RUBRIC)
    assert len(questions) == 1 and rubrics == [questions[0] + 1]
    question, rubric = cells[questions[0]], cells[rubrics[0]]
    assert question.cell_type == rubric.cell_type == "markdown"
    assert "### Written analysis" in question.source and re.search(r"\bfigure\b", question.source, re.I)
    sources = [cell.source for cell in cells]
    exercises = next(k for k, s in enumerate(sources) if s.startswith("## Exercises"))
    solutions = next(k for k, s in enumerate(sources) if s.startswith("### Solutions"))
    assert exercises < questions[0] < solutions
    assert len([line for line in rubric.source.splitlines() if line.startswith("- ")]) >= 3
    assert not re.search(r"\d\s*%|\d\.\d", rubric.source), "a rubric refers to results, it does not type them"
    assert rubric.metadata["slideshow"]["slide_type"] == "skip"


def test_a_student_copy_keeps_the_question_and_leaves_an_empty_cell_for_the_rubric():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("### Written analysis\nLook at the figure.",
                                      metadata={"tags": ["written-analysis"]}),
        nbformat.v4.new_markdown_cell("**Rubric**\n- mentions the sink", metadata={"tags": ["rubric"]})])
    student = student_copy.student_version(nb)
    assert student.cells[0].source == nb.cells[0].source
    assert student.cells[1].source == student_copy.WRITTEN_ANSWER
    assert student.cells[1].metadata["tags"] == ["written-answer"]
    assert nb.cells[1].source.startswith("**Rubric**")  # the original is untouched


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_committed_student_copies_ask_the_written_analysis_without_its_rubric(path):
    cells = nbformat.read(path, as_version=4).cells
    (question,), (rubric,) = tagged(cells, student_copy.QUESTION), tagged(cells, student_copy.RUBRIC)
    student = nbformat.read(ROOT / "notebooks" / "student" / path.name, as_version=4).cells
    (asked,) = tagged(student, student_copy.QUESTION)
    assert student[asked].source == cells[question].source
    assert student[asked + 1].source == student_copy.WRITTEN_ANSWER
    assert not tagged(student, student_copy.RUBRIC)
    points = [line[2:] for line in cells[rubric].source.splitlines() if line.startswith("- ")]
    text = "\n".join(cell.source for cell in student)
    assert "bertlook:rubric" not in text and not any(point in text for point in points)


READER_COPIES = [*NOTEBOOKS, ROOT / "slides" / "bertlook_talk.ipynb",
                 *sorted((ROOT / "notebooks" / "student").glob("*.ipynb"))]
COLUMN_GAP = re.compile(r"\S {2,}(?=\S)")  # two spaces or more between two words: a column of a printed table


def visible_code(nb) -> list:
    """The code cells a reader sees: all but those tagged hide-input (the prose cells, the talk's hidden cells)."""
    return [c for c in nb.cells if c.cell_type == "code" and "hide-input" not in c.metadata.get("tags", [])]


def wide_code(nb, width: int = exercise_cells.WIDTH) -> list[str]:
    """'cell id: line' for each line over `width` characters in the visible code cells of `nb`."""
    return [f"{c.get('id')}: {line}" for c in visible_code(nb) for line in c.source.splitlines() if len(line) > width]


def wide_tables(nb, width: int = exercise_cells.WIDTH) -> list[str]:
    """'cell id: line' for each line of a printed table (two column gaps or more) over `width` characters in the
    stored text outputs of the visible code cells; an output with HTML is seen as HTML (`tables.show`), not checked."""
    texts = [(c.get("id"), o.get("text") or o.get("data", {}).get("text/plain", ""))
             for c in visible_code(nb) for o in c.get("outputs", []) if "text/html" not in o.get("data", {})]
    return [f"{cell}: {line}" for cell, text in texts for line in "".join(text).splitlines()
            if len(line) > width and len(COLUMN_GAP.findall(line)) >= 2]


@pytest.mark.parametrize("path", READER_COPIES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_code_a_reader_sees_fits_the_column(path):
    assert wide_code(nbformat.read(path, as_version=4)) == [], (
        f"lines over {exercise_cells.WIDTH} columns: `ruff format --line-length {exercise_cells.WIDTH}` the cell")


@pytest.mark.parametrize("path", READER_COPIES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_printed_tables_fit_the_column(path):
    assert wide_tables(nbformat.read(path, as_version=4)) == [], "show a wide table with tables.show, not print"


def test_a_planted_wide_line_and_table_are_flagged():
    long_line = "x = " + " + ".join(["10"] * 23) + " + 1"  # 120 characters
    table = "name" + " " * 40 + "first column" + " " * 40 + "second column"
    shown = nbformat.v4.new_code_cell("print(frame)", outputs=[nbformat.v4.new_output("stream", text=table + "\n")])
    hidden = nbformat.v4.new_code_cell(long_line, metadata={"tags": ["hide-input"]})
    as_html = nbformat.v4.new_code_cell("tables.show(frame)", outputs=[nbformat.v4.new_output(
        "display_data", data={"text/plain": table, "text/html": "<table></table>"})])
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(long_line), shown, hidden, as_html])
    assert len(long_line) == 120 and len(table) > 88
    assert wide_code(nb) == [f"{nb.cells[0].get('id')}: {long_line}"]
    assert wide_tables(nb) == [f"{shown.get('id')}: {table}"]
    assert wide_tables(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(s)", outputs=[
        nbformat.v4.new_output("stream", text="a sentence of prose, " * 6)])])) == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_section_opens_with_speaker_notes(path):
    """The teacher's notes (T in the live slideshow, S in a deck) on the title and every content section."""
    cells = nbformat.read(path, as_version=4).cells
    sections = [i for i, c in enumerate(cells) if c.cell_type == "markdown" and c.source.startswith(("# ", "## "))
                and not c.source.startswith(("## Parameters", "## Check your", "## Exercises"))]
    bare = [cells[i].source.splitlines()[0] for i in sections
            if not (i + 1 < len(cells) and cells[i + 1].source.startswith("<!-- notes -->"))]
    assert bare == [], "add a `<!-- notes -->` cell after these headings"
