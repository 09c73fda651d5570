"""sinks.massive: massive activations (Sun et al. 2024) and outlier LayerNorm dimensions (Kovaleva et al. 2021) on
tiny random BERTs with planted answers: a huge value in [CLS]'s embedding state, an outlier LayerNorm weight and
bias; the hook and the disabling context leave the model as it was; random controls repeat with their seed."""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertModel, DistilBertConfig, DistilBertModel

from bertlook_utils.analyses.sinks import massive
from bertlook_utils.models import Encoder, default_model_path

TEXTS = ["The cat sat on the mat.", "Paris is large, and old.", "A dog ran home.", "Rome is old, too."]
PAIRS = [("The cat sat on the mat.", "It was warm, and it slept."), ("Paris is large.", "Rome is old, too."),
         ("A dog ran.", "It was fast.")]
HIDDEN, SPIKE_DIM, SPIKE, GAIN = 16, 5, 1e4, 50.0


@lru_cache(maxsize=1)
def tokenizer():
    return AutoTokenizer.from_pretrained(default_model_path())


def tiny_bert(seed: int = 0, layers: int = 2) -> Encoder:
    """2 layers x 2 heads, hidden 16, random weights, float64, eager attention."""
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=tokenizer().vocab_size, hidden_size=HIDDEN, num_hidden_layers=layers,
                        num_attention_heads=2, intermediate_size=32, max_position_embeddings=64,
                        initializer_range=0.3, attn_implementation="eager")
    return Encoder("tiny", BertModel(config).double().eval(), tokenizer(), None, 64)


def planted_spike(seed: int = 0) -> Encoder:
    """A tiny BERT whose embedding state has one huge value: [CLS] in dimension SPIKE_DIM. Every embedding row is
    made zero-mean over the other dimensions with 0 in SPIKE_DIM, so every other token's normalised SPIKE_DIM is
    exactly 0 (and its state there the LayerNorm bias, set to 0); [CLS]'s word embedding holds SPIKE there, and
    the LayerNorm weight GAIN scales it to about GAIN * sqrt(HIDDEN - 1) ~ 194."""
    encoder = tiny_bert(seed)
    emb = encoder.model.embeddings
    others = [d for d in range(HIDDEN) if d != SPIKE_DIM]
    with torch.no_grad():
        for table in (emb.word_embeddings, emb.position_embeddings, emb.token_type_embeddings):
            table.weight[:, others] -= table.weight[:, others].mean(1, keepdim=True)
            table.weight[:, SPIKE_DIM] = 0
        emb.word_embeddings.weight[tokenizer().cls_token_id, SPIKE_DIM] = SPIKE
        emb.LayerNorm.weight[SPIKE_DIM] = GAIN
        emb.LayerNorm.bias[SPIKE_DIM] = 0
    return encoder


def hidden_states(encoder: Encoder, text) -> tuple[torch.Tensor, ...]:
    inputs = encoder.pad([encoder.prepare(*(text if isinstance(text, tuple) else (text,)))])
    with torch.inference_mode():
        return encoder.model(**inputs, output_hidden_states=True).hidden_states


# -- section 3 --------------------------------------------------------------------------------------
def test_a_planted_huge_value_is_found_with_its_token_dimension_and_ratio():
    encoder = planted_spike()
    found = massive.massive_activations(encoder, TEXTS + PAIRS[:1], top_k=3, batch_size=2, site="output")
    n, layers = len(TEXTS) + 1, encoder.n_layers + 1
    assert found.maximum.shape == found.median.shape == found.above_absolute.shape == (n, layers)
    first = found.top[(found.top["layer"] == 0) & (found.top["rank"] == 1)]
    assert len(first) == n
    assert (first["position"] == 0).all() and (first["kind"] == "cls").all() and (first["token"] == "[CLS]").all()
    assert (first["dimension"] == SPIKE_DIM).all()
    for i, text in enumerate(TEXTS + PAIRS[:1]):
        h = hidden_states(encoder, text)[0][0].numpy()
        magnitude = np.abs(h)
        assert float(first["value"].iloc[i]) == pytest.approx(h[0, SPIKE_DIM], rel=1e-12)
        assert h[0, SPIKE_DIM] > 150  # the plant: about GAIN * sqrt(15)
        assert found.maximum[i, 0] == pytest.approx(magnitude.max(), rel=1e-12)
        assert found.median[i, 0] == pytest.approx(np.median(magnitude), rel=1e-12)
        assert found.ratio[i, 0] == pytest.approx(magnitude.max() / np.median(magnitude), rel=1e-12)
        assert found.above_absolute[i, 0] == (magnitude > 100).sum() == 1  # Sun et al.'s absolute threshold
        assert found.massive[i, 0] == int(magnitude.max() > 1000 * np.median(magnitude))
        assert (np.abs(h[1:, SPIKE_DIM]) < 1e-9).all()  # every other token: exactly 0 there
    table = found.by_layer()
    assert list(table["layer"]) == list(range(layers))
    row = table.iloc[0]
    assert (row["top_kind"], row["top_dimension"], row["top_share"]) == ("cls", SPIKE_DIM, 1.0)
    assert row["ratio_low"] <= row["ratio"] <= row["ratio_high"]
    assert found.appearance_layer() == 0
    carriers = found.carriers()
    top = carriers[carriers["layer"] == 0].iloc[0]
    assert (top["kind"], top["dimension"], top["share"]) == ("cls", SPIKE_DIM, 1.0)


