"""Clustering attention heads (Clark et al. 2019, §6, Fig 6; SPEC §4.7).

The distance between heads i and j is the sum, over every from-token of every input, of the Jensen–Shannon
divergence (natural log) between their attention rows, each row first smoothed `0.001 / n + 0.999 a` over
the input's n tokens (not scipy's `jensenshannon`, which is the square root of a base-2 divergence of one
pair of rows). With P, Q two rows and M = (P + Q) / 2,

    JS(P, Q) = sum_c [ (P log P + Q log Q) / 2 - M log M ]_c,

so summed over rows, D_ij = (C_ii + C_jj) / 2 - C_ij with C_ij = sum over rows and columns of M log M
(C_ii = the head's own sum of P log P). `JSDistances` streams batches through `extract.reduce` and keeps
only the [K, K] sums C (K = n_layers * n_heads, head index (layer - 1) * n_heads + (head - 1)); the cross
terms need every pair of heads, so the work grows with K^2 (4x from 72 to 144 heads).

Around the distances: behaviour labels from the surface statistics with the paper's thresholds, metric
MDS (scikit-learn), an average-linkage tree, permutation tests of "heads in the same layer (behaviour) are
close" — also without the broad heads and stratified by behaviour (`robustness_tests`), since near-uniform
rows are close to each other by construction — and a comparison of two distance matrices (rank correlation,
Procrustes on the MDS maps).
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
import pandas as pd
import torch

from ..core.conventions import head_label
from ..engine.extract import Batch, KeepExamples, Reducer, encoded_batches, reduce
from ..core.models import Encoded, Encoder
from .surface import BROAD_ENTROPY, BROAD_MAX_WEIGHT, EntropyStats, TokenStats, broad_heads

SMOOTHING = 1e-3  # a <- SMOOTHING / n + (1 - SMOOTHING) a, as Clark et al.
BLOCK_ELEMENTS = 8192  # rows of one input are processed in blocks of about this many weights per head

# Behaviour labels (Clark et al. Fig 6 legend), checked in this order; the first that holds wins.
POSITION_SHARE = 0.5  # prev / next
TOKEN_SHARE = 0.6  # [CLS] / [SEP] / punctuation
BEHAVIOURS = ("broad", "prev", "next", "cls", "sep", "punct", "other")
BEHAVIOUR_NAMES = {"broad": "broad", "prev": "previous token", "next": "next token", "cls": "[CLS]",
                   "sep": "[SEP]", "punct": "punctuation", "other": "other"}


# -- the distances ------------------------------------------------------------------------------------
class JSDistances(Reducer):
    """Streaming Jensen–Shannon distances between every pair of heads (no maps are kept).

    `cross` [K, K] float64: upper triangle (with diagonal) of C_ij = sum of M log M over all rows seen;
    `rows`: how many from-tokens were summed. `distances()` is the [K, K] matrix in nats summed over rows."""

    name = "js_distances"

    def __init__(self):
        self.cross: np.ndarray | None = None
        self.rows = 0

    def update(self, batch: Batch) -> None:
        attn = batch.attn  # [B, L, H, T, T]
        n_inputs, n_layers, n_heads, width = attn.shape[:4]
        k = n_layers * n_heads
        if self.cross is None:
            self.cross = np.zeros((k, k))
        elif self.cross.shape != (k, k):
            raise ValueError(f"a batch has {k} heads but earlier batches had {self.cross.shape[0]}")

        def inputs(share: range) -> torch.Tensor:
            cross = torch.zeros(k, k, dtype=torch.float64)
            for b in share:
                real = batch.valid[b].nonzero()[:, 0]
                maps = attn[b].reshape(k, width, width)[:, real][:, :, real]  # [K, n, n], real tokens only
                n = len(real)
                block = max(1, BLOCK_ELEMENTS // n)
                for start in range(0, n, block):
                    # halves of the smoothed rows, so that M = half_i + half_j exactly
                    half = (maps[:, start:start + block] * ((1 - SMOOTHING) / 2) + SMOOTHING / (2 * n)).reshape(k, -1)
                    _add_cross_terms(half, cross)
            return cross

        # The ops are small (a few MB), so threads inside each op mostly wait for each other; instead each
        # thread takes whole inputs, with one thread per op (torch releases the GIL inside its ops).
        workers = min(torch.get_num_threads(), n_inputs)
        if workers > 1:
            threads = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                with ThreadPoolExecutor(workers) as pool:
                    parts = list(pool.map(inputs, (range(w, n_inputs, workers) for w in range(workers))))
            finally:
                torch.set_num_threads(threads)
        else:
            parts = [inputs(range(n_inputs))]
        self.cross += sum(p.numpy() for p in parts)
        self.rows += int(batch.valid.sum())

    def result(self) -> dict[str, np.ndarray]:
        if self.cross is None:
            raise ValueError("js_distances: no inputs were seen")
        return {"cross": self.cross, "rows": np.array(self.rows)}

    def load(self, result: dict[str, np.ndarray]) -> None:
        self.cross, self.rows = np.array(result["cross"]), int(result["rows"])

    def distances(self) -> np.ndarray:
        """[K, K] float64: symmetric, zero diagonal, D_ij = (C_ii + C_jj) / 2 - C_ij."""
        cross = self.result()["cross"]
        upper = np.triu(cross)
        full = upper + np.triu(upper, 1).T
        own = np.diag(full)
        dist = (own[:, None] + own[None, :]) / 2 - full
        np.fill_diagonal(dist, 0.0)
        return np.maximum(dist, 0.0)  # a JS divergence is >= 0; rounding can leave -1e-9 for identical heads


def _add_cross_terms(half: torch.Tensor, cross: torch.Tensor) -> None:
    """cross[i, j] += sum over the block of M log M for every pair i <= j; half: [K, N] float32, P / 2 per head.

    One head against all later heads per step: an add, a log, a multiply and a row sum on a [K - i, N]
    buffer that is reused (N ~ BLOCK_ELEMENTS keeps it in cache)."""
    k = half.shape[0]
    mix, logs = torch.empty_like(half), torch.empty_like(half)
    for i in range(k):
        m, lg = mix[: k - i], logs[: k - i]
        torch.add(half[i], half[i:], out=m)
        torch.log(m, out=lg)
        cross[i, i:] += lg.mul_(m).sum(-1).double()


def js_distances(encodeds: Iterable[Encoded]) -> np.ndarray:
    """[L*H, L*H] summed Jensen–Shannon divergences (nats) between heads; head index (layer-1)*H + (head-1)."""
    reducer = JSDistances()
    for batch in encoded_batches(encodeds):
        reducer.update(batch)
    return reducer.distances()


# -- behaviour labels ----------------------------------------------------------------------------------
def behaviour_labels(tokens: pd.DataFrame, entropy: pd.DataFrame) -> pd.Series:
    """One label per head (rows as in `surface.token_stats`): broad (entropy > 3.8 nats), prev / next
    (> 0.5 on that token), cls / sep / punct (> 0.6 on it), else other; the first that holds wins."""
    if len(tokens) != len(entropy) or not (tokens[["layer", "head"]].values == entropy[["layer", "head"]].values).all():
        raise ValueError("tokens and entropy must list the same heads in the same order (from the same pass)")
    tests = [("broad", entropy["entropy"] > BROAD_ENTROPY), ("prev", tokens["prev"] > POSITION_SHARE),
             ("next", tokens["next"] > POSITION_SHARE), ("cls", tokens["cls"] > TOKEN_SHARE),
             ("sep", tokens["sep"] > TOKEN_SHARE), ("punct", tokens["punct"] > TOKEN_SHARE)]
    labels = pd.Series("other", index=tokens.index, name="behaviour")
    for name, holds in reversed(tests):
        labels[holds.values] = name
    return labels


# -- maps, trees, tests ----------------------------------------------------------------------------------
def _check_distances(distances: np.ndarray) -> np.ndarray:
    d = np.asarray(distances, dtype=float)
    if d.ndim != 2 or d.shape[0] != d.shape[1]:
        raise ValueError(f"distances must be a square [K, K] matrix, got shape {d.shape}")
    if not np.all(np.isfinite(d)) or d.min() < 0 or not np.allclose(d, d.T) or np.abs(np.diag(d)).max() > 0:
        raise ValueError("distances must be finite, non-negative and symmetric with a zero diagonal "
                         "(use js_distances or JSDistances.distances)")
    return d


def mds(distances: np.ndarray, seed: int = 0) -> np.ndarray:
    """[K, 2] metric MDS embedding of precomputed distances (scikit-learn SMACOF).

    SMACOF starts from classical (Torgerson) MDS: from random starts it stops in local minima of higher
    stress, and two similar distance matrices then get maps that differ by more than a rotation
    (measured here: stress 127 vs 117, Procrustes disparity 0.47 vs 0.01 between pairs and single texts).
    Distances are scaled by their mean first (the map's shape does not depend on the scale)."""
    from sklearn.manifold import MDS

    d = _check_distances(distances)
    d = d / d[np.triu_indices_from(d, 1)].mean()
    model = MDS(n_components=2, metric_mds=True, metric="precomputed", init="classical_mds", n_init=1,
                random_state=seed)
    return model.fit_transform(d)


def linkage(distances: np.ndarray, method: str = "average") -> np.ndarray:
    """scipy hierarchical clustering of the heads (for `scipy.cluster.hierarchy.dendrogram`)."""
    from scipy.cluster.hierarchy import linkage as scipy_linkage
    from scipy.spatial.distance import squareform

    return scipy_linkage(squareform(_check_distances(distances), checks=False), method=method)


@dataclass
class GroupTest:
    """Are heads of the same group (layer, behaviour) closer than heads of different groups? `within` /
    `between`: mean distance over pairs of heads in the same / different groups; `p_value`: the share of
    random relabellings (group sizes kept) whose between/within ratio is at least the observed one
    (one-sided, counting the observed labelling as one of them)."""

    within: float
    between: float
    ratio: float
    p_value: float
    n_permutations: int
    null_ratios: np.ndarray
    heads: int = 0  # how many heads were tested
    stratified: bool = False  # shuffled within strata, pairs within strata only


def group_test(distances: np.ndarray, groups: Sequence, n_permutations: int = 10000, seed: int = 0,
               strata: Sequence | None = None) -> GroupTest:
    """Permutation test of "heads in the same group are close"; groups: one label per head. With strata (one
    label per head, e.g. its behaviour) the group labels are shuffled only among heads of the same stratum
    and only pairs of heads of the same stratum are compared, so that groups cannot look close merely by
    holding more heads of one close-knit stratum."""
    d = _check_distances(distances)
    groups = np.unique(np.asarray(groups), return_inverse=True)[1]
    if len(groups) != len(d):
        raise ValueError(f"give one group per head: {len(groups)} groups for {len(d)} heads")
    if groups.max() < 1 or np.bincount(groups).max() < 2:
        raise ValueError("need at least two groups and a group with two heads")
    upper = np.triu_indices(len(d), 1)
    if strata is not None:
        strata = np.unique(np.asarray(strata), return_inverse=True)[1]
        if len(strata) != len(d):
            raise ValueError(f"give one stratum per head: {len(strata)} strata for {len(d)} heads")
        inside = strata[upper[0]] == strata[upper[1]]
        upper = (upper[0][inside], upper[1][inside])
    values = d[upper]

    def ratios(labels: np.ndarray) -> np.ndarray:  # labels [P, K] -> between / within, [P]
        same = labels[:, upper[0]] == labels[:, upper[1]]
        with np.errstate(invalid="ignore", divide="ignore"):  # a shuffle without pairs of one kind: NaN, never >=
            return ((~same * values).sum(1) / (~same).sum(1)) / ((same * values).sum(1) / same.sum(1))

    same = groups[upper[0]] == groups[upper[1]]
    if not same.any() or same.all():
        raise ValueError("need pairs of heads in the same group and in different groups (within a stratum)")
    within, between = values[same].mean(), values[~same].mean()
    rng = np.random.default_rng(seed)
    if strata is None:
        null = np.concatenate([ratios(np.stack([rng.permutation(groups) for _ in range(min(1000, n_permutations - s))]))
                               for s in range(0, n_permutations, 1000)])
    else:
        chunks = []
        for s in range(0, n_permutations, 1000):
            labels = np.tile(groups, (min(1000, n_permutations - s), 1))
            for stratum in np.unique(strata):
                members = np.flatnonzero(strata == stratum)
                labels[:, members] = rng.permuted(labels[:, members], axis=1)
            chunks.append(ratios(labels))
        null = np.concatenate(chunks)
    observed = between / within
    p = (1 + int((null >= observed).sum())) / (1 + n_permutations)
    return GroupTest(float(within), float(between), float(observed), p, n_permutations, null, len(d),
                     strata is not None)


def layer_test(distances: np.ndarray, n_layers: int, n_permutations: int = 10000, seed: int = 0,
               keep: Sequence[bool] | None = None, strata: Sequence | None = None) -> GroupTest:
    """`group_test` with the layers as groups (heads ordered layer by layer, as in the distance matrix);
    keep: bool [K], the heads to test (default all); strata: one label per head (see `group_test`)."""
    k = len(distances)
    if n_layers < 2 or k % n_layers:
        raise ValueError(f"{k} heads cannot be split into {n_layers} equal layers (need at least 2 layers)")
    layers = np.repeat(np.arange(n_layers), k // n_layers)
    if keep is None and strata is None:
        return group_test(distances, layers, n_permutations, seed)
    keep = np.ones(k, dtype=bool) if keep is None else np.asarray(keep, dtype=bool)
    if keep.shape != (k,):
        raise ValueError(f"keep must be one bool per head ({k}), got shape {keep.shape}")
    d = _check_distances(distances)[np.ix_(keep, keep)]
    return group_test(d, layers[keep], n_permutations, seed, None if strata is None else np.asarray(strata)[keep])


def behaviour_test(distances: np.ndarray, behaviours: Sequence[str], n_permutations: int = 10000,
                   seed: int = 0, leave_out: Sequence[str] = ("other",)) -> GroupTest | None:
    """`group_test` among the labelled heads (not "other", nor any behaviour in `leave_out`), behaviours as
    groups; None when fewer than two behaviours or no behaviour with two heads."""
    behaviours = np.asarray(behaviours)
    keep = ~np.isin(behaviours, list(leave_out))
    labelled = behaviours[keep]
    if len(set(labelled)) < 2 or max(np.unique(labelled, return_counts=True)[1]) < 2:
        return None
    d = _check_distances(distances)[np.ix_(keep, keep)]
    return group_test(d, labelled, n_permutations, seed)


ROBUSTNESS = {  # name -> what is tested (see robustness_tests)
    "layers": "layers as groups, every head",
    "layers without broad heads": "layers as groups, the broad heads left out",
    "layers within behaviours": "layers as groups, shuffled within each behaviour, pairs of one behaviour only",
    "behaviours": "behaviours as groups, the labelled heads (not 'other')",
    "behaviours without broad heads": "behaviours as groups, the labelled heads but the broad ones",
}


def robustness_tests(distances: np.ndarray, behaviours: Sequence[str], n_layers: int, n_permutations: int = 10000,
                     seed: int = 0) -> dict[str, GroupTest | None]:
    """Every test of `ROBUSTNESS` on [K, K] distances and one behaviour per head: does "heads of one layer
    (behaviour) are close" survive without the broad heads, which are close to each other by construction
    (near-uniform rows), and when layers are compared only among heads of the same behaviour? None where a
    test cannot run (see `behaviour_test`)."""
    behaviours = np.asarray(behaviours)
    broad = behaviours == "broad"

    def layers(**options) -> GroupTest | None:
        try:
            return layer_test(distances, n_layers, n_permutations, seed, **options)
        except ValueError as error:  # too few heads left: no two in one layer, or none in different layers
            if str(error).startswith("need"):
                return None
            raise

    return {"layers": layer_test(distances, n_layers, n_permutations, seed),
            "layers without broad heads": layers(keep=~broad),
            "layers within behaviours": layers(strata=behaviours),
            "behaviours": behaviour_test(distances, behaviours, n_permutations, seed),
            "behaviours without broad heads": behaviour_test(distances, behaviours, n_permutations, seed,
                                                             leave_out=("other", "broad"))}


def tests_frame(tests: dict[str, GroupTest | None], rows: int = 1) -> pd.DataFrame:
    """One row per test: name, heads, within / between mean distance (divided by `rows`: nats per token when
    rows = the from-tokens summed over), ratio, the largest shuffled ratio, p; NaN where no test ran."""
    return pd.DataFrame([dict(test=name, heads=t.heads if t else 0,
                              within=t.within / rows if t else np.nan, between=t.between / rows if t else np.nan,
                              ratio=t.ratio if t else np.nan, null_max=t.null_ratios.max() if t else np.nan,
                              p=t.p_value if t else np.nan) for name, t in tests.items()])


def broad_overlap(heads: pd.DataFrame, max_weight: float = BROAD_MAX_WEIGHT) -> dict[str, list[str]]:
    """How the two "broad" definitions relate: this notebook's (behaviour "broad": entropy > 3.8 nats) and
    notebook 03's (mean largest weight per row <= max_weight). heads: `ClusterResult.heads` (label, behaviour,
    max_weight) -> head labels that are broad by both, by entropy only, by largest weight only."""
    broad = broad_heads(heads, max_weight=max_weight)  # "broad" behaviour = entropy above BROAD_ENTROPY
    by_entropy, by_weight, labels = broad["by_entropy"], broad["by_max_weight"], heads["label"]
    return {"both": list(labels[by_entropy & by_weight]), "entropy only": list(labels[by_entropy & ~by_weight]),
            "largest weight only": list(labels[~by_entropy & by_weight])}


def compare(distances_a: np.ndarray, distances_b: np.ndarray, coords_a: np.ndarray, coords_b: np.ndarray) -> dict:
    """How alike two head maps are: Spearman correlation of the pairwise distances, the Procrustes
    disparity of the two MDS maps (0 = the same up to shift, scale, rotation and reflection), and the
    mean overlap of each head's 5 nearest neighbours."""
    from scipy.spatial import procrustes
    from scipy.stats import spearmanr

    a, b = _check_distances(distances_a), _check_distances(distances_b)
    if a.shape != b.shape:
        raise ValueError(f"the two distance matrices cover different heads: {a.shape} vs {b.shape}")
    upper = np.triu_indices_from(a, 1)
    rho = spearmanr(a[upper], b[upper]).statistic
    disparity = procrustes(coords_a, coords_b)[2]
    k = min(5, len(a) - 1)
    near_a, near_b = (np.argsort(m + np.diag(np.full(len(m), np.inf)), 1)[:, :k] for m in (a, b))
    overlap = np.mean([len(set(x) & set(y)) / k for x, y in zip(near_a, near_b)])
    return {"spearman": float(rho), "procrustes": float(disparity), "neighbours": float(overlap)}


# -- the analysis ------------------------------------------------------------------------------------
@dataclass
class ClusterResult:
    """Distances and map of every head over one set of inputs.

    distances: [K, K] summed JS divergence (nats); rows: from-tokens summed over; heads: one row per head
    with layer, head (1-indexed), label, behaviour, x, y (MDS) and the surface statistics; examples: a few
    full maps for figures."""

    distances: np.ndarray
    rows: int
    heads: pd.DataFrame
    examples: list[Encoded]
    n_layers: int
    n_heads: int

    @property
    def coords(self) -> np.ndarray:
        return self.heads[["x", "y"]].to_numpy()

    @property
    def mean_distances(self) -> np.ndarray:
        """[K, K] JS divergence per from-token (nats, at most ln 2): distances / rows."""
        return self.distances / self.rows

    def layer_test(self, n_permutations: int = 10000, seed: int = 0) -> GroupTest:
        return layer_test(self.distances, self.n_layers, n_permutations, seed)

    def behaviour_test(self, n_permutations: int = 10000, seed: int = 0) -> GroupTest | None:
        return behaviour_test(self.distances, self.heads["behaviour"], n_permutations, seed)

    def robustness_tests(self, n_permutations: int = 10000, seed: int = 0) -> dict[str, GroupTest | None]:
        return robustness_tests(self.distances, self.heads["behaviour"], self.n_layers, n_permutations, seed)


def analyse(encoder: Encoder, items: Sequence, n_examples: int = 4, seed: int = 0, **reduce_options) -> ClusterResult:
    """JS distances, surface statistics and a few examples over `items` (segments, texts or pairs) in one
    streaming pass (each cached), then behaviour labels and the MDS map (seeded)."""
    tokens, entropy, keep, js = reduce(encoder, items, [TokenStats(), EntropyStats(), KeepExamples(n_examples),
                                                         JSDistances()], **reduce_options)
    tokens, entropy = tokens.frame(), entropy.frame()
    distances = js.distances()
    heads = tokens[["layer", "head"]].copy()
    heads["label"] = [head_label(layer, h) for layer, h in zip(heads["layer"], heads["head"])]
    heads["behaviour"] = behaviour_labels(tokens, entropy).values
    heads[["x", "y"]] = mds(distances, seed)
    for column in ("prev", "next", "cls", "sep", "punct"):
        heads[column] = tokens[column].values
    heads["entropy"] = entropy["entropy"].values
    heads["max_weight"] = entropy["max_weight"].values
    return ClusterResult(distances, js.rows, heads, keep.examples, encoder.n_layers, encoder.n_heads)


def single_texts(segments: Sequence) -> list[str]:
    """The first half (A) of each segment alone, as a single-text input `[CLS] A [SEP]`."""
    return [s.a for s in segments]


def closest_pairs(result: ClusterResult) -> pd.DataFrame:
    """Every pair of heads with its JS divergence per token, closest first: head, other head, JS per token."""
    d = result.mean_distances
    i, j = np.triu_indices(len(d), 1)
    labels = result.heads["label"].to_numpy()
    pairs = pd.DataFrame({"head": labels[i], "other head": labels[j], "JS per token": d[i, j]})
    return pairs.sort_values("JS per token", kind="stable").reset_index(drop=True)
