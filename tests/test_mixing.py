"""Context-mixing maps on known answers: hand-computed ALTI, Value Zeroing where attention is the identity and on a
one-token input, rollout, and the real model's maps."""
import numpy as np
import pytest
import torch

from bertlook_utils.analyses import mixing
from bertlook_utils.core import intervene


def test_alti_by_hand_on_three_tokens():
    transformed = np.array([[[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]],
                            [[2.0, 0.0], [-1.0, 0.0], [0.0, 0.0]],
                            [[0.0, 0.0], [0.0, 0.0], [1.0, 1.0]]])
    bias = np.zeros((3, 2))
    # row 0: y = (1, 1), |y| = 2; |y - T_0| = 1, |y - T_1| = 1, |y - T_2| = 2 -> (1, 1, 0) / 2
    # row 1: y = (1, 0), |y| = 1; |y - T_0| = 1, |y - T_1| = 2, |y - T_2| = 1 -> (0, 0, 0): stays zeros
    # row 2: y = (1, 1); |y - T_2| = 0 -> all of it to token 2
    expected = np.array([[0.5, 0.5, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    np.testing.assert_allclose(mixing.alti(transformed, bias), expected)
    shifted = mixing.alti(transformed, np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 0.0]]))  # row 1: y = (2, 0)
    np.testing.assert_allclose(shifted[1], [1.0, 0.0, 0.0])  # |y| = 2, |y - T_0| = 0, |y - T_1| = 3, |y - T_2| = 2


def test_alti_and_rows_refuse_what_they_cannot_read():
    with pytest.raises(ValueError, match=r"transformed must be \[n, n, D\]"):
        mixing.alti(np.zeros((2, 3, 4)), np.zeros((2, 4)))
    with pytest.raises(ValueError, match=r"bias must be \[n, D\]"):
        mixing.alti(np.zeros((2, 2, 4)), np.zeros((2, 3)))
    with pytest.raises(ValueError, match="non-negative"):
        mixing.normalise_rows(np.array([[1.0, -0.5]]))
    with pytest.raises(ValueError, match=r"maps must be \[layers, n, n\]"):
        mixing.rollout(np.zeros((2, 3)))


def test_normalise_rows_refuses_nan_rather_than_zeroing_the_row():
    with pytest.raises(ValueError, match="contribution scores hold NaN"):
        mixing.normalise_rows(np.array([[0.5, 0.5], [np.nan, 1.0]]))


def test_rollout_composes_the_layers_and_keeps_the_identity():
    eye = np.broadcast_to(np.eye(3), (4, 3, 3))
    np.testing.assert_array_equal(mixing.rollout(eye), eye)
    first, second = np.array([[1.0, 0.0], [0.5, 0.5]]), np.array([[0.0, 1.0], [1.0, 0.0]])
    np.testing.assert_allclose(mixing.rollout(np.stack([first, second]))[1], second @ first)


def test_value_zeroing_is_diagonal_where_the_layer_attends_only_to_itself(encoder):
    layer = 2

    def identity(current, probs):
        if current != layer:
            return probs
        eye = torch.eye(probs.shape[-1], dtype=probs.dtype, device=probs.device)
        return eye.expand_as(probs) * (probs.sum(-1, keepdim=True) > 0)  # real rows only
    identity.layer = layer
    with intervene.edit_attention(encoder.model, identity):
        (zeroed,) = mixing.value_zeroing(encoder, "The cat sat on the mat.", layers=[layer])
    assert np.abs(zeroed - np.diag(np.diag(zeroed))).max() < 1e-6  # nothing reaches i from j != i
    np.testing.assert_allclose(np.diag(zeroed), 1.0, atol=1e-6)


def test_value_zeroing_of_a_one_word_input_and_a_layer_out_of_range(encoder):
    maps = mixing.value_zeroing(encoder, "cat", layers=[0, 5])
    n = len(encoder.prepare("cat").tokens)
    assert maps.shape == (2, n, n)
    np.testing.assert_allclose(maps.sum(-1), 1.0)
    with pytest.raises(ValueError, match="layers must lie in 0-5"):
        mixing.value_zeroing(encoder, "cat", layers=[6])


@pytest.mark.parametrize("layers, words", [([True], "layers must be integers"), ([1.0], "layers must be integers"),
                                           ([], "layers must name at least one layer")])
def test_value_zeroing_refuses_layers_that_are_not_layer_numbers(encoder, layers, words):
    with pytest.raises(ValueError, match=words):
        mixing.value_zeroing(encoder, "cat", layers=layers)


def test_every_map_of_the_real_model_is_row_stochastic_and_attention_is_the_models(encoder):
    text = ("The committee approved the plan.", "It starts next year.")
    maps = mixing.layer_maps(encoder, text)
    n = len(encoder.prepare(*text).tokens)
    assert set(maps) == set(mixing.METHODS)
    for name, value in maps.items():
        assert value.shape == (encoder.n_layers, n, n), name
        assert (value >= 0).all(), name
        np.testing.assert_allclose(value.sum(-1), 1.0, atol=1e-6, err_msg=name)
    np.testing.assert_allclose(maps["attention"], encoder.encode(*text).attn.mean(1), atol=1e-6)
    assert not np.allclose(maps["alti"], maps["block"])  # two measures, not one
