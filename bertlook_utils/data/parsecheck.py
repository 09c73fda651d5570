"""A hand check of the silver parses: how often spaCy's head (and label) is right, per Table 1 relation.

    sample = draw_sample(parses.parsed_sentences(2000, 0))   # list[Arc], seeded, stratified by relation
    arcs = load_judgements()                                 # data/parsecheck/arcs.csv: the sample + judgements
    precision_table(arcs)                                    # one row per relation + "all checked"

    python -m tools.parsecheck_sample            # (re)write the sample, keeping the judgements already made
    python -m tools.parsecheck_sample --check    # fail unless the stored sample is what the code draws

The arcs are drawn from the sentences notebook 04 scores (`parses.parsed_sentences(2000, 0)`), up to
`PER_RELATION` of each relation of Clark et al.'s Table 1 (spaCy's names: `nn` is `compound`). Each arc was
judged by reading its whole sentence: is spaCy's head the right head under ClearNLP / Stanford basic
dependency conventions (`head_ok`), and, if so, is the label right (`label_ok`)? The guideline and the hard
cases are in data/parsecheck/README.md. One annotator, not a treebank expert: the precision this gives is
an estimate of the silver trees' quality, with binomial (Wilson) intervals over the arcs checked.
"""
from __future__ import annotations

import csv
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import pandas as pd

from ..core.cache import DATA_DIR
from ..core.intervals import wilson_interval
from .parses import Sentence

DEFAULT_PATH = DATA_DIR / "parsecheck" / "arcs.csv"
# Clark et al.'s Table 1 relations, in its order, with spaCy's names (compare.TABLE1_RELATIONS less "all";
# a test keeps the two equal; compare is a presentation module, so it cannot be imported here)
RELATIONS = ("prep", "pobj", "det", "compound", "nsubj", "amod", "dobj", "advmod", "aux", "poss", "auxpass",
             "ccomp", "mark", "prt")
PER_RELATION = 22
SEED = 0
SAMPLE_COLUMNS = ("sentence_id", "sentence", "dep", "dep_word", "head", "head_word", "relation")
JUDGEMENT_COLUMNS = ("head_ok", "label_ok", "correct_head", "note")
COLUMNS = SAMPLE_COLUMNS + JUDGEMENT_COLUMNS
ALL = "all checked"


@dataclass(frozen=True)
class Arc:
    """One sampled arc: word `dep` of the sentence (1-based) and spaCy's `head` (1-based; never ROOT, as no
    Table 1 relation is `ROOT`) with label `relation`."""

    sentence_id: str
    sentence: str
    dep: int
    dep_word: str
    head: int
    head_word: str
    relation: str


def draw_sample(sentences: Sequence[Sentence], per_relation: int = PER_RELATION, seed: int = SEED,
                relations: Sequence[str] = RELATIONS) -> list[Arc]:
    """Up to `per_relation` arcs of each relation, drawn uniformly without replacement from all its arcs in
    `sentences` (one `random.Random(seed)`, relations in the given order), then sorted by sentence (in the
    given order) and word. All of a relation's arcs when it has fewer."""
    if per_relation < 1:
        raise ValueError(f"per_relation must be >= 1; got {per_relation}")
    ids = [s.id for s in sentences]
    if len(set(ids)) != len(ids):
        raise ValueError("sentence ids must be unique")
    by_relation: dict[str, list[tuple[int, int]]] = {r: [] for r in relations}
    for k, s in enumerate(sentences):
        for i, r in enumerate(s.relations):
            if r in by_relation and s.heads[i] != 0:
                by_relation[r].append((k, i))
    rng = random.Random(seed)
    chosen = []
    for r in relations:
        found = by_relation[r]
        chosen += rng.sample(found, per_relation) if len(found) > per_relation else found
    arcs = []
    for k, i in sorted(chosen):
        s = sentences[k]
        h = s.heads[i]
        arcs.append(Arc(s.id, s.text, i + 1, s.words[i], h, s.words[h - 1], s.relations[i]))
    return arcs


def write_sample(arcs: Sequence[Arc], path: Path | str = DEFAULT_PATH) -> int:
    """Write `arcs` as CSV (`COLUMNS`), keeping the judgements already in `path` for the arcs still in the
    sample (matched by sentence id, dependent, head and relation). Returns how many arcs kept a judgement
    (a row whose head_ok is filled in)."""
    path = Path(path)
    old = {}
    if path.exists():
        for row in _read_rows(path):
            old[(row["sentence_id"], row["dep"], row["head"], row["relation"])] = row
    kept = 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        for a in arcs:
            row = {c: getattr(a, c) for c in SAMPLE_COLUMNS}
            previous = old.get((a.sentence_id, str(a.dep), str(a.head), a.relation))
            kept += previous is not None and bool(previous.get("head_ok", "").strip())
            row.update({c: (previous or {}).get(c, "") for c in JUDGEMENT_COLUMNS})
            writer.writerow(row)
    return kept


