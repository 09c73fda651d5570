"""Structural probes (Hewitt & Manning 2019) with control tasks (Hewitt & Liang 2019): how much of the silver trees a
linear map of each layer's word vectors holds, and how much of that such a map could memorise.

Clark et al. (§5, `probes`) ask what the attention maps hold; Hewitt & Manning ask it of the word vectors h_i. The
distance probe learns B [k, D] (rank k) so that ‖B(h_i − h_j)‖² approximates the tree distance d(i, j) (edges
between words i and j), with their loss per sentence of n words (1/n²)·Σ_ij |d(i, j) − ‖B(h_i − h_j)‖²|; the
depth probe so that ‖B h_i‖² approximates the depth of word i (edges up to the root word), with
(1/n)·Σ_i |depth(i) − ‖B h_i‖²|; both averaged over the sentences of a batch. Scored on held-out sentences as they
score it:

- UUAS: the minimum spanning tree of the predicted distances between the words that are not punctuation, against
  the silver tree's edges between such words (`edge_hits`), summed over sentences;
- DSpr: Spearman's ρ between each word's predicted and true distances to every word of its sentence, averaged
  over the words of the sentences of each length, then over the lengths 5 to 50 (`SPEARMAN_LENGTHS`); NSpr: the
  same for depths, one ρ per sentence;
- root accuracy: how often the least deep word that is not punctuation is the silver root.

Baselines: layer 0 (the non-contextual embeddings); the same probes on a model of the same shape with random
weights but the pretrained embeddings (`models.random_init_encoder`, as notebook 06; its layer 0 is the pretrained
one, so it is scored from layer 1); the left-to-right chain (`linear_heads`, no training). Hewitt & Liang's control
task: every word type draws one attachment (`control_heads`), the distance probe learns these control trees from
the same vectors, and selectivity = silver UUAS − control UUAS, per layer and rank.

Word vectors: each layer's hidden state (`output_hidden_states`; layer 0 = the embeddings) averaged over a word's
wordpieces, as the kit's word-level maps average rows (`wordlevel.word_matrix`). The model runs on
`extract.batches` here rather than in a reducer: a reducer's blocks would cache the vectors themselves (about
0.5 GB for the default model and notebook 06's sentences); `run` caches the probes' results instead.

What differs from the paper, to fit 2 minutes on 2 CPU cores: Adam with a learning rate falling linearly from
LEARNING_RATE to 0 over EPOCHS epochs of BATCH_SIZE sentences (theirs: 0.001, batches of 20, up to 40 epochs,
early stopping); each layer's vectors divided by their root-mean-square over the training words (a scalar B
absorbs: the same probes, steps of one size for every layer); every layer's and rank's probes train together on
one sum of losses (Adam's state is per weight, so each is trained as if alone).

    results = run(encoder, selection, heldout)    # cached; results.scores, .selectivity, .linear, .edges
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, NamedTuple, Sequence

import numpy as np
import pandas as pd
import torch
from scipy import stats
from tqdm.auto import tqdm

from ..core.cache import DEFAULT_CACHE_DIR, entry_path, load_result, save_result
from ..core.frames import frame_arrays, frame_from
from ..core.intervene import usable_cache
from ..core.models import Encoder, random_init_encoder
from ..core.ratios import ratio_difference_interval, ratio_interval
from ..core.source import code_version
from ..core.trees import is_tree
from ..core.wordlevel import word_matrix
from ..data.parses import Sentence
from ..engine.extract import batches
from .probes import deterministic, sentences_key
from .syntax import _length_order, _naming_the_sentence

RANKS = (1, 2, 4, 8, 16, 32)  # the rank sweep
RANK = 32  # the depth probe's, the random-init model's and the predicted trees' rank
EPOCHS = 6
BATCH_SIZE = 10  # sentences per Adam step
LEARNING_RATE = 0.003  # at the first step; falls linearly to 0
INIT = 0.05  # B starts uniform in [-INIT, INIT], as Hewitt & Manning's code
SPEARMAN_LENGTHS = (5, 50)  # DSpr and NSpr average over sentences of these lengths (words), as the paper
BEHAVIOURS = ("first", "last", "next")  # a control word hangs from the first word, the last, or the next one
TASKS = ("silver", "control")  # the trees a probe learns and is scored on
KINDS = ("distance", "depth")
MODELS = ("pretrained", "random-init")
N_BOOT = 1000
METRICS = ("uuas", "dspr", "root_acc", "nspr")


class Probe(NamedTuple):
    """One probe: `kind` (one of KINDS), `task` (one of TASKS: whose trees it learns), `rank` (the rows of B)."""

    kind: str
    task: str
    rank: int


# -- trees --------------------------------------------------------------------------------------------
def _tree(heads) -> np.ndarray:
    """heads [n] as integers, after checking that they form one tree."""
    heads = np.asarray(heads)
    if heads.ndim != 1 or not np.issubdtype(heads.dtype, np.integer) or not is_tree(heads):
        raise ValueError("heads must form one tree: per word 0 (the root) or another word's 1-based index, one root, "
                         f"no cycle; got {heads.tolist()}")
    return heads


def _paths(heads) -> np.ndarray:
    """int [n, n]: [i, a] = 1 where word a is on the way from word i up to the root, word i included."""
    heads = _tree(heads)
    n = len(heads)
    paths = np.zeros((n, n), dtype=np.int64)
    for word in range(n):
        node = word
        while node >= 0:
            paths[word, node] = 1
            node = heads[node] - 1
    return paths


def tree_distances(heads) -> np.ndarray:
    """int [n, n]: the number of edges between words i and j in the tree heads [n] (0 = root, else 1-based)."""
    paths = _paths(heads)
    sizes = paths.sum(1)  # depth + 1
    return sizes[:, None] + sizes[None, :] - 2 * paths @ paths.T  # the shared part of the two ways up counts twice


def tree_depths(heads) -> np.ndarray:
    """int [n]: the number of edges from each word up to the root word of heads [n]."""
    return _paths(heads).sum(1) - 1


def linear_heads(n: int) -> np.ndarray:
    """heads [n] of the left-to-right chain (Hewitt & Manning's linear baseline: every word linked to the next): each
    word hangs from the one before it and the first word is the root, so its tree distances are |i − j| and its
    depths i − 1 (words numbered from 1)."""
    if n < 1:
        raise ValueError(f"n must be at least 1, not {n}")
    return np.arange(n)


def _behaviour(word: str, seed: int) -> str:
    """The control behaviour of a word type: a seeded hash of the word, the same wherever it occurs."""
    digest = hashlib.sha256(f"{seed}\0{word}".encode()).digest()
    return BEHAVIOURS[int.from_bytes(digest[:8], "little") % len(BEHAVIOURS)]


def control_heads(words: Sequence[str], seed: int = 0) -> np.ndarray:
    """heads [n] of Hewitt & Liang's control tree for `words`: every word type draws one of BEHAVIOURS (uniformly, by
    a seeded hash of the word: the same draw in every sentence, whatever the vocabulary) and hangs from the first
    word ("first"), the last word ("last") or the next word ("next"). The first word is the root, and the last word
    hangs from it. Every other edge points right, so this is a tree."""
    words = list(words)
    if not words:
        raise ValueError("words: a control tree needs at least one word")
    n = len(words)
    heads = np.zeros(n, dtype=np.int64)
    for i, word in enumerate(words[1:], start=1):  # 0-based position; heads are 1-based
        choice = _behaviour(word, seed)
        heads[i] = 1 if i == n - 1 or choice == "first" else n if choice == "last" else i + 2
    return heads


# -- the probes -----------------------------------------------------------------------------------------
def _projected(B, H) -> torch.Tensor:
    """H [..., n, D] @ Bᵀ for B [k, D]: [..., n, k]."""
    B, H = torch.as_tensor(B), torch.as_tensor(H)
    if B.ndim != 2 or B.shape[0] < 1 or H.ndim < 2 or B.shape[1] != H.shape[-1]:
        raise ValueError(f"B must be [rank, D] (rank >= 1) for vectors H [..., n, D]; got B {tuple(B.shape)}, "
                         f"H {tuple(H.shape)}")
    return H @ B.T.to(H.dtype)


def _pairwise(P: torch.Tensor) -> torch.Tensor:
    """[..., n, n] ‖p_i − p_j‖² of projected vectors P [..., n, k]."""
    norms = (P ** 2).sum(-1)
    return (norms[..., :, None] + norms[..., None, :] - 2 * P @ P.mT).clamp(min=0)


def squared_distances(B, H) -> torch.Tensor:
    """[..., n, n] the distance probe's prediction ‖B(h_i − h_j)‖² for B [k, D] and word vectors H [..., n, D]."""
    return _pairwise(_projected(B, H))


