"""importance: the head mask (ones = the model), per-input gradients equal finite differences, pruning orders
chosen on the selection half only, masks and dominant patterns on known answers, bad input."""
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
    reducer = importance.MaskGradients(classifier, [e.label for e in EXAMPLES])
    importance._run(classifier, EXAMPLES, reducer, 4, None, False, "test")
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
    assert set(curves["order"]) == {"importance", "random 1", "random 2"}
    start = curves[curves["heads"] == 0]["accuracy"]
    baseline = importance.masked_accuracy(classifier, evaluation, np.ones((1, 2, 4)), cache_dir=None,
                                          progress=False).mean()
    assert (start == baseline).all()


def test_dominant_kinds_and_pattern_removal(classifier):
    kinds = np.array([[["vertical", "block"], ["diagonal", "block"]],
                      [["vertical", "block"], ["diagonal", "broad"]],
                      [["block", "block"], ["vertical", "broad"]]])  # [3 inputs, 2 layers, 2 heads]
    np.testing.assert_array_equal(importance.dominant_kinds(kinds), [["vertical", "block"], ["diagonal", "broad"]])
    dominant = np.array([["vertical", "vertical", "block", "block"], ["block", "block", "block", "block"]])
    table = importance.pattern_removal(classifier, EXAMPLES, dominant, n_random=3, cache_dir=None, progress=False)
    assert table["kind"].tolist() == ["block", "vertical"] and table["heads"].tolist() == [6, 2]
    assert ((table["random low"] <= table["random"]) & (table["random"] <= table["random high"])).all()
    with pytest.raises(ValueError, match="dominant must be"):
        importance.pattern_removal(classifier, EXAMPLES, dominant[:1], cache_dir=None)
    with pytest.raises(ValueError, match="masks must be"):
        importance.masked_accuracy(classifier, EXAMPLES, np.ones((1, 3, 4)), cache_dir=None)


def test_masks_in_one_pass_equal_one_pass_per_mask(classifier, monkeypatch):
    rng = np.random.default_rng(0)
    masks = (rng.random((5, 2, 4)) > 0.4).astype(np.float32)
    masks[3] = masks[1]  # a repeated mask runs once and is reported twice
    together = importance.masked_accuracy(classifier, EXAMPLES, masks, cache_dir=None, progress=False)
    reducer = importance.MaskedLogits(classifier, masks)
    monkeypatch.setattr(importance, "ROWS", 1)  # one mask per forward pass
    importance._run(classifier, EXAMPLES, reducer, 4, None, False, "test")
    batch = next(batches(classifier.encoder, [e.item for e in EXAMPLES], attention=False))
    with torch.inference_mode():
        direct = torch.stack([importance._logits(classifier, batch.model_inputs, torch.from_numpy(m))
                              for m in masks], 1)
    np.testing.assert_allclose(reducer.arrays["logits"], direct.numpy(), atol=1e-5)
    np.testing.assert_array_equal(together, direct.numpy().argmax(-1) == np.array([e.label for e in EXAMPLES])[:, None])
