"""The attention-editing hook on a tiny random BERT, and the edit factories on synthetic probabilities."""
from __future__ import annotations

import pytest
import torch
from transformers import BertConfig, BertModel

from bertlook_utils import intervene


def tiny_bert(seed: int = 0, dtype=torch.float32) -> BertModel:
    """2 layers x 2 heads, hidden 16, random weights (large enough for peaked attention), eager, eval mode."""
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32, initializer_range=0.5,
                        attn_implementation="eager")
    return BertModel(config).to(dtype).eval()


def tiny_inputs(seed: int = 1):
    """3 inputs of 9 tokens, the second padded after 6; [CLS] = id 1 at 0, [SEP] = id 2 at the end(s)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 40, (3, 9), generator=g)
    mask = torch.ones(3, 9, dtype=torch.long)
    mask[1, 6:] = 0
    ids[:, 0] = 1
    ids[:, 4] = 2
    ids[[0, 2], 8] = 2
    ids[1, 5] = 2
    return {"input_ids": ids, "attention_mask": mask}


def random_probs(shape=(2, 3, 7, 7), seed=0, valid=None, scale=2.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(shape, generator=g, dtype=torch.float64) * scale
    if valid is not None:
        scores = scores.masked_fill(~valid[:, None, None, :], float("-inf"))
    return scores.softmax(-1)


# -- the hook ---------------------------------------------------------------------------------------
def test_identity_edit_reproduces_the_model_and_restores_it():
    model, inputs = tiny_bert(), tiny_inputs()
    base = model(**inputs, output_attentions=True)
    seen = []
    with intervene.edit_attention(model, lambda layer, p: seen.append((layer, p.shape)) or p):
        assert model.config._attn_implementation == intervene.IMPLEMENTATION
        same = model(**inputs, output_attentions=True)
    assert [layer for layer, _ in seen] == [0, 1]
    assert seen[0][1] == (3, 2, 9, 9)
    torch.testing.assert_close(same.last_hidden_state, base.last_hidden_state, rtol=0, atol=1e-6)
    for a, b in zip(same.attentions, base.attentions):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-7)
    assert model.config._attn_implementation == "eager"
    assert not intervene._ACTIVE
    seen.clear()
    after = model(**inputs)
    assert not seen  # the hook is gone
    torch.testing.assert_close(after.last_hidden_state, base.last_hidden_state, rtol=0, atol=0)


def test_edit_is_applied_and_hook_removed_after_an_exception():
    model, inputs = tiny_bert(), tiny_inputs()
    base = model(**inputs).last_hidden_state
    with pytest.raises(RuntimeError, match="boom"):
        with intervene.edit_attention(model, intervene.uniform_head(1, 0, inputs["attention_mask"].bool())):
            edited = model(**inputs).last_hidden_state
            assert (edited - base).abs().max() > 1e-3  # the edit really changes the output
            raise RuntimeError("boom")
    assert model.config._attn_implementation == "eager" and not intervene._ACTIVE
    torch.testing.assert_close(model(**inputs).last_hidden_state, base, rtol=0, atol=0)


def test_wrong_shape_from_an_edit_is_a_clear_error():
    model, inputs = tiny_bert(), tiny_inputs()
    with pytest.raises(ValueError, match="shape"):
        with intervene.edit_attention(model, lambda layer, p: p[:, :1]):
            model(**inputs)
    assert model.config._attn_implementation == "eager" and not intervene._ACTIVE


def test_nested_contexts_restore_the_outer_edit():
    model, inputs = tiny_bert(), tiny_inputs()
    calls = []
    with intervene.edit_attention(model, lambda layer, p: calls.append("outer") or p):
        with intervene.edit_attention(model, lambda layer, p: calls.append("inner") or p):
            model(**inputs)
        model(**inputs)
    assert calls == ["inner", "inner", "outer", "outer"]
    assert model.config._attn_implementation == "eager" and not intervene._ACTIVE


def test_uniform_head_in_the_model_leaves_other_heads_and_earlier_layers_alone():
    model, inputs = tiny_bert(), tiny_inputs()
    valid = inputs["attention_mask"].bool()
    base = model(**inputs, output_attentions=True).attentions
    with intervene.edit_attention(model, intervene.uniform_head(1, 1, valid)):
        edited = model(**inputs, output_attentions=True).attentions
    torch.testing.assert_close(edited[0], base[0], rtol=0, atol=0)
    torch.testing.assert_close(edited[1][:, 0], base[1][:, 0], rtol=0, atol=0)
    expected = valid.float() / valid.sum(1, keepdim=True)
    torch.testing.assert_close(edited[1][:, 1], expected[:, None, :].expand(3, 9, 9))


@pytest.mark.parametrize("make_edit", [
    lambda layer, valid: intervene.uniform_head(layer, 0, valid),
    lambda layer, valid: intervene.drain_tokens(layer, valid & False, valid),
    lambda layer, valid: intervene.drain_random(layer, valid & False, valid),
])
def test_an_edit_of_a_layer_the_model_lacks_is_an_error(make_edit):
    model, inputs = tiny_bert(), tiny_inputs()  # layers 0 and 1
    valid = inputs["attention_mask"].bool()
    for layer in (2, -1):
        with pytest.raises(ValueError, match="has layers 0-1; the edit would silently do nothing"):
            with intervene.edit_attention(model, make_edit(layer, valid)):
                pass
    with intervene.edit_attention(model, make_edit(1, valid)):
        model(**inputs)


def test_capture_gives_gradients_with_padding():
    model, inputs = tiny_bert(), tiny_inputs()
    capture = intervene.Capture()
    with intervene.edit_attention(model, capture):
        out = model(**inputs).last_hidden_state
    grads = capture.gradients(out[:, 0, 0].sum())  # not a sum over hidden units: LayerNorm makes that constant
    assert sorted(grads) == [0, 1] and grads[1].shape == (3, 2, 9, 9)
    assert grads[1].abs().sum() > 0
    assert all(p.grad is None for p in model.parameters())  # the parameters are left alone
    assert torch.all(capture.probs[0][1, :, :, 6:] == 0)  # padded columns hold no attention
    with torch.no_grad(), intervene.edit_attention(model, capture := intervene.Capture()):
        out = model(**inputs).last_hidden_state
    with pytest.raises(RuntimeError, match="autograd graph"):
        capture.gradients(out.sum())


def test_no_layer_list_is_a_clear_error():
    class NotBert(torch.nn.Module):
        config = BertConfig(num_hidden_layers=3)

    with pytest.raises(ValueError, match="BERT-family"):
        with intervene.edit_attention(NotBert(), lambda layer, p: p):
            pass


# -- the edit factories -----------------------------------------------------------------------------
VALID = torch.tensor([[True] * 7, [True] * 5 + [False] * 2])
SINKS = torch.tensor([[1, 0, 0, 1, 0, 0, 1], [1, 0, 0, 0, 1, 0, 0]], dtype=torch.bool)


@pytest.mark.parametrize("mode", intervene.MODES)
@pytest.mark.parametrize("head", [None, 1])
def test_drain_tokens_moves_exactly_the_sink_mass(mode, head):
    probs = random_probs(valid=VALID)
    receivers = VALID & ~SINKS
    out = intervene.drain_tokens(2, SINKS, receivers, mode, head)(2, probs)
    torch.testing.assert_close(out.sum(-1), torch.ones(2, 3, 7, dtype=torch.float64))
    heads = [0, 1, 2] if head is None else [1]
    others = [h for h in range(3) if h not in heads]
    torch.testing.assert_close(out[:, others], probs[:, others], rtol=0, atol=0)
    edited, before = out[:, heads], probs[:, heads]
    assert torch.all(edited[SINKS[:, None, None, :].expand_as(edited)] == 0)
    assert torch.all(edited[~VALID[:, None, None, :].expand_as(edited)] == 0)
    gained = edited - before
    moved = (before * SINKS[:, None, None, :]).sum(-1, keepdim=True)
    if mode == "uniform":
        share = moved / receivers.sum(1)[:, None, None, None]
        torch.testing.assert_close(gained * receivers[:, None, None, :], share * receivers[:, None, None, :])
    else:  # ratios among receivers are kept
        ratio = edited / before
        r = ratio[receivers[:, None, None, :].expand_as(ratio)].view(-1)
        expected = (1 / (1 - moved)).expand_as(edited)[receivers[:, None, None, :].expand_as(ratio)]
        torch.testing.assert_close(r, expected)
    assert intervene.drain_tokens(2, SINKS, receivers, mode, head)(1, probs) is probs  # other layers untouched


def test_uniform_head_rows_are_uniform_over_valid_tokens():
    probs = random_probs(valid=VALID)
    out = intervene.uniform_head(0, 2, VALID)(0, probs)
    torch.testing.assert_close(out[1, 2], torch.tensor([0.2] * 5 + [0.0] * 2, dtype=torch.float64).expand(7, 7))
    torch.testing.assert_close(out[:, :2], probs[:, :2], rtol=0, atol=0)
    with pytest.raises(ValueError, match="head 5"):
        intervene.uniform_head(0, 5)(0, probs)


@pytest.mark.parametrize("mode", intervene.MODES)
def test_drain_random_removes_the_sink_mass_from_ordinary_tokens(mode):
    # a flat map with light sinks, so that every row's ordinary tokens hold over twice its sink mass
    probs = random_probs(valid=VALID, scale=0.3) * torch.where(SINKS, 0.3, 1.0)[:, None, None, :]
    probs = probs / probs.sum(-1, keepdim=True)
    sink_mass = (probs * SINKS[:, None, None, :]).sum(-1)
    assert torch.all(sink_mass < (1 - sink_mass) / 2)
    edit = intervene.drain_random(0, SINKS, VALID, mode, head=1, seed=3)
    assert edit(1, probs) is probs  # other layers untouched
    out = edit(0, probs)
    torch.testing.assert_close(out.sum(-1), torch.ones(2, 3, 7, dtype=torch.float64))
    torch.testing.assert_close(out[:, [0, 2]], probs[:, [0, 2]], rtol=0, atol=0)
    sink = SINKS[:, None, :].expand(2, 7, 7)
    torch.testing.assert_close(out[:, 1][sink], probs[:, 1][sink], rtol=0, atol=0)  # sinks keep their mass
    assert torch.all(out[:, 1][~VALID[:, None, :].expand(2, 7, 7)] == 0)
    # each row lost its sink mass on some ordinary tokens and gained it back on others
    change = out[:, 1] - probs[:, 1]
    lost = (-change).clamp_min(0).sum(-1)
    torch.testing.assert_close(lost, (probs[:, 1] * SINKS[:, None, :]).sum(-1))
    again = intervene.drain_random(0, SINKS, VALID, mode, head=1, seed=3)(0, probs)
    torch.testing.assert_close(again, out, rtol=0, atol=0)  # seeded
    other = intervene.drain_random(0, SINKS, VALID, mode, head=1, seed=4)(0, probs)
    assert (other - out).abs().max() > 1e-6


def test_matched_drains_move_the_same_mass_when_the_sinks_hold_most_of_it():
    probs = torch.tensor([[[[0.9, 0.03, 0.03, 0.02, 0.02], [0.2, 0.5, 0.1, 0.1, 0.1]]]], dtype=torch.float64)
    sinks, valid = torch.tensor([[True, False, False, False, False]]), torch.ones(1, 5, dtype=torch.bool)
    full = intervene.drain_tokens(0, sinks, valid & ~sinks, "uniform")(0, probs)
    sink = intervene.drain_tokens(0, sinks, valid & ~sinks, "uniform", matched=True)(0, probs)
    torch.testing.assert_close(full[0, 0], torch.tensor([[0.0, 0.255, 0.255, 0.245, 0.245],
                                                         [0.0, 0.55, 0.15, 0.15, 0.15]], dtype=torch.float64))
    # row 0: 0.9 on the sink, 0.1 on ordinary tokens: the matched edits move min(0.9, 0.1 / 2) = 0.05
    torch.testing.assert_close(sink[0, 0, 0], torch.tensor([0.85, 0.0425, 0.0425, 0.0325, 0.0325],
                                                           dtype=torch.float64))
    torch.testing.assert_close(sink[0, 0, 1], full[0, 0, 1])  # row 1: min(0.2, 0.8 / 2) = 0.2, all of it
    for seed in range(5):
        control = intervene.drain_random(0, sinks, valid, "uniform", seed=seed)(0, probs)
        torch.testing.assert_close(control.sum(-1), torch.ones(1, 1, 2, dtype=torch.float64))
        assert torch.all(control[..., 0] == probs[..., 0])  # the sink keeps its mass in the control
        for row, mass in ((0, 0.05), (1, 0.2)):  # the same total variation as the matched sink edit
            assert float((control - probs)[0, 0, row].abs().sum()) == pytest.approx(2 * mass)


def test_random_removal_takes_whole_tokens_then_part_of_one():
    probs = torch.tensor([[0.1, 0.2, 0.3, 0.4]], dtype=torch.float64)
    taken = intervene.random_removal(probs, torch.tensor([[0.45]], dtype=torch.float64),
                                     torch.tensor([[0.0, 1, 1, 1]], dtype=torch.float64),
                                     torch.Generator().manual_seed(0))
    assert taken[0, 0] == 0 and taken.sum() == pytest.approx(0.45)
    assert int(((taken > 0) & (taken < probs)).sum()) <= 1  # at most one token taken in part
    assert torch.all(taken <= probs)


def test_bad_inputs_are_clear_errors():
    probs = random_probs(valid=VALID)
    with pytest.raises(ValueError, match="both a source and a receiver"):
        intervene.drain_tokens(0, SINKS, VALID, "uniform")
    with pytest.raises(ValueError, match="mode"):
        intervene.drain_tokens(0, SINKS, VALID & ~SINKS, "zero")(0, probs)
    with pytest.raises(ValueError, match="sources"):
        intervene.drain_tokens(0, SINKS[:, :5], VALID[:, :5] & ~SINKS[:, :5])(0, probs)
    with pytest.raises(ValueError, match="no token left"):
        intervene.drain_tokens(0, VALID, torch.zeros_like(VALID))(0, probs)


@pytest.mark.parametrize("family", ["roberta", "distilbert", "electra"])
def test_other_bert_family_encoders(family):
    from transformers import (DistilBertConfig, DistilBertModel, ElectraConfig, ElectraModel, RobertaConfig,
                              RobertaModel)

    sizes = dict(vocab_size=40, max_position_embeddings=40, attn_implementation="eager")
    config, model_class = {
        "roberta": (RobertaConfig(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                                  **sizes), RobertaModel),
        "distilbert": (DistilBertConfig(dim=16, n_layers=2, n_heads=2, hidden_dim=32, **sizes), DistilBertModel),
        "electra": (ElectraConfig(embedding_size=16, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=32, **sizes), ElectraModel),
    }[family]
    torch.manual_seed(0)
    model, inputs = model_class(config).eval(), tiny_inputs()
    base = model(**inputs, output_attentions=True)
    layers = []
    with intervene.edit_attention(model, lambda layer, p: layers.append(layer) or p):
        same = model(**inputs).last_hidden_state
    assert layers == [0, 1]
    torch.testing.assert_close(same, base.last_hidden_state, rtol=0, atol=0)
    valid = inputs["attention_mask"].bool()
    with intervene.edit_attention(model, intervene.uniform_head(1, 0, valid)):
        edited = model(**inputs, output_attentions=True).attentions[1]
    torch.testing.assert_close(edited[:, 0], (valid.float() / valid.sum(1, keepdim=True))[:, None].expand(3, 9, 9))
    torch.testing.assert_close(edited[:, 1], base.attentions[1][:, 1], rtol=0, atol=0)
    assert model.config._attn_implementation == "eager" and not intervene._ACTIVE


def test_value_projection_is_the_layers_value_map_in_bert_and_distilbert():
    from transformers import DistilBertConfig, DistilBertModel

    bert = tiny_bert()
    assert intervene.value_projection(bert, 1) is bert.encoder.layer[1].attention.self.value
    distil = DistilBertModel(DistilBertConfig(vocab_size=40, dim=16, n_layers=2, n_heads=2, hidden_dim=32))
    assert intervene.value_projection(distil, 0) is distil.transformer.layer[0].attention.v_lin
    for bad in (2, -1):
        with pytest.raises(ValueError, match="layers 0-1; got"):
            intervene.value_projection(bert, bad)
