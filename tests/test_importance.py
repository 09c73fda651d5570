"""importance: the head mask (ones = the model), per-input gradients equal finite differences, per-layer
normalisation, pruning orders chosen on the selection half only, draining [CLS] columns, areas under the curves,
layer-matched random sets, masks and dominant patterns on known answers, bad input."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from bertlook_utils import importance
from bertlook_utils.extract import batches
from bertlook_utils.finetune import FineTuned
from bertlook_utils.tasks import Example

EXAMPLES = [Example("the cat sat on the mat", None, 0), Example("a dog ran home fast", None, 1),
            Example("rain fell all day", None, 1), Example("birds sang at dawn", None, 0)]


@pytest.fixture(scope="module")
def classifier(tiny):
    torch.manual_seed(0)
    return FineTuned("toy", tiny, torch.nn.Linear(tiny.model.config.hidden_size, 2), None, 32, pd.DataFrame())


def _loss(classifier, example, mask):
    batch = next(batches(classifier.encoder, [example.item], attention=False))
    with torch.inference_mode():
        logits = importance._logits(classifier, batch.model_inputs, torch.from_numpy(mask))
    return float(torch.nn.functional.cross_entropy(logits, torch.tensor([example.label])))


def test_a_mask_of_ones_is_the_model(classifier):
    batch = next(batches(classifier.encoder, [e.item for e in EXAMPLES], attention=False))
    with torch.inference_mode():
        masked = importance._logits(classifier, batch.model_inputs, torch.ones(2, 4))
        plain = classifier.head(classifier.encoder.model(**batch.model_inputs).last_hidden_state[:, 0])
    torch.testing.assert_close(masked, plain)


def test_gradients_are_per_input_and_match_finite_differences(classifier):
    reducer = importance._run(classifier, EXAMPLES, lambda ordered: importance.MaskGradients(
        classifier, [e.label for e in ordered]), 4, None, False, "test")  # shortest first: labels in that order
    gradient = reducer.arrays["gradient"]  # [4, 2, 4]
    eps = 1e-3
    for k in (0, 2):
        for layer, head in ((0, 1), (1, 3)):
            mask = np.ones((2, 4), dtype=np.float32)
            mask[layer, head] -= eps
            up = np.ones((2, 4), dtype=np.float32)
            up[layer, head] += eps
            numeric = (_loss(classifier, EXAMPLES[k], up) - _loss(classifier, EXAMPLES[k], mask)) / (2 * eps)
            assert gradient[k, layer, head] == pytest.approx(numeric, rel=0.05, abs=1e-4)
    table = importance.head_importance(classifier, EXAMPLES, cache_dir=None, progress=False)
    np.testing.assert_allclose(table["importance"].to_numpy(), np.abs(gradient).mean(0).ravel())
    assert (table["low"] <= table["importance"]).all() and list(table.columns[:2]) == ["layer", "head"]


def test_zero_mask_removes_a_head(classifier):
    edit = importance.mask_edit(torch.tensor([[1.0, 0.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]]))
    probs = torch.full((1, 4, 3, 3), 1 / 3)
    out = edit(0, probs)
    assert out[0, 1].abs().sum() == 0 and torch.equal(out[0, 0], probs[0, 0])
    torch.testing.assert_close(edit(1, probs), probs)


def test_masks_from_orders():
    masks = importance.masks_from_orders([[3, 0, 1, 2]], [0, 1, 4], 2, 2)
    np.testing.assert_array_equal(masks[0], np.ones((2, 2)))
    np.testing.assert_array_equal(masks[1], [[1, 1], [1, 0]])
    np.testing.assert_array_equal(masks[2], np.zeros((2, 2)))
    with pytest.raises(ValueError, match="exactly once"):
        importance.masks_from_orders([[0, 0, 1, 2]], [1], 2, 2)
    with pytest.raises(ValueError, match="between 0 and 4"):
        importance.masks_from_orders([[0, 1, 2, 3]], [5], 2, 2)


def test_pruning_orders_come_from_the_selection_half_only(classifier, monkeypatch):
    seen = []
    real = importance.head_importance

    def spy(tuned, examples, **options):
        seen.append(list(examples))
        return real(tuned, examples, **options)

    monkeypatch.setattr(importance, "head_importance", spy)
    selection, evaluation = EXAMPLES[:2], EXAMPLES[2:]
    curves = importance.pruning_curves(classifier, selection, evaluation, shares=(0, 0.5, 1), n_random=2,
                                       cache_dir=None, progress=False)
    assert seen == [selection]
    assert curves.orders == ("importance", "raw importance", "random 1", "random 2")
    assert set(curves.frame["order"]) == set(curves.orders) and curves.correct.shape == (2, 4, 3)
    frame = curves.frame
    np.testing.assert_allclose(frame["accuracy"], curves.correct.mean(0).ravel())
    start = frame[frame["heads"] == 0]["accuracy"]
    baseline = importance.masked_accuracy(classifier, evaluation, np.ones((1, 2, 4)), cache_dir=None,
                                          progress=False).mean()
    assert (start == baseline).all()


def test_dominant_kinds_and_pattern_removal(classifier):
    kinds = np.array([[["vertical", "block"], ["diagonal", "block"]],
                      [["vertical", "block"], ["diagonal", "broad"]],
                      [["block", "block"], ["vertical", "broad"]]])  # [3 inputs, 2 layers, 2 heads]
    np.testing.assert_array_equal(importance.dominant_kinds(kinds), [["vertical", "block"], ["diagonal", "broad"]])
    dominant = np.array([["vertical", "vertical", "block", "block"], ["block", "block", "block", "block"]])
    table = importance.pattern_removal(classifier, EXAMPLES, dominant, n_random=3, n_random_for={"vertical": 5},
                                       drained=("vertical",), cache_dir=None, progress=False)
    assert table["kind"].tolist() == ["block", "vertical"] and table["heads"].tolist() == [6, 2]
    assert table["sets"].tolist() == [3, 5] and ((table["p"] > 0) & (table["p"] <= 1)).all()
    assert table["full layers"].tolist() == [1, 0]  # block fills layer 2; vertical fills none
    assert ((table["random low"] <= table["random"]) & (table["random"] <= table["random high"])).all()
    assert np.isnan(table["cls drained"].iloc[0])
    drained = importance.masked_accuracy(classifier, EXAMPLES, np.ones((1, 2, 4)), (dominant == "vertical")[None],
                                         cache_dir=None, progress=False).mean()
    assert table["cls drained"].iloc[1] == drained
    with pytest.raises(ValueError, match="at least one random set"):
        importance.pattern_removal(classifier, EXAMPLES, dominant, n_random=0, cache_dir=None)
    with pytest.raises(ValueError, match="dominant must be"):
        importance.pattern_removal(classifier, EXAMPLES, dominant[:1], cache_dir=None)
    with pytest.raises(ValueError, match="masks must be"):
        importance.masked_accuracy(classifier, EXAMPLES, np.ones((1, 3, 4)), cache_dir=None)


def test_masks_in_one_pass_equal_one_pass_per_mask(classifier, monkeypatch):
    rng = np.random.default_rng(0)
    masks = (rng.random((5, 2, 4)) > 0.4).astype(np.float32)
    masks[3] = masks[1]  # a repeated mask runs once and is reported twice
    together = importance.masked_accuracy(classifier, EXAMPLES, masks, cache_dir=None, progress=False)
    monkeypatch.setattr(importance, "ROWS", 1)  # one mask per forward pass
    reducer = importance._run(classifier, EXAMPLES, lambda ordered: importance.MaskedLogits(classifier, masks), 4,
                              None, False, "test")
    batch = next(batches(classifier.encoder, [e.item for e in EXAMPLES], attention=False))
    with torch.inference_mode():
        direct = torch.stack([importance._logits(classifier, batch.model_inputs, torch.from_numpy(m))
                              for m in masks], 1)
    np.testing.assert_allclose(reducer.arrays["logits"], direct.numpy(), atol=1e-5)
    np.testing.assert_array_equal(together, direct.numpy().argmax(-1) == np.array([e.label for e in EXAMPLES])[:, None])


def test_normalise_by_layer_divides_each_layer_by_its_l2_norm_and_changes_the_order_across_layers():
    scores = np.array([[3.0, 4.0], [0.0, 0.0], [10.0, 20.0]])
    normalised = importance.normalise_by_layer(scores)
    np.testing.assert_allclose(normalised, [[0.6, 0.8], [0, 0], [1 / np.sqrt(5), 2 / np.sqrt(5)]])
    assert list(np.argsort(scores.ravel(), kind="stable")) == [2, 3, 0, 1, 4, 5]
    assert list(np.argsort(normalised.ravel(), kind="stable")) == [2, 3, 4, 0, 1, 5]  # layer 3 no longer last


def test_head_importance_carries_the_normalised_scores(classifier):
    table = importance.head_importance(classifier, EXAMPLES, cache_dir=None, progress=False)
    scores = table["importance"].to_numpy().reshape(2, 4)
    np.testing.assert_allclose(table["normalised"].to_numpy().reshape(2, 4),
                               scores / np.linalg.norm(scores, axis=1, keepdims=True))


def test_draining_moves_the_cls_column_of_the_flagged_heads_in_proportion():
    probs = torch.tensor([0.5, 0.3, 0.2, 0.0]).expand(1, 2, 4, 4).clone()  # [B, H, T, T], the last token padding
    cls, valid = torch.tensor([[True, False, False, False]]), torch.tensor([[True, True, True, False]])
    edit = importance.mask_edit(torch.tensor([[1.0, 0.5]]), torch.tensor([[1.0, 0.0]]), cls, valid)
    out = edit(0, probs)
    torch.testing.assert_close(out[0, 0, 2], torch.tensor([0.0, 0.6, 0.4, 0.0]))  # drained, renormalised
    torch.testing.assert_close(out[0, 1, 2], 0.5 * probs[0, 1, 2])  # not drained, only masked


def test_masked_accuracy_with_drains_equals_the_drained_forward_pass(classifier):
    masks = np.ones((3, 2, 4), dtype=np.float32)
    drains = np.zeros((3, 2, 4), dtype=np.float32)
    drains[1, 0] = 1
    drains[2] = 1
    masks[2, 1, 0] = 0
    reducer = importance._run(classifier, EXAMPLES, lambda ordered: importance.MaskedLogits(classifier, masks, drains),
                              4, None, False, "test")
    batch = next(batches(classifier.encoder, [e.item for e in EXAMPLES], attention=False))
    with torch.inference_mode():
        direct = torch.stack([importance._logits(classifier, batch.model_inputs, torch.from_numpy(m),
                                                 torch.from_numpy(d), batch.is_cls) for m, d in zip(masks, drains)], 1)
        plain = importance._logits(classifier, batch.model_inputs, torch.ones(2, 4))
    np.testing.assert_allclose(reducer.arrays["logits"], direct.numpy(), atol=1e-5)
    np.testing.assert_allclose(reducer.arrays["logits"][:, 0], plain.numpy(), atol=1e-5)
    assert not np.allclose(reducer.arrays["logits"][:, 2], plain.numpy(), atol=1e-3)  # draining changes the model
    assert importance.MaskedLogits(classifier, masks).key != reducer.key
    assert importance.MaskedLogits(classifier, masks, np.zeros_like(drains)).key == importance.MaskedLogits(
        classifier, masks).key  # no drain: the cache of plain masks
    with pytest.raises(ValueError, match="drains must have"):
        importance.masked_accuracy(classifier, EXAMPLES, masks, drains[:1], cache_dir=None)


def test_curve_areas_pair_each_input_with_the_random_orders_mean():
    correct = np.array([[[1, 1, 0], [1, 0, 0], [1, 1, 0]],  # input 0: importance, random 1, random 2
                        [[1, 0, 0], [1, 0, 0], [1, 0, 0]]], dtype=bool)  # input 1
    curves = importance.PruningCurves(pd.DataFrame(), correct, ("importance", "random 1", "random 2"), (0, 0.5, 1))
    table = importance.curve_areas(curves, n_boot=200)
    row = table.iloc[0]
    assert table["order"].tolist() == ["importance"]
    assert (row["area"], row["random"], row["difference"]) == pytest.approx((0.5, 0.375, 0.125))  # 0.75, 0.25
    assert 0 <= row["low"] <= row["difference"] <= row["high"] <= 0.25  # per input: 0.25 and 0
    with pytest.raises(ValueError, match="random orders"):
        importance.curve_areas(importance.PruningCurves(pd.DataFrame(), correct[:, :1], ("importance",), (0, .5, 1)))
    with pytest.raises(ValueError, match="increasing shares"):
        importance.curve_areas(importance.PruningCurves(pd.DataFrame(), correct, curves.orders, (0, 1, 0.5)))


def test_layer_matched_sets_keep_each_layers_count():
    chosen = np.array([[True, True, False, False], [False, False, False, True], [False] * 4])
    sets = importance.layer_matched_sets(chosen, 30, np.random.default_rng(0))
    assert sets.shape == (30, 3, 4)
    np.testing.assert_array_equal(sets.sum(2), np.tile([2, 1, 0], (30, 1)))
    assert len({s.tobytes() for s in sets}) > 1  # random, not the chosen set every time


def test_a_pattern_filling_whole_layers_is_no_worse_than_its_layer_matched_sets(classifier):
    dominant = np.array([["vertical"] * 4, ["block"] * 4])  # matched sets can only be the pattern itself
    table = importance.pattern_removal(classifier, EXAMPLES, dominant, n_random=4, cache_dir=None, progress=False)
    assert (table["p"] == 1).all()
    assert (table["random low"] == table["accuracy"]).all() and (table["random high"] == table["accuracy"]).all()
