"""Which components carry term matching? The share of the relevance gap that patching restores.

For a pair (`termpairs.TermPair`), relevance is the cosine between the query's embedding and a passage's (the mean
of the last layer's states, the model's own pooling). The relevant passage holds the query term twice, the base
once: the gap is relevance(relevant) − relevance(base). Patching a set of components from the relevant run into
the base run (`patching.patched_outputs`) restores

    share = (relevance(patched base) − relevance(base)) / gap,

0 when the set carries none of the difference, 1 when it carries all of it. Over many pairs the share is the ratio
of sums, Σ restored / Σ gap (`ratios.ratio_interval`, a bootstrap over pairs): a mean of per-pair shares would
let a pair with a small gap swing it.
"""
from __future__ import annotations

import hashlib
import json
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from ..core.cache import DEFAULT_CACHE_DIR
from ..core.ratios import ratio_difference_interval, ratio_interval
from ..core.models import Encoder
from ..data.termpairs import TermPair, first_copy
from ..engine.extract import Batch, RowReducer, reduce
from .patching import Component, every_component, patched_outputs

SOURCES = ("relevant", "base")  # "base": the self-patch control, which must restore nothing
MIN_GAP = 0.01  # a pair counts when the relevant passage beats the base by this much: a share of a gap near 0 is noise
N_BOOT = 1000  # bootstrap resamples of the pairs for a share's interval