def squared_norms(B, H) -> torch.Tensor:
    """[..., n] the depth probe's prediction ‖B h_i‖² for B [k, D] and word vectors H [..., n, D]."""
    return (_projected(B, H) ** 2).sum(-1)


def _word_mask(gold: torch.Tensor, lengths: torch.Tensor, dims: int) -> torch.Tensor:
    """bool [S, N]: the real words of padded sentences, after checking gold [S, N] or [S, N, N] against lengths."""
    lengths = torch.as_tensor(lengths)
    if gold.ndim != dims + 1 or lengths.shape != gold.shape[:1]:
        raise ValueError(f"lengths [S] must give one length per sentence of gold {tuple(gold.shape)}, got "
                         f"{tuple(lengths.shape)}")
    if lengths.min() < 1 or lengths.max() > gold.shape[-1]:
        raise ValueError(f"lengths must lie in 1..{gold.shape[-1]} (the padded width), got {lengths.tolist()}")
    return torch.arange(gold.shape[-1])[None, :] < lengths[:, None]


def distance_loss(pred: torch.Tensor, gold: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Hewitt & Manning's distance loss: the mean over sentences of (1/n²)·Σ_ij |gold − pred| over each sentence's
    n words; pred [..., S, N, N] (leading dimensions: several probes at once), gold [S, N, N] padded, lengths [S].
    Returns [...]."""
    words = _word_mask(gold, lengths, 2)
    pairs = (words[:, :, None] & words[:, None, :]).to(pred.dtype)
    n = torch.as_tensor(lengths).to(pred.dtype)
    return (((pred - gold).abs() * pairs).sum((-1, -2)) / n ** 2).mean(-1)


def depth_loss(pred: torch.Tensor, gold: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Hewitt & Manning's depth loss: the mean over sentences of (1/n)·Σ_i |gold − pred|; pred [..., S, N], gold
    [S, N] padded, lengths [S]. Returns [...]."""
    words = _word_mask(gold, lengths, 1).to(pred.dtype)
    n = torch.as_tensor(lengths).to(pred.dtype)
    return (((pred - gold).abs() * words).sum(-1) / n).mean(-1)


def _spans(probes: Sequence[Probe]) -> list[slice]:
    """The rows of B that belong to each probe, one after the other."""
    ends = np.cumsum([p.rank for p in probes])
    return [slice(int(end - p.rank), int(end)) for p, end in zip(probes, ends)]


def _check_training(vectors: np.ndarray, lengths: Sequence[int], probes: Sequence[Probe], targets: dict,
                    epochs: int, batch_size: int) -> None:
    if vectors.ndim != 3 or vectors.shape[1] == 0:
        raise ValueError(f"vectors must be [layers, words, D] with at least one word, got {vectors.shape}")
    if min(lengths, default=0) < 1 or sum(lengths) != vectors.shape[1]:
        raise ValueError(f"lengths must be positive and add up to the {vectors.shape[1]} words of vectors, got "
                         f"{len(lengths)} sentences of {sum(lengths)} words")
    if not probes:
        raise ValueError("probes: give at least one probe to train")
    for probe in probes:
        if probe.kind not in KINDS or probe.task not in TASKS or probe.rank < 1:
            raise ValueError(f"a probe needs a kind in {KINDS}, a task in {TASKS} and a rank >= 1, got {probe}")
        found = targets.get((probe.kind, probe.task))
        if found is None or len(found) != len(lengths):
            raise ValueError(f"targets must hold {(probe.kind, probe.task)}: one array per sentence "
                             f"({len(lengths)})")
    if epochs < 1 or batch_size < 1:
        raise ValueError(f"epochs and batch_size must be at least 1, got {epochs} and {batch_size}")


def _padded(arrays: Sequence[np.ndarray], width: int) -> torch.Tensor:
    """[S, width] or [S, width, width] float32: the sentences' targets, zero-padded."""
    out = np.zeros((len(arrays),) + (width,) * arrays[0].ndim, dtype=np.float32)
    for row, array in enumerate(arrays):
        out[(row, *(slice(0, len(array)),) * array.ndim)] = array
    return torch.from_numpy(out)


def _losses(P: torch.Tensor, probes: Sequence[Probe], gold: dict, lengths: torch.Tensor) -> torch.Tensor:
    """[L, G]: each probe's loss on every layer, from the projected vectors P [L, S, N, R]."""
    parts = []
    for probe, span in zip(probes, _spans(probes)):
        part, target = P[..., span], gold[(probe.kind, probe.task)]
        parts.append(distance_loss(_pairwise(part), target, lengths) if probe.kind == "distance"
                     else depth_loss((part ** 2).sum(-1), target, lengths))
    return torch.stack(parts, -1)


def train_probes(vectors: np.ndarray, lengths: Sequence[int], probes: Sequence[Probe], targets: dict,
                 epochs: int = EPOCHS, batch_size: int = BATCH_SIZE, lr: float = LEARNING_RATE, seed: int = 0,
                 progress: bool = True, desc: str = "structural probes") -> tuple[torch.Tensor, np.ndarray]:
    """Train `probes` on every layer of `vectors` at once: (B [L, R, D] for the vectors as given, probe g's rows at
    the g-th of their ranks in turn; losses [epochs, L, G], each probe's mean training loss per epoch).

    vectors: float32 [L, N, D], the words of sentences of `lengths` [S] one after another (`layer_vectors`);
    targets: (kind, task) -> one array per sentence, distances [n, n] for "distance" probes, depths [n] for "depth".
    Adam on the sum of every probe's loss from B uniform in ±INIT (each probe's rows drawn from `seed` alone), the
    learning rate falling linearly from `lr` to 0; batches of `batch_size` sentences of similar length, in a seeded
    order; one thread, deterministic. A probe trains as it would alone: Adam's state is per weight."""
    vectors = np.asarray(vectors, dtype=np.float32)
    _check_training(vectors, lengths, probes, targets, epochs, batch_size)
    X = torch.from_numpy(vectors)
    n_layers, _, dim = X.shape
    scale = torch.stack([layer.pow(2).mean().sqrt() for layer in X]).clamp(min=1e-12)[:, None, None, None]
    lengths = np.asarray(lengths)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    order = sorted(range(len(lengths)), key=lambda s: (lengths[s], s))
    prepared = []
    for first in range(0, len(order), batch_size):
        chunk = np.array(order[first:first + batch_size])
        width = int(lengths[chunk].max())
        index = np.minimum(offsets[chunk, None] + np.arange(width), offsets[chunk + 1, None] - 1)  # padding: masked
        gold = {(p.kind, p.task): _padded([np.asarray(targets[p.kind, p.task][s]) for s in chunk], width)
                for p in probes}
        prepared.append((torch.from_numpy(index), torch.from_numpy(lengths[chunk]), gold))
    steps = epochs * len(prepared)
    losses = np.zeros((epochs, n_layers, len(probes)))
    with deterministic():
        # each probe's own draw from `seed`: no probe's start depends on the others
        B = torch.cat([torch.empty(n_layers, p.rank, dim).uniform_(-INIT, INIT, generator=torch.Generator().manual_seed(
            seed)) for p in probes], dim=1).requires_grad_()
        shuffling = torch.Generator().manual_seed(seed)
        optimizer = torch.optim.Adam([B], lr=lr)
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1 - step / steps)
        for epoch in tqdm(range(epochs), desc=desc, unit="epoch", disable=not progress, leave=False):
            for b in torch.randperm(len(prepared), generator=shuffling).tolist():
                index, n, gold = prepared[b]
                P = (X[:, index] / scale) @ B[:, None].mT  # [L, S, N, R]
                loss = _losses(P, probes, gold, n)
                optimizer.zero_grad()
                loss.sum().backward()
                optimizer.step()
                schedule.step()
                losses[epoch] += loss.detach().numpy() / len(prepared)
    return B.detach() / scale[:, 0], losses


