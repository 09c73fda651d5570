"""Slide metadata for the notebooks: what a class sees when a notebook is presented (live in jupyterlab-rise, or as
an offline deck), and where its slides break so that each fits a 1024 x 768 projector.

    python -m tools.slides notebooks/*.ipynb slides/*.ipynb      # fill in what is missing (idempotent)
    python -m tools.slides --check notebooks/*.ipynb              # exit 1 if a notebook would change
    python -m tools.slides --reset notebooks/01_surface_attention.ipynb   # every cell's type from the rules again
    python -m tools.slides --fit notebooks/*.ipynb                # the rules, then breaks measured in a browser

Every cell gets `metadata.slideshow.slide_type` (what jupyterlab-rise and nbconvert's reveal.js exporter read):

- `notes`, `skip`, `fragment`, `subslide`, `slide`: a markdown cell that starts with `<!-- notes -->` (speaker
  notes: T live, S in a deck), `<!-- skip -->`, ...; the kit's generated cells by their marker: `bertlook:header`,
  `:nav` and `:rubric` skip, `:frame` is a fragment, `:implement` a slide, `:written-analysis` a sub-slide;
- `slide`: the title (the first level-1 heading) and `# ` / `## ` headings; `subslide`: `### ` headings (a heading
  alone whose section shows nothing else is skipped);
- `skip`: what a class should not see: solutions and `### Solutions`, exercise checks, claim checks
  (`claims.check`), set-up code (imports, UPPER_CASE parameters and bare calls, without output; or tag
  `parameters`), empty and raw cells, and a long printout tagged `not-on-slides` (the notebook shows it);
- `fragment`: text after a result on the same slide that introduces no later result (a take-away);
- `-` (continues the slide): everything else; `--fit` makes some of them `subslide`.

What shows of a cell on a slide: a prose cell (tag `hide-input`: a `claims.say` f-string), a code cell of more
than MAX_CODE_LINES lines and one tagged `output-on-slides` show only their output, live too
(`jupyter.source_hidden`; notebooks/rise.css hides the placeholder); JupyterLab shows their code one click away,
and the student copies and the book show it.

`--fit` breaks a slide that would be taller than the canvas: it measures every shown cell in the live slideshow and
in the offline deck (tools/slide_fit.py), and starts a sub-slide before a unit that would not fit -- a result (a
code cell with output) together with the text and code that introduce it, and the take-aways after it; a unit too
tall for one slide shows its text (with its heading) on one, its result on the next, its take-aways after that.
A hand-set type is kept unless `--reset` or `--fit` is given. The notebook gets `metadata.rise` where keys are missing.
"""
from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

import nbformat

SLIDE_TYPES = ("slide", "subslide", "fragment", "-", "skip", "notes")
# RISE (jupyterlab-rise) settings: the slide fills the window (a tall slide would scroll, which the fit check
# refuses); the offline decks (tools/export.py) use a 1024 x 768 canvas with the same stylesheet (rise.css).
RISE_DEFAULTS = {
    "theme": "white",  # reveal.js theme whose fonts ship with reveal.js (no web fonts to fetch)
    "transition": "fade",
    "scroll": True,
    "width": "100%",
    "height": "100%",
    "center": False,  # content starts at the top: figures and tables do not jump around
    "slideNumber": "c/t",
    "start_slideshow_at": "beginning",
    "autolaunch": False,
    "enable_chalkboard": True,
}
MARKER = re.compile(r"\A\s*<!--\s*(notes|skip|fragment|subslide|slide|bertlook:[a-z-]+)\s*-->")
MARKER_TYPES = {"notes": "notes", "skip": "skip", "fragment": "fragment", "subslide": "subslide", "slide": "slide",
                "bertlook:header": "skip", "bertlook:nav": "skip", "bertlook:rubric": "skip",
                "bertlook:frame": "fragment", "bertlook:implement": "slide", "bertlook:written-analysis": "subslide"}
HEADING = re.compile(r"\A\s*(#{1,6})\s+\S")
SOLUTIONS_HEADING = "### Solutions"
MAX_CODE_LINES = 8  # a longer code cell shows only its output on a slide
PROSE = "hide-input"  # the tag of a prose cell: its output is the text
NOT_ON_SLIDES = "not-on-slides"  # a cell's tag: a long printout, read in the notebook, left out of the slides
OUTPUT_ON_SLIDES = "output-on-slides"  # a cell's tag: its slide shows only its output, however short its code
BUDGET = 0.95  # of the canvas height, what `--fit` fills at most: room for a line that wraps differently


