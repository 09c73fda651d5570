"""identifiability: the projector, effective attention and the null-space twin on values whose null space is
known; the effective-attention model keeps the outputs and changes only the maps."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from builders import random_row_stochastic

from bertlook_utils import identifiability, intervene


def test_projector_onto_a_known_column_space():
    values = torch.zeros(5, 3, dtype=torch.float64)
    values[0, 0], values[1, 1] = 2.0, 3.0  # spans positions 0 and 1; the third column is zero
    p = identifiability.column_space_projector(values)
    np.testing.assert_allclose(p.numpy(), np.diag([1, 1, 0, 0, 0]), atol=1e-12)
    assert identifiability.null_dimension(values).item() == 0  # 2 non-zero rows, rank 2
    values[2:, 2] = 1.0
    assert identifiability.null_dimension(values).item() == 5 - 3


def test_effective_attention_keeps_the_output_and_drops_the_null_part():
    rng = np.random.default_rng(0)
    attn = torch.from_numpy(random_row_stochastic(rng, (2, 9, 9)))
    values = torch.from_numpy(rng.standard_normal((2, 9, 4)))
    effective = identifiability.effective_attention(attn, values)
    torch.testing.assert_close(effective @ values, attn.double() @ values)
    torch.testing.assert_close(effective @ identifiability.column_space_projector(values), effective)
    with pytest.raises(ValueError, match="agree on n"):
        identifiability.effective_attention(attn, values[:, :5])


def test_null_space_twin_is_a_different_valid_map_with_the_same_output():
    rng = np.random.default_rng(1)
    attn = random_row_stochastic(rng, (10, 10)).astype(np.float64)
    attn[:, 0] += 2.0  # a sink on column 0
    attn /= attn.sum(-1, keepdims=True)
    values = rng.standard_normal((10, 3))
    twin = identifiability.null_space_twin(attn, values, column=0)
    np.testing.assert_allclose(twin @ values, attn @ values, atol=1e-8)
    np.testing.assert_allclose(twin.sum(-1), 1, atol=1e-8)
    assert twin.min() >= -1e-9 and (twin[:, 0] <= attn[:, 0] + 1e-9).all()
    assert twin[:, 0].mean() < attn[:, 0].mean() - 0.1  # 6 free directions per row: the sink can shrink
    square = random_row_stochastic(rng, (3, 3)).astype(np.float64)
    np.testing.assert_allclose(identifiability.null_space_twin(square, rng.standard_normal((3, 3)), 0), square,
                               atol=1e-8)  # n <= d: pinned down
    with pytest.raises(ValueError, match="column 10"):
        identifiability.null_space_twin(attn, values, column=10)


def test_effective_encoder_keeps_outputs_and_changes_maps(tiny):
    effective = identifiability.effective_encoder(tiny)
    assert effective.fingerprint != tiny.fingerprint and effective.n_heads == tiny.n_heads
    assert intervene.unnamed_state(effective.model) is None  # in eval mode, as the model it wraps: cached
    text = "the old cat sat on the warm mat near the door while the dog slept by the fire"
    inputs = tiny.pad([tiny.prepare(text), tiny.prepare("a short one")])
    with torch.inference_mode():
        raw = tiny.model(**inputs, output_attentions=True)
        eff = effective.model(**inputs, output_attentions=True)
    torch.testing.assert_close(eff.last_hidden_state, raw.last_hidden_state, atol=1e-4, rtol=1e-4)
    values = {}
    hooks = [intervene.value_projection(tiny.model, layer).register_forward_hook(
        lambda m, a, out, layer=layer: values.__setitem__(layer, out)) for layer in range(tiny.n_layers)]
    with torch.inference_mode():
        tiny.model(**inputs)
    for hook in hooks:
        hook.remove()
    n = int(inputs["attention_mask"][0].sum())  # the long input: n > head dimension 8
    for layer in range(tiny.n_layers):
        v = values[layer][0, :n].unflatten(-1, (tiny.n_heads, -1)).transpose(0, 1)  # [H, n, d]
        a_raw, a_eff = raw.attentions[layer][0, :, :n, :n], eff.attentions[layer][0, :, :n, :n]
        torch.testing.assert_close(a_eff @ v, a_raw @ v, atol=1e-4, rtol=1e-4)
        assert (a_eff - a_raw).abs().max() > 1e-3


def test_signed_maps_go_to_word_level_only_when_declared(tiny):
    from bertlook_utils.extract import batches
    from bertlook_utils.wordlevel import to_word_level

    effective = identifiability.effective_encoder(tiny)
    batch = next(batches(effective, [["the", "unbelievable", "cat"]]))
    assert batch.signed and not next(batches(tiny, [["a", "cat"]])).signed
    signed = np.array([[0.5, 0.7, -0.2], [0.2, 0.2, 0.2], [1.0, 0.0, 0.0]])
    np.testing.assert_allclose(to_word_level(signed, [0, 1, 1], signed=True), [[0.5, 0.5], [0.6, 0.2]], atol=1e-6)
    with pytest.raises(ValueError, match="negative"):
        to_word_level(signed, [0, 1, 1])
    with pytest.raises(ValueError, match="renormalises"):
        to_word_level(signed, [0, 1, 1], "max", signed=True)


def test_leverage_is_small_for_a_short_value_vector_and_sums_to_the_rank():
    values = torch.zeros(4, 2, dtype=torch.float64)
    values[0, 0], values[1, 0], values[2, 1] = 0.1, 1.0, 1.0  # token 0's value is a tenth of token 1's, same line
    lev = identifiability.leverage(values).numpy()
    np.testing.assert_allclose(lev, [0.01 / 1.01, 1 / 1.01, 1, 0], atol=1e-12)
    assert lev.sum() == pytest.approx(2)
    np.testing.assert_array_equal(identifiability.null_dimension_bound(np.array([10, 32, 40, 100]), 32), [0, 0, 8, 68])


def head_scores(correct_by_head: np.ndarray, sentence: np.ndarray):
    """HeadScores of words all of relation det, whose dep->head outcome per head is `correct_by_head` [N, H]
    (one layer)."""
    from bertlook_utils.analyses.syntax import HeadScores

    n, heads = correct_by_head.shape
    own = np.zeros((n, 2, 1, heads), dtype=bool)
    own[:, 0, 0] = correct_by_head
    return HeadScores(own, np.zeros_like(own), np.zeros((n, 1), bool), np.zeros((n, 1), bool), np.zeros(n, bool),
                      np.zeros(n, bool), np.array(["det"] * n), sentence, offsets=(-1,))


def test_syntax_change_scores_the_chosen_head_on_both_maps_with_a_paired_interval():
    sentence = np.array([0, 0, 1, 1, 2, 2])
    raw = head_scores(np.array([[True, False]] * 6), sentence)  # head 1 right everywhere
    after = np.array([[True, True]] * 6)
    after[:2, 0] = False  # effective: head 1 wrong on sentence 0, head 2 now right everywhere
    effective = head_scores(after, sentence)
    table = identifiability.syntax_change(raw, effective, raw, ["det"], n_boot=200).iloc[0]
    assert (table["layer"], table["head"], table["direction"]) == (1, 1, "dep->head")
    assert (table["raw"], table["effective"], table["n"]) == (1.0, pytest.approx(4 / 6), 6)
    assert table["change"] == pytest.approx(-1 / 3)
    assert -1 <= table["low"] <= -1 / 3 <= table["high"] <= 0
    assert not table["kept"]  # the best effective head is head 2
    same = identifiability.syntax_change(raw, raw, effective, ["det"], n_boot=50).iloc[0]
    assert (same["head"], same["change"], same["low"], same["high"], same["kept"]) == (2, 0, 0, 0, True)
    with pytest.raises(ValueError, match="same words"):
        identifiability.syntax_change(raw, raw.take([0, 1]), raw, ["det"])
