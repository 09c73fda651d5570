"""Token scores and the deletion test on known answers."""
import numpy as np
import pytest
import torch

from bertlook_utils.analyses import faithfulness


def test_map_scores_of_identity_maps_spread_evenly_and_roll_out_to_themselves():
    eye = np.broadcast_to(np.eye(4), (3, 4, 4)).copy()
    scores = faithfulness.map_scores({"attention": eye, "alti": eye})
    for name in ("attention", "attention rollout", "alti rollout"):
        np.testing.assert_allclose(scores[name], 0.25, err_msg=name)
    assert "alti" not in scores  # the whole-block maps are scored by their rollout only
    one_sink = np.zeros((2, 3, 3))
    one_sink[:, :, 0] = 1.0  # every row on token 0
    np.testing.assert_allclose(faithfulness.map_scores({"attention": one_sink})["attention"], [1.0, 0.0, 0.0])


def test_ranking_orders_the_candidates_by_score_earlier_first_on_ties():
    scores = np.array([9.0, 0.5, 2.0, 2.0, 7.0])
    candidates = np.array([False, True, True, True, False])
    np.testing.assert_array_equal(faithfulness.ranking(scores, candidates), [2, 3, 1])
    with pytest.raises(ValueError, match="one entry per token"):
        faithfulness.ranking(scores, candidates[:3])


def test_a_deletion_curve_is_the_distance_of_each_masked_embedding(encoder):
    text = "The old lighthouse keeper watched the storm."
    inputs = encoder.pad([encoder.prepare(text)])
    with torch.no_grad():
        whole = faithfulness.embedding(encoder, inputs).double()
        masked = dict(inputs, attention_mask=inputs["attention_mask"].clone())
        masked["attention_mask"][0, [3, 1]] = 0
        expected = 1 - torch.nn.functional.cosine_similarity(faithfulness.embedding(encoder, masked).double(),
                                                             whole).item()
    curves = faithfulness.deletion_curve(encoder, text, [[3, 1, 2], [3, 1, 5]], depth=2)
    assert curves.shape == (2, 2)
    np.testing.assert_allclose(curves[:, 1], expected, atol=1e-6)  # both orders mask 3 then 1
    assert (curves > 0).all()
    with pytest.raises(ValueError, match="at least depth=3"):
        faithfulness.deletion_curve(encoder, text, [[3, 1]], depth=3)
    with pytest.raises(ValueError, match="positions must lie in"):
        faithfulness.deletion_curve(encoder, text, [[3, 99]], depth=2)


@pytest.mark.parametrize("orders, depth, words", [
    ([[3, 3, 2]], 2, r"an order repeats position 3 in its first depth=2"),
    ([[3, 1]], 0, "depth must be an integer of 1 or more, got 0"),
    ([[3, 1]], True, "depth must be an integer of 1 or more, got True"),
])
def test_a_deletion_curve_refuses_repeated_positions_and_no_depth(encoder, orders, depth, words):
    with pytest.raises(ValueError, match=words):
        faithfulness.deletion_curve(encoder, "The old lighthouse keeper watched the storm.", orders, depth=depth)


def test_integrated_gradients_give_nothing_to_tokens_at_their_baseline_and_sum_to_the_cosine_change(encoder):
    pytest.importorskip("captum")
    text = "Rivers carry sand to the sea."
    scores = faithfulness.gradient_scores(encoder, text, n_steps=64)
    tokens = encoder.prepare(text).tokens
    special = np.array([t in (encoder.cls_token, encoder.sep_token) for t in tokens])
    for name in faithfulness.GRADIENT_METHODS:
        assert scores[name].shape == (len(tokens),), name
    np.testing.assert_array_equal(scores["integrated gradients"][special], 0.0)  # [CLS], [SEP] are the baseline
    assert (scores["integrated gradients"][~special] != 0).all() and (scores["gradient × input"] > 0).all()
    # completeness: the attributions add up to f(input) - f(baseline) = 1 - cos(e(baseline), e(input)), the
    # quantity deletion measures, here with every ordinary token replaced by [PAD]
    inputs = encoder.pad([encoder.prepare(text)])
    ids = inputs["input_ids"][0]
    pad = encoder.tokenizer.pad_token_id or 0
    blank = {**inputs, "input_ids": torch.where(torch.from_numpy(special), ids, torch.full_like(ids, pad))[None]}
    with torch.inference_mode():
        change = 1 - torch.nn.functional.cosine_similarity(faithfulness.embedding(encoder, blank),
                                                           faithfulness.embedding(encoder, inputs)).item()
    assert change > 0.05  # the baseline is far from the input: the sum has something to match
    assert scores["integrated gradients"].sum() == pytest.approx(change, rel=0.02)