def predict(B: torch.Tensor, vectors: np.ndarray, lengths: Sequence[int], probes: Sequence[Probe]
            ) -> Iterator[dict[Probe, np.ndarray]]:
    """Per sentence, each probe's prediction on every layer: squared distances [L, n, n] for a "distance" probe,
    squared norms [L, n] for a "depth" probe (float64); B [L, R, D] and probes as `train_probes` gave and took them,
    vectors [L, N, D], lengths [S]."""
    X = torch.from_numpy(np.asarray(vectors, dtype=np.float32))
    spans = _spans(probes)
    start = 0
    with torch.no_grad():
        for n in lengths:
            P = (X[:, start:start + n] @ B.mT).double()  # [L, n, R]
            start += n
            yield {probe: (_pairwise(P[..., span]) if probe.kind == "distance" else (P[..., span] ** 2).sum(-1)).numpy()
                   for probe, span in zip(probes, spans)}


# -- scores ---------------------------------------------------------------------------------------------
def min_spanning_tree(dist) -> np.ndarray:
    """int [..., n]: each node's neighbour on its way to node 0 in the minimum spanning tree of dist [..., n, n]
    (symmetric, finite; Prim's algorithm on every leading index at once), -1 for node 0: the tree's edges are
    (i, parents[i]) for i >= 1."""
    dist = np.asarray(dist, dtype=np.float64)
    if dist.ndim < 2 or dist.shape[-1] != dist.shape[-2] or dist.shape[-1] < 1:
        raise ValueError(f"dist must be [..., n, n] with n >= 1, got {dist.shape}")
    if not np.isfinite(dist).all() or not np.allclose(dist, np.swapaxes(dist, -1, -2)):
        raise ValueError("dist must be finite and symmetric")
    n = dist.shape[-1]
    flat = dist.reshape(-1, n, n)
    rows = np.arange(len(flat))
    done = np.zeros((len(flat), n), dtype=bool)
    done[:, 0] = True
    best = flat[:, 0].copy()  # each node's distance to the tree so far
    parents = np.zeros((len(flat), n), dtype=np.int64)
    for _ in range(n - 1):
        node = np.where(done, np.inf, best).argmin(1)
        done[rows, node] = True
        reach = flat[rows, node]
        closer = ~done & (reach < best)
        parents = np.where(closer, node[:, None], parents)
        best = np.where(closer, reach, best)
    parents[:, 0] = -1
    return parents.reshape(dist.shape[:-1])


