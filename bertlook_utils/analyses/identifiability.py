"""Effective attention (Brunner et al. 2020, "On Identifiability in Transformers").

A head's output is A V with V [n, d] its value vectors (bias included). When n > d (this model's heads have 32
dimensions, so almost every segment), V has a left null space of dimension at least n − d: adding to a row of
A any vector u with u V = 0 changes the weights but not the output. The part of A that matters is its
projection onto V's column space, the **effective attention** A P with P = U Uᵀ (U: an orthonormal basis of the
column space of V). It need not be non-negative and its rows need not sum to 1.

`effective_encoder(encoder)` wraps a model so that every attention map the kit reads from it is the effective
one (the model's outputs are unchanged, since A P V = A V); its fingerprint differs, so caches never mix the two.
Any analysis that takes an `Encoder` then runs on effective attention. `null_space_twin` builds, for one head,
a second valid attention map (non-negative, rows summing to 1) that gives the same output with as little weight
as possible on a chosen token.

Why effective attention drops a sink: column j of A P is A (P e_j), and P's diagonal entry P_jj (`leverage`) is
small when token j's value vector is short, so the column of a token with a short value vector (this model's
[CLS]) nearly vanishes however much weight A gives it. `syntax_change` compares the syntax heads on raw and
effective maps input by input; `null_dimension_bound` gives n − d per input (the null space's dimension when V has
rank d).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
import torch
from scipy.optimize import linprog
from torch import nn

from . import syntax
from .syntax import HeadScores
from ..core import intervene
from ..core.intervals import bootstrap_interval
from ..core.conventions import check_head
from ..engine.extract import batches
from ..core.models import Encoder


def column_space_projector(values: torch.Tensor) -> torch.Tensor:
    """values [..., n, d] -> P [..., n, n], the orthogonal projector onto the span of V's columns (float64;
    rows of V that are all zero, such as padding, get zero rows and columns)."""
    values = values.double()
    u, s, _ = torch.linalg.svd(values, full_matrices=False)  # u [..., n, k], k = min(n, d)
    tolerance = s.amax(-1, keepdim=True) * max(values.shape[-2:]) * torch.finfo(torch.float64).eps
    u = u * (s > tolerance).unsqueeze(-2)
    return u @ u.transpose(-1, -2)


def effective_attention(attn: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """attn [..., n, n] and values [..., n, d] -> A P [..., n, n] (float64): the part of A that reaches the
    output."""
    if attn.shape[-1] != values.shape[-2] or attn.shape[-1] != attn.shape[-2]:
        raise ValueError(f"attn [..., n, n] and values [..., n, d] must agree on n, got {tuple(attn.shape)} and "
                         f"{tuple(values.shape)}")
    return attn.double() @ column_space_projector(values)


def null_dimension(values: torch.Tensor) -> torch.Tensor:
    """values [..., n, d] -> [...]: n minus the rank of V, the dimension of the left null space (n counts the
    non-zero rows only)."""
    rows = (values.abs().sum(-1) > 0).sum(-1)
    return rows - torch.linalg.matrix_rank(values.double())


def leverage(values: torch.Tensor) -> torch.Tensor:
    """values [..., n, d] -> [..., n]: the diagonal of `column_space_projector(values)` (sums to V's rank)."""
    return torch.diagonal(column_space_projector(values), dim1=-2, dim2=-1)


def null_dimension_bound(tokens: np.ndarray, head_size: int) -> np.ndarray:
    """tokens int [N] (each input's length) -> int [N]: max(n − d, 0), the least dimension of the values' left null
    space (equal to it when the values have full rank d)."""
    return np.maximum(np.asarray(tokens) - head_size, 0)


def syntax_change(raw: HeadScores, effective: HeadScores, choose_on: HeadScores, relations: Sequence[str],
                  n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """The same words scored on raw and effective maps (`syntax.score_sentences`, then `take` of the same
    sentences), each relation's head chosen on `choose_on` (raw maps, other sentences): relation, layer, head,
    direction, raw, effective (accuracies), change (effective − raw), low, high (95 % paired bootstrap interval
    over sentences), n (dependents), kept (the best head of `raw` is that of `effective`)."""
    if not np.array_equal(raw.sentence, effective.sentence) or not np.array_equal(raw.relations, effective.relations):
        raise ValueError("raw and effective must score the same words of the same sentences")
    rows = []
    for relation in relations:
        chosen = syntax.best_head(choose_on, relation)
        before = syntax.head_outcomes(raw, relation, *chosen).astype(float)
        after = syntax.head_outcomes(effective, relation, *chosen).astype(float)
        low, high = bootstrap_interval(after - before, raw.sentence[raw.mask(relation)], n_boot, seed)
        rows.append((relation, *chosen, before.mean(), after.mean(), after.mean() - before.mean(), low, high,
                     len(before), syntax.best_head(raw, relation) == syntax.best_head(effective, relation)))
    return pd.DataFrame(rows, columns=["relation", "layer", "head", "direction", "raw", "effective", "change", "low",
                                       "high", "n", "kept"])


def null_space_twin(attn: np.ndarray, values: np.ndarray, column: int) -> np.ndarray:
    """attn [n, n] (row-stochastic), values [n, d] -> the valid map (non-negative, rows summing to 1) with the same
    output, twin @ values == attn @ values, that puts the least weight on `column` (e.g. [CLS]): one linear
    program per row (scipy's HiGHS). When n <= d the values usually pin every row down and the twin is attn."""
    attn, values = np.asarray(attn, dtype=np.float64), np.asarray(values, dtype=np.float64)
    n = attn.shape[-1]
    if attn.shape != (n, n) or values.ndim != 2 or values.shape[0] != n:
        raise ValueError(f"attn must be [n, n] and values [n, d], got {attn.shape} and {values.shape}")
    if not 0 <= column < n:
        raise ValueError(f"column {column} does not exist: the map has columns 0-{n - 1}")
    constraints = np.hstack([values, np.ones((n, 1))]).T  # [d + 1, n]: same output, same row sum
    cost = np.zeros(n)
    cost[column] = 1.0
    twin = np.empty_like(attn)
    for i in range(n):
        solved = linprog(cost, A_eq=constraints, b_eq=constraints @ attn[i], bounds=(0, None), method="highs")
        twin[i] = solved.x if solved.status == 0 else attn[i]  # attn[i] itself is always feasible
    return twin


class EffectiveModel(nn.Module):
    """`model` whose attention probabilities are replaced by effective attention inside every forward pass
    (the outputs stay the same up to rounding). `config` is the wrapped model's."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        self.config = model.config
        self._values: dict[int, torch.Tensor] = {}
        self._valid: torch.Tensor | None = None
        self.training = model.training  # a wrapper follows its model (it has no dropout of its own)

    def _edit(self, layer: int, probs: torch.Tensor) -> torch.Tensor:  # probs [B, H, T, T]
        values = self._values[layer]  # [B, T, D]
        if self._valid is not None:
            values = values * self._valid[:, :, None].to(values.dtype)
        by_head = values.unflatten(-1, (probs.shape[1], -1)).transpose(1, 2)  # [B, H, T, d]
        return effective_attention(probs, by_head).to(probs.dtype)

    def forward(self, **inputs):
        mask = inputs.get("attention_mask")
        self._valid = None if mask is None else mask.bool()
        hooks = [intervene.value_projection(self.model, layer).register_forward_hook(
            lambda module, args, out, layer=layer: self._values.__setitem__(layer, out))
            for layer in range(self.config.num_hidden_layers)]
        try:
            with intervene.edit_attention(self.model, self._edit):
                return self.model(**inputs)
        finally:
            for hook in hooks:
                hook.remove()
            self._values.clear()


def effective_encoder(encoder: Encoder) -> Encoder:
    """The same encoder with effective attention maps (see the module docstring); its own fingerprint (the model's
    class and signed maps are part of it)."""
    return Encoder(f"{encoder.name} (effective attention)", EffectiveModel(encoder.model), encoder.tokenizer,
                   encoder.weights_sha256, encoder.max_tokens, encoder.folder,
                   signed_attention=True)


@torch.inference_mode()
def head_values(encoder: Encoder, item, layer: int, head: int) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """One head's map and value vectors on one input (a text, pair or segment): (attn [n, n], values [n, d] with
    the bias, tokens). layer and head are 1-indexed, as the kit's tables print them."""
    check_head(layer, head, encoder.n_layers, encoder.n_heads)
    captured = {}
    hook = intervene.value_projection(encoder.model, layer - 1).register_forward_hook(
        lambda module, args, out: captured.setdefault("values", out))
    try:
        batch = next(batches(encoder, [item]))
    finally:
        hook.remove()
    values = captured["values"][0].cpu().unflatten(-1, (encoder.n_heads, -1))[:, head - 1]  # [n, d]
    return batch.attn[0, layer - 1, head - 1].double().numpy(), values.double().numpy(), list(batch.inputs[0].tokens)
