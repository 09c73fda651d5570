"""Header, navigation and contents for the notebooks; idempotent (re-running changes nothing).

    python -m tools.navigation          # update notebooks/NN_*.ipynb, notebooks/README.md and README.md

Every notebook gets a header cell (paper, section, figure; < prev | contents | next >) above its title and a
navigation cell at the end, each recognised by an HTML-comment marker and replaced on every run. The
contents table of README.md (between markers) and notebooks/README.md are written from notebooks/course.toml.
"""
from __future__ import annotations

import functools
import json
import re
import sys
import tomllib
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = ROOT / "notebooks"
HEADER, NAV = "<!-- bertlook:header -->", "<!-- bertlook:nav -->"
CONTENTS_START, CONTENTS_END = "<!-- bertlook:contents:start -->", "<!-- bertlook:contents:end -->"
SKIP_SLIDE = {"slideshow": {"slide_type": "skip"}}

# `python -m tools.prefill --warm --record`: seconds from an empty cache (the notebooks run in order) and from the
# filled one
TIMINGS = {"full": ROOT / "benchmarks" / "timings.json", "fast": ROOT / "benchmarks" / "timings_fast.json"}
COURSE = NOTEBOOK_DIR / "course.toml"


@functools.cache
def course() -> dict:
    """notebooks/course.toml: {"notebooks": {stem: {"paper", "reproduces", "shows", "goals", "needs", "walk_minutes",
    "exercise_minutes"}}, "sessions": [{"title", "notebooks", "plan"}]}, in the file's order."""
    return tomllib.loads(COURSE.read_text(encoding="utf-8"))


def notebooks(folder: Path = NOTEBOOK_DIR) -> list[Path]:
    """The numbered notebooks, in order."""
    return sorted(folder.glob("[0-9][0-9]_*.ipynb"))


def title(nb) -> str:
    """The notebook's level-1 heading ("01 · Surface attention: ..."), without the marker cells."""
    for cell in nb.cells:
        match = re.search(r"^# (.+)$", cell.source, flags=re.M)
        if cell.cell_type == "markdown" and match and HEADER not in cell.source:
            return match.group(1).strip()
    raise ValueError("notebook has no level-1 heading")


def _link(path: Path | None, text: str) -> str:
    return f"[{text}]({path.name})" if path else ""


def header_source(path: Path, paths: list[Path], titles: dict[Path, str]) -> str:
    about = course()["notebooks"][path.stem]
    i = paths.index(path)
    prev = paths[i - 1] if i > 0 else None
    nxt = paths[i + 1] if i + 1 < len(paths) else None
    return "\n".join([
        HEADER,
        f"**BERTLook** · notebook {path.stem[:2]} of {paths[0].stem[:2]}–{paths[-1].stem[:2]} · {about['paper']} · "
        f"{about['reproduces']}",
        "",
        nav_line(prev, nxt, titles),
    ])


def nav_line(prev: Path | None, nxt: Path | None, titles: dict[Path, str]) -> str:
    parts = [_link(prev, f"< {titles[prev]}") if prev else "", "[Contents](README.md)",
             _link(nxt, f"{titles[nxt]} >") if nxt else ""]
    return " | ".join(p for p in parts if p)


def decorate(nb, header: str, footer: str) -> None:
    """Replace (or insert) the header cell at the top and the navigation cell at the bottom."""
    nb.cells = [c for c in nb.cells if not (c.cell_type == "markdown" and (HEADER in c.source or NAV in c.source))]
    top = nbformat.v4.new_markdown_cell(header, metadata=dict(SKIP_SLIDE))
    bottom = nbformat.v4.new_markdown_cell(footer, metadata=dict(SKIP_SLIDE))
    top["id"], bottom["id"] = "bertlook-header", "bertlook-nav"
    nb.cells = [top, *nb.cells, bottom]


def class_minutes(stem: str) -> int:
    """Walk-through + Implement + numbered exercises, in minutes."""
    from bertlook_utils import exercises

    about = course()["notebooks"][stem]
    implement = sum(exercises.get(n).minutes for n in exercises.names(stem[:2]))
    return about["walk_minutes"] + implement + about["exercise_minutes"]


def _seconds(stem: str, which: str, mode: str = "full") -> str:
    recorded = json.loads(TIMINGS[mode].read_text())["seconds"] if TIMINGS[mode].exists() else {}
    value = recorded.get(stem, {}).get(which)
    return "" if value is None else f"{value / 60:.1f} min" if value >= 90 else f"{value:.0f} s"


def contents_table(paths: list[Path], titles: dict[Path, str], prefix: str) -> str:
    rows = ["| notebook | paper | reproduces | what it shows | cold run | from the cache | fast mode, cold "
            "| class time |", "|---|---|---|---|---|---|---|---|"]
    for path in paths:
        about = course()["notebooks"][path.stem]
        rows.append(f"| [{titles[path]}]({prefix}{path.name}) | {about['paper']} | {about['reproduces']} | "
                    f"{about['shows']} | {_seconds(path.stem, 'first')} | {_seconds(path.stem, 'warm')} | "
                    f"{_seconds(path.stem, 'first', 'fast')} | {class_minutes(path.stem)} min |")
    return "\n".join(rows)


