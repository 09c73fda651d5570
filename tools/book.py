"""The kit as a static, searchable website: `make book` writes the student edition to build/book/index.html.

    python -m tools.book                        # student edition: build/book/ (sources in build/book_src/)
    python -m tools.book --edition instructor   # instructor edition: build/book-instructor/
    python -m tools.book --out /tmp/book        # ... into /tmp/book/ (sources in /tmp/book_src/)

Sphinx with myst-nb and sphinx-book-theme renders docs/index.md (the landing page: the course, with the syllabus
of tools/navigation.py), notebooks/README.md (the contents), notebooks/BEFORE_CLASS.md (for students' laptops),
README.md (the page for developers), every numbered notebook and the talk from their stored outputs: nothing is
executed. The student edition renders the student copies (notebooks/student/: stubs to write, empty answer cells)
at the notebooks' places; those copies hold no outputs, so each cell they share unchanged with the instructor
notebook shows the instructor notebook's outputs (figures, tables, explorers with their saved widget state), and
no solution or check cell shows any. The instructor edition renders the notebooks with their solutions. A banner
on every page names the edition. The source tree (build/book_src/) mirrors the repository, so the notebooks'
links to one another and to the READMEs become links between pages; a link to a file that is not a page keeps
only its text.
Two controls of every page that the theme and myst-nb name with an aria-label leaving out their visible text are
left with their text as their name (`fix_pages`; axe-core's label-content-name-mismatch, tests/test_accessibility.py).
MathJax, require.js and the Jupyter widgets renderer are copied from node_modules/ (`make assets`) into _static/,
as tools/export.py does for its pages. Then every page (with the BertViz views' iframes), script and stylesheet the
build wrote is scanned with export.py's scanner for anything a browser would fetch from the network; any reference
fails the build.
"""
from __future__ import annotations

import argparse
import html
import io
import os
import re
import sys
import time
from pathlib import Path

import nbformat
from nbgrader.utils import is_grade

from tools import export  # the assets and the offline check
from tools import navigation  # the syllabus
from tools import widget_state  # static pages: the explorers' snapshot

ROOT = export.ROOT
PAGES = {"docs/index.md": "index.md", "README.md": "developers.md", "notebooks/README.md": "notebooks/README.md",
         "notebooks/BEFORE_CLASS.md": "notebooks/BEFORE_CLASS.md"}  # repository -> book
SYLLABUS = "<!-- bertlook:syllabus -->"  # docs/index.md: the book puts navigation.py's syllabus here
# edition -> (its folder, the banner on every page)
EDITIONS = {
    "student": (ROOT / "build" / "book", "<b>Student edition</b> · the functions to write are stubs and the answer "
                                         "cells are empty: write them in JupyterLab"),
    "instructor": (ROOT / "build" / "book-instructor", "<b>Instructor edition</b> · with every solution: not for "
                                                       "students"),
}
OUT = EDITIONS["student"][0]
ASSETS = [(src, dst) for src, dst in export.ASSETS if src.startswith(("mathjax", "requirejs", "@jupyter-widgets"))]
# an explorer's controls wrap in the narrow column instead of squeezing its menus to nothing
CSS = (".widget-hbox { flex-wrap: wrap; }\n"
       # the edition's banner: blue for students, red for the instructor's solutions
       ".bd-header-announcement { background: #dbe9f7; color: #102a43; font-size: 1rem; }\n"
       ".bd-header-announcement:has(.instructor) { background: #f9d9d5; color: #5c1a12; }\n"
       # MathJax 2 shows a formula's TeX in #888 on white (3.5:1) until it is typeset: WCAG AA's 4.5:1 instead
       # (span.: more specific than the rule MathJax adds to the page after this stylesheet)
       "span.MathJax_Preview { color: #595959; }\n")
