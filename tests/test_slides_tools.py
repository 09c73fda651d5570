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