def test_before_the_layernorm_the_planted_value_is_found_whole_and_after_it_the_cap_holds_it():
    encoder = planted_spike()
    before = massive.massive_activations(encoder, TEXTS, top_k=2, batch_size=2)  # site "pre_norm"
    after = massive.massive_activations(encoder, TEXTS, top_k=2, batch_size=2, site="output")
    assert before.site == "pre_norm" and before.states == after.states == (0, 1, 2)
    assert before.largest_state() == 0
    first = before.top[(before.top["layer"] == 0) & (before.top["rank"] == 1)]
    assert (first["dimension"] == SPIKE_DIM).all() and (first["position"] == 0).all()
    np.testing.assert_allclose(first["value"], SPIKE)  # word + position + type: the other two are 0 there
    assert (before.above_absolute[:, 0] == 1).all() and (before.massive[:, 0] == 1).all()  # both of Sun's criteria
    norm = encoder.model.embeddings.LayerNorm
    cap = massive.layernorm_cap(encoder)
    weight, bias = norm.weight.detach().abs(), norm.bias.detach().abs()
    assert cap[0] == pytest.approx(float(((HIDDEN - 1) ** 0.5 * weight + bias).max()))
    assert cap[0] == pytest.approx(GAIN * (HIDDEN - 1) ** 0.5)  # the planted gain dominates; its bias is 0
    assert (after.maximum <= cap[None, :] + 1e-9).all()  # no LayerNorm output above its cap, in any state
    assert (after.maximum[:, 0] > 0.99 * cap[0]).all()  # one huge input value: the output nearly reaches it
    table = massive.by_site({"pre_norm": before, "output": after}, cap)
    assert list(table.columns) == ["state", "pre_norm max", "pre_norm ratio", "output max", "output ratio", "carrier",
                                   "cap"]
    assert table.loc[0, "pre_norm max"] == pytest.approx(SPIKE) and table.loc[0, "carrier"] == f"cls {SPIKE_DIM}"


def test_the_feed_forward_output_is_read_where_it_is_written_and_the_residual_is_the_rest():
    encoder = tiny_bert()
    layer = encoder.model.encoder.layer[0]
    with torch.no_grad():
        layer.output.dense.bias[3] = 500.0
    seen = {}
    handle = layer.attention.register_forward_hook(lambda m, args, out: seen.update(residual=out[0].clone()))
    try:
        ffn = massive.massive_activations(encoder, TEXTS[:2], top_k=1, site="ffn")
        before = massive.massive_activations(encoder, TEXTS[:2], top_k=1)
    finally:
        handle.remove()
    assert ffn.states == (1, 2) and ffn.first_state == 1 and ffn.maximum.shape == (2, 2)
    top = ffn.top[ffn.top["layer"] == 1].set_index("input")
    assert (top["dimension"] == 3).all() and (top["value"] > 400).all()
    assert (before.top[before.top["layer"] == 1]["dimension"] == 3).all()
    inputs = encoder.pad([encoder.prepare(t) for t in TEXTS[:2]])
    with torch.inference_mode(), massive._reading(encoder.model, "pre_norm", [1]) as summed, \
            massive._reading(encoder.model, "ffn", [1]) as written:
        encoder.model(**inputs)
    # the LayerNorm's input = the feed-forward output + the attention block's output, at every token
    torch.testing.assert_close(summed[1], written[1] + seen["residual"], rtol=1e-12, atol=1e-12)
    assert float(written[1][..., 3].min()) > 400
    table = massive.by_site({"pre_norm": before, "ffn": ffn})
    assert np.isnan(table.loc[0, "ffn max"]) and not np.isnan(table.loc[1, "ffn max"])
    with pytest.raises(ValueError, match="feed-forward"):
        with massive.set_hidden(encoder.model, 0, [0], [0], [0], [0.0], site="ffn"):
            pass
    with pytest.raises(ValueError, match="site must be one of"):
        massive.massive_activations(encoder, TEXTS[:2], site="residual")


