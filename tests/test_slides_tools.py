"""Slides: tools/slides.py (RISE metadata, idempotent) and the offline check of tools/export.py."""
from __future__ import annotations

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from tools import export, slides


def small_notebook():
    """A notebook with one cell of every kind the rules distinguish, and the type each should get."""
    figure = new_output("display_data", data={"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"})
    cells_and_types = [
        (new_markdown_cell("<!-- bertlook:header -->\n**BERTLook** · notebook 1"), "skip"),
        (new_markdown_cell("# 01 · A title\n\nWhat this notebook shows."), "slide"),
        (new_code_cell("import numpy as np\nfrom bertlook_utils import viz\n\nviz.use_style()"), "skip"),
        (new_markdown_cell("## Parameters"), "skip"),  # a bare heading above a skipped cell
        (new_code_cell("MODEL = None\nN_SEGMENTS: int = 1000"), "skip"),
        (new_markdown_cell("## A section\nSome text."), "slide"),
        (new_code_cell("x = np.arange(3)\nprint(x)", outputs=[new_output("stream", text="[0 1 2]\n")]), "-"),
        (new_markdown_cell("A take-away after the output."), "fragment"),
        (new_markdown_cell("<!-- notes -->\nSay this out loud."), "notes"),
        (new_markdown_cell("### A subsection"), "subslide"),
        (new_markdown_cell("Text on the same slide before any code."), "-"),
        (new_code_cell("plt.plot(x)\nplt.show()", outputs=[figure]), "-"),
        (new_code_cell("SEED = 0\nrun(SEED)", outputs=[figure]), "-"),  # parameters, but it shows something
        (new_code_cell("   \n"), "skip"),
        (new_code_cell("y = 1", metadata={"tags": ["parameters"]}), "skip"),
    ]
    nb = new_notebook(cells=[cell for cell, _ in cells_and_types])
    return nb, [kind for _, kind in cells_and_types]


def slide_types(nb) -> list[str]:
    return [cell.metadata.get("slideshow", {}).get("slide_type") for cell in nb.cells]


def test_rules_assign_the_expected_slide_types():
    nb, expected = small_notebook()
    assert slides.infer_slide_types(nb) == expected
    assert slides.apply(nb) is True
    assert slide_types(nb) == expected
    assert nb.metadata["rise"]["scroll"] is True and nb.metadata["rise"]["theme"]


def test_apply_is_idempotent_and_keeps_hand_set_types(tmp_path):
    nb, expected = small_notebook()
    nb.cells[6].metadata["slideshow"] = {"slide_type": "fragment"}  # set by hand
    nb.metadata["rise"] = {"theme": "black"}  # chosen by the author
    path = tmp_path / "deck.ipynb"
    nbformat.write(nb, path)
    assert slides.update(path) is True
    first = path.read_text()
    assert slides.update(path) is False  # nothing left to change
    assert path.read_text() == first  # and the file was not rewritten
    assert slides.main(["--check", str(path)]) == 0
    done = nbformat.read(path, as_version=4)
    assert slide_types(done)[6] == "fragment"
    assert done.metadata["rise"]["theme"] == "black" and done.metadata["rise"]["scroll"] is True
    # --reset recomputes every type, the hand-set one too, and is idempotent as well
    assert slides.update(path, reset=True) is True
    assert slide_types(nbformat.read(path, as_version=4)) == expected
    assert slides.update(path, reset=True) is False


def test_check_reports_a_notebook_that_would_change(tmp_path, capsys):
    nb, _ = small_notebook()
    path = tmp_path / "deck.ipynb"
    nbformat.write(nb, path)
    before = path.read_text()
    assert slides.main(["--check", str(path)]) == 1
    assert "would update" in capsys.readouterr().out
    assert path.read_text() == before


def shown(source: str, tags=(), output: str = "1\n"):
    return new_code_cell(source, metadata={"tags": list(tags)} if tags else {},
                         outputs=[new_output("stream", text=output)] if output else [])


