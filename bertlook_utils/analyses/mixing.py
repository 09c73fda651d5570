"""Context mixing: how much each token j contributes to each token i's output, layer by layer, five ways.

For one input and every layer l, `layer_maps` gives [L, n, n] maps (row i: the contributions of every j to token
i's output of layer l, non-negative, rows summing to 1):

- "attention": the attention weights, averaged over heads (Clark et al.'s object).
- "norm": ‖Σ_h α^h_ij f^h(x_j)‖, the weighted value vectors through the output projection (Kobayashi et al. 2020;
  notebook 10).
- "block": ‖g_i(z_ij)‖, the whole attention block with the residual (on the diagonal) and the LayerNorm
  (Kobayashi et al. 2021; `norms.decompose_layer`).
- "alti": Ferrando et al. 2022: with T_i(x_j) = g_i(z_ij) and y_i = Σ_j T_i(x_j) + bias_i the block's output,
  c_ij = max(0, ‖y_i‖₁ − ‖y_i − T_i(x_j)‖₁): how much closer to y_i the output gets with j's part in it.
- "value_zeroing": Mohebbi et al. 2023: zero token j's value vectors (every head, bias included) in layer l,
  run the layer, and take the cosine distance between token i's output of the whole layer (attention block,
  feed-forward, both LayerNorms) with and without them.

Each map is normalised row by row (a row of zeros stays zeros). `rollout` composes maps across layers.
"""
from __future__ import annotations

import numbers
from typing import Sequence

import numpy as np
import torch

from ..core import intervene
from ..core.models import Encoder
from ..engine.extract import batches
from .norms import decompose_layer

METHODS = ("attention", "norm", "block", "alti", "value_zeroing")


def normalise_rows(scores: np.ndarray) -> np.ndarray:
    """[..., n, n] non-negative -> each row divided by its sum (rows summing to 0 stay 0)."""
    scores = np.asarray(scores, dtype=np.float64)
    if np.isnan(scores).any():
        raise ValueError("contribution scores hold NaN")
    if (scores < 0).any():
        raise ValueError("contribution scores must be non-negative")
    totals = scores.sum(-1, keepdims=True)
    return np.divide(scores, totals, out=np.zeros_like(scores), where=totals > 0)


def alti(transformed: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """ALTI contributions of one layer: transformed [n, n, D] = T_i(x_j), bias [n, D] (so that y_i =
    Σ_j T_i(x_j) + bias_i) -> [n, n], c_ij = max(0, ‖y_i‖₁ − ‖y_i − T_i(x_j)‖₁), rows normalised."""
    transformed, bias = np.asarray(transformed, dtype=np.float64), np.asarray(bias, dtype=np.float64)
    if transformed.ndim != 3 or transformed.shape[0] != transformed.shape[1]:
        raise ValueError(f"transformed must be [n, n, D], got shape {transformed.shape}")
    if bias.shape != (transformed.shape[0], transformed.shape[2]):
        raise ValueError(f"bias must be [n, D] = {(transformed.shape[0], transformed.shape[2])}, got {bias.shape}")
    output = transformed.sum(1) + bias  # [n, D]
    distance = np.abs(output[:, None, :] - transformed).sum(-1)  # [n, n]
    return normalise_rows(np.maximum(0.0, np.abs(output).sum(-1)[:, None] - distance))


def rollout(maps: np.ndarray) -> np.ndarray:
    """maps [L, n, n] (rows summing to 1, residual already inside, as "block", "alti" and "value_zeroing") ->
    [L, n, n]: R_1 = M_1, R_l = M_l @ R_{l-1}: the contribution of input token j to token i's output of layer l."""
    maps = np.asarray(maps, dtype=np.float64)
    if maps.ndim != 3 or maps.shape[1] != maps.shape[2]:
        raise ValueError(f"maps must be [layers, n, n], got shape {maps.shape}")
    out = np.empty_like(maps)
    out[0] = maps[0]
    for layer in range(1, len(maps)):
        out[layer] = maps[layer] @ out[layer - 1]
    return out


@torch.inference_mode()
def value_zeroed_states(encoder: Encoder, item, layer: int) -> torch.Tensor:
    """[n + 1, n, D] float64: layer `layer`'s output (0-based) for one input (a text, pair or segment), row 0
    unchanged and row j + 1 with token j's value vectors (every head, bias included) zeroed in that layer. One
    batch of n + 1 copies."""
    if isinstance(layer, bool) or not isinstance(layer, numbers.Integral):
        raise ValueError(f"layers must be integers (0-based), got {layer!r}")
    if not 0 <= layer < encoder.n_layers:
        raise ValueError(f"layers must lie in 0-{encoder.n_layers - 1} (0-based), got {layer}")
    batch = next(batches(encoder, [item], attention=False))
    n = int(batch.lengths[0])
    copies = {key: value.repeat(n + 1, 1) for key, value in batch.model_inputs.items()}
    rows = torch.arange(1, n + 1)

    def zero(module, args, out):  # out [n + 1, T, D]: copy j + 1 loses token j's value vector
        out = out.clone()
        out[rows.to(out.device), rows.to(out.device) - 1] = 0
        return out

    hook = intervene.value_projection(encoder.model, layer).register_forward_hook(zero)
    try:
        return encoder.model(**copies, output_hidden_states=True).hidden_states[layer + 1][:, :n].double()
    finally:
        hook.remove()


def value_zeroing(encoder: Encoder, item, layers: Sequence[int] | None = None) -> np.ndarray:
    """Value Zeroing maps of one input (a text, pair or segment): [len(layers), n, n] (0-based layers; None:
    all), row i column j = cosine distance of token i's output of the layer with token j's value vectors zeroed
    there (`value_zeroed_states`), rows normalised."""
    if layers is not None and not len(layers):
        raise ValueError("layers must name at least one layer (None: all)")
    maps = []
    for layer in range(encoder.n_layers) if layers is None else layers:
        hidden = value_zeroed_states(encoder, item, layer)
        distance = 1 - torch.nn.functional.cosine_similarity(hidden[1:], hidden[:1], dim=-1)  # [j, i]
        maps.append(normalise_rows(distance.T.clamp_min(0).numpy()))
    return np.stack(maps)


@torch.inference_mode()
def layer_maps(encoder: Encoder, item) -> dict[str, np.ndarray]:
    """Every METHODS map of one input: name -> [L, n, n], rows normalised (see the module docstring)."""
    batch = next(batches(encoder, [item], attention=False))
    n = int(batch.lengths[0])
    out = encoder.model(**batch.model_inputs, output_attentions=True, output_hidden_states=True)
    found = {name: [] for name in METHODS[:-1]}
    for layer in range(encoder.n_layers):
        attn = out.attentions[layer][0, :, :n, :n].double()
        terms = decompose_layer(encoder.model, layer, out.hidden_states[layer][0, :n], attn, encoder.n_heads)
        found["attention"].append(attn.mean(0).numpy())
        found["norm"].append(normalise_rows(terms.mixed.norm(dim=-1).numpy()))
        found["block"].append(normalise_rows(terms.normed.norm(dim=-1).numpy()))
        found["alti"].append(alti(terms.normed.numpy(), terms.bias.numpy()))
    maps = {name: np.stack(value) for name, value in found.items()}
    maps["value_zeroing"] = value_zeroing(encoder, item)
    return maps
