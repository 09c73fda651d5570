"""The static book (`make book`) in a real browser (Debian chromium via playwright), offline: the landing
page, a search that finds notebook 03, notebook 00 reached from the left-hand navigation with every figure
loaded, its formulas typeset, its explorer drawn from the saved widget state, its BertViz view drawn, and no
request leaving this machine.
Screenshots go to build/screenshots/book_*.png.
"""
from __future__ import annotations

import subprocess
import sys

import pytest

from browser import ROOT, browser_page, chromium_available, screenshot
from test_browser import assert_offline, assert_tour_bertviz

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not chromium_available(), reason="Debian chromium is not installed (make setup)")]


def assert_images_loaded(page) -> None:
    page.wait_for_load_state("load")
    images = page.locator("article img")
    assert images.count() > 0, "no figures on the page"
    broken = page.evaluate("[...document.querySelectorAll('article img')]"
                           ".filter(img => !(img.complete && img.naturalWidth > 0)).map(img => img.src.slice(-60))")
    assert not broken, f"figures that did not load: {broken}"


def test_book_searches_navigates_and_shows_figures_offline(tmp_path):
    out = tmp_path / "book"
    subprocess.run([sys.executable, "-m", "tools.book", "--out", str(out)], check=True, cwd=ROOT)
    with browser_page(1400, 1000) as (page, requests):
        page.goto((out / "index.html").as_uri())
        page.wait_for_selector("nav.bd-links a")
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
