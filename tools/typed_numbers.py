"""Typed sizes in the prose: a count of what a run has (inputs, heads, layers, epochs, ...) written by hand in a
markdown cell, a `claims.say` / `takeaways` / `check` template or a slide note, where it cannot follow the run
(fast mode, another model). Such a number must be rendered from the run instead, or dropped.

    python -m tools.typed_numbers      # every typed size in the notebooks and the talk, by cell

A size is a number written in digits followed, within two words, by a noun in SIZE_NOUNS ("1,000 segments", "72
heads", "2 epochs"). Not typed: what a placeholder renders (`{...}` in a template), inline code and math, a number
after an operator ("n − 1 rows"), and a sentence that attributes it to the papers or their model (PAPER_WORDS):
BERT-base's 144 heads and the papers' data are facts of the papers (`paper`). Numbers spelled out in words are
not looked for.
"""
from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIZE_NOUNS = ("segment", "head", "input", "sentence", "token", "wordpiece", "epoch", "layer", "word", "map", "arc",
              "template", "step", "weight", "seed", "article", "pair", "passage", "candidate", "example", "order",
              "story", "stories", "mention", "label", "dimension", "batch", "batches", "sample", "text", "document")
PAPER_WORDS = ("Clark", "Kovaleva", "paper", "BERT-base", "bert-base", "Michel", "Vig", "Abnar", "Kobayashi",
               "Budhraja", "Voita", "Wiseman", "Brunner", "Jain", "Serrano", "Ethayarajh", "Hewitt", "Manning",
               "Gu et al")
PROSE_CALLS = ("say",)  # takeaways and checks state a condition that the run checks
_LINK_WORDS = r"(?!(?:for|a|an|the|of|in|on|to|at|by|with|from|that|than|is|are|was|per|and|or)\b)"
_SIZE = re.compile(r"(?<![\w.,\-−+×/=<>≤≥^])(?!0\d)(\d[\d,]*(?:\.\d+)?)(?:\s*[-–]\s*\d[\d,]*)?\s+(?:"
                   + _LINK_WORDS + r"[\w%'-]+\s+){0,2}?(" + "|".join(SIZE_NOUNS) + r")(?:e?s)?\b", re.IGNORECASE)
FIXED = re.compile(r"<!--\s*fixed sizes:(.*?)-->", re.S)  # "<!-- fixed sizes: 38 templates (data/...) -->"
UNCHECKED_SECTIONS = ("## Exercises",)  # instructions to the student: settings to use, not claims about the run
INDEX_WORDS = ("layer", "head", "notebook", "table", "figure", "fig", "exercise", "step", "epoch", "seed", "cell",
               "slide", "version", "section", "§")  # "layer 6 mixes ...": a number after these names one, counts none
_BEFORE = re.compile(r"([−\-+×/=<>≤≥]|\b(?:" + "|".join(INDEX_WORDS) + r")s?|§)\s*$", re.IGNORECASE)
_SENTENCE = re.compile(r"(?<!\bal\.)(?<!e\.g\.)(?<!i\.e\.)(?<!\bvs\.)(?<!\bcf\.)(?<=[.!?:;])\s+"  # not after "et al."
                       r"|\n\s*\n\s*|\n\s*[-*>#|]+\s*|\n\s*\d+\.\s+")  # a paragraph, list item, quote, heading, row


def _readable(text: str) -> str:
    """`text` without what it does not type: placeholders, inline code, math, links' targets and HTML comments."""
    text = re.sub(r"<!--.*?-->", " ", text, flags=re.S)
    text = re.sub(r"\{[^{}]*\}", " ", text)
    text = re.sub(r"`[^`]*`", " ", text)
    text = re.sub(r"\$[^$]*\$", " ", text)
    return re.sub(r"\]\([^)]*\)", "]", text)


def sizes(text: str) -> list[str]:
    """The typed sizes in one piece of prose, each as the sentence it stands in. Sizes named in the text's
    `<!-- fixed sizes: ... -->` comment (facts of the kit's committed data, with where they come from) are not
    typed; nor is a contents line (items joined by "·") or a section of exercises."""
    if text.lstrip().startswith(UNCHECKED_SECTIONS):
        return []
    fixed = " ".join(FIXED.findall(text))
    found = []
    for sentence in _SENTENCE.split(_readable(text)):
        if "·" in sentence or any(word in sentence for word in PAPER_WORDS):
            continue
        for match in _SIZE.finditer(sentence):
            if not _BEFORE.search(sentence[:match.start()]) and match.group(0) not in fixed:
                found.append(sentence.strip())
                break
    return found


def templates(source: str) -> list[str]:
    """The literal text of every string given to claims.say / takeaways / check in a code cell (placeholders
    blanked), the keys of the dicts too."""
    try:
        tree = ast.parse(source)
    except SyntaxError:  # a cell magic: no claims there
        return []
    found = []
    for call in ast.walk(tree):
        if isinstance(call, ast.Call) and getattr(call.func, "attr", None) in PROSE_CALLS:
            nodes = list(ast.walk(call))
            parts = {id(v) for node in nodes if isinstance(node, ast.JoinedStr) for v in node.values}
            for node in nodes:
                if isinstance(node, ast.JoinedStr):
                    found.append("".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values))
                elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in parts:
                    found.append(node.value)
    return found


def typed_sizes(path: Path) -> list[tuple[int, str]]:
    """(cell index, sentence) of every typed size in a notebook's markdown cells (slide notes included) and claim
    templates."""
    found = []
    for index, cell in enumerate(json.loads(Path(path).read_text(encoding="utf-8"))["cells"]):
        source = "".join(cell["source"])
        texts = {"markdown": [source], "code": templates(source) if cell["cell_type"] == "code" else []}.get(
            cell["cell_type"], [])
        found += [(index, sentence) for text in texts for sentence in sizes(text)]
    return found


def prose_notebooks() -> list[Path]:
    """The notebooks and the talk (not the student copies, which are made from the notebooks)."""
    return sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")) + [ROOT / "slides" / "bertlook_talk.ipynb"]


def main(paths: list[str]) -> int:
    total = 0
    for path in [Path(p) for p in paths] or prose_notebooks():
        for index, sentence in typed_sizes(path):
            print(f"{path.name} [{index}]: {' '.join(sentence.split())[:160]}")
            total += 1
    print(f"{total} typed sizes")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
