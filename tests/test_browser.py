"""End-to-end tests in a real browser (Debian chromium via playwright), offline.

(a) an exported notebook page shows the BertViz view with attention lines and token labels;
(b) a slide deck advances to slide 2 and shows its figure;
(c) JupyterLab on localhost opens 00_tour, runs every cell, a widget change redraws the heatmap and the
    BertViz view renders.
Each test asserts that no request left this machine and saves a screenshot under build/screenshots/.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import time

import pytest

from browser import ROOT, browser_page, chromium_available, is_local, jupyterlab, run_all, screenshot

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not chromium_available(), reason="Debian chromium is not installed (make setup)")]
TOUR = ROOT / "notebooks" / "00_tour.ipynb"


def assert_offline(requests: list[str]) -> None:
    remote = sorted({url for url in requests if not is_local(url)})
    assert not remote, f"requests left this machine: {remote[:10]}"


def bertviz_frame(page, timeout_s: float = 30):
    """The first frame that holds a BertViz drawing (an <svg> with token labels)."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        for frame in page.frames:
            try:
                if frame.locator("svg text").count() > 2:
                    return frame
            except Exception:  # a frame that navigated away meanwhile
                continue
        time.sleep(0.5)
    raise AssertionError("no frame with a BertViz SVG appeared")


def assert_bertviz_drawn(frame, tokens: list[str]) -> None:
    labels = [t.strip() for t in frame.locator("svg text").all_text_contents()]
    assert any(token in labels for token in tokens), f"token labels missing: {labels[:20]}"
    lines = frame.locator("svg line, svg path").count()
    assert lines > len(tokens), f"only {lines} attention lines drawn"


def assert_tour_bertviz(page, shot: str) -> None:
    """Notebook 00's BertViz view is drawn on `page` (its example pair's tokens and lines); saves a screenshot."""
    frame = bertviz_frame(page)
    frame.locator("svg").first.scroll_into_view_if_needed()
    assert_bertviz_drawn(frame, ["chef", "soup"])
    screenshot(page, shot)


def test_exported_notebook_shows_bertviz(tmp_path):
    subprocess.run([sys.executable, "-m", "tools.export", "--to", "html", "--out", str(tmp_path),
                    str(TOUR)], check=True, cwd=ROOT)
    page_path = tmp_path / "00_tour.html"
    with browser_page() as (page, requests):
        page.goto(page_path.as_uri())
        assert_tour_bertviz(page, "export_00_tour_bertviz.png")
        assert_offline(requests)


def test_slide_deck_advances_to_slide_two_with_a_figure(tmp_path):
    subprocess.run([sys.executable, "-m", "tools.export", "--to", "slides", "--out", str(tmp_path),
                    str(ROOT / "slides" / "bertlook_talk.ipynb")], check=True, cwd=ROOT)
    deck = next(tmp_path.glob("*.slides.html"))
    with browser_page(1280, 800) as (page, requests):
        page.goto(deck.as_uri())
        page.wait_for_selector(".reveal.ready .slides section.present")
        page.keyboard.press("ArrowRight")
        page.wait_for_function("location.hash === '#/1'")
        page.wait_for_timeout(1500)  # let the fade between slides finish before looking
        present = page.locator(".reveal .slides > section.present")
        figure = present.locator("img, svg").first
        figure.wait_for(state="visible", timeout=10_000)
        assert figure.bounding_box()["width"] > 200
        screenshot(page, "slides_talk_slide2.png")
        assert_offline(requests)


def assert_explorer_keyboard(page, explorer, image) -> None:
    """From the keyboard alone: Tab from the example menu reaches the layer and the head menus, each named by its
    label; an arrow key changes the head and the figure is redrawn, its alt text naming the new head."""
    names = explorer.locator("select").evaluate_all("menus => menus.map(m => m.labels.length ? m.labels[0].textContent"
                                                    " : m.getAttribute('aria-label'))")
    assert [name.strip() for name in names] == ["example", "layer", "head"], names
    before = image.get_attribute("src")
    head_menu = explorer.locator("select").nth(2)
    chosen = "m => m.options[m.selectedIndex].text.trim()"
    head = int(head_menu.evaluate(chosen))
    explorer.locator("select").first.focus()
    for label in ("layer", "head"):
        page.keyboard.press("Tab")
        focused = page.evaluate("() => { const e = document.activeElement; return e.tagName + ' ' + "
                                "(e.labels && e.labels.length ? e.labels[0].textContent : ''); }")
        assert focused.strip() == f"SELECT {label}", focused
    page.keyboard.press("ArrowDown")  # the next head
    page.wait_for_function("(before) => { const img = document.querySelector('.bertlook-head-explorer "
                           ".jp-OutputArea-output img'); return img && img.src !== before; }", arg=before,
                           timeout=30_000)
    assert int(head_menu.evaluate(chosen)) == head + 1
    assert f"-{head + 1}: heatmap" in image.get_attribute("alt")


