"""Massive activations and outlier LayerNorm dimensions (notebook 11, issue 32 sections 3 and 4).

Section 3 (Sun et al. 2024, "Massive activations in large language models"). Where to measure (`SITES`): Sun et
al. read the residual stream of pre-LayerNorm models; in a post-LayerNorm encoder such as BERT every hidden state
is a LayerNorm's output, whose values cannot exceed sqrt(D - 1) |weight| + |bias| (`layernorm_cap`), so the
residual sum is read where it still exists, at the LayerNorm's input ("pre_norm", as Gu et al. 2025 do for
post-norm models), beside the feed-forward block's output ("ffn") and the hidden states themselves ("output").
- `massive_activations`: per state (0 = the embeddings, l = layer l; at `site`), each input's largest magnitude
  |h| over its real tokens and dimensions against the median magnitude (the ratio), the count of values above
  Sun et al.'s absolute threshold (100) and of those also 1,000 times the median (their two criteria together),
  and which tokens (position and kind: [CLS] / <s>, separator, "." ",", other) and which dimensions carry each
  input's top values.
- `massive_intervention`: at one state and site, set each input's `n_values` largest (token, dimension) values to
  zero, and (as Sun et al.) to their mean over the other inputs (the mean of that dimension over the other
  inputs' tokens of the same kind), through a hook on the module there (`set_hidden`); beside it the same edits
  on random dimensions of the same tokens, the same count, over several seeded draws.

Section 4 (Kovaleva et al. 2021, "BERT Busters"): they disabled the high-magnitude scaling factors (and biases)
of the output LayerNorm, found in the same dimensions throughout the model.
- `layernorm_outliers`: our exact rule after their description. In each layer's LayerNorm (`which`: "output",
  after the feed-forward block, theirs; or "attention", after the attention block), a dimension's weight (or
  bias) is an outlier when it lies more than k standard deviations (k = 3; the population standard deviation
  over the layer's dimensions) from that layer's mean; the outlier dimensions are those whose weight is an
  outlier in at least `min_share` (one half) of the layers ("consistently across layers"). Biases are flagged
  the same way and reported beside.
- `disabled_layernorm`: a context manager that sets those dimensions' LayerNorm weight and bias to 0 and puts
  the saved values back on exit, also after an error: the model is never left edited.
- `layernorm_intervention`: the outlier dimensions disabled against random dimensions of the same count
  (seeded draws).

Both interventions measure (a) the sink mass: the mean attention to the first token ([CLS] / <s>) over heads
and real query rows, averaged over the attention layers after the edit, and (b) the change of the pooled
embedding: 1 - cos between the mean-pooled last hidden states with and without the edit, with notebook 02's
yardstick (`reference`: the mean pooled distance between two different inputs of one batch, unedited; as
`gradients.sink_ablation`). Every input weighs the same; no cache (the passes run edited models).
"""
from __future__ import annotations

from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Mapping, Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn

from ...core import intervene
from ...core.conventions import check_index
from ...core.intervals import mean_interval
from ...core.models import Encoder
from ...engine.extract import Batch, batches
from ..gradients import CATEGORIES, category_mask, mean_pool
from ..norms import attention_layernorm

ABSOLUTE = 100.0  # Sun et al.: a massive activation is above 100 in magnitude ...
RELATIVE = 1000.0  # ... and about 1,000 times the median magnitude
OUTLIER_SIGMAS = 3.0  # a LayerNorm weight more than this many standard deviations from its layer's mean
MIN_SHARE = 0.5  # ... in at least this share of the layers: an outlier dimension
OUTPUT_LAYERNORM_NAMES = ("output.LayerNorm", "output_layer_norm")  # BERT, RoBERTa, ELECTRA; DistilBERT
FFN_OUTPUT_NAMES = ("output.dense", "ffn.lin2")  # the feed-forward block's last linear map, the same models
SITES = {  # where `massive_activations` reads a state (0 = the embeddings, l = layer l)
    "pre_norm": "the input of the state's LayerNorm: the residual sum before it is normalised",
    "ffn": "the feed-forward block's output (layers 1 and up)",
    "output": "the hidden state itself: the LayerNorm's output in a post-LayerNorm model",
}
WHICH = ("output", "attention")
DRAWS = 3  # random draws per control: each costs one (section 4) or two (section 3) passes over the inputs


# -- shared -----------------------------------------------------------------------------------------
def _kinds(batch: Batch) -> torch.Tensor:
    """long [B, T]: each token's index in gradients.CATEGORIES ("sep", "cls", "punct", "other"); -1 at padding."""
    kinds = torch.full(batch.valid.shape, -1, dtype=torch.long)
    for k, category in enumerate(CATEGORIES):
        kinds[category_mask(batch, category)] = k
    return kinds


