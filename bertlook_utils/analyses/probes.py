"""Attention probes (Clark et al. 2019, §5, Table 3): recover each word's dependency head from attention.

For a dependent word d and a candidate head c (a word of the sentence, or ROOT), every probe gives a score,
and p(c | d) is the softmax of the scores over the candidates (d itself excluded):

- attention only: score(d, c) = sum over heads k of w_k·α_k(d→c) + u_k·α_k(c→d) — one learned weight per
  head and direction (the map and its transpose). ROOT has no word of its own, so its score uses the
  attention from d to [CLS] and to [SEP], with its own weights r_k, s_k and a bias.
- attention + word vectors: the weights depend on the words, w_k(d, c) = W_k·[v_d; v_c] + w_k (Clark et al.'s
  "attention-and-words" probe with a bias; v = static word vectors held fixed, spaCy md's 300-d vectors as
  the GloVe stand-in, or the model's own input embeddings); for ROOT, r_k(d) = R_k·v_d + r_k.
- distances + vectors (baseline): a one-hidden-layer network over v_d, v_c and 8 distance features (whether
  c is 1, 2 or 3 words to the left or to the right of d, and log(1 + distance) to the left and to the right).
- right-branching (baseline): every word's head is the next word; the last word's is ROOT.
- random-init attention (baseline): the same probes on a model of the same architecture whose weights are
  random except the (pretrained) word, position and segment embeddings, as Clark et al.

Each attention feature is divided by its root-mean-square over the training pairs (`feature_scale`), so that
one weight means as much for every map. Trained on one half of the silver parses (Adam, learning rate 0.002
as the paper, mini-batches of sentences, a fixed number of epochs), evaluated on the other by
unlabelled attachment score (UAS) over non-punctuation words, as Clark et al., both from each word's
highest-scoring head (argmax, may not form a tree) and from the maximum spanning tree (`trees.mst_heads`).

    results = run_probes(encoder, selection, heldout)   # cached; results.table is Table 3

Clark et al.'s own distances + words baseline, as their released code builds it, is `ClarkDistanceWordsMLP`;
`probe_baselines` trains it in several settings and scores predictions on the arcs two parsers agree on. The
random-init model is `models.random_init_encoder`.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn
from tqdm.auto import tqdm

from ..data import parses
from . import syntax
from ..core.cache import DEFAULT_CACHE_DIR, entry_path, load_result, save_result
from ..core.source import code_version
from ..core.conventions import check_attention, head_label
from ..core.intervene import usable_cache
from ..core.models import Encoder, random_init_encoder
from ..core.trees import mst_heads
# re-exported: notebook 06 and its student copies, already handed out, call them as probes.<name>
from .probe_baselines import distance_baselines, offset_shares, subset_uas  # noqa: F401

LEARNING_RATE = 0.002  # Clark et al.
VECTOR_SOURCES = ("spacy-md", "embeddings")
N_DISTANCE_FEATURES = 8
PROBE_KINDS = ("attention", "attention+vectors", "distances+vectors", "clark-distances+vectors")
LOSSES = ("mean", "sum")  # per batch: mean over scored words (the kit), or sum over every word (Clark's code)


class Model(StrEnum):
    """The rows of Table 3 (`ProbeResults.table`), in order: those of `MODELS`, then the attention-only probe once
    more, trained as Clark et al.'s code trains every probe: 1 epoch, one sentence per Adam step, the cross-entropy
    summed over every word (no curve). Look a model up by its member; its value is the label the tables show."""

    RIGHT_BRANCHING = "right-branching"
    DISTANCES = "distances + vectors"
    RANDOM_ATTENTION_VECTORS = "random-init attention + vectors"
    RANDOM_ATTENTION = "random-init attention only"
    ATTENTION = "attention only"
    ATTENTION_VECTORS = "attention + vectors"
    ONE_EPOCH = "attention only, 1 epoch, batch 1"


# a probe on the random-init model -> the same probe on the trained one
RANDOM_INIT = {Model.RANDOM_ATTENTION: Model.ATTENTION, Model.RANDOM_ATTENTION_VECTORS: Model.ATTENTION_VECTORS}
ONE_EPOCH = Model.ONE_EPOCH  # the name that student copies handed out before the ids use (tests/handed_out.txt)


# The rows of Table 3 but Model.ONE_EPOCH: (model, probe kind, attention of the "pretrained" or "random" model or None)
MODELS = (
    (Model.RIGHT_BRANCHING, None, None),
    (Model.DISTANCES, "distances+vectors", None),
    (Model.RANDOM_ATTENTION_VECTORS, "attention+vectors", "random"),
    (Model.RANDOM_ATTENTION, "attention", "random"),
    (Model.ATTENTION, "attention", "pretrained"),
    (Model.ATTENTION_VECTORS, "attention+vectors", "pretrained"),
)


# -- static word vectors ------------------------------------------------------------------------------
@lru_cache(maxsize=1)
def _spacy_table():
    from spacy.vectors import Vectors

    return Vectors().from_disk(parses.md_folder() / "vocab")  # no folder: vectors='embeddings' (the model's own)


def _unit_rows(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.where(norms > 0, norms, 1)).astype(np.float32)


def word_vectors(words: Sequence[str], source: str = "spacy-md", encoder: Encoder | None = None) -> np.ndarray:
    """float32 [n, D] static vectors of `words`, scaled to unit length (a word without a vector: zeros).

    "spacy-md": en_core_web_md's 300-d vectors (the word, else its lower case); "embeddings": the mean of the
    encoder's input embeddings of the word's wordpieces (D = the model's hidden size)."""
    if source == "spacy-md":
        from spacy.strings import hash_string

        table = _spacy_table()
        rows = np.zeros((len(words), table.shape[1]), dtype=np.float32)
        for i, word in enumerate(words):
            for form in (word, word.lower()):
                key = hash_string(form)
                if key in table.key2row:
                    rows[i] = table.data[table.key2row[key]]
                    break
        return _unit_rows(rows)
    if source == "embeddings":
        if encoder is None:
            raise ValueError("vectors='embeddings' needs the encoder whose input embeddings to use")
        table = encoder.model.get_input_embeddings().weight.detach().float().cpu().numpy()
        rows = np.zeros((len(words), table.shape[1]), dtype=np.float32)
        pieces = encoder.tokenizer(list(words), add_special_tokens=False)["input_ids"] if len(words) else []
        for i, ids in enumerate(pieces):
            if ids:
                rows[i] = table[ids].mean(0)
        return _unit_rows(rows)
    raise ValueError(f"vectors must be one of {VECTOR_SOURCES}, not {source!r}")


# -- padded batches -------------------------------------------------------------------------------------
def _check_example(example, index: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(word_attn [L, H, n+2, n+2], heads [n], is_punct [n]) of an example, checked."""
    attn = np.asarray(example.word_attn, dtype=np.float32)
    heads = np.asarray(example.heads, dtype=np.int64)
    punct = np.asarray(example.is_punct, dtype=bool)
    n = len(heads)
    if n == 0:
        raise ValueError(f"example {index} has no words")
    if attn.ndim != 4 or attn.shape[2:] != (n + 2, n + 2):
        raise ValueError(f"example {index}: word_attn must be [layers, heads, {n + 2}, {n + 2}] for {n} words "
                         f"plus [CLS] and [SEP], got {attn.shape}")
    if heads.min() < 0 or heads.max() > n or np.any(heads == np.arange(1, n + 1)):
        raise ValueError(f"example {index}: heads must be 0 (ROOT) or another word's 1-based index up to {n}")
    if punct.shape != (n,):
        raise ValueError(f"example {index}: is_punct must have one entry per word ({n})")
    check_attention(attn)
    return attn, heads, punct


def make_batches(examples: Sequence, vectors: Sequence[np.ndarray] | None = None, batch_size: int = 32
                 ) -> list[dict[str, torch.Tensor]]:
    """Padded batches of sentences of similar length (a fixed order: by length, then index).

    examples: objects with word_attn [L, H, n+2, n+2] ([CLS] word 0, [SEP] word n+1), heads [n] (0 = ROOT)
    and is_punct [n] (e.g. `syntax.ParsedAttention`); vectors: per example [n, D] or None.
    Each batch: feats [B, N, N+1, 2, L·H] = `pair_features` of each sentence, zero-padded; vecs [B, N, D];
    heads [B, N]; scored [B, N] (a real, non-punctuation word); allowed [B, N, N+1] (candidate c of word d:
    ROOT or another real word); lengths [B]; index [B] (position in `examples`)."""
    if not examples:
        raise ValueError("no examples")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, not {batch_size}")
    checked = [_check_example(e, i) for i, e in enumerate(examples)]
    shapes = {c[0].shape[:2] for c in checked}
    if len(shapes) != 1:
        raise ValueError(f"examples mix models with different numbers of layers/heads: {sorted(shapes)}")
    if vectors is not None and len(vectors) != len(examples):
        raise ValueError(f"{len(vectors)} vector arrays for {len(examples)} examples")
    order = sorted(range(len(checked)), key=lambda i: (len(checked[i][1]), i))
    batches = []
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        width = max(len(checked[i][1]) for i in chunk)
        n_maps = int(np.prod(checked[chunk[0]][0].shape[:2]))
        feats = np.zeros((len(chunk), width, width + 1, 2, n_maps), dtype=np.float32)
        heads = np.zeros((len(chunk), width), dtype=np.int64)
        scored = np.zeros((len(chunk), width), dtype=bool)
        allowed = np.zeros((len(chunk), width, width + 1), dtype=bool)
        allowed[:, :, 0] = True  # ROOT (padding rows keep only it, so their softmax stays defined)
        dim = 0 if vectors is None else np.asarray(vectors[chunk[0]]).shape[1]
        vecs = np.zeros((len(chunk), width, dim), dtype=np.float32)
        for row, i in enumerate(chunk):
            word_attn, gold, punct = checked[i]
            n = len(gold)
            feats[row, :n, :n + 1] = pair_features(word_attn)
            heads[row, :n] = gold
            scored[row, :n] = ~punct
            allowed[row, :n, 1:n + 1] = ~np.eye(n, dtype=bool)
            if vectors is not None:
                v = np.asarray(vectors[i], dtype=np.float32)
                if v.shape != (n, dim):
                    raise ValueError(f"vectors of example {i} must be [{n}, {dim}], got {v.shape}")
                vecs[row, :n] = v
        batches.append({"feats": torch.from_numpy(feats), "vecs": torch.from_numpy(vecs),
                        "heads": torch.from_numpy(heads), "scored": torch.from_numpy(scored),
                        "allowed": torch.from_numpy(allowed),
                        "lengths": torch.tensor([len(checked[i][1]) for i in chunk]), "index": torch.tensor(chunk)})
    return batches


def pair_features(word_attn: np.ndarray) -> np.ndarray:
    """float32 [n, n+1, 2, L·H] of one sentence (word_attn [L, H, n+2, n+2], [CLS] = 0, [SEP] = n+1).

    [d-1, c, :, k] for word d and candidate word c >= 1: (α_k(d→c), α_k(c→d)), the map and its transpose;
    for c = 0 (ROOT): (α_k(d→[CLS]), α_k(d→[SEP])). [d-1, d] (a word heading itself) is 0."""
    n_layers, n_heads, m, _ = word_attn.shape
    n = m - 2
    attn = np.asarray(word_attn, dtype=np.float32).reshape(n_layers * n_heads, m, m)
    feats = np.empty((n, n + 1, 2, n_layers * n_heads), dtype=np.float32)
    inner = attn[:, 1:n + 1, 1:n + 1]
    feats[:, 1:, 0] = inner.transpose(1, 2, 0)
    feats[:, 1:, 1] = inner.transpose(2, 1, 0)
    feats[:, 0, 0] = attn[:, 1:n + 1, 0].T
    feats[:, 0, 1] = attn[:, 1:n + 1, n + 1].T
    feats[np.arange(n), np.arange(1, n + 1)] = 0
    return feats


def distance_features(width: int) -> torch.Tensor:
    """[N, N, 8] features of dependent d and candidate c (c - d = offset): offset = -1, -2, -3, +1, +2, +3
    (indicators), log(1 + distance) when c is to the left, and when it is to the right."""
    offset = torch.arange(width)[None, :] - torch.arange(width)[:, None]
    feats = [(offset == k).float() for k in (-1, -2, -3, 1, 2, 3)]
    feats += [torch.log1p((-offset).clamp(min=0).float()), torch.log1p(offset.clamp(min=0).float())]
    return torch.stack(feats, dim=-1)


def feature_scale(batches: Sequence[dict[str, torch.Tensor]]) -> torch.Tensor:
    """[2, 2, K] 1 / root mean square of each feature over the allowed pairs of `batches` (the training half):
    [0] the word candidates' (dep->head, head->dep), [1] ROOT's ([CLS], [SEP]). The probes multiply their
    weights by it, so a learned weight is per typical (RMS) attention of its map: every map on a common
    scale, and Adam's steps of about the learning rate mean as much for every map. (The RMS, not the standard
    deviation: the maps of an untrained model are nearly uniform, with almost no spread.)"""
    square = torch.zeros(2, 2, batches[0]["feats"].shape[-1], dtype=torch.float64)
    count = torch.zeros(2, dtype=torch.float64)
    for batch in batches:
        feats, allowed = batch["feats"].double(), batch["allowed"]
        real = torch.arange(feats.shape[1])[None, :] < batch["lengths"][:, None]  # [B, N]
        for slot, pairs, mask in ((0, feats[:, :, 1:], allowed[:, :, 1:]), (1, feats[:, :, 0], real)):
            chosen = pairs[mask]  # [pairs, 2, K]
            square[slot] += (chosen ** 2).sum(0)
            count[slot] += len(chosen)
    rms = (square / count[:, None, None]).sqrt()
    return (1 / rms.clamp(min=1e-6)).float()


# -- the probes -----------------------------------------------------------------------------------------
class AttentionProbe(nn.Module):
    """One weight per head and direction: word [2, K] (dep->head, head->dep), ROOT [2, K] ([CLS], [SEP]), each
    per root-mean-square of its feature (`scale`, from `feature_scale`; None: raw attention)."""

    def __init__(self, n_maps: int, scale: torch.Tensor | None = None):
        super().__init__()
        self.register_buffer("scale", torch.ones(2, 2, n_maps) if scale is None else scale.clone())
        self.word = nn.Parameter(torch.zeros(2, n_maps))
        self.root = nn.Parameter(torch.zeros(2, n_maps))
        self.root_bias = nn.Parameter(torch.zeros(()))

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """scores [B, N, N+1] (column 0 = ROOT)."""
        weights = torch.stack(((self.root * self.scale[1]).flatten(), (self.word * self.scale[0]).flatten()), -1)
        both = batch["feats"].flatten(-2) @ weights  # [B, N, N+1, 2]: every column scored as ROOT and as a word
        return torch.cat((both[:, :, :1, 0] + self.root_bias, both[:, :, 1:, 1]), dim=-1)


class AttentionWordsProbe(nn.Module):
    """Per-pair head weights from the static vectors: W·[v_d; v_c] + w (word), R·v_d + r (ROOT)."""

    def __init__(self, n_maps: int, dim: int, scale: torch.Tensor | None = None):
        super().__init__()
        self.register_buffer("scale", torch.ones(2, 2, n_maps) if scale is None else scale.clone())
        self.dep = nn.Linear(dim, 2 * n_maps)  # its bias is the attention-only weight w
        self.cand = nn.Linear(dim, 2 * n_maps, bias=False)
        self.root = nn.Linear(dim, 2 * n_maps)
        self.root_bias = nn.Parameter(torch.zeros(()))
        for layer in (self.dep, self.cand, self.root):  # linear in every parameter: zeros are a fine start
            nn.init.zeros_(layer.weight)
            if layer.bias is not None:
                nn.init.zeros_(layer.bias)

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        feats = batch["feats"].flatten(-2)  # [B, N, N+1, 2K], contiguous
        vecs = batch["vecs"]
        word_scale, root_scale = self.scale.flatten(1)
        dep_w = torch.stack((self.root(vecs) * root_scale, self.dep(vecs) * word_scale), -1)  # [B, N, 2K, 2]
        both = feats @ dep_w  # [B, N, N+1, 2]: the dependent's weights, as ROOT and as a word
        cand_w = self.cand(vecs) * word_scale  # [B, N, 2K]
        cand_w = torch.cat((torch.zeros_like(cand_w[:, :1]), cand_w), dim=1)  # ROOT has no vector: [B, N+1, 2K]
        cand_scores = (feats * cand_w[:, None]).sum(-1)  # [B, N, N+1]
        return torch.cat((both[:, :, :1, 0] + self.root_bias, both[:, :, 1:, 1] + cand_scores[:, :, 1:]), dim=-1)


class DistanceWordsMLP(nn.Module):
    """One hidden layer over [v_d; v_c; 8 distance features]; ROOT's vector and distances are one learned vector."""

    def __init__(self, dim: int, hidden: int = 64):
        super().__init__()
        self.dep = nn.Linear(dim, hidden)
        self.cand = nn.Linear(dim, hidden, bias=False)
        self.dist = nn.Linear(N_DISTANCE_FEATURES, hidden, bias=False)
        self.root = nn.Parameter(torch.zeros(hidden))
        self.out = nn.Linear(hidden, 1)

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        vecs = batch["vecs"]
        dep, cand = self.dep(vecs), self.cand(vecs)  # [B, N, hidden]
        dist = self.dist(distance_features(vecs.shape[1]))  # [N, N, hidden]
        hidden = torch.relu(dep[:, :, None, :] + cand[:, None, :, :] + dist[None])
        root = torch.relu(dep + self.root)
        return torch.cat((self.out(root), self.out(hidden).squeeze(-1)), dim=-1)


def clark_distance_features(lengths: torch.Tensor, width: int) -> torch.Tensor:
    """[B, N, N+1, 8] Clark et al.'s distance features of dependent d and candidate c (column 0 = ROOT) for
    sentences of `lengths` [B] padded to N = width: (c - d) / n when c is to the right of d, (d - c) / n when it
    is to the left (n the sentence's length), indicators c = d, c = d - 1, d + 1, d - 2, d + 2, and a ROOT
    indicator (1 in column 0 only, where every other feature is 0)."""
    n = lengths.clamp(min=1).float()[:, None, None]  # [B, 1, 1]
    offset = (torch.arange(width)[None, :] - torch.arange(width)[:, None]).float()  # [N, N]: c - d
    words = [offset.clamp(min=0) / n, (-offset).clamp(min=0) / n]
    words += [(offset == k).float().expand(len(lengths), width, width) for k in (0, -1, 1, -2, 2)]
    words.append(torch.zeros(len(lengths), width, width))
    feats = torch.stack(words, dim=-1)  # [B, N, N, 8]
    root = torch.zeros(len(lengths), width, 1, N_DISTANCE_FEATURES)
    root[..., -1] = 1
    return torch.cat((root, feats), dim=2)


class ClarkDistanceWordsMLP(nn.Module):
    """Clark et al.'s distances + words baseline: score(d, c) = u·tanh(W·[f(d, c); v_d; v_c] + b) + b', one
    hidden layer of `hidden` units over the 8 `clark_distance_features` and both words' vectors; for ROOT the
    vectors are zeros (its score is the same for every dependent). Initialised as TensorFlow's dense layers
    (Glorot-uniform weights, zero biases)."""

    def __init__(self, dim: int, hidden: int = 256):
        super().__init__()
        self.dim = dim
        self.hidden = nn.Linear(N_DISTANCE_FEATURES + 2 * dim, hidden)
        self.out = nn.Linear(hidden, 1)
        for layer in (self.hidden, self.out):
            nn.init.xavier_uniform_(layer.weight)
            nn.init.zeros_(layer.bias)

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """scores [B, N, N+1] (column 0 = ROOT)."""
        vecs = batch["vecs"]
        weight = self.hidden.weight
        w_dist, w_dep, w_cand = weight[:, :N_DISTANCE_FEATURES], weight[:, N_DISTANCE_FEATURES:-self.dim], \
            weight[:, -self.dim:]
        dist = clark_distance_features(batch["lengths"], vecs.shape[1]) @ w_dist.T  # [B, N, N+1, hidden]
        dep, cand = vecs @ w_dep.T, vecs @ w_cand.T  # [B, N, hidden]
        cand = torch.cat((torch.zeros_like(cand[:, :1]), cand), dim=1)  # ROOT's vector is zeros
        hidden = torch.tanh(dist + dep[:, :, None] + cand[:, None] + self.hidden.bias)
        root = torch.tanh(dist[:, :, :1] + self.hidden.bias)  # ROOT: no vectors, the ROOT indicator only
        hidden = torch.cat((root, hidden[:, :, 1:]), dim=2)
        return self.out(hidden).squeeze(-1)


def make_probe(kind: str, n_maps: int, dim: int, seed: int = 0, scale: torch.Tensor | None = None) -> nn.Module:
    """A new probe of `kind` (one of PROBE_KINDS), initialised from `seed`; `scale` ([2, 2, n_maps], from
    `feature_scale` on the training batches) puts the attention features on a common scale."""
    torch.manual_seed(seed)
    if kind == "attention":
        return AttentionProbe(n_maps, scale)
    if kind == "attention+vectors":
        return AttentionWordsProbe(n_maps, dim, scale)
    if kind == "distances+vectors":
        return DistanceWordsMLP(dim)
    if kind == "clark-distances+vectors":
        return ClarkDistanceWordsMLP(dim)
    raise ValueError(f"kind must be one of {PROBE_KINDS}, not {kind!r}")


# -- training and evaluation ------------------------------------------------------------------------------
@contextlib.contextmanager
def deterministic():
    """One intra-op thread and deterministic algorithms inside the block (restored after)."""
    threads, strict = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(strict)


def log_probs(probe: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """log p(c | d) [B, N, N+1] over the allowed candidates (-inf elsewhere)."""
    scores = probe(batch).masked_fill(~batch["allowed"], float("-inf"))
    return torch.log_softmax(scores, dim=-1)


def _loss(probe: nn.Module, batch: dict[str, torch.Tensor], loss: str = "mean") -> torch.Tensor:
    """"mean": mean cross-entropy over the scored (non-punctuation) words; "sum": summed over every real word,
    punctuation included (Clark et al.'s code)."""
    logp = log_probs(probe, batch)
    gold = logp.gather(-1, batch["heads"][..., None]).squeeze(-1)
    if loss == "sum":
        return -gold[torch.arange(gold.shape[1])[None, :] < batch["lengths"][:, None]].sum()
    return -gold[batch["scored"]].mean()


def predict(probe: nn.Module, batches: Sequence[dict[str, torch.Tensor]]) -> list[np.ndarray]:
    """Per sentence (ordered by its index in the examples) log p(c | d) as float64 [n, n+1]."""
    out: dict[int, np.ndarray] = {}
    with torch.no_grad(), deterministic():
        for batch in batches:
            logp = log_probs(probe, batch).double().numpy()
            for row, (n, i) in enumerate(zip(batch["lengths"].tolist(), batch["index"].tolist())):
                out[i] = logp[row, :n, :n + 1]
    return [out[i] for i in sorted(out)]


def decode(scores: Sequence[np.ndarray], method: str = "argmax") -> list[np.ndarray]:
    """Heads [n] per sentence from scores [n, n+1]: each word's best candidate ("argmax") or the maximum
    spanning tree with one word under ROOT ("mst")."""
    if method == "argmax":
        return [np.asarray(s).argmax(-1) for s in scores]
    if method == "mst":
        return [mst_heads(s) for s in scores]
    raise ValueError(f"method must be 'argmax' or 'mst', not {method!r}")


def uas(predicted: Sequence[Sequence[int]], gold: Sequence[Sequence[int]], is_punct: Sequence[Sequence[bool]]) -> float:
    """Unlabelled attachment score: the share of non-punctuation words whose predicted head is the gold one."""
    if not (len(predicted) == len(gold) == len(is_punct)):
        raise ValueError("predicted, gold and is_punct must list the same sentences")
    correct = total = 0
    for p, g, punct in zip(predicted, gold, is_punct):
        p, g, keep = np.asarray(p), np.asarray(g), ~np.asarray(punct, dtype=bool)
        if not (p.shape == g.shape == keep.shape):
            raise ValueError(f"a sentence has {len(p)} predicted heads, {len(g)} gold heads, {len(keep)} punct flags")
        correct += int((p[keep] == g[keep]).sum())
        total += int(keep.sum())
    if total == 0:
        raise ValueError("no non-punctuation words to score")
    return correct / total


def _batch_uas(probe: nn.Module, batches: Sequence[dict[str, torch.Tensor]]) -> float:
    """Argmax UAS straight from padded batches (for the learning curve)."""
    correct = total = 0
    with torch.no_grad():
        for batch in batches:
            hit = (log_probs(probe, batch).argmax(-1) == batch["heads"]) & batch["scored"]
            correct += int(hit.sum())
            total += int(batch["scored"].sum())
    return correct / total


def train_probe(probe: nn.Module, train: Sequence[dict[str, torch.Tensor]],
                heldout: Sequence[dict[str, torch.Tensor]] | None = None, epochs: int = 6,
                lr: float = LEARNING_RATE, seed: int = 0, progress: bool = True, desc: str = "probe",
                loss: str = "mean") -> pd.DataFrame:
    """Train `probe` in place (Adam, shuffled batches) and return the learning curve: one row per epoch with
    `epoch`, `train_loss` (mean over the epoch's batches) and `heldout_uas` (argmax, when `heldout` is given).
    `loss`: one of LOSSES (see `_loss`)."""
    if epochs < 1:
        raise ValueError(f"epochs must be at least 1, not {epochs}")
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}, not {loss!r}")
    rows = []
    with deterministic():
        optimizer = torch.optim.Adam(probe.parameters(), lr=lr)
        generator = torch.Generator().manual_seed(seed)
        for epoch in tqdm(range(1, epochs + 1), desc=desc, unit="epoch", disable=not progress, leave=False):
            losses = []
            for b in torch.randperm(len(train), generator=generator).tolist():
                if loss == "mean" and not train[b]["scored"].any():  # only punctuation: nothing to learn from
                    continue
                optimizer.zero_grad()
                value = _loss(probe, train[b], loss)
                value.backward()
                optimizer.step()
                losses.append(value.item())
            rows.append({"epoch": epoch, "train_loss": float(np.mean(losses)),
                         "heldout_uas": _batch_uas(probe, heldout) if heldout else np.nan})
    return pd.DataFrame(rows)


def single_sentences(batches: Sequence[dict[str, torch.Tensor]]) -> list[dict[str, torch.Tensor]]:
    """The batches of `make_batches` cut into batches of one sentence each (padding removed), in order."""
    out = []
    for batch in batches:
        for row, n in enumerate(batch["lengths"].tolist()):
            out.append({"feats": batch["feats"][row:row + 1, :n, :n + 1], "vecs": batch["vecs"][row:row + 1, :n],
                        "heads": batch["heads"][row:row + 1, :n], "scored": batch["scored"][row:row + 1, :n],
                        "allowed": batch["allowed"][row:row + 1, :n, :n + 1], "lengths": batch["lengths"][row:row + 1],
                        "index": batch["index"][row:row + 1]})
    return out


def right_branching(n: int) -> np.ndarray:
    """heads [n]: each word's head is the next word, the last word's is ROOT."""
    heads = np.arange(2, n + 2)
    heads[-1] = 0
    return heads


# -- Table 3 ----------------------------------------------------------------------------------------------
@dataclass
class ProbeResults:
    """Everything `run_probes` measured (UAS in %).

    table: one row per model (`Model`): `model`, `uas_argmax`, `uas_mst`. curves: `model`, `epoch`,
    `train_loss`, `heldout_uas` (argmax).
    weights [2, L, H]: the attention-only probe's word weights (dep->head, head->dep), per root-mean-square
    attention of each map; root_weights [2, L, H]: its ROOT weights (to [CLS], to [SEP]). head_accuracy [2, L, H]: each
    map alone on the selection half (`syntax.accuracy_grid`, relation "all"); best_heads: the best map per
    relation there (`syntax.best_head`, relations with >= 100 dependents), as notebook 04 finds them.
    predictions: one row per held-out word (`sentence`, `word` 1-based, `relation`, `gold`, `is_punct`) and
    one column of predicted heads per model (argmax) and per model + " (MST)". vectors: the vectors' source."""

    table: pd.DataFrame
    curves: pd.DataFrame
    weights: np.ndarray
    root_weights: np.ndarray
    head_accuracy: np.ndarray
    best_heads: pd.DataFrame
    predictions: pd.DataFrame
    n_train: int
    n_test: int
    vectors: str

    @property
    def n_words_test(self) -> int:
        """Held-out words scored (punctuation excluded)."""
        return int((~self.predictions["is_punct"]).sum())


def sentences_key(sentences: Sequence) -> str:
    """sha256 of the sentences' words, heads and punctuation flags (a cache key)."""
    digest = hashlib.sha256()
    for s in sentences:
        digest.update(json.dumps([list(s.words), [int(h) for h in s.heads], [bool(p) for p in s.is_punct]]).encode())
    return digest.hexdigest()


def run_probes(encoder: Encoder, selection: Sequence, heldout: Sequence, vectors: str = "spacy-md",
               epochs: int = 6, batch_size: int = 8, seed: int = 0, min_relation: int = 100,
               cache_dir: Path | str | None = DEFAULT_CACHE_DIR, progress: bool = True) -> ProbeResults:
    """Train every probe of Table 3 on `selection` and evaluate it on `heldout` (lists of `parses.Sentence`).

    Attention comes from `syntax.parsed_attention` for `encoder` and for `random_init_encoder(encoder, seed)`.
    Cached (cache_dir) by model, sentences, settings and code version; cache_dir=None recomputes."""
    if not selection or not heldout:
        raise ValueError("run_probes needs sentences in both the selection and the held-out half")
    settings = f"{vectors}/{epochs}/{batch_size}/{seed}/{min_relation}/{LEARNING_RATE}"
    path = None
    cache_dir = usable_cache(encoder.model, cache_dir)
    if cache_dir is not None:
        path = entry_path(cache_dir, "probes", encoder.fingerprint, sentences_key(selection), sentences_key(heldout),
                          settings, version=code_version(__name__))
        cached = load_result(path)
        if cached is not None:
            return _results(cached, heldout, vectors)
    gold = [np.asarray(s.heads) for s in heldout]
    vecs = {"train": [word_vectors(s.words, vectors, encoder) for s in selection],
            "test": [word_vectors(s.words, vectors, encoder) for s in heldout]}
    names = [m[0] for m in MODELS]
    right = [right_branching(len(g)) for g in gold]
    predicted = {Model.RIGHT_BRANCHING: (right, right)}
    curves: dict[str, pd.DataFrame] = {}
    arrays: dict[str, np.ndarray] = {}
    for model in ("pretrained", "random"):
        source = (encoder if model == "pretrained"
                  else random_init_encoder(encoder, seed, cache_dir or DEFAULT_CACHE_DIR))
        batches = {}
        for half, sentences in (("train", selection), ("test", heldout)):
            examples = syntax.parsed_attention(source, sentences, progress=progress)
            if model == "pretrained" and half == "train":
                arrays.update(_single_heads(examples, min_relation))
            batches[half] = make_batches(examples, vecs[half], batch_size)
            del examples
        scale = feature_scale(batches["train"])
        n_maps, dim = scale.shape[-1], batches["train"][0]["vecs"].shape[2]
        for name, kind, which in MODELS:
            # the distances + vectors baseline reads no attention: it rides on the pretrained model's batches
            if which == model or (kind == "distances+vectors" and model == "pretrained"):
                probe = make_probe(kind, n_maps, dim, seed, scale)
                curves[name] = train_probe(probe, batches["train"], batches["test"], epochs, seed=seed,
                                           progress=progress, desc=name)
                scores = predict(probe, batches["test"])
                predicted[name] = (decode(scores, "argmax"), decode(scores, "mst"))
                if name == Model.ATTENTION:
                    shape = (2, encoder.n_layers, encoder.n_heads)
                    arrays["weights"] = probe.word.detach().numpy().reshape(shape)
                    arrays["root_weights"] = probe.root.detach().numpy().reshape(shape)
        if model == "pretrained":
            probe = make_probe("attention", n_maps, dim, seed, scale)
            train_probe(probe, single_sentences(batches["train"]), None, 1, seed=seed, progress=False, loss="sum")
            scores = predict(probe, batches["test"])
            predicted[Model.ONE_EPOCH] = (decode(scores, "argmax"), decode(scores, "mst"))
        del batches
    trained = [n for n in names if n in curves]
    names.append(Model.ONE_EPOCH)
    arrays.update(
        pred_argmax=np.stack([np.concatenate(predicted[n][0]) for n in names]).astype(np.int16),
        pred_mst=np.stack([np.concatenate(predicted[n][1]) for n in names]).astype(np.int16),
        curves=np.stack([curves[n][["epoch", "train_loss", "heldout_uas"]].to_numpy() for n in trained]),
        curve_models=np.array(trained), n_train=np.array(len(selection)))
    if path is not None:
        save_result(path, arrays)
    return _results(arrays, heldout, vectors)


def _single_heads(examples: Sequence, min_relation: int) -> dict[str, np.ndarray]:
    """Each map alone on `examples` (notebook 04's analysis): accuracy grid and best map per relation."""
    scores = syntax.score_examples(examples)
    counts = scores.relation_counts()
    relations = ["all"] + [r for r, c in counts.items() if c >= min_relation and r != "punct"]
    best = [syntax.best_head(scores, r) for r in relations]
    accuracy = [100 * syntax.head_outcomes(scores, r, *b).mean() for r, b in zip(relations, best)]
    return {"head_accuracy": 100 * syntax.accuracy_grid(scores, "all"), "best_relation": np.array(relations),
            "best_layer": np.array([b[0] for b in best]), "best_head": np.array([b[1] for b in best]),
            "best_direction": np.array([b[2] for b in best]), "best_accuracy": np.array(accuracy),
            "best_n": np.array([len(scores.relations) if r == "all" else int(counts[r]) for r in relations])}


def word_table(sentences: Sequence) -> pd.DataFrame:
    """One row per word of `sentences` (`parses.Sentence`s), in order: `sentence`, `word` (1-based), `relation`,
    `gold` (head), `is_punct`."""
    return pd.DataFrame([(i, w + 1, rel, int(h), bool(p)) for i, s in enumerate(sentences)
                         for w, (rel, h, p) in enumerate(zip(s.relations, s.heads, s.is_punct))],
                        columns=["sentence", "word", "relation", "gold", "is_punct"])


def _results(arrays: dict[str, np.ndarray], heldout: Sequence, vectors: str) -> ProbeResults:
    names = list(Model)
    words = word_table(heldout)
    for name, argmax, mst in zip(names, arrays["pred_argmax"], arrays["pred_mst"]):
        words[name], words[f"{name} (MST)"] = argmax.astype(int), mst.astype(int)
    scored = words[~words["is_punct"]]
    table = pd.DataFrame([{"model": name, "uas_argmax": 100 * float((scored[name] == scored["gold"]).mean()),
                           "uas_mst": 100 * float((scored[f"{name} (MST)"] == scored["gold"]).mean())}
                          for name in names])
    curves = pd.concat([pd.DataFrame(block, columns=["epoch", "train_loss", "heldout_uas"]).assign(model=str(name))
                        for name, block in zip(arrays["curve_models"], arrays["curves"])], ignore_index=True)
    curves["epoch"] = curves["epoch"].astype(int)
    curves["heldout_uas"] *= 100
    best = pd.DataFrame({"relation": arrays["best_relation"].astype(str), "layer": arrays["best_layer"],
                         "head": arrays["best_head"], "direction": arrays["best_direction"].astype(str),
                         "accuracy": arrays["best_accuracy"], "n": arrays["best_n"]})
    return ProbeResults(table, curves[["model", "epoch", "train_loss", "heldout_uas"]], arrays["weights"],
                        arrays["root_weights"], arrays["head_accuracy"], best, words, int(arrays["n_train"]),
                        len(heldout), vectors)


def weight_table(results: ProbeResults) -> pd.DataFrame:
    """One row per map (head and direction) of the attention-only probe: head (1-indexed label), direction,
    weight (per root-mean-square of the map), accuracy of the map alone on the selection half (%), and the
    relations it is the best map for there (as notebook 04 finds them; "-" for none)."""
    best = results.best_heads[results.best_heads["relation"] != "all"]
    n_layers, n_heads = results.weights.shape[1:]
    rows = []
    for d, direction in enumerate(syntax.DIRECTIONS):
        for layer in range(1, n_layers + 1):
            for head in range(1, n_heads + 1):
                found = best[(best["direction"] == direction) & (best["layer"] == layer) & (best["head"] == head)]
                rows.append((head_label(layer, head), direction, results.weights[d, layer - 1, head - 1],
                             results.head_accuracy[d, layer - 1, head - 1], ", ".join(found["relation"]) or "-"))
    return pd.DataFrame(rows, columns=["head", "direction", "weight", "accuracy alone %", "best for (nb 04)"])
