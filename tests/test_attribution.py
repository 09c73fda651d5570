"""attribution: rollout and flow against answers known by construction (identity, one layer, layer order, cut
capacities, an exact max-flow), bad input, and the five word scores of a classifier on a tiny model."""
from __future__ import annotations

import networkx as nx
import numpy as np
import pandas as pd
import pytest
import torch
from builders import identity_map, prev_map, random_row_stochastic, uniform_map

from bertlook_utils import attribution
from bertlook_utils.finetune import FineTuned


def _stack(layers):
    """[L, n, n] maps, one per layer -> [L, 2, n, n] (two identical heads)."""
    return np.stack([np.stack([m, m]) for m in layers]).astype(np.float64)


def test_identity_attention_gives_identity_rollout():
    out = attribution.rollout(_stack([identity_map(5)] * 3))
    np.testing.assert_allclose(out, np.broadcast_to(np.eye(5), (3, 5, 5)))


def test_one_layer_is_half_the_mean_map_plus_half_the_identity():
    rng = np.random.default_rng(0)
    attn = random_row_stochastic(rng, (1, 3, 6, 6))
    expected = 0.5 * attn[0].mean(0) + 0.5 * np.eye(6)
    np.testing.assert_allclose(attribution.rollout(attn)[0], expected)
    np.testing.assert_allclose(attribution.flow(attn), expected, atol=1e-6)  # one layer: one edge per path


def test_layer_order_matters():
    first, second = prev_map(4), uniform_map(4)
    a1, a2 = 0.5 * first + 0.5 * np.eye(4), 0.5 * second + 0.5 * np.eye(4)
    out = attribution.rollout(_stack([first, second]))
    np.testing.assert_allclose(out[1], a2 @ a1)
    assert not np.allclose(a2 @ a1, a1 @ a2)  # the reverse product (a published bug) would differ here


def test_flow_matches_an_exact_max_flow_and_never_exceeds_the_cuts():
    rng = np.random.default_rng(1)
    attn = random_row_stochastic(rng, (3, 2, 5, 5)).astype(np.float64)
    mixed = attribution.residual_attention(attn)
    graph = nx.DiGraph()
    for layer in range(3):
        for a in range(5):
            for b in range(5):
                graph.add_edge((layer + 1, a), (layer, b), capacity=mixed[layer][a, b])
    exact = np.array([[nx.maximum_flow_value(graph, (3, i), (0, j)) for j in range(5)] for i in range(5)])
    out = attribution.flow(attn)
    np.testing.assert_allclose(out, exact, atol=1e-6)
    assert (out <= 1 + 1e-6).all()  # the source's edges carry 1 in all
    assert (out <= mixed[0].sum(0)[None, :] + 1e-6).all()  # the edges into each input position
    words = np.array([[True, True, False, False, False], [False, False, True, False, False]])
    together = attribution.flow_to_words(attn, 0, words)
    np.testing.assert_allclose(together[1], out[0, 2], atol=1e-6)  # one piece: the same as flow
    assert together[0] <= 1 + 1e-6 and together[0] >= max(out[0, 0], out[0, 1]) - 1e-6


@pytest.mark.parametrize("bad, message", [(np.ones((2, 2, 3, 3)), "sum to 1"),
                                          (np.ones((2, 3, 3)) / 3, "layers, heads"),
                                          (-np.ones((1, 1, 2, 2)), "negative")])
def test_bad_maps_are_refused(bad, message):
    with pytest.raises(ValueError, match=message):
        attribution.rollout(bad)
    with pytest.raises(ValueError, match=message):
        attribution.flow(bad)


def test_flow_seconds_reports_each_length():
    frame = attribution.flow_seconds(2, 2, [3, 4])
    assert frame["tokens"].tolist() == [3, 4] and frame["problems"].tolist() == [9, 16]
    assert (frame["seconds"] > 0).all()


@pytest.fixture(scope="module")
def classifier(tiny):
    torch.manual_seed(0)
    head = torch.nn.Linear(tiny.model.config.hidden_size, 2)
    return FineTuned("toy", tiny, head, None, 32, pd.DataFrame())


