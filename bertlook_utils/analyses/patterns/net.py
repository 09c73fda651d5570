"""A small CNN for Kovaleva et al.'s attention patterns, beside the transparent rules of `patterns`.

Kovaleva et al. trained a CNN on about 400 hand-labelled maps. Here every map is first put on a fixed grid
(`grid_batch`: the map averaged onto GRID x GRID cells, maps of up to 64 tokens), as CHANNELS images:

    scaled     the map divided by its largest cell (what the contact sheets showed the labeller)
    relative   log(1 + a n) / log(1 + n): the weight against a uniform row (1/n), compressed (uniform ~ 0.17)
    special    1 on the [CLS] and [SEP] columns
    segment    1 where row and column are in the same segment (all 1 for a single input)

`PatternNet`: 6 convolutions with ReLU (3 x 3; 8, 16, 16, 32, 32, 32 channels; max-pooling twice), then the mean
and the maximum of each channel over the grid, and a linear layer: about 27,000 weights. `train` fits it
(AdamW, class-weighted cross-entropy so that rare kinds count as much as macro-F1 counts them, each map seen
also in reversed token order, which keeps every kind) to the hand labels plus PROTOTYPES synthetic maps per kind
(`prototype_grids`: maps of each kind built by construction, so that clear cases are learned even for kinds
with few labels); seeded, on one thread (`one_thread`), about 10 s for 500 maps on a CPU. `cross_validate`
uses the rules' folds (`evaluation.stratified_folds`): the prototypes join every training fold, the scores come
from hand labels only. One net's score hangs on its seed (macro-F1 0.54-0.62 over seeds 0-4 on the 440 labels):
`trained_ensemble` / `NetEnsemble` average the probabilities of one net per seed of SEEDS (0.62), and
`cross_validate(..., seeds=SEEDS)` scores that, and `cross_validate_each` scores one net per seed, so that a
notebook shows how far a score moves with the seed. Nets missing from the cache are trained in parallel
processes, one thread each (`train_many`: a process's net is the same as the one trained in place). The settings
(SETTINGS) were fixed before the first cross-validation and not changed after it.
"""
from __future__ import annotations

import hashlib
import json
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn
from torch.nn import functional as F

from ...core.cache import DEFAULT_CACHE_DIR, entry_path, load_result, save_result
from ...core.source import code_version
from ...engine.extract import Batch
from ...core.models import Encoded
from .evaluation import check_folds, out_of_fold, stratified_folds
from .kinds import KINDS, in_scheme, label_scheme
from ...core.threads import one_thread

GRID = 32
CHANNELS = ("scaled", "relative", "special", "segment")
PROTOTYPES = 24  # synthetic maps per kind added to every training set
SETTINGS = {"epochs": 60, "batch_size": 32, "lr": 3e-3, "weight_decay": 1e-3, "prototypes": PROTOTYPES}


# -- maps onto the grid ---------------------------------------------------------------------------------
def grid_batch(attn: torch.Tensor, valid: torch.Tensor, special: torch.Tensor, segment: torch.Tensor,
               size: int = GRID) -> torch.Tensor:
    """The CHANNELS images of every map of a padded batch: attn [B, L, H, T, T] (padded columns 0), valid,
    special bool [B, T], segment [B, T] -> float32 [B, L, H, C, size, size]. Each input's n x n map is averaged
    onto size x size cells (cells repeat when n < size)."""
    B, L, H, T, _ = attn.shape
    out = torch.empty(B, L, H, len(CHANNELS), size, size)
    for b in range(B):
        n = int(valid[b].sum())
        a = attn[b, :, :, :n, :n].float().reshape(L * H, 1, n, n)
        pooled = F.adaptive_avg_pool2d(a, size)  # [LH, 1, S, S]
        scaled = pooled / pooled.amax(dim=(-2, -1), keepdim=True).clamp_min(1e-12)
        relative = torch.log1p(pooled * n) / np.log1p(n)
        marks = torch.stack([special[b, :n].float()[None, :].expand(n, n),
                             (segment[b, :n, None] == segment[b, None, :n]).float()])
        marks = F.adaptive_avg_pool2d(marks[None], size)[0]  # [2, S, S]
        images = torch.cat([scaled, relative, marks[None].expand(L * H, 2, size, size)], dim=1)
        out[b] = images.reshape(L, H, len(CHANNELS), size, size)
    return out


