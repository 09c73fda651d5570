"""Attention probes and the tree decoder on synthetic sentences whose answers are known by construction."""
from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from bertlook_utils import compare, paper, probe_baselines, probes, syntax
from bertlook_utils.models import random_init_encoder
from bertlook_utils.trees import is_tree, mst_heads, tree_score
from builders import random_tree

L, H = 2, 3
PLANTED = (1, 2)  # layer 2, head 3 (0-based) points from each word to its head


def planted_sentence(rng: np.random.Generator, n: int, strength: float = 0.6) -> SimpleNamespace:
    """Random row-stochastic word maps [L, H, n+2, n+2], except the planted head: each word puts `strength`
    of its attention on its gold head ([CLS], word 0, for the word under ROOT) and spreads the rest."""
    heads = random_tree(rng, n)
    m = n + 2
    raw = rng.random((L, H, m, m)) + 1e-3
    attn = raw / raw.sum(-1, keepdims=True)
    planted = np.full((m, m), (1 - strength) / (m - 1))
    planted[np.arange(1, n + 1), heads] = strength
    planted /= planted.sum(-1, keepdims=True)
    attn[PLANTED] = planted
    punct = rng.random(n) < 0.15
    return SimpleNamespace(word_attn=attn.astype(np.float32), heads=heads, is_punct=punct.tolist(), words=["w"] * n)


def typed_sentence(rng: np.random.Generator, n: int) -> tuple[SimpleNamespace, np.ndarray]:
    """A sentence whose words are of two types: a type-0 word's head is found by the planted head, a type-1
    word's by head 1-1 (layer 0, head 0), and each of the two heads points type-other words at a wrong word.
    Only a probe that reads the word vectors (one-hot types) can use the right head for each word."""
    example = planted_sentence(rng, n, strength=0.6)
    types = rng.integers(0, 2, n)
    gold = example.heads
    attn = example.word_attn.astype(np.float64)
    m = n + 2
    for map_index, own_type in ((PLANTED, 0), ((0, 0), 1)):
        for d in range(1, n + 1):
            target = gold[d - 1] if types[d - 1] == own_type else rng.choice(
                [c for c in range(n + 1) if c not in (d, gold[d - 1])])
            row = np.full(m, 0.4 / (m - 1))
            row[target] = 0.6
            attn[map_index][d] = row / row.sum()
    example.word_attn = attn.astype(np.float32)
    return example, np.eye(2, dtype=np.float32)[types]


def synthetic(seed: int, count: int):
    rng = np.random.default_rng(seed)
    pairs = [typed_sentence(rng, int(rng.integers(3, 14))) for _ in range(count)]
    return [p[0] for p in pairs], [p[1] for p in pairs]


@pytest.fixture(scope="module")
def data():
    train, train_vecs = synthetic(0, 80)
    test, test_vecs = synthetic(1, 30)
    train_batches = probes.make_batches(train, train_vecs, 8)
    return (train, train_batches, test, probes.make_batches(test, test_vecs, 8), probes.feature_scale(train_batches))


def heldout_uas(probe, test, batches, method):
    scores = probes.predict(probe, batches)
    return probes.uas(probes.decode(scores, method), [e.heads for e in test], [e.is_punct for e in test])


# -- probes ------------------------------------------------------------------------------------------
def test_attention_probe_recovers_a_planted_head():
    rng = np.random.default_rng(0)
    train, test = ([planted_sentence(rng, int(rng.integers(3, 14)), 0.8) for _ in range(k)] for k in (60, 30))
    train_batches, test_batches = probes.make_batches(train, None, 8), probes.make_batches(test, None, 8)
    probe = probes.make_probe("attention", L * H, 0, scale=probes.feature_scale(train_batches))
    curve = probes.train_probe(probe, train_batches, test_batches, epochs=20, progress=False)
    assert list(curve["epoch"]) == list(range(1, 21))
    assert curve["train_loss"].iloc[-1] < curve["train_loss"].iloc[0]
    assert heldout_uas(probe, test, test_batches, "argmax") == 1.0
    assert heldout_uas(probe, test, test_batches, "mst") == 1.0
    weights = probe.word.detach().numpy().reshape(2, L, H)  # the planted map, dep->head, weighs most
    assert np.unravel_index(weights.argmax(), weights.shape) == (0, *PLANTED)


