"""Head importance and pruning (Michel, Levy & Neubig 2019, "Are Sixteen Heads Really Better than One?").

A head mask ξ [L, H] multiplies each head's attention probabilities (so its output, which is linear in them):
ξ = 1 everywhere is the model, ξ_h = 0 removes head h. Importance I_h = mean over inputs of |∂L/∂ξ_h| at ξ = 1,
L the cross-entropy of the fine-tuned classifier on the gold label (Michel et al.'s eq. 2; they also normalise
each layer's scores, which does not change the order within a layer). Pruning removes heads in a given order
and measures accuracy: by importance (least important first), in random orders (the baseline a pruning curve
needs, Budhraja et al. 2020), or every head of one Kovaleva pattern against random sets of the same size.

Both passes are reducers over a fine-tuned model's inputs (cached block by block). Importance is estimated on
one half of the test inputs and the curves are scored on the other half (`disabling.split_halves`), so the
order is never chosen on the inputs it is scored on.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from ..core import intervene
from ..core.cache import DEFAULT_CACHE_DIR
from ..engine.extract import Batch, RowReducer, reduce
from .finetune import FineTuned
from ..core.intervals import mean_interval
from ..data.tasks import Example


def mask_edit(mask: torch.Tensor) -> intervene.Edit:
    """An edit that multiplies head h of layer l by mask[l, h] (mask [L, H], or [B, L, H]: one per input)."""
    def edit(layer: int, probs: torch.Tensor) -> torch.Tensor:  # probs [B, H, T, T]
        scale = mask[..., layer, :]
        return probs * scale.reshape(*scale.shape[:-1], -1, 1, 1).to(probs.dtype)

    return edit


def _head_hash(tuned: FineTuned) -> str:
    head = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in tuned.head.parameters()))
    return head.hexdigest()[:16]


ROWS = 256  # inputs x masks per forward pass of MaskedLogits


def _logits(tuned: FineTuned, inputs: dict[str, torch.Tensor], mask: torch.Tensor) -> torch.Tensor:
    """[B, C]: the classifier's logits on padded `inputs` with head mask `mask` ([L, H] or [B, L, H])."""
    with intervene.edit_attention(tuned.encoder.model, mask_edit(mask)):
        hidden = tuned.encoder.model(**inputs).last_hidden_state
    return tuned.head(hidden[:, 0])


class MaskGradients(RowReducer):
    """Per input: `gradient` [L, H] = ∂L/∂ξ at ξ = 1 (L: cross-entropy on `labels[k]` for input k of the pass)."""

    name = "head_mask_gradients"
    needs_attention = False

    def __init__(self, tuned: FineTuned, labels: Sequence[int]):
        super().__init__()
        self.tuned, self.labels = tuned, [int(x) for x in labels]

    @property
    def key(self) -> str:
        labels = hashlib.sha256(np.array(self.labels).tobytes()).hexdigest()[:16]
        return f"{self.name}-{_head_hash(self.tuned)}-{labels}"

    def update(self, batch: Batch) -> None:
        encoder = self.tuned.encoder
        mask = torch.ones(len(batch.inputs), encoder.n_layers, encoder.n_heads, requires_grad=True)
        labels = torch.tensor(self.labels[batch.start:batch.start + len(batch.inputs)])
        with torch.enable_grad():
            loss = torch.nn.functional.cross_entropy(_logits(self.tuned, batch.model_inputs, mask), labels,
                                                     reduction="sum")
            (gradient,) = torch.autograd.grad(loss, mask)  # row b: input b's own gradient
        self.add(gradient=gradient.double().numpy())


