"""sinks.heads (issue 32, sections 2 and 6): queries and keys recomputed from the layer inputs give the model's own
attention (BERT, RoBERTa, DistilBERT, ELECTRA); a tiny BERT with a planted sink key has known key ratios, cosines,
margins, sink mass and update ratios; a head with a zero value projection writes nothing; hand-built queries and
keys with padding and another sink position; a DistilBERT end to end; bad input refused."""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import pytest
import torch
from scipy import stats
from transformers import (AutoTokenizer, BertConfig, BertModel, DistilBertConfig, DistilBertModel, ElectraConfig,
                          ElectraModel, RobertaConfig, RobertaModel)

from bertlook_utils import norms
from bertlook_utils.analyses.sinks import heads, sink_scores
from bertlook_utils.extract import batches
from bertlook_utils.models import Encoder, default_model_path

TEXTS = ["The cat sat on the mat.", ("A dog ran, fast.", "It rained all day and night.")]
ALPHA, BETA, GAMMA = 3.0, 0.5, 1.0  # the planted sink key's gain, the other keys' gain, the query's length


@lru_cache(maxsize=1)
def tokenizer():
    return AutoTokenizer.from_pretrained(default_model_path())


def small(family: str, vocab_size: int = 40):
    """A tiny random model of `family` (2 layers x 2 heads, hidden 16, eager attention), eval mode."""
    torch.manual_seed(0)
    sizes = dict(vocab_size=vocab_size, max_position_embeddings=64, attn_implementation="eager")
    config, model_class = {
        "bert": (BertConfig(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                            initializer_range=0.3, **sizes), BertModel),
        "roberta": (RobertaConfig(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                                  initializer_range=0.3, **sizes), RobertaModel),
        "distilbert": (DistilBertConfig(dim=16, n_layers=2, n_heads=2, hidden_dim=32, initializer_range=0.3, **sizes),
                       DistilBertModel),
        "electra": (ElectraConfig(embedding_size=8, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=32, initializer_range=0.3, **sizes), ElectraModel),
    }[family]
    return model_class(config).eval()


