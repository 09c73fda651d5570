"""Attention by weight and by norm (Kobayashi et al. 2020, 2021).

A head's output at position i is Σ_j α_ij f(x_j) with f(x) = (x W_V + b_V) W_O^h (the head's value transform
and its slice of the output projection, bias b_O left out). Kobayashi et al. score token j's contribution to i
by the norm ‖α_ij f(x_j)‖ instead of the weight α_ij: a token with a large weight but a short f(x_j) writes
little. Their 2021 follow-up includes the residual and the LayerNorm after the attention block:
    y_i = LN(Σ_j z_ij + b_O),  z_ij = Σ_h α^h_ij f^h(x_j) + [i = j] x_i
and since LN(s) = γ ⊙ (s − mean s) / std(s) + β is linear in s once std(s_i) is fixed, y_i splits exactly into
Σ_j g_i(z_ij) + a bias term, g_i(z) = γ ⊙ (z − mean z) / std(s_i). `decompose_layer` returns those terms.

`NormShares` (a cached reducer) keeps per input, layer (and head) the share of each row's contribution that
goes to [CLS], [SEP], "." / "," and other tokens (`gradients.CATEGORIES`, notebook 01's split), by weight and by
norm, and the context-mixing ratio (the share of row i's contribution that comes from tokens j ≠ i) four ways.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn

from ..core import intervene
from ..core.cache import DEFAULT_CACHE_DIR
from ..core.conventions import head_frame
from ..engine.extract import Batch, RowReducer, batches, reduce
from .gradients import CATEGORIES, category_mask, output_projection
from ..core.intervals import mean_interval
from ..core.models import Encoder

LAYERNORM_NAMES = ("attention.output.LayerNorm", "sa_layer_norm")  # BERT, RoBERTa, ELECTRA; DistilBERT


class Mixing(StrEnum):
    """The measures of context mixing (`NormResult.mixing`), from the weights alone to the whole attention block;
    the value is the label the tables show."""

    WEIGHT = "weight"
    NORM = "norm"
    RESIDUAL = "norm + residual"
    LAYERNORM = "norm + residual + LayerNorm"


MIXING = tuple(Mixing)


def attention_layernorm(model: nn.Module, layer: int) -> nn.LayerNorm:
    """The LayerNorm after layer `layer`'s (0-based) attention block (residual added before it)."""
    modules = dict(intervene.encoder_layers(model)[layer].named_modules())
    found = [modules[name] for name in LAYERNORM_NAMES if isinstance(modules.get(name), nn.LayerNorm)]
    if not found:
        raise ValueError(f"found no LayerNorm named {' or '.join(LAYERNORM_NAMES)} after layer {layer}'s attention "
                         f"in {type(model).__name__}; the norm analysis knows BERT, RoBERTa, ELECTRA and DistilBERT")
    return found[0]


def head_vectors(model: nn.Module, layer: int, hidden: torch.Tensor, n_heads: int) -> torch.Tensor:
    """hidden [B, T, D] (layer `layer`'s input, 0-based) -> f(x) [B, H, T, D]: each head's value vectors through
    its slice of the output projection (b_V included, b_O not). `hidden` may be on the CPU whatever the model's
    device (the model's outputs are, `models.place`): the projection runs on the model's device, the result is
    on the CPU."""
    dense = output_projection(model, layer)
    if dense is None:
        raise ValueError(f"found no attention output projection in layer {layer} of {type(model).__name__}; the "
                         "norm analysis needs BERT, RoBERTa, ELECTRA or DistilBERT weights")
    values = intervene.value_projection(model, layer)(hidden.to(dense.weight.device)).cpu()
    size = values.shape[-1] // n_heads
    by_head = values.unflatten(-1, (n_heads, size)).transpose(1, 2)  # [B, H, T, size]
    weight = dense.weight.cpu().T.unflatten(0, (n_heads, size))  # [H, size, D]
    return torch.matmul(by_head, weight)  # [B, H, T, D]


