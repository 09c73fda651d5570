"""Offline HTML pages and reveal.js decks of the notebooks: `make run` and `make slides`.

    python -m tools.export --to html --execute notebooks/NN_*.ipynb --out build   # make run
    python -m tools.export --to slides                                             # make slides
    python -m tools.export --to slides --edition instructor    # make slides EDITION=instructor: with solutions
    python -m tools.export --scan build/slides/*.html    # only check pages for remote references

Pages are exported from the notebooks' stored outputs, or after executing them (`--execute`, as `make run`
does; BERTLOOK_MODEL picks the model). Every asset a page needs is copied from node_modules/ (`make
assets`) next to the pages -- reveal.js, MathJax, require.js, jQuery and the Jupyter widgets renderer --
and the pages point at those copies with relative URLs, so they open from disk (file://) with no network.
After writing, every page is scanned for http(s) references the browser would fetch (src attributes,
stylesheet links, CSS imports, URL literals in scripts); any found fails the export with the list. Then every deck is
opened in headless chromium and every slide's height is compared with the 1024 x 768 canvas (tools/slide_fit.py);
a slide that would be cut off at the bottom fails the export, naming deck, slide and height. A deck shows what the
live slideshow shows, with the same stylesheet (notebooks/rise.css): no solutions, unless the instructor's.
"""
from __future__ import annotations

import argparse
import re
import shutil
import sys
import time
from html.parser import HTMLParser
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
NODE_MODULES = ROOT / "node_modules"
OUT = ROOT / "build" / "slides"
TEMPLATES = Path(__file__).resolve().parent / "templates"
TEMPLATES_BY_FORMAT = {"slides": "bertlook_reveal", "html": "bertlook_lab"}  # nbconvert's, without the CDN Mermaid
SUFFIX = {"slides": ".slides.html", "html": ".html"}
WIDTH, HEIGHT = 1024, 768  # the deck's canvas, a projector's; reveal.js scales it to the window
SLIDE_CSS = ROOT / "notebooks" / "rise.css"  # the slides' stylesheet, live and in the decks
MATHJAX_CONFIG = "TeX-AMS_CHTML-full,Safe"
REVEAL_PREFIX = "reveal.js"  # the decks load reveal.js/dist/reveal.js, a copy next to them

# (source under node_modules, destination under the output folder): only what the decks load
ASSETS = [
    ("reveal.js/dist", "reveal.js/dist"),
    ("reveal.js/plugin/notes", "reveal.js/plugin/notes"),  # speaker notes (press S)
    ("reveal.js/LICENSE", "reveal.js/LICENSE"),
    ("requirejs/require.js", "requirejs/require.js"),
    ("jquery/dist/jquery.min.js", "jquery/jquery.min.js"),
    ("@jupyter-widgets/html-manager/dist/embed-amd.js", "html-manager/embed-amd.js"),
    ("mathjax/MathJax.js", "mathjax/MathJax.js"),
    ("mathjax/LICENSE", "mathjax/LICENSE"),
    ("mathjax/config/TeX-AMS_CHTML-full.js", "mathjax/config/TeX-AMS_CHTML-full.js"),
    ("mathjax/config/Safe.js", "mathjax/config/Safe.js"),
    ("mathjax/config/local", "mathjax/config/local"),
    ("mathjax/extensions", "mathjax/extensions"),
    ("mathjax/jax/input/TeX", "mathjax/jax/input/TeX"),
    ("mathjax/jax/output/CommonHTML", "mathjax/jax/output/CommonHTML"),
    ("mathjax/jax/element", "mathjax/jax/element"),
    ("mathjax/fonts/HTML-CSS/TeX/woff", "mathjax/fonts/HTML-CSS/TeX/woff"),
    ("mathjax/fonts/HTML-CSS/TeX/otf", "mathjax/fonts/HTML-CSS/TeX/otf"),
    ("mathjax/localization/en", "mathjax/localization/en"),
]
# the widget renderer's icon fonts sit next to it
WIDGET_FONTS = ("*.woff", "*.woff2", "*.ttf", "*.eot", "*.svg")