def _read_rows(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        raise FileNotFoundError(f"no parse-check file at {path}: run `python -m tools.parsecheck_sample` "
                                "to draw the sample, then judge it (data/parsecheck/README.md)")
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: missing column(s) {', '.join(missing)}; expected {', '.join(COLUMNS)}")
        return list(reader)


def read_sample(path: Path | str = DEFAULT_PATH) -> list[Arc]:
    """The sampled arcs stored in `path` (judged or not)."""
    rows = _read_rows(Path(path))
    try:
        return [Arc(r["sentence_id"], r["sentence"], int(r["dep"]), r["dep_word"], int(r["head"]),
                    r["head_word"], r["relation"]) for r in rows]
    except ValueError as error:
        raise ValueError(f"{path}: dep and head must be whole numbers ({error})") from None


def load_judgements(path: Path | str = DEFAULT_PATH, complete: bool = True) -> pd.DataFrame:
    """The judged arcs of `path`: `COLUMNS`, with `dep`/`head` as int, `head_ok` as bool, `label_ok` as
    bool (False where the head is wrong: a labelled arc needs both), `correct_head` as a nullable int.

    `head_ok` must be yes/no; `label_ok` yes/no when the head is right and NA when it is wrong;
    `correct_head` empty, or a 1-based word index (0 = ROOT) different from `head`, only for a wrong head.
    With `complete` (default) an unjudged row is an error; otherwise unjudged rows are dropped."""
    path = Path(path)
    rows = _read_rows(path)
    if not rows:
        raise ValueError(f"{path}: no arcs")
    kept = []
    for n, r in enumerate(rows, start=2):  # line 1 is the header
        where = f"{path}, line {n} ({r['sentence_id']} word {r['dep']})"
        head_ok, label_ok = r["head_ok"].strip().lower(), r["label_ok"].strip().lower()
        if not head_ok:
            if complete:
                raise ValueError(f"{where}: not judged (head_ok is empty)")
            continue
        if head_ok not in ("yes", "no"):
            raise ValueError(f"{where}: head_ok must be yes or no; got {r['head_ok']!r}")
        if head_ok == "yes" and label_ok not in ("yes", "no"):
            raise ValueError(f"{where}: label_ok must be yes or no when the head is right; got {r['label_ok']!r}")
        if head_ok == "no" and label_ok != "na":
            raise ValueError(f"{where}: label_ok must be NA when the head is wrong; got {r['label_ok']!r}")
        try:
            dep, head = int(r["dep"]), int(r["head"])
            correct = int(r["correct_head"]) if r["correct_head"].strip() else None
        except ValueError:
            raise ValueError(f"{where}: dep, head and correct_head must be whole numbers") from None
        n_words = len(r["sentence"].split(" "))
        if not (1 <= dep <= n_words and 1 <= head <= n_words):
            raise ValueError(f"{where}: dep and head must be word indices 1..{n_words}")
        if correct is not None and (head_ok == "yes" or correct == head or not 0 <= correct <= n_words
                                    or correct == dep):
            raise ValueError(f"{where}: correct_head is for a wrong head only: another word's index (0 = ROOT)")
        kept.append({**r, "dep": dep, "head": head, "head_ok": head_ok == "yes", "label_ok": label_ok == "yes",
                     "correct_head": correct})
    frame = pd.DataFrame(kept, columns=list(COLUMNS))
    frame["correct_head"] = frame["correct_head"].astype("Int64")
    duplicated = frame.duplicated(["sentence_id", "dep"])
    if duplicated.any():
        first = frame[duplicated].iloc[0]
        raise ValueError(f"{path}: arc {first['sentence_id']} word {first['dep']} is listed twice")
    return frame


def _row(relation: str, arcs: pd.DataFrame, level: float) -> dict:
    n, heads, labelled = len(arcs), int(arcs["head_ok"].sum()), int(arcs["label_ok"].sum())
    head_low, head_high = wilson_interval(heads, n, level)
    lab_low, lab_high = wilson_interval(labelled, n, level)
    return {"relation": relation, "n": n, "head_ok": heads,
            "head_precision": 100 * heads / n if n else float("nan"),
            "head_low": 100 * head_low, "head_high": 100 * head_high, "labelled_ok": labelled,
            "labelled_precision": 100 * labelled / n if n else float("nan"),
            "labelled_low": 100 * lab_low, "labelled_high": 100 * lab_high}


def precision_table(judgements: pd.DataFrame | None = None, level: float = 0.95,
                    relations: Sequence[str] | None = None) -> pd.DataFrame:
    """spaCy's precision per relation on the checked arcs: columns relation, n (arcs checked), head_ok,
    head_precision (%), head_low / head_high (its Wilson interval at `level`, %), labelled_ok,
    labelled_precision (head and label right, %), labelled_low / labelled_high. One row per relation (in
    `relations`' order; default: Table 1's order, then any others found) and a last row "all checked" over
    every arc (its n is the sample's, not the corpus's mix of relations: an unweighted pool).
    `judgements`: a frame from `load_judgements` (default: the shipped file)."""
    if judgements is None:
        judgements = load_judgements()
    found = list(dict.fromkeys(judgements["relation"]))
    if relations is None:
        relations = [r for r in RELATIONS if r in found] + [r for r in found if r not in RELATIONS]
    rows = [_row(r, judgements[judgements["relation"] == r], level) for r in relations]
    rows.append(_row(ALL, judgements, level))
    return pd.DataFrame(rows)
