"""Attention-gradient importance and the sink ablation on tiny random BERTs with the real WordPiece tokenizer."""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertForMaskedLM, BertModel

from bertlook_utils import compare, gradients, intervene
from bertlook_utils.extract import Batch, batches
from bertlook_utils.models import Encoder, default_model_path, load_encoder

PAIRS = [("The cat sat on the mat.", "It was warm, and it slept."),
         ("Paris is large.", "Rome is old, too.")]


@lru_cache(maxsize=1)
def tokenizer():
    return AutoTokenizer.from_pretrained(default_model_path())


def tiny_config(**extra) -> BertConfig:
    return BertConfig(vocab_size=tokenizer().vocab_size, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=32, max_position_embeddings=64, initializer_range=0.3,
                      attn_implementation="eager", **extra)


def tiny_encoder(seed: int = 0) -> Encoder:
    """2 layers x 2 heads, hidden 16, random weights, float64."""
    torch.manual_seed(seed)
    return Encoder("tiny", BertModel(tiny_config()).double().eval(), tokenizer(), None, 64)


def one_batch(encoder: Encoder, items) -> Batch:
    """All the items in one padded batch, as the engine makes them (no forward pass)."""
    return next(batches(encoder, items, len(items), attention=False))


def finite_difference(loss_of, layer, index, eps=1e-6) -> float:
    """Central difference of loss_of(edit) when attention entry `index` of `layer` is moved by ±eps."""
    def shifted(delta):
        def edit(current, probs):
            if current != layer:
                return probs
            out = probs.clone()
            out[index] += delta
            return out
        return loss_of(edit)
    return (shifted(eps) - shifted(-eps)) / (2 * eps)


ENTRIES = [(0, (0, 0, 3, 0)), (0, (1, 1, 2, 5)), (1, (0, 1, 0, 7)), (1, (1, 0, 4, 4)), (1, (0, 0, 6, 12))]


def check_against_finite_differences(module, objective, batch, seeds):
    capture = intervene.Capture()
    with intervene.edit_attention(module, capture):
        grads = capture.gradients(objective.loss(module, batch, seeds).sum())

    def loss_of(edit):
        with torch.no_grad(), intervene.edit_attention(module, edit):
            return float(objective.loss(module, batch, seeds).sum())

    for layer, index in ENTRIES:
        assert batch.valid[index[0], index[2]] and batch.valid[index[0], index[3]]
        expected = finite_difference(loss_of, layer, index)
        assert float(grads[layer][index]) == pytest.approx(expected, rel=1e-5, abs=1e-9)
    assert max(float(g.abs().max()) for g in grads.values()) > 1e-4  # not trivially zero


def test_pair_cosine_gradients_agree_with_finite_differences():
    encoder = tiny_encoder()
    batch = one_batch(encoder, PAIRS)
    check_against_finite_differences(encoder.model, gradients.PairCosine(), batch, [0, 1])


def test_masked_lm_gradients_agree_with_finite_differences():
    torch.manual_seed(1)
    model = BertForMaskedLM(tiny_config()).double().eval()
    objective = gradients.MaskedLM(model, tokenizer().mask_token_id)
    batch = one_batch(tiny_encoder(), PAIRS)
    loss = objective.loss(model, batch, [0, 1])
    assert loss.shape == (2,) and torch.all(loss > 0)
    torch.testing.assert_close(objective.loss(model, batch, [0, 1]), loss)  # seeded masking
    assert not torch.allclose(objective.loss(model, batch, [5, 6]), loss)
    check_against_finite_differences(model, objective, batch, [0, 1])


