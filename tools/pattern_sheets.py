"""Draw attention maps for labelling by eye, and render them as contact sheets that show only a map id.

    python -m tools.pattern_sheets draw             # the second labelling round -> build/patterns/draft.csv
    python -m tools.pattern_sheets sheets m161 m320  # contact sheets of maps m161..m320 -> build/patterns/*.png
    python -m tools.pattern_sheets sheets --ids m004 m017 ...   # any maps of labels.csv or the draft

How the maps of data/patterns/labels.csv were drawn is in data/patterns/README.md. The second round (`draw`):
- random (`sample` = random): 20 more maps in each of the first round's four groups, and 30 in each of two new
  groups (the pre-trained model and the sentiment-tuned model on sentiment inputs); within a group the layer
  cycles through 1..L, the head and the input (one of the first 96 test inputs) are drawn at random, seeded,
  skipping maps already labelled;
- targeted (`sample` = targeted): block maps are rare, so pair maps were searched for them: of all maps of the
  pre-trained and the next-paragraph-tuned model on the first 96 next-paragraph test inputs, 80 drawn at random
  from those that keep at least 0.8 of their attention within the segment and spread it (normalised entropy at
  least 0.6; both features of `patterns.map_features` as it was when drawn), and 20 from the rest (decoys),
  shuffled together, so the labeller cannot tell a candidate from a decoy.
- targeted by head (`draw-heads`, a third round after the second was labelled): the second round's block maps
  came mostly from heads 4-10 and 4-1, so 30 more maps of those two heads on pair inputs (the pre-trained and
  the next-paragraph-tuned model, inputs not yet labelled for that head) and 10 decoys of other heads, shuffled
  together, numbered after the draft's last map.
- a second look (`relabel`): 64 of the 440 labelled maps drawn at random (seeded), shuffled and shown under new
  ids r01...r64 only, labelled again from scratch without the first labels at hand; the pairs measure how
  consistent the labeller is with himself (data/patterns/relabel.csv), a ceiling for any classifier.
The draft is shuffled and numbered m161... on; its `label` column is filled in by hand, then the rows are added
to labels.csv. A sheet draws each map on a linear colour scale from 0 to its largest weight, with red ticks at
the [CLS]/[SEP] positions and a thin line between the segments of a pair; it shows the id and nothing else.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from bertlook_utils import finetune, load_encoder, patterns
from bertlook_utils.tasks import clipped_test_items, next_paragraph_data, sentiment_data, topic_data

OUT = Path(__file__).resolve().parents[1] / "build" / "patterns"
DRAFT = OUT / "draft.csv"
MAX_LENGTH, SEED, FIRST_ID = 64, 0, 161
RANDOM_GROUPS = (  # (variant, task, how many)
    ("pretrained", "topic", 20), ("pretrained", "next_paragraph", 20), ("topic", "topic", 20),
    ("next_paragraph", "next_paragraph", 20), ("pretrained", "sentiment", 30), ("sentiment", "sentiment", 30))
N_INPUTS = 96
TARGETED, DECOYS, WITHIN, SPREAD = 80, 20, 0.8, 0.6


def setting():
    """(encoders by variant, tasks by name, clipped test items by input id)."""
    encoder = load_encoder()
    tasks = {"topic": topic_data(48, 16, SEED), "next_paragraph": next_paragraph_data(576, 192, SEED),
             "sentiment": sentiment_data(576, 192, SEED)}
    encoders = {"pretrained": encoder, **{name: finetune.finetune(encoder, data, epochs=2, max_length=MAX_LENGTH,
                                                                  seed=SEED).encoder for name, data in tasks.items()}}
    items = {k: v for data in tasks.values()
             for k, v in clipped_test_items(encoder.tokenizer, data, MAX_LENGTH).items()}
    return encoders, tasks, items


def draw() -> pd.DataFrame:
    encoders, _, items = setting()
    labelled = patterns.load_labels()
    taken = set(zip(labelled["variant"], labelled["input"], labelled["layer"], labelled["head"]))
    n_layers, n_heads = encoders["pretrained"].n_layers, encoders["pretrained"].n_heads
    rng = np.random.default_rng(SEED + 2)
    rows = []
    for variant, task, count in RANDOM_GROUPS:
        drawn = 0
        while drawn < count:
            key = (variant, f"{task}/{rng.integers(N_INPUTS)}", drawn % n_layers + 1, int(rng.integers(n_heads)) + 1)
            if key not in taken:
                taken.add(key)
                rows.append((*key, "random"))
                drawn += 1
    pair_inputs = [f"next_paragraph/{i}" for i in range(N_INPUTS)]
    within = []  # (variant, input, layer, head, block-like)
    for variant in ("pretrained", "next_paragraph"):
        for input_id, enc in zip(pair_inputs, encoders[variant].encode_many([items[i] for i in pair_inputs])):
            feats = patterns.encoded_features(enc)
            block_like = (feats["within"] >= WITHIN) & (feats["entropy"] >= SPREAD)
            within += [(variant, input_id, layer + 1, head + 1, bool(block_like[layer, head]))
                       for layer in range(n_layers) for head in range(n_heads)
                       if (variant, input_id, layer + 1, head + 1) not in taken]
    candidates = [w[:4] for w in within if w[4]]
    rest = [w[:4] for w in within if not w[4]]
    picked = [candidates[i] for i in rng.choice(len(candidates), min(TARGETED, len(candidates)), replace=False)]
    picked += [rest[i] for i in rng.choice(len(rest), DECOYS, replace=False)]
    rows += [(*key, "targeted") for key in picked]
    order = rng.permutation(len(rows))
    draft = pd.DataFrame([rows[i] for i in order], columns=["variant", "input", "layer", "head", "sample"])
    draft.insert(0, "map_id", [f"m{FIRST_ID + k:03d}" for k in range(len(draft))])
    draft["label"] = ""
    print(f"{len(candidates)} pair maps are block-like (within >= {WITHIN}, entropy >= {SPREAD}); "
          f"drew {len(draft)} maps")
    return draft


def draw_heads(draft: pd.DataFrame, heads=((4, 10), (4, 1)), count: int = 30, decoys: int = 10) -> pd.DataFrame:
    """The third round: `count` pair maps of `heads` and `decoys` maps of other heads, not yet labelled."""
    encoders, _, _ = setting()
    n_layers, n_heads = encoders["pretrained"].n_layers, encoders["pretrained"].n_heads
    every = pd.concat([patterns.load_labels(), draft])
    taken = set(zip(every["variant"], every["input"], every["layer"].astype(int), every["head"].astype(int)))
    rng = np.random.default_rng(SEED + 3)
    rows = []
    for wanted, how_many in ((True, count), (False, decoys)):
        drawn = 0
        while drawn < how_many:
            variant = ("pretrained", "next_paragraph")[int(rng.integers(2))]
            if wanted:
                layer, head = heads[int(rng.integers(len(heads)))]
            else:
                layer, head = int(rng.integers(n_layers)) + 1, int(rng.integers(n_heads)) + 1
            key = (variant, f"next_paragraph/{rng.integers(N_INPUTS)}", layer, head)
            if key not in taken and wanted == ((layer, head) in heads):
                taken.add(key)
                rows.append((*key, "targeted"))
                drawn += 1
    rows = [rows[i] for i in rng.permutation(len(rows))]
    first = int(draft["map_id"].str[1:].astype(int).max()) + 1
    more = pd.DataFrame(rows, columns=["variant", "input", "layer", "head", "sample"])
    more.insert(0, "map_id", [f"m{first + k:03d}" for k in range(len(more))])
    more["label"] = ""
    return pd.concat([draft, more], ignore_index=True)


RELABEL_KEY = OUT / "relabel_key.csv"
RELABELS = Path(__file__).resolve().parents[1] / "data" / "patterns" / "relabel.csv"


def relabel_draw(n: int = 64) -> pd.DataFrame:
    """n labelled maps under new ids r01... (the key from new id to map id; the labels stay out of it)."""
    labels = patterns.load_labels()
    picked = labels.iloc[np.random.default_rng(SEED + 4).choice(len(labels), n, replace=False)]
    return pd.DataFrame({"relabel_id": [f"r{k + 1:02d}" for k in range(n)], "map_id": picked["map_id"].to_numpy()})


def sheets(rows: pd.DataFrame, prefix: str) -> list[Path]:
    """Contact sheets of 4 x 4 maps (ids only) -> PNG paths."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    encoders, _, items = setting()
    paths = []
    for start in range(0, len(rows), 16):
        part = rows.iloc[start:start + 16]
        fig, axes = plt.subplots(4, 4, figsize=(16, 16.5))
        for ax in axes.flat:
            ax.axis("off")
        for ax, (_, row) in zip(axes.flat, part.iterrows()):
            enc = encoders[row["variant"]].encode(*np.atleast_1d(items[row["input"]]))
            m = enc.attn[int(row["layer"]) - 1, int(row["head"]) - 1]
            ax.imshow(m, cmap="Blues", vmin=0, vmax=float(m.max()), interpolation="nearest")
            for k, t in enumerate(enc.tokens):
                if t in (enc.cls_token, enc.sep_token):
                    ax.plot([k, k], [-2.2, -0.8], color="red", lw=2, clip_on=False)
                    ax.plot([-2.2, -0.8], [k, k], color="red", lw=2, clip_on=False)
            if len(set(enc.segment_ids)) > 1:
                b = enc.segment_ids.index(1) - 0.5
                ax.axvline(b, color="black", lw=0.4)
                ax.axhline(b, color="black", lw=0.4)
            ax.set_title(row.get("relabel_id", row["map_id"]), fontsize=14)
        fig.tight_layout()
        path = OUT / f"{prefix}_{start // 16 + 1:02d}.png"
        fig.savefig(path, dpi=55)
        plt.close(fig)
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("draw")
    sub.add_parser("draw-heads")
    sub.add_parser("relabel", help="sheets of 64 labelled maps under new ids, for a second look")
    s = sub.add_parser("sheets")
    s.add_argument("range", nargs="*", help="first and last map id")
    s.add_argument("--ids", nargs="+", help="these map ids")
    s.add_argument("--prefix", default="sheet")
    args = ap.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    if args.command == "draw":
        if DRAFT.exists():
            raise SystemExit(f"{DRAFT} exists (it may hold labels): move it away to draw again")
        draw().to_csv(DRAFT, index=False)
        print(f"wrote {DRAFT}")
        return 0
    if args.command == "draw-heads":
        draft = pd.read_csv(DRAFT, dtype={"label": str}, keep_default_na=False)
        if len(draft) != 240:
            raise SystemExit(f"{DRAFT} must hold the second round's 240 maps, no more")
        draw_heads(draft).to_csv(DRAFT, index=False)
        print(f"added 40 maps to {DRAFT}")
        return 0
    if args.command == "relabel":
        key = relabel_draw()
        key.to_csv(RELABEL_KEY, index=False)
        rows = key.merge(patterns.load_labels().drop(columns="label"), on="map_id")
        for path in sheets(rows, "relabel"):
            print(path)
        return 0
    every = pd.concat([patterns.load_labels()] + ([pd.read_csv(DRAFT, dtype=str).assign(
        layer=lambda f: f["layer"].astype(int), head=lambda f: f["head"].astype(int))] if DRAFT.exists() else []))
    if args.ids:
        rows = every.set_index("map_id").loc[args.ids].reset_index()
    else:
        first, last = args.range
        rows = every[(every["map_id"] >= first) & (every["map_id"] <= last)].sort_values("map_id")
    for path in sheets(rows, args.prefix):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