def _output_bias(model: nn.Module, layer: int, width: int) -> torch.Tensor:
    """float64 [D] on the CPU: b_O of layer `layer`'s attention output projection (zeros where it has none)."""
    b_out = output_projection(model, layer).bias
    return torch.zeros(width, dtype=torch.float64) if b_out is None else b_out.cpu().double()


@dataclass
class LayerTerms:
    """One input, one layer: `vectors` [H, n, D] = f^h(x_j); `mixed` [n, n, D] = Σ_h α^h_ij f^h(x_j) (no
    residual); `residual` [n, D] = x_i; `z` [n, n, D] = z_ij (residual on the diagonal); `normed` [n, n, D] =
    g_i(z_ij) (residual on the diagonal, LayerNorm applied); `bias` [n, D] = what LN makes of b_O plus β, so that
    `normed.sum(1) + bias` is the attention block's output."""

    vectors: torch.Tensor
    mixed: torch.Tensor
    residual: torch.Tensor
    z: torch.Tensor
    normed: torch.Tensor
    bias: torch.Tensor


@torch.no_grad()
def decompose_layer(model: nn.Module, layer: int, hidden: torch.Tensor, attn: torch.Tensor, n_heads: int
                    ) -> LayerTerms:
    """hidden [n, D] (one input's input to layer `layer`, 0-based; no padding), attn [H, n, n] -> `LayerTerms`
    (float64)."""
    hidden, attn = hidden.double(), attn.double()
    f = head_vectors(model, layer, hidden[None].to(model.dtype), n_heads)[0].double()  # [H, n, D]
    # [n, n, D]: Σ_h α^h_ij f^h(x_j)
    mixed = torch.bmm(attn.permute(2, 1, 0).contiguous(), f.transpose(0, 1).contiguous()).transpose(0, 1)
    n = hidden.shape[0]
    z = mixed.clone()
    z[torch.arange(n), torch.arange(n)] += hidden
    b_out = _output_bias(model, layer, hidden.shape[-1])
    norm = attention_layernorm(model, layer)
    s = z.sum(1) + b_out  # [n, D]: what the LayerNorm reads
    std = torch.sqrt(s.var(-1, unbiased=False) + norm.eps)  # [n]
    gamma = norm.weight.cpu().double()
    normed = gamma * (z - z.mean(-1, keepdim=True)) / std[:, None, None]
    bias = gamma * (b_out - b_out.mean()) / std[:, None] + norm.bias.cpu().double()
    return LayerTerms(f, mixed, hidden, z, normed, bias)