@pytest.mark.parametrize("item", ["the cat sat on the mat", ("a dog ran home", "it rained")])
def test_word_scores_of_a_classifier(classifier, item):
    e = attribution.explain(classifier, item)
    a = item if isinstance(item, str) else item[0] + " " + item[1]
    assert e.words == a.split() and len(e.scores) == len(e.words)
    enc = classifier.encoder.encode(*((item, None) if isinstance(item, str) else item))
    words_only = ~(enc.is_cls | enc.is_sep)
    np.testing.assert_allclose(e.by_layer["attention"].sum(-1), enc.attn.mean(1)[:, 0, words_only].sum(-1), atol=1e-5)
    np.testing.assert_allclose(e.by_layer["rollout"][-1].sum(),
                               attribution.rollout(enc.attn)[-1, 0, words_only].sum(), atol=1e-5)
    assert (e.scores["flow"] <= 1 + 1e-6).all() and (e.scores["rollout"] >= 0).all()
    # leave-one-out of the first word, recomputed by hand
    encoder = classifier.encoder
    words = a.split()
    rest = words[1:] if isinstance(item, str) else (item[0].split()[1:], item[1].split())
    prepared = encoder.prepare(rest) if isinstance(item, str) else encoder.prepare(*rest)
    with torch.inference_mode():
        whole = (item, None) if isinstance(item, str) else item
        full = attribution._probabilities(classifier, encoder.pad([encoder.prepare(*whole)]))
        without = attribution._probabilities(classifier, encoder.pad([prepared]))
    expected = float(full[0, e.predicted] - without[0, e.predicted])
    assert e.scores["leave_one_out"].iloc[0] == pytest.approx(expected, abs=1e-5)
    table = attribution.correlations([e, e])
    assert set(table["method"]) == {"attention", "rollout", "flow", "grad_x_input"}


def test_a_one_word_input_is_refused(classifier):
    with pytest.raises(ValueError, match="fewer than two words"):
        attribution.explain(classifier, "cat")


def test_outflow_and_flow_from_a_sink_are_the_first_layer_edge_plus_the_outflow_above():
    """A sink keeps 0.9 of itself in layers 2-3: the minimum cut to any input position j is its first-layer edge
    to j plus what leaves it above layer 1 (every other position has capacity to spare)."""
    rng = np.random.default_rng(3)
    attn = random_row_stochastic(rng, (3, 2, 5, 5)).astype(np.float64)
    attn[1:, :, 0] = [0.8, 0.05, 0.05, 0.05, 0.05]  # [CLS] attends to itself in layers 2 and 3
    out = attribution.outflow(attn)
    np.testing.assert_allclose(out[1:], [0.1, 0.1])  # 1 - (0.5 + 0.5 * 0.8)
    np.testing.assert_allclose(out[0], 1 - (0.5 + 0.5 * attn[0, :, 0, 0].mean()))
    first = attribution.residual_attention(attn)[0]
    np.testing.assert_allclose(attribution.flow(attn)[0, 1:], first[0, 1:] + out[1:].sum(), atol=1e-6)
    np.testing.assert_allclose(attribution.outflow(attn, 2), 1 - attribution.residual_attention(attn)[:, 2, 2])


def released_explanation(reference, attention, rollout, flow, loo, scores) -> attribution.Explanation:
    """A hand-built Explanation: by_token from the given [L, n] (attention, rollout) and [n] (flow, gradient)
    relevances, by_layer from the same values on the words (every token a word)."""
    words = [f"w{k}" for k in range(len(loo))]
    frame = pd.DataFrame({"word": words, "leave_one_out": loo, **scores})
    by_token = {"attention": np.array(attention, float), "rollout": np.array(rollout, float),
                "flow": np.array(flow, float), "gradient": np.array(reference, float)}
    return attribution.Explanation(words, 1, 0.9, frame, {"attention": by_token["attention"],
                                                           "rollout": by_token["rollout"]}, by_token)


