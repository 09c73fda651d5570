"""patterns: features and rules on synthetic maps whose kind is known by construction; fitting, honest
cross-validation, shares from labels (Wilson) and from the rules (threshold band); patternlearn's learned
classifier on the same features (prototypes, a fold that never sees its test maps, shares)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from builders import (column_map, identity_map, next_map, prev_map, random_row_stochastic, segment_ids_for, spread_map,
                      uniform_map)

from bertlook_utils import intervals, patternlearn, patterns
from bertlook_utils.analyses.patterns import evaluation
from bertlook_utils.analyses.patterns.kinds import PATTERNS, to_pattern
from bertlook_utils.extract import Batch
from bertlook_utils.models import Encoded

N = 40
SINGLE = ["[CLS]"] + [f"w{i}" for i in range(N - 2)] + ["[SEP]"]
HALF = N // 2  # pair: [CLS] a1..a18 [SEP] | b1..b19 [SEP]
PAIR = ["[CLS]"] + [f"a{i}" for i in range(HALF - 2)] + ["[SEP]"] + [f"b{i}" for i in range(N - HALF - 1)] + ["[SEP]"]


def pair_tokens(n: int, first: int) -> list[str]:
    """[CLS], first - 2 tokens, [SEP] | the rest, [SEP]: n tokens."""
    return (["[CLS]"] + [f"a{i}" for i in range(first - 2)] + ["[SEP]"]
            + [f"b{i}" for i in range(n - first - 1)] + ["[SEP]"])


def within_segments(tokens) -> np.ndarray:
    """Every row spreads its mass evenly over the tokens of its own segment ([CLS]/[SEP] rows included)."""
    segments = segment_ids_for(tokens)
    return spread_map(len(tokens), lambda i: [j for j in range(len(tokens)) if segments[j] == segments[i]])


def sparse_random(n: int, seed: int = 0) -> np.ndarray:
    """Every row spreads over 3 random tokens."""
    rng = np.random.default_rng(seed)
    return spread_map(n, lambda i: rng.choice(n, 3, replace=False))


def mix(*maps_and_weights) -> np.ndarray:
    return sum(w * m for m, w in maps_and_weights).astype(np.float32)


PROTOTYPES = [
    ("vertical", column_map(N, [0]), SINGLE),
    ("vertical", column_map(N, [0, HALF - 1, N - 1]), PAIR),
    ("diagonal", prev_map(N), SINGLE),
    ("diagonal", next_map(N), SINGLE),
    ("diagonal", identity_map(N), PAIR),
    ("vertical+diagonal", mix((column_map(N, [0]), 0.5), (prev_map(N), 0.5)), SINGLE),
    ("block", within_segments(PAIR), PAIR),
    ("block", within_segments(pair_tokens(10, 5)), pair_tokens(10, 5)),  # short segments: still no diagonal
    ("block", within_segments(pair_tokens(64, 32)), pair_tokens(64, 32)),
    ("broad", uniform_map(N), PAIR),
    ("broad", mix((uniform_map(N), 0.8), (random_row_stochastic(np.random.default_rng(0), (N, N)), 0.2)), SINGLE),
    ("heterogeneous", sparse_random(N), SINGLE),
]


@pytest.mark.parametrize("kind, attn, tokens", PROTOTYPES)
def test_clear_prototypes_get_their_kind(kind, attn, tokens):
    segments = segment_ids_for(tokens)
    assert patterns.map_kind(attn, tokens, segments) == kind
    assert patterns.classify_map(attn, tokens, segments) == ("heterogeneous" if kind == "broad" else kind)


def test_a_block_stays_a_block_at_every_threshold_the_fit_may_choose():
    """A map uniform within each half of a pair has locality above the whole block grid, and no diagonal excess."""
    for n, first in ((8, 4), (10, 5), (11, 5), (40, 20), (64, 32)):
        tokens = pair_tokens(n, first)
        f = patterns.map_features(within_segments(tokens), tokens, segment_ids_for(tokens))
        assert f["locality"] > max(patterns.GRID["block"]) and f["diagonal"] == pytest.approx(0, abs=1e-6)


def test_features_by_hand_on_a_tiny_pair():
    """[CLS] a b [SEP] c d [SEP]: real rows spread over the real tokens of their segment, special rows over all.
    locality: rows a, d: 1 - 0.5 / 2; rows b, c: 1 - 0.5 / 1.5 (mean distance to the 4 real tokens 2 and 1.5)."""
    tokens = ["[CLS]", "a", "b", "[SEP]", "c", "d", "[SEP]"]
    real_of = {1: [1, 2], 2: [1, 2], 4: [4, 5], 5: [4, 5]}
    attn = spread_map(7, lambda i: real_of.get(i, range(7)))
    f = patterns.map_features(attn, tokens, segment_ids_for(tokens))
    assert f["locality"] == pytest.approx((2 * 0.75 + 2 * (2 / 3)) / 4)
    assert f["diagonal"] == pytest.approx(0, abs=1e-7)  # each segment is only its two neighbours
    assert f["entropy"] == pytest.approx((4 * np.log(2) + 3 * np.log(7)) / 7 / np.log(7), rel=1e-5)
    assert f["stripes"] == pytest.approx((30 / 49 - 3 / 7) / (1 - 3 / 7), rel=1e-5)  # top columns hold 10/49 each


def test_features_of_known_maps():
    f = patterns.map_features(column_map(N, [0]), SINGLE, [0] * N)
    assert (f["stripes"], f["diagonal"], f["locality"]) == (pytest.approx(1), 0, 0)
    assert f["entropy"] == pytest.approx(0, abs=1e-5)
    f = patterns.map_features(identity_map(N), SINGLE, [0] * N)
    n_real = N - 2  # the two end rows have one real neighbour only
    assert f["diagonal"] == pytest.approx(1 - (3 * (n_real - 2) + 2 * 2) / n_real ** 2)
    assert f["locality"] == pytest.approx(1)
    f = patterns.map_features(uniform_map(N), PAIR, segment_ids_for(PAIR))
    assert (f["stripes"], f["locality"], f["entropy"]) == (pytest.approx(0, abs=1e-6), pytest.approx(0, abs=1e-6),
                                                          pytest.approx(1, abs=1e-5))
    a_real = HALF - 2  # within: a real token of segment A sees a_real A tokens out of N - 3 real tokens
    within = (a_real * a_real / (N - 3) + (N - 3 - a_real) ** 2 / (N - 3)) / (N - 3)
    assert f["within"] == pytest.approx(within, rel=1e-4)
    assert patterns.map_features(within_segments(PAIR), PAIR, segment_ids_for(PAIR))["within"] == pytest.approx(1)
    assert patterns.map_features(within_segments(PAIR), PAIR, [0] * N)["within"] == 0  # single input


def test_bad_input_is_refused(tmp_path):
    with pytest.raises(ValueError, match="rows must sum to 1"):
        patterns.classify_map(np.ones((N, N)), SINGLE, [0] * N)
    with pytest.raises(ValueError, match="for the n = "):
        patterns.classify_map(uniform_map(N - 1), SINGLE, [0] * N)
    with pytest.raises(ValueError, match="thresholds miss"):
        patterns.classify_map(uniform_map(N), SINGLE, [0] * N, thresholds={"vertical": 0.5})
    with pytest.raises(ValueError, match="unknown kinds"):
        evaluation.macro_f1(["vertical"], ["stripy"])
    path = tmp_path / "labels.csv"
    row = "m001,pretrained,topic/1,1,1,{label}"
    path.write_text("map_id,variant,input,layer,head,label\n" + row.format(label="wavy") + "\n")
    with pytest.raises(ValueError, match="unknown labels"):
        patterns.load_labels(path)
    path.write_text("map_id,variant,input,layer,head,label,sample\n" + row.format(label="broad") + ",picked\n")
    with pytest.raises(ValueError, match="unknown samples"):
        patterns.load_labels(path)
    with pytest.raises(ValueError, match="fold_of must give"):
        patterns.cross_validate(pd.DataFrame({k: [0.0] * 4 for k in patterns.FEATURES}), ["vertical"] * 4, folds=2,
                                fold_of=[0, 0, 0, 0])


def test_labels_with_the_new_columns_load(tmp_path):
    path = tmp_path / "labels.csv"
    path.write_text("map_id,variant,input,layer,head,label,sample\nm001,pretrained,topic/1,1,2,broad,random\n"
                    "m002,topic,next_paragraph/3,2,1,block,targeted\n")
    labels = patterns.load_labels(path)
    assert list(labels["task"]) == ["topic", "next_paragraph"] and list(labels["sample"]) == ["random", "targeted"]
    path.write_text("map_id,variant,input,layer,head,label\nm001,pretrained,topic/1,1,2,vertical\n")
    assert list(patterns.load_labels(path)["sample"]) == ["random"]  # the old file: every map drawn at random


def test_the_feature_pass_keeps_every_head_of_every_input_and_ignores_padding():
    short = SINGLE[:-11] + ["[SEP]"]  # 30 tokens, padded to 40 in the batch
    n = len(short)
    single = np.stack([prev_map(n), column_map(n, [0])])[None]
    pair = np.stack([prev_map(N), within_segments(PAIR)])[None]
    inputs = [Encoded(short, list(range(n)), short, [0] * n, single),
              Encoded(PAIR, list(range(N)), PAIR, segment_ids_for(PAIR), pair)]
    attn = torch.zeros(2, 1, 2, N, N)
    attn[0, :, :, :n, :n] = torch.from_numpy(single)
    attn[0, :, :, n:, :] = 0.5  # padded rows hold anything
    attn[1] = torch.from_numpy(pair)
    valid = torch.zeros(2, N, dtype=torch.bool)
    valid[0, :n] = True
    valid[1] = True
    reducer = patterns.PatternFeatures()
    reducer.update(Batch.build(attn, valid, inputs, "[CLS]", "[SEP]"))
    reducer.load(reducer.result())
    assert reducer.arrays["stripes"].shape == (2, 1, 2)
    for i, enc in enumerate(inputs):
        alone = patterns.encoded_features(enc)
        for name in patterns.FEATURES + patterns.EXTRA:
            np.testing.assert_allclose(reducer.arrays[name][i], alone[name], atol=1e-6)
    kinds = patterns.classify_features(reducer.arrays)
    assert kinds.tolist() == [[["diagonal", "vertical"]], [["diagonal", "block"]]]


def synthetic_features(rng: np.random.Generator, per_kind: int = 20):
    """Features in which each kind sits far from the others' thresholds."""
    rows, labels = [], []
    for _ in range(per_kind):
        rows += [dict(stripes=rng.uniform(0.75, 1), diagonal=rng.uniform(-0.02, 0.01), locality=0.0, entropy=0.3),
                 dict(stripes=rng.uniform(0, 0.05), diagonal=rng.uniform(0.5, 0.9), locality=0.9, entropy=0.1),
                 dict(stripes=rng.uniform(0, 0.05), diagonal=0.0, locality=rng.uniform(-0.1, 0.05), entropy=0.5),
                 dict(stripes=0.0, diagonal=0.0, locality=0.0, entropy=rng.uniform(0.97, 1))]
        labels += ["vertical", "diagonal", "heterogeneous", "broad"]
    return pd.DataFrame(rows), np.array(labels, dtype=object)


