"""Accessibility (issue 46): axe-core (node_modules/axe-core, pinned in package.json; `make assets`) run in Debian
chromium on what a class reads and is shown.

- the book, both editions: the landing page and every notebook page (the talk's too);
- every slide of every offline deck (tools/export.py), each shown in turn as a presenter shows it;
- an exported notebook page (`tools.export --to html`, notebook 00: code, tables, an explorer, a BertViz view);
- the live slideshow (jupyterlab-rise): its slide number, which rise.css restyles, at WCAG AA contrast.

A page or slide may have no critical and no serious violation, and no image without alt text: axe's image-alt, and
every visible <img> with an alt that is not empty, not a file name (myst-nb writes the image's path) and not
nbconvert's placeholder. Moderate and minor findings are printed (rule, count, where), not failed on.

Costs: the books are built once per session (the `books` fixture of tests/conftest.py, shared with
tests/test_book.py), the decks and the page once per module, in this process (the decks' fit check is
tests/test_presenting.py's); one chromium serves every page. On a deck, the first slide is checked with the whole
document (page-level rules, the controls and the slide number) and every later slide within its own <section>:
what changes from slide to slide, at a fraction of the time.
"""
from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest

from browser import ROOT, chromium, chromium_available
from tools import book, export

NODE_MODULES = ROOT / "node_modules"
AXE = NODE_MODULES / "axe-core" / "axe.min.js"
BLOCKING = ("critical", "serious")
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
TALK = ROOT / "slides" / "bertlook_talk.ipynb"
TOUR = ROOT / "notebooks" / "00_tour.ipynb"
PLACEHOLDER_ALT = "No description has been provided for this image"  # nbconvert's, for an image/png output
needs_chromium = pytest.mark.skipif(not chromium_available(), reason="Debian chromium is not installed (make setup)")

# The page has loaded its formulas, figures and explorers (drawn from the saved widget state).
READY = """async () => {
  await new Promise(done => window.MathJax && MathJax.Hub ? MathJax.Hub.Queue(done) : done());
  await Promise.all(Array.from(document.images).map(img => img.decode().catch(() => null)));
  const views = () => [...document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]')];
  for (let i = 0; i < 100 && !views().every(s => s.parentElement.querySelector('.lm-Widget')); i++) {
    await new Promise(done => setTimeout(done, 100));
  }
}"""
# axe-core's violations within `context`, and the visible images of `scope` whose alt is missing, empty, a file
# name or nbconvert's placeholder.
CHECK = """async ([context, scope, placeholder]) => {
  const result = await axe.run(context, {resultTypes: ['violations']});
  const violations = result.violations.map(v => ({id: v.id, impact: v.impact, count: v.nodes.length,
      target: v.nodes[0].target.join(' '), summary: v.nodes[0].failureSummary}));
  const bad = alt => alt === null || !alt.trim() || alt.trim() === placeholder
      || /^[^\\s]*\\.(png|jpe?g|gif|svg|webp)$/i.test(alt.trim());
  const images = [...scope.querySelectorAll('img')]
      .filter(img => img.checkVisibility({visibilityProperty: true}) && bad(img.getAttribute('alt')))
      .map(img => (img.getAttribute('alt') || '(none)').slice(0, 60));
  return {violations, images};
}"""
# Every slide of a deck shown in turn (reveal.js, loaded by require.js), no transition, its formulas typeset; axe
# on the whole document for the first slide, within the slide's <section> for the others.
WALK = """async ([check, placeholder]) => {
  const Reveal = require("%s/dist/reveal.js");
  Reveal.configure({transition: 'none', backgroundTransition: 'none'});
  const slides = Reveal.getSlides(), found = [];
  for (let i = 0; i < slides.length; i++) {
    const {h, v} = Reveal.getIndices(slides[i]);
    Reveal.slide(h, v);
    if (slides[i].querySelector('script[type^="math/tex"], .MathJax_Preview')) {
      await new Promise(done => MathJax.Hub.Queue(done));  // the template re-renders a slide's math on showing it
    }
    found.push(await check([i === 0 ? document : slides[i], slides[i], placeholder]));
  }
  return found;
}""" % export.REVEAL_PREFIX


