"""patternnet: maps on the grid, the CNN learning prototypes built by construction, honest cross-validation,
the cache, and the pass over many maps."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from builders import (column_map, identity_map, make_encoded, next_map, prev_map, segment_ids_for, spread_map,
                      uniform_map)

from bertlook_utils import patternnet, patterns
from bertlook_utils.analyses.patterns.evaluation import stratified_folds
from bertlook_utils.analyses.patterns.kinds import PATTERNS
from bertlook_utils.extract import Batch

N, HALF = 40, 20
SINGLE = ["[CLS]"] + [f"w{i}" for i in range(N - 2)] + ["[SEP]"]
PAIR = ["[CLS]"] + [f"a{i}" for i in range(HALF - 2)] + ["[SEP]"] + [f"b{i}" for i in range(N - HALF - 1)] + ["[SEP]"]
FAST = {"epochs": 30, "prototypes": 0}  # the prototype net below trains on prototypes given as labelled images


def within_segments(tokens) -> np.ndarray:
    segments = segment_ids_for(tokens)
    return spread_map(len(tokens), lambda i: [j for j in range(len(tokens)) if segments[j] == segments[i]])


def test_grid_channels_of_known_maps():
    n = 64
    tokens = ["[CLS]"] + ["w"] * (n - 2) + ["[SEP]"]
    grid = patternnet.encoded_grids([make_encoded(tokens, uniform_map(n))])[0]
    assert grid.shape == (len(patternnet.CHANNELS), patternnet.GRID, patternnet.GRID)
    scaled, relative, special, segment = grid
    assert np.allclose(scaled, 1) and np.allclose(relative, np.log(2) / np.log(n + 1))
    assert np.allclose(special[:, 0], 0.5) and np.allclose(special[:, 1:-1], 0) and np.allclose(segment, 1)
    grid = patternnet.encoded_grids([make_encoded(PAIR[:12] + ["[SEP]"], identity_map(13))])[0]  # n < GRID
    near = np.abs(np.subtract.outer(np.arange(patternnet.GRID), np.arange(patternnet.GRID)))
    assert grid[0][near == 0].min() >= 0.5 and grid[0][near > 3].max() == 0  # cells repeat: the diagonal stays
    pair = patternnet.encoded_grids([make_encoded(PAIR, within_segments(PAIR))])[0]
    assert pair[3, 0, 0] == 1 and pair[3, 0, -1] == 0  # same segment top left, not across


def test_padded_batches_give_the_images_of_each_map_alone():
    short = SINGLE[:30] + ["[SEP]"]
    encs = [make_encoded(short, prev_map(len(short))), make_encoded(PAIR, column_map(N, [0, HALF - 1]))]
    attn = torch.zeros(2, 1, 1, N, N)
    attn[0, 0, 0, :len(short), :len(short)] = torch.from_numpy(encs[0].attn[0, 0])
    attn[1] = torch.from_numpy(encs[1].attn[0])
    valid = torch.zeros(2, N, dtype=torch.bool)
    valid[0, :len(short)] = True
    valid[1] = True
    batch = Batch.build(attn, valid, encs, "[CLS]", "[SEP]")
    padded = patternnet.grid_batch(batch.attn, batch.valid, batch.sinks, batch.segment)[:, 0, 0].numpy()
    np.testing.assert_allclose(padded, patternnet.encoded_grids(encs), atol=1e-6)


@pytest.fixture(scope="module")
def prototype_net():
    """A net trained on synthetic prototypes of the six kinds only (no hand labels)."""
    grids, kinds = patternnet.prototype_grids(20, patterns.KINDS, seed=1)
    return patternnet.train(grids, kinds, seed=0, settings=FAST)


def test_the_net_learns_prototypes_built_another_way(prototype_net):
    """Prototypes built here (other lengths and builders than the package's) get their kind."""
    rng = np.random.default_rng(0)
    cases = [("vertical", column_map(N, [0]), SINGLE), ("vertical", column_map(N, [0, HALF - 1, N - 1]), PAIR),
             ("diagonal", prev_map(N), SINGLE), ("diagonal", next_map(N), SINGLE), ("diagonal", identity_map(N), PAIR),
             ("vertical+diagonal", (0.5 * column_map(N, [0]) + 0.5 * prev_map(N)).astype(np.float32), SINGLE),
             ("block", within_segments(PAIR), PAIR), ("broad", uniform_map(N), PAIR),
             ("heterogeneous", spread_map(N, lambda i: rng.choice(N, 3, replace=False)), SINGLE)]
    grids = patternnet.encoded_grids([make_encoded(tokens, attn) for _, attn, tokens in cases])
    assert list(prototype_net.predict(grids)) == [kind for kind, _, _ in cases]
    assert prototype_net.kinds == patterns.KINDS


def test_prototypes_follow_the_labels_scheme():
    _, kinds = patternnet.prototype_grids(2, PATTERNS, seed=0)
    assert "broad" not in set(kinds) and list(kinds).count("heterogeneous") == 4  # near-uniform: heterogeneous


def test_training_is_seeded_and_the_state_round_trips(prototype_net):
    grids, kinds = patternnet.prototype_grids(3, patterns.KINDS, seed=5)
    again = patternnet.train(*patternnet.prototype_grids(20, patterns.KINDS, seed=1), seed=0, settings=FAST)
    np.testing.assert_allclose(again.probabilities(grids), prototype_net.probabilities(grids), atol=1e-5)
    restored = patternnet.TrainedNet.from_state(prototype_net.state())
    assert restored.kinds == prototype_net.kinds
    np.testing.assert_allclose(restored.probabilities(grids), prototype_net.probabilities(grids), atol=1e-6)


def test_trained_nets_are_cached_by_images_and_labels(tmp_path, monkeypatch):
    grids, kinds = patternnet.prototype_grids(2, PATTERNS, seed=0)
    settings = {"epochs": 1, "prototypes": 0}
    first = patternnet.trained(grids, kinds, settings=settings, cache_dir=tmp_path)

    def train_again(*args, **kwargs):
        raise RuntimeError("trained again")

    monkeypatch.setattr(patternnet, "train", train_again)
    second = patternnet.trained(grids, kinds, settings=settings, cache_dir=tmp_path)
    np.testing.assert_allclose(second.probabilities(grids), first.probabilities(grids), atol=1e-6)
    with pytest.raises(RuntimeError, match="trained again"):  # other labels: a cache miss
        patternnet.trained(grids, kinds[::-1], settings=settings, cache_dir=tmp_path)


def test_cross_validation_uses_the_rules_folds_and_never_trains_on_the_held_out_fold(monkeypatch):
    grids, kinds = patternnet.prototype_grids(5, PATTERNS, seed=0)
    grids[:, 0, 0, 0] = np.arange(len(grids))  # each image carries its row number
    seen = []

    class Remembers:
        kinds = PATTERNS

        def __init__(self, g, seed):
            seen.append((seed, set(g[:, 0, 0, 0].astype(int))))

        def probabilities(self, g, batch_size=512):
            return np.tile(np.eye(len(self.kinds))[0], (len(g), 1))  # vertical

    monkeypatch.setattr(patternnet, "train_many", lambda jobs, settings, cache_dir, workers: [
        Remembers(g, seed) for g, _, seed in jobs])
    cv = patternnet.cross_validate(grids, kinds, folds=5, seed=2)
    assert np.array_equal(cv["fold"], stratified_folds(kinds, 5, seed=2))
    for fold, (seed, used) in enumerate(seen):
        assert seed == 2 and used == set(np.flatnonzero(cv["fold"].to_numpy() != fold))
    assert (cv["predicted"] == "vertical").all() and (cv["p_vertical"] == 1).all()
    seen.clear()  # an ensemble: one net per seed in every fold, none of them on the held-out fold
    cv = patternnet.cross_validate(grids, kinds, folds=5, seed=2, seeds=(7, 8))
    assert [seed for seed, _ in seen] == [7, 8] * 5
    for i, (_, used) in enumerate(seen):
        assert used == set(np.flatnonzero(cv["fold"].to_numpy() != i // 2))
    seen.clear()  # one net per seed, scored on its own: the same folds for every seed
    each = patternnet.cross_validate_each(grids, kinds, seeds=(7, 8), folds=5, seed=2)
    assert list(each) == [7, 8] and [seed for seed, _ in seen] == [7] * 5 + [8] * 5
    for i, (_, used) in enumerate(seen):
        assert used == set(np.flatnonzero(each[7]["fold"].to_numpy() != i % 5))
    assert all(np.array_equal(frame["fold"], cv["fold"]) for frame in each.values())


def test_nets_trained_in_other_processes_are_the_nets_trained_in_place(tmp_path):
    grids, kinds = patternnet.prototype_grids(2, PATTERNS, seed=0)
    settings = {"epochs": 2, "prototypes": 0}
    here = [patternnet.train(grids, kinds, seed, settings) for seed in (0, 1)]
    there = patternnet.train_many([(grids, kinds, 0), (grids, kinds, 1)], settings, tmp_path, workers=2)
    for a, b in zip(here, there):
        assert a.kinds == b.kinds
        assert all(np.array_equal(v, b.state()[k]) for k, v in a.state().items() if k != "kinds")
    cached = patternnet.trained(grids, kinds, 1, settings, cache_dir=tmp_path)  # what the processes cached
    np.testing.assert_array_equal(cached.probabilities(grids), here[1].probabilities(grids))
    with pytest.raises(ValueError, match="workers must be at least 1"):
        patternnet.train_many([(grids, kinds, 2)], settings, None, workers=0)


def test_an_ensemble_averages_its_nets_and_is_counted_like_one(prototype_net):
    grids, _ = patternnet.prototype_grids(2, patterns.KINDS, seed=4)
    other = patternnet.train(*patternnet.prototype_grids(20, patterns.KINDS, seed=2), seed=1, settings=FAST)
    ensemble = patternnet.NetEnsemble([prototype_net, other])
    mean = (prototype_net.probabilities(grids) + other.probabilities(grids)) / 2
    np.testing.assert_allclose(ensemble.probabilities(grids), mean, atol=1e-6)
    assert list(ensemble.predict(grids)) == list(np.asarray(patterns.KINDS, dtype=object)[mean.argmax(1)])
    assert ensemble.kinds == patterns.KINDS
    with pytest.raises(ValueError, match="at least one seed"):
        patternnet.trained_ensemble(grids, patterns.KINDS[:1] * len(grids), seeds=())


def test_bad_input_is_refused():
    grids, kinds = patternnet.prototype_grids(1, PATTERNS, seed=0)
    with pytest.raises(ValueError, match="one label per image"):
        patternnet.train(grids, kinds[:-1], settings=FAST)
    with pytest.raises(ValueError, match="unknown labels"):
        patternnet.train(grids, np.array(["stripy"] * len(grids), dtype=object), settings=FAST)
    with pytest.raises(ValueError, match="one map"):
        patternnet.encoded_grids([make_encoded(SINGLE, np.stack([[uniform_map(N)] * 2]))])