def test_fitting_recovers_separable_thresholds_and_cross_validation_is_perfect_on_them():
    features, labels = synthetic_features(np.random.default_rng(0))
    grid = dict(patterns.GRID, vertical=(0.01, 0.5, 0.9), diagonal=(0.005, 0.3, 0.95), broad=(0.4, 0.95, 0.99))
    fitted = patterns.fit_thresholds(features, labels, grid)
    assert (fitted["vertical"], fitted["diagonal"], fitted["broad"]) == (0.5, 0.3, 0.95)
    assert list(patterns.classify_features(features, fitted)) == list(labels)
    cv = patterns.cross_validate(features, labels, folds=4, grid=grid)
    assert sorted(cv["fold"].unique()) == [0, 1, 2, 3] and len(cv.attrs["thresholds"]) == 4
    accuracy, f1, confusion = evaluation.agreement(cv["label"], cv["predicted"])
    assert accuracy == 1 and f1 == 1 and confusion.to_numpy().trace() == len(labels)
    assert list(confusion.index) == list(patterns.KINDS)  # six-way labels are scored six-way


def test_five_way_labels_score_broad_as_heterogeneous_and_leave_its_threshold_alone():
    features, labels = synthetic_features(np.random.default_rng(1))
    five = to_pattern(labels)
    assert patterns.fit_thresholds(features, five)["broad"] == patterns.BROAD_DEFAULT
    accuracy, _, confusion = evaluation.agreement(five, patterns.classify_features(features, patterns.THRESHOLDS))
    assert list(confusion.index) == list(PATTERNS) and accuracy == 1