def test_set_hidden_before_the_layernorm_edits_what_the_layernorm_reads():
    encoder = tiny_bert()
    model = encoder.model
    inputs = encoder.pad([encoder.prepare(t) for t in TEXTS[:2]])
    norm = model.encoder.layer[0].output.LayerNorm
    with torch.inference_mode():
        with massive._reading(model, "pre_norm", [1]) as seen:
            base = model(**inputs, output_hidden_states=True).hidden_states[1]
        entering = seen[1].clone()
        with massive.set_hidden(model, 1, [1], [2], [4], [7.5], site="pre_norm"):
            edited = model(**inputs, output_hidden_states=True).hidden_states[1]
    expected = entering.clone()
    expected[1, 2, 4] = 7.5
    torch.testing.assert_close(edited, torch.nn.functional.layer_norm(expected, (HIDDEN,), norm.weight, norm.bias,
                                                                      norm.eps))
    torch.testing.assert_close(edited[0], base[0])  # the other input untouched
    assert not (edited[1, 2] - base[1, 2]).abs().max() < 1e-6  # the edited token's whole vector moves
    assert not norm._forward_pre_hooks


def test_batching_changes_nothing():
    encoder = planted_spike()
    one = massive.massive_activations(encoder, TEXTS, batch_size=1)
    four = massive.massive_activations(encoder, TEXTS, batch_size=4)
    np.testing.assert_allclose(one.ratio, four.ratio, rtol=1e-10)
    assert one.top[["layer", "input", "rank", "position", "dimension"]].equals(
        four.top[["layer", "input", "rank", "position", "dimension"]])


def test_set_hidden_edits_exactly_the_given_values_and_nothing_else():
    encoder = tiny_bert()
    model = encoder.model
    inputs = encoder.pad([encoder.prepare(t) for t in TEXTS[:2]])
    seen = {}
    handle = model.encoder.layer[1].register_forward_pre_hook(lambda m, args: seen.update(h=args[0].clone()))
    try:
        with torch.inference_mode():
            base = model(**inputs).last_hidden_state
            entering = seen["h"]
            with massive.set_hidden(model, 1, [0, 1], [0, 3], [2, 7], [0.0, 5.5]):
                edited = model(**inputs).last_hidden_state
            changed = seen["h"]
            with massive.set_hidden(model, 1, [], [], [], []):  # no edit: nothing changes
                same = model(**inputs).last_hidden_state
            after = model(**inputs).last_hidden_state
    finally:
        handle.remove()
    expected = entering.clone()
    expected[0, 0, 2], expected[1, 3, 7] = 0.0, 5.5
    assert torch.equal(changed, expected)
    assert not torch.equal(edited, base)
    assert torch.equal(same, base) and torch.equal(after, base)
    assert not any(len(layer._forward_hooks) for layer in model.encoder.layer) and not model.embeddings._forward_hooks


def test_set_hidden_removes_its_hook_after_an_error_and_refuses_bad_edits():
    encoder = tiny_bert()
    model = encoder.model
    with pytest.raises(RuntimeError, match="boom"):
        with massive.set_hidden(model, 0, [0], [0], [1], [2.0]):
            raise RuntimeError("boom")
    assert not model.embeddings._forward_hooks
    with pytest.raises(ValueError, match="layer"):
        with massive.set_hidden(model, 3, [0], [0], [0], [0.0]):
            pass
    with pytest.raises(ValueError, match="one entry per edit"):
        with massive.set_hidden(model, 1, [0, 1], [0], [0], [0.0]):
            pass
    inputs = encoder.pad([encoder.prepare(TEXTS[0])])
    with pytest.raises(ValueError, match="dimension"):
        with massive.set_hidden(model, 1, [0], [0], [HIDDEN], [0.0]), torch.inference_mode():
            model(**inputs)


