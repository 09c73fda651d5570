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
MDS (scikit-learn), an average-linkage tree, a permutation test of "heads in the same layer are close",
and a comparison of two distance matrices (rank correlation, Procrustes on the MDS maps).
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
import pandas as pd
import torch

from .extract import Batch, KeepExamples, Reducer, reduce
from .models import Encoded, Encoder
from .surface import EntropyStats, TokenStats

SMOOTHING = 1e-3  # a <- SMOOTHING / n + (1 - SMOOTHING) a, as Clark et al.
BLOCK_ELEMENTS = 8192  # rows of one input are processed in blocks of about this many weights per head

# Behaviour labels (Clark et al. Fig 6 legend), checked in this order; the first that holds wins.
BROAD_ENTROPY = 3.8  # nats
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
    seen = False
    for enc in encodeds:
        reducer.update(Batch.from_encoded(enc))
        seen = True
    if not seen:
        raise ValueError("js_distances needs at least one Encoded input")
    return reducer.distances()


def head_index(layer: int, head: int, n_heads: int) -> int:
    """Row of head `layer-head` (1-indexed) in the distance matrix."""
    if layer < 1 or not 1 <= head <= n_heads:
        raise ValueError(f"layer and head are 1-indexed (heads 1-{n_heads}); got layer {layer}, head {head}")
    return (layer - 1) * n_heads + (head - 1)


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


def group_test(distances: np.ndarray, groups: Sequence, n_permutations: int = 10000, seed: int = 0) -> GroupTest:
    """Permutation test of "heads in the same group are close"; groups: one label per head."""
    d = _check_distances(distances)
    groups = np.unique(np.asarray(groups), return_inverse=True)[1]
    if len(groups) != len(d):
        raise ValueError(f"give one group per head: {len(groups)} groups for {len(d)} heads")
    if groups.max() < 1 or np.bincount(groups).max() < 2:
        raise ValueError("need at least two groups and a group with two heads")
    upper = np.triu_indices(len(d), 1)
    values = d[upper]

    def ratios(labels: np.ndarray) -> np.ndarray:  # labels [P, K] -> between / within, [P]
        same = labels[:, upper[0]] == labels[:, upper[1]]
        return ((~same * values).sum(1) / (~same).sum(1)) / ((same * values).sum(1) / same.sum(1))

    same = groups[upper[0]] == groups[upper[1]]
    within, between = values[same].mean(), values[~same].mean()
    rng = np.random.default_rng(seed)
    null = np.concatenate([ratios(np.stack([rng.permutation(groups) for _ in range(min(1000, n_permutations - s))]))
                           for s in range(0, n_permutations, 1000)])
    observed = between / within
    p = (1 + int((null >= observed).sum())) / (1 + n_permutations)
    return GroupTest(float(within), float(between), float(observed), p, n_permutations, null)


