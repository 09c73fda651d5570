"""The [SEP] no-op argument (Clark et al. 2019, §3.2, Fig 3; SPEC §4.2): attention-gradient importance and
a causal test the paper did not run.

Gradient importance: for every attention probability α (layer, head, from-token i, to-token j), the
magnitude of ∂L/∂α, averaged per head over the weights that go to [SEP], to [CLS], to the punctuation
tokens "." and "," and to every other token; beside it, the attention mass to the same tokens (Fig 3's two
panels). L is an `Objective`: `MaskedLM` (the paper's masked-LM loss; needs a model with an MLM head) or
`PairCosine` (the cosine similarity of the mean-pooled final states of segment A and of segment B, for
encoders without one, such as the default all-MiniLM-L6-v2). `objective_for(encoder)` picks.

Causal test (`sink_ablation`): in one layer (all heads, or one head) move the attention mass on the sink
tokens ([CLS] and [SEP]) to the ordinary tokens — renormalised, or in equal shares — and measure how far the
final token vectors and the mean-pooled embedding move (cosine distance). The control moves the same mass
between ordinary tokens instead (away from randomly chosen ones); because a row that puts 0.9 on [CLS] has
only 0.1 elsewhere, the like-for-like comparison moves per row min(sink mass, half the ordinary mass) in
both (`intervene.matched_mass`), beside the edit that moves all of the sink mass. If attending to a sink is
a no-op, moving its mass should change the output less than moving the same mass between ordinary tokens.

Value norms (`value_norms`, after Kobayashi et al. 2020): per head, the length of the value vector of [CLS],
of [SEP] and of ordinary tokens, and of the same vectors through the head's slice of the output projection
(what attending to a token can add to the residual stream). ∂L/∂α_ij is the dot product of that vector for
token j with the gradient at token i's output, so a short sink vector makes a small sink gradient.

Every input weighs the same; results keep per-input values so that intervals can be taken over inputs.

Neither analysis can be a streaming reducer over attention maps: one needs the gradient of the objective
with respect to the maps, the other runs the model again with edited maps. Each is a `Reducer` that runs the
model itself (`needs_attention = False`) on the engine's padded batches (`extract.batches`, `Batch`), so both
are cached block by block (model fingerprint + data + settings + this module's code version), resume and
shard like every other pass.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn

from ..core import intervene
from ..core.cache import DEFAULT_CACHE_DIR
from ..core.frames import frame_arrays, frame_from
from ..core.conventions import head_frame
from ..engine.extract import Batch, RowReducer, batches, reduce
from ..core.intervals import mean_interval
from ..core.models import Encoder, place

CATEGORIES = ("sep", "cls", "punct", "other")
CONDITIONS = (("sink", "all", "renormalise"), ("sink", "all", "uniform"),
              ("sink", "matched", "renormalise"), ("random", "matched", "renormalise"),
              ("sink", "matched", "uniform"), ("random", "matched", "uniform"))
DISTANCES = ("token_distance", "pooled_distance")


# -- inputs -----------------------------------------------------------------------------------------
def category_mask(batch: Batch, category: str) -> torch.Tensor:
    """bool [B, T]: the batch's tokens of one of CATEGORIES ("other": real tokens that are none of the rest)."""
    masks = {"sep": batch.is_sep, "cls": batch.is_cls, "punct": batch.is_punct, "other": batch.other}
    if category not in masks:
        raise ValueError(f"category must be one of {CATEGORIES}, not {category!r}")
    return masks[category]


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[B, T, D] states averaged over the tokens in `mask` [B, T] -> [B, D]."""
    weights = mask.to(hidden.dtype).unsqueeze(-1)
    return (hidden * weights).sum(1) / weights.sum(1).clamp_min(1)


# -- objectives -------------------------------------------------------------------------------------
class Objective:
    """A differentiable output of the model: `module(encoder)` is the network to run, `loss(module, batch,
    seeds)` the value per input [B] (seeds [B]: one integer per input, for objectives that draw at random)."""

    name = "objective"
    description = ""

    def module(self, encoder: Encoder) -> nn.Module:
        return encoder.model

    def loss(self, module: nn.Module, batch: Batch, seeds: Sequence[int]) -> torch.Tensor:
        raise NotImplementedError


class PairCosine(Objective):
    """cos(mean of the final states over segment A's wordpieces, mean over segment B's), one forward pass
    over `[CLS] A [SEP] B [SEP]` ([CLS]/[SEP] are left out of both means). Sentence encoders such as
    all-MiniLM-L6-v2 are trained to make this kind of similarity meaningful; only |∂L/∂α| is used, so the
    sign (similarity or distance) does not matter."""

    name = "pair-cosine"
    description = "cosine similarity of the mean-pooled final states of segment A and segment B"

    def loss(self, module: nn.Module, batch: Batch, seeds: Sequence[int]) -> torch.Tensor:
        words = batch.valid & ~batch.sinks
        in_b = batch.segment == 1
        a, b = words & ~in_b, words & in_b
        if not (a.any(1) & b.any(1)).all():
            raise ValueError("PairCosine needs (a, b) pairs with words on both sides; give segments or pairs")
        hidden = module(**batch.model_inputs).last_hidden_state
        return nn.functional.cosine_similarity(mean_pool(hidden, a), mean_pool(hidden, b), dim=-1)


class MaskedLM(Objective):
    """The masked-LM loss, as the paper: `rate` of each input's ordinary wordpieces (at least one; drawn
    with the input's seed) are replaced by [MASK]; the loss is the mean cross-entropy at those positions.
    `model` is the same encoder with its MLM head (e.g. AutoModelForMaskedLM, eager attention)."""

    def __init__(self, model: nn.Module, mask_token_id: int, rate: float = 0.15):
        if not 0 < rate < 1:
            raise ValueError(f"rate is the share of wordpieces to mask, between 0 and 1, not {rate}")
        self.model, self.mask_token_id, self.rate = model.eval(), mask_token_id, rate
        self.name = f"mlm-{rate:g}"  # part of the cache key
        self.description = f"masked-LM cross-entropy ({100 * rate:g} % of the wordpieces masked)"

    def module(self, encoder: Encoder) -> nn.Module:
        return self.model

    def loss(self, module: nn.Module, batch: Batch, seeds: Sequence[int]) -> torch.Tensor:
        ids = batch.model_inputs["input_ids"]
        masked = torch.zeros_like(batch.valid)
        for i, seed in enumerate(seeds):
            candidates = torch.nonzero(batch.valid[i] & ~batch.sinks[i]).flatten()
            order = torch.randperm(len(candidates), generator=torch.Generator().manual_seed(int(seed)))
            masked[i, candidates[order[:max(1, round(self.rate * len(candidates)))]]] = True
        inputs = dict(batch.model_inputs, input_ids=torch.where(masked, self.mask_token_id, ids))
        logits = module(**inputs).logits
        ce = nn.functional.cross_entropy(logits.transpose(1, 2), ids, reduction="none")
        return (ce * masked).sum(1) / masked.sum(1)


def has_mlm_head(encoder: Encoder) -> bool:
    """True when the checkpoint declares a masked-LM architecture (e.g. BertForMaskedLM, BertForPreTraining)."""
    names = getattr(encoder.model.config, "architectures", None) or []
    return any(n.endswith(("ForMaskedLM", "ForPreTraining")) for n in names)


def objective_for(encoder: Encoder) -> Objective:
    """`MaskedLM` with the checkpoint's own MLM head when it has one (as the paper), else `PairCosine`."""
    if not has_mlm_head(encoder):
        return PairCosine()
    if encoder.folder is None:
        raise ValueError(f"{encoder.name} declares a masked-LM head but was not loaded from a folder, so its head "
                         "cannot be read: load it with load_encoder, or pass an objective")
    from transformers import AutoModelForMaskedLM

    model = AutoModelForMaskedLM.from_pretrained(encoder.folder, attn_implementation="eager")
    return MaskedLM(place(model, encoder.device), encoder.tokenizer.mask_token_id)