def test_attention_gradients_aggregates_per_category():
    encoder = tiny_encoder()
    result = gradients.attention_gradients(encoder, PAIRS, gradients.PairCosine(), cache_dir=None, progress=False)
    assert result.gradient.shape == result.attention.shape == (2, 2, 2, len(gradients.CATEGORIES))
    np.testing.assert_allclose(result.attention.sum(-1), 1, atol=1e-12)  # the categories split each row
    # by hand for input 1 ("Rome is old, too."), layer 2, head 1: the mean |grad| on "," and "." columns
    batch = one_batch(encoder, PAIRS)
    capture = intervene.Capture()
    with intervene.edit_attention(encoder.model, capture):
        grads = capture.gradients(gradients.PairCosine().loss(encoder.model, batch, [0, 1]).sum())
    n = int(batch.valid[1].sum())
    g = grads[1][1, 0, :n, :n].abs()
    tokens = encoder.prepare(*PAIRS[1]).tokens
    punct = [j for j, t in enumerate(tokens) if t in (".", ",")]
    sep = [j for j, t in enumerate(tokens) if t == "[SEP]"]
    assert len(punct) == 3 and len(sep) == 2
    assert result.gradient[1, 1, 0, gradients.CATEGORIES.index("punct")] == pytest.approx(float(g[:, punct].mean()))
    assert result.gradient[1, 1, 0, gradients.CATEGORIES.index("sep")] == pytest.approx(float(g[:, sep].mean()))
    assert result.gradient[1, 1, 0, gradients.CATEGORIES.index("cls")] == pytest.approx(float(g[:, 0].mean()))
    by_layer = result.by_layer()
    assert len(by_layer) == 8 and np.all(by_layer["gradient_low"] <= by_layer["gradient"])
    np.testing.assert_allclose(by_layer["attention"], result.attention.mean(axis=(0, 2)).ravel())
    assert result.relative()["category"].tolist() == ["sep", "cls", "punct"] * 2


def test_missing_category_is_nan_not_zero():
    encoder = tiny_encoder()
    result = gradients.attention_gradients(encoder, [("cats sleep", "dogs bark")], gradients.PairCosine(),
                                           cache_dir=None, progress=False)
    assert np.all(np.isnan(result.gradient[..., gradients.CATEGORIES.index("punct")]))
    assert np.all(result.attention[..., gradients.CATEGORIES.index("punct")] == 0)


def test_pair_cosine_needs_pairs():
    encoder = tiny_encoder()
    with pytest.raises(ValueError, match="pairs"):
        gradients.attention_gradients(encoder, ["a single text."], gradients.PairCosine(), cache_dir=None,
                                      progress=False)


def test_objective_for_uses_the_mlm_head_when_the_checkpoint_has_one(tmp_path):
    torch.manual_seed(0)
    BertForMaskedLM(tiny_config()).save_pretrained(tmp_path)
    tokenizer().save_pretrained(tmp_path)
    encoder = load_encoder(tmp_path)
    assert gradients.has_mlm_head(encoder)
    objective = gradients.objective_for(encoder)
    assert isinstance(objective, gradients.MaskedLM) and objective.mask_token_id == tokenizer().mask_token_id
    result = gradients.attention_gradients(encoder, PAIRS, objective, cache_dir=tmp_path / "cache", progress=False)
    again = gradients.attention_gradients(encoder, PAIRS, objective, cache_dir=tmp_path / "cache", progress=False)
    np.testing.assert_array_equal(again.gradient, result.gradient)
    assert not gradients.has_mlm_head(tiny_encoder())
    assert isinstance(gradients.objective_for(tiny_encoder()), gradients.PairCosine)


