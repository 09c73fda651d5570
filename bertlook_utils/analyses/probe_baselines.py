"""Clark et al.'s distances + words baseline of Table 3, its ablations, and UAS on the arcs two parsers agree on.

The baseline as Clark et al.'s released code builds it (`Syntax_Analysis.ipynb`, `Probe(use_distance_features=True,
use_attns=False, use_words=True, hidden_layer=True)`) is `probes.ClarkDistanceWordsMLP`: 8 distance features
(`probes.clark_distance_features`), the two words' vectors, one hidden layer of 256 tanh units, trained for 1 epoch
with one sentence per Adam step and the cross-entropy summed over every word of the sentence. `distance_baselines`
trains it in several settings (BASELINE_SETTINGS: vector size, training sentences, epochs), `subset_uas` scores any
predictions on the arcs two parsers agree on, and `offset_shares` gives the shape of the trees.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from ..core.cache import DEFAULT_CACHE_DIR, entry_path, load_result, save_result
from ..core.source import code_version
from ..data import parses


def word_batches(sentences: Sequence, vectors: Sequence[np.ndarray], batch_size: int = 1
                 ) -> list[dict[str, torch.Tensor]]:
    """Padded batches for probes that read no attention (`probes.make_batches` without `feats`), in the same order
    (by length, then index). sentences: objects with heads [n] and is_punct [n]; vectors: per sentence [n, D]."""
    if not sentences or len(vectors) != len(sentences):
        raise ValueError(f"need one vector array per sentence, got {len(vectors)} for {len(sentences)} sentences")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, not {batch_size}")
    order = sorted(range(len(sentences)), key=lambda i: (len(sentences[i].heads), i))
    dim = np.asarray(vectors[0]).shape[1]
    batches = []
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        width = max(len(sentences[i].heads) for i in chunk)
        heads = np.zeros((len(chunk), width), dtype=np.int64)
        scored = np.zeros((len(chunk), width), dtype=bool)
        allowed = np.zeros((len(chunk), width, width + 1), dtype=bool)
        allowed[:, :, 0] = True
        vecs = np.zeros((len(chunk), width, dim), dtype=np.float32)
        for row, i in enumerate(chunk):
            n = len(sentences[i].heads)
            heads[row, :n] = sentences[i].heads
            scored[row, :n] = ~np.asarray(sentences[i].is_punct, dtype=bool)
            allowed[row, :n, 1:n + 1] = ~np.eye(n, dtype=bool)
            vecs[row, :n] = vectors[i]
        batches.append({"vecs": torch.from_numpy(vecs), "heads": torch.from_numpy(heads),
                        "scored": torch.from_numpy(scored), "allowed": torch.from_numpy(allowed),
                        "lengths": torch.tensor([len(sentences[i].heads) for i in chunk]),
                        "index": torch.tensor(chunk)})
    return batches


def pca_projection(train_vectors: Sequence[np.ndarray], dim: int) -> tuple[np.ndarray, np.ndarray]:
    """(mean [D], axes [dim, D]) of the principal components of the training words' vectors (every word
    occurrence with a vector; words without one, all zeros, left out). Project with `project_vectors`."""
    rows = np.concatenate([np.asarray(v, dtype=np.float64) for v in train_vectors])
    rows = rows[np.abs(rows).sum(1) > 0]
    if dim < 1 or dim > min(rows.shape):
        raise ValueError(f"cannot project {rows.shape[1]}-d vectors of {len(rows)} words to {dim} dimensions")
    mean = rows.mean(0)
    centred = rows - mean
    values, vectors = np.linalg.eigh(centred.T @ centred)  # ascending eigenvalues of the scatter matrix
    axes = vectors[:, ::-1][:, :dim].T
    axes = axes * np.where(axes[:, :1] < 0, -1.0, 1.0)  # a fixed sign per axis
    return mean, axes


def project_vectors(vectors: np.ndarray, projection: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """float32 [n, dim]: (v - mean) @ axes.T for words with a vector; zeros stay zeros (no vector)."""
    mean, axes = projection
    vectors = np.asarray(vectors, dtype=np.float64)
    out = (vectors - mean) @ axes.T
    out[np.abs(vectors).sum(1) == 0] = 0
    return out.astype(np.float32)


@dataclass(frozen=True)
class BaselineSetting:
    """One way to train Clark et al.'s distances + words baseline: `dim` (vector size; < 300: spaCy md's
    vectors projected on their first `dim` principal axes, fit on the training words), `train` ("all" training
    sentences, or "half": the first half by article, `parses.split_halves` of them), epochs, batch_size
    (sentences per Adam step), loss (`_loss`) and hidden units."""

    name: str
    dim: int = 100
    train: str = "all"
    epochs: int = 1
    batch_size: int = 1
    loss: str = "sum"
    hidden: int = 256


BASELINE_SETTINGS = (
    BaselineSetting("Clark's baseline (100-d, 1 epoch, batch 1)"),
    BaselineSetting("Clark's, 300-d vectors", dim=300),
    BaselineSetting("Clark's, half the training sentences", train="half"),
    BaselineSetting("Clark's, 6 epochs, batches of 8 (the kit's training)", epochs=6, batch_size=8, loss="mean"),
)


@dataclass
class BaselineResults:
    """`distance_baselines`' results. table: one row per setting: `model` (its name), dim, n_train (sentences),
    epochs, batch_size, uas_argmax, uas_mst (%). predictions: one row per held-out word (`sentence`, `word`,
    `relation`, `gold`, `is_punct`, as `probes.ProbeResults.predictions`) and one column of argmax heads per setting."""

    table: pd.DataFrame
    predictions: pd.DataFrame


def distance_baselines(selection: Sequence, heldout: Sequence, settings: Sequence[BaselineSetting] = BASELINE_SETTINGS,
                       seed: int = 0, cache_dir: Path | str | None = DEFAULT_CACHE_DIR,
                       progress: bool = True) -> BaselineResults:
    """Train `probes.ClarkDistanceWordsMLP` on `selection` in each of `settings` and evaluate it on `heldout` (lists
    of `parses.Sentence`) with spaCy md's vectors. No attention is read. Cached by sentences, settings and
    code version."""
    # imported here, not above: probes re-exports this module's functions for notebooks already handed out
    from .probes import ClarkDistanceWordsMLP, decode, predict, sentences_key, train_probe, word_table, word_vectors

    if not selection or not heldout:
        raise ValueError("distance_baselines needs sentences in both the selection and the held-out half")
    names = [s.name for s in settings]
    if len(set(names)) != len(names):
        raise ValueError("settings need distinct names")
    path = None
    if cache_dir is not None:
        path = entry_path(cache_dir, "distance_baselines", sentences_key(selection), sentences_key(heldout),
                          repr(tuple(settings)), str(seed), version=code_version(__name__))
        cached = load_result(path)
        if cached is not None:
            return _baseline_results(cached, settings, word_table(heldout))
    halves = {"all": list(selection), "half": parses.split_halves(selection)[0]}
    raw = {id(s): word_vectors(s.words, "spacy-md") for s in list(selection) + list(heldout)}
    rows, argmax, mst = [], [], []
    for setting in tqdm(settings, desc="distance baselines", unit="setting", disable=not progress):
        if setting.train not in halves:
            raise ValueError(f"train must be 'all' or 'half', not {setting.train!r}")
        train = halves[setting.train]
        if setting.dim == raw[id(train[0])].shape[1]:
            vecs = dict(raw)
        else:
            projection = pca_projection([raw[id(s)] for s in train], setting.dim)
            keys = list(raw)
            flat = project_vectors(np.concatenate([raw[k] for k in keys]), projection)
            vecs = dict(zip(keys, np.split(flat, np.cumsum([len(raw[k]) for k in keys])[:-1])))
        train_batches = word_batches(train, [vecs[id(s)] for s in train], setting.batch_size)
        test_batches = word_batches(heldout, [vecs[id(s)] for s in heldout], 32)
        torch.manual_seed(seed)
        probe = ClarkDistanceWordsMLP(setting.dim, setting.hidden)
        train_probe(probe, train_batches, None, setting.epochs, seed=seed, progress=False, loss=setting.loss)
        scores = predict(probe, test_batches)
        argmax.append(np.concatenate(decode(scores, "argmax")))
        mst.append(np.concatenate(decode(scores, "mst")))
        rows.append((setting.dim, len(train)))
    arrays = {"pred_argmax": np.stack(argmax).astype(np.int16), "pred_mst": np.stack(mst).astype(np.int16),
              "n_train": np.array([r[1] for r in rows])}
    if path is not None:
        save_result(path, arrays)
    return _baseline_results(arrays, settings, word_table(heldout))


def _baseline_results(arrays: dict[str, np.ndarray], settings: Sequence[BaselineSetting], words: pd.DataFrame
                      ) -> BaselineResults:
    """words: `probes.word_table` of the held-out sentences, given a column of heads per setting here."""
    keep = ~words["is_punct"].to_numpy()
    rows = []
    for setting, argmax, mst, n_train in zip(settings, arrays["pred_argmax"], arrays["pred_mst"], arrays["n_train"]):
        words[setting.name] = argmax.astype(int)
        gold = words["gold"].to_numpy()
        rows.append({"model": setting.name, "dim": setting.dim, "n_train": int(n_train), "epochs": setting.epochs,
                     "batch_size": setting.batch_size, "uas_argmax": 100 * float((argmax[keep] == gold[keep]).mean()),
                     "uas_mst": 100 * float((mst[keep] == gold[keep]).mean())})
    return BaselineResults(pd.DataFrame(rows), words)


def subset_uas(predictions: pd.DataFrame, models: Sequence[str], heldout: Sequence, second: Sequence) -> pd.DataFrame:
    """UAS (%, argmax, punctuation excluded) of each model's predicted heads (columns `models` of a
    `predictions` frame: one row per word of `heldout`, in order) on subsets defined by a second parse of the
    same sentences (`second`, e.g. `parses.md_parses(heldout)`): every word (`all`), the words whose head the
    two parses agree on (`agreed arcs`) and the others (`disagreed arcs`), the sentences whose every
    non-punctuation head agrees (`agreed sentences`), and every word scored against the second parse's heads
    (`against md`). One row per model; `n_*` columns give the words in each subset."""
    agree = np.concatenate(parses.arc_agreement(heldout, second))
    if len(agree) != len(predictions):
        raise ValueError(f"predictions have {len(predictions)} rows for {len(agree)} words of the held-out sentences")
    keep = ~predictions["is_punct"].to_numpy()
    whole = np.concatenate([np.full(len(s), bool(a[~np.asarray(s.is_punct)].all()))
                            for s, a in zip(heldout, parses.arc_agreement(heldout, second))])
    gold = predictions["gold"].to_numpy()
    other = np.concatenate([np.asarray(s.heads) for s in second])
    subsets = {"all": keep, "agreed arcs": keep & agree, "disagreed arcs": keep & ~agree,
               "agreed sentences": keep & whole}
    rows = []
    for model in models:
        predicted = predictions[model].to_numpy()
        row = {"model": model}
        row.update({name: 100 * float((predicted[mask] == gold[mask]).mean()) for name, mask in subsets.items()})
        row["against md"] = 100 * float((predicted[keep] == other[keep]).mean())
        rows.append(row)
    table = pd.DataFrame(rows)
    for name, mask in subsets.items():
        table[f"n {name}"] = int(mask.sum())
    return table


def offset_shares(sentences: Sequence, offsets: Sequence[int] = (-3, -2, -1, 1, 2, 3)) -> pd.DataFrame:
    """Shape of the trees: the share (%) of words whose head is at each offset (head - word), further away
    ("other"), or ROOT, counted two ways: `non-punct` (punctuation excluded, as UAS; "+1" is then the
    right-branching baseline's score) and `every word` (punctuation and ROOT words included, as Clark et al.'s
    Table 1 "all" row). One row per offset."""
    offset, punct = [], []
    for s in sentences:
        heads = np.asarray(s.heads)
        offset.append(np.where(heads == 0, 0, heads - np.arange(1, len(heads) + 1)))
        punct.append(np.asarray(s.is_punct, dtype=bool))
    offset, punct = np.concatenate(offset), np.concatenate(punct)
    labels = [f"{k:+d}" for k in offsets] + ["other", "ROOT"]
    masks = [offset == k for k in offsets]
    masks += [(offset != 0) & ~np.isin(offset, list(offsets)), offset == 0]
    return pd.DataFrame({"offset": labels,
                         "non-punct": [100 * float(m[~punct].mean()) for m in masks],
                         "every word": [100 * float(m.mean()) for m in masks]})