class MaskedLogits(RowReducer):
    """Per input: `logits` [K, C] under each of K head masks `masks` [K, L, H]."""

    name = "head_mask_logits"
    needs_attention = False

    def __init__(self, tuned: FineTuned, masks: np.ndarray):
        super().__init__()
        self.tuned, self.masks = tuned, np.asarray(masks, dtype=np.float32)

    @property
    def key(self) -> str:
        return f"{self.name}-{_head_hash(self.tuned)}-{hashlib.sha256(self.masks.tobytes()).hexdigest()[:16]}"

    @torch.inference_mode()
    def update(self, batch: Batch) -> None:
        """Several masks per forward pass: the batch repeated once per mask, each copy with its own mask."""
        size = len(batch.inputs)
        step = max(1, ROWS // size)
        logits = []
        for start in range(0, len(self.masks), step):
            masks = torch.from_numpy(self.masks[start:start + step])  # [k, L, H]
            tiled = {key: value.repeat(len(masks), 1) for key, value in batch.model_inputs.items()}  # mask-major
            out = _logits(self.tuned, tiled, masks.repeat_interleave(size, 0))
            logits.append(out.unflatten(0, (len(masks), size)).transpose(0, 1))
        self.add(logits=torch.cat(logits, 1).numpy())  # [B, K, C]


def _run(tuned: FineTuned, examples: Sequence[Example], reducer: RowReducer, batch_size: int, cache_dir,
         progress: bool, desc: str) -> RowReducer:
    if not examples:
        raise ValueError("no examples: give at least one input of the task")
    reduce(tuned.encoder, [e.item for e in examples], [reducer], batch_size=batch_size, cache_dir=cache_dir,
           progress=progress, max_tokens=tuned.max_length, desc=desc)
    return reducer


def head_importance(tuned: FineTuned, examples: Sequence[Example], batch_size: int = 16,
                    cache_dir: Path | str | None = DEFAULT_CACHE_DIR, progress: bool = True) -> pd.DataFrame:
    """Per head (rows layer-major): layer, head (1-indexed), importance = mean over the examples of |∂L/∂ξ_h|
    (each example cut to the model's max_length), and its 95 % interval over examples (low, high)."""
    reducer = MaskGradients(tuned, [e.label for e in examples])
    _run(tuned, examples, reducer, batch_size, cache_dir, progress, f"head importance ({tuned.task})")
    values = np.abs(reducer.arrays["gradient"])  # [N, L, H]
    if len(values) < 2:
        raise ValueError("importance needs at least two examples (its interval is over examples)")
    rows = [(layer + 1, h + 1, *mean_interval(values[:, layer, h])) for layer in range(values.shape[1])
            for h in range(values.shape[2])]
    return pd.DataFrame(rows, columns=["layer", "head", "importance", "low", "high"])


def masks_from_orders(orders: Sequence[Sequence[int]], counts: Sequence[int], n_layers: int, n_heads: int
                      ) -> np.ndarray:
    """[len(orders) · len(counts), L, H]: for each order (head indices 0 … L·H−1, index = layer·H + head, 0-based)
    and each count k, the mask with the first k heads of the order removed."""
    total = n_layers * n_heads
    masks = []
    for order in orders:
        order = np.asarray(order)
        if sorted(order.tolist()) != list(range(total)):
            raise ValueError(f"an order must list every one of the {total} heads exactly once")
        for k in counts:
            if not 0 <= k <= total:
                raise ValueError(f"counts must be between 0 and {total}, got {k}")
            mask = np.ones(total, dtype=np.float32)
            mask[order[:k]] = 0
            masks.append(mask.reshape(n_layers, n_heads))
    return np.stack(masks)


def masked_accuracy(tuned: FineTuned, examples: Sequence[Example], masks: np.ndarray, batch_size: int = 16,
                    cache_dir: Path | str | None = DEFAULT_CACHE_DIR, progress: bool = True) -> np.ndarray:
    """correct bool [N, K]: whether the classifier gets each example right under each mask [K, L, H] (a mask
    that repeats, such as nothing removed in every order, runs once)."""
    masks = np.asarray(masks, dtype=np.float32)
    encoder = tuned.encoder
    if masks.ndim != 3 or masks.shape[1:] != (encoder.n_layers, encoder.n_heads):
        raise ValueError(f"masks must be [K, {encoder.n_layers}, {encoder.n_heads}], got {masks.shape}")
    unique, index = np.unique(masks, axis=0, return_inverse=True)
    reducer = MaskedLogits(tuned, unique)
    _run(tuned, examples, reducer, batch_size, cache_dir, progress, f"pruning heads ({tuned.task})")
    correct = reducer.arrays["logits"].argmax(-1) == np.array([e.label for e in examples])[:, None]
    return correct[:, index.ravel()]


def pruning_curves(tuned: FineTuned, selection: Sequence[Example], evaluation: Sequence[Example],
                   shares: Sequence[float] = tuple(np.linspace(0, 1, 11)), n_random: int = 5, seed: int = 0,
                   **options) -> pd.DataFrame:
    """Accuracy on `evaluation` with a share of the heads removed: least important first (importance from
    `selection`), and in `n_random` random orders. Long frame: order ("importance" or "random <r>"), share (as
    asked), heads (removed: the share of all heads, rounded), accuracy."""
    encoder = tuned.encoder
    total = encoder.n_layers * encoder.n_heads
    importance = head_importance(tuned, selection, **options)["importance"].to_numpy()
    rng = np.random.default_rng(seed)
    orders = {"importance": np.argsort(importance, kind="stable")}
    orders.update({f"random {r + 1}": rng.permutation(total) for r in range(n_random)})
    if any(not 0 <= s <= 1 for s in shares):
        raise ValueError(f"shares must be between 0 and 1, got {list(shares)}")
    counts = [int(round(s * total)) for s in shares]
    correct = masked_accuracy(tuned, evaluation, masks_from_orders(list(orders.values()), counts, encoder.n_layers,
                                                                   encoder.n_heads), **options)
    rows = [(name, share, k, correct[:, i * len(counts) + c].mean())
            for i, name in enumerate(orders) for c, (share, k) in enumerate(zip(shares, counts))]
    return pd.DataFrame(rows, columns=["order", "share", "heads", "accuracy"])


def dominant_kinds(kinds: np.ndarray) -> np.ndarray:
    """kinds [N, L, H] (one kind per map) -> [L, H]: each head's most common kind (ties: the first in sort order)."""
    kinds = np.asarray(kinds)
    out = np.empty(kinds.shape[1:], dtype=object)
    for index in np.ndindex(*kinds.shape[1:]):
        values, counts = np.unique(kinds[(slice(None),) + index], return_counts=True)
        out[index] = values[np.argmax(counts)]
    return out


def pattern_removal(tuned: FineTuned, evaluation: Sequence[Example], dominant: np.ndarray, n_random: int = 10,
                    seed: int = 0, **options) -> pd.DataFrame:
    """Accuracy on `evaluation` with every head of one dominant pattern removed (`dominant` [L, H], see
    `dominant_kinds`), beside `n_random` random sets of as many heads. One row per pattern: kind, heads,
    accuracy, random (mean), random low / high (lowest and highest of the random sets), and none (nothing
    removed)."""
    encoder = tuned.encoder
    dominant = np.asarray(dominant)
    if dominant.shape != (encoder.n_layers, encoder.n_heads):
        raise ValueError(f"dominant must be [{encoder.n_layers}, {encoder.n_heads}], got {dominant.shape}")
    rng = np.random.default_rng(seed)
    kinds = sorted(set(dominant.ravel()))
    masks = [np.ones(dominant.shape, dtype=np.float32)]
    for kind in kinds:
        masks.append((dominant != kind).astype(np.float32))
        size = int((dominant == kind).sum())
        for _ in range(n_random):
            mask = np.ones(dominant.size, dtype=np.float32)
            mask[rng.choice(dominant.size, size, replace=False)] = 0
            masks.append(mask.reshape(dominant.shape))
    accuracy = masked_accuracy(tuned, evaluation, np.stack(masks), **options).mean(0)
    rows = []
    for i, kind in enumerate(kinds):
        start = 1 + i * (n_random + 1)
        random = accuracy[start + 1:start + 1 + n_random]
        rows.append((kind, int((dominant == kind).sum()), accuracy[start], random.mean(), random.min(), random.max(),
                     accuracy[0]))
    return pd.DataFrame(rows, columns=["kind", "heads", "accuracy", "random", "random low", "random high", "none"])