def lesson():
    """A section as the notebooks have them: a heading, an intro, two results with a prose cell between them, a take-
    away; then what no slide shows: a claim check, a long printout, the exercises' solutions."""
    cells_and_roles = [
        (new_markdown_cell("# 01 · A lesson"), "slide"),
        (new_markdown_cell("## A section"), "slide"),
        (new_markdown_cell("What the figure below shows."), "text"),
        (shown("plot()"), "result"),
        (shown('claims.say(f"{x}")', ["hide-input"]), "text"),
        (shown("table()"), "result"),
        (new_markdown_cell("What to take away."), "text"),
        (shown("claims.check({'x': True})", ["nbval-check-output"]), "skip"),
        (shown("print(everything)", ["not-on-slides"]), "skip"),
        (new_markdown_cell("### Solutions\n(empty in the student copy)"), "skip"),
        (shown("answer = 42", ["solution"]), "skip"),
    ]
    return new_notebook(cells=[c for c, _ in cells_and_roles]), [r for _, r in cells_and_roles]


def test_roles_hide_checks_printouts_and_solutions_and_read_prose_as_text():
    nb, expected = lesson()
    assert slides.roles(nb) == expected
    assert slides.units(expected) == [[0], [1, 2, 3], [4, 5, 6]]  # the prose introduces the second result
    assert slides.infer_slide_types(nb) == ["slide", "slide", "-", "-", "-", "-", "fragment"] + ["skip"] * 4


def test_fit_breaks_before_a_unit_that_would_overflow_and_splits_one_too_tall_for_any_slide():
    nb, _ = lesson()
    small = {1: 0.1, 2: 0.1, 3: 0.2, 4: 0.1, 5: 0.3, 6: 0.1}  # 0.9 of the canvas in all
    assert slides.infer_slide_types(nb, small)[:7] == ["slide", "slide", "-", "-", "-", "-", "fragment"]
    tall = {**small, 5: 0.5}  # the second unit no longer fits beside the first
    assert slides.infer_slide_types(nb, tall)[:7] == ["slide", "slide", "-", "-", "subslide", "-", "fragment"]
    huge = {**small, 4: 0.7, 5: 0.9, 6: 0.4}  # 2.0 of a canvas: its prose, result and take-away on three slides
    assert slides.infer_slide_types(nb, huge)[:7] == ["slide", "slide", "-", "-", "subslide", "subslide", "subslide"]
    parts = {**small, 4: 0.3, 5: 0.6, 6: 0.3}  # apart, the prose still fits under the first result
    assert slides.infer_slide_types(nb, parts)[:7] == ["slide", "slide", "-", "-", "-", "subslide", "fragment"]


def test_long_code_and_tagged_cells_show_only_their_output_and_short_code_shows():
    long_code = "\n".join(f"x{i} = {i}" for i in range(slides.MAX_CODE_LINES + 1))
    nb = new_notebook(cells=[new_markdown_cell("# T"), shown(long_code), shown("y = 1"),
                             shown("z = 2", ["output-on-slides"]), shown('claims.say("a")', ["hide-input"]),
                             shown(long_code, ["solution"])])
    assert slides.hide_inputs(nb) is True and slides.hide_inputs(nb) is False
    hidden = [c.metadata.get("jupyter", {}).get("source_hidden", False) for c in nb.cells]
    assert hidden == [False, True, False, True, True, False]  # a solution is on no slide: nothing to collapse
    nb.cells[1].source = "x = 1"  # shortened: its code shows again
    assert slides.hide_inputs(nb) is True and "jupyter" not in nb.cells[1].metadata


def test_setup_code_detection():
    assert slides.is_setup_code(new_code_cell("%matplotlib inline\nimport os\nos.environ.get('X')"))
    assert not slides.is_setup_code(new_code_cell("encoder = load_encoder()"))  # lower-case result: real work
    assert not slides.is_setup_code(new_code_cell("def f():\n    return 1"))
    assert not slides.is_setup_code(new_code_cell("import os\nthis is not python"))


