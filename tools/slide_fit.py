"""Do the slides fit a 1024 x 768 projector, and show only what a class should see? Measured in a real browser:
the offline decks (`make slides`) and the live slideshow (jupyterlab-rise in JupyterLab).

    python -m tools.slide_fit --list build/slides/*.slides.html     # every slide of written decks
    python -m tools.slide_fit --live notebooks/01_*.ipynb           # every slide of the live slideshow
    python -m tools.slide_fit --live --list notebooks/*.ipynb slides/*.ipynb

A deck is opened from disk; the live slideshow is the page jupyterlab-rise opens for a notebook (`/rise/<path>`),
served by a JupyterLab started for the purpose, showing the notebook's stored outputs (trusted, as after a run).
Once the page is ready, MathJax has typeset and every image is decoded, every slide is shown in turn and its
<section>'s scrollHeight (the content, fragments included) is compared with the canvas: the deck's height in
canvas pixels, or for the live slideshow 95 % of the window, beyond which jupyterlab-rise turns the slide into a
scroll box. A taller slide is cut at the bottom, and what is cut shows only after scrolling, which a presenter with
a clicker never does. Each slide also says which notebook cells it shows (with their heights, for tools/slides.py
--fit), which of them show their code, and whether a test marker shows.
"""
from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import nbformat

from tools.browser import PROJECTOR, ROOT, chromium, chromium_available, jupyterlab  # noqa: F401 (the tests')
from tools.export import REVEAL_PREFIX

LIVE_CANVAS = 0.95  # of the window's height: a taller slide becomes a scroll box in jupyterlab-rise
MARKERS = r"/NBVAL_|nbval-/"  # a test marker shown on a slide (a JavaScript regular expression)
# One slide's content: every cell shown (its index in the notebook or its id, its height, whether its code shows).
CELLS = """(section, key) => [...section.querySelectorAll(".jp-Cell")].filter(c => c.offsetHeight > 0).map(c => ({
    key: key(c), height: c.offsetHeight,
    code: c.classList.contains("jp-CodeCell")
        && [...c.querySelectorAll(".jp-InputArea-editor, .jp-InputArea .highlight")].some(e => e.offsetHeight > 0)}))"""
READY = """async () => {
  await new Promise(done => window.MathJax && MathJax.Hub ? MathJax.Hub.Queue(done) : done());
  await Promise.all(Array.from(document.images).map(img => img.decode().catch(() => null)));
}"""
TITLE = """s => { const h = s.querySelector("h1, h2, h3");
    return h ? h.textContent.replace(/\\u00b6/g, "").trim() : ""; }"""
# A written deck: reveal.js is a require.js module there (no global), loaded from export.py's local copy.
MEASURE_DECK = """async () => {
  const Reveal = require("%s/dist/reveal.js");
  const cells = %s, title = %s;
  const rows = [];
  const slides = Reveal.getSlides();
  for (let i = 0; i < slides.length; i++) {
    const {h, v} = Reveal.getIndices(slides[i]);
    Reveal.slide(h, v);  // shows the slide (display: block) at once; measured before anything else runs
    rows.push({number: i + 1, h: h, v: v || 0, height: slides[i].scrollHeight, shown: slides[i].clientHeight,
               title: title(slides[i]), marker: %s.test(slides[i].innerText),
               cells: cells(slides[i], c => (c.id || "").replace(/^cell-id=/, ""))});
  }
  return {canvas: Reveal.getConfig().height, slides: rows};
}""" % (REVEAL_PREFIX, CELLS, TITLE, MARKERS)
# The live slideshow: the slide on show, with the notebook's cell index on each cell.
MEASURE_LIVE = """() => {
  const cells = %s, title = %s;
  const s = document.querySelector(".reveal .slides section.present:not(.stack)");
  return {id: s.id, height: s.scrollHeight, shown: s.clientHeight, canvas: Math.floor(%s * innerHeight),
          title: title(s), marker: %s.test(s.innerText), cells: cells(s, c => c.dataset.windowedListIndex)};
}""" % (CELLS, TITLE, LIVE_CANVAS, MARKERS)
ALL_SLIDES = """() => [...document.querySelectorAll(".reveal .slides section[id^='slide-']")].map(s => s.id)"""
# The slide on show and how many of its fragments show: what changes when the presenter clicks.
PRESENT = """() => { const s = document.querySelector(".reveal .slides section.present:not(.stack)");
    return s ? s.id + "|" + s.querySelectorAll(".fragment.visible").length : ""; }"""


