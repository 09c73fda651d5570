"""Edit attention probabilities inside a BERT-family model's forward pass.

    with intervene.edit_attention(encoder.model, edit):
        outputs = encoder.model(**inputs)

`edit(layer, probs) -> probs` is called once per self-attention layer (0-based `layer`) with the
probabilities `probs` [B, H, T, T] (after the softmax and the padding mask, before they multiply the
values) and returns the tensor to use instead, same shape. It stays in the autograd graph, so an edit
can also capture probabilities for gradients (see `Capture`).

How: transformers looks up the attention function by `config._attn_implementation` at every call. We
register an eager-equivalent function under our own name (`IMPLEMENTATION`) once, and inside the context
point the model's config(s) at it; the padding mask is built exactly as for "eager". On exit (also after
an exception) the configs get their old implementation back and the model forgets the edit. Tested with
BERT, RoBERTa, DistilBERT and ELECTRA (transformers 5).

Edit factories: `uniform_head` (Kovaleva et al.'s head disabling), `drain_tokens` (move the mass on given
columns to the other tokens), `drain_random` (move the same mass away from randomly chosen tokens, the
control), `Capture` (keep every layer's probabilities, for their gradients).
"""
from __future__ import annotations

import warnings
import weakref
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import torch
from torch import nn
from transformers import AttentionInterface, PretrainedConfig
from transformers.masking_utils import AttentionMaskInterface, eager_mask

Edit = Callable[[int, torch.Tensor], torch.Tensor]
IMPLEMENTATION = "bertlook_edit"
MODES = ("renormalise", "uniform")

_ACTIVE: dict[nn.Module, tuple[int, Edit]] = {}  # module of layer i -> (i, edit), while a context is open