def test_released_reading_paired_differences_and_agreement_on_known_ranks():
    up, down = [1.0, 2.0, 3.0, 4.0], [4.0, 3.0, 2.0, 1.0]
    explained = [released_explanation(reference=np.array(up) * k, attention=[down, up], rollout=[up, down],
                                      flow=up, loo=np.array(up) * k,
                                      scores={"flow": up, "grad_x_input": up, "zeroed": down})
                 for k in (1, 2, 3)]
    theirs = attribution.released_correlations(explained).set_index(["method", "layer"])["spearman"]
    assert theirs[("attention", 2)] == pytest.approx(1) and theirs[("attention", 1)] == pytest.approx(-1)
    assert theirs[("rollout", 2)] == pytest.approx(-1) and theirs[("flow", 2)] == pytest.approx(1)
    frame = attribution.released_per_input(explained)
    assert attribution.paired_difference(frame, ("rollout", 2), ("attention", 2)) == pytest.approx((-2, -2, -2, 3))
    assert attribution.paired_difference(frame, ("flow", 2), ("attention", 2))[:3] == pytest.approx((0, 0, 0))
    kit = attribution.per_input(explained)  # the kit's test: the same maps read on the [CLS] row (here: the words)
    assert set(kit["method"]) == set(attribution.METHODS)
    assert attribution.paired_difference(kit, ("rollout", 2), ("attention", 2))[0] == pytest.approx(-2)
    assert attribution.agreement(explained, "grad_x_input", "flow")[0] == pytest.approx(1)
    assert attribution.agreement(explained, "grad_x_input", "zeroed")[0] == pytest.approx(-1)
    explained[0].by_token["flow"][:] = np.nan  # an input without flow drops out of the pairs
    assert attribution.paired_difference(attribution.released_per_input(explained), ("flow", 2),
                                         ("attention", 2))[3] == 2
    with pytest.raises(ValueError, match="fewer than two"):
        attribution.paired_difference(attribution.released_per_input(explained[:2]), ("flow", 2), ("attention", 2))


def test_gradient_times_input_matches_finite_differences(classifier):
    """grad_x_input[w] = ∇p · e_w, the slope of p along the word's own embeddings: (p(1 + h) − p(1 − h)) / 2h with
    the word's embeddings scaled. `zeroed` is the same scaling at 0."""
    item = "the cat sat on the mat"
    e = attribution.explain(classifier, item)
    encoder = classifier.encoder
    prepared = encoder.prepare(item, max_tokens=classifier.max_length)
    word_of = np.array(prepared.word_ids)
    special = np.array([t in (encoder.cls_token, encoder.sep_token) for t in prepared.tokens])
    masks = np.stack([(word_of == w) & ~special for w in sorted(set(word_of[~special]))]).astype(float)  # [words, n]
    h = 1e-2
    probs = attribution.scaled_probabilities(classifier, prepared, np.concatenate([1 + h * masks, 1 - h * masks]))
    slope = (probs[:len(masks), e.predicted] - probs[len(masks):, e.predicted]) / (2 * h)
    np.testing.assert_allclose(e.scores["grad_x_input"], slope, rtol=2e-2, atol=2e-5)
    assert np.abs(slope).max() > 1e-4  # not trivially zero
    base = attribution.scaled_probabilities(classifier, prepared, np.ones((1, len(prepared.tokens))))[0, e.predicted]
    assert base == pytest.approx(e.probability, abs=1e-6)
    scaled = attribution.scaled_probabilities(classifier, prepared, 1 - masks)
    np.testing.assert_allclose(e.scores["zeroed"], base - scaled[:, e.predicted], atol=1e-6)
    with pytest.raises(ValueError, match="scales must be"):
        attribution.scaled_probabilities(classifier, prepared, np.ones((1, 3)))


def test_released_reading_of_a_classifier_takes_the_maximum_over_rows(classifier):
    item = "the cat sat on the mat"
    e = attribution.explain(classifier, item)
    enc = classifier.encoder.encode(item)
    np.testing.assert_allclose(e.by_token["attention"], enc.attn.mean(1).max(1), atol=1e-5)
    np.testing.assert_allclose(e.by_token["rollout"], attribution.rollout(enc.attn).max(1), atol=1e-5)
    flowed = attribution.flow(enc.attn)
    np.testing.assert_allclose(e.by_token["flow"], (flowed / flowed.sum(1, keepdims=True)).max(0), atol=1e-5)
    assert e.by_token["gradient"].shape == (len(enc.tokens),) and (e.by_token["gradient"] >= 0).all()
    assert np.isnan(attribution.explain(classifier, item, max_flow_tokens=3).by_token["flow"]).all()