def test_word_vectors_let_the_probe_choose_a_head_per_word(data):
    train, train_batches, test, test_batches, scale = data
    found = {}
    for kind in ("attention", "attention+vectors"):
        probe = probes.make_probe(kind, L * H, 2, scale=scale)
        probes.train_probe(probe, train_batches, None, epochs=10, progress=False)
        found[kind] = heldout_uas(probe, test, test_batches, "argmax")
    assert found["attention+vectors"] > 0.95
    assert found["attention"] < 0.8  # one weight per head cannot serve both word types


def test_random_attention_alone_does_not_find_heads():
    rng = np.random.default_rng(2)
    train, test = ([planted_sentence(rng, 10, strength=1 / 11) for _ in range(k)] for k in (24, 16))
    probe = probes.make_probe("attention", L * H, 0)  # the "planted" head is uniform here: no signal at all
    probes.train_probe(probe, probes.make_batches(train, None, 8), None, epochs=5, progress=False)
    scores = probes.predict(probe, probes.make_batches(test, None, 8))
    assert len(scores) == len(test) and all(s.shape == (10, 11) for s in scores)
    assert probes.uas(probes.decode(scores), [e.heads for e in test], [e.is_punct for e in test]) < 0.5


def test_training_is_deterministic(data):
    train_batches = data[1]
    runs = []
    for _ in range(2):
        probe = probes.make_probe("distances+vectors", L * H, 2, seed=3)
        curve = probes.train_probe(probe, train_batches, None, epochs=2, seed=3, progress=False)
        runs.append((curve["train_loss"].to_numpy(), probe.out.weight.detach().numpy().copy()))
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    np.testing.assert_array_equal(runs[0][1], runs[1][1])


def test_pair_features_layout():
    rng = np.random.default_rng(4)
    attn = planted_sentence(rng, 4).word_attn  # [L, H, 6, 6]: [CLS], 4 words, [SEP]
    feats = probes.pair_features(attn)
    assert feats.shape == (4, 5, 2, L * H)
    k = 1 * H + 2  # map index of layer 2, head 3
    d, c = 2, 4  # word 2 and candidate word 4
    assert feats[d - 1, c, 0, k] == attn[1, 2, d, c]  # dep -> candidate
    assert feats[d - 1, c, 1, k] == attn[1, 2, c, d]  # candidate -> dep (the transpose)
    assert feats[d - 1, 0, 0, k] == attn[1, 2, d, 0]  # ROOT: to [CLS]
    assert feats[d - 1, 0, 1, k] == attn[1, 2, d, 5]  # ROOT: to [SEP]
    assert not feats[np.arange(4), np.arange(1, 5)].any()  # a word never heads itself


def test_batches_mask_padding_and_punctuation():
    rng = np.random.default_rng(5)
    examples = [planted_sentence(rng, n) for n in (3, 7)]
    (batch,) = probes.make_batches(examples, None, 4)
    assert batch["feats"].shape[:3] == (2, 7, 8)
    assert batch["index"].tolist() == [0, 1]
    short = batch["allowed"][0]
    assert short[:3, :4].sum() == 3 * 3 and not short[:3, 4:].any()  # ROOT + the 2 other words
    assert short[3:].sum() == 4 and short[3:, 0].all()  # padding rows: only ROOT, for a finite softmax
    np.testing.assert_array_equal(batch["scored"][1].numpy(), ~np.array(examples[1].is_punct))
    assert not batch["scored"][0, 3:].any()


def test_distance_features():
    feats = probes.distance_features(5)
    assert feats.shape == (5, 5, probes.N_DISTANCE_FEATURES)
    np.testing.assert_array_equal(feats[2, 1, :6].numpy(), [1, 0, 0, 0, 0, 0])  # candidate 1 to the left
    np.testing.assert_array_equal(feats[0, 3, :6].numpy(), [0, 0, 0, 0, 0, 1])  # 3 to the right
    assert feats[4, 0, 6] == pytest.approx(np.log(5)) and feats[4, 0, 7] == 0
    assert feats[0, 4, 7] == pytest.approx(np.log(5)) and feats[0, 4, 6] == 0