def _interval(values) -> tuple[float, float, float]:
    """mean_interval, or (mean, nan, nan) where fewer than two values are finite."""
    values = np.asarray(values, dtype=float)
    if np.isfinite(values).sum() < 2:
        finite = values[np.isfinite(values)]
        return (float(finite.mean()) if len(finite) else np.nan), np.nan, np.nan
    return mean_interval(values)


def _check_items(items: Sequence, batch_size: int) -> list:
    items = list(items)
    if len(items) < 2:
        raise ValueError(f"items: give at least two inputs (the yardstick compares different inputs), got {len(items)}")
    if batch_size < 2:
        raise ValueError(f"batch_size must be at least 2 (the yardstick pairs inputs within a batch), not {batch_size}")
    return items


def _check_draws(draws: int, seed: int) -> None:
    if isinstance(draws, bool) or not isinstance(draws, int) or draws < 1:
        raise ValueError(f"draws must be a positive integer (random controls), got {draws!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")


@dataclass(frozen=True)
class _Measured:
    """One forward pass of a batch: `sink` [B] (mean attention to the first token over heads, real rows and the
    attention layers `sink_layers`; NaN when there are none) and `pooled` [B, D] (mean over real tokens of the last
    hidden state)."""

    sink: torch.Tensor
    pooled: torch.Tensor


def _measure(model: nn.Module, batch: Batch, sink_layers: Sequence[int]):
    """Run the batch; (_Measured, the model's output)."""
    out = model(**batch.model_inputs, output_attentions=bool(sink_layers))
    rows = batch.valid.to(torch.float64)
    if sink_layers:
        first = torch.stack([out.attentions[layer - 1][..., 0] for layer in sink_layers], 1).double()  # [B, L', H, T]
        sink = (first.mean((1, 2)) * rows).sum(-1) / rows.sum(-1)
    else:
        sink = torch.full((len(rows),), float("nan"), dtype=torch.float64)
    return _Measured(sink, mean_pool(out.last_hidden_state, batch.valid).double()), out


