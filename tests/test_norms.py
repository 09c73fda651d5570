"""norms: the residual + LayerNorm decomposition adds up to the attention block's real output (BERT and
DistilBERT); shares by weight and by norm on maps whose answers are known; the reducer's tables."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from bertlook_utils import intervene, norms
from bertlook_utils.extract import batches
from bertlook_utils.models import default_model_path, load_encoder

TEXTS = ["the cat sat on the mat .", ("a dog ran , fast", "it rained all day")]


def _distilbert(folder):
    from transformers import AutoTokenizer, DistilBertConfig, DistilBertModel

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(default_model_path())
    DistilBertModel(DistilBertConfig(vocab_size=tokenizer.vocab_size, dim=24, n_layers=2, n_heads=3, hidden_dim=32,
                                     max_position_embeddings=64)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return load_encoder(folder)


@pytest.fixture(scope="module", params=["bert", "distilbert"])
def model(request, tiny, tmp_path_factory):
    return tiny if request.param == "bert" else _distilbert(tmp_path_factory.mktemp("distil"))


def test_decomposition_adds_up_to_the_attention_block_output(model):
    layernorms = {}
    hooks = [norms.attention_layernorm(model.model, layer).register_forward_hook(
        lambda module, args, out, layer=layer: layernorms.__setitem__(layer, out.detach()))
        for layer in range(model.n_layers)]
    try:
        batch = next(batches(model, TEXTS, attention=False))
        with torch.inference_mode():
            out = model.model(**batch.model_inputs, output_attentions=True, output_hidden_states=True)
    finally:
        for hook in hooks:
            hook.remove()
    for b, n in enumerate(batch.lengths.tolist()):
        for layer in range(model.n_layers):
            terms = norms.decompose_layer(model.model, layer, out.hidden_states[layer][b, :n],
                                          out.attentions[layer][b, :, :n, :n], model.n_heads)
            rebuilt = terms.normed.sum(1) + terms.bias
            np.testing.assert_allclose(rebuilt.numpy(), layernorms[layer][b, :n].double().numpy(), atol=1e-4)
            # the heads' summed vectors are the attention output before the projection's bias
            assert torch.allclose(terms.z.sum(1) - terms.residual, terms.mixed.sum(1))
            # the fast norms (Gram matrices, no [n, n, D] tensor) are the norms of these terms
            fast = norms.contribution_norms(model.model, layer, out.hidden_states[layer][b, :n],
                                            out.attentions[layer][b, :, :n, :n], model.n_heads)
            for key, term in (("mixed", terms.mixed), ("residual", terms.z), ("normed", terms.normed)):
                np.testing.assert_allclose(fast[key].numpy(), term.norm(dim=-1).numpy(), atol=1e-6, rtol=1e-6)
            for k, term in enumerate((terms.mixed, terms.z, terms.normed)):  # the context-mixing ratios
                eye = torch.eye(n, dtype=torch.bool)[:, :, None]
                context = torch.where(eye, 0, term).sum(1).norm(dim=-1)
                own = term.diagonal(dim1=0, dim2=1).T.norm(dim=-1)
                np.testing.assert_allclose(fast["mixing"][k].numpy(), (context / (context + own)).numpy(), atol=1e-6)
            heads = out.attentions[layer][b, :, :n, :n, None].double() * terms.vectors[:, None, :, :]
            np.testing.assert_allclose(fast["heads"].numpy(), heads.norm(dim=-1).numpy(), atol=1e-6, rtol=1e-6)


def test_shares_on_known_maps():
    columns = torch.tensor([[False, False, False, True],   # sep
                            [True, False, False, False],   # cls
                            [False, False, True, False],   # punct
                            [False, True, False, False]])  # other
    scores = torch.zeros(4, 4, dtype=torch.float64)
    scores[:, 0] = 3.0  # every row: 3 on [CLS], 1 on the word
    scores[:, 1] = 1.0
    np.testing.assert_allclose(norms._shares(scores, columns).numpy(), [0, 0.75, 0, 0.25])


def test_norm_shares_equal_weight_shares_when_every_vector_has_the_same_length(tiny, monkeypatch):
    n_heads = tiny.n_heads

    def same_length(model, layer, hidden, heads):
        return torch.ones(hidden.shape[0], heads, hidden.shape[1], hidden.shape[2], dtype=hidden.dtype)

    monkeypatch.setattr(norms, "head_vectors", same_length)
    result = norms.norm_shares(tiny, TEXTS, cache_dir=None, progress=False)
    np.testing.assert_allclose(result.arrays["norm"], result.arrays["weight"], atol=1e-9)
    assert result.arrays["weight"].shape == (2, tiny.n_layers, n_heads, 4)
    np.testing.assert_allclose(result.arrays["weight"].sum(-1), 1.0, atol=1e-6)


def test_mixing_by_weight_is_one_minus_the_diagonal(tiny):
    result = norms.norm_shares(tiny, TEXTS, cache_dir=None, progress=False)
    enc = tiny.encode(TEXTS[0])
    diagonal = np.diagonal(enc.attn.mean(1), axis1=-2, axis2=-1).mean(-1)  # [L]
    np.testing.assert_allclose(result.arrays["mixing"][0, :, 0], 1 - diagonal, atol=1e-5)
    mixing = result.mixing()
    assert list(mixing.columns[:2]) == ["layer", "weight"] and len(mixing) == tiny.n_layers
    assert ((result.arrays["mixing"] >= 0) & (result.arrays["mixing"] <= 1)).all()
    table = result.by_layer()
    np.testing.assert_allclose(table.groupby(level="layer").sum().to_numpy(), 1.0, atol=1e-6)


def test_a_model_without_the_known_layernorm_is_refused(tiny):
    model = nn.Module()
    model.config = tiny.model.config
    model.layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(tiny.n_layers)])
    with pytest.raises(ValueError, match="LayerNorm"):
        norms.attention_layernorm(model, 0)
    with pytest.raises(ValueError, match="no inputs"):
        norms.norm_shares(tiny, [], cache_dir=None)
    assert intervene.encoder_layers(model) is model.layers