def test_jupyterlab_runs_the_tour_with_live_widgets_and_bertviz(tmp_path):
    shutil.copy(TOUR, tmp_path / TOUR.name)  # JupyterLab saves what it runs: work on a copy
    with jupyterlab(tmp_path) as (url, token), browser_page(1400, 1000) as (page, requests):
        run_all(page, url, token, TOUR.name)
        errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr'] .jp-RenderedText"
                              ", .jp-RenderedText[data-mime-type='application/vnd.jupyter.error']")
        assert errors.count() == 0, errors.first.inner_text()[:500]

        explorer = page.locator(".bertlook-head-explorer").first
        explorer.scroll_into_view_if_needed()
        image = explorer.locator(".jp-OutputArea-output img").first
        image.wait_for(state="visible", timeout=30_000)
        assert len(image.get_attribute("alt")) > 40  # the figure says what it shows
        assert_explorer_keyboard(page, explorer, image)
        screenshot(page, "lab_00_tour_explorer.png")

        # the learner's own text: typed into the box, encoded, added to the menu, drawn
        before = image.get_attribute("src")
        box = explorer.locator(".widget-text input").first
        box.fill("The cat sat on the mat. | It was warm.")
        box.press("Enter")
        page.wait_for_function("(before) => { const img = document.querySelector('.bertlook-head-explorer "
                               ".jp-OutputArea-output img'); return img && img.src !== before; }", arg=before,
                               timeout=30_000)
        assert "The cat sat on the mat." in explorer.locator("select").first.evaluate(
            "select => select.options[select.selectedIndex].text").replace("\xa0", " ")  # ipywidgets pads with nbsp
        # in Lab only the live widget shows: no static snapshot beside it in the cell's output
        outside = page.evaluate("""() => {
            const cell = document.querySelector('.bertlook-head-explorer').closest('.jp-Cell');
            return [...cell.querySelectorAll('.jp-OutputArea-output img')]
                .filter(img => !img.closest('.bertlook-head-explorer')).length; }""")
        assert outside == 0, f"{outside} static images beside the live explorer"
        screenshot(page, "lab_00_tour_own_text.png")

        assert_tour_bertviz(page, "lab_00_tour_bertviz.png")
        assert_offline(requests)


def test_hostile_tokens_and_cells_show_as_text(tmp_path):
    """A token that is markup (an <img> with an onerror handler, a closing </script>) is drawn as a label
    and never parsed; so is a result table's cell that holds markup in a string, list, tuple or dict: no <img>
    appears, no script runs, no dialog opens."""
    import numpy as np
    import pandas as pd

    from bertlook_utils import compare, views
    from builders import make_encoded, random_row_stochastic

    hostile = ["<img src=x onerror=alert(1)>", "</script><b>bold</b>", "&amp;"]
    tokens = ["[CLS]", "the", *hostile, "[SEP]"]
    enc = make_encoded(tokens, random_row_stochastic(np.random.default_rng(0), (1, 2, len(tokens), len(tokens))))
    cells = [hostile[0], [hostile[0]], ("</script><script>alert(2)</script>",), {"k": "<svg onload=alert(3)>"}]
    table = compare.show(pd.DataFrame({"<b>quantity</b>": cells}), caption=hostile[1])._repr_html_()
    page_path = tmp_path / "hostile.html"
    page_path.write_text(f"<!DOCTYPE html><html><body>{table}{views.head_view(enc)._repr_html_()}</body></html>")
    dialogs: list[str] = []
    with browser_page() as (page, requests):
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        page.goto(page_path.as_uri())
        frame = bertviz_frame(page)
        labels = [t.strip() for t in frame.locator("svg text").all_text_contents()]
        for token in hostile:
            assert token in labels, f"{token!r} is not shown as text: {labels}"
        assert frame.locator("img").count() == 0 and frame.locator("b").count() == 0
        assert page.locator("img").count() == 0
        assert page.locator("table td").all_text_contents() == [str(cell) for cell in cells]
        assert page.locator("table th").all_text_contents() == ["<b>quantity</b>"]
        assert page.locator("table script, table svg, table b").count() == 0
        assert page.locator("b").all_text_contents() == [hostile[1]]  # the caption, in bold, as text
        screenshot(page, "bertviz_hostile_tokens.png")
        assert not dialogs, f"a token ran script: {dialogs}"
        assert_offline(requests)


