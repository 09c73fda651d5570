"""Header, navigation and contents for the notebooks; idempotent (re-running changes nothing).

    python tools/navigation.py          # update notebooks/NN_*.ipynb, notebooks/README.md and README.md

Every notebook gets a header cell (paper, section, figure; < prev | contents | next >) above its title and a
navigation cell at the end, each recognised by an HTML-comment marker and replaced on every run. The
contents table of README.md (between markers) and notebooks/README.md are written from the same data.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
NOTEBOOK_DIR = ROOT / "notebooks"
HEADER, NAV = "<!-- bertlook:header -->", "<!-- bertlook:nav -->"
CONTENTS_START, CONTENTS_END = "<!-- bertlook:contents:start -->", "<!-- bertlook:contents:end -->"
SKIP_SLIDE = {"slideshow": {"slide_type": "skip"}}

# notebook stem -> (paper and section, figures or tables it reproduces, one line on what it shows)
PLAN = {
    "00_tour": ("Clark et al. 2019 §2; Vig 2019", "background",
                "attention maps, the model, one input as heatmaps and BertViz views, word-level maps, other models"),
    "01_surface_attention": ("Clark et al. 2019 §3.1–3.2", "Fig 1, Fig 2",
                             "attention to positions, [CLS], [SEP], punctuation; Vig's six patterns; the [CLS] sink"),
    "02_sep_noop": ("Clark et al. 2019 §3.2", "Fig 3", "gradient importance of [SEP] attention; a causal test"),
    "03_entropy": ("Clark et al. 2019 §3.3", "Fig 4", "entropy per head, broad heads, [CLS] entropy"),
    "04_syntax_heads": ("Clark et al. 2019 §4.2", "Table 1, Fig 5", "the best head per dependency relation"),
    "05_coreference": ("Clark et al. 2019 §4.3", "Table 2", "the coreference head against rule baselines"),
    "06_probes": ("Clark et al. 2019 §5", "Table 3", "recovering dependency trees from attention"),
    "07_clustering": ("Clark et al. 2019 §6", "Fig 6", "Jensen–Shannon distances between heads, MDS map"),
    "08_dark_secrets_patterns": ("Kovaleva et al. 2019 §4.1, §4.3", "Fig 1–2, Table 1",
                                 "the pattern taxonomy, labelled by eye and classified; what fine-tuning changes"),
    "09_dark_secrets_heads": ("Kovaleva et al. 2019 §4.2, §4.4–4.6", "§4.2 heads, §4.5, §4.6",
                              "relation-specific heads (silver proxy), [CLS] and [SEP], vertical stripes, disabling heads"),
    "10_beyond_attention": ("Kobayashi et al. 2020; Brunner et al. 2020; Abnar & Zuidema 2020; Michel et al. 2019",
                            "later work", "value norms, effective attention, rollout and flow, attribution, head "
                            "importance and pruning"),
}


# notebook stem -> (minutes to walk a class through it, minutes for its "## Exercises"): the authors' estimates
# for an instructor-led lab; the "Implement it yourself" minutes come from `bertlook_utils.exercises`.
CLASS_MINUTES = {"00_tour": (20, 20), "01_surface_attention": (25, 30), "02_sep_noop": (25, 25),
                 "03_entropy": (12, 15), "04_syntax_heads": (30, 30), "05_coreference": (30, 40),
                 "06_probes": (25, 25), "07_clustering": (20, 20), "08_dark_secrets_patterns": (35, 30),
                 "09_dark_secrets_heads": (30, 30), "10_beyond_attention": (35, 30)}
# tools/prefill.py --warm --record: seconds from an empty cache (the notebooks run in order) and from the filled one
TIMINGS = {"full": NOTEBOOK_DIR / "timings.json", "fast": NOTEBOOK_DIR / "timings_fast.json"}

# The syllabus: notebook stem -> (learning goals, what a student needs first)
GOALS = {
    "00_tour": ("read an attention map as rows of probabilities; draw one head as a heatmap, as lines and in BertViz; "
                "turn token maps into word maps", "Python and numpy; what a transformer layer computes"),
    "01_surface_attention": ("measure where every head attends over 1,000 segments; tell positional heads from sink "
                             "heads; choose a head on some inputs and score it on others", "00"),
    "02_sep_noop": ("take gradients with respect to attention weights; test a claim causally, against a matched "
                    "control", "01; backpropagation"),
    "03_entropy": ("compute and compare row entropies; relate broad and focused heads to the sinks", "01"),
    "04_syntax_heads": ("score a head as a dependency parser against a fixed-offset baseline; report a chosen head "
                        "on held-out data; read silver parses with care", "00, 03; dependency grammar"),
    "05_coreference": ("score antecedent selection against rule baselines; explain a head's errors by case",
                       "04"),
    "06_probes": ("train a probe on all attention maps; compare with baselines and an untrained model; decode a "
                  "tree", "04; logistic regression"),
    "07_clustering": ("compute Jensen–Shannon distances between heads; read an MDS map; test grouping claims with "
                      "permutations", "01, 03"),
    "08_dark_secrets_patterns": ("classify attention patterns and measure how well the classifier does; fine-tune "
                                 "against honest baselines; compare maps before and after", "01, 03, 07"),
    "09_dark_secrets_heads": ("test relation heads against two nulls; trace [CLS] and [SEP] through fine-tuning; "
                              "disable heads with a held-out choice", "08"),
    "10_beyond_attention": ("weigh attention by value norms, residual and LayerNorm; compute effective attention, "
                            "rollout and flow; rank heads by importance and prune", "02, 08, 09"),
}

# Three 3-hour lab sessions, and one 90-minute lecture: (title, notebooks, plan)
SESSIONS = (
    ("Lab 1 · What attention looks at (3 h)", ("00_tour", "01_surface_attention", "02_sep_noop", "03_entropy"),
     "walk through all four; in class the Implement exercises of 00, 01 and 03; 02's Implement exercise and the "
     "numbered exercises of 01 and 02 as homework"),
    ("Lab 2 · Syntax, coreference and structure (3 h)", ("04_syntax_heads", "05_coreference", "06_probes",
                                                          "07_clustering"),
     "04 and 05 in depth with their Implement exercises; 06 and 07 walked through, their exercises as homework"),
    ("Lab 3 · Dark secrets and what weights miss (3 h)", ("08_dark_secrets_patterns", "09_dark_secrets_heads",
                                                           "10_beyond_attention"),
     "08 and 09 in class (run `make prefill` beforehand: they fine-tune); 10's §1 and §3 in class, the rest and "
     "the remaining exercises as homework"),
    ("A single 90-minute lecture", (),
     "the talk (`slides/bertlook_talk.ipynb`, 30–45 min), then 00's heatmaps and 01's Figure 2 live (20 min), one "
     "Implement exercise done together (`mean_entropy`, 10 min), and questions"),
)


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
    paper, figures, _ = PLAN.get(path.stem, ("", "", ""))
    i = paths.index(path)
    prev = paths[i - 1] if i > 0 else None
    nxt = paths[i + 1] if i + 1 < len(paths) else None
    return "\n".join([
        HEADER,
        f"**BERTLook** · notebook {i + 1} of {len(paths)} · {paper} · {figures}",
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

    walk, numbered = CLASS_MINUTES.get(stem, (0, 0))
    return walk + numbered + sum(exercises.get(n).minutes for n in exercises.names(stem[:2]))


def _seconds(stem: str, which: str, mode: str = "full") -> str:
    recorded = json.loads(TIMINGS[mode].read_text())["seconds"] if TIMINGS[mode].exists() else {}
    value = recorded.get(stem, {}).get(which)
    return "" if value is None else f"{value / 60:.1f} min" if value >= 90 else f"{value:.0f} s"


def contents_table(paths: list[Path], titles: dict[Path, str], prefix: str) -> str:
    rows = ["| notebook | paper | reproduces | what it shows | cold run | from the cache | fast mode, cold | class time |",
            "|---|---|---|---|---|---|---|---|"]
    for path in paths:
        paper, figures, summary = PLAN.get(path.stem, ("", "", ""))
        rows.append(f"| [{titles[path]}]({prefix}{path.name}) | {paper} | {figures} | {summary} | "
                    f"{_seconds(path.stem, 'first')} | {_seconds(path.stem, 'warm')} | {_seconds(path.stem, 'first', 'fast')} | "
                    f"{class_minutes(path.stem)} min |")
    return "\n".join(rows)


def syllabus(paths: list[Path], titles: dict[Path, str]) -> str:
    """The syllabus of notebooks/README.md: goals and prerequisites per notebook, then the session plans."""
    lines = ["## Syllabus", "", "| notebook | after it, a student can … | needs first | class time |", "|---|---|---|---|"]
    for path in paths:
        goals, needs = GOALS.get(path.stem, ("", ""))
        lines.append(f"| [{titles[path]}]({path.name}) | {goals} | {needs} | {class_minutes(path.stem)} min |")
    lines += ["", "Class time = walk-through + Implement it yourself + the numbered exercises (the authors' estimate "
              "for an instructor-led lab; the Implement minutes are each exercise's own estimate).", ""]
    for title_, stems, plan in SESSIONS:
        total = sum(class_minutes(s) for s in stems)
        listed = ", ".join(s[:2] for s in stems)
        lines.append(f"- **{title_}**" + (f" — notebooks {listed} ({total} min at full length): " if stems else ": ")
                     + plan + ".")
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
        "functions and answer cells (regenerate with `python tools/student_copy.py`); they carry nbgrader metadata,",
        "so an instructor can `nbgrader autograde` them (run nbgrader from the kit's environment, with `.venv/bin` on",
        "`PATH`: it calls `alembic`; `tests/test_nbgrader.py` goes through generate, autograde and export).", "",
        "**Before a class**, `make prefill` runs every notebook once so that the cache holds everything: afterwards",
        "each notebook runs in the time of the \"from the cache\" column. `make prefill FAST=1` (or `BERTLOOK_FAST=1`",
        "in the environment of Jupyter) switches to fast mode: smaller samples, about a minute per notebook from a",
        "cold cache, every output marked as fast mode. The committed notebooks are full runs. The times below were",
        "measured on a 2-core machine, the notebooks run in order from an empty cache, then again from the filled one",
        "(`tools/prefill.py --warm --record notebooks/timings.json`; `BERTLOOK_FAST=1 ... timings_fast.json`).", "",
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