def test_sink_ablation_is_zero_where_attention_cannot_matter(tmp_path):
    encoder = tiny_encoder()
    with torch.no_grad():  # layer 1's values are all zero: whatever it attends to, its output is the same
        encoder.model.encoder.layer[0].attention.self.value.weight.zero_()
        encoder.model.encoder.layer[0].attention.self.value.bias.zero_()
    result = gradients.sink_ablation(encoder, PAIRS, heads=[(1, 0)], batch_size=2, cache_dir=tmp_path,
                                     progress=False)
    frame = result.frame
    assert len(frame) == 2 * 3 * len(gradients.CONDITIONS)
    first, second = frame[frame["layer"] == 1], frame[(frame["layer"] == 2) & (frame["scope"] == "layer")]
    assert np.all(np.abs(first[list(gradients.DISTANCES)].to_numpy()) < 1e-12)
    assert np.all(second[list(gradients.DISTANCES)].to_numpy() > 1e-6)
    assert np.all((frame["moved"] > 0) & (frame["moved"] < 1))
    assert set(frame[frame["scope"] == "head"][["layer", "head"]].itertuples(index=False)) == {(2, 1)}
    moved = frame.pivot_table(index=["scope", "layer", "head", "input"], columns="amount", values="moved")
    assert np.all(moved["matched"] <= moved["all"] + 1e-12) and np.any(moved["matched"] < moved["all"] - 1e-3)
    cached = gradients.sink_ablation(encoder, PAIRS, heads=[(1, 0)], batch_size=2, cache_dir=tmp_path,
                                     progress=False)
    assert cached.frame.equals(result.frame) and cached.reference == result.reference > 0
    summary, contrast = result.summary(), result.contrast()
    assert len(summary) == 3 * len(gradients.CONDITIONS) and len(contrast) == 3
    ratios = contrast.set_index(["scope", "layer"])["ratio"]
    assert np.isnan(ratios["layer", 1]) and ratios["layer", 2] > 0  # layer 1's edits change nothing: no ratio
    grad = gradients.attention_gradients(tiny_encoder(), PAIRS, gradients.PairCosine(), cache_dir=None,
                                         progress=False)
    table = compare.sep_noop(grad, result)
    assert list(table.columns) == ["quantity", "paper", "this run", "what differs"]
    assert len(table) == 4 + 2 * 2  # gradients and shares; per mode, the layers and the one head
    assert table["this run"].str.len().min() > 0
    per_layer = table[table["quantity"].str.endswith("(renormalise), per layer")]
    assert len(per_layer) == 1 and "largest in layer 2" in per_layer["what differs"].iloc[0]
    assert table["quantity"].str.contains(r"\(uniform\), head 2-1 alone").sum() == 1
    with pytest.raises(ValueError, match="at least two"):
        gradients.sink_ablation(encoder, PAIRS, batch_size=1, cache_dir=None, progress=False)
    with pytest.raises(ValueError, match="0-based"):
        gradients.sink_ablation(encoder, PAIRS, heads=[(2, 0)], cache_dir=None, progress=False)


def test_contrast_ratio_needs_a_measurable_random_change():
    """Layer 1: sink edits move the output 3x as far as random ones. Layer 2: the random edits move it by
    rounding noise (one of them negative), so a ratio would be noise too: NaN, and the comparison uses layer 1."""
    distances = {1: ([2e-3, 4e-3], [1e-3, 1e-3]), 2: ([1e-3, 1e-3], [2e-7, -1e-7])}
    rows = [("layer", layer, 0, source, "matched", "renormalise", i, d, d, 0.1)
            for layer, pair in distances.items() for source, values in zip(("sink", "random"), pair)
            for i, d in enumerate(values)]
    frame = pd.DataFrame(rows, columns=["scope", "layer", "head", *gradients.CONDITION_COLUMNS, "input",
                                        *gradients.DISTANCES, "moved"])
    contrast = gradients.AblationResult(frame, reference=0.5).contrast()
    assert contrast["ratio"].iloc[0] == pytest.approx(3.0) and np.isnan(contrast["ratio"].iloc[1])
    grad = gradients.attention_gradients(tiny_encoder(), PAIRS, gradients.PairCosine(), cache_dir=None,
                                         progress=False)
    table = compare.sep_noop(grad, gradients.AblationResult(frame, 0.5))
    assert len(table) == 5  # only the renormalise mode was run: no uniform row
    row = table.iloc[-1]
    assert row["this run"] == "3.0x to 3.0x; includes 1 in layer 1"  # two inputs: a wide interval
    assert "largest in layer 1" in row["what differs"]
    quiet = frame.assign(pooled_distance=frame["pooled_distance"] * 1e-4)
    row = compare.sep_noop(grad, gradients.AblationResult(quiet, 0.5)).iloc[-1]
    assert row["this run"] == "no measurable change"