def test_bad_examples_are_rejected():
    rng = np.random.default_rng(6)
    good = planted_sentence(rng, 4)
    with pytest.raises(ValueError, match="word_attn must be"):
        probes.make_batches([SimpleNamespace(**{**vars(good), "word_attn": good.word_attn[:, :, 1:, 1:]})])
    with pytest.raises(ValueError, match="heads must be"):
        probes.make_batches([SimpleNamespace(**{**vars(good), "heads": np.array([0, 1, 9, 2])})])
    with pytest.raises(ValueError, match="rows"):
        probes.make_batches([SimpleNamespace(**{**vars(good), "word_attn": good.word_attn * 2})])
    with pytest.raises(ValueError, match="kind"):
        probes.make_probe("glove", 6, 6)
    with pytest.raises(ValueError, match="vectors"):
        probes.word_vectors(["a"], "glove")


# -- evaluation --------------------------------------------------------------------------------------
def test_uas_ignores_punctuation():
    gold = [np.array([2, 0, 2, 2])]
    punct = [[False, False, True, True]]
    wrong_on_punct = [np.array([2, 0, 1, 1])]
    assert probes.uas(wrong_on_punct, gold, punct) == 1.0
    assert probes.uas([np.array([3, 0, 2, 2])], gold, punct) == 0.5
    assert probes.uas(wrong_on_punct, gold, [[False] * 4]) == 0.5
    with pytest.raises(ValueError, match="non-punctuation"):
        probes.uas(gold, gold, [[True] * 4])


def test_right_branching():
    np.testing.assert_array_equal(probes.right_branching(4), [2, 3, 4, 0])
    assert probes.uas([probes.right_branching(3)], [np.array([2, 3, 0])], [[False] * 3]) == 1.0


# -- the tree decoder --------------------------------------------------------------------------------
scores_strategy = st.integers(1, 7).flatmap(
    lambda n: arrays(np.float64, (n, n + 1), elements=st.floats(-20, 20, allow_nan=False)))


@given(scores_strategy)
def test_mst_always_returns_a_tree(scores):
    heads = mst_heads(scores)
    assert heads.shape == (scores.shape[0],)
    assert is_tree(heads)


@given(st.integers(1, 4).flatmap(lambda n: arrays(np.float64, (n, n + 1), elements=st.floats(-5, 5))))
def test_mst_is_the_best_tree(scores):
    n = scores.shape[0]
    best = max(tree_score(scores, h) for h in itertools.product(range(n + 1), repeat=n) if is_tree(h))
    assert tree_score(scores, mst_heads(scores)) == pytest.approx(best)


def test_mst_keeps_an_argmax_that_is_already_a_tree_and_breaks_cycles():
    gold = np.array([2, 0, 2, 3])
    scores = np.full((4, 5), -5.0)
    scores[np.arange(4), gold] = 0
    np.testing.assert_array_equal(mst_heads(scores), gold)
    cyclic = scores.copy()
    cyclic[1, 0], cyclic[1, 1] = -1, 0  # word 2 prefers word 1, which prefers word 2: a cycle
    assert not is_tree(cyclic.argmax(-1))
    assert is_tree(mst_heads(cyclic))
    two_roots = scores.copy()
    two_roots[3, 0] = 0.5  # word 4 prefers ROOT too: the tree keeps one word under ROOT
    assert np.count_nonzero(mst_heads(two_roots) == 0) == 1


def test_mst_respects_forbidden_edges_and_rejects_bad_input():
    scores = np.zeros((3, 4))
    scores[:, 0] = -np.inf
    scores[0, 0] = 0
    heads = mst_heads(scores)
    assert heads[0] == 0 and is_tree(heads)
    with pytest.raises(ValueError, match="n \\+ 1"):
        mst_heads(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="ROOT"):
        mst_heads(np.full((2, 3), -np.inf))
    with pytest.raises(ValueError, match="NaN"):
        mst_heads(np.full((2, 3), np.nan))


def test_is_tree():
    assert is_tree([2, 0, 2])
    assert not is_tree([0, 0, 2])  # two words under ROOT
    assert not is_tree([2, 1, 0])  # a cycle
    assert not is_tree([1, 0])  # a word heads itself
    assert not is_tree([])