def test_stratified_folds_are_balanced_seeded_and_keep_each_label_spread():
    labels = np.array(["vertical"] * 13 + ["block"] * 4 + ["diagonal"] * 8, dtype=object)
    folds = evaluation.stratified_folds(labels, 5, seed=3)
    assert np.array_equal(folds, evaluation.stratified_folds(labels, 5, seed=3))
    assert np.bincount(folds).max() - np.bincount(folds).min() <= 1
    assert len(set(folds[labels == "block"])) == 4  # 4 block maps in 4 different folds


def test_cross_validation_fits_without_the_held_out_fold(monkeypatch):
    """Folds 1 and 2 only say "vertical above 0.05, below 0.95"; fold 0 fills the gap. (1) every fit sees only
    the other folds' maps; (2) relabelling fold 0 leaves its own predictions as they were, although a fit on all
    maps moves with it (so a leak would show)."""
    fold_of = np.repeat([0, 1, 2], 20)
    stripes = np.concatenate([np.linspace(0.12, 0.88, 20), np.tile([0.05, 0.95], 20)])
    features = pd.DataFrame({"stripes": stripes, "diagonal": 0.0, "locality": 0.0, "entropy": 0.5})

    def labelled(cut: float) -> np.ndarray:  # fold 0: vertical from `cut` up
        return np.where(stripes >= np.where(fold_of == 0, cut, 0.5), "vertical", "heterogeneous").astype(object)

    seen = []
    fit = patterns.fit_thresholds
    monkeypatch.setattr(patterns, "fit_thresholds", lambda f, labels, g: seen.append(set(f.index)) or fit(f, labels, g))
    cv = patterns.cross_validate(features, labelled(0.5), folds=3, fold_of=fold_of)
    monkeypatch.undo()
    assert [used == set(np.flatnonzero(fold_of != fold)) for fold, used in enumerate(seen)] == [True] * 3
    held_out = fold_of == 0
    again = patterns.cross_validate(features, labelled(0.3), folds=3, fold_of=fold_of)
    assert list(again["predicted"][held_out]) == list(cv["predicted"][held_out])
    assert fit(features, labelled(0.5))["vertical"] == 0.5 and fit(features, labelled(0.3))["vertical"] == 0.3


