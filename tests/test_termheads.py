"""Term pairs from the real corpus, and the restored share on its controls."""
import dataclasses

import numpy as np
import pandas as pd
import pytest

from bertlook_utils.analyses import termheads
from bertlook_utils.data import termpairs


@pytest.fixture(scope="module")
def pairs(encoder):
    return termpairs.term_pairs(encoder.tokenizer, n=3, seed=0)


def test_a_pair_differs_in_one_word_and_aligns_every_token(encoder, pairs):
    for pair in pairs:
        differ = [i for i, (a, b) in enumerate(zip(pair.base, pair.relevant)) if a != b]
        assert differ == [pair.position] and pair.relevant[pair.position] == pair.query
        assert [w.lower() for w in pair.base].count(pair.query) == 1  # once in the base, twice in the relevant one
        assert [w.lower() for w in pair.relevant].count(pair.query) == 2
        assert len(encoder.prepare(list(pair.base)).tokens) == len(encoder.prepare(list(pair.relevant)).tokens)
    assert pairs == termpairs.term_pairs(encoder.tokenizer, n=3, seed=0)  # seeded
    with pytest.raises(ValueError, match="n must be a positive integer"):
        termpairs.term_pairs(encoder.tokenizer, n=0)


def test_the_first_copy_is_the_same_swap_one_step_earlier(encoder, pairs):
    for pair in pairs:
        earlier = termpairs.first_copy(pair)
        differ = [i for i, (a, b) in enumerate(zip(earlier.base, earlier.relevant)) if a != b]
        assert earlier.relevant == pair.base and differ == [earlier.position] != [pair.position]
        assert earlier.base[earlier.position] == pair.replaced == earlier.replaced
        assert pair.query not in [w.lower() for w in earlier.base]  # absent, then present once
        assert len(encoder.prepare(list(earlier.base)).tokens) == len(encoder.prepare(list(pair.base)).tokens)
    with pytest.raises(ValueError, match="found 2"):
        termpairs.first_copy(dataclasses.replace(pairs[0], base=pairs[0].relevant))  # the term twice


def test_the_self_patch_restores_nothing_and_the_last_layer_everything(encoder, pairs):
    last = ("layer", encoder.n_layers - 1, None)
    sets = [[("head", 0, 0)], [("attention", 2, None)], [last]]
    shares, gaps = termheads.restored_shares(encoder, pairs, sets)
    assert shares.shape == (3, 3) and (gaps != 0).all()
    np.testing.assert_allclose(shares[:, 2], 1.0, atol=1e-4)
    self_patch, _ = termheads.restored_shares(encoder, pairs, sets, source="base")
    np.testing.assert_allclose(self_patch, 0.0, atol=1e-3)
    with pytest.raises(ValueError, match="source must be one of"):
        termheads.restored_shares(encoder, pairs, sets, source="query")


def test_the_cached_pass_matches_the_direct_one_and_random_sets_are_seeded(encoder, pairs, tmp_path):
    sets = [[("head", 5, 10)], [("mlp", 4, None)]]
    direct, gaps = termheads.restored_shares(encoder, pairs, sets)
    cached, cached_gaps = termheads.shares(encoder, pairs, sets, cache_dir=tmp_path, progress=False)
    np.testing.assert_allclose(cached, direct, atol=1e-6)
    np.testing.assert_allclose(cached_gaps, gaps, atol=1e-7)
    again, _ = termheads.shares(encoder, pairs, sets, cache_dir=tmp_path, progress=False)
    np.testing.assert_array_equal(again, cached)
    drawn = termheads.random_head_sets(encoder, size=3, n=4, seed=1)
    assert drawn == termheads.random_head_sets(encoder, size=3, n=4, seed=1) and len(drawn) == 4
    assert all(len(set(s)) == 3 and all(c[0] == "head" for c in s) for s in drawn)
    assert termheads.component_label(("head", 5, 10)) == "6-11"
    assert termheads.component_label(("mlp", 2, None)) == "mlp 3"
    with pytest.raises(ValueError, match="size must be between 1 and 72"):
        termheads.random_head_sets(encoder, size=73, n=1)


def test_the_scan_keeps_pairs_with_a_clear_gap_only(encoder, pairs, tmp_path):
    _, gaps = termheads.restored_shares(encoder, pairs, [[("mlp", 0, None)]])
    frame = termheads.scan(encoder, pairs, min_gap=float(np.sort(gaps)[1]), cache_dir=tmp_path, progress=False)
    assert len(frame) == encoder.n_layers * (encoder.n_heads + 2) and (frame["pairs"] == 2).all()
    assert frame["share"].is_monotonic_decreasing and (frame["low"] <= frame["share"]).all()
    found, gaps = termheads.shares(encoder, pairs, [[("mlp", 0, None)]], progress=False)
    clear = gaps >= np.sort(gaps)[1]
    mlp = frame.set_index("component").loc["mlp 1", "share"]  # the ratio of sums over the clear pairs
    assert mlp == pytest.approx((found[clear, 0] * gaps[clear]).sum() / gaps[clear].sum(), abs=1e-6)
    with pytest.raises(ValueError, match="only 0 of 3 pairs"):
        termheads.scan(encoder, pairs, min_gap=10.0, cache_dir=tmp_path, progress=False)


