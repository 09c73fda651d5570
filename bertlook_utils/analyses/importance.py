"""Head importance and pruning (Michel, Levy & Neubig 2019, "Are Sixteen Heads Really Better than One?").

A head mask ξ [L, H] multiplies each head's attention probabilities (so its output, which is linear in them):
ξ = 1 everywhere is the model, ξ_h = 0 removes head h. Importance I_h = mean over inputs of |∂L/∂ξ_h| at ξ = 1,
L the cross-entropy of the fine-tuned classifier on the gold label (Michel et al.'s eq. 2). Michel et al.'s BERT
runs also divide each layer's scores by their ℓ2 norm over the layer's heads (`--normalize_pruning_by_layer`);
pruning sorts all heads together, so this changes which heads go first. `pruning_curves` removes heads in both
orders (normalised, the default "importance", and "raw importance"), and in random orders (the baseline a
pruning curve needs, Budhraja et al. 2020); `curve_areas` compares the orders' areas under the curve with a paired
bootstrap over inputs. `pattern_removal` removes every head of one Kovaleva pattern against random sets matched
by layer, and can remove only those heads' [CLS] column instead (renormalised, notebook 02's ablation).

Both passes are reducers over a fine-tuned model's inputs (cached block by block), which go through the model
shortest first; the masked pass computes the last layer's [CLS] row alone (`clspass`). Importance is estimated on
one half of the test inputs and the curves are scored on the other half (`disabling.split_halves`), so the
order is never chosen on the inputs it is scored on.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from ..core import intervene
from ..core.cache import DEFAULT_CACHE_DIR
from ..engine.extract import Batch, RowReducer, reduce
from . import clspass
from .finetune import FineTuned
from ..core.intervals import bootstrap_interval, mean_interval
from ..data.tasks import Example


def mask_edit(mask: torch.Tensor, drain: torch.Tensor | None = None, cls: torch.Tensor | None = None,
              valid: torch.Tensor | None = None) -> intervene.Edit:
    """An edit that multiplies head h of layer l by mask[l, h] (mask [L, H], or [B, L, H]: one per input). With
    `drain` (0/1, shaped as mask), the heads where drain is 1 first lose their `cls` columns (bool [B, T]), whose
    mass goes to the other `valid` tokens (bool [B, T]) in proportion (`intervene.redistribute`, "renormalise")."""
    def edit(layer: int, probs: torch.Tensor) -> torch.Tensor:  # probs [B, H, T, T]
        if drain is not None and drain[..., layer, :].any():
            flags = drain[..., layer, :]
            flags = flags.reshape(*flags.shape[:-1], -1, 1, 1).to(probs)  # [(B,) H, 1, 1]
            column = cls[:, None, None, :].to(probs)  # [B, 1, 1, T]
            receivers = (valid & ~cls)[:, None, None, :].to(probs)
            probs = intervene.redistribute(probs, probs * column * flags, receivers, "renormalise")
        scale = mask[..., layer, :]
        return probs * scale.reshape(*scale.shape[:-1], -1, 1, 1).to(probs)  # on the model's device, in its dtype

    return edit


def _head_hash(tuned: FineTuned) -> str:
    head = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in tuned.head.parameters()))
    return head.hexdigest()[:16]


ROWS = 256  # inputs x masks per forward pass of MaskedLogits


def _logits(tuned: FineTuned, inputs: dict[str, torch.Tensor], mask: torch.Tensor, drain: torch.Tensor | None = None,
            cls: torch.Tensor | None = None, fast: bool = False) -> torch.Tensor:
    """[B, C]: the classifier's logits on padded `inputs` with head mask `mask` ([L, H] or [B, L, H]) and, where
    `drain` (shaped as mask) is 1, the `cls` columns (bool [B, T]) moved to the other tokens (see `mask_edit`);
    `fast`: the last layer computes the [CLS] row alone (`clspass.cls_states`)."""
    edit = mask_edit(mask, drain, cls, inputs["attention_mask"].bool())
    return tuned.head(clspass.cls_states(tuned.encoder.model, inputs, edit, fast))


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
    """Per input: `logits` [K, C] under each of K head masks `masks` [K, L, H] (and, with `drains` [K, L, H], the
    [CLS] column of the heads where drains is 1 moved to the other tokens, see `mask_edit`)."""

    name = "head_mask_logits"
    needs_attention = False

    def __init__(self, tuned: FineTuned, masks: np.ndarray, drains: np.ndarray | None = None):
        super().__init__()
        self.tuned, self.masks = tuned, np.asarray(masks, dtype=np.float32)
        self.drains = None if drains is None or not np.any(drains) else np.asarray(drains, dtype=np.float32)

    @property
    def key(self) -> str:
        drains = "" if self.drains is None else f"-cls-{hashlib.sha256(self.drains.tobytes()).hexdigest()[:16]}"
        return (f"{self.name}-{_head_hash(self.tuned)}-{hashlib.sha256(self.masks.tobytes()).hexdigest()[:16]}"
                f"{drains}")

    @torch.inference_mode()
    def update(self, batch: Batch) -> None:
        """Several masks per forward pass: the batch repeated once per mask, each copy with its own mask; the last
        layer computes the [CLS] row alone where it gives the whole layer's answer on this batch's first input,
        checked with every head kept (and the first drain there is): under a mask that removes every head, any
        step would agree."""
        size = len(batch.inputs)
        step = max(1, ROWS // size)
        first = {key: value[:1] for key, value in batch.model_inputs.items()}
        drain = None if self.drains is None else torch.from_numpy(self.drains[int(self.drains.any((1, 2)).argmax())])
        fast = clspass.first_token_agrees(self.tuned.encoder.model, first, mask_edit(
            torch.ones(self.masks.shape[1:]), drain, batch.is_cls[:1], first["attention_mask"].bool()))
        logits = []
        for start in range(0, len(self.masks), step):
            masks = torch.from_numpy(self.masks[start:start + step])  # [k, L, H]
            tiled = {key: value.repeat(len(masks), 1) for key, value in batch.model_inputs.items()}  # mask-major
            drain = None if self.drains is None else torch.from_numpy(
                self.drains[start:start + step]).repeat_interleave(size, 0)
            out = _logits(self.tuned, tiled, masks.repeat_interleave(size, 0), drain,
                          batch.is_cls.repeat(len(masks), 1), fast)
            logits.append(out.unflatten(0, (len(masks), size)).transpose(0, 1))
        self.add(logits=torch.cat(logits, 1).numpy())  # [B, K, C]


def _run(tuned: FineTuned, examples: Sequence[Example], make: Callable[[list[Example]], RowReducer],
         batch_size: int, cache_dir, progress: bool, desc: str) -> RowReducer:
    """The reducer `make(examples in the order they run)` with its rows in the examples' order; they go through the
    model shortest first (less padding)."""
    if not examples:
        raise ValueError("no examples: give at least one input of the task")
    order = clspass.length_order(tuned, examples)
    reducer = make([examples[i] for i in order])
    reduce(tuned.encoder, [examples[i].item for i in order], [reducer], batch_size=batch_size,
           cache_dir=cache_dir, progress=progress, max_tokens=tuned.max_length, desc=desc)
    for key, rows in reducer.arrays.items():
        reducer.arrays[key] = np.empty_like(rows)
        reducer.arrays[key][order] = rows
    return reducer


def head_importance(tuned: FineTuned, examples: Sequence[Example], batch_size: int = 16,
                    cache_dir: Path | str | None = DEFAULT_CACHE_DIR, progress: bool = True) -> pd.DataFrame:
    """Per head (rows layer-major): layer, head (1-indexed), importance = mean over the examples of |∂L/∂ξ_h|
    (each example cut to the model's max_length), its 95 % interval over examples (low, high), and normalised
    (importance divided by the ℓ2 norm of its layer's importances, `normalise_by_layer`)."""
    reducer = _run(tuned, examples, lambda ordered: MaskGradients(tuned, [e.label for e in ordered]), batch_size,
                   cache_dir, progress, f"head importance ({tuned.task})")
    values = np.abs(reducer.arrays["gradient"])  # [N, L, H]
    if len(values) < 2:
        raise ValueError("importance needs at least two examples (its interval is over examples)")
    rows = [(layer + 1, h + 1, *mean_interval(values[:, layer, h])) for layer in range(values.shape[1])
            for h in range(values.shape[2])]
    table = pd.DataFrame(rows, columns=["layer", "head", "importance", "low", "high"])
    shape = values.shape[1:]
    table["normalised"] = normalise_by_layer(table["importance"].to_numpy().reshape(shape)).ravel()
    return table


def normalise_by_layer(importance: np.ndarray) -> np.ndarray:
    """[L, H] -> [L, H]: each layer's scores divided by their ℓ2 norm over the layer's heads (Michel et al.'s
    `--normalize_pruning_by_layer`; a layer of zeros stays zero)."""
    importance = np.asarray(importance, dtype=float)
    norm = np.linalg.norm(importance, axis=-1, keepdims=True)
    return importance / np.where(norm > 0, norm, 1.0)


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


def masked_accuracy(tuned: FineTuned, examples: Sequence[Example], masks: np.ndarray,
                    drains: np.ndarray | None = None, batch_size: int = 16,
                    cache_dir: Path | str | None = DEFAULT_CACHE_DIR, progress: bool = True) -> np.ndarray:
    """correct bool [N, K]: whether the classifier gets each example right under each mask [K, L, H] (with
    `drains` [K, L, H]: also the [CLS] column of the heads where it is 1 moved to the other tokens; see
    `mask_edit`). A mask that repeats, such as nothing removed in every order, runs once."""
    masks = np.asarray(masks, dtype=np.float32)
    encoder = tuned.encoder
    if masks.ndim != 3 or masks.shape[1:] != (encoder.n_layers, encoder.n_heads):
        raise ValueError(f"masks must be [K, {encoder.n_layers}, {encoder.n_heads}], got {masks.shape}")
    drains = np.zeros_like(masks) if drains is None else np.asarray(drains, dtype=np.float32)
    if drains.shape != masks.shape:
        raise ValueError(f"drains must have the masks' shape {masks.shape}, got {drains.shape}")
    unique, index = np.unique(np.stack([masks, drains], 1), axis=0, return_inverse=True)
    reducer = _run(tuned, examples, lambda ordered: MaskedLogits(tuned, unique[:, 0], unique[:, 1]), batch_size,
                   cache_dir, progress, f"pruning heads ({tuned.task})")
    correct = reducer.arrays["logits"].argmax(-1) == np.array([e.label for e in examples])[:, None]
    return correct[:, index.ravel()]


SHARES = (0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0)  # shares of the heads removed that `pruning_curves` measures


@dataclass(frozen=True)
class PruningCurves:
    """`pruning_curves`' result. frame: long, one row per order and share: order ("importance", normalised by
    layer; "raw importance"; "random <r>"), share (as asked), heads (removed: the share of all heads, rounded),
    accuracy. correct: bool [N, O, S], input n right with order o's first share s of the heads removed (orders
    and shares as in `orders` and `shares`)."""

    frame: pd.DataFrame
    correct: np.ndarray
    orders: tuple[str, ...]
    shares: tuple[float, ...]


def pruning_curves(tuned: FineTuned, selection: Sequence[Example], evaluation: Sequence[Example],
                   shares: Sequence[float] = SHARES, n_random: int = 20, seed: int = 0,
                   **options) -> PruningCurves:
    """Accuracy on `evaluation` with a share of the heads removed: least important first (importance from
    `selection`, normalised by layer and raw), and in `n_random` random orders; every mask in one pass."""
    encoder = tuned.encoder
    total = encoder.n_layers * encoder.n_heads
    table = head_importance(tuned, selection, **options)
    rng = np.random.default_rng(seed)
    orders = {"importance": np.argsort(table["normalised"].to_numpy(), kind="stable"),
              "raw importance": np.argsort(table["importance"].to_numpy(), kind="stable")}
    orders.update({f"random {r + 1}": rng.permutation(total) for r in range(n_random)})
    if any(not 0 <= s <= 1 for s in shares):
        raise ValueError(f"shares must be between 0 and 1, got {list(shares)}")
    counts = [int(round(s * total)) for s in shares]
    correct = masked_accuracy(tuned, evaluation, masks_from_orders(list(orders.values()), counts, encoder.n_layers,
                                                                   encoder.n_heads), **options)
    correct = correct.reshape(len(evaluation), len(orders), len(counts))
    rows = [(name, share, k, correct[:, i, c].mean())
            for i, name in enumerate(orders) for c, (share, k) in enumerate(zip(shares, counts))]
    return PruningCurves(pd.DataFrame(rows, columns=["order", "share", "heads", "accuracy"]), correct,
                         tuple(orders), tuple(float(s) for s in shares))


def curve_areas(curves: PruningCurves, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Area under each importance order's accuracy-vs-share curve (trapezoids over `curves.shares`, divided by
    their range: a mean accuracy) against the random orders' mean, paired over inputs. One row per non-random
    order: order, area, random (mean area of the random orders), difference (area - random), low, high (95 %
    bootstrap interval of the difference, resampling evaluation inputs; the random orders stay fixed), inputs."""
    shares = np.asarray(curves.shares)
    if len(shares) < 2 or np.any(np.diff(shares) <= 0):
        raise ValueError(f"areas need at least two increasing shares, got {list(shares)}")
    random = [i for i, name in enumerate(curves.orders) if name.startswith("random")]
    if not random:
        raise ValueError("areas are compared with random orders: give at least one")
    area = np.trapezoid(curves.correct.astype(float), shares, axis=-1) / (shares[-1] - shares[0])  # [N, O]
    baseline = area[:, random].mean(1)
    rows = []
    for i, name in enumerate(curves.orders):
        if i in random:
            continue
        difference = area[:, i] - baseline
        low, high = bootstrap_interval(difference, np.arange(len(difference)), n_boot=n_boot, seed=seed)
        rows.append((name, area[:, i].mean(), baseline.mean(), difference.mean(), low, high, len(difference)))
    return pd.DataFrame(rows, columns=["order", "area", "random", "difference", "low", "high", "inputs"])


def dominant_kinds(kinds: np.ndarray) -> np.ndarray:
    """kinds [N, L, H] (one kind per map) -> [L, H]: each head's most common kind (ties: the first in sort order)."""
    kinds = np.asarray(kinds)
    out = np.empty(kinds.shape[1:], dtype=object)
    for index in np.ndindex(*kinds.shape[1:]):
        values, counts = np.unique(kinds[(slice(None),) + index], return_counts=True)
        out[index] = values[np.argmax(counts)]
    return out


def layer_matched_sets(chosen: np.ndarray, n_sets: int, rng: np.random.Generator) -> np.ndarray:
    """bool [n_sets, L, H]: random head sets with as many heads in each layer as `chosen` (bool [L, H])."""
    chosen = np.asarray(chosen, dtype=bool)
    sets = np.zeros((n_sets, *chosen.shape), dtype=bool)
    for s in range(n_sets):
        for layer, count in enumerate(chosen.sum(1)):
            sets[s, layer, rng.choice(chosen.shape[1], count, replace=False)] = True
    return sets


def pattern_removal(tuned: FineTuned, evaluation: Sequence[Example], dominant: np.ndarray, n_random: int = 10,
                    seed: int = 0, n_random_for: Mapping[str, int] | None = None, drained: Sequence[str] = (),
                    **options) -> pd.DataFrame:
    """Accuracy on `evaluation` with every head of one dominant pattern removed (`dominant` [L, H], see
    `dominant_kinds`), beside `n_random` random sets matched by layer (`layer_matched_sets`; `n_random_for`: kind ->
    another number of sets). For the kinds in `drained`, also only those heads' [CLS] column removed and
    renormalised. One row per pattern: kind, heads, accuracy, random (mean), random low / high (5 % and 95 %
    quantiles of the random sets), p (permutation: (1 + sets at or below accuracy) / (1 + sets)), cls drained
    (NaN for the other kinds), sets (random sets), full layers (layers the pattern fills: every matched set removes
    those same heads), none (nothing removed). All masks run in one pass."""
    encoder = tuned.encoder
    dominant = np.asarray(dominant)
    if dominant.shape != (encoder.n_layers, encoder.n_heads):
        raise ValueError(f"dominant must be [{encoder.n_layers}, {encoder.n_heads}], got {dominant.shape}")
    rng = np.random.default_rng(seed)
    kinds = sorted(set(dominant.ravel()))
    sets = {kind: (n_random_for or {}).get(kind, n_random) for kind in kinds}
    if min(sets.values()) < 1:
        raise ValueError(f"every pattern needs at least one random set, got {sets}")
    ones = np.ones(dominant.shape, dtype=np.float32)
    masks, drains, where = [ones], [np.zeros_like(ones)], {}
    for kind in kinds:
        chosen = dominant == kind
        where[kind] = len(masks)
        masks += [(~chosen).astype(np.float32), *(~layer_matched_sets(chosen, sets[kind], rng)).astype(np.float32)]
        drains += [np.zeros_like(ones)] * (1 + sets[kind])
        if kind in drained:
            masks.append(ones)
            drains.append(chosen.astype(np.float32))
    accuracy = masked_accuracy(tuned, evaluation, np.stack(masks), np.stack(drains), **options).mean(0)
    rows = []
    for kind in kinds:
        start, n = where[kind], sets[kind]
        random = accuracy[start + 1:start + 1 + n]
        rows.append((kind, int((dominant == kind).sum()), accuracy[start], random.mean(), np.quantile(random, 0.05),
                     np.quantile(random, 0.95), (1 + (random <= accuracy[start]).sum()) / (1 + n),
                     accuracy[start + 1 + n] if kind in drained else np.nan, n,
                     int((dominant == kind).all(1).sum()), accuracy[0]))
    return pd.DataFrame(rows, columns=["kind", "heads", "accuracy", "random", "random low", "random high", "p",
                                       "cls drained", "sets", "full layers", "none"])
