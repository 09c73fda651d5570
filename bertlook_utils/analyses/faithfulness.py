"""Which tokens does the sentence embedding rest on? Token scores by every method, and the deletion test.

The output is the model's sentence embedding: the mean of the last layer's states over the real tokens
(`gradients.mean_pool`, all-MiniLM-L6-v2's own pooling). `token_scores` ranks one input's tokens for it:

- from a context-mixing map M [L, n, n] (`mixing.layer_maps`), token j's score is the mean over the rows i of
  M[i, j] in the last layer ("attention", "norm", "block") or of its rollout across layers ("… rollout");
  raw attention and the norm maps, which leave the residual out, are rolled out with it added (½·M + ½·I, as
  Abnar & Zuidema did);
- gradient methods through captum, on the word embeddings: "integrated gradients" (`LayerIntegratedGradients`,
  from a baseline of [PAD] at every ordinary token, N_STEPS steps) of f = cos(e, e₀), the cosine between the
  embedding and the input's own e₀, what deletion measures: a token's score is its attribution summed over the
  embedding dimensions, signed, and the scores add up to 1 − cos(e(baseline), e₀) (completeness, up to the
  quadrature's error); "gradient × input" (`InputXGradient`) of f = e · ê₀ (the embedding along e₀'s direction:
  the cosine's own gradient is zero at the input, where the cosine is largest), a token's score the L2 norm of its
  attribution vector.

`deletion_curve` masks the k best-ranked ordinary tokens (attention mask 0, left out of the mean) for k = 1 … K
and measures the cosine distance between the masked input's embedding and the original's: a faithful ranking
moves it sooner. Random orders of the same tokens are the control.
"""
from __future__ import annotations

import numbers
from typing import Mapping, Sequence

import numpy as np
import torch

from ..core.models import Encoder
from ..engine.extract import batches
from .gradients import mean_pool
from .mixing import rollout

N_STEPS = 32  # integrated-gradients steps (captum's Gauss-Legendre rule)
GRADIENT_METHODS = ("integrated gradients", "gradient × input")


def _with_residual(maps: np.ndarray) -> np.ndarray:
    return 0.5 * maps + 0.5 * np.eye(maps.shape[-1])


def map_scores(maps: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Token scores [n] from `mixing.layer_maps` maps (name -> [L, n, n]): the last layer's column means and,
    for every map, those of its rollout ("<name> rollout")."""
    scores = {}
    for name, value in maps.items():
        value = np.asarray(value, dtype=np.float64)
        if name in ("attention", "norm"):
            scores[name] = value[-1].mean(0)
            value = _with_residual(value)
        scores[f"{name} rollout"] = rollout(value)[-1].mean(0)
    return scores


def embedding(encoder: Encoder, inputs: Mapping[str, torch.Tensor], **forward) -> torch.Tensor:
    """[B, D]: the mean of the last layer's states over the real tokens of padded `inputs` (`Encoder.pad`)."""
    hidden = encoder.model(**inputs, **forward).last_hidden_state
    return mean_pool(hidden, inputs["attention_mask"].bool())


def gradient_scores(encoder: Encoder, item, n_steps: int = N_STEPS) -> dict[str, np.ndarray]:
    """GRADIENT_METHODS' token scores [n] for one input (see the module docstring), through captum."""
    from captum.attr import InputXGradient, LayerIntegratedGradients

    batch = next(batches(encoder, [item], attention=False))
    inputs = {k: v for k, v in batch.model_inputs.items()}
    ids, rest = inputs.pop("input_ids"), inputs
    with torch.no_grad():
        direction = torch.nn.functional.normalize(embedding(encoder, batch.model_inputs), dim=-1)  # ê₀ [1, D]

    def pooled(input_ids=None, inputs_embeds=None):  # e [rows, D]
        given = {"input_ids": input_ids} if inputs_embeds is None else {"inputs_embeds": inputs_embeds}
        size = (input_ids if inputs_embeds is None else inputs_embeds).shape[0]
        tiled = {k: v.expand(size, -1) for k, v in rest.items()}
        return embedding(encoder, {**tiled, **given})

    def cosine(input_ids):  # f = cos(e, e₀), one value per row
        return (torch.nn.functional.normalize(pooled(input_ids=input_ids), dim=-1) * direction).sum(-1)

    table = encoder.model.get_input_embeddings()
    special = batch.sinks[0]
    pad = encoder.tokenizer.pad_token_id or 0
    baseline = torch.where(special, ids[0], torch.full_like(ids[0], pad))[None]
    integrated = LayerIntegratedGradients(cosine, table)
    with torch.enable_grad():
        ig = integrated.attribute(ids, baselines=baseline, n_steps=n_steps)  # [1, n, E]
        embeds = table(ids.to(table.weight.device)).detach().cpu().requires_grad_()
        gxi = InputXGradient(lambda e: (pooled(inputs_embeds=e) * direction).sum(-1)).attribute(embeds)  # [1, n, E]
    return {"integrated gradients": ig[0].detach().double().sum(-1).cpu().numpy(),
            "gradient × input": gxi[0].detach().double().norm(dim=-1).cpu().numpy()}


@torch.inference_mode()
def deletion_curve(encoder: Encoder, item, orders: Sequence[Sequence[int]], depth: int) -> np.ndarray:
    """[len(orders), depth]: for each order of token positions (best first), the cosine distance between the
    input's embedding and that with its first k positions masked (k = 1 … depth; attention mask 0, out of the
    mean); one forward pass for every order and k."""
    if isinstance(depth, bool) or not isinstance(depth, numbers.Integral) or depth < 1:
        raise ValueError(f"depth must be an integer of 1 or more, got {depth!r}")
    batch = next(batches(encoder, [item], attention=False))
    n = int(batch.lengths[0])
    orders = [list(map(int, order)) for order in orders]
    if not orders or any(len(order) < depth for order in orders):
        raise ValueError(f"every order must hold at least depth={depth} positions")
    for order in orders:
        repeated = [p for k, p in enumerate(order[:depth]) if p in order[:k]]
        if repeated:
            raise ValueError(f"an order repeats position {repeated[0]} in its first depth={depth} positions: each "
                             "step must mask one more token")
    if any(not 0 <= p < n for order in orders for p in order[:depth]):
        raise ValueError(f"positions must lie in 0-{n - 1}")
    mask = batch.model_inputs["attention_mask"]
    variants = mask.repeat(len(orders) * depth + 1, 1)  # row 0: the input itself
    for o, order in enumerate(orders):
        for k in range(1, depth + 1):
            variants[1 + o * depth + k - 1, order[:k]] = 0
    tiled = {key: value.repeat(len(variants), 1) for key, value in batch.model_inputs.items()}
    tiled["attention_mask"] = variants
    embedded = embedding(encoder, tiled).double()
    distance = 1 - torch.nn.functional.cosine_similarity(embedded[1:], embedded[:1], dim=-1)
    return distance.view(len(orders), depth).numpy()


def ranking(scores: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """The candidate positions (bool [n]) from the highest score to the lowest (ties: the earlier first)."""
    scores, candidates = np.asarray(scores, dtype=np.float64), np.asarray(candidates, dtype=bool)
    if scores.shape != candidates.shape:
        raise ValueError(f"scores {scores.shape} and candidates {candidates.shape} must have one entry per token")
    positions = np.flatnonzero(candidates)
    return positions[np.argsort(-scores[positions], kind="stable")]
