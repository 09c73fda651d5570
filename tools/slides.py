"""RISE slide metadata for notebooks; idempotent (re-running changes nothing).

    python -m tools.slides notebooks/*.ipynb slides/*.ipynb          # fill in what is missing
    python -m tools.slides --check notebooks/*.ipynb                 # exit 1 if a notebook would change
    python -m tools.slides --reset notebooks/01_surface_attention.ipynb  # recompute every cell's type

Every cell gets `metadata.slideshow.slide_type` (what RISE in JupyterLab and nbconvert's reveal.js exporter
read), by these rules:

| cell | slide type |
|---|---|
| markdown starting with `<!-- notes -->` | `notes` (speaker notes: press T in RISE, S in a built deck) |
| markdown starting with `<!-- skip -->`, `<!-- fragment -->`, `<!-- subslide -->`, `<!-- slide -->` | that type |
| markdown starting with `<!-- bertlook:header -->` / `<!-- bertlook:nav -->` (tools/navigation.py) | `skip` |
| the title: the first markdown cell with a level-1 heading (else the first markdown cell) | `slide` |
| markdown starting with `# ` or `## ` | `slide` |
| markdown starting with `### ` | `subslide` |
| a heading alone whose section shows nothing else (`## Parameters` above a skipped cell) | `skip` |
| other markdown that follows a code cell on the same slide (a take-away after a figure) | `fragment` |
| set-up code (tag `parameters`; or only imports, UPPER_CASE assignments, bare set-up calls, no output) | `skip` |
| empty cells | `skip` |
| everything else | `-` (continues the current slide) |

A cell that already has a slide type keeps it (hand-set types win), unless `--reset` is given. The notebook
gets `metadata.rise` (RISE's settings: theme, scroll, size...) where keys are missing; values already there
are kept. A file is rewritten only when something changed.
"""
from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

import nbformat

SLIDE_TYPES = ("slide", "subslide", "fragment", "-", "skip", "notes")
# RISE (jupyterlab-rise) settings. width/height "100%": the slide fills the JupyterLab panel and figures
# shrink to fit it; the offline decks (tools/export.py) use a fixed 1280 x 800 canvas instead.
RISE_DEFAULTS = {
    "theme": "white",  # reveal.js theme whose fonts ship with reveal.js (no web fonts to fetch)
    "transition": "fade",
    "scroll": True,  # tall slides (tables, big figures) scroll instead of being cut off
    "width": "100%",
    "height": "100%",
    "center": False,  # content starts at the top: figures and tables do not jump around
    "slideNumber": "c/t",
    "start_slideshow_at": "beginning",
    "autolaunch": False,
    "enable_chalkboard": True,
}
MARKER = re.compile(r"\A\s*<!--\s*(notes|skip|fragment|subslide|slide|bertlook:header|bertlook:nav)\s*-->")
MARKER_TYPES = {"notes": "notes", "skip": "skip", "fragment": "fragment", "subslide": "subslide",
                "slide": "slide", "bertlook:header": "skip", "bertlook:nav": "skip"}
HEADING = re.compile(r"\A\s*(#{1,6})\s+\S")


def heading_level(source: str) -> int | None:
    """Level of the heading the cell starts with (1 for "# ..."), or None."""
    match = HEADING.match(source)
    return len(match.group(1)) if match else None


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
    if "parameters" in cell.metadata.get("tags", []):
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


def infer_slide_types(nb) -> list[str]:
    """The slide type the rules give each cell of `nb` (ignoring the types already set)."""
    markdown = [i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and not MARKER.match(c.source)]
    titled = [i for i in markdown if heading_level(nb.cells[i].source) == 1]
    title = titled[0] if titled else (markdown[0] if markdown else None)
    types: list[str] = []
    after_code = False  # has a code cell been shown since the current slide started?
    for i, cell in enumerate(nb.cells):
        source = cell.source
        marker = MARKER.match(source) if cell.cell_type == "markdown" else None
        if not source.strip():
            kind = "skip"
        elif marker:
            kind = MARKER_TYPES[marker.group(1)]
        elif cell.cell_type == "markdown":
            level = heading_level(source)
            if i == title or level in (1, 2):
                kind = "slide"
            elif level == 3:
                kind = "subslide"
            elif after_code:
                kind = "fragment"
            else:
                kind = "-"
        elif cell.cell_type == "code":
            kind = "skip" if is_setup_code(cell) else "-"
        else:  # raw cells
            kind = "skip"
        if kind in ("slide", "subslide"):
            after_code = False
        elif kind in ("-", "fragment") and cell.cell_type == "code":
            after_code = True
        types.append(kind)
    # A bare heading whose section shows nothing (e.g. "## Parameters" above a skipped parameters cell)
    # would be an empty slide: skip it too.
    for i, cell in enumerate(nb.cells):
        if types[i] in ("slide", "subslide") and i != title and len(cell.source.strip().splitlines()) == 1:
            rest = [types[j] for j in range(i + 1, len(types)) if types[j] not in ("skip", "notes")]
            if not rest or rest[0] in ("slide", "subslide"):
                types[i] = "skip"
    return types


def apply(nb, reset: bool = False, rise: dict | None = None) -> bool:
    """Set missing slide types (all of them with reset=True) and missing RISE settings; True if nb changed."""
    changed = False
    for cell, kind in zip(nb.cells, infer_slide_types(nb)):
        slideshow = cell.metadata.get("slideshow", {})
        current = slideshow.get("slide_type")
        if current in SLIDE_TYPES and not reset:
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


def update(path: Path | str, reset: bool = False, write: bool = True) -> bool:
    """Apply the rules to the notebook at `path`; rewrite it if something changed. True if it changed."""
    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    changed = apply(nb, reset=reset)
    if changed and write:
        path.write_text(render(nb))
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--reset", action="store_true", help="recompute every cell's type, hand-set ones too")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a notebook would change")
    args = parser.parse_args(argv)
    stale = []
    for path in args.notebooks:
        if update(path, reset=args.reset, write=not args.check):
            stale.append(path)
            print(("would update " if args.check else "updated ") + str(path))
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