# axe-core's label-content-name-mismatch (WCAG 2.5.3, label in name; serious): an aria-label replaces an element's
# visible text as its name, so a voice-control user who says what they see names nothing. Two controls of every
# page carry one that leaves their text out: the theme's search field (pydata-sphinx-theme's
# components/search-button-field.html: "Search" over "Search Ctrl+K") and myst-nb's toggle of a cell's hidden
# code ("Toggle hidden content" over "Show code cell source"). Their aria-labels are dropped from the written pages
# (`label_in_name`): the visible text becomes the name.
LABEL_NOT_IN_NAME = re.compile(r'(<button class="btn search-button-field[^>]*?) aria-label="[^"]*"'
                               r'|(<summary) aria-label="Toggle hidden content"')
SRCDOC = re.compile(r'srcdoc="([^"]*)"')
LINK = re.compile(r"\[([^\]]*(?:\[[^\]]*\][^\]]*)*)\]\(([^)\s]+)\)")  # [text](target); text may hold [CLS]
CONFIG = {
    "project": "BERTLook",
    "author": "BERTLook contributors",
    "extensions": ["myst_nb"],
    "html_theme": "sphinx_book_theme",
    "html_title": "BERTLook",
    # no header bar: pydata-sphinx-theme 0.20 would put a second search field there
    "html_theme_options": {"show_toc_level": 2, "navbar_persistent": []},
    "html_copy_source": False,  # no copies of the 13 MB of notebooks under _sources/
    "html_static_path": ["_static"],
    "html_css_files": ["book.css"],
    "nb_execution_mode": "off",  # the committed notebooks are executed: render their stored outputs
    "nb_render_markdown_format": "myst",  # claims.say's Markdown outputs hold tables and math
    "myst_enable_extensions": ["dollarmath"],
    "myst_update_mathjax": False,  # its settings are MathJax 3's; the local copy is MathJax 2
    "mathjax_path": f"mathjax/MathJax.js?config={export.MATHJAX_CONFIG}",
    # the widget renderer has the core widgets built in and looks nothing up in its "CDN": a local folder
    # (the pages with widgets are one folder deep) in place of the default remote one
    "nb_ipywidgets_js": {"requirejs/require.js": {},
                         "html-manager/embed-amd.js": {"data-jupyter-widgets-cdn": "../_static/html-manager/"}},
}


def config(edition: str) -> dict:
    """CONFIG with the edition's title and banner."""
    banner = f'<span class="{edition}">{EDITIONS[edition][1]}</span>'
    return {**CONFIG, "html_title": f"BERTLook · {edition} edition",
            "html_theme_options": {**CONFIG["html_theme_options"], "announcement": banner}}


def sources(root: Path = ROOT) -> dict[str, Path]:
    """Book path -> repository file: the course page, the READMEs, the students' page, the talk and the
    (instructor) notebooks."""
    notebooks = {str(path.relative_to(root)): path for path in export.decks(root)}
    return {**{book: root / repo for repo, book in PAGES.items()}, **notebooks}


def relink(text: str, repo_path: str, pages: set[str], page: str | None = None) -> str:
    """Point relative links of `text` (from the file `repo_path`) at the book's pages, as seen from `page` (by
    default the page of `repo_path`); a link to a file outside the book keeps only its text."""
    folder = Path(repo_path).parent
    book_folder = Path(page or PAGES.get(repo_path, repo_path)).parent

    def fix(match: re.Match) -> str:
        label, target = match.groups()
        if re.match(r"[a-z]+:|#|/", target):
            return match.group(0)
        path, hash_, anchor = target.partition("#")
        repo_target = os.path.normpath(folder / path)
        book_target = PAGES.get(repo_target, repo_target)
        if book_target not in pages:
            return label
        return f"[{label}]({os.path.relpath(book_target, book_folder)}{hash_}{anchor})"

    return LINK.sub(fix, text)


