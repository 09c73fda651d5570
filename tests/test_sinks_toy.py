"""sinks.toy: the normalisers' rows and gradients, the gate at its extremes, the task's labels on hand-made
sequences, seeded reproducibility of a short run, the sink metric against `sinks.sink_rate`, and a short training
run of the softmax variant that learns the lookup."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from bertlook_utils import sinks
from bertlook_utils.analyses.sinks import toy

TINY = toy.ToyTask(n_digits=4, length=8, n_queries=1)
BOS = toy.BOS


def digit(d: int) -> int:
    return 2 + d


def query(d: int, k: int = 4) -> int:
    """The query form of digit d."""
    return 2 + k + d


# -- normalisers --------------------------------------------------------------------------------------------------
def scores(seed: int = 0) -> torch.Tensor:
    """Scores [3, 6] with one large logit per row, so the other softmax weights fall below clipping."""
    x = torch.randn(3, 6, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    x[:, 2] += 8.0
    return x


def test_softmax_rows_sum_to_one_softmax1_rows_to_less_and_clipped_rows_reach_zero():
    x = scores()
    assert toy.normaliser("softmax")(x).sum(-1) == pytest.approx(torch.ones(3, dtype=torch.float64))
    assert toy.normaliser("gated")(x).sum(-1) == pytest.approx(torch.ones(3, dtype=torch.float64))
    one = toy.normaliser("softmax1")(x)
    assert (one.sum(-1) < 1).all() and (one > 0).all()
    expected = x.exp() / (1 + x.exp().sum(-1, keepdim=True))
    assert torch.allclose(one, expected)
    clipped = toy.normaliser("clipped", length=6)(x)
    assert (clipped == 0).any(dim=-1).all() and (clipped >= 0).all()
    assert toy.normaliser("clipped", alpha=0.0)(x) == pytest.approx(torch.softmax(x, -1))  # alpha 0: plain softmax
    assert torch.equal(toy.normaliser("sigmoid")(x), torch.sigmoid(x))  # no normalisation: rows sum to anything


@pytest.mark.parametrize("alpha, can_do_nothing", [(2.0, True), (4.0, True), (0.4, False)])
def test_clipped_softmax_lets_a_row_sum_to_zero_from_bondarenkos_alpha_on(alpha, can_do_nothing):
    """gamma = -alpha / T. A row of T equal scores has softmax weights 1/T, clipped to (1 + alpha/T)/T - alpha/T,
    below 0 when alpha > 1 + alpha/T: the whole row clips to 0 and the head does nothing. At the old 0.4 it
    cannot: the row keeps (0.6 + 0.4/T) / T per key, about 0.6 of its weight."""
    length = 16
    assert toy.clipped_gamma(alpha, length) == -alpha / length
    row = toy.normaliser("clipped", alpha=alpha, length=length)(torch.zeros(1, length, dtype=torch.float64))
    if can_do_nothing:
        assert row.sum() == 0
    else:
        assert row.sum().item() == pytest.approx(length * ((1 + alpha / length) / length - alpha / length))
        assert row.sum() > 0.6
    with pytest.raises(ValueError, match="alpha"):
        toy.clipped_gamma(-1.0, length)


def test_the_normalisers_keep_the_tensor_type_and_pass_gradients():
    x = scores().requires_grad_()
    assert torch.autograd.gradcheck(toy.normaliser("softmax1"), (x,))
    out = toy.normaliser("clipped", alpha=0.4, length=16)(x)  # gamma -0.025
    assert isinstance(out, torch.Tensor) and out.shape == x.shape
    clipped = (out == 0).detach()
    weight = torch.randn(3, 6, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    (out * weight).sum().backward()
    grad = x.grad
    assert torch.isfinite(grad).all() and (grad.abs() > 0).all()  # every logit still gets a gradient ...
    # ... but a clipped weight's own path is cut by the clamp: its logit learns only through the softmax's
    # coupling to the weights that were not clipped, -(zeta - gamma) p_i sum_j(unclipped) w_j dp_j/... (tiny, ~p_i)
    p = torch.softmax(x.detach(), -1)
    keep = ~clipped
    coupled = -(1.025) * p * ((weight * p * keep).sum(-1, keepdim=True))
    assert torch.allclose(grad[clipped], coupled[clipped])


# -- the gate -----------------------------------------------------------------------------------------------------
def attention(gated: bool, seed: int = 0) -> toy.ToyAttention:
    torch.manual_seed(seed)
    return toy.ToyAttention(width=8, heads=2, normalise=toy.normaliser("softmax"), gated=gated)


def test_a_gate_at_a_huge_negative_bias_zeroes_the_head_output():
    attn = attention(gated=True)
    x = torch.randn(3, 5, 8, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        attn.gate.bias.fill_(-1e4)
        heads, weights = attn.head_outputs(x)
        out, _ = attn(x)
    assert heads.shape == (3, 2, 5, 4) and weights.shape == (3, 2, 5, 5)
    assert heads.abs().max() == 0
    assert torch.allclose(out, attn.out.bias.expand_as(out))  # nothing written but the projection's bias


def test_a_gate_at_a_huge_positive_bias_is_plain_attention():
    gated, plain = attention(gated=True), attention(gated=False)
    x = torch.randn(3, 5, 8, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        gated.gate.bias.fill_(1e4)
        assert torch.allclose(gated(x)[0], plain(x)[0])  # same seed: the same q, k, v and output weights


# -- the task -----------------------------------------------------------------------------------------------------
def test_labels_on_hand_made_sequences():
    tokens = torch.tensor([[BOS, query(1), digit(2), digit(0), digit(3), query(3), digit(3), digit(1)],
                           [BOS, digit(1), digit(1), query(0), digit(0), digit(2), digit(2), digit(3)]])
    labels = toy.task_labels(tokens, TINY)
    assert labels.tolist() == [[toy.IGNORE, 3, 2, 0, 3, 0, 3, 1],  # a query: next digit + 1 mod 4 (2 -> 3, 3 -> 0)
                               [toy.IGNORE, 1, 1, 1, 0, 2, 2, 3]]
    assert TINY.is_query(tokens).sum() == 3
    no_bos = toy.ToyTask(n_digits=4, length=4, n_queries=1, bos=False)
    assert toy.task_labels(torch.tensor([[digit(2), query(2), digit(1), digit(0)]]), no_bos).tolist() == [[2, 2, 1, 0]]


@pytest.mark.parametrize("bad", [
    [[query(0), digit(1), digit(2), digit(0)]],  # no BOS first
    [[BOS, digit(1), BOS, digit(0)]],  # BOS inside
    [[BOS, digit(1), digit(2), query(1)]],  # a query last: nothing follows
    [[BOS, query(1), query(2), digit(0)]],  # a query followed by a query
    [[BOS, digit(1), 1, digit(0)]],  # the unused id
    [[BOS, digit(1), 2 + 8, digit(0)]],  # not in the vocabulary
])
def test_bad_sequences_are_refused(bad):
    with pytest.raises(ValueError, match="tokens"):
        toy.task_labels(torch.tensor(bad), toy.ToyTask(n_digits=4, length=4, n_queries=1))


def test_batches_follow_the_layout_and_repeat_with_the_generator():
    task = toy.ToyTask(n_digits=5, length=10, n_queries=2)
    tokens, labels = toy.make_batch(task, 64, torch.Generator().manual_seed(3))
    again, _ = toy.make_batch(task, 64, torch.Generator().manual_seed(3))
    assert tokens.shape == labels.shape == (64, 10) and torch.equal(tokens, again)
    assert (tokens[:, 0] == BOS).all() and (labels[:, 0] == toy.IGNORE).all()
    rows, cols = task.is_query(tokens).nonzero(as_tuple=True)
    assert (torch.bincount(rows, minlength=64) == 2).all() and (cols % 2 == 1).all() and (cols < 9).all()
    assert torch.equal(labels[rows, cols], (tokens[rows, cols + 1] - 2 + 1) % 5)
    plain = ~task.is_query(tokens)
    plain[:, 0] = False
    assert torch.equal(labels[plain], tokens[plain] - 2)
    no_bos, _ = toy.make_batch(toy.ToyTask(n_digits=5, length=10, bos=False), 64, torch.Generator().manual_seed(3))
    assert (no_bos != BOS).all()
    assert labels.max() < 5 and tokens.max() < task.vocab_size


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="n_queries"):
        toy.ToyTask(length=8, n_queries=4)
    with pytest.raises(ValueError, match="n_digits"):
        toy.ToyTask(n_digits=1)
    with pytest.raises(ValueError, match="variants"):
        toy.train_variants(["softmax", "relu"], seeds=[0], steps=1, task=TINY)
    with pytest.raises(ValueError, match="seeds"):
        toy.train_variants(["softmax"], seeds=[0, 0], steps=1, task=TINY)
    with pytest.raises(ValueError, match="steps"):
        toy.train_variants(["softmax"], seeds=[0], steps=0, task=TINY)
    with pytest.raises(ValueError, match="width"):
        toy.build_model(TINY, "softmax", 0, width=10, heads=4)
    with pytest.raises(ValueError, match="tokens"):
        toy.build_model(TINY, "softmax", 0).run(torch.zeros(2, 5, dtype=torch.long))


# -- training and measuring ---------------------------------------------------------------------------------------
SHORT = dict(steps=3, task=TINY, width=8, heads=2, batch_size=8, n_eval=16, cache_dir=None, progress=False)


def test_training_is_reproducible_with_the_seed():
    first = toy.train_variants(toy.VARIANTS, seeds=[0, 1], layers=2, **SHORT)
    second = toy.train_variants(toy.VARIANTS, seeds=[0, 1], layers=2, **SHORT)
    assert first.shape[0] == 10 and list(first["variant"]) == [v for v in toy.VARIANTS for _ in (0, 1)]
    assert {"accuracy", "query_accuracy", "sink_mass", "sink_rate", "empty_mass", "activation_ratio",
            "ratio_layer1", "ratio_layer2", "ffn_max", "ffn_kurtosis", "gate", "gate_query"} <= set(first.columns)
    pd.testing.assert_frame_equal(first.drop(columns="seconds"), second.drop(columns="seconds"))
    by_seed = first.set_index(["variant", "seed"])["loss"]
    assert by_seed["softmax", 0] != by_seed["softmax", 1]
    assert first["gate"].isna().tolist() == [v != "gated" for v in first["variant"]]
    assert first["gate_query"].isna().tolist() == [v != "gated" for v in first["variant"]]
    empty = first.set_index("variant")["empty_mass"]
    assert empty["softmax"].abs().max() < 1e-6 and (empty["softmax1"] > 0).all()


def test_runs_come_back_from_the_cache_only_for_the_same_settings(tmp_path, monkeypatch):
    first = toy.train_variants(["softmax", "gated"], seeds=[0], layers=1, **{**SHORT, "cache_dir": tmp_path})
    assert len(list(tmp_path.glob("toy-sinks-*.npz"))) == 1
    trained = []
    monkeypatch.setattr(toy, "train", lambda *args: trained.append(args) or 0.0)
    again = toy.train_variants(["softmax", "gated"], seeds=[0], layers=1, **{**SHORT, "cache_dir": tmp_path})
    assert trained == []  # nothing retrained
    pd.testing.assert_frame_equal(first, again)  # seconds too: the time the runs took when they ran
    assert again["variant"].tolist() == ["softmax", "gated"] and again["seed"].dtype == first["seed"].dtype
    toy.train_variants(["softmax", "gated"], seeds=[1], layers=1, **{**SHORT, "cache_dir": tmp_path})
    toy.train_variants(["softmax", "gated"], seeds=[0], layers=1, **{**SHORT, "cache_dir": tmp_path, "lr": 1e-3})
    toy.train_variants(["softmax", "gated"], seeds=[0], layers=1,
                       **{**SHORT, "cache_dir": tmp_path, "task": toy.ToyTask(n_digits=4, length=8, bos=False)})
    assert len(trained) == 6 and len(list(tmp_path.glob("toy-sinks-*.npz"))) == 4  # each setting its own entry


def test_the_sink_metric_is_sinks_sink_rate_on_softmax_maps():
    model = toy.build_model(TINY, "softmax", seed=4, width=8, heads=2, layers=2)
    tokens, labels = toy.make_batch(TINY, 6, torch.Generator().manual_seed(5))
    metrics = toy.measure(model, tokens, labels, eps=0.15)
    with torch.no_grad():
        weights = model.run(tokens).weights.numpy()  # [L, B, H, n, n]
    per_input = [sinks.sink_rate(weights[:, b], eps=0.15)[0] for b in range(6)]
    assert metrics["sink_rate"] == pytest.approx(np.mean(per_input))
    assert metrics["sink_mass"] == pytest.approx(sinks.sink_scores(weights.mean(1))[..., 0].mean())
    assert metrics["chance"] == 1 / 4


def test_the_large_value_measures_read_before_the_layernorm():
    """A feed-forward output planted huge in one dimension (its last bias) shows in ffn_max and in the ratio
    before the LayerNorm; after the LayerNorm every value stays under sqrt(width - 1) |weight| + |bias|."""
    model = toy.build_model(TINY, "softmax", seed=4, width=8, heads=2, layers=1)
    tokens, labels = toy.make_batch(TINY, 6, torch.Generator().manual_seed(5))
    with torch.no_grad():
        model.layers[0].mlp[2].bias[3] = 1000.0
        run = model.run(tokens)
    metrics = toy.measure(model, tokens, labels)
    assert metrics["ffn_max"] == pytest.approx(float(run.ffn.abs().max())) and metrics["ffn_max"] > 900
    summed = run.summed.abs().flatten()
    assert metrics["activation_ratio"] == pytest.approx(float(summed.max() / summed.median()))
    assert metrics["activation_ratio"] > 100
    norm = model.layers[0].norm2
    cap = float((7 ** 0.5 * norm.weight.detach().abs() + norm.bias.detach().abs()).max())
    assert float(run.hidden.abs().max()) <= cap + 1e-5  # after the LayerNorm: capped, whatever came in
    values = run.ffn.double().flatten()
    centred = values - values.mean()
    assert metrics["ffn_kurtosis"] == pytest.approx(float(centred.pow(4).mean() / centred.pow(2).mean() ** 2))


def test_a_short_softmax_run_learns_the_lookup():
    frame = toy.train_variants(["softmax"], seeds=[0], steps=300, task=TINY, width=16, heads=2, n_eval=256,
                               cache_dir=None, progress=False)
    row = frame.iloc[0]
    assert row["accuracy"] > 0.9  # the digit rows
    assert row["query_accuracy"] > 0.6 > row["chance"]  # the lookup, chance 1/4
    summary = toy.variant_summary(frame)
    assert summary.loc["softmax", ("query_accuracy", "mean")] == row["query_accuracy"]