# -- gradient importance ----------------------------------------------------------------------------
@dataclass
class GradientResult:
    """Per input, layer, head and category (CATEGORIES): `gradient` [N, L, H, 4] = mean |∂L/∂α| over the
    weights from every token to that category; `attention` [N, L, H, 4] = attention mass to it, averaged
    over from-tokens. NaN where an input has no token of a category."""

    gradient: np.ndarray
    attention: np.ndarray
    objective: str

    def by_layer(self) -> pd.DataFrame:
        """layer (1-indexed), category, gradient and attention (means over inputs and heads), each with a
        95 % t-interval over inputs (`*_low`, `*_high`)."""
        per_input = {name: np.nanmean(getattr(self, name), axis=2) for name in ("gradient", "attention")}  # [N, L, 4]
        rows = []
        for layer in range(self.gradient.shape[1]):
            for c, category in enumerate(CATEGORIES):
                rows.append((layer + 1, category, *(v for name in per_input
                                                    for v in mean_interval(per_input[name][:, layer, c]))))
        return pd.DataFrame(rows, columns=["layer", "category", "gradient", "gradient_low", "gradient_high",
                                           "attention", "attention_low", "attention_high"])

    def by_head(self, value: str = "gradient") -> pd.DataFrame:
        """One row per head (1-indexed layer, head), one column per category: the mean over inputs."""
        array = getattr(self, value)
        return head_frame({c: np.nanmean(array[..., i], axis=0) for i, c in enumerate(CATEGORIES)})

    def relative(self) -> pd.DataFrame:
        """Per layer, each category's gradient over the gradient to `other` tokens (mean over inputs of the
        per-input ratio of head means), with a 95 % t-interval over inputs."""
        per_input = np.nanmean(self.gradient, axis=2)  # [N, L, 4]
        ratio = per_input / per_input[..., [CATEGORIES.index("other")]]
        rows = []
        for layer in range(ratio.shape[1]):
            for c, category in enumerate(CATEGORIES[:-1]):
                rows.append((layer + 1, category, *mean_interval(ratio[:, layer, c])))
        return pd.DataFrame(rows, columns=["layer", "category", "ratio", "low", "high"])