def test_the_intervention_edits_the_massive_value_and_its_mean_is_a_no_op_at_the_embeddings():
    encoder = planted_spike()
    result = massive.massive_intervention(encoder, TEXTS, layer=0, n_values=1, draws=3, seed=0, batch_size=2)
    details = result.details
    found = details[details["targets"] == "massive"]
    assert list(found["input"]) == [0, 1, 2, 3]
    assert (found["position"] == 0).all() and (found["dimension"] == SPIKE_DIM).all() and (found["kind"] == "cls").all()
    # [CLS]'s embedding state is the same in every input, so the mean over the other inputs is the value itself:
    np.testing.assert_allclose(found["mean"], found["value"], rtol=1e-12)
    random = details[details["targets"] == "random"]
    assert len(random) == 3 * 4 and (random["position"] == 0).all() and (random["dimension"] != SPIKE_DIM).all()
    frame = result.frame
    assert len(frame) == 4 * (1 + 2 * (1 + 3))
    mean_edit = frame[(frame["targets"] == "massive") & (frame["edit"] == "mean")]
    zero_edit = frame[(frame["targets"] == "massive") & (frame["edit"] == "zero")]
    assert (mean_edit["pooled_distance"].abs() < 1e-12).all()
    assert (zero_edit["pooled_distance"] > 1e-6).all()
    assert result.sink_layers == (1, 2)
    summary = result.summary()
    assert list(zip(summary["targets"], summary["edit"])) == [("none", "none"), ("massive", "zero"),
                                                              ("massive", "mean"), ("random", "zero"),
                                                              ("random", "mean")]
    assert summary.set_index(["targets", "edit"]).loc[("random", "zero"), "draws"] == 3
    assert np.isfinite(summary.set_index(["targets", "edit"]).loc[("random", "zero"), "sink_mass_spread"])


def test_sink_mass_and_the_yardstick_are_computed_as_defined():
    encoder = tiny_bert()
    result = massive.massive_intervention(encoder, TEXTS[:3], layer=1, draws=1, batch_size=3)
    base = result.frame[result.frame["targets"] == "none"].set_index("input")
    pooled = []
    for i, text in enumerate(TEXTS[:3]):
        enc = encoder.encode(text)
        assert base.loc[i, "sink_mass"] == pytest.approx(enc.attn[1:, :, :, 0].mean(), rel=1e-5)  # layers after 1
        pooled.append(hidden_states(encoder, text)[-1][0].mean(0))
    distances = [1 - torch.nn.functional.cosine_similarity(pooled[a], pooled[b], dim=0) for a, b in
                 ((0, 1), (0, 2), (1, 2))]
    assert result.reference == pytest.approx(float(torch.stack(distances).mean()), rel=1e-9)
    assert (base["pooled_distance"] == 0).all()


def test_random_controls_repeat_with_their_seed():
    encoder = tiny_bert()
    runs = [massive.massive_intervention(encoder, TEXTS, layer=1, n_values=2, draws=2, seed=s, batch_size=2)
            for s in (7, 7, 8)]
    assert runs[0].details.equals(runs[1].details) and runs[0].frame.equals(runs[1].frame)
    random = [r.details[r.details["targets"] == "random"]["dimension"].to_numpy() for r in runs]
    assert not np.array_equal(random[0], random[2])
    batched = massive.massive_intervention(encoder, TEXTS, layer=1, n_values=2, draws=2, seed=7, batch_size=4)
    exact = ["targets", "draw", "input", "position", "kind", "dimension"]
    assert batched.details[exact].equals(runs[0].details[exact])  # draws are per input, not per batch
    np.testing.assert_allclose(batched.details[["value", "mean"]], runs[0].details[["value", "mean"]], rtol=1e-9)
    one = runs[0].details[(runs[0].details["targets"] == "random") & (runs[0].details["input"] == 0)]
    assert one.groupby("draw").size().tolist() == [2, 2]


