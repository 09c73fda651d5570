"""Header, navigation and contents for the notebooks; idempotent (re-running changes nothing).

    python tools/navigation.py          # update notebooks/NN_*.ipynb, notebooks/README.md and README.md

Every notebook gets a header cell (paper, section, figure; < prev | contents | next >) above its title and a
navigation cell at the end, each recognised by an HTML-comment marker and replaced on every run. The
contents table of README.md (between markers) and notebooks/README.md are written from the same data.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
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


def contents_table(paths: list[Path], titles: dict[Path, str], prefix: str) -> str:
    rows = ["| notebook | paper | reproduces | what it shows |", "|---|---|---|---|"]
    for path in paths:
        paper, figures, summary = PLAN.get(path.stem, ("", "", ""))
        rows.append(f"| [{titles[path]}]({prefix}{path.name}) | {paper} | {figures} | {summary} |")
    return "\n".join(rows)


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
        "Run them in order; each opens with the paper section and figure it reproduces and ends with",
        "\"paper vs this run\" and exercises. `student/` holds the same notebooks without outputs and",
        "solutions (regenerate with `python tools/student_copy.py`).", "",
        CONTENTS_START, contents_table(paths, titles, ""), CONTENTS_END, ""])
    for target, text in ((readme, new), (index, index_text)):
        if not target.exists() or target.read_text() != text:
            target.write_text(text)
            changed.append(target)
    return changed


if __name__ == "__main__":
    for path in update():
        print("updated", path.relative_to(ROOT))
    sys.exit(0)