def _per_category(values: torch.Tensor, batch: Batch, mean_over_columns: bool) -> torch.Tensor:
    """values [B, H, T, T] -> [B, H, 4]: per category, the sum (attention) or mean (gradient) over its
    columns, then the mean over the input's rows."""
    rows = batch.valid.to(values.dtype)
    out = []
    for category in CATEGORIES:
        columns = category_mask(batch, category).to(values.dtype)
        per_row = (values * columns[:, None, None, :]).sum(-1)
        if mean_over_columns:
            per_row = per_row / columns.sum(1)[:, None, None]  # NaN (0/0) where the category is absent
        out.append((per_row * rows[:, None, :]).sum(-1) / rows.sum(1)[:, None])
    return torch.stack(out, -1)


class AttentionGradients(RowReducer):
    """Per input, |∂L/∂α| and α per layer, head and category (see `GradientResult`): the objective's forward
    and backward pass on each batch, with `intervene.Capture` keeping the maps in the graph."""

    name = "attention_gradients"
    needs_attention = False  # it needs the maps inside the autograd graph, so it runs the model itself

    def __init__(self, module: nn.Module, objective: Objective, seed: int):
        super().__init__()
        self.module, self.objective, self.seed = module, objective, seed

    @property
    def key(self) -> str:
        return f"{self.name}-{self.objective.name}-{self.seed}"

    def update(self, batch: Batch) -> None:
        capture = intervene.Capture()
        with torch.enable_grad(), intervene.edit_attention(self.module, capture):
            seeds = [self.seed + batch.start + i for i in range(len(batch.inputs))]
            loss = self.objective.loss(self.module, batch, seeds)
        grads = capture.gradients(loss.sum())
        layers = sorted(grads)
        gradient = torch.stack([_per_category(grads[layer].abs().cpu(), batch, True) for layer in layers], 1)
        attention = torch.stack([_per_category(capture.probs[layer].detach().cpu(), batch, False) for layer in layers],
                                1)
        self.add(gradient=gradient.double().numpy(), attention=attention.double().numpy())


def attention_gradients(encoder: Encoder, items: Sequence, objective: Objective | None = None,
                        batch_size: int = 8, seed: int = 0, cache_dir: Path | str | None = DEFAULT_CACHE_DIR,
                        progress: bool = True) -> GradientResult:
    """|∂L/∂α| and α per input, layer, head and category (see `GradientResult`), cached block by block."""
    if not items:
        raise ValueError("no inputs: give segments, texts or (a, b) pairs")
    objective = objective or objective_for(encoder)
    reducer = AttentionGradients(objective.module(encoder), objective, seed)
    reduce(encoder, list(items), [reducer], batch_size=batch_size, cache_dir=cache_dir, progress=progress,
           desc=f"attention gradients ({objective.name})")
    return GradientResult(reducer.arrays["gradient"], reducer.arrays["attention"], objective.name)