class Findings:
    """What axe and the alt-text check found, by rule: where each violation was, and how many nodes."""

    def __init__(self):
        self.by_rule: dict[tuple[str, str], list[tuple[str, int, str]]] = defaultdict(list)

    def add(self, where: str, result: dict) -> None:
        for v in result["violations"]:
            self.by_rule[(v["impact"], v["id"])].append(
                (where, v["count"], f'{v["target"]}: {" ".join(v["summary"].split())[:160]}'))
        if result["images"]:
            self.by_rule[("critical", "alt-text")].append(
                (where, len(result["images"]), f"alt: {result['images'][:3]}"))

    def lines(self, impacts) -> list[str]:
        """One line per rule of these impacts: impact, rule, nodes, where (pages or slides), the first node."""
        rows = []
        for (impact, rule), hits in sorted(self.by_rule.items()):
            if impact in impacts:
                places = [where for where, _, _ in hits]
                shown = ", ".join(places[:8]) + (f", ... ({len(places)} in all)" if len(places) > 8 else "")
                rows.append(f"{impact} {rule} x{sum(n for _, n, _ in hits)} on {shown}; first: {hits[0][2]}")
        return rows

    def report(self, capsys, title: str) -> None:
        """Print the moderate and minor findings (shown in the test output), then fail on any other."""
        with capsys.disabled():
            print(f"\naxe, {title}, moderate and minor:")
            print("\n".join("  " + line for line in self.lines(("moderate", "minor"))) or "  none")
        blocking = self.lines(BLOCKING)
        assert not blocking, f"{title}: critical and serious accessibility violations:\n" + "\n".join(blocking)


@pytest.fixture(scope="module")
def browser():
    if not AXE.exists():
        pytest.fail(f"missing: {AXE}; run `make assets` (npm ci)")
    with chromium() as started:
        yield started


def inject_axe(page) -> None:
    """axe-core into the page and each of its frames (the BertViz views): evaluated, not a <script> tag, which
    require.js would take for an anonymous module."""
    source = AXE.read_text(encoding="utf-8")
    for frame in page.frames:
        frame.evaluate(source)


def check_pages(browser, folder: Path, pages: list[str], findings: Findings) -> None:
    """Each of `pages` (paths under `folder`) opened, made ready and checked, into `findings`."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(60_000)
    for name in pages:
        page.goto((folder / name).as_uri())
        page.wait_for_load_state("load")
        page.evaluate(READY)
        inject_axe(page)
        findings.add(name, page.evaluate(
            "args => (%s)([document, document, args[0]])" % CHECK, [PLACEHOLDER_ALT]))
    page.close()


def test_the_books_controls_are_named_by_their_visible_text():
    """The theme's search field and myst-nb's toggle lose the aria-labels that left their text out; an icon's
    aria-label (no visible text) stays."""
    search = ('<button class="btn search-button-field search-button__button pst-js-only" title="Search" '
              'aria-label="Search" data-bs-placement="bottom">')
    icon = '<button class="btn btn-sm pst-navbar-icon search-button" title="Search" aria-label="Search">'
    toggle = '<summary aria-label="Toggle hidden content">\n<p class="collapsed admonition-title">Show code'
    fixed = book.label_in_name(search + icon + toggle)
    assert fixed == search.replace(' aria-label="Search"', "") + icon + toggle.replace(
        ' aria-label="Toggle hidden content"', "")
    assert book.label_in_name(fixed) == fixed


@pytest.mark.browser
@needs_chromium
@pytest.mark.parametrize("edition", ["student", "instructor"])
def test_the_book_has_no_serious_violation(books, browser, edition, capsys):
    folder = books[edition]
    pages = ["index.html"] + [f"notebooks/{path.stem}.html" for path in NOTEBOOKS] + [f"slides/{TALK.stem}.html"]
    findings = Findings()
    check_pages(browser, folder, pages, findings)
    findings.report(capsys, f"the book, {edition} edition ({len(pages)} pages)")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Every deck (the talk and the numbered notebooks) and notebook 00's page, written with their assets."""
    out = tmp_path_factory.mktemp("exported")
    export.copy_assets(out)
    decks = [export.export(path, out) for path in export.decks()]
    return {"decks": decks, "page": export.export(TOUR, out, to="html")}


