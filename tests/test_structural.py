"""Structural probes (Hewitt & Manning 2019) and control tasks (Hewitt & Liang 2019) on trees and vectors whose
answers are known by construction: vectors in which a known linear map B gives every tree distance exactly, the
minimum spanning tree and UUAS on hand-made trees, Spearman on perfect and reversed predictions."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.sparse.csgraph import minimum_spanning_tree as scipy_mst

from bertlook_utils import parses, structural
from bertlook_utils.structural import Probe
from bertlook_utils.trees import is_tree
from builders import random_tree

# "The cat sat on the mat ." (spaCy's tree): sat is the root, "." hangs from sat
CAT_HEADS = (2, 3, 0, 3, 6, 4, 3)
CAT_PUNCT = (False,) * 6 + (True,)


def embedded(heads, extra: int = 3, rng: np.random.Generator | None = None, dim: int | None = None,
             noise: float = 5.0):
    """(H [n, dim + extra], B [dim, dim + extra]) with ‖B(h_i − h_j)‖² = tree distance and ‖B h_i‖² = depth.

    Word i's vector is the sum of one-hot edge vectors (edge = the word below it) on its path from the root, so the
    path between two words is a sum of distinct orthogonal unit vectors; `extra` dimensions of noise (standard
    deviation `noise`) that B ignores."""
    heads = np.asarray(heads)
    n = len(heads)
    dim = dim or n
    rng = rng or np.random.default_rng(0)
    paths = np.zeros((n, dim))
    for word in range(1, n + 1):
        node = word
        while heads[node - 1] != 0:
            paths[word - 1, node - 1] = 1
            node = heads[node - 1]
    vectors = np.concatenate([paths, noise * rng.standard_normal((n, extra))], axis=1)
    return vectors, np.concatenate([np.eye(dim), np.zeros((dim, extra))], axis=1)


# -- trees ---------------------------------------------------------------------------------------------
def test_tree_distances_and_depths_of_a_hand_made_tree():
    dist = structural.tree_distances(CAT_HEADS)
    assert dist[0, 5] == 4  # The -> cat -> sat -> on -> mat
    assert dist[4, 6] == 4  # the -> mat -> on -> sat -> .
    assert (dist == dist.T).all() and (np.diag(dist) == 0).all()
    np.testing.assert_array_equal(structural.tree_depths(CAT_HEADS), [2, 1, 0, 1, 3, 2, 1])


def test_a_known_B_gives_the_tree_exactly():
    vectors, B = embedded(CAT_HEADS)
    H, Bt = torch.tensor(vectors), torch.tensor(B)
    dist = structural.squared_distances(Bt, H)
    depth = structural.squared_norms(Bt, H)
    gold_dist, gold_depth = structural.tree_distances(CAT_HEADS), structural.tree_depths(CAT_HEADS)
    np.testing.assert_allclose(dist.numpy(), gold_dist, atol=1e-9)
    np.testing.assert_allclose(depth.numpy(), gold_depth, atol=1e-9)
    n = torch.tensor([len(CAT_HEADS)])
    assert structural.distance_loss(dist[None], torch.tensor(gold_dist)[None], n).item() == pytest.approx(0, abs=1e-9)
    assert structural.depth_loss(depth[None], torch.tensor(gold_depth)[None], n).item() == pytest.approx(0, abs=1e-9)
    dist, depth = dist.numpy(), depth.numpy()
    assert structural.uuas([dist], [CAT_HEADS], [CAT_PUNCT]) == 1
    assert structural.root_accuracy([depth], [CAT_HEADS], [CAT_PUNCT]) == 1
    assert structural.dspr([dist], [gold_dist]) == pytest.approx(1)
    assert structural.nspr([depth], [gold_depth]) == pytest.approx(1)


def test_the_noise_B_ignores_decides_the_tree_when_B_reads_it():
    vectors, B = embedded(CAT_HEADS, extra=4)
    B[0, -1] = 1.0  # B now also reads a noise dimension: the distances are no longer the tree's
    dist = structural.squared_distances(torch.tensor(B), torch.tensor(vectors)).numpy()
    assert not np.allclose(dist, structural.tree_distances(CAT_HEADS))


def test_squared_distances_over_a_batch_of_sentences_are_each_sentences_own():
    rng = np.random.default_rng(1)
    B = torch.tensor(rng.standard_normal((3, 5)))
    H = torch.tensor(rng.standard_normal((2, 4, 5)))
    both = structural.squared_distances(B, H)
    for s in range(2):
        diff = H[s][:, None] - H[s][None]  # [4, 4, 5]
        np.testing.assert_allclose(both[s].numpy(), ((diff @ B.T) ** 2).sum(-1).numpy(), atol=1e-9)


# -- the losses ------------------------------------------------------------------------------------------
def test_losses_are_the_papers_l1_normalised_by_length_and_ignore_padding():
    gold = torch.zeros(2, 3, 3)
    gold[0, :2, :2] = torch.tensor([[0.0, 1.0], [1.0, 0.0]])  # sentence 1: 2 words, padded to 3
    gold[1] = torch.tensor([[0.0, 1.0, 2.0], [1.0, 0.0, 1.0], [2.0, 1.0, 0.0]])
    pred = gold.clone()
    pred[0, 0, 1] = pred[0, 1, 0] = 3.0  # |1 - 3| twice over 2² -> 1.0
    pred[0, 2, :] = pred[0, :, 2] = 99.0  # padding: ignored
    pred[1, 0, 2] = pred[1, 2, 0] = 0.5  # |2 - 0.5| twice over 3² -> 1/3
    lengths = torch.tensor([2, 3])
    assert structural.distance_loss(pred, gold, lengths).item() == pytest.approx((1.0 + 1 / 3) / 2)
    depth_gold = torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 1.0]])
    depth_pred = torch.tensor([[2.0, 1.0, 7.0], [1.0, 0.0, 4.0]])  # |0 - 2| / 2 and |1 - 4| / 3; the 7 is padding
    assert structural.depth_loss(depth_pred, depth_gold, lengths).item() == pytest.approx((1.0 + 1.0) / 2)


# -- the minimum spanning tree and UUAS ---------------------------------------------------------------------
def test_min_spanning_tree_weighs_as_much_as_scipys():
    rng = np.random.default_rng(2)
    for n in (2, 3, 7, 20):
        for _ in range(10):
            points = rng.standard_normal((n, 3))
            dist = ((points[:, None] - points[None]) ** 2).sum(-1)
            parents = structural.min_spanning_tree(dist)
            assert parents[0] == -1
            ours = dist[np.arange(1, n), parents[1:]].sum()
            assert ours == pytest.approx(scipy_mst(np.triu(dist, 1)).sum())


def test_min_spanning_tree_of_a_tree_metric_is_the_tree_and_works_in_batches():
    rng = np.random.default_rng(3)
    trees = [random_tree(rng, 9) for _ in range(4)]
    dist = np.stack([structural.tree_distances(h) for h in trees]).astype(float)
    parents = structural.min_spanning_tree(dist)  # [4, 9]
    for heads, found in zip(trees, parents):
        gold = {frozenset((i, h - 1)) for i, h in enumerate(heads) if h}
        assert {frozenset((i, int(p))) for i, p in enumerate(found) if p >= 0} == gold


def test_uuas_leaves_punctuation_out_of_both_trees():
    # w1 , w3: w1 is the root, "," and w3 hang from w1; the chain links w1 - , - w3
    heads, punct = (0, 1, 1), (False, True, False)
    chain = structural.tree_distances(structural.linear_heads(3)).astype(float)
    assert structural.uuas([chain], [heads], [punct]) == 1  # w1 - w3 is the one edge without punctuation
    assert structural.uuas([chain], [heads], [(False, False, False)]) == 0.5  # with ",": w1-, right, ,-w3 wrong
    # the cat sentence: the MST of the silver tree's own distances finds its 5 edges between words
    dist = structural.tree_distances(CAT_HEADS).astype(float)
    hits, total = structural.edge_hits(dist, CAT_HEADS, CAT_PUNCT)
    assert (hits, total) == (5, 5)


def test_uuas_counts_edges_over_all_sentences():
    chain5 = structural.tree_distances(structural.linear_heads(5)).astype(float)
    star = (3, 3, 0, 3, 3)  # word 3 heads every other word
    no_punct = (False,) * 5
    assert structural.uuas([chain5], [star], [no_punct]) == pytest.approx(2 / 4)  # 2-3 and 3-4 of 4 edges
    assert structural.uuas([chain5], [structural.linear_heads(5)], [no_punct]) == 1
    both = structural.uuas([chain5, chain5], [star, structural.linear_heads(5)], [no_punct, no_punct])
    assert both == pytest.approx((2 + 4) / (4 + 4))


def test_heads_uuas_scores_a_predicted_tree_by_its_edges_between_words():
    star, chain, no_punct = (3, 3, 0, 3, 3), structural.linear_heads(5), (False,) * 5
    assert structural.heads_uuas([star], [star], [no_punct]) == 1
    assert structural.heads_uuas([chain], [star], [no_punct]) == pytest.approx(2 / 4)  # 2-3 and 3-4
    assert structural.heads_uuas([(2, 3, 4, 5, 0)], [star], [no_punct]) == pytest.approx(2 / 4)  # chain, other way
    # w1 , w3 with w3 under w1: the chain runs through "," and finds no edge between words, the MST of |i - j| does
    assert structural.heads_uuas([structural.linear_heads(3)], [(0, 1, 1)], [(False, True, False)]) == 0
    with pytest.raises(ValueError, match="sentence 0: 4 predicted heads for 5 words"):
        structural.heads_uuas([(0, 1, 2, 3)], [star], [(False,) * 4])


def test_the_linear_baseline_is_the_left_to_right_chain():
    np.testing.assert_array_equal(structural.linear_heads(4), [0, 1, 2, 3])
    n = 6
    np.testing.assert_array_equal(structural.tree_distances(structural.linear_heads(n)),
                                  np.abs(np.arange(n)[:, None] - np.arange(n)[None]))


# -- Spearman and root accuracy ---------------------------------------------------------------------------
def test_dspr_and_nspr_are_one_for_perfect_and_minus_one_for_reversed_predictions():
    rng = np.random.default_rng(4)
    heads = [random_tree(rng, n) for n in (5, 8, 12)]
    dists = [structural.tree_distances(h).astype(float) for h in heads]
    depths = [structural.tree_depths(h).astype(float) for h in heads]
    assert structural.dspr([2 * d + 1 for d in dists], dists) == pytest.approx(1)  # monotone: ranks unchanged
    assert structural.nspr(depths, depths) == pytest.approx(1)
    assert structural.nspr([-d for d in depths], depths) == pytest.approx(-1)


def test_spearman_averages_per_length_then_over_lengths_5_to_50():
    rng = np.random.default_rng(5)
    five, six, other_six = (structural.tree_depths(random_tree(rng, n)).astype(float) for n in (5, 6, 6))
    four = structural.tree_depths(random_tree(rng, 4)).astype(float)
    # length 5: +1; length 6: +1 and -1 -> 0; the 4-word sentence is left out: (1 + 0) / 2
    assert structural.nspr([five, six, -other_six, -four], [five, six, other_six, four]) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="5 to 50 words"):
        structural.nspr([four], [four])


def test_root_accuracy_takes_the_least_deep_word_that_is_not_punctuation():
    depth = np.array([2.0, 1.0, 0.5, 1.0, 3.0, 2.0, 0.1])  # "." is least deep but is punctuation
    assert structural.root_accuracy([depth], [CAT_HEADS], [CAT_PUNCT]) == 1
    assert structural.root_accuracy([depth], [CAT_HEADS], [(False,) * 7]) == 0
    wrong = depth.copy()
    wrong[0] = 0.0
    assert structural.root_accuracy([depth, wrong], [CAT_HEADS, CAT_HEADS], [CAT_PUNCT, CAT_PUNCT]) == 0.5


# -- the control task --------------------------------------------------------------------------------------
def behaviour(heads, i: int) -> str | None:
    """The control behaviour that gave word i (0-based) its head; None for the first and the last word (the rule
    decides theirs) and the word before the last (its next word is the last)."""
    n = len(heads)
    if not 1 <= i <= n - 3:
        return None
    return {1: "first", n: "last", i + 2: "next"}[int(heads[i])]


def test_control_heads_are_trees_consistent_per_word_type_and_fixed_by_the_seed():
    rng = np.random.default_rng(6)
    vocabulary = [f"w{k}" for k in range(30)]
    sentences = [[vocabulary[k] for k in rng.integers(0, 30, rng.integers(2, 15))] for _ in range(200)]
    seen: dict[str, set[str]] = {}
    for words in sentences:
        heads = structural.control_heads(words, seed=0)
        assert is_tree(heads) and heads[0] == 0  # the first word is the root
        for i, word in enumerate(words[1:], start=1):
            found = behaviour(heads, i)
            if found:
                seen.setdefault(word, set()).add(found)
    assert all(len(b) == 1 for b in seen.values())  # one behaviour per type
    assert {b for bs in seen.values() for b in bs} == set(structural.BEHAVIOURS)
    words = sentences[0]
    np.testing.assert_array_equal(structural.control_heads(words, 0), structural.control_heads(list(words), 0))
    draws = {s: [behaviour(structural.control_heads(["a", w, "b", "c"], s), 1) for w in vocabulary] for s in (0, 1)}
    assert draws[0] != draws[1]


# -- bad input ---------------------------------------------------------------------------------------------
def test_bad_input_is_refused_with_the_argument_named():
    with pytest.raises(ValueError, match="words"):
        structural.control_heads([])
    with pytest.raises(ValueError, match="heads"):
        structural.tree_distances([2, 1])  # a cycle
    with pytest.raises(ValueError, match="B must be"):
        structural.squared_distances(torch.ones(2, 3), torch.ones(4, 5))
    with pytest.raises(ValueError, match="pred_dists"):
        structural.uuas([np.zeros((3, 3))] * 2, [CAT_HEADS], [CAT_PUNCT])
    with pytest.raises(ValueError, match="pred_dist is"):
        structural.uuas([np.zeros((3, 3))], [CAT_HEADS], [CAT_PUNCT])
    with pytest.raises(ValueError, match="lengths"):
        structural.distance_loss(torch.zeros(2, 3, 3), torch.zeros(2, 3, 3), torch.tensor([3]))
    with pytest.raises(ValueError, match="dist"):
        structural.min_spanning_tree(np.array([[0.0, 1.0], [2.0, 0.0]]))  # not symmetric
    vectors = np.zeros((1, 4, 3), dtype=np.float32)
    targets = {("distance", "silver"): [np.zeros((4, 4))]}
    with pytest.raises(ValueError, match="rank"):
        structural.train_probes(vectors, [4], [Probe("distance", "silver", 0)], targets)
    with pytest.raises(ValueError, match="lengths"):
        structural.train_probes(vectors, [3], [Probe("distance", "silver", 1)], targets)
    with pytest.raises(ValueError, match="targets"):
        structural.train_probes(vectors, [4], [Probe("depth", "silver", 1)], targets)


def test_run_refuses_empty_halves_and_bad_ranks(tiny):
    sentence = parses.Sentence(("A", "cat", "sat", "down", "."), (2, 3, 0, 3, 3),
                               ("det", "nsubj", "ROOT", "prt", "punct"), ("DET", "NOUN", "VERB", "ADP", "PUNCT"),
                               ("DT", "NN", "VBD", "RP", "."), "A", "A#0")
    with pytest.raises(ValueError, match="selection"):
        structural.run(tiny, [], [sentence], cache_dir=None, progress=False)
    with pytest.raises(ValueError, match="heldout"):
        structural.run(tiny, [sentence], [], cache_dir=None, progress=False)
    with pytest.raises(ValueError, match="ranks"):
        structural.run(tiny, [sentence], [sentence], ranks=(0, 2), cache_dir=None, progress=False)
    with pytest.raises(ValueError, match="epochs"):
        structural.run(tiny, [sentence], [sentence], epochs=0, cache_dir=None, progress=False)


# -- training ----------------------------------------------------------------------------------------------
def planted(rng: np.random.Generator, sizes: Sequence[int], dim: int = 10, extra: int = 6) -> list[tuple]:
    """Sets of `sizes` sentences of 5-10 words whose vectors embed their random trees in `dim` dimensions, plus noise,
    all rotated by one orthogonal matrix: per set (vectors [1, N, D], lengths, heads)."""
    rotation = np.linalg.qr(rng.standard_normal((dim + extra, dim + extra)))[0]
    sets = []
    for size in sizes:
        heads = [random_tree(rng, int(n)) for n in rng.integers(5, dim + 1, size)]
        vectors = np.concatenate([embedded(h, extra, rng, dim, noise=1.0)[0] for h in heads]) @ rotation
        sets.append((vectors[None].astype(np.float32), [len(h) for h in heads], heads))
    return sets


def test_training_finds_a_planted_tree_structure_and_scores_it_on_new_sentences():
    rng = np.random.default_rng(7)
    (train, train_lengths, train_heads), (test, test_lengths, test_heads) = planted(rng, (150, 30))
    probes = [Probe("distance", "silver", 10), Probe("depth", "silver", 10)]
    targets = {("distance", "silver"): [structural.tree_distances(h) for h in train_heads],
               ("depth", "silver"): [structural.tree_depths(h) for h in train_heads]}
    B, losses = structural.train_probes(train, train_lengths, probes, targets, epochs=30, batch_size=10, lr=0.01,
                                        progress=False)
    assert B.shape == (1, 20, 16) and losses.shape == (30, 1, 2)
    assert (losses[-1] < 0.1 * losses[0]).all()
    found = list(structural.predict(B, test, test_lengths, probes))  # per sentence, {probe: [layers, ...]}
    no_punct = [(False,) * len(h) for h in test_heads]
    assert structural.uuas([f[probes[0]][0] for f in found], test_heads, no_punct) > 0.95
    assert structural.root_accuracy([f[probes[1]][0] for f in found], test_heads, no_punct) > 0.95


def test_probes_trained_together_are_the_probes_trained_alone():
    """Adam's state is per weight and the loss a sum over probes, so sharing a run changes no probe."""
    rng = np.random.default_rng(8)
    ((vectors, lengths, heads),) = planted(rng, (40,))
    targets = {("distance", "silver"): [structural.tree_distances(h) for h in heads],
               ("distance", "control"): [structural.tree_distances(random_tree(rng, n)) for n in lengths]}
    first, second = Probe("distance", "control", 4), Probe("distance", "silver", 3)
    together, _ = structural.train_probes(vectors, lengths, [first, second], targets, epochs=3, progress=False)
    alone, _ = structural.train_probes(vectors, lengths, [second], targets, epochs=3, progress=False)
    np.testing.assert_allclose(together[:, 4:].numpy(), alone.numpy(), rtol=1e-4, atol=1e-6)
    again, _ = structural.train_probes(vectors, lengths, [second], targets, epochs=3, progress=False)
    assert torch.equal(again, alone)  # seeded and deterministic