def padded_inputs():
    """3 inputs of 9 ids, the second padded after 6 (ids >= 5, so no RoBERTa padding id inside)."""
    ids = torch.randint(5, 40, (3, 9), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(3, 9, dtype=torch.long)
    mask[1, 6:] = 0
    return {"input_ids": ids, "attention_mask": mask}


@pytest.mark.parametrize("family", ["bert", "roberta", "distilbert", "electra"])
def test_attention_recomputed_from_queries_and_keys_is_the_models(family):
    model, inputs = small(family), padded_inputs()
    valid = inputs["attention_mask"].bool()
    with torch.inference_mode():
        out = model(**inputs, output_attentions=True, output_hidden_states=True)
        for layer in (1, 2):
            q, k, scaling = heads.queries_keys(model, layer, out.hidden_states[layer - 1], 2)
            assert q.shape == k.shape == (3, 2, 9, 8) and scaling == pytest.approx(8 ** -0.5)
            recomputed = heads.attention_from(q, k, valid, scaling)
            torch.testing.assert_close(recomputed, out.attentions[layer - 1].double(), atol=1e-6, rtol=1e-5)
            assert (recomputed[1, :, :, 6:] == 0).all()


# -- a planted sink key -----------------------------------------------------------------------------------
def planted_encoder() -> Encoder:
    """1 layer x 2 heads, hidden 8 (head size 4), float64. Embeddings: [CLS] -> (1, -1, 0, ..), every other token
    -> (0, 0, 1, -1, 0, ..) (no positions, no segments; the LayerNorm doubles both: |x| = 2 sqrt 2). Head 1: keys
    k = ALPHA x_0 e_0 + BETA x_2 e_1, so k[CLS] = (2 ALPHA, 0, 0, 0) and every other key (0, 2 BETA, 0, 0); every
    query (GAMMA, 0, 0, 0), along the sink key. Head 2: the same keys, every query (0, 0, 0, GAMMA), orthogonal to
    all of them (uniform attention), and a zero value projection. Head 1's values: x[0:4], through the output
    projection back to dims 0-3."""
    tok = tokenizer()
    config = BertConfig(vocab_size=tok.vocab_size, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=16, max_position_embeddings=32, layer_norm_eps=1e-12,
                        attn_implementation="eager")
    torch.manual_seed(0)
    model = BertModel(config).double().eval()
    with torch.no_grad():
        embeddings = model.embeddings
        embeddings.position_embeddings.weight.zero_()
        embeddings.token_type_embeddings.weight.zero_()
        embeddings.LayerNorm.weight.fill_(1.0)
        embeddings.LayerNorm.bias.zero_()
        words = embeddings.word_embeddings.weight
        words.zero_()
        words[:, 2], words[:, 3] = 1.0, -1.0
        words[tok.cls_token_id] = torch.tensor([1.0, -1.0, 0, 0, 0, 0, 0, 0])
        attention = model.encoder.layer[0].attention
        self_attention = attention.self
        for linear in (self_attention.query, self_attention.key, self_attention.value, attention.output.dense):
            linear.weight.zero_()
            linear.bias.zero_()
        for first in (0, 4):  # both heads' keys
            self_attention.key.weight[first, 0], self_attention.key.weight[first + 1, 2] = ALPHA, BETA
        self_attention.query.bias[0], self_attention.query.bias[7] = GAMMA, GAMMA
        for r in range(4):  # head 1's values and output slice; head 2's value projection stays zero
            self_attention.value.weight[r, r] = 1.0
            attention.output.dense.weight[r, r] = 1.0
        attention.output.dense.bias.normal_()  # b_O is no head's write: the ratios must not see it
    return Encoder("planted", model, tok, None, 32)


def test_a_planted_sink_key_gives_its_known_ratios_cosines_and_margins():
    encoder = planted_encoder()
    result = heads.sink_heads(encoder, ["cat cat cat cat", "dog dog dog dog dog dog dog"], cache_dir=None)
    assert result.values["margin"].shape == (2, 1, 2)
    n = np.array([6, 9])  # [CLS], the words, [SEP]
    mass = math.exp(ALPHA * GAMMA) / (math.exp(ALPHA * GAMMA) + n - 1)
    expected_head1 = {"key_ratio": ALPHA / BETA, "cos_sink": 1.0, "cos_other": 0.0,
                      "margin": ALPHA * GAMMA,  # (2 ALPHA)(GAMMA) / sqrt 4; the other logits are 0
                      "margin_direction": BETA * GAMMA, "margin_length": (ALPHA - BETA) * GAMMA, "sink_mass": mass,
                      "update_ratio": np.sqrt(mass ** 2 + (1 - mass) ** 2)}  # |a v[CLS] + (1 - a) v| / |x|
    expected_head2 = {"key_ratio": ALPHA / BETA, "cos_sink": 0.0, "cos_other": 0.0, "margin": 0.0,
                      "margin_direction": 0.0, "margin_length": 0.0, "sink_mass": 1 / n, "update_ratio": 0.0}
    for head, expected in enumerate((expected_head1, expected_head2)):
        for name, value in expected.items():
            np.testing.assert_allclose(result.values[name][:, 0, head], np.broadcast_to(value, 2), atol=1e-9,
                                       err_msg=f"head {head + 1}: {name}")
    table = result.key_bias()
    assert list(table.columns) == ["layer", "head", *heads.KEY_BIAS, "direction_share"]
    assert table["direction_share"][0] == pytest.approx(BETA / ALPHA)
    assert np.isnan(table["direction_share"][1])  # no margin to share
    no_op = result.no_op()
    assert list(no_op.columns[:4]) == ["layer", "head", "sink_mass", "update_ratio"]
    assert no_op["update_ratio"][1] == 0 and no_op["update_ratio_low"][1] == 0
    assert result.rank_correlation() == pytest.approx(1.0)  # 2 heads: the sink head writes more here


def test_the_sink_can_be_another_position():
    encoder = planted_encoder()
    last = heads.sink_heads(encoder, ["cat cat cat cat"], sink=-1, cache_dir=None)  # the final [SEP]
    # head 1: others = [CLS] (logit ALPHA GAMMA) and 4 words (0); [SEP]'s key is a word's: cos 0, ratio 1
    np.testing.assert_allclose(last.values["key_ratio"][0, 0], [1.0, 1.0])
    np.testing.assert_allclose(last.values["cos_sink"][0, 0], [0.0, 0.0], atol=1e-12)
    assert last.values["margin"][0, 0, 0] == pytest.approx(-ALPHA * GAMMA / 5)
    assert last.values["margin_length"][0, 0, 0] == pytest.approx(0, abs=1e-12)
    assert last.values["cos_other"][0, 0, 0] == pytest.approx(1 / 5)
    mass = math.exp(ALPHA * GAMMA) / (math.exp(ALPHA * GAMMA) + 5)
    assert last.values["sink_mass"][0, 0, 0] == pytest.approx((1 - mass) / 5)
    same = heads.sink_heads(encoder, ["cat cat cat cat"], sink=5, cache_dir=None)
    for name, value in last.values.items():
        np.testing.assert_array_equal(same.values[name], value)


def test_key_geometry_on_hand_built_vectors_ignores_padding():
    # one head, d = 2: input 0 has 4 tokens, input 1 has 3 (the 4th is padding, filled with junk)
    q = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 2.0], [0.0, 1.0]]).expand(2, 1, 4, 2).clone()
    k = torch.tensor([[0.0, 0.0], [4.0, 0.0], [0.0, 1.0], [0.0, 3.0]]).expand(2, 1, 4, 2).clone()
    q[1, 0, 3], k[1, 0, 3] = torch.tensor([50.0, -7.0]), torch.tensor([-9.0, 80.0])
    valid = torch.tensor([[True] * 4, [True, True, True, False]])
    got = heads.key_geometry(q, k, valid, sink=1, scaling=1.0)  # the sink is token 1, key (4, 0)
    # input 0: other keys (0,0), (0,1), (0,3): median length 1; logits of rows: q.k
    logits = q[0, 0] @ k[0, 0].T
    others = [0, 2, 3]
    margin = (logits[:, 1] - logits[:, others].mean(1)).mean()
    direction = (q[0, 0, :, 0] * 1.0 - logits[:, others].mean(1)).mean()  # |q| m cos = q_x m
    assert got["key_ratio"][0, 0] == pytest.approx(4.0)
    assert got["margin"][0, 0] == pytest.approx(float(margin))
    assert got["margin_direction"][0, 0] == pytest.approx(float(direction))
    assert got["cos_sink"][0, 0] == pytest.approx(0.5)  # rows 0, 1 along the key, rows 2, 3 orthogonal
    # the zero key counts 0 in the cosines: rows 0-1 give (0 + 0 + 0) / 3, rows 2-3 (0 + 1 + 1) / 3
    assert got["cos_other"][0, 0] == pytest.approx(1 / 3)
    # input 1: others (0,0), (0,1): median 0.5; padding ignored
    assert got["key_ratio"][1, 0] == pytest.approx(8.0)
    logits = q[1, 0, :3] @ k[1, 0, :3].T
    assert got["margin"][1, 0] == pytest.approx(float((logits[:, 1] - logits[:, [0, 2]].mean(1)).mean()))
    assert got["cos_sink"][1, 0] == pytest.approx(2 / 3)
    assert torch.allclose(got["margin"], got["margin_direction"] + got["margin_length"])
    with pytest.raises(ValueError, match="sink=3"):
        heads.key_geometry(q, k, valid, sink=3)
    with pytest.raises(ValueError, match="valid"):
        heads.key_geometry(q, k, valid[:, :3])
    with pytest.raises(ValueError, match="prefix"):
        heads.key_geometry(q, k, torch.tensor([[True] * 4, [True, False, True, True]]))
    with pytest.raises(ValueError, match="queries and keys"):
        heads.key_geometry(q, k[..., :1])