# -- the random-init model ---------------------------------------------------------------------------
def test_random_init_encoder_keeps_embeddings_and_tokenizer(encoder, tmp_path):
    random_encoder = random_init_encoder(encoder, seed=0, cache_dir=tmp_path)
    assert (random_encoder.n_layers, random_encoder.n_heads) == (encoder.n_layers, encoder.n_heads)
    real, rand = encoder.model.state_dict(), random_encoder.model.state_dict()
    embeddings = [k for k in real if k.startswith("embeddings.")]
    assert embeddings and all(torch.equal(real[k], rand[k]) for k in embeddings)
    query = next(k for k in real if "query.weight" in k)
    assert not torch.equal(real[query], rand[query])
    assert random_encoder.tokenizer.get_vocab() == encoder.tokenizer.get_vocab()
    again = random_init_encoder(encoder, seed=0, cache_dir=tmp_path / "again")
    assert again.fingerprint == random_encoder.fingerprint  # the same seed gives the same weights
    enc = random_encoder.encode(["The", "cat", "sat", "."])
    assert enc.attn.shape[:2] == (encoder.n_layers, encoder.n_heads)


# -- word vectors and the whole Table 3 run ----------------------------------------------------------
def test_word_vectors(encoder):
    spacy_md = probes.word_vectors(["The", "cat", "qzxjvw"], "spacy-md")
    assert spacy_md.shape == (3, 300)
    np.testing.assert_allclose(np.linalg.norm(spacy_md, axis=1), [1, 1, 0], atol=1e-5)  # unknown word: zeros
    own = probes.word_vectors(["The", "unbelievably"], "embeddings", encoder)
    assert own.shape == (2, encoder.model.config.hidden_size)
    table = encoder.model.get_input_embeddings().weight.detach().numpy()
    the = table[encoder.tokenizer("The", add_special_tokens=False)["input_ids"]].mean(0)
    np.testing.assert_allclose(own[0], the / np.linalg.norm(the), atol=1e-5)
    with pytest.raises(ValueError, match="encoder"):
        probes.word_vectors(["a"], "embeddings")


def hand_parsed(article: str, k: int):
    from bertlook_utils.parses import Sentence

    words, heads, relations, pos = zip(("The", 2, "det", "DET"), ("cat", 3, "nsubj", "NOUN"),
                                       ("sat", 0, "ROOT", "VERB"), ("on", 3, "prep", "ADP"), ("the", 6, "det", "DET"),
                                       ("mat", 4, "pobj", "NOUN"), (".", 3, "punct", "PUNCT"))
    return Sentence(words, heads, relations, pos, pos, article, f"{article}#{k}")


def test_run_probes_end_to_end_and_cached(encoder, tmp_path, monkeypatch):
    selection = [hand_parsed("A", k) for k in range(6)]
    heldout = [hand_parsed("B", k) for k in range(4)]
    results = probes.run_probes(encoder, selection, heldout, epochs=2, batch_size=4, min_relation=1,
                                cache_dir=tmp_path, progress=False)
    assert list(results.table["model"]) == list(probes.Model)
    assert results.table[["uas_argmax", "uas_mst"]].apply(lambda c: c.between(0, 100)).all().all()
    right = results.table.set_index("model").loc[probes.Model.RIGHT_BRANCHING, "uas_argmax"]
    assert right == pytest.approx(100 * 3 / 6)  # The -> cat, cat -> sat, the -> mat; "." is not scored
    assert results.weights.shape == results.head_accuracy.shape == (2, encoder.n_layers, encoder.n_heads)
    assert set(results.curves["epoch"]) == {1, 2} and results.n_words_test == 4 * 6
    assert {"det", "all"} <= set(results.best_heads["relation"])
    table3 = compare.table3(results)
    assert list(table3["quantity"][:6]) == list(paper.TABLE3["model"])
    assert list(table3["quantity"].iloc[-2:]) == [probes.Model.RANDOM_ATTENTION, probes.Model.ONE_EPOCH]  # ours only
    assert table3.set_index("quantity").loc["right-branching", "this run"].startswith("50.0 (MST ")
    gaps = compare.table3_gaps(results).set_index("quantity")
    assert gaps.loc["attention only - right-branching (UAS points)", "paper"] == "+35.0"
    weights = probes.weight_table(results)
    assert len(weights) == results.weights.size and set(weights["direction"]) == set(syntax.DIRECTIONS)
    monkeypatch.setattr(probes, "train_probe", lambda *a, **k: pytest.fail("the second call must read the cache"))
    again = probes.run_probes(encoder, selection, heldout, epochs=2, batch_size=4, min_relation=1,
                              cache_dir=tmp_path, progress=False)
    pd.testing.assert_frame_equal(again.table, results.table)
    pd.testing.assert_frame_equal(again.predictions, results.predictions)