def _edited_eager_attention(module: nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                            attention_mask: torch.Tensor | None, scaling: float | None = None,
                            dropout: float = 0.0, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
    """transformers' eager attention with the active edit applied to the probabilities."""
    if scaling is None:
        scaling = query.size(-1) ** -0.5
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        scores = scores + attention_mask[:, :, :, : key.shape[-2]]
    probs = nn.functional.softmax(scores, dim=-1)
    active = _ACTIVE.get(module)
    if active is not None:
        layer, edit = active
        edited = edit(layer, probs)
        if not isinstance(edited, torch.Tensor) or edited.shape != probs.shape:
            raise ValueError(f"the attention edit must return a tensor of shape {tuple(probs.shape)} for layer "
                             f"{layer}, got {getattr(edited, 'shape', type(edited).__name__)}")
        probs = edited
    probs = nn.functional.dropout(probs, p=dropout, training=module.training)
    output = torch.matmul(probs, value).transpose(1, 2).contiguous()
    return output, probs


AttentionInterface.register(IMPLEMENTATION, _edited_eager_attention)
AttentionMaskInterface.register(IMPLEMENTATION, eager_mask)


def encoder_layers(model: nn.Module) -> nn.ModuleList:
    """The model's list of transformer layers (the first ModuleList with one entry per hidden layer)."""
    n = model.config.num_hidden_layers
    for module in model.modules():
        if isinstance(module, nn.ModuleList) and len(module) == n:
            return module
    raise ValueError(f"found no list of {n} transformer layers in {type(model).__name__}; "
                     "edit_attention works with BERT-family encoders (BERT, RoBERTa, ELECTRA, DistilBERT)")


VALUE_NAMES = ("value", "v_lin")  # BERT, RoBERTa, ELECTRA; DistilBERT


def value_projection(model: nn.Module, layer: int) -> nn.Linear:
    """The linear map [.., hidden] -> [.., hidden] that makes layer `layer`'s (0-based) value vectors, every
    head's side by side (head h: columns h * hidden / n_heads onwards): `attention.self.value` in BERT, RoBERTa
    and ELECTRA, `attention.v_lin` in DistilBERT."""
    layers = encoder_layers(model)
    if not 0 <= layer < len(layers):
        raise ValueError(f"layer is 0-based here: this model has layers 0-{len(layers) - 1}; got {layer}")
    found = [m for name, m in layers[layer].named_modules()
             if name.rsplit(".", 1)[-1] in VALUE_NAMES and isinstance(m, nn.Linear)]
    if len(found) != 1:
        raise ValueError(f"found {len(found)} value projections named {' or '.join(VALUE_NAMES)} in layer {layer} of "
                         f"{type(model).__name__}; value_projection knows BERT, RoBERTa, ELECTRA and DistilBERT")
    return found[0]


@contextmanager
def edit_attention(model: nn.Module, edit: Edit) -> Iterator[nn.Module]:
    """Run `model` with `edit(layer, probs)` applied to every self-attention layer's probabilities."""
    if not callable(edit):
        raise TypeError("edit must be a function edit(layer, probs) -> probs")
    layers = encoder_layers(model)
    target = getattr(edit, "layer", None)  # set by the edit factories below
    if target is not None and not 0 <= target < len(layers):
        raise ValueError(f"the edit targets layer {target} (0-based) but this model has layers 0-{len(layers) - 1}; "
                         "the edit would silently do nothing")
    configs = {id(m.config): m.config for m in model.modules() if isinstance(getattr(m, "config", None),
                                                                               PretrainedConfig)}
    entries = {m: (i, edit) for i, layer in enumerate(layers) for m in layer.modules()}
    previous_entries = {m: _ACTIVE.get(m) for m in entries}
    previous_impl = {key: config._attn_implementation for key, config in configs.items()}
    try:
        _ACTIVE.update(entries)
        for config in configs.values():
            config._attn_implementation = IMPLEMENTATION
        yield model
    finally:
        for key, config in configs.items():
            config._attn_implementation = previous_impl[key]
        for m, old in previous_entries.items():
            if old is None:
                _ACTIVE.pop(m, None)
            else:
                _ACTIVE[m] = old


def is_edited(model: nn.Module) -> bool:
    """Whether an `edit_attention` context is open on `model` (or on a model it contains)."""
    return any(m in _ACTIVE for m in model.modules())


_READS_ONLY: "weakref.WeakSet[Callable]" = weakref.WeakSet()  # hooks that leave every output as it was


def reads_only(hook: Callable) -> Callable:
    """Mark `hook` as one that leaves the model's numbers as they are (it only watches, or moves tensors between
    devices), so that the cache stays in use while it is registered (`usable_cache`); returns `hook`."""
    _READS_ONLY.add(hook)
    return hook


def _hooks(module: nn.Module) -> list[Callable]:
    """The forward and backward hooks registered on `module` itself."""
    tables = ("_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks")
    return [hook for table in tables for hook in getattr(module, table, {}).values()]


def unnamed_state(model: nn.Module) -> str | None:
    """What in `model`'s state no cache key names, in words (training mode, an open attention edit, a hook on it, on
    one of its modules or on every module that is neither marked `reads_only` nor transformers' own, part of the
    model's code), or None: the key (its weights, config, tokenizer, class and placement) then determines the
    numbers it computes."""
    if is_edited(model):
        return "an attention edit (intervene.edit_attention) is open on this model"
    training = [name or "the model" for name, m in model.named_modules() if m.training]
    if training:
        return f"{training[0]} is in training mode (dropout is on; call model.eval())"
    from torch.nn.modules import module as modules

    everywhere = (modules._global_forward_pre_hooks, modules._global_forward_hooks,
                  modules._global_backward_pre_hooks, modules._global_backward_hooks)
    hooked = [("every module", hook) for table in everywhere for hook in table.values()]
    hooked += [(name or "the model", hook) for name, m in model.named_modules() for hook in _hooks(m)]
    foreign = [(where, hook) for where, hook in hooked
               if hook not in _READS_ONLY and not getattr(hook, "__module__", "").startswith("transformers.")]
    if foreign:
        where, hook = foreign[0]
        name = getattr(hook, "__qualname__", type(hook).__name__)
        return f"a hook ({name}) is registered on {where}" + (f", and {len(foreign) - 1} more" if len(foreign) > 1
                                                                else "")
    return None


def usable_cache(model: nn.Module, cache_dir: Path | str | None) -> Path | str | None:
    """`cache_dir`, or None with a warning while `model` is in a state no cache key names (`unnamed_state`): its
    numbers depend on that state (a function, a mode), so they are neither read from nor written to the cache of
    the plain model."""
    reason = unnamed_state(model) if cache_dir is not None else None
    if reason:
        warnings.warn(f"{reason}, which no cache key names: these results are computed afresh, neither read from "
                      "nor written to the cache (which holds the plain model's numbers)", stacklevel=3)
        return None
    return cache_dir


# -- edit factories ---------------------------------------------------------------------------------
def _heads(probs: torch.Tensor, head: int | None) -> slice:
    if head is None:
        return slice(None)
    if not 0 <= head < probs.shape[1]:
        raise ValueError(f"head {head} does not exist (0-based; the layer has {probs.shape[1]} heads)")
    return slice(head, head + 1)


def _columns(mask: torch.Tensor, probs: torch.Tensor, what: str) -> torch.Tensor:
    """bool [B, T] -> [B, 1, 1, T] in probs' dtype, after checking its shape."""
    if mask.shape != (probs.shape[0], probs.shape[-1]):
        raise ValueError(f"{what} must be a bool mask [batch, tokens] = {(probs.shape[0], probs.shape[-1])}, "
                         f"got {tuple(mask.shape)}")
    return mask.to(device=probs.device, dtype=probs.dtype)[:, None, None, :]


def redistribute(probs: torch.Tensor, removed: torch.Tensor, receivers: torch.Tensor, mode: str) -> torch.Tensor:
    """Take `removed` [..., T] (0 <= removed <= probs) out of each row and give the row's removed total to the
    `receivers` (0/1 weights broadcastable to probs): "renormalise" in proportion to what they hold after the
    removal, "uniform" in equal shares. Rows keep summing to 1; a row whose receivers hold nothing under
    "renormalise" gets equal shares."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    kept = probs - removed
    total = removed.sum(-1, keepdim=True)
    receivers = receivers.expand_as(probs)
    if (receivers.sum(-1) == 0).any():
        raise ValueError("some row has no token left to receive the moved attention")
    shares = receivers / receivers.sum(-1, keepdim=True)
    if mode == "renormalise":
        weights = kept * receivers
        norm = weights.sum(-1, keepdim=True)
        shares = torch.where(norm > 0, weights / norm.clamp_min(torch.finfo(probs.dtype).tiny), shares)
    return kept + total * shares


def uniform_head(layer: int, head: int | None = None, valid: torch.Tensor | None = None) -> Edit:
    """Disable a head (all heads of the layer when head is None; `layer` and `head` 0-based, as `edit_attention`
    counts them): its rows become uniform over the input's tokens (`valid` bool [B, T]; None = no padding), as
    Kovaleva et al. disable heads."""
    def edit(current: int, probs: torch.Tensor) -> torch.Tensor:
        if current != layer:
            return probs
        heads = _heads(probs, head)
        columns = torch.ones_like(probs[:, :1, :1, :]) if valid is None else _columns(valid, probs, "valid")
        out = probs.clone()
        out[:, heads] = (columns / columns.sum(-1, keepdim=True)).expand_as(out[:, heads])
        return out
    edit.layer = layer  # checked by edit_attention
    return edit


def drain_tokens(layer: int, sources: torch.Tensor, receivers: torch.Tensor, mode: str = "renormalise",
                 head: int | None = None, matched: bool = False) -> Edit:
    """Move the attention on the `sources` columns (bool [B, T], e.g. [CLS] and [SEP]) to the `receivers`
    columns (bool [B, T]), in `layer` (one head, or all when head is None); see `redistribute`. All of it,
    or with `matched`, per row only `matched_mass` (taken from the sources in proportion): what
    `drain_random` moves between ordinary tokens, so that both change the row by the same total variation.
    `layer` and `head` are 0-based, as `edit_attention` counts them."""
    if (sources & receivers).any():
        raise ValueError("a token cannot be both a source and a receiver of the moved attention")

    def edit(current: int, probs: torch.Tensor) -> torch.Tensor:
        if current != layer:
            return probs
        heads = _heads(probs, head)
        part = probs[:, heads]
        removed = part * _columns(sources, probs, "sources")
        receiving = _columns(receivers, probs, "receivers")
        if matched:
            total = removed.sum(-1, keepdim=True)
            limit = matched_mass(total, (part * receiving).sum(-1, keepdim=True))
            removed = removed * torch.where(total > 0, limit / total.clamp_min(torch.finfo(probs.dtype).tiny), 0)
        out = probs.clone()
        out[:, heads] = redistribute(part, removed, receiving, mode)
        return out
    edit.layer = layer  # checked by edit_attention
    return edit


def random_removal(probs: torch.Tensor, amount: torch.Tensor, candidates: torch.Tensor,
                   generator: torch.Generator) -> torch.Tensor:
    """Mass to remove [..., T]: for each row, walk the `candidates` columns (0/1, broadcastable) in a random
    order and take them whole until `amount` [..., 1] is reached (the last one in part). Where the candidates
    hold less than `amount`, all of it is taken."""
    keys = torch.rand(probs.shape, generator=generator, dtype=torch.float64).to(probs.device)
    keys = torch.where(candidates.expand_as(probs) > 0, keys, torch.full_like(keys, 2.0))
    order = keys.argsort(dim=-1)
    mass = (probs * candidates).gather(-1, order)
    before = mass.cumsum(-1) - mass
    taken = torch.minimum(mass, (amount - before).clamp_min(0))
    return torch.zeros_like(probs).scatter(-1, order, taken)


def matched_mass(sink_mass: torch.Tensor, ordinary_mass: torch.Tensor) -> torch.Tensor:
    """The mass the matched edits move in a row: min(sink mass, half the ordinary mass), the most that can be
    taken from some ordinary tokens and still leave as much on the others."""
    return torch.minimum(sink_mass, ordinary_mass / 2)


def drain_random(layer: int, sinks: torch.Tensor, valid: torch.Tensor, mode: str = "renormalise",
                 head: int | None = None, seed: int = 0) -> Edit:
    """The control for `drain_tokens(layer, sinks, valid & ~sinks, mode, head, matched=True)`: per row,
    remove `matched_mass` from randomly chosen ordinary tokens (valid, not sinks; seeded; see
    `random_removal`), and give it to the ordinary tokens not drained (not to the sinks, which keep their
    attention; where no ordinary token is left undrained, to all of them). `layer` and `head` are 0-based."""
    generator = torch.Generator().manual_seed(seed)

    def edit(current: int, probs: torch.Tensor) -> torch.Tensor:
        if current != layer:
            return probs
        heads = _heads(probs, head)
        part = probs[:, heads]
        sink = _columns(sinks, probs, "sinks")
        ordinary = _columns(valid, probs, "valid") * (1 - sink)
        amount = matched_mass((part * sink).sum(-1, keepdim=True), (part * ordinary).sum(-1, keepdim=True))
        removed = random_removal(part, amount, ordinary, generator)
        receivers = ordinary * (removed == 0)
        receivers = torch.where(receivers.sum(-1, keepdim=True) > 0, receivers, ordinary.expand_as(part))
        out = probs.clone()
        out[:, heads] = redistribute(part, removed, receivers, mode)
        return out
    edit.layer = layer  # checked by edit_attention
    return edit


class Capture:
    """An edit that keeps every layer's probabilities in the graph, unchanged: after a forward pass inside
    `edit_attention(model, capture)` (with gradients enabled), `probs[layer]` [B, H, T, T] holds α and
    `gradients(loss)` returns ∂loss/∂α per layer (without touching the parameters' .grad)."""

    def __init__(self):
        self.probs: dict[int, torch.Tensor] = {}

    def __call__(self, layer: int, probs: torch.Tensor) -> torch.Tensor:
        self.probs[layer] = probs
        return probs

    def gradients(self, loss: torch.Tensor) -> dict[int, torch.Tensor]:
        layers = sorted(self.probs)
        if not layers or not all(self.probs[layer].requires_grad for layer in layers):
            raise RuntimeError("no probabilities in the autograd graph: run the forward pass inside edit_attention "
                               "with gradients enabled (not under torch.no_grad / inference_mode)")
        return dict(zip(layers, torch.autograd.grad(loss, [self.probs[layer] for layer in layers])))