# -- the causal test --------------------------------------------------------------------------------
@dataclass
class AblationResult:
    """`frame`: one row per input, scope and condition: scope ("layer": all heads of the layer, or "head"),
    layer and head (1-indexed; head 0 = all heads), source ("sink": [CLS] and [SEP], or "random": random
    ordinary tokens), amount ("all" of the sink mass, or "matched": `intervene.matched_mass`, the same in
    both sources), mode ("renormalise" or "uniform", how the mass is given to the other tokens), input,
    token_distance (mean over tokens of 1 - cos between the final vectors with and without the edit),
    pooled_distance (1 - cos of the mean-pooled embeddings), moved (attention mass moved per row, mean over
    rows and edited heads). `reference`: the mean pooled distance between two different inputs of one batch
    (unedited; neighbouring segments, often of the same article), a yardstick for how large a distance is."""

    frame: pd.DataFrame
    reference: float

    def summary(self, distance: str = "pooled_distance") -> pd.DataFrame:
        """Mean and 95 % t-interval over inputs of `distance`, per scope, layer, head and condition."""
        rows = []
        for key, group in self.frame.groupby(["scope", "layer", "head", *CONDITION_COLUMNS], sort=False):
            rows.append((*key, *mean_interval(group[distance].to_numpy()), group["moved"].mean()))
        return pd.DataFrame(rows, columns=["scope", "layer", "head", *CONDITION_COLUMNS, "mean", "low", "high",
                                           "moved"])

    def contrast(self, distance: str = "pooled_distance", mode: str = "renormalise") -> pd.DataFrame:
        """Paired per input, for the matched amount: distance after moving mass away from the sinks minus
        distance after moving the same mass between random ordinary tokens, with a 95 % t-interval; `ratio`
        = mean sink / mean random, NaN where the random edit moves the output by less than MIN_DISTANCE (no
        measurable change to compare with: a ratio of rounding errors can be anything, even negative)."""
        matched = self.frame[(self.frame["amount"] == "matched") & (self.frame["mode"] == mode)]
        wide = matched.pivot_table(index=["scope", "layer", "head", "input"], columns="source", values=distance)
        rows = []
        for key, group in wide.groupby(level=["scope", "layer", "head"], sort=False):
            sink, random = group["sink"].to_numpy(), group["random"].to_numpy()
            ratio = sink.mean() / random.mean() if random.mean() >= MIN_DISTANCE else np.nan
            rows.append((*key, sink.mean(), random.mean(), *mean_interval(sink - random), ratio))
        return pd.DataFrame(rows, columns=["scope", "layer", "head", "sink", "random", "difference", "low", "high",
                                           "ratio"])


CONDITION_COLUMNS = ("source", "amount", "mode")
MIN_DISTANCE = 1e-5  # a smaller cosine distance is float32 rounding between nearly equal vectors, not a change