def _gold_edges(heads, punct) -> tuple[np.ndarray, np.ndarray]:
    """(words [n']: the words of heads [n] that are not punctuation (punct [n] bool), 0-based; gold [n', n'] bool:
    the tree's edges between them)."""
    heads, keep = _tree(heads), ~np.asarray(punct, dtype=bool)
    if keep.shape != heads.shape:
        raise ValueError(f"punct holds {keep.size} flags for {len(heads)} words")
    gold = np.zeros((len(heads), len(heads)), dtype=bool)
    child = np.flatnonzero(heads)
    gold[child, heads[child] - 1] = True
    words = np.flatnonzero(keep)
    return words, (gold | gold.T)[np.ix_(words, words)]


def _hits(pred: np.ndarray, words: np.ndarray, gold: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(hits [...]: the edges of gold [..., n', n'] (bool, broadcast) found, parents [..., n']: positions in `words`)
    of the minimum spanning trees of pred [..., n, n] over `words`."""
    shape = pred.shape[:-2]
    if len(words) < 2:
        return np.zeros(shape, dtype=np.int64), np.full(shape + (len(words),), -1)
    parents = min_spanning_tree(pred[..., words[:, None], words[None, :]])
    rows = np.broadcast_to(gold[..., 1:, :], shape + (len(words) - 1, len(words)))
    return np.take_along_axis(rows, parents[..., 1:, None], -1)[..., 0].sum(-1), parents


def edge_hits(pred_dist, heads, punct) -> tuple[np.ndarray, int]:
    """(hits [...], total): how many of the silver tree's edges between non-punctuation words (`total`) the minimum
    spanning tree of the predicted distances pred_dist [..., n, n] over those words finds; heads [n] (0 = root),
    punct [n] bool."""
    words, gold = _gold_edges(heads, punct)
    pred, n = np.asarray(pred_dist, dtype=np.float64), len(heads)
    if pred.ndim < 2 or pred.shape[-2:] != (n, n):
        raise ValueError(f"pred_dist is {pred.shape} for {n} words; give [..., {n}, {n}]")
    return _hits(pred, words, gold)[0], int(gold.sum() // 2)


def _same_sentences(**lists: Sequence) -> None:
    if len({len(v) for v in lists.values()}) != 1:
        names = ", ".join(f"{k} ({len(v)})" for k, v in lists.items())
        raise ValueError(f"{names} must list the same sentences")


def uuas(pred_dists: Sequence, heads: Sequence, puncts: Sequence) -> float:
    """Undirected unlabelled attachment score: the share of the silver edges between non-punctuation words that the
    minimum spanning trees of the predicted distances find, over all sentences; per sentence pred_dist [n, n], heads
    [n] (0 = root), punct [n]."""
    _same_sentences(pred_dists=pred_dists, heads=heads, puncts=puncts)
    hits = total = 0
    for i, (pred, tree, punct) in enumerate(zip(pred_dists, heads, puncts)):
        try:
            found, edges = edge_hits(pred, tree, punct)
        except ValueError as error:
            raise ValueError(f"sentence {i}: {error}") from None
        hits, total = hits + int(found), total + edges
    if total == 0:
        raise ValueError("no silver edge between two non-punctuation words to score")
    return hits / total


def heads_uuas(predicted: Sequence, heads: Sequence, puncts: Sequence) -> float:
    """UUAS of trees given by their heads (predicted [n] per sentence, e.g. notebook 06's attention probes decoded
    as maximum spanning trees): the share of the silver edges between non-punctuation words (heads [n], punct [n])
    that are edges of the predicted tree, over all sentences. Unlike `uuas`, whose spanning tree joins the
    non-punctuation words only, a predicted tree may run through a punctuation word; such edges count for nothing."""
    _same_sentences(predicted=predicted, heads=heads, puncts=puncts)
    hits = total = 0
    for i, (pred, tree, punct) in enumerate(zip(predicted, heads, puncts)):
        if len(pred) != len(tree):
            raise ValueError(f"sentence {i}: {len(pred)} predicted heads for {len(tree)} words")
        try:
            found, gold = _gold_edges(pred, punct)[1], _gold_edges(tree, punct)[1]
        except ValueError as error:
            raise ValueError(f"sentence {i}: {error}") from None
        hits, total = hits + int((found & gold).sum() // 2), total + int(gold.sum() // 2)
    if total == 0:
        raise ValueError("no silver edge between two non-punctuation words to score")
    return hits / total


def probe_trees(predictions: pd.DataFrame, column: str) -> list[np.ndarray]:
    """One int array [n] per sentence, in order: the predicted heads in `column` of a word table with a `sentence`
    column (`probes.ProbeResults.predictions`, e.g. column "attention only (MST)"), for `heads_uuas`."""
    if column not in predictions:
        raise ValueError(f"column: no {column!r} in the predictions; they hold {', '.join(map(str, predictions))}")
    return [group[column].to_numpy(dtype=int) for _, group in predictions.groupby("sentence", sort=True)]


# -- attention read as trees -----------------------------------------------------------------------------
def attention_distances(word_attn) -> np.ndarray:
    """float64 [..., n, n]: word-level maps word_attn [..., m, m] ([CLS] the first word, the final [SEP] the last) as
    distances between the n = m - 2 real words, -(A + Aᵀ): the words that attend to each other most are closest.
    A minimum spanning tree depends only on the order of the distances, so any decreasing function of A + Aᵀ gives
    the same tree."""
    attn = np.asarray(word_attn, dtype=np.float64)[..., 1:-1, 1:-1]
    return -(attn + np.swapaxes(attn, -1, -2))


def _head_hits(encoder: Encoder, sentences: Sequence[Sentence], batch_size: int, progress: bool, chunk: int = 256
               ) -> tuple[np.ndarray, np.ndarray]:
    """(hits [S, L, H]: the silver edges between non-punctuation words that each head's attention tree finds,
    totals [S]: those edges), sentence by sentence; attention is kept for `chunk` sentences at a time."""
    from .syntax import parsed_attention

    hits, totals = [], []
    for start in tqdm(range(0, len(sentences), chunk), desc=f"attention trees of {encoder.name}", unit="chunk",
                      disable=not progress):
        part = sentences[start:start + chunk]
        for sentence, example in zip(part, parsed_attention(encoder, part, batch_size, progress=False)):
            found, total = edge_hits(attention_distances(example.word_attn), sentence.heads, sentence.is_punct)
            hits.append(found)
            totals.append(total)
    return np.array(hits), np.array(totals)


def attention_trees(encoder: Encoder, selection: Sequence[Sentence], heldout: Sequence[Sentence],
                    batch_size: int = 32, seed: int = 0, cache_dir: Path | str | None = DEFAULT_CACHE_DIR,
                    progress: bool = True) -> pd.DataFrame:
    """Every head's attention read as a tree and scored as the structural probe is: the minimum spanning tree of
    `attention_distances` over each sentence's non-punctuation words, against the silver edges between them. One row
    per head: layer, head (both 1-based), selection and heldout (UUAS %, on each half), heldout_low, heldout_high
    (bootstrap interval over held-out sentences, `seed`). Cached (cache_dir) by model, sentences and code version."""
    if not selection or not heldout:
        raise ValueError("selection and heldout: both halves need sentences")
    path = None
    cache_dir = usable_cache(encoder.model, cache_dir)
    if cache_dir is not None:
        path = entry_path(cache_dir, "attention_trees", encoder.fingerprint, sentences_key(selection),
                          sentences_key(heldout), json.dumps([seed]), version=code_version(__name__))
        arrays = load_result(path)
        if arrays is not None:
            return frame_from(arrays, "heads")
    (sel_hits, sel_totals), (held_hits, held_totals) = (_head_hits(encoder, half, batch_size, progress)
                                                        for half in (selection, heldout))
    n_layers, n_heads = sel_hits.shape[1:]
    scored = held_totals > 0
    value, low, high = ratio_interval(held_hits[scored].reshape(int(scored.sum()), -1), held_totals[scored],
                                      N_BOOT, seed)
    layer, head = np.meshgrid(np.arange(1, n_layers + 1), np.arange(1, n_heads + 1), indexing="ij")
    table = pd.DataFrame({"layer": layer.ravel(), "head": head.ravel(),
                          "selection": 100 * sel_hits.sum(0).ravel() / sel_totals.sum(),
                          "heldout": 100 * value, "heldout_low": 100 * low, "heldout_high": 100 * high})
    if path is not None:
        save_result(path, frame_arrays(table, "heads"))
    return table


def _spearman(pred: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """[...]: Spearman's ρ of pred and gold [..., m] along the last axis (ties share their mean rank); 0 where either
    is constant (no order to agree on)."""
    a, b = stats.rankdata(pred, axis=-1), stats.rankdata(np.broadcast_to(gold, np.shape(pred)), axis=-1)
    a, b = a - a.mean(-1, keepdims=True), b - b.mean(-1, keepdims=True)
    num, den = (a * b).sum(-1), np.sqrt((a * a).sum(-1) * (b * b).sum(-1))
    return np.divide(num, den, out=np.zeros_like(num), where=den > 0)


def _by_length(sums: np.ndarray, counts: np.ndarray, lengths: np.ndarray, n_boot: int = 0, seed: int = 0,
               level: float = 0.95) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Hewitt & Manning's Spearman average: Σ sums / Σ counts over the sentences of each length in
    SPEARMAN_LENGTHS, then the mean over those lengths; sums [S, C] (C quantities), counts [S], lengths [S]. With
    a percentile interval over sentences (resampled n_boot times; nan without): (value [C], low [C], high [C])."""
    low_length, high_length = SPEARMAN_LENGTHS
    inside = (lengths >= low_length) & (lengths <= high_length)
    if not inside.any():
        raise ValueError(f"Spearman correlations are averaged over sentences of {low_length} to {high_length} words; "
                         "none is given")
    sums, counts, lengths = sums[inside], counts[inside].astype(float), lengths[inside]
    weights = np.ones((1, len(lengths)))
    if n_boot:
        draws = np.random.default_rng(seed).multinomial(len(lengths), np.full(len(lengths), 1 / len(lengths)), n_boot)
        weights = np.concatenate([weights, draws])
    total, present = np.zeros((len(weights), sums.shape[1])), np.zeros((len(weights), 1))
    for length in np.unique(lengths):
        rows = lengths == length
        den = weights[:, rows] @ counts[rows]
        seen = den > 0
        total[seen] += (weights[:, rows] @ sums[rows])[seen] / den[seen, None]
        present[seen] += 1
    means = total / present
    if not n_boot:
        return means[0], np.full(means.shape[1], np.nan), np.full(means.shape[1], np.nan)
    tail = (1 - level) / 2
    return means[0], np.quantile(means[1:], tail, axis=0), np.quantile(means[1:], 1 - tail, axis=0)


def dspr(pred_dists: Sequence, gold_dists: Sequence) -> float:
    """DSpr: Spearman's ρ between each word's predicted and true distances (a row of pred_dist and gold_dist [n, n],
    punctuation included), averaged over the words of the sentences of each length 5-50, then over the lengths."""
    _same_sentences(pred_dists=pred_dists, gold_dists=gold_dists)
    rows = [_spearman(np.asarray(p, dtype=float), np.asarray(g, dtype=float)).sum()
            for p, g in zip(pred_dists, gold_dists)]
    lengths = np.array([len(g) for g in gold_dists])
    return float(_by_length(np.array(rows)[:, None], lengths, lengths)[0][0])


def nspr(pred_depths: Sequence, gold_depths: Sequence) -> float:
    """NSpr: Spearman's ρ between a sentence's predicted and true depths [n] (punctuation included), averaged over
    the sentences of each length 5-50, then over the lengths."""
    _same_sentences(pred_depths=pred_depths, gold_depths=gold_depths)
    rho = [_spearman(np.asarray(p, dtype=float), np.asarray(g, dtype=float)) for p, g in zip(pred_depths, gold_depths)]
    lengths = np.array([len(g) for g in gold_depths])
    return float(_by_length(np.array(rho)[:, None], np.ones(len(lengths)), lengths)[0][0])


def _root_hits(pred_depth, heads, punct) -> np.ndarray:
    """bool [...]: whether the least deep non-punctuation word by pred_depth [..., n] is the root of heads [n]."""
    words = np.flatnonzero(~np.asarray(punct, dtype=bool))
    pred = np.asarray(pred_depth)
    if not len(words):
        return np.zeros(pred.shape[:-1], dtype=bool)
    return words[pred[..., words].argmin(-1)] == list(heads).index(0)


def root_accuracy(pred_depths: Sequence, heads: Sequence, puncts: Sequence) -> float:
    """The share of sentences whose least deep word by the predicted depths [n], punctuation left out, is the root
    of heads [n] (0 = root)."""
    _same_sentences(pred_depths=pred_depths, heads=heads, puncts=puncts)
    return float(np.mean([_root_hits(p, h, k) for p, h, k in zip(pred_depths, heads, puncts)]))


# -- word vectors ---------------------------------------------------------------------------------------
def layer_vectors(encoder: Encoder, sentences: Sequence[Sentence], batch_size: int = 32, progress: bool = True
                  ) -> np.ndarray:
    """float32 [L + 1, N, D]: every sentence's word vectors, sentence after sentence (N = all their words); layer 0
    the embeddings, layer l the output of layer l, each word the mean over its wordpieces. Each sentence is encoded
    from its parser words (pre-split), batched with sentences of similar length."""
    order = _length_order(encoder, sentences)
    ordered = [sentences[i] for i in order]
    starts = np.concatenate([[0], np.cumsum([len(s) for s in sentences])])
    out = np.empty((encoder.n_layers + 1, starts[-1], encoder.model.config.hidden_size), dtype=np.float32)
    with (tqdm(total=len(sentences), desc=f"word vectors of {encoder.name}", unit="sentence", disable=not progress)
          as bar, _naming_the_sentence(encoder, ordered), torch.inference_mode()):
        for batch in batches(encoder, [list(s.words) for s in ordered], batch_size, attention=False):
            out_states = encoder.model(**batch.model_inputs, output_hidden_states=True).hidden_states
            states = torch.stack(out_states, 1).float().numpy()  # [B, L + 1, T, D]
            for i, x in enumerate(batch.inputs):
                k = order[batch.start + i]
                if list(x.words[1:-1]) != list(sentences[k].words):
                    raise ValueError(f"sentence {sentences[k].id!r}: the encoded words differ from the parser's")
                onehot = word_matrix(x.word_ids)  # [T, words], [CLS] the first word and [SEP] the last
                means = (onehot / onehot.sum(0)).T[1:-1].astype(np.float32)  # [n, T]
                out[:, starts[k]:starts[k + 1]] = means @ states[i, :, :len(x.tokens)]
            bar.update(len(batch.inputs))
    return out


# -- the run --------------------------------------------------------------------------------------------
@dataclass
class StructuralResults:
    """What `run` measured on the held-out sentences: UUAS and root accuracy in %, DSpr and NSpr as Spearman's ρ,
    each with `<metric>_low`, `<metric>_high`, a 95 % percentile bootstrap interval over sentences.

    scores: one row per model (MODELS), layer (0 = the embeddings; the random-init model from 1), task (TASKS: the
    trees the probe learned and is scored on) and rank: uuas and dspr (the distance probe), root_acc and nspr (the
    depth probe: silver task at rank `rank` only, NaN elsewhere).
    selectivity: per layer and rank of the pretrained model: uuas (silver), control (UUAS on the control task),
    selectivity = uuas − control (points), low and high (paired bootstrap over the sentences where both trees
    have an edge between non-punctuation words).
    linear: one row: the left-to-right chain's (`linear_heads`) scores against the silver trees.
    edges: the predicted trees of the pretrained model's silver distance probe at rank `rank`: layer, sentence
    (index in the held-out list), a < b (1-based words joined by an edge of the minimum spanning tree).
    curves: model, layer, kind, task, rank, epoch, loss: each probe's mean training loss per epoch."""

    scores: pd.DataFrame
    selectivity: pd.DataFrame
    linear: pd.DataFrame
    edges: pd.DataFrame
    curves: pd.DataFrame
    rank: int
    n_train: int
    n_test: int


def _probes(model: str, ranks: Sequence[int], rank: int) -> list[Probe]:
    """The probes `run` trains on a model: the pretrained one gets the rank sweep on both tasks."""
    if model == "random-init":
        return [Probe("distance", "silver", rank), Probe("depth", "silver", rank)]
    return [Probe("distance", task, r) for task in TASKS for r in sorted({*ranks, rank})] + [
        Probe("depth", "silver", rank)]


def _targets(sentences: Sequence[Sentence], seed: int) -> dict[tuple[str, str], list[np.ndarray]]:
    """What the probes learn (`train_probes`' targets): the silver trees' distances and depths, the control trees'
    distances."""
    silver, control = zip(*(_task_heads(s, seed) for s in sentences))
    return {("distance", "silver"): [tree_distances(h) for h in silver],
            ("depth", "silver"): [tree_depths(h) for h in silver],
            ("distance", "control"): [tree_distances(h) for h in control]}


def _scored(predictions: Iterator[dict[Probe, np.ndarray]], probes: Sequence[Probe], heldout: Sequence[Sentence],
            seed: int, rank: int) -> tuple[dict[Probe, dict[str, np.ndarray]], list[tuple[np.ndarray, np.ndarray]]]:
    """Per probe, per held-out sentence and layer ([S, L] each): "hits" (UUAS) and "rho" (summed over the words) of a
    distance probe, "root" and "rho" of a depth probe; and per sentence the spanning trees (words [n'], parents
    [L, n']) of the silver distance probe of rank `rank`. A sentence's probes of one kind are scored in one call."""
    distance, depth = ([p for p in probes if p.kind == kind] for kind in KINDS)
    main = next(i for i, p in enumerate(distance) if p.task == "silver" and p.rank == rank)
    out: dict[Probe, dict[str, list]] = {p: {} for p in probes}
    trees = []
    for sentence, predicted in zip(heldout, predictions):
        silver, control = _task_heads(sentence, seed)
        words, silver_edges = _gold_edges(silver, sentence.is_punct)
        gold = {"silver": (silver_edges, tree_distances(silver)),
                "control": (_gold_edges(control, sentence.is_punct)[1], tree_distances(control))}
        pred = np.stack([predicted[p] for p in distance])  # [G, L, n, n]
        hits, parents = _hits(pred, words, np.stack([gold[p.task][0] for p in distance])[:, None])
        rho = _spearman(pred, np.stack([gold[p.task][1] for p in distance])[:, None]).sum(-1)
        trees.append((words, parents[main]))
        values = {p: {"hits": hits[g], "rho": rho[g]} for g, p in enumerate(distance)}
        if depth:
            pred = np.stack([predicted[p] for p in depth])  # [G, L, n]: all on the silver trees
            root, rho = _root_hits(pred, silver, sentence.is_punct), _spearman(pred, tree_depths(silver))
            values |= {p: {"root": root[g], "rho": rho[g]} for g, p in enumerate(depth)}
        for probe, found in values.items():
            for key, value in found.items():
                out[probe].setdefault(key, []).append(value)
    return {p: {k: np.array(v, dtype=float) for k, v in found.items()} for p, found in out.items()}, trees


def _task_heads(sentence: Sentence, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The sentence's trees in the order of TASKS: its silver heads and its control heads."""
    return np.asarray(sentence.heads), control_heads(sentence.words, seed)


def _edge_totals(heldout: Sequence[Sentence], seed: int) -> dict[str, np.ndarray]:
    """Per task, [S]: the tree's edges between non-punctuation words of each held-out sentence."""
    totals = np.array([[_gold_edges(h, s.is_punct)[1].sum() // 2 for h in _task_heads(s, seed)] for s in heldout])
    return dict(zip(TASKS, totals.T))


def _metric_rows(values: dict[str, np.ndarray], totals: np.ndarray, lengths: np.ndarray, seed: int
                 ) -> dict[str, np.ndarray]:
    """Metric name (+ _low, _high) -> [C] from per-sentence values [S, C] of one task: hits and rho of a distance
    probe, or root and rho of a depth probe."""
    out = {}
    if "hits" in values:
        scored = totals > 0
        out["uuas"] = ratio_interval(values["hits"][scored], totals[scored], N_BOOT, seed)
        out["dspr"] = _by_length(values["rho"], lengths, lengths, N_BOOT, seed)
    else:
        out["root_acc"] = ratio_interval(values["root"], np.ones(len(lengths)), N_BOOT, seed)
        out["nspr"] = _by_length(values["rho"], np.ones(len(lengths)), lengths, N_BOOT, seed)
    rows = {}
    for name, (value, low, high) in out.items():
        factor = 100 if name in ("uuas", "root_acc") else 1
        rows |= {name: factor * value, f"{name}_low": factor * low, f"{name}_high": factor * high}
    return rows


def _columns() -> list[str]:
    return [f"{m}{suffix}" for m in METRICS for suffix in ("", "_low", "_high")]


def _measure(encoder: Encoder, selection: Sequence[Sentence], heldout: Sequence[Sentence], ranks: Sequence[int],
             rank: int, epochs: int, batch_size: int, lr: float, seed: int, cache_dir, progress: bool
             ) -> dict[str, np.ndarray]:
    """Train and score every probe; the results as arrays (`StructuralResults` frames, `frame_arrays`)."""
    train_targets = _targets(selection, seed)
    train_lengths, lengths = [len(s) for s in selection], np.array([len(s) for s in heldout])
    totals = _edge_totals(heldout, seed)
    rows, curves, edges, per_sentence = [], [], [], {}
    for model in MODELS:
        source = (encoder if model == "pretrained"
                  else random_init_encoder(encoder, seed, cache_dir or DEFAULT_CACHE_DIR))
        first = 0 if model == "pretrained" else 1  # the random-init model's embeddings are the pretrained ones
        probes = _probes(model, ranks, rank)
        vectors = layer_vectors(source, selection, progress=progress)[first:]
        B, losses = train_probes(vectors, train_lengths, probes, train_targets, epochs, batch_size, lr, seed, progress,
                                 desc=f"structural probes on {source.name}")
        del vectors
        vectors = layer_vectors(source, heldout, progress=progress)[first:]
        layers = np.arange(first, first + len(vectors))
        values, trees = _scored(predict(B, vectors, lengths, probes), probes, heldout, seed, rank)
        del vectors
        for g, probe in enumerate(probes):
            metrics = _metric_rows(values[probe], totals[probe.task], lengths, seed)
            for i, layer in enumerate(layers):
                rows.append({"model": model, "layer": layer, "task": probe.task, "rank": probe.rank,
                             **{k: v[i] for k, v in metrics.items()}})
                curves += [(model, layer, probe.kind, probe.task, probe.rank, e + 1, losses[e, i, g])
                           for e in range(epochs)]
            per_sentence[model, probe] = values[probe]
        if model == "pretrained":
            edges = [(layer, s, *sorted((words[j] + 1, words[parents[i, j]] + 1)))
                     for s, (words, parents) in enumerate(trees) for i, layer in enumerate(layers)
                     for j in range(1, len(words))]
    # one row per model, task, rank and layer, in the order the probes came (`_probes`), holding the distance probe's
    # columns and, where there is one, the depth probe's
    scores = pd.DataFrame(rows).groupby(["model", "layer", "task", "rank"], sort=False).first().reset_index()
    scores = scores.reindex(columns=["model", "layer", "task", "rank", *_columns()])
    return {**frame_arrays(scores, "scores"),
            **frame_arrays(_selectivity(scores, per_sentence, totals, seed), "selectivity"),
            **frame_arrays(_linear(heldout, totals["silver"], lengths, seed), "linear"),
            **frame_arrays(pd.DataFrame(edges, columns=["layer", "sentence", "a", "b"]), "edges"),
            **frame_arrays(pd.DataFrame(curves, columns=["model", "layer", "kind", "task", "rank", "epoch", "loss"]),
                           "curves"),
            "n_train": np.array(len(selection))}


def _selectivity(scores: pd.DataFrame, per_sentence: dict, totals: dict[str, np.ndarray], seed: int) -> pd.DataFrame:
    """Per layer and rank of the pretrained model: silver UUAS, control UUAS, their difference and its interval."""
    uuas = scores[scores["model"] == "pretrained"].pivot_table(index=["rank", "layer"], columns="task", values="uuas")
    both = (totals["silver"] > 0) & (totals["control"] > 0)
    rows = []
    for (r, layer), row in uuas.iterrows():  # the pretrained model's per-sentence arrays hold layer l at column l
        hits = [per_sentence["pretrained", Probe("distance", t, r)]["hits"][both, layer] for t in TASKS]
        _, low, high = ratio_difference_interval(*[(h, totals[t][both]) for h, t in zip(hits, TASKS)], N_BOOT, seed)
        rows.append((layer, r, row["silver"], row["control"], row["silver"] - row["control"], 100 * low, 100 * high))
    return pd.DataFrame(rows, columns=["layer", "rank", "uuas", "control", "selectivity", "low", "high"])


def _linear(heldout: Sequence[Sentence], totals: np.ndarray, lengths: np.ndarray, seed: int) -> pd.DataFrame:
    """The left-to-right chain's scores against the silver trees (one row, the columns of `StructuralResults.scores`'
    metrics)."""
    chains = [linear_heads(len(s)) for s in heldout]
    distance = {"hits": np.array([[edge_hits(tree_distances(c), s.heads, s.is_punct)[0]]
                                  for c, s in zip(chains, heldout)]),
                "rho": np.array([[_spearman(tree_distances(c), tree_distances(s.heads)).sum()]
                                 for c, s in zip(chains, heldout)])}
    depth = {"root": np.array([[_root_hits(tree_depths(c), s.heads, s.is_punct)] for c, s in zip(chains, heldout)]),
             "rho": np.array([[_spearman(tree_depths(c), tree_depths(s.heads))] for c, s in zip(chains, heldout)])}
    row = _metric_rows(distance, totals, lengths, seed) | _metric_rows(depth, totals, lengths, seed)
    return pd.DataFrame({k: [float(v[0])] for k, v in row.items()})[_columns()]


def run(encoder: Encoder, selection: Sequence[Sentence], heldout: Sequence[Sentence], ranks: Sequence[int] = RANKS,
        rank: int = RANK, epochs: int = EPOCHS, batch_size: int = BATCH_SIZE, lr: float = LEARNING_RATE,
        seed: int = 0, cache_dir: Path | str | None = DEFAULT_CACHE_DIR, progress: bool = True) -> StructuralResults:
    """Train the structural probes on `selection` and score them on `heldout` (`parses.Sentence`s; notebook 06's
    halves: `parses.split_halves`): the pretrained model's distance probe at every rank of `ranks` (and `rank`) on
    the silver and the control trees and its depth probe at `rank`; the random-init model's distance and depth probe
    at `rank`; the linear baseline. `seed` draws the probes' start, the batches' order, the control behaviours, the
    random-init model and the bootstrap. Cached (cache_dir) by model, sentences, settings and code version;
    cache_dir=None recomputes."""
    if not selection:
        raise ValueError("selection: no sentences to train the probes on")
    if not heldout:
        raise ValueError("heldout: no sentences to score the probes on")
    ranks = sorted({int(r) for r in ranks})
    if not ranks or ranks[0] < 1 or rank < 1:
        raise ValueError(f"ranks and rank must be at least 1, got ranks {ranks} and rank {rank}")
    if epochs < 1 or batch_size < 1:
        raise ValueError(f"epochs and batch_size must be at least 1, got {epochs} and {batch_size}")
    settings = json.dumps([ranks, rank, epochs, batch_size, lr, seed])
    path = None
    cache_dir = usable_cache(encoder.model, cache_dir)
    if cache_dir is not None:
        path = entry_path(cache_dir, "structural", encoder.fingerprint, sentences_key(selection),
                          sentences_key(heldout), settings, version=code_version(__name__))
        arrays = load_result(path)
        if arrays is not None:
            return _results(arrays, rank, len(heldout))
    arrays = _measure(encoder, selection, heldout, ranks, rank, epochs, batch_size, lr, seed, cache_dir, progress)
    if path is not None:
        save_result(path, arrays)
    return _results(arrays, rank, len(heldout))


def _results(arrays: dict[str, np.ndarray], rank: int, n_test: int) -> StructuralResults:
    frames = {name: frame_from(arrays, name) for name in ("scores", "selectivity", "linear", "edges", "curves")}
    return StructuralResults(**frames, rank=rank, n_train=int(arrays["n_train"]), n_test=n_test)