@pytest.mark.parametrize("sink", [0, 2, -1])
def test_key_geometry_is_its_definition_written_out(sink):
    g = torch.Generator().manual_seed(3)
    q, k = torch.randn(3, 2, 7, 4, generator=g, dtype=torch.float64), torch.randn(3, 2, 7, 4, generator=g,
                                                                                      dtype=torch.float64)
    lengths = [7, 5, 4]
    valid = torch.arange(7)[None] < torch.tensor(lengths)[:, None]
    got = heads.key_geometry(q, k, valid, sink)
    for b, n in enumerate(lengths):
        s = sink % n
        others = [j for j in range(n) if j != s]
        for h in range(2):
            qs, ks = q[b, h, :n], k[b, h, :n]
            logits, norms_k = qs @ ks.T / 2, ks.norm(dim=-1)
            cos = (qs / qs.norm(dim=-1, keepdim=True)) @ (ks / norms_k[:, None]).T
            median = float(np.median(norms_k[others].numpy()))
            rest = logits[:, others].mean(1)
            expected = {"key_ratio": norms_k[s] / median, "cos_sink": cos[:, s].mean(),
                        "cos_other": cos[:, others].mean(), "margin": (logits[:, s] - rest).mean(),
                        "margin_direction": (qs.norm(dim=-1) * median * cos[:, s] / 2 - rest).mean()}
            for name, value in expected.items():
                assert got[name][b, h] == pytest.approx(float(value), rel=1e-10, abs=1e-12), name