def test_the_intervention_refuses_bad_arguments():
    encoder = tiny_bert()
    with pytest.raises(ValueError, match="layer"):
        massive.massive_intervention(encoder, TEXTS, layer=3)
    with pytest.raises(ValueError, match="layer"):
        massive.massive_intervention(encoder, TEXTS, layer=-1)
    with pytest.raises(ValueError, match="n_values"):
        massive.massive_intervention(encoder, TEXTS, layer=1, n_values=0)
    with pytest.raises(ValueError, match="draws"):
        massive.massive_intervention(encoder, TEXTS, layer=1, draws=0)
    with pytest.raises(ValueError, match="items"):
        massive.massive_intervention(encoder, TEXTS[:1], layer=1)
    with pytest.raises(ValueError, match="batch_size"):
        massive.massive_intervention(encoder, TEXTS, layer=1, batch_size=1)
    with pytest.raises(ValueError, match="top_k"):
        massive.massive_activations(encoder, TEXTS, top_k=0)
    with pytest.raises(ValueError, match="items"):
        massive.massive_activations(encoder, [])


# -- section 4 --------------------------------------------------------------------------------------
WEIGHT_DIM, BIAS_DIM = 7, 3


def planted_layernorm(seed: int = 0) -> Encoder:
    """A tiny BERT (3 layers) whose output LayerNorm weights are 1 + noise, with WEIGHT_DIM at 10 in every layer
    and dimension 12 at 10 in layer 1 only; biases are noise with BIAS_DIM at 5 in layers 1 and 2."""
    encoder = tiny_bert(seed, layers=3)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for i, layer in enumerate(encoder.model.encoder.layer):
            norm = layer.output.LayerNorm
            norm.weight.copy_(1 + 0.05 * torch.randn(HIDDEN, generator=generator, dtype=torch.float64))
            norm.bias.copy_(0.05 * torch.randn(HIDDEN, generator=generator, dtype=torch.float64))
            norm.weight[WEIGHT_DIM] = 10.0
            if i == 0:
                norm.weight[12] = 10.0
            if i < 2:
                norm.bias[BIAS_DIM] = 5.0
    return encoder


def test_a_planted_outlier_layernorm_dimension_is_found_and_not_the_others():
    encoder = planted_layernorm()
    found = massive.layernorm_outliers(encoder)
    assert found.dims == found.weight_dims == (WEIGHT_DIM,)  # 12 is an outlier in one layer of 3 only
    assert found.bias_dims == (BIAS_DIM,)  # two layers of 3
    assert massive.layernorm_outliers(encoder, min_share=1.0).bias_dims == ()
    # in layer 1 the two large weights widen the standard deviation: each lies 2.6 of them from the mean
    assert massive.layernorm_outliers(encoder, min_share=0.3).weight_dims == (WEIGHT_DIM,)
    assert massive.layernorm_outliers(encoder, k=2.5, min_share=0.3).weight_dims == (WEIGHT_DIM, 12)
    table = found.table
    assert len(table) == 3 * HIDDEN * 2
    weights = encoder.model.encoder.layer[1].output.LayerNorm.weight.detach().numpy()
    z = (weights - weights.mean()) / weights.std()
    row = table[(table["layer"] == 2) & (table["parameter"] == "weight")]
    np.testing.assert_allclose(row["z"], z, rtol=1e-12)
    assert set(row.loc[row["outlier"], "dimension"]) == {WEIGHT_DIM}
    flagged = found.layers_flagged().set_index("dimension")
    assert flagged.loc[WEIGHT_DIM, "weight"] == 2 and flagged.loc[BIAS_DIM, "bias"] == 2  # layers 2-3; 1-2
    attention = massive.layernorm_outliers(encoder, which="attention")
    assert attention.which == "attention" and attention.dims == ()  # untouched LayerNorms: all weights 1


def test_disabling_zeroes_the_dims_inside_and_restores_the_model_exactly_after():
    encoder = planted_layernorm()
    model = encoder.model
    inputs = encoder.pad([encoder.prepare(*p) for p in PAIRS])
    state = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.inference_mode():
        before = model(**inputs).last_hidden_state
        with massive.disabled_layernorm(model, [WEIGHT_DIM, BIAS_DIM], layers=[2, 3]):
            norm = model.encoder.layer[1].output.LayerNorm
            assert norm.weight[WEIGHT_DIM] == 0 and norm.bias[BIAS_DIM] == 0 and norm.weight[BIAS_DIM] == 0
            assert model.encoder.layer[0].output.LayerNorm.weight[WEIGHT_DIM] == 10.0  # layer 1 left alone
            inside = model(**inputs).last_hidden_state
            assert (inside[..., WEIGHT_DIM] == 0).all()  # the last layer's LayerNorm writes 0 there
        after = model(**inputs).last_hidden_state
        with massive.disabled_layernorm(model, []):  # nothing disabled: nothing changes
            empty = model(**inputs).last_hidden_state
    assert not torch.equal(inside, before)
    assert torch.equal(after, before) and torch.equal(empty, before)
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())
    with pytest.raises(RuntimeError, match="boom"):
        with massive.disabled_layernorm(model, [WEIGHT_DIM]):
            raise RuntimeError("boom")
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())