def test_bootstrap_refits_differ_and_are_seeded():
    features, labels = synthetic_features(np.random.default_rng(2), per_kind=6)
    features["diagonal"] += np.random.default_rng(3).normal(0, 0.3, len(features))  # overlapping classes
    fits = patterns.bootstrap_thresholds(features, labels, n_boot=8, seed=0)
    assert fits == patterns.bootstrap_thresholds(features, labels, n_boot=8, seed=0)
    assert len({tuple(f.values()) for f in fits}) > 1


def test_shares_and_their_threshold_band_on_synthetic_features():
    """Layer 1: every head vertical at any threshold; layer 2: diagonal 0.1, diagonal when the threshold is
    0.05, not when it is 0.15 (then heterogeneous): the band spans 0 to 1."""
    n, L, H = 5, 2, 3
    f = {"stripes": np.zeros((n, L, H)), "diagonal": np.zeros((n, L, H)), "locality": np.zeros((n, L, H)),
         "entropy": np.full((n, L, H), 0.5)}
    f["stripes"][:, 0] = 0.9
    f["diagonal"][:, 1] = 0.1
    low, high = dict(patterns.THRESHOLDS, diagonal=0.05), dict(patterns.THRESHOLDS, diagonal=0.15)
    by_layer = patterns.shares_by_layer(f, low)
    assert by_layer.loc[1, "vertical"] == 1 and by_layer.loc[2, "diagonal"] == 1
    assert np.allclose(by_layer.sum(1), 1) and list(by_layer.columns) == list(patterns.KINDS)
    table = patterns.classifier_shares(f, low, [low, high], level=1.0).set_index(["layer", "kind"])
    assert table.loc[(1, "vertical"), ["share", "low", "high"]].tolist() == [1, 1, 1]
    assert table.loc[(2, "diagonal"), ["share", "low", "high"]].tolist() == [1, 0, 1]
    assert table.loc[(2, "heterogeneous"), ["low", "high"]].tolist() == [0, 1]
    assert table.loc[("all", "diagonal"), ["share", "low", "high"]].tolist() == [0.5, 0, 0.5]
    with pytest.raises(ValueError, match="at least one set"):
        patterns.classifier_shares(f, low, [])


