"""The static book (`make book`): both editions built once (python -m tools.book, about 10-20 s each; the `books`
fixture of tests/conftest.py, which tests/test_accessibility.py shares).

Unit: a student copy takes the instructor's outputs on the cells they share, never on answer or check cells; the
landing page holds the syllabus with its links pointed at the book's pages.
Slow (the built HTML): the student edition holds no solution line that the instructor edition shows; every page of
each edition carries its banner; the author is set; the landing page is the course page and the README is the
developers' page; every relative link of every page leads to a file.
Browser (Debian chromium via playwright, offline): the student edition's landing page with its banner, a search
that finds notebook 03, notebook 00 reached from the left-hand navigation with every figure loaded, its formulas
typeset, its explorer drawn from the saved widget state, its BertViz view drawn, and no request leaving this
machine. Screenshots go to build/screenshots/book_*.png.
"""
from __future__ import annotations

import html
import re

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output

from browser import ROOT, browser_page, chromium_available, screenshot
from test_browser import assert_offline, assert_tour_bertviz
from tools import book

BANNER = {"student": "Student edition", "instructor": "Instructor edition"}
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def test_a_student_copy_takes_the_instructors_outputs_but_not_on_answers_and_checks():
    figure = new_output("display_data", data={"image/png": "iVBOR", "text/plain": "<Figure>"})
    checked = new_output("stream", text="✓ f: right on 3 inputs\n")
    instructor = new_notebook(cells=[
        new_code_cell("plot()", id="plot", outputs=[figure], execution_count=3),
        new_code_cell("def f():\n    return 1", id="solve", outputs=[]),
        new_code_cell("check(f)", id="check", outputs=[checked], metadata={"nbgrader": {"grade": True}}),
        new_code_cell("# Exercise 1\nprint(2)", id="ex1", outputs=[new_output("stream", text="2\n")],
                      metadata={"tags": ["solution"]}),
        new_code_cell("table()", id="moved", outputs=[new_output("stream", text="old\n")])],
        metadata={"widgets": {"state": {"w": 1}}})
    student = new_notebook(cells=[
        new_code_cell("plot()", id="plot"),
        new_code_cell("def f():\n    raise NotImplementedError()", id="solve", metadata={"tags": ["answer"]}),
        new_code_cell("check(f)", id="check", metadata={"nbgrader": {"grade": True}, "tags": ["raises-exception"]}),
        new_code_cell("# Your answer to exercise 1", id="ex1", metadata={"tags": ["answer"]}),
        new_code_cell("table(sorted=True)", id="moved")])
    assert book.student_notebook(student, instructor) == ["moved"]
    assert [len(cell.outputs) for cell in student.cells] == [1, 0, 0, 0, 0]
    assert student.cells[0].outputs == [figure] and student.cells[0].execution_count == 3
    assert student.metadata["widgets"] == {"state": {"w": 1}}


def test_the_landing_page_holds_the_syllabus_and_links_to_the_books_pages():
    pages = set(book.sources())
    text = book.landing(f"[start](../notebooks/BEFORE_CLASS.md), [dev](../README.md)\n\n{book.SYLLABUS}\n", pages)
    assert text.startswith("[start](notebooks/BEFORE_CLASS.md), [dev](developers.md)")
    assert book.SYLLABUS not in text and "## Syllabus" in text
    assert f"]({NOTEBOOKS[0].relative_to(ROOT).as_posix()})" in text  # the syllabus's links, seen from index.md