def test_a_head_with_zero_value_projection_writes_nothing():
    model, inputs = small("bert"), padded_inputs()
    with torch.no_grad():
        model.encoder.layer[1].attention.self.value.weight[8:].zero_()  # head 2 of layer 2
        model.encoder.layer[1].attention.self.value.bias[8:].zero_()
        out = model(**inputs, output_attentions=True, output_hidden_states=True)
        tokens = inputs["attention_mask"].bool()
        ratios = heads.update_ratios(model, 2, out.hidden_states[1], out.attentions[1], tokens, 2)
    assert ratios.shape == (3, 2) and (ratios[:, 1] == 0).all() and (ratios[:, 0] > 0).all()
    with pytest.raises(ValueError, match="must agree"):
        heads.update_ratios(model, 2, out.hidden_states[1], out.attentions[1][:, :1], tokens, 2)
    with pytest.raises(ValueError, match="layer must be 1-2"):
        heads.update_ratios(model, 3, out.hidden_states[1], out.attentions[1], tokens, 2)
    with pytest.raises(ValueError, match="layer must be 1-2"):
        heads.queries_keys(model, 0, out.hidden_states[1], 2)


# -- end to end on a DistilBERT ---------------------------------------------------------------------------
def test_a_distilbert_end_to_end_matches_per_input_computations(tmp_path):
    model = small("distilbert", vocab_size=tokenizer().vocab_size).float()
    encoder = Encoder("tiny-distil", model, tokenizer(), None, 64)
    result = heads.sink_heads(encoder, TEXTS * 2, batch_size=3, cache_dir=tmp_path)  # padded batches, cached
    again = heads.sink_heads(encoder, TEXTS * 2, batch_size=4, cache_dir=tmp_path)
    assert set(result.values) == {*heads.KEY_BIAS, "update_ratio", "row_switch"}
    for name, value in result.values.items():
        assert value.shape == (4, 2, 2) and np.isfinite(value).all()
        np.testing.assert_allclose(again.values[name], value)
    assert result.key_bias().shape == (4, 2 + len(heads.KEY_BIAS) + 1)
    for i, item in enumerate(TEXTS):  # one input at a time, without padding, by the kit's other definitions
        enc = encoder.encode(*item) if isinstance(item, tuple) else encoder.encode(item)
        np.testing.assert_allclose(result.values["sink_mass"][i], sink_scores(enc.attn)[..., 0], atol=1e-6)
        batch = next(batches(encoder, [item], attention=False))
        with torch.inference_mode():
            out = model(**batch.model_inputs, output_hidden_states=True)
        ordinary = np.array([t not in ("[CLS]", "[SEP]", ".", ",") for t in enc.tokens])
        for layer in range(2):
            terms = norms.decompose_layer(model, layer, out.hidden_states[layer][0], torch.from_numpy(enc.attn[layer]),
                                          2)
            written = torch.einsum("hij,hjd->hid", torch.from_numpy(enc.attn[layer]).double(), terms.vectors)
            per_row = (written.norm(dim=-1) / terms.residual.norm(dim=-1))[:, ordinary]  # [H, ordinary rows]
            np.testing.assert_allclose(result.values["update_ratio"][i, layer], per_row.mean(-1).numpy(), rtol=1e-5)
            on_sink = enc.attn[layer][:, ordinary, 0]  # each ordinary row's weight on [CLS]
            rho = [stats.spearmanr(on_sink[h], per_row[h].numpy()).statistic for h in range(2)]
            np.testing.assert_allclose(result.values["row_switch"][i, layer], rho, atol=1e-6)
    low, high = result.rank_interval(n_boot=50)
    assert -1 <= low <= high <= 1
    assert -1 <= result.rank_correlation("margin", "sink_mass") <= 1