SNAPSHOT_NOTE = "snapshot — open in Jupyter to explore"
EXPLORERS_CELL = """import sys
sys.path.insert(0, {tests!r})
from builders import PAIR_TOKENS, identity_map, make_encoded, next_map, prev_map, stack_heads, uniform_map
from bertlook_utils import widgets
n = len(PAIR_TOKENS)
enc = make_encoded(PAIR_TOKENS, stack_heads([[prev_map(n), uniform_map(n), identity_map(n)], [next_map(n)] * 3]))

class Encoder:
    def encode(self, a, b=None):
        return enc

display(widgets.head_explorer([enc, enc], encoder=Encoder()))
display(widgets.gallery_explorer([("vertical", enc, 1, 2, "a"), ("diagonal", enc, 1, 1, "b")]))"""


def assert_explorers_are_snapshots(page, shot: str) -> int:
    """Every explorer on `page` shows the snapshot note and no control a reader could use; saves a screenshot
    of the first one. Returns how many explorers there are."""
    page.wait_for_selector(".bertlook-explorer .widget-dropdown", timeout=30_000)
    page.wait_for_timeout(1000)  # the renderer draws the rest of the saved state
    found = page.evaluate("""() => [...document.querySelectorAll('.bertlook-explorer')].map(e => ({
        note: [...e.querySelectorAll('.bertlook-snapshot-note')].filter(n => n.offsetParent !== null)
                  .map(n => n.innerText),
        live: [...e.querySelectorAll('input, select, button, textarea')].filter(c => !c.disabled)
                  .map(c => c.outerHTML.slice(0, 120)),
        editable: e.querySelectorAll('.widget-readout[contenteditable="true"], .noUi-target:not([disabled])').length,
        images: [...e.querySelectorAll('img')].filter(i => i.offsetParent !== null && i.naturalWidth > 0).length}))""")
    assert found, "no explorer on the page"
    for k, explorer in enumerate(found):
        assert explorer["note"] == [SNAPSHOT_NOTE], f"explorer {k}: no visible note ({explorer['note']})"
        assert not explorer["live"] and not explorer["editable"], f"explorer {k}: live controls {explorer['live']}"
        assert explorer["images"] == 1, f"explorer {k}: {explorer['images']} pictures shown"
    page.locator(".bertlook-explorer").first.scroll_into_view_if_needed()
    screenshot(page, shot)
    return len(found)


def test_a_static_page_shows_the_explorers_as_disabled_snapshots_with_a_note(tmp_path):
    """No kernel behind a page: the text box, menus and toggles are disabled beside the note, and the gallery
    shows its still of every kind (its live menu and map hidden)."""
    import nbformat

    cell = nbformat.v4.new_code_cell(EXPLORERS_CELL.format(tests=str(ROOT / "tests")))
    notebook = nbformat.v4.new_notebook(cells=[cell])
    notebook.metadata.kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, tmp_path / "explorers.ipynb")
    subprocess.run([sys.executable, "-m", "tools.export", "--to", "html", "--execute", "--out", str(tmp_path),
                    str(tmp_path / "explorers.ipynb")], check=True, cwd=ROOT)
    with browser_page() as (page, requests):
        page.goto((tmp_path / "explorers.html").as_uri())
        assert assert_explorers_are_snapshots(page, "export_explorers_snapshot.png") == 2
        gallery = page.locator(".bertlook-gallery-explorer")
        assert gallery.locator(".bertlook-live-only").evaluate_all("parts => parts.every(p => !p.offsetParent)")
        assert_offline(requests)


def test_the_tours_page_shows_its_explorers_as_snapshots(tmp_path):
    subprocess.run([sys.executable, "-m", "tools.export", "--to", "html", "--out", str(tmp_path), str(TOUR)],
                   check=True, cwd=ROOT)
    with browser_page() as (page, requests):
        page.goto((tmp_path / "00_tour.html").as_uri())
        assert_explorers_are_snapshots(page, "export_00_tour_explorer_snapshot.png")
        assert_offline(requests)