@dataclass(frozen=True)
class Slide:
    """One slide of a deck or of a live slideshow: `number` as the deck shows it (1-based, vertical slides counted),
    its (h, v) indices, its content height, the height of the box that shows it (less when the slide scrolls) and
    the canvas height (px); the cells it shows, as (cell index, height in px), those whose code shows, and whether
    a test marker shows."""
    deck: str
    number: int
    h: int
    v: int
    height: int
    shown: int
    canvas: int
    title: str
    cells: tuple[tuple[int, int], ...] = ()
    code: tuple[int, ...] = ()
    marker: bool = False

    @property
    def overflows(self) -> bool:
        return self.height > min(self.canvas, self.shown)

    def __str__(self) -> str:
        box = f" (shown in a {self.shown}-px scroll box)" if self.shown < min(self.height, self.canvas) else ""
        return (f"{self.deck}: slide {self.number} (#/{self.h}/{self.v}) is {self.height} px tall{box} on the "
                f"{self.canvas}-px canvas: {self.title[:60]!r}")


def _slide(deck: str, row: dict, canvas: int, index) -> Slide:
    """A Slide from a measured row; `index` maps a cell's key (a deck's cell id, the live page's index) to the
    notebook's cell index, or to None for a cell it does not know."""
    cells = [(index(c["key"]), c["height"], c["code"]) for c in row["cells"]]
    cells = [cell for cell in cells if cell[0] is not None]
    return Slide(deck, row["number"], row["h"], row["v"], row["height"], row["shown"], canvas, row["title"],
                 tuple((i, h) for i, h, _ in cells), tuple(i for i, _, code in cells if code), row["marker"])


def measure(decks: list[Path], notebooks: list[Path] | None = None, timeout_ms: int = 60_000) -> list[Slide]:
    """Every slide of every deck (written .slides.html files), measured in one headless chromium; with the
    `notebooks` they were made from, the cells they show too."""
    found: list[Slide] = []
    with chromium() as browser:
        for k, deck in enumerate(decks):
            cells = [] if notebooks is None else nbformat.read(notebooks[k], 4).cells
            ids = {cell.get("id"): i for i, cell in enumerate(cells)}
            page = browser.new_page(viewport=PROJECTOR)  # the heights are in canvas pixels whatever the window
            page.set_default_timeout(timeout_ms)
            page.goto(deck.resolve().as_uri())
            page.wait_for_selector(".reveal.ready")
            page.evaluate(READY)
            result = page.evaluate(MEASURE_DECK)
            found += [_slide(deck.name, row, result["canvas"], ids.get) for row in result["slides"]]
            page.close()
    return found


@contextlib.contextmanager
def live_lab(notebooks: list[Path]):
    """A JupyterLab serving the kit, in which `notebooks` are trusted (their stored HTML and widgets render as after
    a run) and no lecture copy is opened (the committed notebooks are measured). Yields (url, token)."""
    from nbformat.sign import NotebookNotary

    with tempfile.TemporaryDirectory(prefix="bertlook-fit-") as state:
        notary = NotebookNotary(data_dir=state)
        for path in notebooks:
            notary.sign(nbformat.read(path, 4))
        with jupyterlab(ROOT, kit_root=Path(state), env={"JUPYTER_DATA_DIR": state}) as (url, token):
            yield url, token