def decks(root: Path = ROOT) -> list[Path]:
    """The talk deck(s) in slides/, then every numbered notebook."""
    return sorted((root / "slides").glob("*.ipynb")) + sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb"))


# -- assets -------------------------------------------------------------------------------------------
def _sync_file(src: Path, dst: Path) -> None:
    if dst.exists() and dst.stat().st_size == src.stat().st_size and dst.stat().st_mtime >= src.stat().st_mtime:
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, dst)


def copy_assets(out: Path = OUT, node_modules: Path = NODE_MODULES) -> None:
    """Copy reveal.js, MathJax (TeX input, CommonHTML output, TeX fonts), require.js, jQuery and the widget
    renderer from node_modules into `out` (only files that changed)."""
    missing = [src for src, _ in ASSETS if not (node_modules / src).exists()]
    if missing:
        raise SystemExit(f"missing in {node_modules}: {', '.join(missing)}; run `make assets` (npm ci)")
    for src, dst in ASSETS:
        source = node_modules / src
        files = [source] if source.is_file() else sorted(p for p in source.rglob("*") if p.is_file())
        for file in files:
            _sync_file(file, out / dst / file.relative_to(source) if source.is_dir() else out / dst)
    fonts = node_modules / "@jupyter-widgets/html-manager/dist"
    for pattern in WIDGET_FONTS:
        for file in fonts.glob(pattern):
            _sync_file(file, out / "html-manager" / file.name)


# -- export -------------------------------------------------------------------------------------------
def _pixels(value, default: int) -> int:
    """A RISE width/height as reveal.js pixels: 1280, "1280" and "1280px" give 1280; "100%" the default."""
    match = re.fullmatch(r"\s*(\d+)\s*(px)?\s*", str(value)) if value is not None else None
    return int(match.group(1)) if match else default


def exporter_config(nb, to: str = "slides") -> dict:
    """nbconvert configuration for one page or deck: local asset URLs (and, for decks, the RISE settings)."""
    from traitlets.config import Config

    rise = nb.metadata.get("rise", {})
    c = Config()
    exporter = c.HTMLExporter  # the slides exporter inherits these
    exporter.template_name = TEMPLATES_BY_FORMAT[to]
    exporter.extra_template_basedirs = [str(TEMPLATES)]
    exporter.mathjax_url = f"mathjax/MathJax.js?config={MATHJAX_CONFIG}"
    exporter.require_js_url = "requirejs/require.js"
    exporter.jquery_url = "jquery/jquery.min.js"
    exporter.widget_renderer_url = "html-manager/embed-amd.js"
    exporter.jupyter_widgets_base_url = "html-manager/"
    exporter.mermaid_js_url = ""
    exporter.mermaid_layout_elk_js_url = ""
    exporter.font_awesome_url = ""
    c.TagRemovePreprocessor.enabled = True  # cells tagged "hide-input" show only their output
    c.TagRemovePreprocessor.remove_input_tags = {"hide-input"}
    c.TagRemovePreprocessor.remove_cell_tags = {"remove-cell"}
    if to == "html":
        return c
    c.SlidesExporter.template_name = TEMPLATES_BY_FORMAT[to]
    c.SlidesExporter.reveal_url_prefix = REVEAL_PREFIX
    c.SlidesExporter.reveal_theme = rise.get("theme", "white")
    c.SlidesExporter.reveal_transition = rise.get("transition", "fade")
    c.SlidesExporter.reveal_scroll = bool(rise.get("scroll", True))
    c.SlidesExporter.reveal_number = str(rise.get("slideNumber", "c/t") or "")
    c.SlidesExporter.reveal_width = str(_pixels(rise.get("width"), WIDTH))
    c.SlidesExporter.reveal_height = str(_pixels(rise.get("height"), HEIGHT))
    c.SlidesExporter.exclude_input_prompt = True
    c.SlidesExporter.exclude_output_prompt = True
    return c