@torch.no_grad()
def contribution_norms(model: nn.Module, layer: int, hidden: torch.Tensor, attn: torch.Tensor, n_heads: int
                       ) -> dict[str, torch.Tensor]:
    """The norms of `decompose_layer`'s terms without building any [n, n, D] tensor (float64 [n, n] each):
    `heads` [H, n, n] = ‖α^h_ij f^h(x_j)‖, `mixed` = ‖Σ_h α^h_ij f^h(x_j)‖, `residual` = ‖z_ij‖ and `normed` =
    ‖g_i(z_ij)‖; `mixing` [3, n], Kobayashi et al. 2021's context-mixing ratio ‖Σ_{j≠i} t_ij‖ / (‖Σ_{j≠i} t_ij‖ +
    ‖t_ii‖) of each token i, for t the heads' summed vectors, with the residual, and with the LayerNorm too
    (a ratio of vector norms: the context's terms can cancel). Off the diagonal ‖Σ_h α^h_ij f^h_j‖² = α_ijᵀ G_j α_ij
    with G_j the heads' Gram matrix at token j; the n diagonal terms, which carry the residual, are computed
    directly. `layer` is 0-based."""
    hidden, attn = hidden.double(), attn.double()
    f = head_vectors(model, layer, hidden[None].to(model.dtype), n_heads)[0].double()  # [H, n, D]
    norm = attention_layernorm(model, layer)
    gamma = norm.weight.cpu().double()
    weights = attn.permute(2, 1, 0).contiguous()  # [j, i, H]

    def quadratic(vectors: torch.Tensor) -> torch.Tensor:  # [H, n, D] -> [n, n]: ‖Σ_h α^h_ij v^h_j‖
        by_token = vectors.transpose(0, 1).contiguous()  # [j, H, D]
        gram = torch.bmm(by_token, by_token.transpose(1, 2))  # [j, H, H]
        squares = (torch.bmm(weights, gram) * weights).sum(-1)  # [j, i]
        return squares.T.clamp_min(0).sqrt()

    def centred(v: torch.Tensor) -> torch.Tensor:
        return gamma * (v - v.mean(-1, keepdim=True))

    n = hidden.shape[0]
    own = (attn.diagonal(dim1=-2, dim2=-1)[..., None] * f).sum(0)  # Σ_h α^h_ii f^h(x_i) [n, D]
    context = torch.bmm(attn, f).sum(0) - own  # Σ_{j≠i} Σ_h α^h_ij f^h(x_j) [n, D]
    b_out = _output_bias(model, layer, hidden.shape[-1])
    std = torch.sqrt((context + own + hidden + b_out).var(-1, unbiased=False) + norm.eps)  # what the LN reads
    eye = torch.eye(n, dtype=torch.bool)
    mixed = quadratic(f)

    def ratio(context_part: torch.Tensor, own_part: torch.Tensor) -> torch.Tensor:  # [n]: ‖c‖ / (‖c‖ + ‖s‖)
        c, o = context_part.norm(dim=-1), own_part.norm(dim=-1)
        return c / (c + o)

    return {"heads": attn * f.norm(dim=-1)[:, None, :], "mixed": mixed,
            "residual": torch.where(eye, (own + hidden).norm(dim=-1).diag(), mixed),
            "normed": torch.where(eye, centred(own + hidden).norm(dim=-1).diag(), quadratic(centred(f))) / std[:, None],
            "mixing": torch.stack([ratio(context, own), ratio(context, own + hidden),
                                   ratio(centred(context), centred(own + hidden))])}


def _category_columns(batch: Batch, b: int, n: int) -> torch.Tensor:
    """bool [4, n]: input b's columns of each of CATEGORIES."""
    return torch.stack([category_mask(batch, c)[b, :n] for c in CATEGORIES])


def _shares(scores: torch.Tensor, columns: torch.Tensor) -> torch.Tensor:
    """scores [..., n, n] (row i: contribution of each j, non-negative) -> [..., 4]: per category the share of
    each row's total, averaged over rows."""
    totals = scores.sum(-1, keepdim=True)
    per_row = (scores / totals) @ columns.T.to(scores.dtype)  # [..., n, 4]
    return per_row.mean(-2)


class NormShares(RowReducer):
    """Per input: `weight`, `norm` [L, H, 4] (category shares of α_ij and of ‖α_ij f(x_j)‖ per head),
    `layer_weight`, `layer_norm`, `layer_context` [L, 4] (the same per layer: α averaged over heads, the norm
    of the heads' summed vector, and ‖g_i(z_ij)‖ over the context j ≠ i), `mixing` [L, 4] (context share by
    each of MIXING)."""

    name = "norm_shares"
    needs_attention = False  # it needs the layer inputs too, so it runs the model itself

    def __init__(self, model: nn.Module, n_heads: int):
        super().__init__()
        self.model, self.n_heads = model, n_heads

    @torch.inference_mode()
    def update(self, batch: Batch) -> None:
        out = self.model(**batch.model_inputs, output_attentions=True, output_hidden_states=True)
        for b, n in enumerate(batch.lengths.tolist()):
            columns = _category_columns(batch, b, n)
            off_diagonal = 1.0 - torch.eye(n, dtype=torch.float64)
            per_input: dict[str, list[torch.Tensor]] = {}
            for layer, attn in enumerate(out.attentions):
                attn = attn[b, :, :n, :n].double()
                hidden = out.hidden_states[layer][b, :n]
                terms = contribution_norms(self.model, layer, hidden, attn, self.n_heads)
                mixed, normed = terms["mixed"], terms["normed"]
                by_weight = 1 - attn.mean(0).diagonal()  # [n]: the weight on other tokens
                values = {"weight": _shares(attn, columns), "norm": _shares(terms["heads"], columns),
                          "layer_weight": _shares(attn.mean(0), columns), "layer_norm": _shares(mixed, columns),
                          "layer_context": _shares(normed * off_diagonal, columns),
                          "mixing": torch.cat([by_weight[None], terms["mixing"]]).mean(-1)}
                for key, value in values.items():
                    per_input.setdefault(key, []).append(value)
            self.add(**{key: torch.stack(value).numpy()[None] for key, value in per_input.items()})


