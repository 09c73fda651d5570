"""clspass: the last layer's [CLS] row computed alone equals the whole layer's under masks and drains, with
gradients too; the model gets its own layer back; a layer with BERT's names but another computation is caught
and the masked pass then runs the whole layer; inputs run shortest first."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from bertlook_utils import clspass, importance, intervene
from bertlook_utils.extract import batches
from bertlook_utils.finetune import FineTuned
from bertlook_utils.tasks import Example

TEXTS = ["the cat sat on the mat while it rained", "a dog ran", "birds sang at dawn over the quiet hills"]


@pytest.fixture
def padded(tiny):
    batch = next(batches(tiny, TEXTS, len(TEXTS), attention=False))
    assert not batch.valid.all()  # padded: the fast row must mask the padding as the whole layer does
    return batch


def _edit(batch):
    mask = torch.tensor([[1.0, 0.0, 1.0, 0.5], [0.0, 1.0, 1.0, 1.0]])
    drain = torch.tensor([[0.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 1.0]])
    return importance.mask_edit(mask, drain, batch.is_cls, batch.valid)


def test_the_first_row_alone_equals_the_whole_last_layer_and_runs_one_row(tiny, padded):
    rows = []
    layer = intervene.encoder_layers(tiny.model)[-1]
    hook = layer.intermediate.register_forward_hook(lambda module, args, out: rows.append(args[0].shape[1]))
    try:
        with torch.inference_mode():
            fast = clspass.cls_states(tiny.model, padded.model_inputs, _edit(padded))
            whole = clspass.cls_states(tiny.model, padded.model_inputs, _edit(padded), fast=False)
            plain = clspass.cls_states(tiny.model, padded.model_inputs, importance.mask_edit(torch.ones(2, 4)))
    finally:
        hook.remove()
    assert rows == [1, padded.valid.shape[1], 1]  # the fast passes' feed-forward ran on [CLS] alone
    torch.testing.assert_close(fast, whole, rtol=1e-4, atol=1e-5)
    assert (fast - plain).abs().max() > 1e-2  # the edit matters here: the comparison can fail
    assert intervene.encoder_layers(tiny.model)[-1] is layer and not intervene.is_edited(tiny.model)


def test_gradients_through_the_first_row_equal_the_whole_layers(tiny, padded):
    def gradient(fast):
        mask = torch.ones(2, 4, requires_grad=True)
        edit = importance.mask_edit(mask)
        states = clspass.cls_states(tiny.model, padded.model_inputs, edit, fast)
        (grad,) = torch.autograd.grad(states.square().sum(), mask)
        return grad

    torch.testing.assert_close(gradient(True), gradient(False), rtol=1e-4, atol=1e-5)


def test_the_model_gets_its_last_layer_back_after_an_error(tiny, padded):
    layer = intervene.encoder_layers(tiny.model)[-1]

    def broken(index, probs):
        if index == len(intervene.encoder_layers(tiny.model)) - 1:
            raise RuntimeError("edit failed")
        return probs

    with pytest.raises(RuntimeError, match="edit failed"):
        clspass.cls_states(tiny.model, padded.model_inputs, broken)
    assert intervene.encoder_layers(tiny.model)[-1] is layer


def test_a_layer_named_like_bert_computing_otherwise_is_caught_and_run_whole(tiny, padded, monkeypatch):
    layer = intervene.encoder_layers(tiny.model)[-1]
    computed = layer.forward
    monkeypatch.setattr(layer, "forward", lambda *args, **kwargs: computed(*args, **kwargs) + 1.0)
    edit = importance.mask_edit(torch.ones(2, 4))
    assert not clspass.first_token_agrees(tiny.model, padded.model_inputs, edit)
    torch.manual_seed(0)
    tuned = FineTuned("toy", tiny, torch.nn.Linear(tiny.model.config.hidden_size, 2), None, 32, pd.DataFrame())
    examples = [Example(text, None, i % 2) for i, text in enumerate(TEXTS)]
    masks = np.ones((2, 2, 4), dtype=np.float32)
    masks[1, 0, 1] = 0
    logits = importance._run(tuned, examples, lambda ordered: importance.MaskedLogits(tuned, masks), 4, None,
                             False, "test").arrays["logits"]
    with torch.inference_mode():
        whole = torch.stack([importance._logits(tuned, padded.model_inputs, torch.from_numpy(m)) for m in masks], 1)
    np.testing.assert_allclose(logits, whole.numpy(), atol=1e-5)  # the +1 reached the logits: the whole layer ran


def test_length_order_puts_short_inputs_first_and_keeps_ties_in_order(tiny):
    tuned = FineTuned("toy", tiny, torch.nn.Linear(4, 2), None, 5, pd.DataFrame())
    examples = [Example(text, None, 0) for text in ["one two three four five six", "a b", "c d", "e f g"]]
    # "a b" and "c d": 4 tokens with [CLS] and [SEP]; the first, cut to 5, ties with "e f g" and stays before it
    assert clspass.length_order(tuned, examples) == [1, 2, 0, 3]


def test_the_check_runs_with_every_head_kept_so_a_first_mask_removing_all_cannot_hide_a_wrong_step(
        tiny, padded, monkeypatch):
    """np.unique puts the mask that removes every head first; under it the attention adds nothing and any step
    agrees with the whole layer. A last layer whose attention output is doubled must still be caught."""
    attention = intervene.encoder_layers(tiny.model)[-1].attention.self
    computed = attention.forward
    monkeypatch.setattr(attention, "forward", lambda *args, **kwargs: (
        lambda out: (out[0] * 2, *out[1:]))(computed(*args, **kwargs)))
    torch.manual_seed(0)
    tuned = FineTuned("toy", tiny, torch.nn.Linear(tiny.model.config.hidden_size, 2), None, 32, pd.DataFrame())
    examples = [Example(text, None, i % 2) for i, text in enumerate(TEXTS)]
    masks = np.stack([np.zeros((2, 4), dtype=np.float32), np.ones((2, 4), dtype=np.float32)])
    with torch.inference_mode():
        whole = torch.stack([importance._logits(tuned, padded.model_inputs, torch.from_numpy(m)) for m in masks], 1)
        fast = importance._logits(tuned, padded.model_inputs, torch.from_numpy(masks[1]), fast=True)
    assert (fast - whole[:, 1]).abs().max() > 1e-3  # the plant shows with every head kept
    logits = importance._run(tuned, examples, lambda ordered: importance.MaskedLogits(tuned, masks), 4, None,
                             False, "test").arrays["logits"]
    np.testing.assert_allclose(logits, whole.numpy(), atol=1e-5)
