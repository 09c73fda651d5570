"""Fixing the sink at training time, on a toy (notebook 11, section 7; Bondarenko et al. 2023's setting).

A tiny post-LayerNorm encoder (BERT's layout: token + position embedding, LayerNorm, then per layer
self-attention + residual + LayerNorm, MLP + residual + LayerNorm) is trained from scratch on a synthetic task in
which a head has nothing to do for most tokens, with four ways of letting it do nothing and a positive control:

- "softmax": plain softmax, the control. A row must put all its weight somewhere.
- "softmax1": `sinks.softmax1`, an empty slot of logit 0 (Miller 2023; gpt-oss learns it per head).
- "clipped": `sinks.clipped_softmax` with Bondarenko et al. 2023's setting gamma = -alpha / T (T the sequence
  length, alpha = ALPHA, their range 2-4): a whole row can clip to 0, so a head can do nothing.
- "gated": softmax, and each head's output multiplied by sigmoid(w . x + b) of the token's own input x (a
  per-head output gate: Bondarenko et al.'s gated attention; Qwen3-Next's gate after attention). The gate, not
  the attention weights, can do the no-op: `gate` and `gate_query` report it.
- "sigmoid": sigmoid(score) per key, no normalisation (Gu et al. 2025's sigmoid attention, which trains without a
  sink): a positive control, a normaliser known to remove the sink.

The task ("lookup among no-ops"). A sequence of `length` tokens: a fixed start token BOS (position 0, the [CLS]-like
delimiter), then random digits 0..K-1, `n_queries` of them, at odd positions before the last, written in their query
form (embedded as the digit plus a learned query flag). Every position but BOS is labelled: a plain digit with its
own digit, a query with the next token's digit plus one, modulo K. So only the query rows need attention (to the
next position); every other row is best left unchanged, its label being in the token itself.

Each choice closes an escape that, when tried, let a head do nothing without a sink: (1) the target is found by
position, not by a special vocabulary entry, so every digit's value must carry its digit — a head cannot give the
distractors zero values; (2) a query carries a digit of its own that is not its label, so the value read must
outweigh a full digit signal in the residual stream — with an empty query token small values did, the noise they
mixed into the other rows was harmless, and no sink formed (mean weight on BOS 0.24-0.38 over 3 seeds); (3) the "+1"
means a digit's value writes a label that is wrong for every digit row, its own included, so attending to itself is
no way out; (4) few heads (2), so the heads cannot be switched off wholesale. Under plain softmax a row cannot
attend to nothing, and the cheapest place to park it is a token whose value is the same in every sequence: BOS,
always token 0 at position 0 — the model learns a sink there, as BERT parks on [CLS]/[SEP] (Clark et al. 2019's no-
op reading, Gu et al. 2025's account). The variants give it other ways out. `bos=False` puts a random digit at
position 0 instead (no free sink token).

Metrics, on held-out sequences (one shared held-out set, fixed by `eval_seed`):
- accuracy over all labelled positions, and `query_accuracy` at the query positions (chance 1/K): the part that
  needs attention.
- `sink_mass`: the mean attention weight on BOS, over all attention rows, heads, layers and inputs; `sink_rate`: Gu
  et al.'s metric for BOS (the share of the L x H heads whose mean weight on BOS exceeds eps = 0.3), averaged over
  inputs. Both are computed from the weights as they are: softmax1 and clipped rows need not sum to 1, so
  `sinks.sink_rate` (which checks that they do) is used for nothing but the check that the two agree on softmax.
- `empty_mass`: the mean of 1 - (row sum): the weight on softmax1's empty slot (0 for softmax and gated).
- before the LayerNorm, where a post-LayerNorm model's large values live (the hidden states after it are capped
  near sqrt(width - 1)): `activation_ratio`, Sun et al. (2024)'s max |x| / median |x| of the residual sum entering
  each layer's last LayerNorm (all held-out tokens and dimensions), the largest over the layers, and
  `ratio_layer<i>` per layer (1-indexed); `ffn_max` and `ffn_kurtosis`, Bondarenko et al.'s measures of the
  feed-forward output: its largest |value| and the kurtosis of its values, the largest over the layers.
- `gate`, `gate_query`: the mean gate value on the non-query rows and on the query rows of the gated variant
  (NaN for the others).

What the toy can show: which normaliser lets a head no-op without a sink and without large activations, when the
data make no-op the right behaviour. What it cannot: a pretrained model's sink comes from language-model
training at scale; a one- or two-layer toy on a designed task says nothing about its size or where it sits.
"""
from __future__ import annotations