def layer_test(distances: np.ndarray, n_layers: int, n_permutations: int = 10000, seed: int = 0) -> GroupTest:
    """`group_test` with the layers as groups (heads ordered layer by layer, as in the distance matrix)."""
    k = len(distances)
    if n_layers < 2 or k % n_layers:
        raise ValueError(f"{k} heads cannot be split into {n_layers} equal layers (need at least 2 layers)")
    return group_test(distances, np.repeat(np.arange(n_layers), k // n_layers), n_permutations, seed)


def behaviour_test(distances: np.ndarray, behaviours: Sequence[str], n_permutations: int = 10000,
                   seed: int = 0) -> GroupTest | None:
    """`group_test` among the labelled heads (not "other"), behaviours as groups; None when fewer than two
    behaviours or no behaviour with two heads."""
    behaviours = np.asarray(behaviours)
    keep = behaviours != "other"
    labelled = behaviours[keep]
    if len(set(labelled)) < 2 or max(np.unique(labelled, return_counts=True)[1]) < 2:
        return None
    d = _check_distances(distances)[np.ix_(keep, keep)]
    return group_test(d, labelled, n_permutations, seed)


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


def analyse(encoder: Encoder, items: Sequence, n_examples: int = 4, seed: int = 0, **reduce_options) -> ClusterResult:
    """JS distances, surface statistics and a few examples over `items` (segments, texts or pairs) in one
    streaming pass (each cached), then behaviour labels and the MDS map (seeded)."""
    tokens, entropy, keep, js = reduce(encoder, items, [TokenStats(), EntropyStats(), KeepExamples(n_examples),
                                                         JSDistances()], **reduce_options)
    tokens, entropy = tokens.frame(), entropy.frame()
    distances = js.distances()
    heads = tokens[["layer", "head"]].copy()
    heads["label"] = [f"{l}-{h}" for l, h in zip(heads["layer"], heads["head"])]
    heads["behaviour"] = behaviour_labels(tokens, entropy).values
    heads[["x", "y"]] = mds(distances, seed)
    for column in ("prev", "next", "cls", "sep", "punct"):
        heads[column] = tokens[column].values
    heads["entropy"] = entropy["entropy"].values
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


# -- figures (viz / widgets are imported where used: they are presentation, not part of the cache key) ----
def plot_map(result: ClusterResult, colour_by: str = "behaviour", ax=None, highlight: int | None = None,
             annotate: bool = True, title: str | None = None):
    """Clark et al. Fig 6: one dot per head at its MDS position, coloured by behaviour or by layer.
    highlight: a head index to ring."""
    import matplotlib.pyplot as plt

    from . import viz

    ax = ax or plt.subplots(figsize=(6, 5.5))[1]
    heads = result.heads
    if colour_by == "behaviour":
        for name in BEHAVIOURS:
            chosen = heads[heads["behaviour"] == name]
            if len(chosen):
                colour = viz.PALETTE.get(name, viz.PALETTE["other"])
                ax.scatter(chosen["x"], chosen["y"], s=46, color=colour, alpha=0.9 if name != "other" else 0.45,
                           label=f"{BEHAVIOUR_NAMES[name]} ({len(chosen)})", edgecolors="white", linewidths=0.5)
    elif colour_by == "layer":
        shades = plt.get_cmap("viridis")(np.linspace(0, 0.85, result.n_layers))  # no pale yellow on white
        for layer in range(1, result.n_layers + 1):
            chosen = heads[heads["layer"] == layer]
            ax.scatter(chosen["x"], chosen["y"], s=46, color=shades[layer - 1], label=f"layer {layer}",
                       edgecolors="white", linewidths=0.5)
    else:
        raise ValueError(f"colour_by must be 'behaviour' or 'layer', not {colour_by!r}")
    if annotate:
        for _, row in heads.iterrows():
            ax.annotate(row["label"], (row["x"], row["y"]), fontsize=6.5, alpha=0.7, xytext=(3, 2),
                        textcoords="offset points")
    if highlight is not None:
        row = heads.iloc[highlight]
        ax.scatter([row["x"]], [row["y"]], s=260, facecolors="none", edgecolors="black", linewidths=2)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_xlabel("MDS 1")
    ax.set_ylabel("MDS 2")
    ax.set_aspect("equal", adjustable="datalim")
    ax.legend(fontsize=8, loc="best", ncol=1 if colour_by == "behaviour" else 2, markerscale=0.8)
    ax.set_title(title or f"heads by {colour_by}")
    return ax


def plot_dendrogram(result: ClusterResult, ax=None, method: str = "average"):
    """The heads as an average-linkage tree of their JS divergence per token; labels coloured by behaviour."""
    import matplotlib.pyplot as plt
    from scipy.cluster.hierarchy import dendrogram

    from . import viz

    ax = ax or plt.subplots(figsize=(14, 3.8))[1]
    tree = dendrogram(linkage(result.mean_distances, method), ax=ax, labels=result.heads["label"].tolist(),
                      color_threshold=0, above_threshold_color=viz.PALETTE["other"], leaf_font_size=7)
    behaviour = dict(zip(result.heads["label"], result.heads["behaviour"]))
    for text in ax.get_xticklabels():
        text.set_color(viz.PALETTE.get(behaviour[text.get_text()], viz.PALETTE["other"]))
    ax.set_ylabel("JS divergence per token (nats)")
    ax.grid(False)
    ax.set_title(f"{method}-linkage tree of the heads (labels coloured by behaviour)")
    return tree


def plot_aligned(result: ClusterResult, other: ClusterResult, ax=None, names: tuple[str, str] = ("pairs", "A alone")):
    """Two maps of the same heads aligned by Procrustes (filled: `result`, open: `other`, coloured by the
    behaviour in `result`), a line joining each head's two places."""
    import matplotlib.pyplot as plt
    from scipy.spatial import procrustes

    from . import viz

    ax = ax or plt.subplots(figsize=(7.5, 6.4))[1]
    first, second, _ = procrustes(result.coords, other.coords)
    for a, b in zip(first, second):
        ax.plot(*np.stack([a, b]).T, color=viz.PALETTE["uniform"], lw=0.7, alpha=0.6)
    behaviour = result.heads["behaviour"].to_numpy()
    for name in BEHAVIOURS:
        mask = behaviour == name
        if mask.any():
            colour = viz.PALETTE.get(name, viz.PALETTE["other"])
            alpha = 0.9 if name != "other" else 0.5  # as in plot_map
            ax.scatter(*first[mask].T, color=colour, s=40, alpha=alpha, label=BEHAVIOUR_NAMES[name])
            ax.scatter(*second[mask].T, facecolors="none", edgecolors=colour, s=40, alpha=alpha)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_aspect("equal", adjustable="datalim")
    ax.legend(fontsize=8, title=f"filled: {names[0]}, open: {names[1]}", title_fontsize=8)
    ax.set_title("the two maps aligned (Procrustes); lines join each head's two places")
    return ax


def explorer(result: ClusterResult, max_tokens: int = 40, snapshot: bool = True):
    """Pick a head (menu sorted along the map's first axis, with its behaviour) and an example: the map ringed
    at that head, beside its attention on the example. An `widgets.Explorer` (live controls + a static
    snapshot of its first view for exported pages)."""
    import ipywidgets
    from matplotlib.figure import Figure

    from . import viz, widgets

    heads = result.heads
    order = np.argsort(heads["x"].to_numpy(), kind="stable")
    options = [(f"{heads['label'].iloc[i]} · {BEHAVIOUR_NAMES[heads['behaviour'].iloc[i]]}", int(i)) for i in order]
    head_menu = ipywidgets.Dropdown(options=options, value=int(order[0]), description="head")
    examples = widgets._check_examples(result.examples)
    example_menu = widgets._example_menu(examples)

    def draw():
        index = head_menu.value
        layer, head = divmod(index, result.n_heads)
        fig = Figure(figsize=(12, 5.6), layout="constrained")
        left, right = fig.subplots(1, 2, width_ratios=[1, 1.05])
        plot_map(result, "behaviour", ax=left, highlight=index, annotate=False, title="heads by behaviour")
        broad = heads["behaviour"].iloc[index] == "broad"  # colours scaled to its largest weight, else blank
        viz.plot_head(examples[example_menu.value], layer + 1, head + 1, ax=right, max_tokens=max_tokens,
                      vmax=None if broad else 1.0, title=f"head {heads['label'].iloc[index]}"
                      + (" (colours scaled to its largest weight)" if broad else ""))
        return fig

    def describe():
        return f"head {heads['label'].iloc[head_menu.value]}, example {example_menu.value + 1}"

    return widgets.Explorer({"head": head_menu, "example": example_menu}, draw, describe, snapshot)


# -- paper vs this run ----------------------------------------------------------------------------------
def _p(value: float, n_permutations: int) -> str:
    return f"p = {value:.4f} (the smallest possible)" if value <= 1 / (1 + n_permutations) else f"p = {value:.4f}"


def comparison(result: ClusterResult, second: ClusterResult | None = None, second_name: str = "single texts",
               n_permutations: int = 10000, seed: int = 0) -> pd.DataFrame:
    """Clark et al. Fig 6's claims beside this run's measurements (quantity, paper, this run, note)."""
    from . import paper

    claims = paper.CLUSTERING
    layers = result.layer_test(n_permutations, seed)
    counts = result.heads["behaviour"].value_counts()
    found = ", ".join(f"{BEHAVIOUR_NAMES[b]} {counts[b]}" for b in BEHAVIOURS if b in counts)
    behaviours = result.behaviour_test(n_permutations, seed)
    rows = [
        ("heads of the same layer are close", claims["same_layer"],
         f"between/within distance {layers.ratio:.2f}, {_p(layers.p_value, n_permutations)}",
         f"permutation test, {n_permutations} relabellings"),
        ("heads by behaviour", ", ".join(claims["behaviour_clusters"]), found, claims["thresholds"]),
        ("heads of the same behaviour are close", "clear clusters",
         "no test: it needs two behaviours besides 'other', one with two heads" if behaviours is None else
         f"between/within distance {behaviours.ratio:.2f}, {_p(behaviours.p_value, n_permutations)}",
         "among the labelled heads (not 'other')"),
    ]
    if second is not None:
        same = compare(result.distances, second.distances, result.coords, second.coords)
        rows.append((f"the map for {second_name}", "not studied",
                     f"Spearman {same['spearman']:.2f}, Procrustes disparity {same['procrustes']:.2f}",
                     f"{100 * same['neighbours']:.0f} % of each head's 5 nearest heads are the same"))
    return pd.DataFrame(rows, columns=["quantity", "paper", "this run", "note"])
