"""Do a deck's slides fit its canvas? Checked in a real browser, as a projector shows them.

    python -m tools.slide_fit build/slides/bertlook_talk.slides.html   # `make slides` checks the talk so
    python -m tools.slide_fit --list build/slides/*.slides.html        # every slide's height, any deck

Each deck is opened in headless chromium (Debian's, driven by playwright; nothing downloads a browser, as in
tests/browser.py). Once reveal.js is ready, MathJax has typeset and every image is decoded, every slide is
shown in turn (Reveal.slide(h, v)) and its <section>'s scrollHeight (the content, fragments included, in
canvas pixels) is compared with the canvas height, Reveal.getConfig().height, and with the section's own
height (clientHeight: less when the deck made it a scroll box). A slide taller than either is cut at the
bottom, and what is cut only shows after scrolling, which a presenter with a clicker never does.
"""
from __future__ import annotations

import argparse
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from tools.export import REVEAL_PREFIX

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-default-apps", "--disable-quic"]
VIEWPORT = {"width": 1024, "height": 768}  # a projector; the heights are in canvas pixels whatever the window

# In the page: every slide's height. reveal.js is a require.js module there (no global), loaded from
# export.py's local copy; once the deck is ready, require() hands it over.
MEASURE = """async () => {
  const Reveal = require("%s/dist/reveal.js");
  await new Promise(done => window.MathJax && MathJax.Hub ? MathJax.Hub.Queue(done) : done());
  await Promise.all(Array.from(document.images).map(img => img.decode().catch(() => null)));
  const rows = [];
  const slides = Reveal.getSlides();
  for (let i = 0; i < slides.length; i++) {
    const {h, v} = Reveal.getIndices(slides[i]);
    Reveal.slide(h, v);  // shows the slide (display: block) at once; measured before anything else runs
    const heading = slides[i].querySelector("h1, h2, h3");
    rows.push({number: i + 1, h: h, v: v || 0, height: slides[i].scrollHeight, shown: slides[i].clientHeight,
               title: heading ? heading.textContent.replace(/\\u00b6/g, "").trim() : ""});
  }
  return {canvas: Reveal.getConfig().height, slides: rows};
}""" % REVEAL_PREFIX


@dataclass(frozen=True)
class Slide:
    """One slide of a deck: `number` as the deck shows it (1-based, vertical slides counted), its (h, v)
    indices, its content height, the height of the box that shows it (less when the slide scrolls) and the
    canvas height (px)."""
    deck: str
    number: int
    h: int
    v: int
    height: int
    shown: int
    canvas: int
    title: str

    @property
    def overflows(self) -> bool:
        return self.height > min(self.canvas, self.shown)

    def __str__(self) -> str:
        box = f" (shown in a {self.shown}-px scroll box)" if self.shown < min(self.height, self.canvas) else ""
        return (f"{self.deck}: slide {self.number} (#/{self.h}/{self.v}) is {self.height} px tall{box} on the "
                f"{self.canvas}-px canvas: {self.title[:60]!r}")


def chromium_available() -> bool:
    return Path(CHROMIUM).exists()


def measure(decks: list[Path], timeout_ms: int = 60_000) -> list[Slide]:
    """Every slide of every deck (written .slides.html files), measured in one headless chromium."""
    from playwright.sync_api import sync_playwright

    if not chromium_available():
        raise SystemExit(f"no chromium at {CHROMIUM}: the slide-fit check needs it (`make browser`)")
    found: list[Slide] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for deck in decks:
                page = browser.new_page(viewport=VIEWPORT)
                page.set_default_timeout(timeout_ms)
                page.goto(deck.resolve().as_uri())
                page.wait_for_selector(".reveal.ready")
                result = page.evaluate(MEASURE)
                found += [Slide(deck.name, row["number"], row["h"], row["v"], row["height"], row["shown"],
                                result["canvas"], row["title"]) for row in result["slides"]]
                page.close()
        finally:
            browser.close()
    return found


def check_fit(decks: list[Path]) -> list[Slide]:
    """Fail, naming each deck, slide and height, if any slide is taller than its canvas; else the slides."""
    slides = measure(decks)
    over = [slide for slide in slides if slide.overflows]
    if over:
        raise SystemExit("slides taller than the canvas (cut off at the bottom on a projector):\n  "
                         + "\n  ".join(map(str, over)))
    return slides


def summary(slides: list[Slide]) -> str:
    """One line on slides that fit: how many, in how many decks, the tallest."""
    if not slides:
        return "no slides"
    tallest = max(slides, key=lambda slide: slide.height)
    return (f"{len(slides)} slides in {len({slide.deck for slide in slides})} deck(s) fit the canvas "
            f"(tallest: {tallest.deck} slide {tallest.number}, {tallest.height} of {tallest.canvas} px)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("decks", nargs="+", type=Path, help="written decks, build/slides/*.slides.html")
    parser.add_argument("--list", action="store_true", help="print every slide's height, fitting or not")
    args = parser.parse_args(argv)
    if args.list:
        for slide in measure(args.decks):
            print(("OVER " if slide.overflows else "     ") + str(slide))
        return 0
    print(summary(check_fit(args.decks)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