@pytest.mark.browser
@needs_chromium
def test_every_slide_of_every_deck_has_no_serious_violation(exported, browser, capsys):
    findings, slides = Findings(), 0
    page = browser.new_page(viewport={"width": 1024, "height": 768})
    page.set_default_timeout(120_000)
    for deck in exported["decks"]:
        page.goto(deck.as_uri())
        page.wait_for_selector(".reveal.ready")
        page.evaluate(READY)
        inject_axe(page)
        results = page.evaluate("args => (%s)([%s, args[0]])" % (WALK, CHECK), [PLACEHOLDER_ALT])
        for number, result in enumerate(results, 1):
            findings.add(f"{deck.name.removesuffix('.slides.html')} slide {number}", result)
        slides += len(results)
    page.close()
    assert slides > 10 * len(exported["decks"])
    findings.report(capsys, f"{slides} slides of {len(exported['decks'])} decks")


@pytest.mark.browser
@needs_chromium
def test_an_exported_page_has_no_serious_violation(exported, browser, capsys):
    findings = Findings()
    check_pages(browser, exported["page"].parent, [exported["page"].name], findings)
    findings.report(capsys, "the exported page of notebook 00")


@pytest.mark.browser
@needs_chromium
def test_the_live_slide_number_has_aa_contrast(browser):
    """jupyterlab-rise's own rules outrank a plain `.reveal .slide-number` rule (it drew the number in its link blue,
    4.3:1 on white): the live slideshow shows rise.css's white on dark grey, in notebooks/ and in slides/ (whose
    rise.css is a link)."""
    from tools import slide_fit

    decks = [NOTEBOOKS[2], TALK]
    styles = {}
    with slide_fit.live_lab(decks) as (url, token):
        page = browser.new_page(viewport={"width": 1024, "height": 768})
        page.set_default_timeout(90_000)
        for deck in decks:
            page.goto(f"{url}/rise/{deck.relative_to(ROOT).as_posix()}?token={token}")
            page.wait_for_selector(".reveal.ready .slide-number a")
            styles[deck.name] = page.evaluate("""() => { const number = document.querySelector('.slide-number');
                return {text: getComputedStyle(number.querySelector('a')).color,
                        box: getComputedStyle(number).backgroundColor,
                        slide: getComputedStyle(document.querySelector('.reveal')).backgroundColor}; }""")
        page.close()
    ratios = {name: contrast(**style) for name, style in styles.items()}
    assert all(ratio >= 4.5 for ratio in ratios.values()), (ratios, styles)


def contrast(text: str, box: str, slide: str) -> float:
    """WCAG 2.1's contrast ratio of CSS colours `text` on `box` on `slide` (each may be translucent; a transparent
    slide shows the page's white)."""
    def over(colour: str, under: list[float]) -> list[float]:
        values = [float(x) for x in re.findall(r"[\d.]+", colour)]
        alpha = values[3] if len(values) > 3 else 1.0
        return [alpha * c + (1 - alpha) * u for c, u in zip(values[:3], under)]

    def luminance(rgb: list[float]) -> float:
        linear = [c / 255 / 12.92 if c / 255 <= 0.04045 else ((c / 255 + 0.055) / 1.055) ** 2.4 for c in rgb]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    behind = over(box, over(slide, [255.0, 255.0, 255.0]))
    lighter, darker = sorted((luminance(over(text, behind)), luminance(behind)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)