def test_label_shares_use_the_random_sample_with_wilson_intervals():
    labels = pd.DataFrame({
        "variant": ["pretrained"] * 6 + ["topic"] * 2, "task": ["topic"] * 8, "layer": [1, 1, 1, 2, 2, 2, 1, 1],
        "label": ["vertical", "vertical", "broad", "block", "heterogeneous", "heterogeneous", "block", "vertical"],
        "sample": ["random"] * 6 + ["targeted", "random"]})
    table = patterns.label_shares(labels).set_index(["variant", "task", "layer", "kind"])
    row = table.loc[("pretrained", "topic", 1, "vertical")]
    assert (row["count"], row["n"], row["share"]) == (2, 3, pytest.approx(2 / 3))
    assert (row["low"], row["high"]) == pytest.approx(intervals.wilson_interval(2, 3))
    assert table.loc[("pretrained", "topic", 1, "broad"), "count"] == 1  # broad apart from heterogeneous
    assert table.loc[("pretrained", "topic", "all", "heterogeneous"), ["count", "n"]].tolist() == [2, 6]
    assert table.loc[("topic", "topic", 1, "block"), "count"] == 0  # the targeted block map is left out
    assert table.loc[("topic", "topic", "all", "vertical"), "n"] == 1
    assert np.allclose(table.groupby(["variant", "task", "layer"])["share"].sum(), 1)
    with pytest.raises(ValueError, match="no labelled maps of the random sample"):
        patterns.label_shares(labels[labels["sample"] == "targeted"])
    with pytest.raises(ValueError, match="unknown labels"):
        patterns.label_shares(labels.assign(label="stripy"))


def test_macro_f1_and_class_scores_by_hand():
    truth = ["vertical", "vertical", "diagonal", "block"]
    guess = ["vertical", "diagonal", "diagonal", "heterogeneous"]
    # vertical 2/3, diagonal 2/3, block 0, heterogeneous 0
    assert evaluation.macro_f1(truth, guess) == pytest.approx((2 / 3 + 2 / 3) / 4)
    scores = evaluation.class_scores(truth, guess)
    assert scores.loc["vertical", ["support", "predicted", "precision", "recall"]].tolist() == [2, 1, 1, 0.5]
    assert scores.loc["block", "f1"] == 0 and np.isnan(scores.loc["vertical+diagonal", "f1"])