# -- on a model --------------------------------------------------------------------------------------------
def test_layer_vectors_are_the_mean_of_each_words_pieces(tiny):
    words = ["Tokenization", "is", "fun"]  # the first word is split into several pieces
    vectors = structural.layer_vectors(tiny, [parses.Sentence(tuple(words), (0, 1, 1), ("ROOT", "cop", "acomp"),
                                                              ("NOUN", "AUX", "ADJ"), ("NN", "VBZ", "JJ"), "A", "A#0")],
                                       progress=False)
    prepared = tiny.prepare(words)
    inputs = tiny.pad([prepared])
    with torch.inference_mode():
        states = torch.stack(tiny.model(**inputs, output_hidden_states=True).hidden_states)[:, 0].numpy()
    assert vectors.shape == (tiny.n_layers + 1, 3, tiny.model.config.hidden_size)
    pieces = [t for t, w in enumerate(prepared.word_ids) if w == 1]  # word 0 is [CLS]
    assert len(pieces) > 1
    np.testing.assert_allclose(vectors[:, 0], states[:, pieces].mean(1), atol=1e-5)
    np.testing.assert_allclose(vectors[:, 2], states[:, prepared.word_ids.index(3)], atol=1e-5)


@pytest.fixture(scope="module")
def silver(tmp_path_factory):
    """12 real Wikipedia sentences of 5-20 words parsed by spaCy (silver), split by article."""
    from bertlook_utils import corpora

    articles = corpora.wiki_articles()[:4]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(corpora, "wiki_articles", lambda: articles)
        sentences = parses.parsed_sentences(n=12, seed=0, min_words=5, max_words=20,
                                            cache_dir=tmp_path_factory.mktemp("parses"), progress=False)
    return parses.split_halves(sentences)