def execute(nb, folder: Path, timeout: int = 1800) -> None:
    """Run every cell of `nb` in place, as `make run` does, with `folder` as the working directory. The kernel
    talks over local sockets (IPC), so it prints no "running over TCP without encryption" warning."""
    import tempfile

    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    with tempfile.TemporaryDirectory() as sockets:  # an absolute socket path: the kernel runs in `folder`
        kernel = KernelManager(kernel_name="python3", transport="ipc", ip=str(Path(sockets) / "kernel"))
        try:
            NotebookClient(nb, km=kernel, timeout=timeout, resources={"metadata": {"path": str(folder)}}).execute()
        finally:
            if kernel.has_kernel:
                kernel.shutdown_kernel(now=True)


def with_solutions(nb) -> None:
    """The instructor's deck: every solution (and its "### Solutions" heading) a sub-slide of its own, at the end."""
    for cell in nb.cells:
        if "solution" in cell.metadata.get("tags", []) or cell.source.startswith("### Solutions"):
            cell.metadata["slideshow"] = {"slide_type": "subslide"}
            cell.metadata.get("jupyter", {}).pop("source_hidden", None)


def export(notebook: Path, out: Path = OUT, to: str = "slides", run: bool = False, edition: str = "student") -> Path:
    """Write `out/<stem>.slides.html` (a deck) or `out/<stem>.html` (a page) from the notebook's outputs,
    stored or (run=True) freshly computed. A deck leaves out what no slide shows (tools/slides.py): solutions too,
    unless `edition` is "instructor"."""
    from nbconvert import HTMLExporter, SlidesExporter

    from tools import widget_state

    nb = nbformat.read(notebook, as_version=4)
    if run:
        execute(nb, notebook.parent)
    widget_state.snapshot(nb)  # no kernel behind the page: the explorers' controls disabled, with a note
    if to == "slides" and edition == "instructor":
        with_solutions(nb)
    if to == "slides":
        for cell in nb.cells:  # a cell that shows only its output on a slide live shows only that in the deck too
            if cell.metadata.get("jupyter", {}).get("source_hidden"):
                cell.metadata["transient"] = {"remove_source": True}
    exporter = (SlidesExporter if to == "slides" else HTMLExporter)(config=exporter_config(nb, to))
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": notebook.stem,
                                                                      "path": str(notebook.parent)},
                                                         "bertlook_css": SLIDE_CSS.read_text()})
    target = out / f"{notebook.stem}{SUFFIX[to]}"
    target.write_text(body, encoding="utf-8")
    return target


# -- the offline check --------------------------------------------------------------------------------
REMOTE = re.compile(r"""(?:https?:)?//[A-Za-z0-9.-]+\.[A-Za-z]{2,}[^\s"'`)<>]*""")
QUOTED_REMOTE = re.compile(r"""["'`]((?:https?:)?//[A-Za-z0-9.-]+\.[A-Za-z]{2,}[^"'`\s]*)["'`]""")
CSS_REMOTE = re.compile(r"""(?:@import\s+(?:url\()?|url\()\s*["']?((?:https?:)?//[^"')\s]+)""")
NOT_FETCHED = ("http://www.w3.org/", "https://www.w3.org/")  # XML namespace names: identifiers, never loaded
EXECUTABLE = {"", "text/javascript", "application/javascript", "module"}
FETCHING_LINKS = {"stylesheet", "preload", "modulepreload", "prefetch", "icon", "manifest", "import"}