def syllabus(paths: list[Path], titles: dict[Path, str]) -> str:
    """The syllabus of notebooks/README.md: goals and prerequisites per notebook, then the session plans."""
    lines = ["## Syllabus", "", "| notebook | after it, a student can … | needs first | class time |",
             "|---|---|---|---|"]
    for path in paths:
        about = course()["notebooks"][path.stem]
        lines.append(f"| [{titles[path]}]({path.name}) | {about['goals']} | {about['needs']} | "
                     f"{class_minutes(path.stem)} min |")
    lines += ["", "Class time = walk-through + Implement it yourself + the numbered exercises (the authors' estimate "
              "for an instructor-led lab; the Implement minutes are each exercise's own estimate). Goals, times and "
              "sessions come from `course.toml`: edit it, then run `python -m tools.navigation`.", ""]
    for session in course()["sessions"]:
        stems = session["notebooks"]
        total = sum(class_minutes(s) for s in stems)
        listed = ", ".join(s[:2] for s in stems)
        lines.append(f"- **{session['title']}**" + (f" — notebooks {listed} ({total} min at full length): " if stems
                                                     else ": ") + session["plan"] + ".")
    return "\n".join(lines)


def replace_between(text: str, body: str) -> str:
    start, end = text.index(CONTENTS_START), text.index(CONTENTS_END)
    return text[:start + len(CONTENTS_START)] + "\n" + body + "\n" + text[end:]


def update(root: Path = ROOT) -> list[Path]:
    """Rewrite what is out of date; return the files that changed."""
    paths = notebooks(root / "notebooks")
    books = {p: nbformat.read(p, as_version=4) for p in paths}
    titles = {p: title(nb) for p, nb in books.items()}
    changed = []
    for path, nb in books.items():
        i = paths.index(path)
        footer = "\n".join([NAV, nav_line(paths[i - 1] if i else None, paths[i + 1] if i + 1 < len(paths) else None,
                                          titles)])
        decorate(nb, header_source(path, paths, titles), footer)
        text = nbformat.writes(nb)
        text = text if text.endswith("\n") else text + "\n"
        if text != path.read_text():
            path.write_text(text)
            changed.append(path)
    readme = root / "README.md"
    new = replace_between(readme.read_text(), contents_table(paths, titles, "notebooks/"))
    index = root / "notebooks" / "README.md"
    index_text = "\n".join([
        "# BERTLook notebooks", "",
        "Run them in order. Each opens with the paper's claim and a question to predict, and ends with \"paper vs",
        "this run\", takeaways, recall questions, exercises to implement (checked at once by `exercises.check`) and",
        "numbered exercises with solutions. `student/` holds the same notebooks without outputs, with empty",
        "functions and answer cells (regenerate with `python -m tools.student_copy`); they carry nbgrader metadata,",
        "so an instructor can `nbgrader autograde` them (run nbgrader from the kit's environment, with `.venv/bin` on",
        "`PATH`: it calls `alembic`; `tests/test_nbgrader.py` goes through generate, autograde and export).",
        "Autograde's checks run in the student's kernel, where the student's own code can change them; the grade of",
        "record is `make grade SUBMITTED='submitted/*/00/*.ipynb' GRADES=grades.csv`, which runs only the solution",
        "cells, in a process of their own, and judges their answers outside it (run it as a user who cannot write the",
        "kit).", "",
        "**Students**: [Before the first class](BEFORE_CLASS.md) says what to install on a laptop, how long it takes",
        "and how to start from a teacher's cache pack.", "",
        "**Before a class**, `make prefill` runs every notebook once so that the cache holds everything: afterwards",
        "each notebook runs in the time of the \"from the cache\" column; `make cache-pack` puts that cache into one",
        "file to hand out. `make prefill FAST=1` (or `BERTLOOK_FAST=1`",
        "in the environment of Jupyter) switches to fast mode: smaller samples, about a minute per notebook from a",
        "cold cache, every output marked as fast mode. The committed notebooks are full runs. The times below were",
        "measured on a 2-core machine, the notebooks run in order from an empty cache, then again from the filled one",
        "(`python -m tools.prefill --warm --record benchmarks/timings.json`; `BERTLOOK_FAST=1 ...`",
        "`benchmarks/timings_fast.json`).", "",
        CONTENTS_START, contents_table(paths, titles, ""), CONTENTS_END, "", syllabus(paths, titles), ""])
    for target, text in ((readme, new), (index, index_text)):
        if not target.exists() or target.read_text() != text:
            target.write_text(text)
            changed.append(target)
    return changed


if __name__ == "__main__":
    for path in update():
        print("updated", path.relative_to(ROOT))
    sys.exit(0)