import dataclasses
import json
import math
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn
from tqdm.auto import tqdm

from ...core.cache import DEFAULT_CACHE_DIR, entry_path, load_result, save_result
from ...core.frames import frame_arrays, frame_from
from ...core.source import code_version
from ..probes import deterministic
from . import EPS, clipped_softmax, softmax1

VARIANTS = ("softmax", "softmax1", "clipped", "gated", "sigmoid")
ALPHA = 4.0  # clipped softmax: gamma = -ALPHA / T (Bondarenko et al. 2023 use alpha from 2 to 4)
BOS = 0  # token ids: BOS 0, digit d 2 + d, the query form of digit d 2 + K + d (1 is unused)
IGNORE = -100  # label of BOS (cross-entropy's ignore_index)


# -- the task ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ToyTask:
    """The lookup-among-no-ops task: `n_digits` digits K, sequences of `length` tokens (BOS first when `bos`),
    `n_queries` query tokens per sequence."""

    n_digits: int = 32
    length: int = 16
    n_queries: int = 1
    bos: bool = True

    def __post_init__(self):
        if self.n_digits < 2:
            raise ValueError(f"n_digits must be 2 or more, got {self.n_digits}")
        if self.n_queries < 1 or self.n_queries > (self.length - 2) // 2:
            raise ValueError(f"n_queries must be 1 to (length - 2) // 2 (one odd slot before the last each): got "
                             f"length={self.length}, n_queries={self.n_queries}")

    @property
    def vocab_size(self) -> int:
        return 2 + 2 * self.n_digits

    def is_query(self, tokens: torch.Tensor) -> torch.Tensor:
        """Which of token ids [B, n] are queries: [B, n] bool."""
        return tokens >= 2 + self.n_digits


def task_labels(tokens: torch.Tensor, task: ToyTask) -> torch.Tensor:
    """The labels of token ids [B, n]: a digit's own digit; at a query, the next token's digit plus one, modulo K
    (whatever its own digit); IGNORE at BOS: [B, n] long. A row needs BOS at position 0 only (a digit there when
    not task.bos) and a plain digit after each query."""
    tokens = torch.as_tensor(tokens)
    k = task.n_digits
    if tokens.ndim != 2 or tokens.shape[1] < 2 or tokens.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"tokens must be integer ids [batch, n], got {tuple(tokens.shape)} {tokens.dtype}")
    if tokens.min() < 0 or tokens.max() >= task.vocab_size or (tokens == 1).any():
        raise ValueError(f"tokens must be ids 0 or 2..{task.vocab_size - 1}")
    query = task.is_query(tokens)
    first = tokens[:, 0] == BOS if task.bos else tokens[:, 0] >= 2
    if not first.all() or (tokens[:, 1:] == BOS).any() or query[:, -1].any() or (query[:, :-1] & query[:, 1:]).any():
        raise ValueError(f"tokens: every row needs {'BOS' if task.bos else 'a digit'} at position 0, BOS nowhere else, "
                         "and a plain digit after each query")
    digit = (tokens.long() - 2) % k
    following = torch.cat([digit[:, 1:], digit[:, :1]], dim=1)  # the next token's digit
    labels = torch.where(query, (following + 1) % k, digit)
    if task.bos:
        labels[:, 0] = IGNORE
    return labels


