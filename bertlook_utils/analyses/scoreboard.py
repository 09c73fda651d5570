"""The context-mixing scoreboard over many inputs: how the five maps agree layer by layer, and which token scores
pass the deletion test.

    board = scoreboard(encoder, sentences, depth=3)
    board.deletion()      # per method: area under its deletion curve, and its gain over random orders
    board.paired(best)    # per method: its area minus best's, paired by input
    board.agreement()     # per layer and map: Spearman correlation with Value Zeroing (Mohebbi et al.'s reference)

Per input (one cached streaming pass, `extract.reduce`): the maps of `mixing.layer_maps`; the token scores of
`faithfulness.map_scores` and `faithfulness.gradient_scores`; one deletion curve per scored method (its ranking of
the ordinary tokens, [CLS] and [SEP] left alone) and per random order (`n_random`, seeded by input); the Spearman
correlation of every pair of maps in every layer (over the n × n entries).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from ..core.cache import DEFAULT_CACHE_DIR
from ..core.intervals import mean_interval
from ..core.models import Encoder
from ..engine.extract import Batch, RowReducer, reduce
from . import faithfulness, mixing

SCORED = ("attention", "attention rollout", "norm", "norm rollout", "block rollout", "alti rollout",
          "value_zeroing rollout", *faithfulness.GRADIENT_METHODS)
REFERENCE = "value_zeroing"


class ScoreboardRows(RowReducer):
    """Per input: `curves` [len(SCORED) + n_random, depth] (distances, SCORED's orders first) and `spearman`
    [L, 5, 5] (mixing.METHODS against each other, per layer)."""

    name = "mixing-scoreboard"
    needs_attention = False  # it runs the model itself

    def __init__(self, encoder: Encoder, items: Sequence, depth: int, n_random: int, seed: int, n_steps: int):
        super().__init__()
        self.encoder, self.items = encoder, items
        self.depth, self.n_random, self.seed, self.n_steps = depth, n_random, seed, n_steps

    @property
    def key(self) -> str:
        return f"{self.name}-{self.depth}-{self.n_random}-{self.seed}-{self.n_steps}"

    def update(self, batch: Batch) -> None:
        for i in range(len(batch.inputs)):
            index = batch.start + i
            item, n = self.items[index], int(batch.lengths[i])
            ordinary = ~batch.sinks[i, :n].numpy()
            if ordinary.sum() < self.depth:
                raise ValueError(f"item {index} has {ordinary.sum()} tokens besides [CLS] and [SEP], fewer than "
                                 f"depth={self.depth}; give longer inputs or a smaller depth")
            maps = mixing.layer_maps(self.encoder, item)
            scores = {**faithfulness.map_scores(maps), **faithfulness.gradient_scores(self.encoder, item,
                                                                                     self.n_steps)}
            rng = np.random.default_rng([self.seed, index])
            orders = [faithfulness.ranking(scores[name], ordinary) for name in SCORED]
            orders += [rng.permutation(np.flatnonzero(ordinary)) for _ in range(self.n_random)]
            curves = faithfulness.deletion_curve(self.encoder, item, orders, self.depth)
            flat = np.stack([maps[name].reshape(len(maps[name]), -1) for name in mixing.METHODS], 1)  # [L, 5, n*n]
            spearman = np.stack([stats.spearmanr(layer, axis=1).statistic for layer in flat])  # [L, 5, 5]
            self.add(curves=curves[None].astype(np.float32), spearman=spearman[None].astype(np.float32))


@dataclass
class Scoreboard:
    """`curves` [N, len(SCORED) + n_random, depth]; `spearman` [N, L, 5, 5]; the settings."""

    curves: np.ndarray
    spearman: np.ndarray
    depth: int
    n_random: int

    def areas(self) -> pd.DataFrame:
        """One row per input and method (SCORED, then "random": the mean over its random orders): `area`, the mean
        distance over k = 1 … depth."""
        area = self.curves.mean(-1)  # [N, M + R]
        scored = area[:, :len(SCORED)]
        random = area[:, len(SCORED):].mean(1, keepdims=True)
        values = np.concatenate([scored, random], 1)
        names = [*SCORED, "random"]
        return pd.DataFrame([(i, name, float(values[i, m])) for i in range(len(values))
                             for m, name in enumerate(names)], columns=["input", "method", "area"])

    def deletion(self) -> pd.DataFrame:
        """Per method: mean `area`, `gain` = its area minus the random orders' (paired by input) with a 95 %
        t-interval, and `vs_best` = its area minus the best method's (the largest gain), paired by input, with a
        95 % t-interval (`paired`; 0 for the best, NaN for random); sorted from the largest gain. The best is chosen
        on these inputs, so its lead over the others is biased upwards."""
        frame = self.areas().pivot(index="input", columns="method", values="area")
        rows = []
        for name in SCORED:
            gain = mean_interval((frame[name] - frame["random"]).to_numpy())
            rows.append((name, float(frame[name].mean()), *gain))
        rows.append(("random", float(frame["random"].mean()), 0.0, 0.0, 0.0))
        out = pd.DataFrame(rows, columns=["method", "area", "gain", "gain_low", "gain_high"])
        out = out.sort_values("gain", ascending=False, ignore_index=True)
        best = out.loc[0, "method"]
        versus = self.paired(best).set_index("method")
        for column, source in (("vs_best", "difference"), ("vs_best_low", "low"), ("vs_best_high", "high")):
            out[column] = out["method"].map(versus[source])
            out.loc[0, column] = 0.0
        return out

    def paired(self, reference: str) -> pd.DataFrame:
        """Per method of SCORED other than `reference`: `difference`, its area minus the reference's, paired by
        input (so also the difference of their gains), with a 95 % t-interval over inputs (`low`, `high`)."""
        if reference not in SCORED:
            raise ValueError(f"reference must be one of {SCORED}, not {reference!r}")
        frame = self.areas().pivot(index="input", columns="method", values="area")
        rows = [(name, *mean_interval((frame[name] - frame[reference]).to_numpy()))
                for name in SCORED if name != reference]
        return pd.DataFrame(rows, columns=["method", "difference", "low", "high"])

    def curve_means(self) -> pd.DataFrame:
        """Per method (SCORED, then "random": each input's mean over its random orders) and k = 1 … depth: the mean
        `distance` over inputs after deleting the top k tokens, with a 95 % t-interval."""
        random = self.curves[:, len(SCORED):].mean(1, keepdims=True)
        curves = np.concatenate([self.curves[:, :len(SCORED)], random], 1)  # [N, M + 1, depth]
        names = [*SCORED, "random"]
        return pd.DataFrame([(name, k + 1, *mean_interval(curves[:, m, k])) for m, name in enumerate(names)
                             for k in range(self.depth)], columns=["method", "k", "distance", "low", "high"])

    def agreement(self, reference: str = REFERENCE) -> pd.DataFrame:
        """Per layer (1-indexed) and map: the mean over inputs of its Spearman correlation with `reference`'s map,
        with a 95 % t-interval."""
        r = mixing.METHODS.index(reference)
        rows = []
        for layer in range(self.spearman.shape[1]):
            for m, name in enumerate(mixing.METHODS):
                if m != r:
                    rows.append((layer + 1, name, *mean_interval(self.spearman[:, layer, m, r])))
        return pd.DataFrame(rows, columns=["layer", "method", "spearman", "low", "high"])


def scoreboard(encoder: Encoder, items: Sequence, depth: int = 3, n_random: int = 10, seed: int = 0,
               n_steps: int = faithfulness.N_STEPS, cache_dir=DEFAULT_CACHE_DIR, progress: bool = True
               ) -> Scoreboard:
    """The scoreboard of `items` (texts or (a, b) pairs, each with at least `depth` tokens besides [CLS] and
    [SEP]), one cached pass."""
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise ValueError(f"depth must be a positive integer, got {depth!r}")
    if isinstance(n_random, bool) or not isinstance(n_random, int) or n_random < 1:
        raise ValueError(f"n_random must be a positive integer, got {n_random!r}")
    items = list(items)
    (rows,) = reduce(encoder, items, [ScoreboardRows(encoder, items, depth, n_random, seed, n_steps)], batch_size=8,
                     cache_dir=cache_dir, progress=progress, desc="context-mixing scoreboard")
    result = rows.result()
    return Scoreboard(result["curves"], result["spearman"], depth, n_random)