def test_the_layernorm_intervention_against_seeded_random_dimensions():
    encoder = planted_layernorm()
    found = massive.layernorm_outliers(encoder)
    result = massive.layernorm_intervention(encoder, TEXTS, found, draws=4, seed=3, batch_size=2)
    again = massive.layernorm_intervention(encoder, TEXTS, found, draws=4, seed=3, batch_size=4)
    assert result.details.equals(again.details)
    pd_frame = result.frame.sort_values(["targets", "draw", "input"]).reset_index(drop=True)
    np.testing.assert_allclose(pd_frame["pooled_distance"],
                               again.frame.sort_values(["targets", "draw", "input"])["pooled_distance"], atol=1e-12)
    details = result.details
    assert details[details["targets"] == "outlier"]["dimension"].tolist() == [WEIGHT_DIM]
    random = details[details["targets"] == "random"]
    assert random.groupby("draw").size().tolist() == [1] * 4 and WEIGHT_DIM not in set(random["dimension"])
    other = massive.layernorm_intervention(encoder, TEXTS, found, draws=4, seed=4, batch_size=2)
    assert not other.details.equals(result.details)
    assert result.sink_layers == (2, 3)
    summary = result.summary().set_index(["targets", "edit"])
    assert summary.loc[("outlier", "disable"), "pooled_distance"] > 0
    assert summary.loc[("none", "none"), "pooled_distance"] == 0
    nothing = massive.layernorm_intervention(encoder, TEXTS, [], draws=1, batch_size=2)
    assert (nothing.frame["pooled_distance"].abs() < 1e-12).all()  # disabling nothing changes nothing


def test_the_layernorm_functions_refuse_bad_arguments():
    encoder = planted_layernorm()
    with pytest.raises(ValueError, match="dims"):
        massive.layernorm_intervention(encoder, TEXTS, [HIDDEN])
    with pytest.raises(ValueError, match="which"):
        massive.layernorm_outliers(encoder, which="input")
    with pytest.raises(ValueError, match="k must"):
        massive.layernorm_outliers(encoder, k=0)
    with pytest.raises(ValueError, match="min_share"):
        massive.layernorm_outliers(encoder, min_share=0)
    with pytest.raises(ValueError, match="layer"):
        with massive.disabled_layernorm(encoder.model, [1], layers=[0]):
            pass
    with pytest.raises(ValueError, match="draws"):
        massive.layernorm_intervention(encoder, TEXTS, [1], draws=0)


# -- another architecture ---------------------------------------------------------------------------
def test_distilbert_single_texts_and_pairs():
    torch.manual_seed(0)
    model = DistilBertModel(DistilBertConfig(vocab_size=tokenizer().vocab_size, n_layers=2, n_heads=2, dim=16,
                                             hidden_dim=32, max_position_embeddings=64,
                                             attn_implementation="eager")).double().eval()
    encoder = Encoder("tiny-distilbert", model, tokenizer(), None, 64)
    items = [TEXTS[0], PAIRS[0], TEXTS[1]]
    found = massive.massive_activations(encoder, items)
    assert found.maximum.shape == (3, 3) and len(found.by_layer()) == 3
    state = {k: v.clone() for k, v in model.state_dict().items()}
    for layer in (0, 1, 2):
        result = massive.massive_intervention(encoder, items, layer=layer, draws=2)
        assert np.isfinite(result.frame["pooled_distance"]).all()
        assert result.sink_layers == tuple(range(layer + 1, 3))
    assert np.isnan(result.frame["sink_mass"]).all()  # after the last layer there is no attention layer left
    outliers = massive.layernorm_outliers(encoder, k=1.0, min_share=0.5)
    ablation = massive.layernorm_intervention(encoder, items, [0, 1], draws=2)
    assert len(ablation.summary()) == 3 and outliers.table["layer"].max() == 2
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())