def make_batch(task: ToyTask, size: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """`size` random sequences of the task, drawn from `generator`: (tokens [size, n], labels [size, n]) long.
    The query positions are drawn among the odd positions before the last, so a plain digit follows each."""
    if size < 1:
        raise ValueError(f"size must be 1 or more, got {size}")
    n, k = task.length, task.n_digits
    tokens = 2 + torch.randint(0, k, (size, n), generator=generator)
    if task.bos:
        tokens[:, 0] = BOS
    slots = torch.arange(1, n - 1, 2)  # odd positions 1, 3, ... < n - 1
    pick = slots[torch.argsort(torch.rand(size, len(slots), generator=generator), dim=1)[:, :task.n_queries]]
    rows = torch.arange(size)[:, None]
    tokens[rows, pick] += k
    return tokens, task_labels(tokens, task)


# -- the model ------------------------------------------------------------------------------------------------------
def clipped_gamma(alpha: float, length: int) -> float:
    """Bondarenko et al.'s gamma = -alpha / T for sequences of T = `length` tokens."""
    if not alpha >= 0 or length < 1:
        raise ValueError(f"alpha must be >= 0 and length >= 1, got alpha={alpha}, length={length}")
    return -alpha / length


def normaliser(variant: str, alpha: float = ALPHA, length: int = 16) -> Callable[[torch.Tensor], torch.Tensor]:
    """The attention normaliser of a variant, scores [..., n] -> weights [..., n] along the last axis (`alpha`
    and the sequence `length` set the clipped softmax's gamma, `clipped_gamma`)."""
    check_variants([variant])
    if variant == "softmax1":
        return softmax1
    if variant == "clipped":
        return partial(clipped_softmax, gamma=clipped_gamma(alpha, length))
    if variant == "sigmoid":
        return torch.sigmoid
    return partial(torch.softmax, dim=-1)


class ToyAttention(nn.Module):
    """Multi-head self-attention with a pluggable normaliser and, if `gated`, a per-head output gate
    sigmoid(gate(x)) [B, n, H] multiplying each head's output at each token."""

    def __init__(self, width: int, heads: int, normalise: Callable[[torch.Tensor], torch.Tensor],
                 gated: bool = False):
        super().__init__()
        if heads < 1 or width % heads:
            raise ValueError(f"width must be a multiple of heads, got width={width}, heads={heads}")
        self.heads, self.normalise = heads, normalise
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)
        self.gate = nn.Linear(width, heads) if gated else None

    def head_outputs(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x [B, n, d] -> (each head's gated output [B, H, n, d/H], weights [B, H, n, n])."""
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        weights = self.normalise(q @ k.transpose(-1, -2) / math.sqrt(d // self.heads))
        heads = weights @ v
        if self.gate is not None:
            heads = heads * torch.sigmoid(self.gate(x)).transpose(1, 2)[..., None]
        return heads, weights

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x [B, n, d] -> (output [B, n, d], weights [B, H, n, n])."""
        heads, weights = self.head_outputs(x)
        return self.out(heads.transpose(1, 2).flatten(2)), weights


class ToyLayer(nn.Module):
    """Post-LayerNorm encoder layer (BERT's): h = LN(x + attn(x)); out = LN(h + MLP(h))."""

    def __init__(self, width: int, heads: int, normalise: Callable, gated: bool):
        super().__init__()
        self.attention = ToyAttention(width, heads, normalise, gated)
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """x [B, n, d] -> (output, weights [B, H, n, n], the feed-forward output, the sum entering norm2)."""
        update, weights = self.attention(x)
        h = self.norm1(x + update)
        ffn = self.mlp(h)
        return self.norm2(h + ffn), weights, ffn, h + ffn


@dataclass(frozen=True)
class ToyRun:
    """One forward pass kept whole: logits [B, n, K], weights [L, B, H, n, n], hidden [L, B, n, d] (after each
    layer), ffn and summed [L, B, n, d] (each layer's feed-forward output, and the sum entering its last
    LayerNorm), gates [L, B, n, H] (None unless gated)."""

    logits: torch.Tensor
    weights: torch.Tensor
    hidden: torch.Tensor
    ffn: torch.Tensor
    summed: torch.Tensor
    gates: torch.Tensor | None


class ToyEncoder(nn.Module):
    """Token + position embedding, LayerNorm, `layers` ToyLayers, a per-token classifier over the K digits."""

    def __init__(self, task: ToyTask, variant: str = "softmax", width: int = 32, heads: int = 2, layers: int = 1,
                 alpha: float = ALPHA):
        super().__init__()
        if layers < 1:
            raise ValueError(f"layers must be 1 or more, got {layers}")
        self.task, self.variant = task, variant
        normalise = normaliser(variant, alpha, task.length)
        self.tokens = nn.Embedding(2 + task.n_digits, width)  # a query embeds as its digit plus the query flag
        self.query_flag = nn.Parameter(torch.zeros(width).normal_(std=1.0))
        self.positions = nn.Embedding(task.length, width)
        self.norm = nn.LayerNorm(width)
        self.layers = nn.ModuleList(ToyLayer(width, heads, normalise, variant == "gated") for _ in range(layers))
        self.classifier = nn.Linear(width, task.n_digits)

    def run(self, tokens: torch.Tensor) -> ToyRun:
        """The forward pass with its weights, hidden states and gates (see ToyRun)."""
        if tokens.ndim != 2 or tokens.shape[1] != self.task.length:
            raise ValueError(f"tokens must be [batch, {self.task.length}], got {tuple(tokens.shape)}")
        query = self.task.is_query(tokens)
        plain = torch.where(query, tokens - self.task.n_digits, tokens)
        x = self.norm(self.tokens(plain) + query[..., None] * self.query_flag + self.positions.weight)
        weights, hidden, ffns, sums, gates = [], [], [], [], []
        for layer in self.layers:
            gate = layer.attention.gate
            if gate is not None:
                gates.append(torch.sigmoid(gate(x)))
            x, w, ffn, summed = layer(x)
            weights.append(w)
            hidden.append(x)
            ffns.append(ffn)
            sums.append(summed)
        return ToyRun(self.classifier(x), torch.stack(weights), torch.stack(hidden), torch.stack(ffns),
                      torch.stack(sums), torch.stack(gates) if gates else None)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens [B, n] -> logits [B, n, K]."""
        return self.run(tokens).logits


def build_model(task: ToyTask, variant: str, seed: int, width: int = 32, heads: int = 2, layers: int = 1,
                alpha: float = ALPHA) -> ToyEncoder:
    """A fresh ToyEncoder, initialised from torch.manual_seed(seed) (the global state is restored after)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return ToyEncoder(task, variant, width, heads, layers, alpha)


# -- training and measuring ---------------------------------------------------------------------------------------
def check_variants(variants: Sequence[str]) -> list[str]:
    variants = [variants] if isinstance(variants, str) else list(variants)
    unknown = [v for v in variants if v not in VARIANTS]
    if not variants or unknown:
        raise ValueError(f"variants must be some of {VARIANTS}, got {variants}")
    return variants


def train(model: ToyEncoder, steps: int, seed: int, batch_size: int = 64, lr: float = 3e-3) -> float:
    """Train `model` in place for `steps` AdamW steps on fresh batches from torch.Generator(seed): the last
    step's loss."""
    if steps < 1 or batch_size < 1:
        raise ValueError(f"steps and batch_size must be 1 or more, got steps={steps}, batch_size={batch_size}")
    generator = torch.Generator().manual_seed(seed)
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, lambda step: min(1.0, (step + 1) / (steps / 10 + 1)))
    model.train()
    for _ in range(steps):
        tokens, labels = make_batch(model.task, batch_size, generator)
        loss = nn.functional.cross_entropy(model(tokens).flatten(0, 1), labels.flatten(), ignore_index=IGNORE)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        schedule.step()
    return float(loss.detach())


@torch.inference_mode()
def measure(model: ToyEncoder, tokens: torch.Tensor, labels: torch.Tensor, eps: float = EPS) -> dict[str, float]:
    """The metrics of the module docstring for held-out tokens / labels [B, n]: a dict of floats."""
    model.eval()
    run = model.run(tokens)
    hit = run.logits.argmax(-1) == labels
    query = model.task.is_query(tokens)
    bos = run.weights[..., 0].mean(-1)  # [L, B, H]: the mean weight each head puts on BOS over its query rows
    flat = run.summed.abs().flatten(1)  # [L, B * n * d], before the LayerNorm
    ratios = (flat.amax(1) / flat.median(1).values).numpy()
    ffn = run.ffn.double().flatten(1)  # [L, B * n * d]
    centred = ffn - ffn.mean(1, keepdim=True)
    kurtosis = (centred.pow(4).mean(1) / centred.pow(2).mean(1).pow(2)).numpy()
    gates = run.gates.permute(1, 2, 0, 3) if run.gates is not None else None  # [B, n, L, H]
    out = {"accuracy": float(hit[labels != IGNORE].float().mean()),
           "query_accuracy": float(hit[query].float().mean()),
           "chance": 1 / model.task.n_digits,
           "sink_mass": float(bos.mean()),
           "sink_rate": float((bos > eps).float().mean()),
           "empty_mass": float((1 - run.weights.sum(-1)).mean()),
           "activation_ratio": float(ratios.max()),
           "ffn_max": float(ffn.abs().max()),
           "ffn_kurtosis": float(kurtosis.max()),
           "gate": float(gates[~query].mean()) if gates is not None else math.nan,
           "gate_query": float(gates[query].mean()) if gates is not None else math.nan}
    out.update({f"ratio_layer{i}": float(r) for i, r in enumerate(ratios, 1)})
    return out


def train_variants(variants: Sequence[str] = VARIANTS, seeds: Sequence[int] = (0, 1, 2), steps: int = 1000,
                   task: ToyTask = ToyTask(), width: int = 32, heads: int = 2, layers: int = 1,
                   batch_size: int = 64, lr: float = 3e-3, alpha: float = ALPHA, n_eval: int = 512,
                   eval_seed: int = 10_000, cache_dir: Path | str | None = DEFAULT_CACHE_DIR,
                   progress: bool = True) -> pd.DataFrame:
    """Train one toy per (variant, seed) and measure it on one shared held-out set (torch.Generator(eval_seed)):
    one row per variant and seed, columns variant, seed, steps, loss (last training step), seconds (training, when
    it ran), and the metrics of `measure`. Deterministic: one thread, deterministic algorithms, seeded init and
    data. Cached (cache_dir) by every argument, the torch version and this module's code; None recomputes."""
    variants = check_variants(variants)
    seeds = list(seeds)
    if not seeds or len(set(seeds)) != len(seeds) or not all(isinstance(s, (int, np.integer)) for s in seeds):
        raise ValueError(f"seeds must be distinct integers, at least one, got {seeds}")
    if n_eval < 1:
        raise ValueError(f"n_eval must be 1 or more, got {n_eval}")
    settings = json.dumps([variants, [int(s) for s in seeds], steps, dataclasses.asdict(task), width, heads, layers,
                           batch_size, lr, alpha, n_eval, eval_seed])
    path = None
    if cache_dir is not None:
        path = entry_path(cache_dir, "toy-sinks", settings, torch.__version__, version=code_version(__name__))
        cached = load_result(path)
        if cached is not None:
            return frame_from(cached, "runs")
    held_out = make_batch(task, n_eval, torch.Generator().manual_seed(eval_seed))
    rows = []
    runs = [(variant, int(seed)) for variant in variants for seed in seeds]
    with deterministic(), tqdm(runs, desc="training toy encoders", unit="run", disable=not progress) as bar:
        for variant, seed in bar:
            model = build_model(task, variant, seed, width, heads, layers, alpha)
            start = time.perf_counter()
            loss = train(model, steps, seed, batch_size, lr)
            seconds = time.perf_counter() - start
            rows.append({"variant": variant, "seed": seed, "steps": steps, "loss": loss, "seconds": seconds,
                         **measure(model, *held_out)})
    frame = pd.DataFrame(rows)
    if path is not None:
        save_result(path, frame_arrays(frame, "runs"))
    return frame


def variant_summary(frame: pd.DataFrame, columns: Sequence[str] = ("query_accuracy", "accuracy", "sink_mass",
                                                                   "sink_rate", "empty_mass", "activation_ratio",
                                                                   "seconds")) -> pd.DataFrame:
    """train_variants' frame -> one row per variant (in the frame's order), columns (metric, mean / std / min /
    max) over the seeds."""
    missing = [c for c in ("variant", *columns) if c not in frame.columns]
    if missing:
        raise ValueError(f"frame lacks the columns {missing}")
    order = list(dict.fromkeys(frame["variant"]))
    return frame.groupby("variant")[list(columns)].agg(["mean", "std", "min", "max"]).loc[order]