def test_the_hand_labels_are_complete():
    labels = patterns.load_labels()
    assert len(labels) >= 150 and labels["map_id"].is_unique
    assert set(labels["label"]) <= set(patterns.KINDS) and set(labels["sample"]) <= set(patterns.SAMPLES)
    assert labels["layer"].min() >= 1 and labels["head"].min() >= 1


def test_extra_features_of_known_maps():
    f = patterns.map_features(identity_map(N), SINGLE, [0] * N)
    assert (f["near"], f["peak"], f["half_band"], f["far"], f["far_local"]) == (
        pytest.approx(1), pytest.approx(1), 0, 0, 0)
    assert f["spread"] == pytest.approx(0, abs=1e-5) and f["in_unit"] == 0  # one unit: the whole input
    f = patterns.map_features(column_map(N, [0]), SINGLE, [0] * N)
    assert (f["first"], f["sinks"]) == (pytest.approx(1), pytest.approx(0, abs=1e-6))
    f = patterns.map_features(column_map(N, [HALF - 1, N - 1]), PAIR, segment_ids_for(PAIR))
    assert (f["first"], f["sinks"]) == (0, pytest.approx(1))
    f = patterns.map_features(within_segments(PAIR), PAIR, segment_ids_for(PAIR))
    assert f["in_unit"] == pytest.approx(1) and f["far"] > 0.8 and f["far_local"] > 0.3
    f = patterns.map_features(uniform_map(N), PAIR, segment_ids_for(PAIR))
    assert (f["in_unit"], f["spread"], f["far_local"]) == (pytest.approx(0, abs=1e-5), pytest.approx(1, abs=1e-5),
                                                           pytest.approx(0, abs=1e-5))
    n_real = N - 3  # a uniform row keeps half its mass within about a quarter of the real tokens around it
    assert 0.2 < f["half_band"] < 0.4 and f["peak"] == pytest.approx(1 / n_real, rel=1e-4)
    # sentences: [CLS] w . w w . w [SEP], rows spread over their own sentence: units split after each "."
    tokens = ["[CLS]", "a", ".", "b", "c", ".", "d", "[SEP]"]
    assert patterns.sentence_units(tokens, [0] * 8) == [0, 0, 0, 1, 1, 1, 2, 2]
    assert patterns.sentence_units(PAIR, segment_ids_for(PAIR)) == segment_ids_for(PAIR)
    units = patterns.sentence_units(tokens, [0] * 8)
    f = patterns.map_features(spread_map(8, lambda i: [j for j in range(8) if units[j] == units[i]]), tokens, [0] * 8)
    assert f["in_unit"] == pytest.approx(1)


def built_map(kind: str, n: int, units: list[int], rng: np.random.Generator) -> np.ndarray:
    """[n, n]: one map of `kind` by construction (`units`: each token's sentence unit, for blocks); draws from
    `rng` only what this kind needs."""
    return {"vertical": lambda: column_map(n, [0] if rng.random() < 0.5 else [0, n - 1]),
            "diagonal": lambda: [prev_map, next_map, identity_map][int(rng.integers(3))](n),
            "vertical+diagonal": lambda: mix((column_map(n, [0]), 0.5), (prev_map(n), 0.5)),
            "block": lambda: spread_map(n, lambda i: [j for j in range(n) if units[j] == units[i]]),
            "broad": lambda: uniform_map(n),
            "heterogeneous": lambda: sparse_random(n, seed=int(rng.integers(1000)))}[kind]()


