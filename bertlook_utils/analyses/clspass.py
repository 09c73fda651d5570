"""A classifier on [CLS] under an attention edit, for less: the last layer computes the [CLS] row alone, inputs go
through the model in order of length.

A classifier on the last layer's [CLS] state reads nothing else of that layer: its other rows serve only as the
keys and values [CLS] attends to. `first_token_step(layer)` computes a BERT-style layer's first row alone (about
a sixth of a 6-layer model's work is saved); `cls_states(model, inputs, edit)` runs the model under an edit with
that step in the last layer, or the whole layer where it is not BERT-style; `first_token_agrees` checks the step
against the whole layer on real inputs. `length_order` sorts a task's inputs by length, so that short ones are
padded with short ones.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator, Sequence

import torch

from ..core import intervene
from ..data.tasks import Example
from .finetune import FineTuned

Step = Callable[[torch.Tensor, "torch.Tensor | None", intervene.Edit, int], torch.Tensor]


def first_token_step(block: torch.nn.Module) -> Step | None:
    """For a BERT-style transformer block (attention.self.query/key/value, attention.output, intermediate,
    output: BERT, RoBERTa, ELECTRA), step(hidden [B, T, D], mask (additive, [B or 1, 1, T or 1, T]) or None,
    edit, index) -> [B, D]: the block's output at the first position alone, with edit(index, probs) applied to
    that row's probabilities [B, heads, 1, T]. None for other blocks."""
    try:
        attention = block.attention.self
        query, key, value = attention.query, attention.key, attention.value
        heads, size = attention.num_attention_heads, attention.attention_head_size
        attention_output, intermediate, output = block.attention.output, block.intermediate, block.output
    except AttributeError:
        return None
    scaling = getattr(attention, "scaling", size ** -0.5)

    def step(hidden: torch.Tensor, mask: torch.Tensor | None, edit: intervene.Edit, index: int) -> torch.Tensor:
        def split(x):  # [B, T, heads * size] -> [B, heads, T, size]
            return x.view(x.shape[0], x.shape[1], heads, size).transpose(1, 2)

        first = hidden[:, :1]
        scores = split(query(first)) @ split(key(hidden)).transpose(2, 3) * scaling
        if mask is not None:
            scores = scores + mask[:, :, :1, : hidden.shape[1]]
        probs = edit(index, torch.nn.functional.softmax(scores, dim=-1))
        context = (probs @ split(value(hidden))).transpose(1, 2).reshape(hidden.shape[0], 1, heads * size)
        attended = attention_output(context, first)
        return output(intermediate(attended), attended)[:, 0]
    return step


class _FirstTokenLayer(torch.nn.Module):
    """Stands in for the last layer: its output at the first position alone, [B, 1, D]."""

    def __init__(self, step: Step, edit: intervene.Edit, index: int):
        super().__init__()
        self.step, self.edit, self.index = step, edit, index

    def forward(self, hidden: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        mask = args[0] if args else kwargs.get("attention_mask")
        return self.step(hidden, mask, self.edit, self.index)[:, None]


@contextmanager
def _last_layer_on_first_token(model: torch.nn.Module, edit: intervene.Edit, fast: bool) -> Iterator[None]:
    layers = intervene.encoder_layers(model)
    top = len(layers) - 1
    original = layers[top]
    step = first_token_step(original) if fast else None
    if step is None:
        yield
        return
    layers[top] = _FirstTokenLayer(step, edit, top)
    try:
        yield
    finally:
        layers[top] = original


def cls_states(model: torch.nn.Module, inputs: dict[str, torch.Tensor], edit: intervene.Edit,
               fast: bool = True) -> torch.Tensor:
    """[B, D]: the last layer's [CLS] state of padded `inputs` with `edit` applied to every layer's attention
    (`intervene.edit_attention`); with `fast`, a BERT-style last layer computes that row alone. Needs an encoder
    whose last hidden state is its last layer's output (BERT, RoBERTa, ELECTRA, DistilBERT)."""
    with intervene.edit_attention(model, edit), _last_layer_on_first_token(model, edit, fast):
        return model(**inputs).last_hidden_state[:, 0]


@torch.inference_mode()
def first_token_agrees(model: torch.nn.Module, inputs: dict[str, torch.Tensor], edit: intervene.Edit) -> bool:
    """Whether the fast [CLS] state equals the whole last layer's (to float rounding) on `inputs` under `edit`:
    a layer with BERT's names but another computation fails it."""
    return torch.allclose(cls_states(model, inputs, edit), cls_states(model, inputs, edit, fast=False),
                          rtol=1e-4, atol=1e-5)


def length_order(tuned: FineTuned, examples: Sequence[Example]) -> list[int]:
    """The examples' indices, shortest first once cut to the model's max_length (ties in the given order)."""
    lengths = [len(tuned.encoder.prepare(e.a, e.b, max_tokens=tuned.max_length).input_ids) for e in examples]
    return sorted(range(len(examples)), key=lambda i: (lengths[i], i))