# -- Clark et al.'s distances + words baseline ----------------------------------------------------------
def test_clark_distance_features_follow_the_released_code():
    feats = probes.clark_distance_features(torch.tensor([4, 2]), 4)
    assert feats.shape == (2, 4, 5, probes.N_DISTANCE_FEATURES)
    first = feats[0]
    np.testing.assert_array_equal(first[:, 0].numpy(), np.tile([0, 0, 0, 0, 0, 0, 0, 1], (4, 1)))  # ROOT column
    # word 1 (row 0): candidate word 3 (column 3) is 2 to the right: distance 2/4, indicator "+2"
    np.testing.assert_allclose(first[0, 3].numpy(), [0.5, 0, 0, 0, 0, 0, 1, 0])
    # word 4 (row 3): candidate word 3 is 1 to the left: distance 1/4, indicator "-1"; itself: the self indicator
    np.testing.assert_allclose(first[3, 3].numpy(), [0, 0.25, 0, 1, 0, 0, 0, 0])
    np.testing.assert_allclose(first[3, 4].numpy(), [0, 0, 1, 0, 0, 0, 0, 0])
    assert feats[1, 0, 2, 0] == pytest.approx(0.5)  # a 2-word sentence divides by 2


def test_clark_mlp_scores_root_the_same_for_every_dependent():
    probe = probes.make_probe("clark-distances+vectors", 0, 5, seed=1)
    assert probe.hidden.out_features == 256 and not probe.hidden.bias.any()  # TensorFlow's dense defaults
    rng = np.random.default_rng(0)
    sentences = [SimpleNamespace(heads=np.array([2, 0, 2]), is_punct=[False, False, True])]
    (batch,) = probe_baselines.word_batches(sentences, [rng.normal(size=(3, 5)).astype(np.float32)], 1)
    scores = probe(batch)
    assert scores.shape == (1, 3, 4)
    assert torch.allclose(scores[0, :, 0], scores[0, 0, 0].expand(3))  # ROOT: no vectors, a constant score
    assert not torch.allclose(scores[0, 0, 1:], scores[0, 1, 1:])


def test_word_batches_match_make_batches():
    rng = np.random.default_rng(7)
    examples = [planted_sentence(rng, n) for n in (5, 3, 8, 4)]
    vecs = [rng.normal(size=(len(e.heads), 3)).astype(np.float32) for e in examples]
    for mine, full in zip(probe_baselines.word_batches(examples, vecs, 2), probes.make_batches(examples, vecs, 2)):
        for key in ("vecs", "heads", "scored", "allowed", "lengths", "index"):
            assert torch.equal(mine[key], full[key]), key
    singles = probes.single_sentences(probes.make_batches(examples, vecs, 4))
    assert [b["index"].item() for b in singles] == [1, 3, 0, 2]  # by length
    for b in singles:
        n = len(examples[b["index"].item()].heads)
        assert b["feats"].shape[:3] == (1, n, n + 1) and b["allowed"].shape == (1, n, n + 1)


def test_sum_loss_counts_every_word_and_mean_only_the_scored():
    rng = np.random.default_rng(8)
    examples = [planted_sentence(rng, 6)]
    examples[0].is_punct = [False, True, False, False, True, False]
    (batch,) = probes.make_batches(examples, None, 1)
    probe = probes.make_probe("attention", L * H, 0)  # zero weights: uniform over the allowed candidates
    uniform = np.log(6)  # ROOT and the 5 other words
    assert probes._loss(probe, batch, "sum").item() == pytest.approx(6 * uniform, rel=1e-5)
    assert probes._loss(probe, batch, "mean").item() == pytest.approx(uniform, rel=1e-5)
    with pytest.raises(ValueError, match="loss"):
        probes.train_probe(probe, [batch], epochs=1, loss="max", progress=False)