@torch.inference_mode()
def _pooled(encoder: Encoder, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    return encoder.model(**inputs).last_hidden_state.mean(1)  # one unpadded input per row


@torch.inference_mode()
def restored_shares(encoder: Encoder, pairs: Sequence[TermPair], sets: Sequence[Sequence[Component]],
                    source: str = "relevant") -> tuple[np.ndarray, np.ndarray]:
    """(shares [len(pairs), len(sets)], gaps [len(pairs)]): each set patched from `source` (SOURCES) into the
    base passage, one batched pass per pair."""
    if source not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
    shares, gaps = [], []
    for pair in pairs:
        query = _pooled(encoder, encoder.pad([encoder.prepare([pair.query])]))
        base, relevant = (encoder.pad([encoder.prepare(list(words))]) for words in (pair.base, pair.relevant))
        low, high = (torch.cosine_similarity(query, _pooled(encoder, x)).item() for x in (base, relevant))
        states = patched_outputs(encoder, base, relevant if source == "relevant" else base, sets)
        patched = torch.cosine_similarity(query, states.mean(1)).double().numpy()
        gaps.append(high - low)
        shares.append((patched - low) / (high - low))
    return np.array(shares), np.array(gaps)


def relevance(encoder: Encoder, pairs: Sequence[TermPair]) -> pd.DataFrame:
    """One row per pair: `query`, `replaced` (the base's word the query term stands in for), `base` and
    `relevant` (each passage's relevance: cosine with the query's embedding), `gap` (relevant − base)."""
    rows = []
    for pair in pairs:
        query, base, relevant = (_pooled(encoder, encoder.pad([encoder.prepare(list(words))]))
                                 for words in ([pair.query], pair.base, pair.relevant))
        low, high = (torch.cosine_similarity(query, x).item() for x in (base, relevant))
        rows.append((pair.query, pair.replaced, low, high, high - low))
    return pd.DataFrame(rows, columns=["query", "replaced", "base", "relevant", "gap"])


def pairs_key(pairs: Sequence[TermPair]) -> str:
    """sha256 of the pairs (every field), for cache keys."""
    return hashlib.sha256(json.dumps([list(map(str, vars(p).values())) for p in pairs]).encode()).hexdigest()


class SharesRows(RowReducer):
    """Per pair: `shares` [len(sets)] and `gap` (see `restored_shares`)."""

    name = "term-shares"
    needs_attention = False

    def __init__(self, encoder: Encoder, pairs: Sequence[TermPair], sets: Sequence[Sequence[Component]],
                 source: str):
        super().__init__()
        self.encoder, self.pairs, self.sets, self.source = encoder, pairs, [list(map(list, s)) for s in sets], source

    @property
    def key(self) -> str:
        sets = hashlib.sha256(json.dumps(self.sets).encode()).hexdigest()[:16]
        return f"{self.name}-{self.source}-{sets}-{pairs_key(self.pairs)[:16]}"

    def update(self, batch: Batch) -> None:
        chosen = self.pairs[batch.start:batch.start + len(batch.inputs)]
        shares, gaps = restored_shares(self.encoder, chosen, [[tuple(c) for c in s] for s in self.sets], self.source)
        self.add(shares=shares, gap=gaps)


def shares(encoder: Encoder, pairs: Sequence[TermPair], sets: Sequence[Sequence[Component]],
           source: str = "relevant", cache_dir=DEFAULT_CACHE_DIR, progress: bool = True
           ) -> tuple[np.ndarray, np.ndarray]:
    """`restored_shares` of every pair, in one cached streaming pass (`extract.reduce`)."""
    if not pairs:
        raise ValueError("no pairs: give at least one TermPair")
    (rows,) = reduce(encoder, [list(p.base) for p in pairs], [SharesRows(encoder, pairs, sets, source)],
                     batch_size=4, cache_dir=cache_dir, progress=progress, desc="patching")
    result = rows.result()
    return result["shares"], result["gap"]


def component_label(component: Component) -> str:
    """"6-11" for head 11 of layer 6 (1-indexed, as every table prints heads), "attention 3", "mlp 3", "layer 6"."""
    kind, layer, head = component
    return f"{layer + 1}-{head + 1}" if kind == "head" else f"{kind} {layer + 1}"


def _clear(shares: np.ndarray, gaps: np.ndarray, min_gap: float) -> tuple[np.ndarray, np.ndarray]:
    """The pairs whose gap is at least `min_gap`: (restored [P, K] = share × gap, gaps [P])."""
    clear = gaps >= min_gap
    if clear.sum() < 2:
        raise ValueError(f"only {clear.sum()} of {len(gaps)} pairs have a relevance gap of at least {min_gap}")
    return shares[clear] * gaps[clear, None], gaps[clear]


def scan(encoder: Encoder, pairs: Sequence[TermPair], min_gap: float = MIN_GAP, seed: int = 0,
         **options) -> pd.DataFrame:
    """Every component patched alone (`patching.every_component`): one row each, `component`, `kind`, `layer`
    (1-indexed), `head` (1-indexed, 0 for a block), `share` (Σ restored / Σ gap over the pairs whose gap is at
    least `min_gap`) with a 95 % bootstrap interval over those pairs (`seed`), `pairs` (how many), sorted from the
    largest share."""
    components = every_component(encoder)
    found, gaps = shares(encoder, pairs, [[c] for c in components], **options)
    restored, gaps = _clear(found, gaps, min_gap)
    share, low, high = ratio_interval(restored, gaps, N_BOOT, seed)
    rows = [(component_label(c), c[0], c[1] + 1, 0 if c[2] is None else c[2] + 1, share[i], low[i], high[i],
             len(gaps)) for i, c in enumerate(components)]
    frame = pd.DataFrame(rows, columns=["component", "kind", "layer", "head", "share", "low", "high", "pairs"])
    return frame.sort_values("share", ascending=False, ignore_index=True)


def top_heads(found: pd.DataFrame, size: int) -> list[Component]:
    """The `size` heads (0-based components) restoring the largest share in a `scan` frame: the set to confirm on
    other pairs."""
    heads = found[found["kind"] == "head"].sort_values("share", ascending=False)
    if not 0 < size <= len(heads):
        raise ValueError(f"size must be between 1 and {len(heads)}, got {size}")
    return [("head", int(row.layer) - 1, int(row.head) - 1) for row in heads.head(size).itertuples()]


def random_head_sets(encoder: Encoder, size: int, n: int, seed: int = 0) -> list[list[Component]]:
    """`n` sets of `size` distinct heads drawn at random (seeded), the control for a chosen set of that size."""
    heads = [c for c in every_component(encoder) if c[0] == "head"]
    if not 0 < size <= len(heads):
        raise ValueError(f"size must be between 1 and {len(heads)}, got {size}")
    rng = np.random.default_rng(seed)
    return [[heads[i] for i in sorted(rng.choice(len(heads), size, replace=False))] for _ in range(n)]


def same_layer_head_sets(encoder: Encoder, chosen: Sequence[Component], n: int, seed: int = 0
                         ) -> list[list[Component]]:
    """`n` sets drawn at random (seeded) with as many heads in each layer as the `chosen` heads, from the other
    heads of those layers: the control that asks whether the chosen heads matter more than their neighbours."""
    chosen = [tuple(c) for c in chosen]
    if not chosen or any(c[0] != "head" for c in chosen):
        raise ValueError(f"chosen must be heads ('head', layer, head), got {chosen}")
    rng = np.random.default_rng(seed)
    layers = sorted({c[1] for c in chosen})
    others = {layer: [("head", layer, h) for h in range(encoder.n_heads) if ("head", layer, h) not in chosen]
              for layer in layers}
    counts = {layer: sum(c[1] == layer for c in chosen) for layer in layers}
    if any(counts[layer] > len(others[layer]) for layer in layers):
        raise ValueError(f"the chosen heads fill more than half of a layer ({counts}): no other heads to match them")
    return [[others[layer][i] for layer in layers for i in sorted(rng.choice(len(others[layer]), counts[layer],
                                                                               replace=False))] for _ in range(n)]


def confirm(encoder: Encoder, chosen: Sequence[Component], pairs: Sequence[TermPair], n_random: int = 20,
            seed: int = 0, min_gap: float = MIN_GAP, **options) -> pd.DataFrame:
    """The chosen heads scored together on other pairs, beside their controls: one row each for the chosen set,
    `n_random` random sets of as many heads from any layer (their mean, and the best of them), `n_random` sets of
    as many heads from the chosen heads' own layers, the chosen ones left out (`same_layer_head_sets`; mean and
    best), every head at once, the last layer (everything downstream: 1 by construction, the machinery's check)
    and the chosen set patched from the base itself (the self-patch: 0). Columns `set`, `share` (Σ restored / Σ
    gap over the pairs with a clear gap), `low`, `high` (95 % bootstrap interval over pairs; for the random sets,
    the 2.5 and 97.5 percentiles of the sets' shares), `pairs`."""
    chosen = [tuple(c) for c in chosen]
    random_sets = random_head_sets(encoder, len(chosen), n_random, seed)
    neighbours = same_layer_head_sets(encoder, chosen, n_random, seed)
    every_head = [c for c in every_component(encoder) if c[0] == "head"]
    last = [("layer", encoder.n_layers - 1, None)]
    found, gaps = shares(encoder, pairs, [chosen, *random_sets, *neighbours, every_head, last], **options)
    self_patch, _ = shares(encoder, pairs, [chosen], source="base", **options)
    restored, clear_gaps = _clear(np.concatenate([found, self_patch], 1), gaps, min_gap)
    share, low, high = ratio_interval(restored, clear_gaps, N_BOOT, seed)
    per_set, per_neighbour_set = share[1:1 + n_random], share[1 + n_random:1 + 2 * n_random]
    kept = len(clear_gaps)
    label = ", ".join(component_label(c) for c in chosen)
    rows = [(f"chosen ({label})", share[0], low[0], high[0], kept),
            (f"random sets of {len(chosen)} heads (mean of {n_random})", float(per_set.mean()),
             *np.percentile(per_set, [2.5, 97.5]), kept),
            ("best random set", float(per_set.max()), np.nan, np.nan, kept),
            (f"same-layer sets of {len(chosen)} other heads (mean of {n_random})", float(per_neighbour_set.mean()),
             *np.percentile(per_neighbour_set, [2.5, 97.5]), kept),
            ("best same-layer set", float(per_neighbour_set.max()), np.nan, np.nan, kept),
            ("every head", share[-3], low[-3], high[-3], kept),
            ("the last layer (everything)", share[-2], low[-2], high[-2], kept),
            ("self-patch (chosen, from the base)", share[-1], low[-1], high[-1], kept)]
    return pd.DataFrame(rows, columns=["set", "share", "low", "high", "pairs"])


def copies(encoder: Encoder, chosen: Sequence[Component], pairs: Sequence[TermPair], min_gap: float = MIN_GAP,
           seed: int = 0, **options) -> pd.DataFrame:
    """The chosen heads on the second copy of the term (the pairs) and on the first (`termpairs.first_copy`: the
    term added where it was absent), over the pairs whose gaps are both at least `min_gap`. Rows "second copy",
    "first copy" and "first - second" (paired bootstrap over pairs); columns `copy`, `gap` (the median relevance
    gap; NaN for the difference), `share` (Σ restored / Σ gap), `low`, `high` (95 %), `pairs`."""
    chosen = [tuple(c) for c in chosen]
    added = [first_copy(p) for p in pairs]
    (second, second_gaps), (first, first_gaps) = (shares(encoder, p, [chosen], **options) for p in (pairs, added))
    clear = (second_gaps >= min_gap) & (first_gaps >= min_gap)
    if clear.sum() < 2:
        raise ValueError(f"only {clear.sum()} of {len(clear)} pairs have both gaps of at least {min_gap}")
    measured = [(second[clear, 0] * second_gaps[clear], second_gaps[clear]),
                (first[clear, 0] * first_gaps[clear], first_gaps[clear])]
    rows = [(name, float(np.median(gaps)), *ratio_interval(restored, gaps, N_BOOT, seed), int(clear.sum()))
            for name, (restored, gaps) in zip(("second copy", "first copy"), measured)]
    rows.append(("first - second", np.nan, *ratio_difference_interval(measured[1], measured[0], N_BOOT, seed),
                 int(clear.sum())))
    return pd.DataFrame(rows, columns=["copy", "gap", "share", "low", "high", "pairs"])