def walk(page, deck: str, screenshots: Path | None = None, every: int = 1, on_slide=None) -> list[Slide]:
    """Every slide of the live slideshow open in `page` (jupyterlab-rise, at its first slide), walked with the space
    bar as a presenter does, each measured when it first shows; `on_slide(page, slide)` is called there too. With
    `screenshots`, a PNG of every `every`-th slide (the first, ...), named live_<deck's first 2 letters>_<n>.png.
    Raises RuntimeError when the space bar never reaches a slide."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page.wait_for_selector(".reveal.ready")
    page.wait_for_timeout(2000)  # the outputs' renderers, then MathJax
    page.evaluate(READY)
    every_id = page.evaluate(ALL_SLIDES)
    found: list[Slide] = []
    shown_id, state = None, page.evaluate(PRESENT)
    while True:  # a presenter's clicker: Space shows the next fragment, or the next slide
        slide_id = state.split("|")[0]
        if slide_id != shown_id:
            shown_id = slide_id
            row = page.evaluate(MEASURE_LIVE)
            h, v = (int(x) for x in slide_id.split("-")[1:])
            found.append(_slide(deck, {**row, "number": len(found) + 1, "h": h, "v": v}, row["canvas"], int))
            if screenshots is not None and (len(found) - 1) % every == 0:
                screenshots.mkdir(parents=True, exist_ok=True)
                page.wait_for_timeout(1000)  # the fade from the slide before
                page.screenshot(path=str(screenshots / f"live_{deck[:2]}_{len(found):02d}.png"))
            if on_slide is not None:
                on_slide(page, found[-1])
        page.keyboard.press("Space")
        try:
            page.wait_for_function(f"previous => ({PRESENT})() !== previous", arg=state, timeout=3000)
        except PlaywrightTimeout:
            break  # the last slide
        state = page.evaluate(PRESENT)
    missed = sorted(set(every_id) - {f"slide-{s.h}-{s.v}" for s in found})
    if missed:
        raise RuntimeError(f"{deck}: the space bar never reaches {missed}")
    return found


def measure_live(notebooks: list[Path], lab: tuple[str, str] | None = None, timeout_ms: int = 90_000,
                 screenshots: Path | None = None, every: int = 1) -> list[Slide]:
    """Every slide of every notebook's live slideshow (jupyterlab-rise), walked as `walk` does, in a JupyterLab
    started for it (or `lab`, (url, token) of a running one)."""
    if lab is None:
        with live_lab(notebooks) as started:
            return measure_live(notebooks, started, timeout_ms, screenshots, every)
    url, token = lab
    found: list[Slide] = []
    with chromium() as browser:
        for path in notebooks:
            page = browser.new_page(viewport=PROJECTOR)
            page.set_default_timeout(timeout_ms)
            page.goto(f"{url}/rise/{Path(path).resolve().relative_to(ROOT).as_posix()}?token={token}")
            found += walk(page, Path(path).name, screenshots, every)
            page.close()
    return found


def problems(slides: list[Slide], notebooks: list[Path]) -> list[str]:
    """What a class should not meet on these slides, one line each: a slide taller than its canvas, code shown of a
    cell that should show only its output (a prose cell's f-string, a long cell), a cell the slides skip (a
    solution, a check) shown, a test marker shown."""
    from tools import slides as rules

    notebook = {Path(p).name: nbformat.read(p, 4) for p in notebooks}
    found = [str(s) for s in slides if s.overflows]
    for s in slides:
        nb = notebook.get(s.deck) or notebook.get(s.deck.replace(".slides.html", ".ipynb"))
        if nb is None:
            continue
        kinds = rules.roles(nb)
        found += [f"{s.deck}: slide {s.number} shows the code of cell {i} ({nb.cells[i].source[:40]!r})"
                  for i in s.code if rules.output_only(nb.cells[i])]
        found += [f"{s.deck}: slide {s.number} shows cell {i}, which no slide should ({nb.cells[i].source[:40]!r})"
                  for i, _ in s.cells if kinds[i] == "skip"]
        found += [f"{s.deck}: slide {s.number} shows a test marker" for _ in [s] if s.marker]
    return found


def cell_heights(notebooks: list[Path]) -> dict[Path, dict[int, float]]:
    """notebook -> {cell index: its height as a share of the canvas}, the larger of the live slideshow's and the
    offline deck's, for every cell the slides show (tools/slides.py --fit)."""
    from tools import export

    heights: dict[Path, dict[int, float]] = {path: {} for path in notebooks}
    with tempfile.TemporaryDirectory(prefix="bertlook-decks-") as out:
        export.copy_assets(Path(out))
        decks = [export.export(path, Path(out)) for path in notebooks]
        measured = measure(decks, notebooks) + measure_live(notebooks)
    by_name = {path.name: path for path in notebooks} | {f"{path.stem}.slides.html": path for path in notebooks}
    for s in measured:
        shares = heights[by_name[s.deck]]
        for i, px in s.cells:
            shares[i] = max(shares.get(i, 0.0), px / s.canvas)
    return heights


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
    parser.add_argument("paths", nargs="+", type=Path, help="written decks (*.slides.html), or notebooks with --live")
    parser.add_argument("--live", action="store_true", help="the notebooks' live slideshows (jupyterlab-rise)")
    parser.add_argument("--list", action="store_true", help="print every slide's height, fitting or not")
    parser.add_argument("--screenshots", type=Path, help="with --live: a PNG of every slide into this folder")
    args = parser.parse_args(argv)
    if args.live:
        slides = measure_live(args.paths, screenshots=args.screenshots)
        found = problems(slides, args.paths)
    else:
        slides, found = measure(args.paths), []
    if args.list:
        for slide in slides:
            print(("OVER " if slide.overflows else "     ") + str(slide))
    print("\n".join(found) if found else summary(slides))
    return 1 if found or any(s.overflows for s in slides) else 0


if __name__ == "__main__":
    sys.exit(main())
