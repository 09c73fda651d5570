"""build/report.md: the headline "paper vs this run" tables of notebooks 01 and 03, for one model or several.

    python -m bertlook_utils.report --out build/report.md [--model NAME_OR_FOLDER ...] [--segments 1000]

The tables come from `compare` (quantity, paper, this run, what differs). Given several models (`--model
default --model /data/bert-base-uncased`), the report puts their numbers side by side (`side_by_side`).
Layers of a model with fewer layers than BERT-base are compared by relative depth (BERT-base layers 6-10 of
12 ~ layers 3-5 of 6).
"""
from __future__ import annotations

import argparse
import datetime
from pathlib import Path

import pandas as pd

from . import compare, paper
from ..core.models import model_name

def side_by_side(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One comparison table per model (same quantities, in the same order) -> quantity, paper, one column per
    model, what differs (each model's note, labelled by the model, when the notes differ)."""
    if not tables:
        raise ValueError("no tables to put side by side")
    first = next(iter(tables.values()))
    for name, table in tables.items():
        if list(table["quantity"]) != list(first["quantity"]):
            raise ValueError(f"the table of {name} lists other quantities than the first table")
    out = first[["quantity", "paper"]].copy()
    for name, table in tables.items():
        out[name] = table["this run"].to_numpy()
    notes = []
    for row in range(len(first)):
        by_model = {name: table["what differs"].iloc[row] for name, table in tables.items()
                    if table["what differs"].iloc[row]}
        distinct = set(by_model.values())
        notes.append(distinct.pop() if len(distinct) == 1 and len(by_model) == len(tables)
                     else "; ".join(f"{name}: {note}" for name, note in by_model.items()))
    out["what differs"] = notes
    return out


def markdown(table: pd.DataFrame) -> str:
    """A DataFrame as a GitHub markdown table (no extra dependency)."""
    header = "| " + " | ".join(table.columns) + " |"
    rule = "|" + "|".join("---" for _ in table.columns) + "|"
    body = ["| " + " | ".join("" if pd.isna(v) else str(v) for v in row) + " |"
            for row in table.itertuples(index=False)]
    return "\n".join([header, rule, *body])


def build_report(models: list[str | None] | None = None, n_segments: int = 1000, seed: int = 0) -> str:
    """The report's markdown: every headline number of each model (None: the embedded default) beside the
    paper's, one column per model."""
    from ..core.models import load_encoder
    from ..analyses import surface
    from ..data.corpora import make_segments

    surfaces, entropies, described = {}, {}, []
    for model in models or [None]:
        encoder = load_encoder(model)
        if encoder.name in surfaces:
            raise ValueError(f"{encoder.name} is given twice; compare two different models")
        result = surface.analyse(encoder, make_segments(encoder.tokenizer, n_segments, seed))
        surfaces[encoder.name] = compare.surface(result)
        entropies[encoder.name] = compare.entropy(result)
        described.append(f"**{encoder.name}** ({encoder.n_layers} layers × {encoder.n_heads} heads)")

    lines = [
        "# BERTLook report: paper vs this run",
        "",
        f"Generated {datetime.date.today().isoformat()} by `make run`. "
        f"Model{'s' if len(described) > 1 else ''}: {', '.join(described)}; the papers used {paper.PAPER_MODEL}. "
        f"Data: {n_segments} segments `[CLS] A [SEP] B [SEP]` (≤ 128 wordpieces, seed {seed}) from the "
        "Wikipedia articles shipped with gensim, cut with each model's own tokenizer; Clark et al. used their "
        "own Wikipedia sample. Numbers are comparable in kind (same definitions), not in value: the models differ.",
        "",
        f"## Surface attention ({paper.CLARK}, §3, Fig 1-2; notebook 01)",
        "",
        markdown(side_by_side(surfaces)),
        "",
        f"## Entropy ({paper.CLARK}, §3.3, Fig 4; notebook 03)",
        "",
        markdown(side_by_side(entropies)),
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("build/report.md"))
    parser.add_argument("--model", action="append", default=[],
                        help="Hugging Face name or local folder; 'default' (or nothing) is the embedded model; "
                             "give it twice to put two models side by side")
    parser.add_argument("--segments", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    models = [model_name(m) for m in args.model] or [None]
    text = build_report(models, args.segments, args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