@dataclass
class NormResult:
    """`NormShares` arrays, one row per input (see there), with tables."""

    arrays: dict[str, np.ndarray]

    def by_layer(self) -> pd.DataFrame:
        """Per layer and category: the mean share by weight, by norm, and over the context with residual and
        LayerNorm (`by weight`, `by norm`, `by norm, residual + LN (context)`)."""
        rows = []
        names = {"layer_weight": "by weight", "layer_norm": "by norm",
                 "layer_context": "by norm, residual + LN (context)"}
        for key, label in names.items():
            means = self.arrays[key].mean(0)  # [L, 4]
            for layer in range(means.shape[0]):
                rows += [(layer + 1, c, label, means[layer, k]) for k, c in enumerate(CATEGORIES)]
        frame = pd.DataFrame(rows, columns=["layer", "category", "measure", "share"])
        return frame.pivot_table(index=["layer", "category"], columns="measure", values="share", sort=False)

    def by_head(self, category: str | Sequence[str] = ("cls", "sep")) -> pd.DataFrame:
        """Per head: the share of `category` (summed over several) by `weight` and by `norm`."""
        picks = [CATEGORIES.index(c) for c in ([category] if isinstance(category, str) else category)]
        return head_frame({key: self.arrays[key][..., picks].sum(-1).mean(0) for key in ("weight", "norm")})

    def mixing(self) -> pd.DataFrame:
        """Per layer: the context-mixing ratio (share from tokens j ≠ i) by each of MIXING, mean and 95 %
        interval over inputs (columns `<measure>`, `<measure> low`, `<measure> high`)."""
        values = self.arrays["mixing"]  # [N, L, 4]
        frame = {"layer": np.arange(1, values.shape[1] + 1)}
        for k, name in enumerate(MIXING):
            stats = np.array([mean_interval(values[:, layer, k]) for layer in range(values.shape[1])])
            frame[name], frame[f"{name} low"], frame[f"{name} high"] = stats.T
        return pd.DataFrame(frame)


def norm_shares(encoder: Encoder, items: Sequence, batch_size: int = 8,
                cache_dir: Path | str | None = DEFAULT_CACHE_DIR, progress: bool = True) -> NormResult:
    """`NormShares` over `items` (segments, texts or pairs), cached block by block."""
    if not items:
        raise ValueError("no inputs: give segments, texts or (a, b) pairs")
    reducer = NormShares(encoder.model, encoder.n_heads)
    reduce(encoder, list(items), [reducer], batch_size=batch_size, cache_dir=cache_dir, progress=progress,
           desc="attention by norm")
    return NormResult(reducer.arrays)


@torch.inference_mode()
def decomposition_error(encoder: Encoder, item) -> float:
    """The largest |Σ_j g_i(z_ij) + bias − the attention block's real output| over every layer and token of one
    input (a text, pair or segment): how exactly `decompose_layer` splits the block (float64 rounding only)."""
    outputs = {}
    hooks = [attention_layernorm(encoder.model, layer).register_forward_hook(
        lambda module, args, out, layer=layer: outputs.__setitem__(layer, out.cpu()))  # inside the model: its device
        for layer in range(encoder.n_layers)]
    try:
        batch = next(batches(encoder, [item], attention=False))
        out = encoder.model(**batch.model_inputs, output_attentions=True, output_hidden_states=True)
    finally:
        for hook in hooks:
            hook.remove()
    worst = 0.0
    for layer in range(encoder.n_layers):
        terms = decompose_layer(encoder.model, layer, out.hidden_states[layer][0], out.attentions[layer][0],
                                encoder.n_heads)
        worst = max(worst, float((terms.normed.sum(1) + terms.bias - outputs[layer][0].double()).abs().max()))
    return worst
