"""Attention sinks: how much attention each key position draws, and two softmax variants that let a head attend
to nothing (notebook 11, issue 32's definitions).

- `sink_scores`: Gu et al. (2025)'s per-head score for an encoder, where every query row sees every key: the
  mean attention each key position receives over the query rows.
- `sink_rate`: their metric: for each key position, the share of all heads whose score exceeds eps (0.3 theirs).
- `softmax1`: softmax with an empty slot of logit 0, exp(x_i) / (1 + sum_j exp(x_j)) (Miller 2023; gpt-oss learns
  that logit per head): a row may put less than all of its weight on the tokens.
- `clipped_softmax`: clip((zeta - gamma) softmax(x) + gamma, 0, 1) (Bondarenko et al. 2023): with gamma < 0 a
  weight can be exactly 0, so a head can do nothing without a huge logit gap.

Maps are numpy arrays [layers, heads, n, n] whose rows sum to 1; a padded batch row is handled by `mask` [n] (True
on real tokens): its padded rows are left out and its padded keys must receive no attention.

The notebook's sections, one module each (`from bertlook_utils.analyses.sinks import position`):

    position  where the sink sits (the metric by token category and over eps) and whether it follows position
              or content; registers
    heads     per head: the key-bias reading (why the sink token) and the no-op (do sink heads write little?)
    massive   massive activations and outlier LayerNorm dimensions, each disabled against random dimensions
    toy       a tiny encoder trained from scratch with softmax, softmax1, clipped softmax and a gate
"""
from __future__ import annotations

import math

import numpy as np
import torch

EPS = 0.3  # Gu et al.'s threshold on a head's sink score
ROW_TOLERANCE = 1e-3  # how far a map's row may sum from 1 (float32 maps from a model)


def _real_maps(attn, mask) -> np.ndarray:
    """attn [L, H, n, n] checked (finite, in [0, 1], rows summing to 1) and cut to the real tokens of `mask` [n]."""
    attn = np.asarray(attn, dtype=np.float64)
    if attn.ndim != 4 or attn.shape[-1] != attn.shape[-2] or not attn.shape[-1]:
        raise ValueError(f"attn must be one input's maps [layers, heads, n, n], got shape {attn.shape}")
    if not np.isfinite(attn).all():
        raise ValueError("attn holds NaN or infinite weights")
    if attn.min() < -ROW_TOLERANCE or attn.max() > 1 + ROW_TOLERANCE:
        raise ValueError(f"attn weights must lie in [0, 1], got {attn.min():.3g} to {attn.max():.3g}")
    if mask is not None:
        mask = np.asarray(mask)
        if mask.dtype != bool or mask.shape != attn.shape[-1:] or not mask.any():
            raise ValueError(f"mask must be booleans [n] = [{attn.shape[-1]}] with at least one True, got "
                             f"{mask.dtype} {mask.shape}")
        if attn[..., mask, :][..., ~mask].max(initial=0.0) > ROW_TOLERANCE:
            raise ValueError("real tokens attend to masked positions: the mask does not match the maps")
        attn = attn[..., mask, :][..., mask]
    sums = attn.sum(-1)
    if np.abs(sums - 1).max() > ROW_TOLERANCE:
        raise ValueError(f"every row of attn must sum to 1 (got sums {sums.min():.3f} to {sums.max():.3f}); for a "
                         "padded input, pass mask")
    return attn


def sink_scores(attn, mask=None) -> np.ndarray:
    """The mean attention each key position receives over all query rows, per head: attn [L, H, n, n] ->
    [L, H, m] (m = n, or the real tokens of `mask` [n])."""
    return _real_maps(attn, mask).mean(axis=-2)


def sink_rate(attn, eps: float = EPS, mask=None) -> np.ndarray:
    """For each key position, the share of all L x H heads whose sink score exceeds `eps`: attn [L, H, n, n] ->
    [m] in [0, 1]."""
    if not 0 < eps < 1:
        raise ValueError(f"eps must lie strictly between 0 and 1, got {eps}")
    scores = sink_scores(attn, mask)
    return (scores > eps).mean(axis=(0, 1))


def _scores(scores) -> torch.Tensor:
    tensor = torch.as_tensor(scores)
    if not tensor.is_floating_point():
        tensor = tensor.double()
    if tensor.ndim == 0:
        raise ValueError("scores must have at least one dimension")
    if torch.isnan(tensor).any():
        raise ValueError("scores hold NaN")
    return tensor


def _like(result: torch.Tensor, scores):
    """`result` as the type `scores` came in: a tensor for a tensor, else a numpy array."""
    return result if isinstance(scores, torch.Tensor) else result.numpy()


def softmax1(scores, dim: int = -1):
    """exp(x_i) / (1 + sum_j exp(x_j)) along `dim`, computed stably (finite for logits of +-1000): the weights sum
    to less than 1, the rest going to an empty slot of logit 0. Same shape and type (tensor or array) as scores.
    A row with +inf logits gives them equal shares of 1, and 0 to the rest and the empty slot: the limit as those
    logits grow alike (equal logits, equal weights), where the formula reads inf / inf."""
    x = _scores(scores)
    infinite = torch.isposinf(x)
    rows = infinite.any(dim=dim, keepdim=True)
    x = x.masked_fill(rows, 0.0)  # rows with +inf are answered below; finite here, so no NaN even in gradients
    top = x.amax(dim=dim, keepdim=True).clamp(min=0)  # shift by max(x, 0): the empty slot's logit is 0
    shifted = torch.exp(x - top)
    weights = shifted / (torch.exp(-top) + shifted.sum(dim=dim, keepdim=True))
    shares = infinite.to(weights.dtype) / infinite.sum(dim=dim, keepdim=True).clamp(min=1)
    return _like(torch.where(rows, shares, weights), scores)


def clipped_softmax(scores, gamma: float = -0.025, zeta: float = 1.0, dim: int = -1):
    """clip((zeta - gamma) softmax(x) + gamma, 0, 1) along `dim` (Bondarenko et al. 2023): gamma <= 0 <= 1 <= zeta;
    with gamma < 0 a weight reaches exactly 0. Same shape and type as scores."""
    if not gamma <= 0 or not zeta >= 1:
        raise ValueError(f"clipped softmax needs gamma <= 0 and zeta >= 1, got gamma={gamma}, zeta={zeta}")
    if not math.isfinite(gamma) or not math.isfinite(zeta):
        raise ValueError(f"clipped softmax: gamma and zeta must be finite (an infinite stretch makes every weight 1 "
                         f"or NaN), got gamma={gamma}, zeta={zeta}")
    stretched = (zeta - gamma) * torch.softmax(_scores(scores), dim=dim) + gamma
    return _like(stretched.clamp(0.0, 1.0), scores)