def test_run_on_silver_sentences_end_to_end_and_cached(tiny, silver, tmp_path, monkeypatch):
    selection, heldout = silver
    results = structural.run(tiny, selection, heldout, ranks=(1, 2), rank=2, epochs=2, batch_size=4,
                             cache_dir=tmp_path, progress=False)
    scores = results.scores
    layers = tiny.n_layers
    pretrained = scores[scores["model"] == "pretrained"]
    assert set(pretrained["layer"]) == set(range(layers + 1)) and set(pretrained["rank"]) == {1, 2}
    assert set(scores.loc[scores["model"] == "random-init", "layer"]) == set(range(1, layers + 1))
    assert len(scores) == (layers + 1) * 2 * 2 + layers
    for column in ("uuas", "uuas_low", "uuas_high", "root_acc"):
        assert scores[column].dropna().between(0, 100).all()
    assert scores["dspr"].between(-1, 1).all() and scores["uuas"].notna().all()
    assert (scores["uuas_low"] <= scores["uuas"]).all() and (scores["uuas"] <= scores["uuas_high"]).all()
    depth_rows = scores["root_acc"].notna()
    assert (scores.loc[depth_rows, "task"] == "silver").all() and (scores.loc[depth_rows, "rank"] == 2).all()
    # the linear baseline, straight from the functions
    gold = [np.asarray(s.heads) for s in heldout]
    chains = [structural.tree_distances(structural.linear_heads(len(s))).astype(float) for s in heldout]
    linear = structural.uuas(chains, gold, [s.is_punct for s in heldout])
    assert results.linear["uuas"].item() == pytest.approx(100 * linear)
    # selectivity: the task's UUAS less the control's, per layer and rank
    sel = results.selectivity.set_index(["layer", "rank"])
    task = pretrained[pretrained["task"] == "silver"].set_index(["layer", "rank"])["uuas"]
    control = pretrained[pretrained["task"] == "control"].set_index(["layer", "rank"])["uuas"]
    pd.testing.assert_series_equal(sel["selectivity"], (task - control).rename("selectivity"), check_like=True)
    # the predicted trees: one spanning tree over each held-out sentence's non-punctuation words per layer
    edges = results.edges
    n_edges = sum(max(len(s) - sum(s.is_punct) - 1, 0) for s in heldout)
    assert len(edges) == (layers + 1) * n_edges and (edges["a"] < edges["b"]).all()
    for layer in range(layers + 1):  # they are the rank-`rank` probe's trees: they score its UUAS
        found = total = 0
        for k, sentence in enumerate(heldout):
            tree = edges[(edges["layer"] == layer) & (edges["sentence"] == k)]
            silver = {frozenset((w + 1, int(h))) for w, h in enumerate(sentence.heads)
                      if h and not sentence.is_punct[w] and not sentence.is_punct[int(h) - 1]}
            found += len(silver & {frozenset((int(a), int(b))) for a, b in zip(tree["a"], tree["b"])})
            total += len(silver)
        row = task.loc[(layer, 2)]
        assert 100 * found / total == pytest.approx(row)
    assert set(results.curves["epoch"]) == {1, 2} and results.n_test == len(heldout)
    monkeypatch.setattr(structural, "train_probes", lambda *a, **k: pytest.fail("the second call must read the cache"))
    again = structural.run(tiny, selection, heldout, ranks=(1, 2), rank=2, epochs=2, batch_size=4,
                           cache_dir=tmp_path, progress=False)
    pd.testing.assert_frame_equal(again.scores, results.scores)
    pd.testing.assert_frame_equal(again.edges, results.edges)