def _cosine_distance(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """1 - cos along the last axis (gradients' pooled distance; that module keeps its helper private)."""
    return 1 - nn.functional.cosine_similarity(x, y, dim=-1)


def _between(pooled: torch.Tensor) -> torch.Tensor:
    """Pooled distances between the different inputs of one batch (the yardstick, as gradients.SinkAblation)."""
    pairs = torch.triu_indices(len(pooled), len(pooled), offset=1)
    return _cosine_distance(pooled[pairs[0]], pooled[pairs[1]])


@dataclass(frozen=True)
class Intervention:
    """An intervention against its random control. `frame`: one row per targets ("none": unedited; "massive" or
    "outlier": the found values or dimensions; "random": the control), edit ("none", "zero", "mean", "disable"),
    draw (0.. for random draws, -1 otherwise) and input: `sink_mass` (mean attention to the first token over heads,
    rows and `sink_layers`) and `pooled_distance` (1 - cos of the mean-pooled last hidden state against the
    unedited one; 0 for "none"). `reference`: the mean pooled distance between two different unedited inputs of a
    batch (notebook 02's yardstick). `sink_layers`: the attention layers (1-indexed) after the edit. `details`:
    what was edited (section 3: per targets, draw, input, the (position, dimension) values; section 4: per targets
    and draw, the disabled dimensions)."""

    frame: pd.DataFrame
    reference: float
    sink_layers: tuple[int, ...]
    details: pd.DataFrame

    def summary(self) -> pd.DataFrame:
        """One row per targets and edit: `draws`; `sink_mass` and `pooled_distance`, each the mean over inputs
        (of the per-input mean over draws) with a 95 % t-interval over inputs (`*_low`, `*_high`) and `*_spread`,
        the standard deviation over draws of the per-draw mean (NaN for one draw); `relative_distance` =
        pooled_distance / reference."""
        rows = []
        for (targets, edit), group in self.frame.groupby(["targets", "edit"], sort=False):
            per_input = group.groupby("input")[["sink_mass", "pooled_distance"]].mean()
            per_draw = group.groupby("draw")[["sink_mass", "pooled_distance"]].mean()
            row = [targets, edit, int(group["draw"].nunique())]
            for column in ("sink_mass", "pooled_distance"):
                spread = per_draw[column].std(ddof=1) if len(per_draw) > 1 else np.nan
                row += [*_interval(per_input[column].to_numpy()), spread]
            rows.append(row)
        frame = pd.DataFrame(rows, columns=["targets", "edit", "draws", "sink_mass", "sink_mass_low", "sink_mass_high",
                                            "sink_mass_spread", "pooled_distance", "pooled_distance_low",
                                            "pooled_distance_high", "pooled_distance_spread"])
        frame["relative_distance"] = frame["pooled_distance"] / self.reference
        return frame


FRAME_COLUMNS = ["targets", "edit", "draw", "input", "sink_mass", "pooled_distance"]


def _ordered(frame: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """`frame` sorted by the first appearance of its `keys` (the order of the conditions), then draw and input: the
    same whatever the batch size."""
    order = frame.groupby(list(keys), sort=False).ngroup()
    extra = [c for c in ("draw", "input") if c in frame]
    return (frame.assign(_order=order).sort_values(["_order", *extra], kind="stable").drop(columns="_order")
            .reset_index(drop=True))


def _rows(targets: str, edit: str, draw: int, batch: Batch, measured: _Measured, base: _Measured) -> list[tuple]:
    distance = _cosine_distance(measured.pooled, base.pooled) if targets != "none" else torch.zeros_like(measured.sink)
    return [(targets, edit, draw, batch.start + b, float(measured.sink[b]), float(distance[b]))
            for b in range(len(batch.inputs))]


# -- section 3: massive activations ---------------------------------------------------------------
@dataclass(frozen=True)
class MassiveActivations:
    """`massive_activations`'s results at `site` (`SITES`). `maximum`, `median` [N, S]: per input and state (S of
    them, `states`: 0 = the embeddings, l = layer l) the largest and the median magnitude |h| over real tokens and
    dimensions; `above_absolute` and `massive` [N, S]: the count of values above ABSOLUTE (100), and of those also
    above RELATIVE (1,000) times the input's median (Sun et al.'s criteria). `top`: one row per input, state and
    rank (1 = largest) of its `top_k` largest values: layer (the state), input, rank, position, token, kind
    (gradients.CATEGORIES), dimension, value (signed), magnitude, ratio (magnitude / the input's median)."""

    maximum: np.ndarray
    median: np.ndarray
    above_absolute: np.ndarray
    massive: np.ndarray
    top: pd.DataFrame
    site: str = "output"
    first_state: int = 0  # the state of column 0 (1 for "ffn")

    @property
    def states(self) -> tuple[int, ...]:
        return tuple(range(self.first_state, self.first_state + self.maximum.shape[1]))

    @property
    def ratio(self) -> np.ndarray:
        """[N, L + 1]: maximum / median."""
        return self.maximum / self.median

    def by_layer(self) -> pd.DataFrame:
        """One row per hidden state (layer 0 = the embeddings): mean over inputs of the maximum, the median and the
        ratio (with a 95 % t-interval over inputs), of `above_absolute` and `massive` (counts per input); the (kind,
        dimension) most often carrying an input's largest value (`top_kind`, `top_dimension`) and the share of inputs
        where it does (`top_share`)."""
        first = self.top[self.top["rank"] == 1]
        rows = []
        for column, layer in enumerate(self.states):
            here = first[first["layer"] == layer]
            (kind, dimension), count = Counter(zip(here["kind"], here["dimension"])).most_common(1)[0]
            rows.append((layer, self.maximum[:, column].mean(), self.median[:, column].mean(),
                         *_interval(self.ratio[:, column]), self.above_absolute[:, column].mean(),
                         self.massive[:, column].mean(), kind, int(dimension), count / len(here)))
        return pd.DataFrame(rows, columns=["layer", "maximum", "median", "ratio", "ratio_low", "ratio_high",
                                           "above_absolute", "massive", "top_kind", "top_dimension", "top_share"])

    def largest_state(self) -> int:
        """The state whose largest magnitude (mean over inputs) is the largest: where to edit."""
        return self.states[int(np.argmax(self.maximum.mean(0)))]

    def carriers(self) -> pd.DataFrame:
        """Which (kind, dimension) pairs carry the top values: per hidden state, kind and dimension, `inputs` (how
        many inputs have it among their top_k) and `share` (of all inputs), most frequent first."""
        n = self.maximum.shape[0]
        counts = (self.top.drop_duplicates(["layer", "input", "kind", "dimension"])
                  .groupby(["layer", "kind", "dimension"]).size().rename("inputs").reset_index())
        counts["share"] = counts["inputs"] / n
        return counts.sort_values(["layer", "inputs", "dimension"], ascending=[True, False, True], ignore_index=True)

    def appearance_layer(self) -> int:
        """Where the massive activation appears: the (kind, dimension) that most often carries an input's largest
        value over all hidden states is found; the first hidden state (0 = the embeddings) where it carries the
        largest value in at least half of the inputs."""
        first = self.top[self.top["rank"] == 1]
        pair = Counter(zip(first["kind"], first["dimension"])).most_common(1)[0][0]
        n = self.maximum.shape[0]
        for layer in self.states:
            here = first[first["layer"] == layer]
            if (here["kind"].eq(pair[0]) & here["dimension"].eq(pair[1])).sum() >= n / 2:
                return layer
        return int(first["layer"].max())  # unreachable: the pair is the mode somewhere


def _top_values(hidden: torch.Tensor, valid: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """hidden [B, T, D] -> (positions, dimensions) [B, k] of each input's k largest |h| over its real tokens."""
    magnitude = hidden.abs().masked_fill(~valid[..., None], -1.0).flatten(1)
    index = magnitude.topk(k, dim=1).indices
    return index // hidden.shape[-1], index % hidden.shape[-1]


def _states(model: nn.Module, site: str) -> list[int]:
    """The states `site` has: 0 (the embeddings) to L, or 1 to L for "ffn"."""
    if site not in SITES:
        raise ValueError(f"site must be one of {tuple(SITES)}, not {site!r}")
    return list(range(1 if site == "ffn" else 0, len(intervene.encoder_layers(model)) + 1))


def _site_module(model: nn.Module, layer: int, site: str) -> tuple[nn.Module, bool]:
    """(module, reads its input): where state `layer` (0 = the embeddings, l = layer l) is read at `site`."""
    if site not in SITES:
        raise ValueError(f"site must be one of {tuple(SITES)}, not {site!r}")
    block = _hidden_module(model, layer)
    if site == "output":
        return block, False
    if site == "pre_norm":
        norm = getattr(block, "LayerNorm", None) if layer == 0 else layernorm(model, layer)
        if not isinstance(norm, nn.LayerNorm):
            raise ValueError(f"{type(model).__name__}'s embeddings have no LayerNorm named `LayerNorm` to read")
        return norm, True
    if layer == 0:
        raise ValueError("the embeddings have no feed-forward block: with site 'ffn', layer must be 1 or more")
    modules = dict(block.named_modules())
    found = [modules[name] for name in FFN_OUTPUT_NAMES if isinstance(modules.get(name), nn.Linear)]
    if not found:
        raise ValueError(f"found no feed-forward output named {' or '.join(FFN_OUTPUT_NAMES)} in layer {layer} of "
                         f"{type(model).__name__}; BERT, RoBERTa, ELECTRA, DistilBERT have one")
    return found[0], False


@contextmanager
def _reading(model: nn.Module, site: str, states: Sequence[int]) -> Iterator[dict[int, torch.Tensor]]:
    """A dict that each forward pass fills with state -> [B, T, D] at `site`; the hooks go on exit."""
    seen: dict[int, torch.Tensor] = {}
    handles = []
    try:
        for layer in states:
            module, reads_input = _site_module(model, layer, site)
            if reads_input:
                handles.append(module.register_forward_pre_hook(
                    lambda m, args, layer=layer: seen.__setitem__(layer, args[0])))
            else:
                handles.append(module.register_forward_hook(lambda m, args, out, layer=layer: seen.__setitem__(
                    layer, out[0] if isinstance(out, tuple) else out)))
        yield seen
    finally:
        for handle in handles:
            handle.remove()


def layernorm_cap(encoder: Encoder) -> np.ndarray:
    """[L + 1]: per state (0 = the embeddings, l = layer l) the largest magnitude its LayerNorm can output,
    max over dimensions d of sqrt(D - 1) |weight_d| + |bias_d|: a normalised vector's coordinate lies within
    sqrt(D - 1) of 0, whatever the input."""
    caps = []
    for layer in _states(encoder.model, "pre_norm"):
        norm, _ = _site_module(encoder.model, layer, "pre_norm")
        weight, bias = norm.weight.detach().double().abs(), norm.bias.detach().double().abs()
        caps.append(float(((len(weight) - 1) ** 0.5 * weight + bias).max()))
    return np.array(caps)


@torch.inference_mode()
def massive_activations(encoder: Encoder, items: Sequence, top_k: int = 5, batch_size: int = 16,
                        site: str = "pre_norm") -> MassiveActivations:
    """Per input and state (0 = the embeddings, l = layer l) at `site` (`SITES`; by default the LayerNorm's
    input, where a post-LayerNorm model keeps its residual sum), the largest magnitude against the median, Sun et
    al.'s counts and the `top_k` largest values with their tokens and dimensions (see `MassiveActivations`). One
    batched forward pass."""
    items = list(items)
    if not items:
        raise ValueError("items: no inputs; give segments, texts or (a, b) pairs")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"top_k must be a positive integer, got {top_k!r}")
    states = _states(encoder.model, site)
    per_input = {name: [] for name in ("maximum", "median", "above_absolute", "massive")}
    rows = []
    for batch in batches(encoder, items, batch_size, attention=False):
        with _reading(encoder.model, site, states) as seen:
            encoder.model(**batch.model_inputs)
        kinds, valid = _kinds(batch), batch.valid
        if top_k > int(batch.lengths.min()) * seen[states[0]].shape[-1]:
            raise ValueError(f"top_k={top_k} is more than an input's values")
        arrays = {name: [] for name in per_input}
        for layer in states:
            hidden = seen[layer]
            magnitude = hidden.double().abs()
            masked = magnitude.masked_fill(~valid[..., None], float("nan")).flatten(1).numpy()
            median = np.nanmedian(masked, axis=1)  # [B]
            maximum = np.nanmax(masked, axis=1)
            absolute = np.nan_to_num(masked, nan=0.0) > ABSOLUTE
            arrays["maximum"].append(maximum)
            arrays["median"].append(median)
            arrays["above_absolute"].append(absolute.sum(1))
            arrays["massive"].append((absolute & (np.nan_to_num(masked) > RELATIVE * median[:, None])).sum(1))
            positions, dimensions = _top_values(hidden, valid, top_k)
            for b in range(len(batch.inputs)):
                for rank, (p, d) in enumerate(zip(positions[b].tolist(), dimensions[b].tolist()), start=1):
                    value = float(hidden[b, p, d])
                    rows.append((layer, batch.start + b, rank, p, batch.inputs[b].tokens[p],
                                 CATEGORIES[int(kinds[b, p])], d, value, abs(value), abs(value) / median[b]))
        for name, values in arrays.items():
            per_input[name].append(np.stack(values, 1))
    top = pd.DataFrame(rows, columns=["layer", "input", "rank", "position", "token", "kind", "dimension", "value",
                                      "magnitude", "ratio"]).sort_values(["layer", "input", "rank"], ignore_index=True)
    return MassiveActivations(*(np.concatenate(per_input[name]) for name in per_input), top=top, site=site,
                              first_state=states[0])


def by_site(found: Mapping[str, MassiveActivations], cap: np.ndarray | None = None) -> pd.DataFrame:
    """One row per state (0 = the embeddings): per site of `found` (site -> `massive_activations`, in its order)
    `<site> max` and `<site> ratio`, the means over inputs of the largest magnitude and of its ratio to the median
    (NaN where the site has no such state); `carrier`, the (kind, dimension) most often carrying the largest value
    at the first site; `cap` (`layernorm_cap`, indexed by state) when given."""
    if not found:
        raise ValueError("found: give at least one site's massive_activations")
    states = sorted({state for result in found.values() for state in result.states})
    frame = pd.DataFrame({"state": states})
    for site, result in found.items():
        table = result.by_layer().set_index("layer")
        frame[f"{site} max"] = frame["state"].map(table["maximum"])
        frame[f"{site} ratio"] = frame["state"].map(table["ratio"])
    first = next(iter(found.values())).by_layer().set_index("layer")
    frame["carrier"] = frame["state"].map(first["top_kind"] + " " + first["top_dimension"].astype(str))
    if cap is not None:
        frame["cap"] = [float(cap[state]) for state in states]
    return frame


def _hidden_module(model: nn.Module, layer: int) -> nn.Module:
    """The module whose output is hidden state `layer` (0: the embeddings block; l >= 1: layer l)."""
    layers = intervene.encoder_layers(model)
    if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) or not 0 <= layer <= len(layers):
        raise ValueError(f"layer must be 0 (the embeddings) or 1-{len(layers)} (a layer's output, 1-indexed as in the "
                         f"papers); got {layer!r}")
    if layer == 0:
        embeddings = getattr(model, "embeddings", None)
        if not isinstance(embeddings, nn.Module):
            raise ValueError(f"{type(model).__name__} has no `embeddings` block to hook; layer 0 needs a BERT-family "
                             "encoder (BERT, RoBERTa, ELECTRA, DistilBERT)")
        return embeddings
    return layers[layer - 1]


@contextmanager
def set_hidden(model: nn.Module, layer: int, batch_index, position, dimension, value, site: str = "output"
               ) -> Iterator[nn.Module]:
    """Run `model` with state `layer` (0 = the embeddings, l = layer l, as `output_hidden_states` counts them) at
    `site` (`SITES`: "output", the hidden state; "pre_norm", its LayerNorm's input; "ffn", the feed-forward
    output) edited by a hook: h[batch_index[k], position[k], dimension[k]] = value[k] (four sequences [K]; K = 0
    edits nothing). What comes after reads the edited state. The hook is removed on exit, also after an error."""
    module, reads_input = _site_module(model, layer, site)
    index = tuple(torch.as_tensor(i, dtype=torch.long).reshape(-1) for i in (batch_index, position, dimension))
    values = torch.as_tensor(value, dtype=torch.float64).reshape(-1)
    if not len({len(i) for i in index} | {len(values)}) == 1:
        raise ValueError(f"batch_index, position, dimension and value must have one entry per edit, got lengths "
                         f"{[len(i) for i in index]} and {len(values)}")
    if not torch.isfinite(values.double()).all():
        raise ValueError("value holds NaN or infinite numbers")

    def edited(hidden: torch.Tensor) -> torch.Tensor:
        for i, (name, size) in enumerate(zip(("batch_index", "position", "dimension"), hidden.shape)):
            if len(index[i]) and not (0 <= int(index[i].min()) and int(index[i].max()) < size):
                raise ValueError(f"{name} must lie in 0-{size - 1} for hidden states of shape {tuple(hidden.shape)}")
        out = hidden.clone()
        out[tuple(i.to(hidden.device) for i in index)] = values.to(hidden)  # inside the model: its device
        return out

    def hook(module, args, output):
        if not len(values):
            return output
        return (edited(output[0]), *output[1:]) if isinstance(output, tuple) else edited(output)

    def pre_hook(module, args):
        return (edited(args[0]), *args[1:]) if len(values) else None

    handle = module.register_forward_pre_hook(pre_hook) if reads_input else module.register_forward_hook(hook)
    try:
        yield model
    finally:
        handle.remove()


def _random_dims(targets: list[tuple[int, int]], width: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """Each target (position, dimension) moved to a random dimension of the same position, none of the input's
    target dimensions, distinct within a position."""
    taken = {d for _, d in targets}
    free = np.array([d for d in range(width) if d not in taken])
    by_position = Counter(p for p, _ in targets)
    if max(by_position.values(), default=0) > len(free):
        raise ValueError(f"n_values is too large: no {max(by_position.values())} other dimensions of {width} to draw")
    out = []
    for position, count in sorted(by_position.items()):
        out += [(position, int(d)) for d in rng.choice(free, size=count, replace=False)]
    return out


@torch.inference_mode()
def massive_intervention(encoder: Encoder, items: Sequence, layer: int, n_values: int = 1, draws: int = DRAWS,
                         seed: int = 0, batch_size: int = 16, site: str = "pre_norm") -> Intervention:
    """Sun et al.'s intervention at state `layer` (0 = the embeddings, l = layer l; see
    `MassiveActivations.appearance_layer`) and `site` (`SITES`; by default the LayerNorm's input, where a
    post-LayerNorm model keeps its residual sum): each input's `n_values` largest (position, dimension) values set
    to zero ("zero") and to their mean over the other inputs ("mean": that dimension's mean over the other inputs'
    tokens of the same kind), against the same edits on random dimensions of the same positions (`draws` seeded
    draws, per input `np.random.default_rng([seed, draw, input])`). Sink mass over the attention layers after
    `layer`; see `Intervention`. 1 + 2 (1 + draws) forward passes."""
    model = encoder.model
    items = _check_items(items, batch_size)
    _site_module(model, layer, site)
    if isinstance(n_values, bool) or not isinstance(n_values, int) or n_values < 1:
        raise ValueError(f"n_values must be a positive integer (values edited per input), got {n_values!r}")
    _check_draws(draws, seed)
    sink_layers = tuple(range(layer + 1, encoder.n_layers + 1))
    found = []  # per batch: (batch, base _Measured, hidden at `layer`, kinds, targets per input)
    sums, counts, between, rows = [], [], [], []
    for batch in batches(encoder, items, batch_size, attention=False):
        with _reading(model, site, [layer]) as seen:
            base, _ = _measure(model, batch, sink_layers)
        hidden, kinds = seen[layer].double(), _kinds(batch)
        if n_values > int(batch.lengths.min()) * hidden.shape[-1]:
            raise ValueError(f"n_values={n_values} is more than an input's values")
        one_hot = torch.stack([kinds == k for k in range(len(CATEGORIES))], 1).double()  # [B, 4, T]
        sums.append(torch.einsum("bkt,btd->bkd", one_hot, hidden))
        counts.append(one_hot.sum(-1))
        positions, dimensions = _top_values(hidden, batch.valid, n_values)
        targets = [list(zip(positions[b].tolist(), dimensions[b].tolist())) for b in range(len(batch.inputs))]
        found.append((batch, base, hidden, kinds, targets))
        between.append(_between(base.pooled))
        rows += _rows("none", "none", -1, batch, base, base)
    sums, counts = torch.cat(sums), torch.cat(counts)  # [N, 4, D], [N, 4]

    def other_mean(i: int, kind: int, dim: int) -> float:
        """Mean of dimension `dim` over the other inputs' tokens of `kind` (of all kinds where none has one)."""
        total, count = sums[:, kind, dim].sum() - sums[i, kind, dim], counts[:, kind].sum() - counts[i, kind]
        if count == 0:
            total, count = sums[:, :, dim].sum() - sums[i, :, dim].sum(), counts.sum() - counts[i].sum()
        return float(total / count)

    details = []
    for batch, base, hidden, kinds, targets in found:
        choices = [("massive", -1, targets)]
        for draw in range(draws):
            choices.append(("random", draw, [_random_dims(t, hidden.shape[-1], np.random.default_rng(
                [seed, draw, batch.start + b])) for b, t in enumerate(targets)]))
        for name, draw, chosen in choices:
            edits = [(b, p, d, float(hidden[b, p, d]), other_mean(batch.start + b, int(kinds[b, p]), d))
                     for b, pairs in enumerate(chosen) for p, d in pairs]
            details += [(name, draw, batch.start + b, p, batch.inputs[b].tokens[p], CATEGORIES[int(kinds[b, p])], d,
                         value, mean) for b, p, d, value, mean in edits]
            index = [[e[k] for e in edits] for k in range(3)]
            for edit, values in (("zero", [0.0] * len(edits)), ("mean", [e[4] for e in edits])):
                with set_hidden(model, layer, *index, values, site=site):
                    measured, _ = _measure(model, batch, sink_layers)
                rows += _rows(name, edit, draw, batch, measured, base)
    between = torch.cat(between)
    if not len(between):
        raise ValueError("the yardstick needs a batch of at least two inputs; give more inputs")
    details = pd.DataFrame(details, columns=["targets", "draw", "input", "position", "token", "kind", "dimension",
                                             "value", "mean"])
    return Intervention(_ordered(pd.DataFrame(rows, columns=FRAME_COLUMNS), ["targets", "edit"]),
                        float(between.mean()), sink_layers, _ordered(details, ["targets"]))


# -- section 4: outlier LayerNorm dimensions --------------------------------------------------------
def layernorm(model: nn.Module, layer: int, which: str = "output") -> nn.LayerNorm:
    """Layer `layer`'s (1-indexed) LayerNorm: "output" (after the feed-forward block: `output.LayerNorm` in BERT,
    RoBERTa and ELECTRA, `output_layer_norm` in DistilBERT) or "attention" (after the attention block)."""
    if which not in WHICH:
        raise ValueError(f"which must be one of {WHICH}, not {which!r}")
    layers = intervene.encoder_layers(model)
    check_index(layer, len(layers), "layer")
    if which == "attention":
        return attention_layernorm(model, layer - 1)
    modules = dict(layers[layer - 1].named_modules())
    found = [modules[name] for name in OUTPUT_LAYERNORM_NAMES if isinstance(modules.get(name), nn.LayerNorm)]
    if not found or found[0].weight is None or found[0].bias is None:
        raise ValueError(f"found no LayerNorm with weight and bias named {' or '.join(OUTPUT_LAYERNORM_NAMES)} at the "
                         f"end of layer {layer} of {type(model).__name__}; BERT, RoBERTa, ELECTRA, DistilBERT have one")
    return found[0]


@dataclass(frozen=True)
class LayerNormOutliers:
    """`layernorm_outliers`'s results. `table`: one row per layer (1-indexed), dimension and parameter ("weight",
    "bias"): value, z (standard deviations from the layer's mean) and outlier (|z| > k). `weight_dims`,
    `bias_dims`: the dimensions whose weight (bias) is an outlier in at least min_share of the layers, ascending;
    `dims` = weight_dims, what Kovaleva et al. disabled."""

    table: pd.DataFrame
    weight_dims: tuple[int, ...]
    bias_dims: tuple[int, ...]
    k: float
    min_share: float
    which: str

    @property
    def dims(self) -> tuple[int, ...]:
        return self.weight_dims

    def layers_flagged(self) -> pd.DataFrame:
        """Per dimension flagged in some layer: in how many layers its weight and its bias are outliers."""
        flagged = self.table[self.table["outlier"]]
        counts = flagged.groupby(["dimension", "parameter"]).size().unstack(fill_value=0)
        return counts.reindex(columns=["weight", "bias"], fill_value=0).reset_index().rename_axis(None, axis=1)


def layernorm_outliers(encoder: Encoder, k: float = OUTLIER_SIGMAS, min_share: float = MIN_SHARE,
                       which: str = "output") -> LayerNormOutliers:
    """The outlier dimensions of every layer's LayerNorm weights and biases (see the module docstring and
    `LayerNormOutliers`)."""
    if not k > 0:
        raise ValueError(f"k must be a positive number of standard deviations, got {k}")
    if not 0 < min_share <= 1:
        raise ValueError(f"min_share must lie in (0, 1], got {min_share}")
    rows, flags = [], {"weight": [], "bias": []}
    for layer in range(1, encoder.n_layers + 1):
        norm = layernorm(encoder.model, layer, which)
        for parameter in ("weight", "bias"):
            values = getattr(norm, parameter).detach().cpu().double().numpy()
            std = values.std()
            z = (values - values.mean()) / std if std > 0 else np.zeros_like(values)
            flags[parameter].append(np.abs(z) > k)
            rows += [(layer, d, parameter, float(values[d]), float(z[d]), bool(abs(z[d]) > k))
                     for d in range(len(values))]
    table = pd.DataFrame(rows, columns=["layer", "dimension", "parameter", "value", "z", "outlier"])
    consistent = {p: tuple(int(d) for d in np.flatnonzero(np.mean(f, axis=0) >= min_share)) for p, f in flags.items()}
    return LayerNormOutliers(table, consistent["weight"], consistent["bias"], k, min_share, which)


def _layers(model: nn.Module, layers: Sequence[int] | None) -> list[int]:
    n = len(intervene.encoder_layers(model))
    layers = list(range(1, n + 1)) if layers is None else list(layers)
    if not layers:
        raise ValueError("layers: give at least one layer (1-indexed), or None for all")
    for layer in layers:
        check_index(layer, n, "layer")
    return sorted(set(layers))


def _dims(dims, width: int) -> list[int]:
    dims = sorted({int(d) for d in dims})
    if dims and not (0 <= dims[0] and dims[-1] < width):
        raise ValueError(f"dims must lie in 0-{width - 1} (hidden dimensions, 0-based), got {dims}")
    return dims


@contextmanager
def disabled_layernorm(model: nn.Module, dims: Sequence[int], layers: Sequence[int] | None = None,
                       which: str = "output") -> Iterator[nn.Module]:
    """Run `model` with the LayerNorm weight and bias of `dims` (0-based hidden dimensions) set to 0 in `layers`
    (1-indexed; None: all) as Kovaleva et al. disabled them; on exit (also after an error) the saved values are
    put back exactly. No dims: nothing changes."""
    norms = [layernorm(model, layer, which) for layer in _layers(model, layers)]
    index = torch.tensor(_dims(dims, norms[0].weight.shape[0]), dtype=torch.long, device=norms[0].weight.device)
    saved = [(norm.weight.detach()[index].clone(), norm.bias.detach()[index].clone()) for norm in norms]
    try:
        with torch.no_grad():
            for norm in norms:
                norm.weight[index] = 0
                norm.bias[index] = 0
        yield model
    finally:
        with torch.no_grad():
            for norm, (weight, bias) in zip(norms, saved):
                norm.weight[index] = weight
                norm.bias[index] = bias


@torch.inference_mode()
def layernorm_intervention(encoder: Encoder, items: Sequence, dims: Sequence[int] | LayerNormOutliers,
                           draws: int = DRAWS, seed: int = 0, layers: Sequence[int] | None = None,
                           which: str | None = None, batch_size: int = 16) -> Intervention:
    """Kovaleva et al.'s test: `dims` (or a `LayerNormOutliers`' dims, with its `which`) disabled in the LayerNorm
    of `layers` (1-indexed; None: all; `which` "output" by default), against as many random other dimensions
    (`draws` draws, `np.random.default_rng([seed, draw])`, the same dimensions for every input of a draw). Sink
    mass over the attention layers after the first disabled one; see `Intervention`. 2 + draws passes."""
    if isinstance(dims, LayerNormOutliers):
        which = which or dims.which
        dims = dims.dims
    which = which or "output"
    model = encoder.model
    items = _check_items(items, batch_size)
    _check_draws(draws, seed)
    chosen_layers = _layers(model, layers)
    width = layernorm(model, chosen_layers[0], which).weight.shape[0]
    dims = _dims(dims, width)
    free = np.array([d for d in range(width) if d not in set(dims)])
    if len(dims) > len(free):
        raise ValueError(f"dims: {len(dims)} dimensions leave too few others ({len(free)}) for the random control")
    choices = [("outlier", -1, dims)] + [("random", draw, sorted(int(d) for d in np.random.default_rng(
        [seed, draw]).choice(free, size=len(dims), replace=False))) for draw in range(draws)]
    sink_layers = tuple(range(chosen_layers[0] + 1, encoder.n_layers + 1))
    rows, between = [], []
    for batch in batches(encoder, items, batch_size, attention=False):
        base, _ = _measure(model, batch, sink_layers)
        between.append(_between(base.pooled))
        rows += _rows("none", "none", -1, batch, base, base)
        for name, draw, chosen in choices:
            with disabled_layernorm(model, chosen, chosen_layers, which):
                measured, _ = _measure(model, batch, sink_layers)
            rows += _rows(name, "disable", draw, batch, measured, base)
    between = torch.cat(between)
    if not len(between):
        raise ValueError("the yardstick needs a batch of at least two inputs; give more inputs")
    details = pd.DataFrame([(name, draw, d) for name, draw, chosen in choices for d in chosen],
                           columns=["targets", "draw", "dimension"])
    return Intervention(_ordered(pd.DataFrame(rows, columns=FRAME_COLUMNS), ["targets", "edit"]),
                        float(between.mean()), sink_layers, details)