def encoded_grids(maps: Sequence[Encoded], size: int = GRID) -> np.ndarray:
    """The images of one map per `Encoded` (attn [1, 1, n, n], as `patterns.labelled_maps` gives):
    float32 [N, C, size, size]."""
    grids = []
    for m in maps:
        if np.asarray(m.attn).shape[:2] != (1, 1):
            raise ValueError(f"each Encoded must hold one map, attn [1, 1, n, n]; got {np.shape(m.attn)}")
        batch = Batch.from_encoded(m)
        grids.append(grid_batch(batch.attn, batch.valid, batch.sinks, batch.segment, size)[0, 0, 0])
    return torch.stack(grids).numpy()


# -- maps of each kind by construction ----------------------------------------------------------------
def _prototype(kind: str, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One synthetic map of `kind`: (attn [n, n], special bool [n], segment [n])."""
    n = int(rng.integers(12, 65))
    pair = rng.random() < 0.5
    cut = int(rng.integers(4, n - 4)) if pair else n - 1  # the first [SEP]
    special = np.zeros(n, bool)
    special[[0, cut, n - 1]] = True
    segment = (np.arange(n) > cut).astype(int) if pair else np.zeros(n, int)
    rows = np.arange(n)

    def columns(cols, weights=None) -> np.ndarray:
        a = np.zeros((n, n))
        a[:, cols] = np.ones(len(cols)) if weights is None else weights
        return a

    def diagonal() -> np.ndarray:
        a = np.zeros((n, n))
        for offset, w in zip((-1, 0, 1), rng.dirichlet(np.full(3, 0.3))):
            a[rows, np.clip(rows + offset, 0, n - 1)] += w
        return a

    def vertical() -> np.ndarray:
        sinks = np.flatnonzero(special) if rng.random() < 0.7 else rng.choice(n, int(rng.integers(1, 4)), False)
        return columns(sinks, rng.dirichlet(np.ones(len(sinks))))

    if kind == "vertical":
        a = vertical()
    elif kind == "diagonal":
        a = diagonal()
    elif kind == "vertical+diagonal":
        share = rng.uniform(0.3, 0.7)
        a = share * vertical() + (1 - share) * diagonal()
    elif kind == "block":
        if pair:
            units = segment
        else:  # two to five sentences
            units = np.searchsorted(np.sort(rng.choice(np.arange(3, n - 3), int(rng.integers(1, 5)), False)),
                                    rows, side="right")
        a = (units[:, None] == units[None, :]).astype(float)
    elif kind == "heterogeneous":  # a few random tokens per row
        a = np.zeros((n, n))
        for i in rows:
            a[i, rng.choice(n, int(rng.integers(1, 5)), False)] = rng.random()
    elif kind == "broad":
        a = np.ones((n, n))
    else:
        raise ValueError(f"unknown kind {kind!r}; use one of {KINDS}")
    a = a / a.sum(1, keepdims=True)
    noise = rng.random((n, n)) ** 4
    mix = rng.uniform(0, 0.25)
    a = (1 - mix) * a + mix * noise / noise.sum(1, keepdims=True)
    return a.astype(np.float32), special, segment


def prototype_grids(per_kind: int, kinds: Sequence[str] = KINDS, seed: int = 0, size: int = GRID
                    ) -> tuple[np.ndarray, np.ndarray]:
    """`per_kind` synthetic maps of each of `kinds` (random length 12-64, single or pair, up to 25 % noise),
    named in the scheme of `kinds` (a near-uniform map is heterogeneous when broad is not among them):
    (images float32 [M, C, size, size], kinds [M])."""
    rng = np.random.default_rng(seed)
    images, names = [], []
    built = [k for k in KINDS if k in kinds] + (["broad"] if "broad" not in kinds else [])
    for kind in built:
        for _ in range(per_kind):
            a, special, segment = _prototype(kind, rng)
            n = len(a)
            images.append(grid_batch(torch.from_numpy(a)[None, None, None], torch.ones(1, n, dtype=torch.bool),
                                     torch.from_numpy(special)[None], torch.from_numpy(segment)[None], size)[0, 0, 0])
            names.append(kind)
    return torch.stack(images).numpy(), in_scheme(names, kinds)


# -- the network ----------------------------------------------------------------------------------------
class PatternNet(nn.Module):
    """[B, C, S, S] images -> [B, n_kinds] logits."""

    def __init__(self, n_kinds: int, channels: int = len(CHANNELS)):
        super().__init__()

        def conv(i: int, o: int) -> list[nn.Module]:
            return [nn.Conv2d(i, o, 3, padding=1), nn.ReLU()]

        self.features = nn.Sequential(*conv(channels, 8), nn.MaxPool2d(2), *conv(8, 16), *conv(16, 16),
                                      nn.MaxPool2d(2), *conv(16, 32), *conv(32, 32), *conv(32, 32))
        self.out = nn.Linear(64, n_kinds)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.features(x)
        return self.out(torch.cat([h.mean(dim=(-2, -1)), h.amax(dim=(-2, -1))], dim=1))


@dataclass
class TrainedNet:
    """A trained PatternNet and the kinds its outputs stand for (the scheme of its labels)."""

    net: PatternNet
    kinds: tuple[str, ...]

    def probabilities(self, grids: np.ndarray, batch_size: int = 512) -> np.ndarray:
        """grids [N, C, S, S] -> [N, len(kinds)]."""
        self.net.eval()
        with torch.no_grad(), one_thread():
            parts = [F.softmax(self.net(torch.as_tensor(grids[i:i + batch_size])), dim=1)
                     for i in range(0, len(grids), batch_size)]
        return torch.cat(parts).numpy() if parts else np.zeros((0, len(self.kinds)))

    def predict(self, grids: np.ndarray) -> np.ndarray:
        """grids [N, C, S, S] -> kinds [N]."""
        return np.asarray(self.kinds, dtype=object)[self.probabilities(grids).argmax(1)]

    def state(self) -> dict[str, np.ndarray]:
        """The weights and kinds as arrays (what the cache stores)."""
        return {**{f"w/{k}": v.numpy() for k, v in self.net.state_dict().items()},
                "kinds": np.array(json.dumps(self.kinds))}

    @classmethod
    def from_state(cls, state: Mapping[str, np.ndarray]) -> "TrainedNet":
        kinds = tuple(json.loads(str(state["kinds"])))
        net = PatternNet(len(kinds))
        net.load_state_dict({k[2:]: torch.from_numpy(np.asarray(v)) for k, v in state.items() if k.startswith("w/")})
        return cls(net.eval(), kinds)


def train(grids: np.ndarray, labels: Sequence[str], seed: int = 0, settings: Mapping[str, float] = SETTINGS
          ) -> TrainedNet:
    """Fit a PatternNet to images grids [N, C, S, S] with `labels` [N] plus settings["prototypes"] prototypes
    per kind of the labels' scheme (`kinds.label_scheme`), seeded."""
    labels = np.asarray(labels, dtype=object)
    if len(grids) != len(labels):
        raise ValueError(f"need one label per image; got {len(labels)} labels for {len(grids)} images")
    scheme = label_scheme(labels)
    bad = sorted(set(labels) - set(scheme))
    if bad:
        raise ValueError(f"unknown labels {bad}; use one of {KINDS}")
    s = dict(SETTINGS, **settings)
    if s["prototypes"]:
        extra, extra_kinds = prototype_grids(int(s["prototypes"]), scheme, seed, grids.shape[-1])
        grids, labels = np.concatenate([grids, extra]), np.concatenate([labels, extra_kinds])
    if not len(labels):
        raise ValueError("nothing to train on: give labelled images or prototypes")
    index = {k: i for i, k in enumerate(scheme)}
    y = torch.tensor([index[x] for x in labels])
    x = torch.as_tensor(np.asarray(grids, dtype=np.float32))
    counts = torch.bincount(y, minlength=len(scheme)).float()
    weight = torch.where(counts > 0, counts.sum() / (len(scheme) * counts.clamp_min(1)), torch.zeros_like(counts))
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    with one_thread():
        return TrainedNet(_fit(PatternNet(len(scheme)), x, y, weight, s, generator).eval(), scheme)


def _fit(net: PatternNet, x: torch.Tensor, y: torch.Tensor, weight: torch.Tensor, s: Mapping[str, float],
         generator: torch.Generator) -> PatternNet:
    """The training loop of `train`: x [N, C, S, S], y [N] kind codes, class weights [K]."""
    optimizer = torch.optim.AdamW(net.parameters(), lr=s["lr"], weight_decay=s["weight_decay"])
    steps = int(s["epochs"]) * -(-len(y) // int(s["batch_size"]))
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=s["lr"], total_steps=steps)
    net.train()
    for _ in range(int(s["epochs"])):
        order = torch.randperm(len(y), generator=generator)
        for start in range(0, len(y), int(s["batch_size"])):
            pick = order[start:start + int(s["batch_size"])]
            xb = x[pick]
            flip = torch.rand(len(pick), generator=generator) < 0.5  # reversed token order
            xb = torch.where(flip[:, None, None, None], xb.flip(-1, -2), xb)
            loss = F.cross_entropy(net(xb), y[pick], weight=weight)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
    return net


def _key(grids: np.ndarray, labels: np.ndarray, *settings) -> str:
    digest = hashlib.sha256(np.ascontiguousarray(grids, dtype=np.float32).tobytes())
    digest.update(json.dumps([list(map(str, labels)), *map(str, settings)]).encode())
    return digest.hexdigest()


def _entry(grids: np.ndarray, labels: np.ndarray, seed: int, settings: Mapping[str, float],
           cache_dir: Path | str | None) -> Path | None:
    if cache_dir is None:
        return None
    return entry_path(cache_dir, "patternnet", _key(grids, labels, seed, sorted(settings.items())),
                      version=code_version(__name__))


def _train_state(grids: np.ndarray, labels: np.ndarray, seed: int, settings: Mapping[str, float]
                 ) -> dict[str, np.ndarray]:
    """`train`'s weights, as `TrainedNet.state` (what a worker process sends back)."""
    return train(grids, labels, seed, settings).state()


def train_many(jobs: Sequence[tuple[np.ndarray, Sequence[str], int]], settings: Mapping[str, float] = SETTINGS,
               cache_dir: Path | str | None = DEFAULT_CACHE_DIR, workers: int = 1) -> list[TrainedNet]:
    """`trained` for each job (grids [N, C, S, S], labels [N], seed): cached nets are read, the others trained,
    `workers` at once in fresh processes (each net trains on one thread, so a process gives the weights an in-place
    `train` gives), and cached. From a script, call it with workers > 1 under `if __name__ == "__main__":`."""
    jobs = [(grids, np.asarray(labels, dtype=object), int(seed)) for grids, labels, seed in jobs]
    paths = [_entry(grids, labels, seed, settings, cache_dir) for grids, labels, seed in jobs]
    states = [None if path is None else load_result(path) for path in paths]
    missing = [i for i, state in enumerate(states) if state is None]
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    workers = min(len(missing), workers)
    if workers > 1:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = {i: pool.submit(_train_state, *jobs[i], settings) for i in missing}
            fresh = {i: future.result() for i, future in futures.items()}
    else:
        fresh = {i: _train_state(*jobs[i], settings) for i in missing}
    for i, state in fresh.items():
        states[i] = state
        if paths[i] is not None:
            save_result(paths[i], state)
    return [TrainedNet.from_state(state) for state in states]


def trained(grids: np.ndarray, labels: Sequence[str], seed: int = 0, settings: Mapping[str, float] = SETTINGS,
            cache_dir: Path | str | None = DEFAULT_CACHE_DIR) -> TrainedNet:
    """`train`, cached by images, labels, seed, settings and this module's code."""
    return train_many([(grids, labels, seed)], settings, cache_dir, workers=1)[0]


@dataclass
class NetEnsemble:
    """Nets trained alike but for their seed; their probabilities averaged (a result that does not hang on one
    seed: single seeds scored macro-F1 0.54-0.62 under the same cross-validation, their mean 0.62)."""

    nets: list[TrainedNet]

    @property
    def kinds(self) -> tuple[str, ...]:
        return self.nets[0].kinds

    def probabilities(self, grids: np.ndarray, batch_size: int = 512) -> np.ndarray:
        """grids [N, C, S, S] -> [N, len(kinds)], the mean over the nets."""
        return np.mean([net.probabilities(grids, batch_size) for net in self.nets], axis=0)

    def predict(self, grids: np.ndarray) -> np.ndarray:
        """grids [N, C, S, S] -> kinds [N]."""
        return np.asarray(self.kinds, dtype=object)[self.probabilities(grids).argmax(1)]

    def state(self) -> dict[str, np.ndarray]:
        """Every net's weights, prefixed by its position, and the kinds."""
        return {"kinds": np.array(json.dumps(self.kinds)),
                **{f"{i}/{k}": v for i, net in enumerate(self.nets) for k, v in net.state().items()}}


SEEDS = (0, 1, 2, 3, 4)


def trained_ensemble(grids: np.ndarray, labels: Sequence[str], seeds: Sequence[int] = SEEDS,
                     settings: Mapping[str, float] = SETTINGS, cache_dir: Path | str | None = DEFAULT_CACHE_DIR,
                     workers: int = 1) -> NetEnsemble:
    """One `trained` (cached) net per seed, trained in parallel (`train_many`): about 10 s each on a CPU core."""
    if not len(seeds):
        raise ValueError("give at least one seed")
    return NetEnsemble(train_many([(grids, labels, s) for s in seeds], settings, cache_dir, workers))


def cross_validate_each(grids: np.ndarray, labels: Sequence[str], seeds: Sequence[int], folds: int = 5,
                        seed: int = 0, settings: Mapping[str, float] = SETTINGS,
                        cache_dir: Path | str | None = DEFAULT_CACHE_DIR, fold_of: Sequence[int] | None = None,
                        workers: int = 1) -> dict[int, pd.DataFrame]:
    """`cross_validate` of one net per seed of `seeds` (seed -> its out-of-fold predictions), with the same folds
    (`fold_of`, else `stratified_folds(labels, folds, seed)`) for every seed; every fold's net of every seed is
    trained at once (`train_many`)."""
    labels = np.asarray(labels, dtype=object)
    if not len(seeds):
        raise ValueError("give at least one seed")
    fold_of = check_folds(fold_of, len(labels), folds) if fold_of is not None else stratified_folds(labels, folds, seed)
    nets = iter(train_many([(grids[fold_of != f], labels[fold_of != f], s) for s in seeds for f in range(folds)],
                           settings, cache_dir, workers))

    def predict_fold(train: np.ndarray, test: np.ndarray) -> np.ndarray:  # called once per fold, in order
        return next(nets).probabilities(grids[test])

    return {int(s): out_of_fold(labels, predict_fold, folds, seed, fold_of) for s in seeds}


def cross_validate(grids: np.ndarray, labels: Sequence[str], folds: int = 5, seed: int = 0,
                   settings: Mapping[str, float] = SETTINGS, cache_dir: Path | str | None = DEFAULT_CACHE_DIR,
                   fold_of: Sequence[int] | None = None, seeds: Sequence[int] | None = None,
                   workers: int = 1) -> pd.DataFrame:
    """Out-of-fold predictions with the rules' folds (`evaluation.stratified_folds(labels, folds, seed)`, or
    `fold_of` [N] when given): a net trained (cached) on the other folds with `seed`, or an ensemble of one net
    per seed of `seeds` when given, predicts each fold. Returns `label`, `predicted`, `fold` and one probability
    column per kind (`p_vertical`, ...) per map. Every fold's nets are trained at once (`train_many`)."""
    labels = np.asarray(labels, dtype=object)
    fold_of = check_folds(fold_of, len(labels), folds) if fold_of is not None else stratified_folds(labels, folds, seed)
    use = (seed,) if seeds is None else tuple(seeds)
    if not use:
        raise ValueError("give at least one seed")
    nets = iter(train_many([(grids[fold_of != f], labels[fold_of != f], s) for f in range(folds) for s in use],
                           settings, cache_dir, workers))

    def predict_fold(train: np.ndarray, test: np.ndarray) -> np.ndarray:  # called once per fold, in order
        return NetEnsemble([next(nets) for _ in use]).probabilities(grids[test])

    return out_of_fold(labels, predict_fold, folds, seed, fold_of)