class _Scanner(HTMLParser):
    """Collects what a browser would fetch from the network while loading the page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self.local_css: list[str] = []
        self._in: str | None = None  # "script" (executable) or "style" while inside one

    def handle_starttag(self, tag, attrs):
        attrs = {k: v or "" for k, v in attrs}
        for name in ("src", "data", "poster", "srcset", "background"):
            value = attrs.get(name, "")
            if REMOTE.match(value.strip()):
                self.found.append(f"<{tag} {name}=\"{value.strip()}\">")
        if tag == "link":
            href = attrs.get("href", "").strip()
            rel = set(attrs.get("rel", "").lower().split())
            if rel & FETCHING_LINKS:
                if REMOTE.match(href):
                    self.found.append(f"<link rel=\"{attrs.get('rel')}\" href=\"{href}\">")
                elif "stylesheet" in rel and href:
                    self.local_css.append(href)
        for url in CSS_REMOTE.findall(attrs.get("style", "")):
            self.found.append(f"<{tag} style=\"...url({url})...\">")
        if tag == "script" and attrs.get("type", "").lower() in EXECUTABLE and "src" not in attrs:
            self._in = "script"
        elif tag == "style":
            self._in = "style"

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self._in = None

    def handle_data(self, data):
        if self._in == "script":
            self.found += [f"<script> literal {url}" for url in QUOTED_REMOTE.findall(data)
                           if not url.startswith(NOT_FETCHED)]
        elif self._in == "style":
            self.found += [f"<style> url({url})" for url in CSS_REMOTE.findall(data)]


def find_remote_urls(html: str) -> list[str]:
    """What in `html` would be fetched from the network: one line per reference, empty when none."""
    scanner = _Scanner()
    scanner.feed(html)
    scanner.close()
    return scanner.found


def scan_file(path: Path) -> list[str]:
    """find_remote_urls on a written deck, plus remote @imports in the local stylesheets it links."""
    html = path.read_text(encoding="utf-8")
    scanner = _Scanner()
    scanner.feed(html)
    scanner.close()
    found = list(scanner.found)
    for href in scanner.local_css:
        css = (path.parent / href.split("?")[0]).resolve()
        if css.is_file():
            found += [f"{href}: url({url})" for url in CSS_REMOTE.findall(css.read_text(errors="replace"))]
        else:
            found.append(f"{href}: linked stylesheet is missing")
    return found


def check_offline(paths: list[Path]) -> None:
    """Fail loudly, listing every reference, if any deck would fetch something from the network."""
    problems = {path: scan_file(path) for path in paths}
    problems = {path: found for path, found in problems.items() if found}
    if problems:
        lines = [f"{path}:\n  " + "\n  ".join(found) for path, found in problems.items()]
        raise SystemExit("decks that are not offline (remote references a browser would fetch):\n"
                         + "\n".join(lines))


def build(notebooks: list[Path] | None = None, out: Path = OUT, to: str = "slides", run: bool = False,
          edition: str = "student") -> list[Path]:
    """Copy the assets, export every page or deck, check they are offline and, for decks, that every slide fits
    its canvas in chromium (tools/slide_fit.py). Returns the files written."""
    notebooks = decks() if notebooks is None else notebooks
    out.mkdir(parents=True, exist_ok=True)
    copy_assets(out)
    written = []
    for notebook in notebooks:
        start = time.perf_counter()
        target = export(notebook, out, to, run, edition)
        written.append(target)
        print(f"{target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}  "
              f"{target.stat().st_size / 1e6:.1f} MB  {time.perf_counter() - start:.1f} s", flush=True)
    check_offline(written)
    if to == "slides":
        from tools import slide_fit

        start = time.perf_counter()
        print(f"{slide_fit.summary(slide_fit.check_fit(written))}, checked in {time.perf_counter() - start:.1f} s")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: slides/*.ipynb and notebooks/NN_*.ipynb")
    parser.add_argument("--to", choices=sorted(SUFFIX), default="slides")
    parser.add_argument("--execute", action="store_true", help="run every notebook before exporting it")
    parser.add_argument("--out", type=Path, default=None, help="default: build/slides for decks, build for pages")
    parser.add_argument("--scan", action="store_true", help="only scan the given HTML files for remote references")
    parser.add_argument("--edition", choices=("student", "instructor"), default="student",
                        help="decks: instructor = with every solution as a slide (into build/slides-instructor)")
    args = parser.parse_args(argv)
    if args.scan:
        check_offline(args.notebooks)
        print(f"{len(args.notebooks)} files: no remote references")
        return 0
    default = (OUT.with_name("slides-instructor") if args.edition == "instructor" else OUT) if args.to == "slides" \
        else ROOT / "build"
    out = (args.out or default).resolve()
    start = time.perf_counter()
    written = build([p.resolve() for p in args.notebooks] or None, out, args.to, args.execute, args.edition)
    print(f"{len(written)} files in {time.perf_counter() - start:.1f} s, offline: open "
          f"{out / written[0].name if written else out} in a browser")
    return 0


if __name__ == "__main__":
    sys.exit(main())