def noisy_prototypes(seed: int = 0, per_kind: int = 30) -> tuple[pd.DataFrame, np.ndarray]:
    """Features of `per_kind` maps of every kind, built here by construction: singles or pairs of 16 to 60
    tokens, blocks of segments or of sentences, up to 20 % random noise."""
    rng = np.random.default_rng(seed)
    rows, kinds = [], []
    for kind in patterns.KINDS:
        for _ in range(per_kind):
            n = int(rng.integers(16, 61))
            if rng.random() < 0.5:
                tokens = pair_tokens(n, int(rng.integers(6, n - 5)))
            else:
                tokens = ["[CLS]"] + ["w"] * (n - 2) + ["[SEP]"]
            if kind == "block" and len(set(segment_ids_for(tokens))) == 1:  # sentences of a single input
                for end in sorted(rng.choice(np.arange(4, n - 4), 2, replace=False)):
                    tokens[end] = "."
            units = patterns.sentence_units(tokens, segment_ids_for(tokens))
            attn = built_map(kind, n, units, rng)
            share = rng.uniform(0, 0.2)
            noisy = ((1 - share) * attn + share * random_row_stochastic(rng, (n, n))).astype(np.float32)
            rows.append(patterns.map_features(noisy, tokens, segment_ids_for(tokens)))
            kinds.append(kind)
    return pd.DataFrame(rows), np.array(kinds, dtype=object)


@pytest.fixture(scope="module")
def learned():
    features, kinds = noisy_prototypes()
    return patternlearn.fit(features, kinds)


@pytest.mark.parametrize("kind, attn, tokens", PROTOTYPES)
def test_the_learned_classifier_gets_clear_prototypes_built_another_way(learned, kind, attn, tokens):
    features = patterns.map_features(attn, tokens, segment_ids_for(tokens))
    assert learned.classify({k: np.array(v) for k, v in features.items()}) == kind
    assert learned.kinds == patterns.KINDS


def test_learned_cross_validation_never_sees_the_held_out_fold(monkeypatch):
    """(1) every fit sees only the other folds' maps; (2) scrambling the labels of fold 0 leaves fold 0's
    predictions as they were, although a model fitted on all maps moves with it (so a leak would show)."""
    features, kinds = noisy_prototypes(seed=1, per_kind=12)
    fold_of = evaluation.stratified_folds(kinds, 4, seed=0)
    seen = []
    fit = patternlearn.fit
    monkeypatch.setattr(patternlearn, "fit",
                        lambda f, labels, seed, settings: seen.append(set(f.index)) or fit(f, labels, seed, settings))
    cv = patternlearn.cross_validate(features, kinds, folds=4, fold_of=fold_of)
    monkeypatch.undo()
    assert [used == set(np.flatnonzero(fold_of != fold)) for fold, used in enumerate(seen)] == [True] * 4
    assert np.allclose(cv[[f"p_{k}" for k in patterns.KINDS]].sum(1), 1)
    scrambled = kinds.copy()
    held_out = fold_of == 0
    scrambled[held_out] = np.roll(kinds[held_out], 1)
    again = patternlearn.cross_validate(features, scrambled, folds=4, fold_of=fold_of)
    assert list(again["predicted"][held_out]) == list(cv["predicted"][held_out])
    assert list(fit(features, scrambled).classify(features)[held_out]) != list(cv["predicted"][held_out])


def test_learned_shares_over_heads_and_bad_input(learned):
    """Stored features [N, L, H] classify like the same maps one by one; shares and the band take the model."""
    features, kinds = noisy_prototypes(seed=2)
    stacked = {k: features[k].to_numpy().reshape(30, 2, 3) for k in patternlearn.INPUTS}  # 180 maps as [30, 2, 3]
    by_map = learned.classify(features)
    assert np.array_equal(learned.classify(stacked).ravel(), by_map)
    shares = patterns.shares_by_layer(stacked, learned)
    expected = [[np.mean(by_map.reshape(30, 2, 3)[:, layer] == k) for k in patterns.KINDS] for layer in range(2)]
    np.testing.assert_allclose(shares.to_numpy(), expected)
    table = patterns.classifier_shares(stacked, learned, patternlearn.bootstrap(features, kinds, n_boot=3), level=1.0)
    assert ((table["low"] <= table["high"] + 1e-12)).all() and set(table["layer"]) == {1, 2, "all"}
    with pytest.raises(ValueError, match="features miss"):
        learned.classify({k: v for k, v in stacked.items() if k != "in_unit"})
    with pytest.raises(ValueError, match="one label per map"):
        patternlearn.fit(features, kinds[:-1])