def test_attention_that_joins_each_word_to_its_head_reads_as_the_tree():
    n = len(CAT_HEADS)
    attn = np.full((n + 2, n + 2), 0.01)  # [CLS] first, [SEP] last
    for word, head in enumerate(CAT_HEADS, start=1):
        if head:
            attn[word, head] = 0.5  # from the word to its head only: A + Aᵀ joins them both ways
    attn[:, -1] = 0.9  # a sink on [SEP] is no word and changes nothing
    dist = structural.attention_distances(attn)
    assert dist.shape == (n, n) and np.allclose(dist, dist.T)
    found, total = structural.edge_hits(dist, CAT_HEADS, CAT_PUNCT)
    assert (found, total) == (5, 5)
    maps = np.stack([attn, attn.T, np.full_like(attn, 0.1)])  # [3, m, m]: batched like a layer's heads
    assert structural.attention_distances(maps).shape == (3, n, n)
    assert list(structural.edge_hits(structural.attention_distances(maps), CAT_HEADS, CAT_PUNCT)[0][:2]) == [5, 5]


def test_probe_trees_are_the_predicted_heads_sentence_by_sentence():
    table = pd.DataFrame({"sentence": [1, 1, 0, 0, 0], "word": [1, 2, 1, 2, 3], "m (MST)": [0, 1, 2, 0, 2]})
    trees = structural.probe_trees(table, "m (MST)")
    assert [t.tolist() for t in trees] == [[2, 0, 2], [0, 1]]
    with pytest.raises(ValueError, match="column: no 'x'"):
        structural.probe_trees(table, "x")