def test_row_switch_ranks_rows_within_each_head_and_input():
    weights = torch.tensor([[[0.1, 0.5, 0.3, 0.9, 0.2], [0.1, 0.2, 0.3, 0.4, 0.5]]], dtype=torch.float64)  # [1, 2, 5]
    updates = torch.stack([1 - weights[0, 0], weights[0, 1] ** 2])[None]  # head 1: reversed ranks; head 2: same
    rows = torch.tensor([[False, True, True, True, True]])  # row 0 left out
    rho = heads.row_switch(weights, updates, rows)
    assert rho.shape == (1, 2) and rho[0, 0] == pytest.approx(-1.0) and rho[0, 1] == pytest.approx(1.0)
    scrambled = updates.clone()
    scrambled[0, 0] = torch.tensor([5.0, 1.0, 3.0, 2.0, 4.0])
    expected = stats.spearmanr([0.5, 0.3, 0.9, 0.2], [1.0, 3.0, 2.0, 4.0]).statistic  # over rows 1-4 only
    assert heads.row_switch(weights, scrambled, rows)[0, 0] == pytest.approx(expected)
    ties = heads.row_switch(torch.tensor([[[0.2, 0.2, 0.5, 0.7]]]), torch.tensor([[[1.0, 2.0, 3.0, 4.0]]]),
                            torch.ones(1, 4, dtype=torch.bool))
    assert ties[0, 0] == pytest.approx(stats.spearmanr([0.2, 0.2, 0.5, 0.7], [1, 2, 3, 4]).statistic)
    few = heads.row_switch(weights, updates, torch.tensor([[True, True, False, False, False]]))
    assert torch.isnan(few).all()  # two rows: no rank correlation
    with pytest.raises(ValueError, match="must agree"):
        heads.row_switch(weights, updates[..., :4], rows)


def test_rank_correlation_over_heads():
    values = np.linspace(0, 1, 12).reshape(1, 3, 4).repeat(5, 0)
    result = heads.SinkHeads({"sink_mass": values, "update_ratio": 2 - values, "margin": values ** 3})
    assert result.rank_correlation() == pytest.approx(-1.0)
    assert result.rank_correlation("margin", "sink_mass") == pytest.approx(1.0)
    assert result.rank_interval(n_boot=20) == pytest.approx((-1.0, -1.0))
    with pytest.raises(ValueError, match="no measure 'mass'"):
        result.rank_correlation("mass")
    with pytest.raises(ValueError, match="n_boot"):
        result.rank_interval(n_boot=0)


def test_bad_input_is_refused_with_the_argument_named():
    encoder = planted_encoder()
    with pytest.raises(ValueError, match="items"):
        heads.sink_heads(encoder, [], cache_dir=None)
    for sink in (True, 1.0, "0"):
        with pytest.raises(ValueError, match="sink must be an integer"):
            heads.sink_heads(encoder, ["cat"], sink=sink, cache_dir=None)
    with pytest.raises(ValueError, match="sink=7"):
        heads.sink_heads(encoder, ["cat cat cat cat"], sink=7, cache_dir=None)
    with pytest.raises(ValueError, match="batch_size"):
        heads.sink_heads(encoder, ["cat"], batch_size=0, cache_dir=None)
    signed = Encoder("signed", encoder.model, encoder.tokenizer, None, 32, signed_attention=True)
    with pytest.raises(ValueError, match="encoder"):
        heads.sink_heads(signed, ["cat"], cache_dir=None)
