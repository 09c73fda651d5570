"""Sinks per head: why the sink token draws attention (the key-bias reading, Gu et al. 2025) and whether the heads
that park on it write little (Clark et al.'s no-op, measured); notebook 11, issue 32 sections 2 and 6.

Queries and keys are recomputed from each layer's input hidden state (`output_hidden_states`) with the layer's own
query and key Linear modules (`queries_keys`); softmax(q kᵀ · scaling) over the real keys is exactly the model's
attention (`attention_from`, tested against `output_attentions`). For head h, query row i and key j:

    s_ij = q_i · k_j · scaling = |q_i| |k_j| cos(q_i, k_j) / sqrt(d)      (d: head size)

`key_geometry` (section 2), with s the sink position and "others" the real keys j != s; every mean over rows runs
over all of an input's real query rows (the sink's own row too, as `sink_scores` does):
- key_ratio = |k_s| / median_{j != s} |k_j|
- cos_sink = mean_i cos(q_i, k_s);  cos_other = mean_i mean_{j != s} cos(q_i, k_j)
- margin = mean_i (s_is - mean_{j != s} s_ij): how far the sink's logit stands above the others' mean
- margin_direction = mean_i (s'_is - mean_{j != s} s_ij), with s'_is = |q_i| m cos(q_i, k_s) / sqrt(d) and
  m = median_{j != s} |k_j|: the margin the sink would keep if its key had the others' median length, so what
  its direction alone gives; margin_length = margin - margin_direction = mean_i |q_i| cos(q_i, k_s) (|k_s| - m)
  / sqrt(d), what its length adds (negative for a short sink key).
A key bias b_K adds q_i · b_K to every logit of row i, so it cancels in the softmax; it moves norms and cosines.

`update_ratios` (section 6): the norm of head h's output written to token i, Σ_j α_ij f^h(x_j) with f^h
`norms.head_vectors` (values through the head's slice of the output projection; b_O, shared by the heads, left
out), over the norm of the residual stream there (x_i, the layer's input), averaged over ordinary tokens (real,
not [CLS]/[SEP]/"."/",", not the sink position).

`row_switch` (section 6): within one head and input, Spearman's rank correlation over the ordinary tokens' rows
between a row's weight on the sink and what the head writes there (the row's update ratio): negative when the
rows that park on the sink are the rows that write little, the no-op working row by row.

`sink_heads` runs both per input (cached block by block, as every pass) and returns `SinkHeads`: per-input arrays
[N, L, H] and per-head tables. Layers and heads are 1-indexed in every table and argument.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import torch
from scipy import stats
from torch import nn

from ...core import intervene
from ...core.cache import DEFAULT_CACHE_DIR
from ...core.conventions import check_index, head_frame
from ...core.intervals import mean_interval
from ...core.models import Encoder
from ...engine.extract import Batch, RowReducer, reduce
from ..norms import head_vectors

GEOMETRY = ("key_ratio", "cos_sink", "cos_other", "margin", "margin_direction", "margin_length")
KEY_BIAS = (*GEOMETRY, "sink_mass")
NO_OP = ("sink_mass", "update_ratio", "row_switch")
PROJECTION_NAMES = (("query", "key"), ("q_lin", "k_lin"))  # BERT, RoBERTa, ELECTRA; DistilBERT


# -- queries, keys and the attention they make ----------------------------------------------------------
def _attention_module(model: nn.Module, layer: int) -> nn.Module:
    """The self-attention module of layer `layer` (0-based): the one holding the value projection."""
    value = intervene.value_projection(model, layer)
    return next(m for m in intervene.encoder_layers(model)[layer].modules() if any(c is value for c in m.children()))


def queries_keys(model: nn.Module, layer: int, hidden: torch.Tensor, n_heads: int
                 ) -> tuple[torch.Tensor, torch.Tensor, float]:
    """hidden [B, T, D], the input of layer `layer` (1-indexed: `hidden_states[layer - 1]`) -> queries and keys
    [B, H, T, d] (biases included, the model's dtype; on the CPU, wherever the model is) and the scaling of their
    dot products (1 / sqrt(d))."""
    check_index(layer, len(intervene.encoder_layers(model)), "layer")
    attention = _attention_module(model, layer - 1)
    for q_name, k_name in PROJECTION_NAMES:
        query, key = getattr(attention, q_name, None), getattr(attention, k_name, None)
        if isinstance(query, nn.Linear) and isinstance(key, nn.Linear):
            break
    else:
        raise ValueError(f"found no query/key projections in layer {layer} of {type(model).__name__}; "
                         "queries_keys knows BERT, RoBERTa, ELECTRA and DistilBERT")
    if hidden.ndim != 3:
        raise ValueError(f"hidden must be [batch, tokens, hidden], got shape {tuple(hidden.shape)}")

    def by_head(x: torch.Tensor) -> torch.Tensor:
        return x.unflatten(-1, (n_heads, x.shape[-1] // n_heads)).transpose(1, 2)

    on_model = hidden.to(query.weight.device)
    q, k = by_head(query(on_model).cpu()), by_head(key(on_model).cpu())
    return q, k, float(getattr(attention, "scaling", q.shape[-1] ** -0.5))


def _valid(valid: torch.Tensor | None, queries: torch.Tensor) -> torch.Tensor:
    """bool [B, T] (True on real tokens, a prefix of each row), after checking it against queries [B, H, T, d]."""
    batch, _, width, _ = queries.shape
    if valid is None:
        return torch.ones(batch, width, dtype=torch.bool)
    valid = torch.as_tensor(valid)
    if valid.dtype != torch.bool or valid.shape != (batch, width):
        raise ValueError(f"valid must be booleans [batch, tokens] = {(batch, width)}, got {valid.dtype} "
                         f"{tuple(valid.shape)}")
    if (valid[:, 1:] & ~valid[:, :-1]).any() or not valid[:, 0].all():
        raise ValueError("valid must mark each input's real tokens as a prefix (padding on the right)")
    return valid


def attention_from(queries: torch.Tensor, keys: torch.Tensor, valid: torch.Tensor | None = None,
                   scaling: float | None = None) -> torch.Tensor:
    """softmax(q kᵀ · scaling) over the real keys (`valid` bool [B, T]; None: no padding): queries, keys
    [B, H, T, d] -> [B, H, T, T], float64, 0 on padded keys. scaling None: 1 / sqrt(d)."""
    if queries.ndim != 4 or queries.shape != keys.shape:
        raise ValueError(f"queries and keys must both be [batch, heads, tokens, d], got {tuple(queries.shape)} and "
                         f"{tuple(keys.shape)}")
    valid = _valid(valid, queries)
    scaling = queries.shape[-1] ** -0.5 if scaling is None else scaling
    logits = torch.matmul(queries.double(), keys.double().transpose(-1, -2)) * scaling
    return logits.masked_fill(~valid[:, None, None, :], float("-inf")).softmax(-1)


def _check_sink(sink) -> None:
    if isinstance(sink, bool) or not isinstance(sink, numbers.Integral):
        raise ValueError(f"sink must be an integer token position (0 = the first token), got {sink!r}")


def sink_positions(lengths: torch.Tensor, sink: int) -> torch.Tensor:
    """Each input's sink position [B] (long) from its length [B]: `sink` (0 = the first token, [CLS] / <s>) or,
    when negative, counted from the input's end (-1 = its last real token)."""
    _check_sink(sink)
    lengths = torch.as_tensor(lengths, dtype=torch.long)
    positions = lengths + sink if sink < 0 else torch.full_like(lengths, sink)
    if ((positions < 0) | (positions >= lengths)).any() or (lengths < 2).any():
        raise ValueError(f"sink={sink} is no position of every input with another key beside it (input lengths "
                         f"{lengths.min().item()} to {lengths.max().item()})")
    return positions


def _row_mean(values: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """values [B, H, T] averaged over the rows marked in `rows` [B, T] -> [B, H] (NaN where none is)."""
    rows = rows.to(values.dtype)[:, None, :]
    return (values * rows).sum(-1) / rows.sum(-1)


def key_geometry(queries: torch.Tensor, keys: torch.Tensor, valid: torch.Tensor | None = None, sink: int = 0,
                 scaling: float | None = None) -> dict[str, torch.Tensor]:
    """The key-bias reading of the sink per input and head (see the module's docstring for the exact definitions):
    queries, keys [B, H, T, d], `valid` bool [B, T] (None: no padding), `sink` a position (negative: from each
    input's end), scaling None: 1 / sqrt(d) -> {name: float64 [B, H]} for name in GEOMETRY."""
    if queries.ndim != 4 or queries.shape != keys.shape:
        raise ValueError(f"queries and keys must both be [batch, heads, tokens, d], got {tuple(queries.shape)} and "
                         f"{tuple(keys.shape)}")
    valid = _valid(valid, queries)
    scaling = queries.shape[-1] ** -0.5 if scaling is None else scaling
    q, k = queries.double(), keys.double()
    batch = torch.arange(q.shape[0])
    pos = sink_positions(valid.sum(1), sink)
    others = valid.clone()
    others[batch, pos] = False
    q_norm, k_norm = q.norm(dim=-1), k.norm(dim=-1)  # [B, H, T]
    tiny = torch.finfo(torch.float64).tiny
    q_unit, k_unit = q / q_norm.clamp_min(tiny)[..., None], k / k_norm.clamp_min(tiny)[..., None]  # 0 for a 0 vector
    weights = others.to(torch.float64)[:, None, :, None] / others.sum(1)[:, None, None, None]  # [B, 1, T, 1]
    # means over the other keys of a dot product = the dot product with their mean: no [T, T] matrix is built
    other_logit = torch.matmul(q, (k * weights).sum(2, keepdim=True).transpose(-1, -2))[..., 0] * scaling  # [B, H, T]
    other_cos = torch.matmul(q_unit, (k_unit * weights).sum(2, keepdim=True).transpose(-1, -2))[..., 0]
    sink_key, sink_unit = k[batch, :, pos], k_unit[batch, :, pos]  # [B, H, d]
    sink_logit = (q * sink_key[:, :, None]).sum(-1) * scaling  # [B, H, T]
    sink_cos = (q_unit * sink_unit[:, :, None]).sum(-1)
    median = torch.nanquantile(k_norm.masked_fill(~others[:, None, :], float("nan")), 0.5, dim=-1)  # [B, H]
    typical_logit = q_norm * median[..., None] * sink_cos * scaling  # s'_is: the sink key at the median length
    margin, direction = _row_mean(sink_logit - other_logit, valid), _row_mean(typical_logit - other_logit, valid)
    return {"key_ratio": k_norm[batch, :, pos] / median, "cos_sink": _row_mean(sink_cos, valid),
            "cos_other": _row_mean(other_cos, valid), "margin": margin, "margin_direction": direction,
            "margin_length": margin - direction}


def update_ratios(model: nn.Module, layer: int, hidden: torch.Tensor, attn: torch.Tensor, tokens: torch.Tensor,
                  n_heads: int) -> torch.Tensor:
    """Per input and head, the mean over `tokens` (bool [B, T]) of `row_updates`: -> float64 [B, H] (NaN for an
    input without such a token)."""
    return _row_mean(row_updates(model, layer, hidden, attn, tokens, n_heads), tokens)


def row_updates(model: nn.Module, layer: int, hidden: torch.Tensor, attn: torch.Tensor, tokens: torch.Tensor,
                n_heads: int) -> torch.Tensor:
    """Per input, head and row i, |Σ_j α^h_ij f^h(x_j)| / |x_i|: hidden [B, T, D] (the input of layer `layer`,
    1-indexed), attn [B, H, T, T] (0 on padded keys), tokens bool [B, T] (the rows wanted, for the shape check) ->
    float64 [B, H, T]. f^h: `norms.head_vectors` (b_V included, b_O not)."""
    check_index(layer, len(intervene.encoder_layers(model)), "layer")
    batch, width = hidden.shape[:2] if hidden.ndim == 3 else (None, None)
    if attn.shape != (batch, n_heads, width, width) or tokens.shape != (batch, width):
        raise ValueError(f"hidden [B, T, D], attn [B, {n_heads}, T, T] and tokens [B, T] must agree, got "
                         f"{tuple(hidden.shape)}, {tuple(attn.shape)} and {tuple(tokens.shape)}")
    f = head_vectors(model, layer - 1, hidden, n_heads)  # [B, H, T, D]
    written = torch.matmul(attn.to(f.dtype), f).double().norm(dim=-1)  # [B, H, T]
    residual = hidden.double().norm(dim=-1)[:, None, :]
    return written / residual.clamp_min(torch.finfo(torch.float64).tiny)


def row_switch(weights: torch.Tensor, updates: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """Spearman's rank correlation over the rows marked in `rows` (bool [B, T]) between `weights` and `updates`
    (each [B, H, T]: a row's weight on the sink, what the head writes there) -> float64 [B, H]; NaN where fewer
    than 3 rows are marked or a measure is constant over them. Ties take their average rank."""
    if weights.shape != updates.shape or weights.shape[::2] != rows.shape:
        raise ValueError(f"weights and updates [B, H, T] and rows [B, T] must agree, got {tuple(weights.shape)}, "
                         f"{tuple(updates.shape)} and {tuple(rows.shape)}")
    out = torch.full(weights.shape[:2], float("nan"), dtype=torch.float64)
    for b in range(len(rows)):
        picked = rows[b].nonzero().ravel()
        if len(picked) < 3:
            continue
        x = stats.rankdata(weights[b][:, picked].double().cpu().numpy(), axis=-1)
        y = stats.rankdata(updates[b][:, picked].double().cpu().numpy(), axis=-1)
        x, y = x - x.mean(-1, keepdims=True), y - y.mean(-1, keepdims=True)
        with np.errstate(all="ignore"):
            rho = (x * y).sum(-1) / np.sqrt((x * x).sum(-1) * (y * y).sum(-1))
        out[b] = torch.from_numpy(rho)
    return out


# -- the pass ---------------------------------------------------------------------------------------------
class SinkHeadStats(RowReducer):
    """Per input [L, H] arrays: GEOMETRY (`key_geometry`), `sink_mass` (mean attention to the sink over the real
    query rows), `update_ratio` (`update_ratios` over the ordinary tokens) and `row_switch` (`row_switch` over
    them)."""

    name = "sink_heads"
    needs_attention = False  # it needs the layer inputs too, so it runs the model itself

    def __init__(self, model: nn.Module, n_heads: int, sink: int):
        super().__init__()
        self.model, self.n_heads, self.sink = model, n_heads, sink

    @property
    def key(self) -> str:
        return f"{self.name}-{self.sink}"

    @torch.inference_mode()
    def update(self, batch: Batch) -> None:
        out = self.model(**batch.model_inputs, output_attentions=True, output_hidden_states=True)
        rows = torch.arange(len(batch.inputs))
        pos = sink_positions(batch.lengths, self.sink)
        ordinary = batch.other.clone()
        ordinary[rows, pos] = False
        per_layer: dict[str, list[torch.Tensor]] = {}
        for layer, attn in enumerate(out.attentions, start=1):
            hidden = out.hidden_states[layer - 1]
            q, k, scaling = queries_keys(self.model, layer, hidden, self.n_heads)
            values = key_geometry(q, k, batch.valid, self.sink, scaling)
            on_sink = attn[rows, :, :, pos].double()  # [B, H, T]: each row's weight on the sink
            values["sink_mass"] = _row_mean(on_sink, batch.valid)
            updates = row_updates(self.model, layer, hidden, attn, ordinary, self.n_heads)
            values["update_ratio"] = _row_mean(updates, ordinary)
            values["row_switch"] = row_switch(on_sink, updates, ordinary)
            for name, value in values.items():
                per_layer.setdefault(name, []).append(value)
        self.add(**{name: torch.stack(value, 1).numpy() for name, value in per_layer.items()})  # [B, L, H]


@dataclass(frozen=True)
class SinkHeads:
    """`values`: name -> float64 [N, L, H], one row per input, for name in GEOMETRY, `sink_mass`, `update_ratio`
    and `row_switch`; `sink`: the sink position they were measured for (0 = [CLS] / <s>)."""

    values: dict[str, np.ndarray]
    sink: int = 0

    def _means(self, names: Sequence[str]) -> dict[str, np.ndarray]:
        with np.errstate(all="ignore"):
            return {name: np.nanmean(self.values[name], axis=0) for name in names}  # [L, H]

    def key_bias(self) -> pd.DataFrame:
        """Section 2, one row per head: layer, head (1-indexed), KEY_BIAS (means over inputs), and
        `direction_share` = mean margin_direction / mean margin (> 1 when the sink key is shorter than the
        median key)."""
        means = self._means(KEY_BIAS)
        with np.errstate(all="ignore"):
            means["direction_share"] = means["margin_direction"] / means["margin"]
        return head_frame(means)

    def no_op(self) -> pd.DataFrame:
        """Section 6, one row per head: layer, head, `sink_mass`, `update_ratio`, `row_switch` (means over inputs)
        and each one's 95 % t-interval over inputs (`*_low`, `*_high`; NaN with fewer than two inputs)."""
        frame = head_frame(self._means(NO_OP))
        for name in NO_OP:
            flat = self.values[name].reshape(len(self.values[name]), -1)
            enough = np.isfinite(flat).sum(0) >= 2  # an interval needs two inputs
            low_high = np.array([mean_interval(flat[:, k])[1:] if enough[k] else (np.nan, np.nan)
                                 for k in range(flat.shape[1])])
            frame[f"{name}_low"], frame[f"{name}_high"] = low_high.T
        return frame

    def rank_correlation(self, x: str = "update_ratio", y: str = "sink_mass") -> float:
        """Spearman's rank correlation over heads between the means over inputs of `x` and `y`."""
        means = self._means(self._names(x, y))
        return float(stats.spearmanr(means[x].ravel(), means[y].ravel(), nan_policy="omit").statistic)

    def rank_interval(self, x: str = "update_ratio", y: str = "sink_mass", n_boot: int = 1000, seed: int = 0,
                      level: float = 0.95) -> tuple[float, float]:
        """Percentile bootstrap interval of `rank_correlation(x, y)`, resampling inputs (seeded)."""
        self._names(x, y)
        if n_boot < 1 or not 0 < level < 1:
            raise ValueError(f"n_boot must be at least 1 and level in (0, 1), got n_boot={n_boot}, level={level}")
        a, b = self.values[x], self.values[y]
        rng = np.random.default_rng(seed)
        rhos = []
        with np.errstate(all="ignore"):
            for _ in range(n_boot):
                pick = rng.integers(0, len(a), len(a))
                rhos.append(stats.spearmanr(np.nanmean(a[pick], 0).ravel(), np.nanmean(b[pick], 0).ravel(),
                                            nan_policy="omit").statistic)
        tail = (1 - level) / 2
        return float(np.nanquantile(rhos, tail)), float(np.nanquantile(rhos, 1 - tail))

    def _names(self, *names: str) -> tuple[str, ...]:
        for name in names:
            if name not in self.values:
                raise ValueError(f"no measure {name!r}: choose from {sorted(self.values)}")
        return names


def sink_heads(encoder: Encoder, items: Sequence, sink: int = 0, batch_size: int = 16,
               cache_dir: Path | str | None = DEFAULT_CACHE_DIR, progress: bool = False) -> SinkHeads:
    """Sections 2 and 6 per head over `items` (segments, texts or (a, b) pairs): `SinkHeads`, cached block by
    block. `sink`: the sink's position in each input (0: the first token, [CLS] / <s>; negative: from the end)."""
    if not items:
        raise ValueError("items: no inputs; give segments, texts or (a, b) pairs")
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    if encoder.signed_attention:
        raise ValueError(f"encoder: {encoder.name}'s maps are not softmax attention (signed_attention), so they are "
                         "not made from its queries and keys; give the plain encoder")
    _check_sink(sink)
    reducer = SinkHeadStats(encoder.model, encoder.n_heads, sink)
    reduce(encoder, list(items), [reducer], batch_size=batch_size, cache_dir=cache_dir, progress=progress,
           desc="sinks per head")
    return SinkHeads(dict(reducer.arrays), sink)