def page_text(path) -> str:
    """An HTML page's text: tags dropped (the code's highlighting too), entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", path.read_text(encoding="utf-8")))


def solution_lines(path) -> list[str]:
    """The lines of a notebook's solutions (its cells tagged "solution") that no other cell of it, and no cell of
    its student copy, holds: only a solution can show them."""
    nb = nbformat.read(path, as_version=4)
    student = nbformat.read(path.parent / "student" / path.name, as_version=4)
    solutions = [cell for cell in nb.cells if "solution" in cell.metadata.get("tags", [])]
    elsewhere = "\n".join(cell.source for cell in student.cells + [c for c in nb.cells if c not in solutions])
    return [line.strip() for cell in solutions for line in cell.source.splitlines()
            if len(line.strip()) >= 20 and line.strip() not in elsewhere and "SOLUTION" not in line]


@pytest.mark.slow
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda path: path.stem[:2])
def test_the_student_edition_shows_no_solution(books, notebook):
    lines = solution_lines(notebook)
    assert lines, "no solution to look for"
    student, instructor = (page_text(books[e] / "notebooks" / f"{notebook.stem}.html") for e in books)
    assert [line for line in lines if line not in instructor] == []
    assert [line for line in lines if line in student] == []
    assert "raise NotImplementedError()" in student and "raise NotImplementedError()" not in instructor


@pytest.mark.slow
@pytest.mark.parametrize("edition", BANNER)
def test_every_page_carries_its_edition_and_the_author(books, edition):
    pages = [path for path in books[edition].rglob("*.html") if "_static" not in path.parts]
    assert len(pages) > len(NOTEBOOKS)
    for path in pages:
        text = path.read_text(encoding="utf-8")
        banner = re.search(r'<aside class="bd-header-announcement".*?</aside>', text, flags=re.S)
        assert banner and BANNER[edition] in banner.group(0), path
        other = next(label for label in BANNER.values() if label != BANNER[edition])
        assert other not in text, path
    assert "By BERTLook contributors" in re.sub(r"\s+", " ", page_text(books[edition] / "index.html"))


@pytest.mark.slow
def test_the_landing_page_is_the_course_and_the_readme_is_for_developers(books):
    folder = books["student"]
    landing, developers = page_text(folder / "index.html"), page_text(folder / "developers.html")
    for heading in ("How a student starts", "Syllabus", "The talk", "Finding your way", "For developers"):
        assert heading in landing
    assert "When the input is wrong" not in landing and "torchrun" not in landing
    index = (folder / "index.html").read_text(encoding="utf-8")
    for target in ("notebooks/BEFORE_CLASS.html", "slides/bertlook_talk.html", "developers.html",
                   "notebooks/00_tour.html"):
        assert f'href="{target}' in index, target
    for heading in ("When the input is wrong", "Scale: many segments", "Architecture", "make run"):
        assert heading in developers


@pytest.mark.slow
@pytest.mark.parametrize("edition", BANNER)
def test_every_link_leads_to_a_file(books, edition):
    folder = books[edition]
    broken = []
    for path in folder.rglob("*.html"):
        if "_static" in path.parts:
            continue
        for target in re.findall(r'href="([^"#?]+)', path.read_text(encoding="utf-8")):
            if not re.match(r"[a-z]+:|/", target) and not (path.parent / html.unescape(target)).exists():
                broken.append(f"{path.relative_to(folder)} -> {target}")
    assert broken == []


def assert_images_loaded(page) -> None:
    page.wait_for_load_state("load")
    images = page.locator("article img")
    assert images.count() > 0, "no figures on the page"
    broken = page.evaluate("[...document.querySelectorAll('article img')]"
                           ".filter(img => !(img.complete && img.naturalWidth > 0)).map(img => img.src.slice(-60))")
    assert not broken, f"figures that did not load: {broken}"


@pytest.mark.browser
@pytest.mark.skipif(not chromium_available(), reason="Debian chromium is not installed (make setup)")
def test_book_searches_navigates_and_shows_figures_offline(books):
    out = books["student"]  # the default edition: the student copies with the instructor's outputs
    with browser_page(1400, 1000) as (page, requests):
        page.goto((out / "index.html").as_uri())
        page.wait_for_selector("nav.bd-links a")
        assert page.locator(".bd-header-announcement").inner_text().startswith(BANNER["student"])
        screenshot(page, "book_landing.png")

        page.locator(".search-button-field:visible").first.click()
        page.locator("#pst-search-dialog input[type=search]").fill("entropy")
        page.keyboard.press("Enter")
        page.wait_for_url("**/search.html?q=entropy*")
        page.wait_for_selector("#search-results ul.search li a", timeout=30_000)
        results = page.locator("#search-results ul.search li a").evaluate_all("links => links.map(a => a.href)")
        assert any(url.split("?")[0].endswith("notebooks/03_entropy.html") for url in results), results
        screenshot(page, "book_search_entropy.png")

        page.locator("nav.bd-links a", has_text="00 · A tour of attention in BERT").first.click()
        page.wait_for_url("**/notebooks/00_tour.html")
        assert_images_loaded(page)
        page.locator(".MathJax_CHTML").first.wait_for(timeout=30_000)  # the local MathJax typeset the formulas
        screenshot(page, "book_00_tour.png")

        explorer = page.locator(".bertlook-head-explorer").first  # drawn from the saved widget state
        explorer.scroll_into_view_if_needed()
        explorer.locator("img").first.wait_for(state="visible", timeout=30_000)
        screenshot(page, "book_00_tour_explorer.png")

        assert_tour_bertviz(page, "book_00_tour_bertviz.png")
        assert_offline(requests)