def test_the_confirmation_puts_the_chosen_heads_beside_their_controls(encoder, pairs, tmp_path):
    table = termheads.confirm(encoder, [("head", 5, 10), ("head", 5, 7)], pairs, n_random=3, min_gap=0.0,
                              cache_dir=tmp_path, progress=False).set_index("set")
    assert list(table.index) == ["chosen (6-11, 6-8)", "random sets of 2 heads (mean of 3)", "best random set",
                                 "same-layer sets of 2 other heads (mean of 3)", "best same-layer set", "every head",
                                 "the last layer (everything)", "self-patch (chosen, from the base)"]
    assert table.loc["the last layer (everything)", "share"] == pytest.approx(1.0, abs=1e-4)
    assert table.loc["self-patch (chosen, from the base)", "share"] == pytest.approx(0.0, abs=1e-3)
    for control, best in (("random sets of 2 heads (mean of 3)", "best random set"),
                          ("same-layer sets of 2 other heads (mean of 3)", "best same-layer set")):
        random = table.loc[control]
        assert random["low"] <= random["share"] <= random["high"] <= table.loc[best, "share"] + 1e-12


def test_the_copies_put_the_first_copy_beside_the_second(encoder, pairs, tmp_path):
    last = [("layer", encoder.n_layers - 1, None)]  # everything downstream: restores both gaps whole
    table = termheads.copies(encoder, last, pairs, min_gap=0.0, cache_dir=tmp_path, progress=False)
    gaps = np.stack([termheads.relevance(encoder, p)["gap"].to_numpy()
                     for p in (pairs, [termpairs.first_copy(p) for p in pairs])])
    clear = (gaps >= 0).all(0)  # a pair counts when both of its gaps are clear
    assert list(table["copy"]) == ["second copy", "first copy", "first - second"]
    assert (table["pairs"] == clear.sum()).all() and clear.sum() >= 2
    np.testing.assert_allclose(table[["share", "low", "high"]].to_numpy()[:2], 1.0, atol=1e-4)
    np.testing.assert_allclose(table[["share", "low", "high"]].to_numpy()[2], 0.0, atol=1e-4)
    np.testing.assert_allclose(table["gap"].to_numpy()[:2], np.median(gaps[:, clear], 1), atol=1e-6)
    with pytest.raises(ValueError, match="have both gaps of at least 10"):
        termheads.copies(encoder, last, pairs, min_gap=10.0, cache_dir=tmp_path, progress=False)


def test_same_layer_sets_match_the_chosen_heads_layers_and_leave_them_out(encoder):
    chosen = [("head", 5, 10), ("head", 5, 7), ("head", 2, 0)]
    drawn = termheads.same_layer_head_sets(encoder, chosen, n=30, seed=0)
    assert drawn == termheads.same_layer_head_sets(encoder, chosen, n=30, seed=0) and len(drawn) == 30
    for heads in drawn:
        assert sorted(c[1] for c in heads) == [2, 5, 5] and len(set(heads)) == 3 and not set(heads) & set(chosen)
    assert {c for heads in drawn for c in heads if c[1] == 5} == {("head", 5, h) for h in range(12)} - set(chosen)
    with pytest.raises(ValueError, match="more than half of a layer"):
        termheads.same_layer_head_sets(encoder, [("head", 0, h) for h in range(7)], n=1)
    with pytest.raises(ValueError, match="chosen must be heads"):
        termheads.same_layer_head_sets(encoder, [("mlp", 0, None)], n=1)


def test_relevance_is_the_gap_that_the_shares_divide_by_and_top_heads_reads_the_scan(encoder, pairs):
    table = termheads.relevance(encoder, pairs)
    _, gaps = termheads.restored_shares(encoder, pairs, [[("mlp", 0, None)]])
    assert list(table["query"]) == [p.query for p in pairs] and list(table["replaced"]) == [p.replaced for p in pairs]
    np.testing.assert_allclose(table["gap"], gaps, atol=1e-6)
    np.testing.assert_allclose(table["relevant"] - table["base"], table["gap"], atol=1e-12)
    found = pd.DataFrame({"kind": ["attention", "head", "head", "mlp", "head"], "layer": [6, 2, 6, 5, 1],
                          "head": [0, 3, 11, 0, 1], "share": [0.9, 0.1, 0.3, 0.5, -0.2]})
    assert termheads.top_heads(found, 2) == [("head", 5, 10), ("head", 1, 2)]  # 0-based, blocks skipped
    with pytest.raises(ValueError, match="size must be between 1 and 3"):
        termheads.top_heads(found, 4)
