"""patterns: features and rules on synthetic maps whose pattern is known by construction."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import column_map, identity_map, prev_map, random_row_stochastic, segment_ids_for, spread_map, uniform_map

from bertlook_utils import compare, finetune, patterns
from bertlook_utils.extract import Batch
from bertlook_utils.models import Encoded

N = 40
SINGLE = ["[CLS]"] + [f"w{i}" for i in range(N - 2)] + ["[SEP]"]
HALF = N // 2  # pair: [CLS] a1..a18 [SEP] | b1..b19 [SEP]
PAIR = ["[CLS]"] + [f"a{i}" for i in range(HALF - 2)] + ["[SEP]"] + [f"b{i}" for i in range(N - HALF - 1)] + ["[SEP]"]
PAIR_SEGMENTS = segment_ids_for(PAIR)


def single_segments():
    return [0] * N


def block_map() -> np.ndarray:
    """Every row spreads its mass evenly over the tokens of its own segment ([CLS]/[SEP] rows included)."""
    return spread_map(N, lambda i: [j for j in range(N) if PAIR_SEGMENTS[j] == PAIR_SEGMENTS[i]])


def mix(*maps_and_weights) -> np.ndarray:
    return sum(w * m for m, w in maps_and_weights).astype(np.float32)


@pytest.mark.parametrize("name, attn, tokens", [
    ("vertical", column_map(N, [0]), SINGLE),
    ("vertical", column_map(N, [0, HALF - 1, N - 1]), PAIR),
    ("diagonal", prev_map(N), SINGLE),
    ("diagonal", identity_map(N), PAIR),
    ("vertical+diagonal", mix((column_map(N, [0]), 0.5), (prev_map(N), 0.5)), SINGLE),
    ("block", block_map(), PAIR),
    ("heterogeneous", uniform_map(N), PAIR),
    ("heterogeneous", random_row_stochastic(np.random.default_rng(0), (N, N)), SINGLE),
])
def test_clear_prototypes_get_their_pattern(name, attn, tokens):
    segments = segment_ids_for(tokens)
    assert patterns.classify_map(attn, tokens, segments) == name


def test_block_needs_a_pair_input():
    """The same block map read as one segment is no block (the rules only look for blocks in pairs)."""
    assert patterns.classify_map(block_map(), PAIR, single_segments()) == "heterogeneous"


def test_features_of_known_maps():
    f = patterns.map_features(column_map(N, [0]), SINGLE, single_segments())
    assert f["stripes"] == pytest.approx(1) and f["special"] == pytest.approx(1)
    assert f["diagonal"] == pytest.approx(2 / N)  # row 0 to itself, row 1 to its previous token
    assert f["entropy"] == pytest.approx(0, abs=1e-5) and f["within"] == 0
    f = patterns.map_features(prev_map(N), PAIR, PAIR_SEGMENTS)
    assert f["diagonal"] == pytest.approx(1)
    assert f["special"] == pytest.approx(3 / N)  # the rows after [CLS] and each [SEP], and row 0 on itself
    f = patterns.map_features(uniform_map(N), PAIR, PAIR_SEGMENTS)
    assert f["entropy"] == pytest.approx(1, abs=1e-5)
    a_real = HALF - 2  # a real token of segment A sees a_real A tokens out of N - 3 real tokens
    assert 0.4 < f["within"] < 0.6 and f["within"] == pytest.approx(
        (a_real * a_real / (N - 3) + (N - 3 - a_real) * (N - 3 - a_real) / (N - 3)) / (N - 3), rel=1e-4)
    assert patterns.map_features(block_map(), PAIR, PAIR_SEGMENTS)["within"] == pytest.approx(1)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="rows must sum to 1"):
        patterns.classify_map(np.ones((N, N)), SINGLE, single_segments())
    with pytest.raises(ValueError, match="for the n = "):
        patterns.classify_map(uniform_map(N - 1), SINGLE, single_segments())


def test_reducer_counts_each_head_of_each_input():
    """Two heads with known patterns, over a padded batch of a single and a pair input."""
    short = SINGLE[:-11] + ["[SEP]"]  # 30 tokens, padded to 40 in the batch
    n = len(short)
    single = np.stack([prev_map(n), column_map(n, [0])])[None]
    pair = np.stack([prev_map(N), block_map()])[None]
    inputs = [Encoded(short, list(range(n)), short, [0] * n, single),
              Encoded(PAIR, list(range(N)), PAIR, PAIR_SEGMENTS, pair)]
    attn = torch.zeros(2, 1, 2, N, N)
    attn[0, :, :, :n, :n] = torch.from_numpy(single)
    attn[1] = torch.from_numpy(pair)
    valid = torch.zeros(2, N, dtype=torch.bool)
    valid[0, :n] = True
    valid[1] = True
    counter = patterns.PatternCounts()
    counter.update(Batch.build(attn, valid, inputs, "[CLS]", "[SEP]"))
    index = {p: i for i, p in enumerate(patterns.PATTERNS)}
    assert counter.counts[0, 0, index["diagonal"]] == 2
    assert counter.counts[0, 1, index["vertical"]] == 1 and counter.counts[0, 1, index["block"]] == 1
    shares = counter.by_layer()
    assert shares.loc[1, "diagonal"] == pytest.approx(0.5) and shares.sum(1).iloc[0] == pytest.approx(1)


def test_fitting_recovers_separable_thresholds_and_cross_validation_is_out_of_fold():
    rng = np.random.default_rng(0)
    rows, labels = [], []
    for _ in range(20):  # vertical: stripes high; diagonal: diagonal high; heterogeneous: neither
        rows.append(dict(stripes=rng.uniform(0.75, 1), diagonal=rng.uniform(0, 0.1)))
        labels.append("vertical")
        rows.append(dict(stripes=rng.uniform(0, 0.25), diagonal=rng.uniform(0.75, 1)))
        labels.append("diagonal")
        rows.append(dict(stripes=rng.uniform(0, 0.25), diagonal=rng.uniform(0, 0.1)))
        labels.append("heterogeneous")
    features = pd.DataFrame(rows).assign(special=0.0, within=0.0, entropy=0.5, is_pair=False)
    grid = dict(patterns.GRID, mix_stripes=(0.5,), mix_diagonal=(0.5,), block=(0.9,), block_entropy=(0.5,),
                vertical=(0.1, 0.5, 0.9), diagonal=(0.05, 0.5, 0.9))  # 0.5 / 0.5 separate the classes
    fitted = patterns.fit_thresholds(features, labels, grid)
    assert (fitted["vertical"], fitted["diagonal"]) == (0.5, 0.5)
    predicted = patterns.classify_features(features, features["is_pair"].to_numpy(), fitted)
    assert list(predicted) == labels
    cv = patterns.cross_validate(features, labels, folds=4, grid=grid)
    assert sorted(cv["fold"].unique()) == [0, 1, 2, 3]
    accuracy, f1, confusion = patterns.agreement(cv["label"], cv["predicted"])
    assert accuracy == 1 and f1 == 1 and confusion.to_numpy().trace() == len(labels)


def test_macro_f1_by_hand():
    truth = ["vertical", "vertical", "diagonal", "block"]
    guess = ["vertical", "diagonal", "diagonal", "heterogeneous"]
    # vertical 2/3, diagonal 2/3, block 0, heterogeneous 0
    assert patterns.macro_f1(truth, guess) == pytest.approx((2 / 3 + 2 / 3) / 4)


def test_the_hand_labels_are_complete():
    labels = patterns.load_labels()
    assert len(labels) >= 150 and labels["map_id"].is_unique
    assert set(labels["label"]) <= set(patterns.PATTERNS)
    assert labels["layer"].min() >= 1 and labels["head"].min() >= 1


@pytest.mark.parametrize("f1, expected", [(0.61, "macro-F1 0.61 (rules, 160 maps"), (float("nan"), "not measured (")])
def test_dark_secrets_comparison_reads_each_finding_off_the_results(f1, expected):
    """A 3 x 2 model whose layers 2 and 3 changed most; disabling head 1-2 gains 1/16 = 6.25 points."""
    similarity = {"topic": np.array([[1.0, 0.99], [0.8, 0.7], [0.9, 0.85]])}
    scan = pd.DataFrame({"layer": [0, 1, 1, 1], "head": [0, 1, 2, 0], "accuracy": [0.5, 0.375, 0.5625, 0.25],
                         "delta_accuracy": [0, -0.125, 0.0625, -0.25], "delta_loss": [0, 0.1, -0.1, 0.3]})
    scores = pd.DataFrame({"majority class": [0.1], "frozen encoder + linear head": [0.5], "fine-tuned": [0.75]},
                          index=["topic"])
    table = compare.dark_secrets(f1, 160, {"topic": 0.42}, similarity, finetune.scan_summary({"topic": scan}), scores)
    assert list(table.columns) == list(compare.COLUMNS)
    found = dict(zip(table["quantity"], table["this run"]))
    assert found["classifier vs hand labels"].startswith(expected) and "nan" not in found["classifier vs hand labels"]
    assert found["heterogeneous share (fine-tuned)"] == "42% (topic)"
    assert found["layers changed most by fine-tuning"] == "layers 2, 3 (topic)"
    assert found["best single-head disabling"] == "+6.2 points (topic)"
    assert found["fine-tuned vs frozen pre-trained"] == "+25.0 points (topic)"
    assert dict(zip(table["quantity"], table["paper"]))["heterogeneous share (fine-tuned)"] == "32% (MRPC) to 61% (QQP)"
