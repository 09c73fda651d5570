"""Activation patching on an encoder: copy a component's output from one input's run into another's.

Components of layer l (0-based here, 1-indexed in tables): `("head", l, h)`, head h's context vectors (its slice of
the input of the attention output projection, before the heads are mixed); `("attention", l, None)`, the attention
block's own output (that projection's output, before the residual and the LayerNorm: after them it would be the
whole residual stream); `("mlp", l, None)`, the feed-forward block's second projection (before the residual and
the LayerNorm); `("layer", l, None)`, the whole layer's output (everything up to there).

    patched = patched_outputs(encoder, base, source, components)   # [len(components), T, D] last layer states

runs `base` once per component set, each copy of the batch with one set's activations replaced by those `source`
produced (captured in one pass): every position, so the two inputs must have the same number of tokens. A
component set is a list of components patched together (one component: `[c]`).
"""
from __future__ import annotations

import numbers
from typing import Sequence

import torch
from torch import nn

from ..core import intervene
from ..core.models import Encoder
from .gradients import output_projection

KINDS = ("head", "attention", "mlp", "layer")
MLP_NAMES = ("output.dense", "ffn.lin2")  # BERT, RoBERTa, ELECTRA; DistilBERT

Component = tuple[str, int, int | None]


def every_component(encoder: Encoder) -> list[Component]:
    """Every head, attention block and feed-forward block, layer by layer."""
    out: list[Component] = []
    for layer in range(encoder.n_layers):
        out += [("head", layer, h) for h in range(encoder.n_heads)]
        out += [("attention", layer, None), ("mlp", layer, None)]
    return out


def _module(model: nn.Module, component: Component) -> tuple[nn.Module, bool]:
    """(the module whose activation the component is, whether it is that module's input rather than its output)."""
    kind, layer, head = component
    if kind not in KINDS:
        raise ValueError(f"a component's kind must be one of {KINDS}, got {kind!r}")
    for name, value in [("layer", layer)] + ([("head", head)] if kind == "head" else []):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise ValueError(f"a component's {name} must be an integer (0-based), got {value!r}")
    if kind != "head" and head is not None:
        raise ValueError(f"a component of kind {kind!r} takes no head (None), got {head!r}: one head is "
                         "('head', layer, h)")
    layers = intervene.encoder_layers(model)
    if not 0 <= layer < len(layers):
        raise ValueError(f"layer {layer} is out of range: the model has layers 0-{len(layers) - 1} (0-based)")
    if kind in ("head", "attention"):
        projection = output_projection(model, layer)
        if projection is None:
            raise ValueError(f"found no attention output projection in layer {layer} of {type(model).__name__}")
        return projection, kind == "head"
    if kind == "mlp":
        modules = dict(layers[layer].named_modules())
        found = [modules[name] for name in MLP_NAMES if isinstance(modules.get(name), nn.Linear)]
        if not found:
            raise ValueError(f"found no feed-forward projection ({' or '.join(MLP_NAMES)}) in layer {layer}")
        return found[0], False
    return layers[layer], False


def _select(value: torch.Tensor, component: Component, n_heads: int) -> tuple[slice, ...]:
    """The index of the component's part of its module's activation [B, T, D]: a head's columns, else all."""
    kind, _, head = component
    if kind != "head":
        return (slice(None),)
    size = value.shape[-1] // n_heads
    if not 0 <= head < n_heads:
        raise ValueError(f"head {head} is out of range: the model has heads 0-{n_heads - 1} (0-based)")
    return (Ellipsis, slice(head * size, (head + 1) * size))


def _first(value):
    return value[0] if isinstance(value, tuple) else value


@torch.inference_mode()
def patched_outputs(encoder: Encoder, base: dict[str, torch.Tensor], source: dict[str, torch.Tensor],
                    sets: Sequence[Sequence[Component]]) -> torch.Tensor:
    """Last-layer states [len(sets), T, D] of the base input (padded inputs of one input, `Encoder.pad`) with each
    set's components taken from the source input's run; one pass to capture, one for every set."""
    if base["input_ids"].shape != source["input_ids"].shape or base["input_ids"].shape[0] != 1:
        raise ValueError(f"base and source must be one input each with the same number of tokens (positions "
                         f"align), got {tuple(base['input_ids'].shape)} and {tuple(source['input_ids'].shape)}")
    if not sets:
        raise ValueError("give at least one set of components to patch")
    model, n_heads = encoder.model, encoder.n_heads
    where = {c: _module(model, c) for components in sets for c in components}  # c -> (module, is_input)
    sites = set(where.values())
    captured: dict[tuple[nn.Module, bool], torch.Tensor] = {}

    def keep(module, is_input):
        if is_input:
            return module.register_forward_pre_hook(lambda m, args: captured.__setitem__((m, True), args[0].clone()))
        return module.register_forward_hook(
            lambda m, args, out: captured.__setitem__((m, False), _first(out).clone()))

    hooks = [keep(module, is_input) for module, is_input in sites]
    try:
        model(**source)
    finally:
        for hook in hooks:
            hook.remove()

    copies = {key: value.repeat(len(sets), 1) for key, value in base.items()}
    by_site: dict[tuple[nn.Module, bool], list[tuple[int, Component]]] = {}
    for row, components in enumerate(sets):
        for c in components:
            by_site.setdefault(where[c], []).append((row, c))

    def patch(site, value):
        value = value.clone()
        for row, c in by_site[site]:
            index = _select(value, c, n_heads)
            value[row][index] = captured[site][0][index]
        return value

    def edit(module, is_input):
        if is_input:
            return module.register_forward_pre_hook(lambda m, args: (patch((m, True), args[0]), *args[1:]))

        def after(m, args, out):
            return (patch((m, False), out[0]), *out[1:]) if isinstance(out, tuple) else patch((m, False), out)
        return module.register_forward_hook(after)

    hooks = [edit(module, is_input) for module, is_input in sites]
    try:
        return model(**copies).last_hidden_state
    finally:
        for hook in hooks:
            hook.remove()