def test_attention_trees_score_every_head_as_edge_hits_do_and_are_cached(tiny, silver, tmp_path, monkeypatch):
    selection, heldout = silver
    table = structural.attention_trees(tiny, selection, heldout, cache_dir=tmp_path, progress=False)
    assert len(table) == tiny.n_layers * tiny.n_heads
    assert table[["selection", "heldout", "heldout_low", "heldout_high"]].stack().between(0, 100).all()
    assert (table["heldout_low"] <= table["heldout"]).all() and (table["heldout"] <= table["heldout_high"]).all()
    # one head by hand: layer 2, head 1
    from bertlook_utils.syntax import parsed_attention

    hits = total = 0
    for sentence, example in zip(heldout, parsed_attention(tiny, heldout, progress=False)):
        found, edges = structural.edge_hits(structural.attention_distances(example.word_attn[1, 0]), sentence.heads,
                                            sentence.is_punct)
        hits, total = hits + int(found), total + edges
    row = table[(table["layer"] == 2) & (table["head"] == 1)].iloc[0]
    assert row["heldout"] == pytest.approx(100 * hits / total)
    monkeypatch.setattr(structural, "_head_hits", lambda *a, **k: pytest.fail("the second call must read the cache"))
    pd.testing.assert_frame_equal(structural.attention_trees(tiny, selection, heldout, cache_dir=tmp_path,
                                                             progress=False), table)