def test_sep_noop_shows_both_modes_with_where_their_intervals_lie():
    """Per mode, three layers whose paired differences are clearly positive, around zero and clearly negative,
    and one head: the table says so for each mode, with the ratio range and the head's interval."""
    rng = np.random.default_rng(0)
    rows = []
    for mode, shift in (("renormalise", 1.0), ("uniform", -1.0)):
        for scope, layer, head, sink_over_random in (("layer", 1, 0, 3.0), ("layer", 2, 0, 1.0),
                                                     ("layer", 3, 0, 0.5), ("head", 2, 12, 0.3)):
            ratio = sink_over_random if shift > 0 else 1 / sink_over_random
            for i in range(20):
                random = 1e-3 * (1 + 0.01 * rng.normal())
                sink = ratio * 1e-3 * (1 + 0.01 * rng.normal()) if ratio != 1 else 1e-3 * (1 + 0.01 * rng.normal())
                for source, value in (("sink", sink), ("random", random)):
                    rows.append((scope, layer, head, source, "matched", mode, i, value, value, 0.1))
    frame = pd.DataFrame(rows, columns=["scope", "layer", "head", *gradients.CONDITION_COLUMNS, "input",
                                        *gradients.DISTANCES, "moved"])
    grad = gradients.attention_gradients(tiny_encoder(), PAIRS, gradients.PairCosine(), cache_dir=None,
                                         progress=False)
    table = compare.sep_noop(grad, gradients.AblationResult(frame, 0.5)).set_index("quantity")["this run"]
    name = "moving the sink mass ÷ moving the same mass between ordinary tokens ({}), {}"
    assert table[name.format("renormalise", "per layer")] == (
        "0.5x to 3.0x; above 1 in layer 1; includes 1 in layer 2; below 1 in layer 3")
    assert table[name.format("uniform", "per layer")] == (
        "0.3x to 2.0x; above 1 in layer 3; includes 1 in layer 2; below 1 in layer 1")
    assert table[name.format("renormalise", "head 2-12 alone")].startswith("0.3x; difference -0.70 [")
    assert table[name.format("uniform", "head 2-12 alone")].startswith("3.3x; difference +2.33 [")


def test_value_norms_of_constant_values_are_the_bias_and_attention_is_the_models():
    """With the value weights zeroed every token's value vector is the value bias: per head |v| is the length
    of the bias's slice for [CLS], [SEP] and other tokens alike (ratio 1), and through the output projection
    |b_h W_O,h|. The attention columns are the model's own maps, averaged by hand."""
    encoder = tiny_encoder(3)
    layer0 = encoder.model.encoder.layer[0]
    with torch.no_grad():
        layer0.attention.self.value.weight.zero_()
        layer0.attention.self.value.bias.copy_(torch.linspace(-1, 2, 16, dtype=torch.float64))
    norms = gradients.value_norms(encoder, PAIRS, batch_size=1)
    assert list(norms.columns) == ["layer", "head", "cls", "sep", "sink", "value_cls", "value_sep", "value_other",
                                   "value_ratio", "output_cls", "output_sep", "output_other", "output_ratio"]
    bias = layer0.attention.self.value.bias.detach().view(2, 8)
    w_out = layer0.attention.output.dense.weight.detach()  # [hidden out, hidden in]
    first = norms[norms["layer"] == 1]
    for h in range(2):
        row = first.iloc[h]
        assert row[["value_cls", "value_sep", "value_other"]].tolist() == pytest.approx([float(bias[h].norm())] * 3)
        assert row["value_ratio"] == pytest.approx(1.0)
        written = float((w_out[:, 8 * h:8 * (h + 1)] @ bias[h]).norm())
        assert row[["output_cls", "output_other"]].tolist() == pytest.approx([written] * 2)
    second = norms[norms["layer"] == 2]
    assert not np.allclose(second["value_ratio"], 1.0)  # real value weights there
    expected = []
    for pair in PAIRS:
        batch = one_batch(encoder, [pair])
        with torch.no_grad():
            attn = encoder.model(**batch.model_inputs, output_attentions=True).attentions[1][0]  # [H, T, T]
        expected.append(attn[:, :, batch.is_cls[0]].sum(-1).mean(-1).numpy())
    np.testing.assert_allclose(second["cls"], np.mean(expected, axis=0), atol=1e-9)
    np.testing.assert_allclose(norms["sink"], norms["cls"] + norms["sep"], atol=1e-12)


def test_value_norm_summary_counts_sink_heads_per_layer():
    norms = pd.DataFrame({"layer": [1, 1, 2, 2], "head": [1, 2, 1, 2], "sink": [0.1, 0.2, 0.6, 0.4],
                          "value_ratio": [0.5, 0.7, 0.1, 0.2], "output_ratio": [0.4, 0.8, 0.05, np.nan]})
    summary = gradients.value_norm_summary(norms, threshold=0.3).set_index("layer")
    assert summary.loc[1, "sink_heads"] == 0 and np.isnan(summary.loc[1, "sink_max"])
    assert summary.loc[1, "all_median"] == pytest.approx(0.6)
    assert summary.loc[2, "sink_heads"] == 2
    assert summary.loc[2, "sink_max"] == pytest.approx(0.2)  # head 2-2 has no output ratio: its value ratio