def heading_level(source: str) -> int | None:
    """Level of the heading the cell starts with (1 for "# ..."), or None."""
    match = HEADING.match(source)
    return len(match.group(1)) if match else None


def _tags(cell) -> list[str]:
    return cell.metadata.get("tags", [])


def _is_parameter_target(target: ast.expr) -> bool:
    if isinstance(target, ast.Name):
        return target.id.isupper()
    if isinstance(target, ast.Tuple):
        return all(_is_parameter_target(t) for t in target.elts)
    return False


def _setup_statement(node: ast.stmt) -> str | None:
    """'import' / 'parameter' / 'call' for statements a set-up cell may hold, else None."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return "import"
    if isinstance(node, ast.Assign) and all(_is_parameter_target(t) for t in node.targets):
        return "parameter"
    if isinstance(node, ast.AnnAssign) and _is_parameter_target(node.target):
        return "parameter"
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        return "call"  # viz.use_style(), torch.manual_seed(0), warnings.filterwarnings(...)
    return None


def _has_visible_output(cell) -> bool:
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream" and output.get("name") == "stderr":
            continue  # warnings while importing do not make a cell worth a slide
        return True
    return False


def is_setup_code(cell) -> bool:
    """True for a code cell that only imports and sets parameters (what a slide need not show)."""
    if "parameters" in _tags(cell):
        return True
    lines = [line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!"))]
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        return False
    kinds = [_setup_statement(node) for node in tree.body]
    if not kinds or None in kinds or _has_visible_output(cell):
        return False
    return "import" in kinds or "parameter" in kinds


def is_hidden_from_class(cell) -> bool:
    """A code cell a class should not see: a solution, an exercise's or a claim's check, set-up code, a cell tagged
    NOT_ON_SLIDES."""
    tags = _tags(cell)
    return (NOT_ON_SLIDES in tags or "solution" in tags or "exercise_check" in cell.metadata
            or "exercise" in cell.metadata or cell.metadata.get("nbgrader", {}).get("grade", False)
            or "claims.check(" in cell.source or is_setup_code(cell))


def output_only(cell) -> bool:
    """True for a code cell whose slide shows only its output: a prose cell, code longer than MAX_CODE_LINES, or a
    cell tagged OUTPUT_ON_SLIDES."""
    return cell.cell_type == "code" and (PROSE in _tags(cell) or OUTPUT_ON_SLIDES in _tags(cell)
                                         or len(cell.source.splitlines()) > MAX_CODE_LINES)


def role(cell, is_title: bool = False) -> str:
    """What a cell is on the slides: a fixed slide type ("slide", "subslide", "skip", "notes", "fragment"), or
    "text" (markdown, a prose cell), "result" (code with output) or "code" (code without)."""
    source = cell.source
    if not source.strip() or cell.cell_type not in ("markdown", "code"):
        return "skip"
    if cell.cell_type == "markdown":
        marker = MARKER.match(source)
        if marker:
            return MARKER_TYPES.get(marker.group(1), "-")
        if source.startswith(SOLUTIONS_HEADING):
            return "skip"
        level = heading_level(source)
        if is_title or level in (1, 2):
            return "slide"
        return "subslide" if level == 3 else "text"
    if is_hidden_from_class(cell):
        return "skip"
    if PROSE in _tags(cell):
        return "text"
    return "result" if _has_visible_output(cell) else "code"


def roles(nb) -> list[str]:
    """`role` of every cell of `nb`; a bare heading whose section shows nothing becomes "skip"."""
    markdown = [i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and not MARKER.match(c.source)]
    titled = [i for i in markdown if heading_level(nb.cells[i].source) == 1]
    title = titled[0] if titled else (markdown[0] if markdown else None)
    found = [role(cell, i == title) for i, cell in enumerate(nb.cells)]
    for i, cell in enumerate(nb.cells):
        if found[i] in ("slide", "subslide") and i != title and len(cell.source.strip().splitlines()) == 1:
            rest = [found[j] for j in range(i + 1, len(found)) if found[j] not in ("skip", "notes")]
            if not rest or rest[0] in ("slide", "subslide"):
                found[i] = "skip"  # e.g. "## Parameters" above a skipped parameters cell
    return found


def units(found: list[str]) -> list[list[int]]:
    """The cells shown on slides, in runs that stay on one slide: a heading starts a run; a result ends one, with
    the text and code before it that introduce it, and the take-aways after it (text that no later result of the
    same section follows)."""
    groups: list[list[int]] = []
    current: list[int] = []
    pending: list[int] = []  # text and code since the last result
    for i, kind in enumerate(found):
        if kind in ("skip", "notes"):
            continue
        if kind in ("slide", "subslide"):
            groups += [g for g in (current + pending,) if g]
            current, pending = [i], []
        elif kind == "result":
            if any(found[j] == "result" for j in current):  # a second result: what introduces it goes with it
                groups.append(current)
                current = []
            current += pending + [i]
            pending = []
        else:
            pending.append(i)
    groups += [g for g in (current + pending,) if g]
    return groups


def infer_slide_types(nb, heights: dict[int, float] | None = None) -> list[str]:
    """The slide type the rules give each cell of `nb`; with `heights` (cell index -> height as a share of the
    canvas, as tools/slide_fit.py measures them), a unit that would overflow its slide starts a sub-slide."""
    found = roles(nb)
    types = [kind if kind in SLIDE_TYPES else "-" for kind in found]
    for group in units(found):
        shown = [i for i in group if found[i] == "result"]
        for i in group:
            if found[i] == "text" and shown and i > shown[-1]:
                types[i] = "fragment"  # a take-away after the result
    if heights:
        used = 0.0
        for group in units(found):
            size = sum(heights.get(i, 0.0) for i in group)
            parts = [group]
            if size > BUDGET:  # too tall together: the text before the result, the result, the take-aways apart
                results = [k for k, i in enumerate(group) if found[i] == "result"]
                cuts = sorted({0, *results[:1], results[-1] + 1, len(group)}) if results else [0, len(group)]
                parts = [group[a:b] for a, b in zip(cuts, cuts[1:]) if b > a]
            for part in parts:
                size = sum(heights.get(i, 0.0) for i in part)
                if found[part[0]] in ("slide", "subslide"):
                    used = size
                elif used + size > BUDGET:
                    types[part[0]] = "subslide"
                    used = size
                else:
                    used += size
    return types


def hide_inputs(nb) -> bool:
    """Collapse the input of every output-only cell shown on a slide (`jupyter.source_hidden`), open the others;
    True if something changed."""
    changed = False
    for cell, kind in zip(nb.cells, roles(nb)):
        if cell.cell_type != "code":
            continue
        hidden = kind not in ("skip", "notes") and output_only(cell)
        view = cell.metadata.get("jupyter", {})
        if bool(view.get("source_hidden")) != hidden:
            view = {k: v for k, v in view.items() if k != "source_hidden"} | ({"source_hidden": True} if hidden else {})
            if view:
                cell.metadata["jupyter"] = view
            else:
                cell.metadata.pop("jupyter", None)
            changed = True
    return changed


def apply(nb, reset: bool = False, rise: dict | None = None, heights: dict[int, float] | None = None) -> bool:
    """Set missing slide types (all of them with reset=True or `heights`), the collapsed inputs and missing RISE
    settings; True if nb changed."""
    changed = hide_inputs(nb)
    for cell, kind in zip(nb.cells, infer_slide_types(nb, heights)):
        slideshow = cell.metadata.get("slideshow", {})
        current = slideshow.get("slide_type")
        if current in SLIDE_TYPES and not reset and heights is None:
            continue
        if current != kind:
            cell.metadata["slideshow"] = {**slideshow, "slide_type": kind}
            changed = True
    settings = nb.metadata.get("rise", {})
    merged = {**(RISE_DEFAULTS if rise is None else rise), **settings}
    if merged != settings:
        nb.metadata["rise"] = merged
        changed = True
    return changed


def render(nb) -> str:
    text = nbformat.writes(nb)
    return text if text.endswith("\n") else text + "\n"


def update(path: Path | str, reset: bool = False, write: bool = True, heights: dict[int, float] | None = None) -> bool:
    """Apply the rules to the notebook at `path`; rewrite it if something changed. True if it changed."""
    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    changed = apply(nb, reset=reset, heights=heights)
    if changed and write:
        path.write_text(render(nb))
    return changed


def fit(paths: list[Path]) -> None:
    """The rules, then the breaks that make every slide fit: every shown cell measured live and in the deck."""
    from tools import slide_fit

    for path in paths:
        update(path, reset=True)
    heights = slide_fit.cell_heights(paths)
    for path in paths:
        update(path, heights=heights[path])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--reset", action="store_true", help="recompute every cell's type, hand-set ones too")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a notebook would change")
    parser.add_argument("--fit", action="store_true", help="the rules, then breaks measured in a browser")
    args = parser.parse_args(argv)
    if args.fit:
        fit(args.notebooks)
        return 0
    stale = []
    for path in args.notebooks:
        if update(path, reset=args.reset, write=not args.check):
            stale.append(path)
            print(("would update " if args.check else "updated ") + str(path))
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
