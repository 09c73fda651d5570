"""Paper vs this run: the comparison tables the notebooks end with, and build/report.md.

    python -m bertlook_utils.report --out build/report.md [--model NAME_OR_FOLDER ...] [--segments 1000]

Each `*_comparison` returns a DataFrame (quantity, paper, this run, note) built from analysis results;
the notebooks print it and the report collects every table. Given several models (`--model default
--model /data/bert-base-uncased`), the report puts their numbers side by side (`side_by_side`). Layers of a model with fewer layers than
BERT-base are compared by relative depth (BERT-base layers 6-10 of 12 ~ layers 3-5 of 6).
"""
from __future__ import annotations

import argparse
import datetime
from pathlib import Path

import numpy as np
import pandas as pd

from . import paper
from .surface import SurfaceResult

PAPER_LAYERS = 12


def by_depth(paper_layers: range | tuple, n_layers: int) -> list[int]:
    """BERT-base layers (1-indexed, of 12) -> the layers at the same relative depth in an n-layer model."""
    mapped = sorted({max(1, min(n_layers, round(layer * n_layers / PAPER_LAYERS))) for layer in paper_layers})
    return mapped


def _heads(stats: pd.DataFrame, mask: pd.Series, limit: int = 12) -> str:
    """Labels of the chosen heads, the first `limit` of them and how many more."""
    chosen = stats[mask]
    labels = [f"{l}-{h}" for l, h in zip(chosen["layer"], chosen["head"])]
    more = f", … ({len(labels) - limit} more)" if len(labels) > limit else ""
    return ", ".join(labels[:limit]) + more or "none"


def _pct(value: float) -> str:
    return f"{100 * value:.1f} %"


def surface_comparison(result: SurfaceResult) -> pd.DataFrame:
    """Clark et al. §3 headline numbers beside this run's."""
    tokens = result.tokens
    n_layers = int(tokens["layer"].max())
    middle = by_depth(range(6, 11), n_layers)
    in_middle = tokens["layer"].isin(middle)
    prev, nxt = tokens["prev"] > 0.5, tokens["next"] > 0.5
    thirds = [part for part in np.array_split(np.arange(1, n_layers + 1), 3) if len(part)]  # fewer for 1-2 layers
    sinks = []
    for part in thirds:
        means = tokens[tokens["layer"].isin(part)][["cls", "sep", "punct"]].mean()
        sinks.append(f"{part[0]}-{part[-1]}: {paper_label(means.idxmax())} {_pct(means.max())}")
    rows = [
        ("heads with > 50 % on the previous token", "4 (layers 2, 4, 7, 8)",
         f"{int(prev.sum())} ({_heads(tokens, prev)})", ""),
        ("heads with > 50 % on the next token", "5 (layers 1, 2, 2, 3, 6)",
         f"{int(nxt.sum())} ({_heads(tokens, nxt)})", ""),
        ("attention to [SEP] in the middle layers", "over half (layers 6-10)",
         _pct(tokens[in_middle]["sep"].mean()), f"layers {middle[0]}-{middle[-1]} here, by relative depth"),
        ("attention to [CLS] in the middle layers", "small (the sink is [SEP])",
         _pct(tokens[in_middle]["cls"].mean()), "this model's sink is [CLS]" if
         tokens[in_middle]["cls"].mean() > tokens[in_middle]["sep"].mean() else ""),
        ("[SEP] → [SEP] attention in the middle layers", "> 90 %", _pct(tokens[in_middle]["sep_sep"].mean()), ""),
        ("early / middle / deep layers attend most to", "[CLS] / [SEP] / \". ,\"", "; ".join(sinks),
         "the largest of [CLS], [SEP], punctuation per third of the layers"),
    ]
    return pd.DataFrame(rows, columns=["quantity", "paper", "this run", "note"])


def paper_label(column: str) -> str:
    return {"cls": "[CLS]", "sep": "[SEP]", "punct": '". ,"'}.get(column, column)


def entropy_comparison(result: SurfaceResult) -> pd.DataFrame:
    """Clark et al. §3.3 (Fig 4) headline numbers beside this run's."""
    entropy = result.entropy
    n_layers = int(entropy["layer"].max())
    last = entropy[entropy["layer"] == n_layers]
    broad = entropy["max_weight"] <= 0.10
    uniform = float(entropy["uniform"].mean())
    rows = [
        ("[CLS] entropy in the last layer (nats)", f"{paper.SURFACE['cls_entropy_last_layer']:.2f}",
         f"{last['cls_entropy'].mean():.2f}", f"mean over the {len(last)} heads of layer {n_layers}"),
        ("broad heads (≤ 10 % on any one token)", "some, in lower layers",
         f"{int(broad.sum())} ({_heads(entropy, broad)})", "mean largest weight per row ≤ 0.10"),
        ("highest head entropy (nats)", "close to uniform in layer 1",
         f"{entropy['entropy'].max():.2f} (head {_heads(entropy, entropy['entropy'] == entropy['entropy'].max())})",
         f"uniform attention: {uniform:.2f}"),
        ("mean head entropy by layer (nats)", "high in lower layers, lower in the middle",
         " / ".join(f"{v:.2f}" for v in entropy.groupby("layer")["entropy"].mean()), "layer 1 first"),
    ]
    return pd.DataFrame(rows, columns=["quantity", "paper", "this run", "note"])


def side_by_side(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One comparison table per model (same quantities, in the same order) -> quantity, paper, one column per
    model, note (each model's note, labelled by the model, when the notes differ)."""
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
        by_model = {name: table["note"].iloc[row] for name, table in tables.items() if table["note"].iloc[row]}
        distinct = set(by_model.values())
        notes.append(distinct.pop() if len(distinct) == 1 and len(by_model) == len(tables)
                     else "; ".join(f"{name}: {note}" for name, note in by_model.items()))
    out["note"] = notes
    return out


def markdown(table: pd.DataFrame) -> str:
    """A DataFrame as a GitHub markdown table (no extra dependency)."""
    header = "| " + " | ".join(table.columns) + " |"
    rule = "|" + "|".join("---" for _ in table.columns) + "|"
    body = ["| " + " | ".join("" if pd.isna(v) else str(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join([header, rule, *body])


def build_report(models: list[str | None] | None = None, n_segments: int = 1000, seed: int = 0) -> str:
    """The report's markdown: every headline number of each model (None: the embedded default) beside the
    paper's, one column per model."""
    from . import load_encoder, surface
    from .corpora import make_segments

    surfaces, entropies, described = {}, {}, []
    for model in models or [None]:
        encoder = load_encoder(model)
        if encoder.name in surfaces:
            raise ValueError(f"{encoder.name} is given twice; compare two different models")
        result = surface.analyse(encoder, make_segments(encoder.tokenizer, n_segments, seed))
        surfaces[encoder.name] = surface_comparison(result)
        entropies[encoder.name] = entropy_comparison(result)
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
    models = [None if m in ("", "default") else m for m in args.model] or [None]
    text = build_report(models, args.segments, args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
