"""Slides that fit the canvas and show only what a class should see: tools/slide_fit.py, and `make slides` failing
on a slide that is too tall.

The browser tests export tiny talks (a notebook in a `slides/` folder under tmp_path) and open them in
headless chromium, as tests/test_browser.py does: a planted tall slide fails the export, naming deck, slide and
height; a small deck passes; a tall figure is capped so that the line under it stays on the canvas.
"""
from __future__ import annotations

import base64
import io
import subprocess
import sys

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from tools import export, slide_fit

ROOT = export.ROOT
needs_chromium = pytest.mark.skipif(not slide_fit.chromium_available(),
                                    reason="Debian chromium is not installed (make browser)")


def slide(deck="talk.slides.html", number=2, height=801, shown=None, canvas=800):
    return slide_fit.Slide(deck, number, 1, 0, height, height if shown is None else shown, canvas, "A title")


def test_a_slide_overflows_when_taller_than_its_canvas_or_its_scroll_box():
    assert slide(height=801).overflows
    assert not slide(height=800).overflows
    assert slide(height=773, shown=770).overflows  # fits the canvas, but the deck made it scroll
    assert str(slide(height=843)) == ("talk.slides.html: slide 2 (#/1/0) is 843 px tall on the 800-px canvas: "
                                      "'A title'")
    assert str(slide(height=773, shown=770)) == ("talk.slides.html: slide 2 (#/1/0) is 773 px tall (shown in a "
                                                 "770-px scroll box) on the 800-px canvas: 'A title'")


def test_summary_names_the_count_the_decks_and_the_tallest_slide():
    slides = [slide("a.slides.html", 1, 500), slide("a.slides.html", 2, 784), slide("b.slides.html", 1, 600)]
    assert slide_fit.summary(slides) == ("3 slides in 2 deck(s) fit the canvas "
                                         "(tallest: a.slides.html slide 2, 784 of 800 px)")
    assert slide_fit.summary([]) == "no slides"


def notebook_with(*cells):
    return new_notebook(cells=[new_markdown_cell("# A title"), *cells])


def test_problems_name_what_a_class_should_not_see(tmp_path):
    prose = new_code_cell('claims.say(f"{x}")', metadata={"tags": ["hide-input"]},
                          outputs=[new_output("execute_result", data={"text/markdown": "1"}, execution_count=1)])
    solution = new_code_cell("def f():\n    return 1", metadata={"tags": ["solution"]})
    shown = new_code_cell("print(1)", outputs=[new_output("stream", text="1\n")])
    path = tmp_path / "01_deck.ipynb"
    nbformat.write(notebook_with(prose, solution, shown), path)
    clean = slide_fit.Slide("01_deck.ipynb", 1, 0, 0, 500, 500, 729, "A title", ((0, 100), (1, 50), (3, 40)), (3,))
    assert slide_fit.problems([clean], [path]) == []
    bad = slide_fit.Slide("01_deck.ipynb", 2, 1, 0, 800, 729, 729, "", ((1, 50), (2, 200)), (1, 2), marker=True)
    found = slide_fit.problems([bad], [path])
    assert found[0].startswith("01_deck.ipynb: slide 2 (#/1/0) is 800 px tall on the 729-px canvas")
    assert "slide 2 shows the code of cell 1 ('claims.say(f\"{x}\")')" in found[1]
    assert "slide 2 shows cell 2, which no slide should ('def f():" in found[2]
    assert found[3] == "01_deck.ipynb: slide 2 shows a test marker" and len(found) == 4


def talk(tmp_path, *cells, kind: str = "slide") -> tuple:
    """A talk notebook at tmp_path/slides/talk.ipynb: a title slide, then one slide (`kind`) of `cells`."""
    cells[0].metadata["slideshow"] = {"slide_type": kind}
    nb = new_notebook(cells=[new_markdown_cell("# A tiny talk", metadata={"slideshow": {"slide_type": "slide"}}),
                             *cells])
    path = tmp_path / "slides" / "talk.ipynb"
    path.parent.mkdir()
    nbformat.write(nb, path)
    return path, tmp_path / "out"


def export_slides(path, out) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tools.export", "--to", "slides", "--out", str(out), str(path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)


def png(width_in: float, height_in: float) -> str:
    """A base64 PNG of width_in x height_in inches at 100 dpi (a blank figure)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(width_in, height_in), dpi=100)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode()


@pytest.mark.browser
@needs_chromium
def test_a_planted_tall_slide_fails_the_export_naming_deck_slide_and_height(tmp_path):
    bullets = "\n".join(f"- point {i}" for i in range(40))
    result = export_slides(*talk(tmp_path, new_markdown_cell(f"## Too much on one slide\n\n{bullets}")))
    assert result.returncode != 0, result.stdout
    assert "talk.slides.html: slide 2 (#/1/0) is" in result.stderr, result.stderr
    assert "px tall on the 768-px canvas: 'Too much on one slide'" in result.stderr


@pytest.mark.browser
@needs_chromium
def test_a_small_deck_passes_and_a_tall_figure_leaves_room_for_its_badge_line(tmp_path):
    """A sub-slide of a heading, four points, a figure five canvases tall and the badge line under it: the
    figure is capped (notebooks/rise.css), and the slide is shown whole on the 1024 x 768 canvas, not in a
    scroll box."""
    figure = new_code_cell("figure_and_badge()", metadata={"tags": ["hide-input"]}, outputs=[
        new_output("display_data", data={"image/png": png(4, 20)}),  # 400 x 2000 px
        new_output("execute_result", data={"text/html": "<p>paper vs this run: the conclusion</p>"},
                   execution_count=1)])
    points = "\n".join(f"- point {i}" for i in range(4))
    path, out = talk(tmp_path, new_markdown_cell(f"## A figure and its conclusion\n\n{points}"), figure,
                     kind="subslide")
    result = export_slides(path, out)
    assert result.returncode == 0, result.stderr
    assert "2 slides in 1 deck(s) fit the canvas" in result.stdout
    shown = slide_fit.measure([out / "talk.slides.html"])[1]
    assert 0.5 * slide_fit.PROJECTOR["height"] < shown.height <= shown.canvas == 768
    assert shown.shown == shown.height