def _cosine_distance(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return 1 - nn.functional.cosine_similarity(x, y, dim=-1)


def _edit(batch: Batch, layer: int, head: int | None, source: str, amount: str, mode: str, seed: int):
    if source == "sink":
        return intervene.drain_tokens(layer, batch.sinks, batch.valid & ~batch.sinks, mode, head,
                                      matched=amount == "matched")
    return intervene.drain_random(layer, batch.sinks, batch.valid, mode, head, seed=seed)


class SinkAblation(RowReducer):
    """Per input, scope and condition, how far the output moves when the sink mass is moved (`AblationResult`);
    `between`: the pooled distances between different inputs of each batch, for the yardstick."""

    name = "sink_ablation"
    needs_attention = False  # it runs the model again with edited maps, so it runs the model itself

    def __init__(self, model: nn.Module, scopes: Sequence[tuple[str, int, int | None]], seed: int):
        super().__init__()
        self.model, self.scopes, self.seed = model, list(scopes), seed

    @property
    def key(self) -> str:
        return f"{self.name}-{json.dumps(self.scopes)}-{self.seed}"

    @torch.inference_mode()
    def update(self, batch: Batch) -> None:
        model, start, size = self.model, batch.start, len(batch.inputs)
        base = model(**batch.model_inputs, output_attentions=True)
        pooled = mean_pool(base.last_hidden_state, batch.valid)
        pairs = torch.triu_indices(size, size, offset=1)
        between = _cosine_distance(pooled[pairs[0]], pooled[pairs[1]])
        rows_mask = batch.valid.to(pooled.dtype)
        rows = []

        def row_mean(values):  # [B, T] -> [B]
            return (values * rows_mask).sum(1) / rows_mask.sum(1)

        for s, (scope, layer, head) in enumerate(self.scopes):
            edited = base.attentions[layer][:, slice(None) if head is None else slice(head, head + 1)]
            sink_mass = (edited * batch.sinks[:, None, None, :]).sum(-1)
            moved = {"all": row_mean(sink_mass.mean(1)),
                     "matched": row_mean(intervene.matched_mass(sink_mass, 1 - sink_mass).mean(1))}
            for source, amount, mode in CONDITIONS:
                edit = _edit(batch, layer, head, source, amount, mode, self.seed + 1000 * s + start)
                with intervene.edit_attention(model, edit):
                    hidden = model(**batch.model_inputs).last_hidden_state
                token = row_mean(_cosine_distance(hidden, base.last_hidden_state))
                pool = _cosine_distance(mean_pool(hidden, batch.valid), pooled)
                for i in range(size):
                    rows.append((scope, layer + 1, 0 if head is None else head + 1, source, amount, mode, start + i,
                                 float(token[i]), float(pool[i]), float(moved[amount][i])))
        frame = pd.DataFrame(rows, columns=["scope", "layer", "head", *CONDITION_COLUMNS, "input", *DISTANCES, "moved"])
        self.add(**frame_arrays(frame, "frame"), between=between.double().numpy())


def sink_ablation(encoder: Encoder, items: Sequence, heads: Sequence[tuple[int, int]] = (), batch_size: int = 16,
                  seed: int = 0, cache_dir: Path | str | None = DEFAULT_CACHE_DIR, progress: bool = True
                  ) -> AblationResult:
    """The causal test on `items`: every layer with all its heads edited, and each (layer, head) in `heads`
    (0-based) alone, under every condition in CONDITIONS (source, amount, mode). Cached block by block."""
    if not items:
        raise ValueError("no inputs: give segments, texts or (a, b) pairs")
    if batch_size < 2:
        raise ValueError("the reference distance needs batches of at least two inputs (batch_size >= 2)")
    scopes = [("layer", layer, None) for layer in range(encoder.n_layers)]
    for layer, head in heads:
        if not (0 <= layer < encoder.n_layers and 0 <= head < encoder.n_heads):
            raise ValueError(f"head ({layer}, {head}) does not exist: heads are 0-based (layer, head) pairs "
                             f"within {encoder.n_layers} layers x {encoder.n_heads} heads")
        scopes.append(("head", layer, head))
    reducer = SinkAblation(encoder.model, scopes, seed)
    reduce(encoder, list(items), [reducer], batch_size=batch_size, cache_dir=cache_dir, progress=progress,
           desc="sink ablation")
    between = reducer.arrays["between"]
    if not len(between):
        raise ValueError("the reference distance needs batches of at least two inputs; give at least two inputs")
    return AblationResult(frame_from(reducer.arrays, "frame"), float(between.mean()))


# -- value norms ------------------------------------------------------------------------------------
OUTPUT_NAMES = ("attention.output.dense", "attention.out_lin")  # BERT, RoBERTa, ELECTRA; DistilBERT
SINK_HEAD = 0.3  # a "sink head" puts more than this share of its attention on [CLS] and [SEP] together
NORM_CATEGORIES = ("cls", "sep", "other")


def output_projection(model: nn.Module, layer: int) -> nn.Linear | None:
    """The attention block's output projection of layer `layer` (0-based), or None when the architecture is
    not one of OUTPUT_NAMES."""
    modules = dict(intervene.encoder_layers(model)[layer].named_modules())
    found = [modules[name] for name in OUTPUT_NAMES if isinstance(modules.get(name), nn.Linear)]
    return found[0] if found else None


def _per_category_mean(values: torch.Tensor, batch: Batch) -> torch.Tensor:
    """values [B, H, T] -> [B, H, 3]: the mean over each input's tokens of NORM_CATEGORIES (NaN where absent)."""
    out = []
    for category in NORM_CATEGORIES:
        mask = category_mask(batch, category).to(values.dtype)[:, None, :]
        out.append((values * mask).sum(-1) / mask.sum(-1))
    return torch.stack(out, -1)


@torch.inference_mode()
def value_norms(encoder: Encoder, items: Sequence, batch_size: int = 8) -> pd.DataFrame:
    """Per head, how much attending to [CLS], to [SEP] and to an ordinary token can write. One row per head:
    layer, head (1-indexed); `cls`, `sep`, `sink` (= cls + sep): attention mass, mean over rows; `value_cls`,
    `value_sep`, `value_other`: mean |v_j| of the head's value vectors over those tokens ("other": not special,
    not punctuation); `output_*`: the same for v_j through the head's columns of the output projection (NaN
    for an architecture without a known one); `value_ratio` = value_cls / value_other, `output_ratio` likewise.
    Every value is a mean over inputs (each input weighs the same)."""
    if not items:
        raise ValueError("no inputs: give segments, texts or (a, b) pairs")
    model, n_heads = encoder.model, encoder.n_heads
    collected: dict[str, list[np.ndarray]] = {}
    for batch in batches(encoder, list(items), batch_size, attention=False):
        out = model(**batch.model_inputs, output_attentions=True, output_hidden_states=True)
        rows = batch.valid.to(torch.float64)[:, None, :]
        per_layer = {name: [] for name in ("attention", "value", "output")}
        for layer, attn in enumerate(out.attentions):  # attn [B, H, T, T]
            attn = attn.double()
            mass = torch.stack([(attn * category_mask(batch, c)[:, None, None, :]).sum(-1) for c in ("cls", "sep")], -1)
            per_layer["attention"].append((mass * rows[..., None]).sum(2) / rows.sum(-1)[..., None])  # [B, H, 2]
            entering = out.hidden_states[layer].to(encoder.device)  # the outputs are on the CPU (`models.place`)
            values = intervene.value_projection(model, layer)(entering).cpu().double()  # [B, T, D]
            size = values.shape[-1] // n_heads
            by_head = values.unflatten(-1, (n_heads, size)).transpose(1, 2)  # [B, H, T, size]
            per_layer["value"].append(_per_category_mean(by_head.norm(dim=-1), batch))
            dense = output_projection(model, layer)
            if dense is None:
                per_layer["output"].append(torch.full_like(per_layer["value"][-1], float("nan")))
            else:
                weight = dense.weight.cpu().double().T.unflatten(0, (n_heads, size))  # [H, size, hidden]
                written = torch.einsum("bhts,hsd->bhtd", by_head, weight)
                per_layer["output"].append(_per_category_mean(written.norm(dim=-1), batch))
        for name, arrays in per_layer.items():
            collected.setdefault(name, []).append(torch.stack(arrays, 1).numpy())  # [B, L, H, k]
    with np.errstate(all="ignore"):  # an input without [SEP] leaves NaN, and nanmean skips it
        means = {name: np.nanmean(np.concatenate(arrays), axis=0) for name, arrays in collected.items()}
    frame = {"cls": means["attention"][..., 0], "sep": means["attention"][..., 1],
             "sink": means["attention"].sum(-1)}
    for kind in ("value", "output"):
        for k, category in enumerate(NORM_CATEGORIES):
            frame[f"{kind}_{category}"] = means[kind][..., k]
        frame[f"{kind}_ratio"] = means[kind][..., 0] / means[kind][..., 2]
    return head_frame(frame)


def value_norm_summary(norms: pd.DataFrame, threshold: float = SINK_HEAD) -> pd.DataFrame:
    """`value_norms` per layer: heads, `sink_heads` (heads with `sink` > threshold), and the ratio |v[CLS]| /
    |v other| through the output projection (`output_ratio`; `value_ratio` where that is NaN): its largest value
    among the sink heads (`sink_max`, NaN when the layer has none) and its median over all heads (`all_median`)."""
    ratio = norms["output_ratio"].where(norms["output_ratio"].notna(), norms["value_ratio"])
    rows = []
    for layer, group in norms.groupby("layer"):
        sink = group["sink"] > threshold
        rows.append((int(layer), len(group), int(sink.sum()), ratio[group.index][sink].max() if sink.any() else np.nan,
                     ratio[group.index].median()))
    return pd.DataFrame(rows, columns=["layer", "heads", "sink_heads", "sink_max", "all_median"])