def student_notebook(student, instructor) -> list[str]:
    """Give the student copy `student` (no outputs) the outputs of `instructor` on every code cell the two share
    unchanged (same id and source), and the saved widget state; answer cells (stubs, empty answers) and check cells
    keep none. In place; returns the ids of the other code cells whose source differs (a stale copy)."""
    twins = {cell.get("id"): cell for cell in instructor.cells}
    stale = []
    for cell in student.cells:
        if cell.cell_type != "code" or "answer" in cell.metadata.get("tags", []) or is_grade(cell):
            continue
        twin = twins.get(cell.get("id"))
        if twin is None or twin.source != cell.source:
            stale.append(cell.get("id"))
            continue
        cell.outputs, cell.execution_count = twin.outputs, twin.execution_count
    if "widgets" in instructor.metadata:
        student.metadata["widgets"] = instructor.metadata["widgets"]
    return stale


def notebook(book: str, repo: Path, edition: str):
    """The notebook a page renders: the instructor's, or for a numbered notebook of the student edition its
    student copy with the instructor's outputs (a stale copy is named on stderr)."""
    nb = nbformat.read(repo, as_version=4)
    if edition == "student" and book.startswith("notebooks/"):
        instructor, nb = nb, nbformat.read(repo.parent / "student" / repo.name, as_version=4)
        stale = student_notebook(nb, instructor)
        if stale:
            print(f"notebooks/student/{repo.name}: {len(stale)} code cells differ from the instructor notebook "
                  f"(shown without outputs; run `python -m tools.student_copy`): {stale}", file=sys.stderr)
    widget_state.snapshot(nb)  # no kernel behind the page: explorers disabled, with their note
    return nb


def landing(text: str, pages: set[str], root: Path = ROOT) -> str:
    """docs/index.md for the book: its links relinked, the syllabus (tools/navigation.py) in place of its marker."""
    paths = navigation.notebooks(root / "notebooks")
    titles = {path: navigation.title(nbformat.read(path, as_version=4)) for path in paths}
    table = relink(navigation.syllabus(paths, titles), "notebooks/README.md", pages, page="index.md")
    return relink(text, "docs/index.md", pages).replace(SYLLABUS, table)


def write_sources(src: Path, root: Path = ROOT, edition: str = "student") -> None:
    """The Sphinx source tree: the pages with their links fixed, copies of the edition's notebooks (copies, not
    symlinks: myst would resolve a symlink's links from where it points), and the book's stylesheet."""
    books = sources(root)
    stems = [book.removesuffix(".ipynb") for book in books if book.endswith(".ipynb")]
    (src / "_static").mkdir(parents=True, exist_ok=True)
    (src / "_static" / "book.css").write_text(CSS, encoding="utf-8")
    for book, repo in books.items():
        target = src / book
        target.parent.mkdir(parents=True, exist_ok=True)
        if book.endswith(".ipynb"):
            text = nbformat.writes(notebook(book, repo, edition))
        elif book == "index.md":
            text = (landing(repo.read_text(encoding="utf-8"), set(books), root)
                    + toctree("Course", ["notebooks/README", "notebooks/BEFORE_CLASS"])
                    + toctree("Notebooks", [stem for stem in stems if stem.startswith("notebooks/")])
                    + toctree("Talk", [stem for stem in stems if stem.startswith("slides/")])
                    + toctree("For developers", ["The repository's README <developers>"]))
        else:
            text = relink(repo.read_text(encoding="utf-8"), str(repo.relative_to(root)), set(books))
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")


def toctree(caption: str, docs: list[str]) -> str:
    """A hidden toctree: one caption of the left-hand navigation."""
    return "\n```{toctree}\n:hidden:\n:caption: " + caption + "\n\n" + "\n".join(docs) + "\n```\n"