def test_pca_projection_finds_the_main_axis_and_keeps_unknown_words_at_zero():
    rng = np.random.default_rng(9)
    along = rng.normal(size=(200, 1)) * np.array([[3.0, 4.0, 0.0]]) / 5 * 10
    noise = rng.normal(size=(200, 3)) * 0.01
    vectors = along + noise + np.array([1.0, 1.0, 1.0])
    mean, axes = probe_baselines.pca_projection([vectors[:100], np.vstack([vectors[100:], np.zeros((5, 3))])], 1)
    np.testing.assert_allclose(np.abs(axes[0]), [0.6, 0.8, 0], atol=1e-2)
    np.testing.assert_allclose(mean, vectors.mean(0))  # the all-zero rows (no vector) are left out
    projected = probe_baselines.project_vectors(np.vstack([vectors[:3], np.zeros((1, 3))]), (mean, axes))
    assert projected.shape == (4, 1) and projected[3, 0] == 0
    np.testing.assert_allclose(projected[:3, 0], (vectors[:3] - mean) @ axes[0], rtol=1e-5)
    with pytest.raises(ValueError, match="project"):
        probe_baselines.pca_projection([vectors], 4)


def test_distance_baselines_end_to_end_and_cached(tmp_path, monkeypatch):
    selection = [hand_parsed(a, k) for a in "AB" for k in range(3)]
    heldout = [hand_parsed("C", k) for k in range(2)]
    settings = (probe_baselines.BaselineSetting("small", dim=3, hidden=8),
                probe_baselines.BaselineSetting("half", dim=300, train="half"))
    found = probe_baselines.distance_baselines(selection, heldout, settings, cache_dir=tmp_path, progress=False)
    table = found.table.set_index("model")
    assert table.loc["small", "n_train"] == 6 and table.loc["half", "n_train"] == 3
    assert table[["uas_argmax", "uas_mst"]].apply(lambda c: c.between(0, 100)).all().all()
    assert list(found.predictions.columns[-2:]) == ["small", "half"] and len(found.predictions) == 14
    monkeypatch.setattr(probes, "train_probe", lambda *a, **k: pytest.fail("the second call must read the cache"))
    again = probe_baselines.distance_baselines(selection, heldout, settings, cache_dir=tmp_path, progress=False)
    pd.testing.assert_frame_equal(again.table, found.table)


# -- scoring on the arcs two parsers agree on, and the shape of the trees ---------------------------
def test_subset_uas_splits_by_parser_agreement():
    from bertlook_utils.parses import Sentence

    one, two = hand_parsed("A", 0), hand_parsed("A", 1)
    md_one = Sentence(one.words, (2, 3, 0, 3, 6, 3, 3), one.relations, one.pos, one.tags, "A", one.id)  # mat->sat
    predictions = probes.word_table([one, two])
    predictions["right"] = np.concatenate([probes.right_branching(7)] * 2)
    table = probe_baselines.subset_uas(predictions, ["right"], [one, two], [md_one, two]).set_index("model")
    # right-branching gets The, cat (the two words before their head) and "the" right: 3 of 6 per sentence
    assert table.loc["right", "all"] == pytest.approx(50.0)
    assert table.loc["right", "n agreed arcs"] == 11 and table.loc["right", "n disagreed arcs"] == 1
    assert table.loc["right", "disagreed arcs"] == 0  # "mat": gold 4, right-branching says 7 (".")
    assert table.loc["right", "agreed arcs"] == pytest.approx(100 * 6 / 11)
    assert table.loc["right", "n agreed sentences"] == 6 and table.loc["right", "agreed sentences"] == 50.0
    assert table.loc["right", "against md"] == pytest.approx(50.0)
    with pytest.raises(ValueError, match="rows"):
        probe_baselines.subset_uas(predictions.iloc[:3], ["right"], [one, two], [md_one, two])


def test_offset_shares():
    sentence = hand_parsed("A", 0)  # heads 2 3 0 3 6 4 3: offsets +1 +1 ROOT -1 +1 -2 -4 (the "." is punct)
    shares = probe_baselines.offset_shares([sentence]).set_index("offset")
    assert shares.loc["+1", "non-punct"] == pytest.approx(100 * 3 / 6)
    assert shares.loc["+1", "every word"] == pytest.approx(100 * 3 / 7)
    assert shares.loc["other", "every word"] == pytest.approx(100 / 7) and shares.loc["other", "non-punct"] == 0
    assert shares.loc["ROOT", "non-punct"] == pytest.approx(100 / 6)
    assert shares["every word"].sum() == pytest.approx(100)