@pytest.mark.parametrize("html, found", [
    ('<script src="https://cdn.example.org/require.js"></script>', "https://cdn.example.org/require.js"),
    ('<link rel="stylesheet" href="//fonts.example.com/a.css">', "//fonts.example.com/a.css"),
    ('<img src="http://example.com/figure.png">', "http://example.com/figure.png"),
    ("<script type=\"module\">import m from 'https://cdn.example.org/m.mjs';</script>", "https://cdn.example.org/m.mjs"),
    ("<style>@import url(https://fonts.example.com/css?family=Lato);</style>", "https://fonts.example.com/css"),
    ('<div style="background: url(https://example.com/bg.png)"></div>', "https://example.com/bg.png"),
])
def test_scanner_flags_remote_references(html, found):
    assert any(found in line for line in export.find_remote_urls(html))


def test_scanner_passes_a_clean_deck(tmp_path):
    (tmp_path / "reveal.js/dist/theme").mkdir(parents=True)
    (tmp_path / "reveal.js/dist/theme/white.css").write_text("@import url(fonts/source-sans-pro.css); a {}")
    html = """<html><head>
    <script src="requirejs/require.js"></script>
    <link rel="stylesheet" href="reveal.js/dist/theme/white.css">
    <script>
    // Full list of options: https://github.com/hakimel/reveal.js#configuration (a comment, never fetched)
    var svg = "http://www.w3.org/2000/svg";
    </script>
    <script type="application/vnd.jupyter.widget-state+json">{"url": "https://example.com/"}</script>
    </head><body><a href="https://arxiv.org/abs/1906.04341">a link the reader may click</a>
    <img src="data:image/png;base64,iVBORw0KGgo="></body></html>"""
    deck = tmp_path / "deck.slides.html"
    deck.write_text(html)
    assert export.scan_file(deck) == []
    export.check_offline([deck])


def test_scanner_reads_linked_stylesheets(tmp_path):
    (tmp_path / "theme.css").write_text("@import url(https://fonts.googleapis.com/css?family=Lato);")
    deck = tmp_path / "deck.slides.html"
    deck.write_text('<link rel="stylesheet" href="theme.css"><link rel="stylesheet" href="missing.css">')
    found = export.scan_file(deck)
    assert any("fonts.googleapis.com" in line for line in found)
    assert any("missing.css" in line for line in found)
    with pytest.raises(SystemExit, match="fonts.googleapis.com"):
        export.check_offline([deck])


def test_the_instructor_deck_shows_every_solution_on_a_slide_of_its_own():
    nb, _ = lesson()
    slides.apply(nb, reset=True)
    export.with_solutions(nb)
    types = [c.metadata["slideshow"]["slide_type"] for c in nb.cells]
    assert types[9:] == ["subslide", "subslide"] and types[7:9] == ["skip", "skip"]  # checks stay off the slides


NOTEBOOKS = sorted((export.ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem[:2])
def test_the_committed_slides_follow_the_rules_but_for_measured_breaks(path):
    """Every cell's slide type is the rules' (`make notebooks` runs tools/slides.py), except where --fit started a
    sub-slide; and the inputs the slides collapse are collapsed."""
    nb = nbformat.read(path, as_version=4)
    assert slides.hide_inputs(nb) is False, "run `python -m tools.slides --fit` (or make notebooks)"
    ruled = slides.infer_slide_types(nb)
    committed = [cell.metadata.get("slideshow", {}).get("slide_type") for cell in nb.cells]
    differ = [(i, rule, kind) for i, (rule, kind) in enumerate(zip(ruled, committed))
              if kind != rule and not (kind == "subslide" and rule in ("-", "fragment"))]
    assert differ == [], "run `python -m tools.slides --fit` (or make notebooks)"