def copy_assets(out: Path = OUT) -> None:
    """MathJax, require.js and the widget renderer (with its icon fonts) into out/_static/."""
    static = out / "_static"
    for src, dst in ASSETS:
        source = export.NODE_MODULES / src
        if not source.exists():
            raise SystemExit(f"missing: {source}; run `make assets` (npm ci)")
        files = [source] if source.is_file() else sorted(p for p in source.rglob("*") if p.is_file())
        for file in files:
            export._sync_file(file, static / dst / file.relative_to(source) if source.is_dir() else static / dst)
    for pattern in export.WIDGET_FONTS:
        for file in (export.NODE_MODULES / "@jupyter-widgets/html-manager/dist").glob(pattern):
            export._sync_file(file, static / "html-manager" / file.name)


def remote_references(out: Path = OUT) -> dict[Path, list[str]]:
    """What in the written pages, scripts and stylesheets a browser would fetch from the network, by file
    (with export.py's scanner). The BertViz views' iframes (srcdoc) are scanned as pages; the copies from
    node_modules are not scanned, as export.py does not: their URL literals are never fetched (schema ids,
    a commented-out @import, the widget CDN that embed-amd.js is told to replace)."""
    vendored = tuple(f"_static/{dst.split('/')[0]}/" for _, dst in ASSETS)
    found = {}
    for path in sorted(out.rglob("*")):
        name = path.relative_to(out).as_posix()
        if name.startswith(vendored) or path.suffix not in (".html", ".js", ".css"):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if path.suffix == ".html" and path.parent.name != "_static":  # _static/*.html: the theme's Jinja macros
            found[path] = export.scan_file(path) + [
                ref for doc in SRCDOC.findall(text) for ref in export.find_remote_urls(html.unescape(doc))]
        elif path.suffix == ".js":
            found[path] = [url for url in export.QUOTED_REMOTE.findall(text) if not url.startswith(export.NOT_FETCHED)]
        elif path.suffix == ".css":
            found[path] = export.CSS_REMOTE.findall(text)
    return {path: refs for path, refs in found.items() if refs}


def label_in_name(page: str) -> str:
    """A written page without the aria-labels that hide the visible text of its controls (LABEL_NOT_IN_NAME)."""
    return LABEL_NOT_IN_NAME.sub(lambda match: match.group(1) or match.group(2), page)


def fix_pages(out: Path = OUT) -> None:
    """`label_in_name` on every page Sphinx wrote (in place; a page already fixed is left as it is)."""
    for path in out.rglob("*.html"):
        if path.parent.name == "_static":  # the theme's Jinja macros
            continue
        text = path.read_text(encoding="utf-8")
        fixed = label_in_name(text)
        if fixed != text:
            path.write_text(fixed, encoding="utf-8")


def build(out: Path = OUT, edition: str = "student") -> Path:
    """Write the edition's sources next to `out` (<out>_src/), run Sphinx (warnings to stderr), fix the pages'
    accessible names (`fix_pages`), copy the assets, check that nothing is remote. Returns the landing page."""
    from sphinx.application import Sphinx

    src = out.with_name(f"{out.name}_src")
    write_sources(src, edition=edition)
    app = Sphinx(src, None, out, src / "_doctrees", "html", confoverrides=config(edition),
                 status=io.StringIO(), warning=sys.stderr)
    app.build()
    if app.statuscode:
        raise SystemExit(f"sphinx failed ({app.statuscode})")
    fix_pages(out)
    copy_assets(out)
    remote = remote_references(out)
    if remote:
        raise SystemExit("the book is not offline:\n" + "\n".join(f"{p}: {refs}" for p, refs in remote.items()))
    return out / "index.html"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edition", choices=EDITIONS, default="student",
                        help="student (default: stubs, no solutions) or instructor (with the solutions)")
    parser.add_argument("--out", type=Path, help="default: build/book (student), build/book-instructor")
    args = parser.parse_args(argv)
    out = (args.out or EDITIONS[args.edition][0]).resolve()
    start = time.perf_counter()
    index = build(out, args.edition)
    pages = len([p for p in out.rglob("*.html") if p.parent.name != "_static"])
    print(f"{args.edition} edition, {pages} pages in {time.perf_counter() - start:.0f} s, offline: open {index}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
