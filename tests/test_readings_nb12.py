"""readings.nb12 on small synthetic results whose answers are known."""
import numpy as np
import pandas as pd
import pytest

from bertlook_utils.analyses.scoreboard import SCORED, Scoreboard
from bertlook_utils.analyses.surface import VIG_COLUMNS
from bertlook_utils.readings import nb12


def _scan() -> pd.DataFrame:
    """Two layers of two heads: attention 2 restores most, head 2-1 most of the heads, head 1-2 below 0."""
    rows = [("attention 2", "attention", 2, 0, 0.5, 0.4, 0.6), ("mlp 1", "mlp", 1, 0, 0.2, 0.1, 0.3),
            ("2-1", "head", 2, 1, 0.1, 0.05, 0.15), ("1-1", "head", 1, 1, 0.04, 0.01, 0.07),
            ("2-2", "head", 2, 2, 0.0, -0.1, 0.1), ("mlp 2", "mlp", 2, 0, -0.01, -0.05, 0.03),
            ("attention 1", "attention", 1, 0, -0.02, -0.1, 0.06), ("1-2", "head", 1, 2, -0.08, -0.12, -0.04)]
    frame = pd.DataFrame(rows, columns=["component", "kind", "layer", "head", "share", "low", "high"])
    return frame.assign(pairs=9)


def test_the_task_counts_positive_and_clear_gaps():
    table = pd.DataFrame({"base": [0.3, 0.2, 0.4, 0.1], "relevant": [0.35, 0.205, 0.39, 0.2]})
    reading = nb12.task(table.assign(gap=table["relevant"] - table["base"]))
    assert (reading.pairs, reading.positive, reading.clear) == (4, 3, 2)
    assert reading.base_median == pytest.approx(0.25)


def test_the_scan_reads_the_strongest_block_and_the_chosen_heads():
    reading = nb12.scan(_scan(), [("head", 1, 0), ("head", 0, 0)])
    assert (reading.attention_top, reading.mlp_top, reading.pairs) == ("attention 2", "mlp 1", 9)
    assert reading.heads_text == "2-1 (0.10) and 1-1 (0.04)" and reading.chosen_layers == (2, 1)
    assert (reading.heads, reading.heads_above, reading.heads_below, reading.last_layer_above) == (4, 2, 1, 1)


def _controls() -> pd.DataFrame:
    """A `termheads.confirm` table: the chosen set, random and same-layer sets, every head, the exact controls."""
    return pd.DataFrame({"set": ["chosen (2-1)", "random sets of 1 heads (mean of 5)", "best random set",
                                 "same-layer sets of 1 other heads (mean of 5)", "best same-layer set",
                                 "every head", "the last layer (everything)", "self-patch (chosen, from the base)"],
                         "share": [0.3, 0.0, 0.25, 0.1, 0.15, 0.5, 1.0, 0.0],
                         "low": [0.2, -0.1, np.nan, 0.05, np.nan, 0.4, 1.0, 0.0],
                         "high": [0.4, 0.1, np.nan, 0.12, np.nan, 0.6, 1.0, 0.0], "pairs": 7})


def test_the_controls_say_whether_the_chosen_set_clears_the_random_ones():
    table = _controls()
    reading = nb12.controls(table)
    assert reading.apart and not reading.beats_best and reading.beats_neighbours and reading.pairs == 7
    assert (reading.chosen_share, reading.random_high, reading.best_random) == (0.3, 0.1, 0.25)
    assert (reading.neighbour_share, reading.neighbour_high, reading.best_neighbour) == (0.1, 0.12, 0.15)
    table.loc[4, "share"] = 0.21  # a same-layer set above the chosen set's lower bound
    assert not nb12.controls(table).beats_neighbours


def _looked() -> tuple[pd.DataFrame, pd.DataFrame]:
    """(scan, Vig scores): `_scan`'s four heads, 1-2 attending most to identical words, and four heads of a third
    layer that restore least, tied on every pattern (enough heads for a within-layer interval)."""
    found = _scan()
    heads = found[found["kind"] == "head"][["layer", "head"]]
    vig = heads.assign(**{p: np.arange(4.0) for p in VIG_COLUMNS}).assign(identical=[0.0, 0.1, 0.2, 0.9])
    vig["identical_other"] = np.nan  # a pattern without rows is left out
    more = pd.DataFrame({"layer": [3] * 4, "head": [1, 2, 3, 4]})
    found = pd.concat([found, more.assign(component=["3-1", "3-2", "3-3", "3-4"], kind="head", share=-0.2,
                                          low=-0.3, high=-0.1, pairs=9)], ignore_index=True)
    vig = pd.concat([vig, more.assign(**{p: 9.0 for p in VIG_COLUMNS}).assign(identical=0.05, identical_other=np.nan)],
                    ignore_index=True)
    return found, vig


def test_the_patterns_rank_the_identical_words_head_by_its_share():
    found, vig = _looked()
    reading = nb12.patterns(vig, found, [("head", 1, 0)])
    assert reading.identical_head == "1-2" and reading.identical_rank == 4  # above the third layer's heads only
    assert reading.chosen_identical_rank == 8 and "identical_other" not in reading.rho
    for rho, low, high in (reading.rho["next"], reading.within["next"]):  # shares fall as the planted scores rise
        assert rho == pytest.approx(-1.0) and low <= rho <= high


def test_the_patterns_read_within_layers_apart_from_across():
    heads = pd.DataFrame({"layer": np.repeat([1, 2, 3], 4), "head": np.tile([1, 2, 3, 4], 3)})
    share = np.tile([0.1, 0.2, 0.3, 0.4], 3) - 0.5 * heads["layer"]  # within a layer it rises with the score
    labels = [f"{layer}-{head}" for layer, head in zip(heads["layer"], heads["head"])]
    found = heads.assign(component=labels, kind="head", share=share, low=share - 0.1, high=share + 0.1, pairs=9)
    vig = heads.assign(**{p: np.tile([1.0, 2.0, 3.0, 4.0], 3) + heads["layer"] for p in VIG_COLUMNS})
    reading = nb12.patterns(vig, found, [("head", 0, 0)])
    assert reading.within["next"][0] == pytest.approx(1.0) and reading.rho["next"][0] < 0  # layers mix across
    assert reading.within_text.startswith("next 1.00") and "next -" in reading.rho_text
    assert reading.within_said["next"] == "1.00, 1.00 to 1.00" and reading.rho_said["next"].startswith("-")


def _copies() -> pd.DataFrame:
    """A `termheads.copies` table: the first copy opens a larger gap, and the heads restore a little more of it."""
    return pd.DataFrame({"copy": ["second copy", "first copy", "first - second"], "gap": [0.04, 0.08, np.nan],
                         "share": [0.25, 0.3, 0.05], "low": [0.2, 0.22, -0.01], "high": [0.3, 0.38, 0.12],
                         "pairs": 30})


def test_the_copies_reading_names_each_row():
    reading = nb12.copies(_copies())
    assert (reading.pairs, reading.second_gap, reading.first_gap) == (30, 0.04, 0.08)
    assert reading.first == (0.3, 0.22, 0.38) and reading.difference == (0.05, -0.01, 0.12)


def test_the_scoreboard_reading_finds_the_ties_and_the_closest_map():
    n, depth, n_random = 6, 2, 3
    curves = np.full((n, len(SCORED) + n_random, depth), 0.05)
    curves[:, SCORED.index("attention")] = 0.3 + 0.04 * (np.arange(n) % 2)[:, None]  # the same mean gain
    curves[:, SCORED.index("norm")] = 0.3 + 0.04 * (np.arange(n) % 2 == 0)[:, None]
    curves[:, SCORED.index("attention rollout")] = 0.1
    spearman = np.full((n, 3, 5, 5), 0.5)
    spearman[:, :, 1, 4] = 0.9  # norm against value_zeroing
    spearman[:, :, 3, 4] = 0.2  # alti
    board = Scoreboard(curves, spearman, depth, n_random)
    reading = nb12.scoreboard(board.deletion(), board.areas(), board.agreement(), depth)
    assert reading.unseparated == ("norm",) and reading.all_above_random is False  # same mean, paired diff 0 ± ...
    assert reading.unseparated_text.startswith("norm (+0.000, ")
    assert reading.rollout_cost[0] == pytest.approx(0.22, abs=1e-6)
    assert reading.closest == "norm" and reading.alti_least_layers == 3 and reading.layers == 3
    assert reading.agreement["alti"] == pytest.approx((0.2, 0.2))
    assert reading.random_area == pytest.approx(0.05)


def test_one_sentences_maps_read_the_diagonal_and_the_cls_column():
    identity, to_cls = np.eye(3)[None].repeat(2, 0), np.zeros((2, 3, 3))
    to_cls[:, :, 0] = 1
    reading = nb12.one_sentence({"block": identity, "attention": to_cls}, layer=2)
    assert reading.own == {"block": 1.0, "attention": pytest.approx(1 / 3)}
    assert reading.cls == {"block": 0.0, "attention": 1.0}


def test_the_scoreboard_reading_renders_its_ranges_and_the_paired_comparisons():
    n, depth, n_random = 4, 2, 2
    curves = np.full((n, len(SCORED) + n_random, depth), 0.05)
    for name, level in (("attention", 0.32), ("integrated gradients", 0.3), ("alti rollout", 0.29),
                        ("value_zeroing rollout", 0.2)):
        curves[:, SCORED.index(name)] = level + 0.02 * (np.arange(n) % 2)[:, None]
    spearman = np.full((n, 2, 5, 5), 0.5)
    spearman[:, 0, 1, 4], spearman[:, 1, 1, 4] = 0.9, 0.95  # norm against value_zeroing, per layer
    board = Scoreboard(curves, spearman, depth, n_random)
    reading = nb12.scoreboard(board.deletion(), board.areas(), board.agreement(), depth)
    assert reading.best == "attention" and reading.unseparated == () and reading.unseparated_text == "none"
    assert reading.attention_vs_ig[0] == pytest.approx(0.02) and reading.alti_vs_ig[0] == pytest.approx(-0.01)
    assert (reading.vz_rank, reading.methods) == (4, len(SCORED))
    assert reading.norm_rollout_cost[0] == pytest.approx(0.0)  # both at the floor 0.05
    assert reading.norm_range == "0.90–0.95" and reading.alti_range == "0.50–0.50"
    assert reading.rollout_cost_text.startswith(f"{reading.rollout_cost[0]:.3f} (paired interval ")
    assert reading.alti_gain == pytest.approx(reading.alti_over_attention_rollout[0])


def test_the_controls_reading_says_whether_both_controls_are_exact():
    table = _controls()
    assert nb12.controls(table).exact
    table.loc[6, "share"] = 0.98  # the last layer short of the whole gap
    assert not nb12.controls(table).exact
    assert nb12.scan(_scan(), [("head", 1, 0)]).n_chosen == 1


def test_paper_vs_run_states_where_this_run_departs_from_ferrando_and_mohebbi():
    n, depth, n_random = 4, 2, 2
    curves = np.full((n, len(SCORED) + n_random, depth), 0.05)
    for name, level in (("attention", 0.32), ("integrated gradients", 0.3), ("alti rollout", 0.3),
                        ("value_zeroing rollout", 0.06)):
        curves[:, SCORED.index(name)] = level + 0.02 * (np.arange(n) % 2)[:, None]
    curves[1, SCORED.index("alti rollout")] += 0.01  # paired with integrated gradients: +0.0025, interval holds 0
    board = Scoreboard(curves, np.full((n, 2, 5, 5), 0.5), depth, n_random)
    reading = nb12.scoreboard(board.deletion(), board.areas(), board.agreement(), depth)
    rows = nb12.one_sentence({name: np.eye(3)[None].repeat(2, 0) * share for name, share in
                              (("attention", 0.1), ("norm", 0.2), ("block", 0.7))}, layer=2)
    found, vig = _looked()
    looked = nb12.patterns(vig, found, [("head", 1, 0)])
    table = nb12.paper_vs_run(nb12.scan(_scan(), [("head", 1, 0)]), nb12.controls(_controls()), reading, rows,
                              looked, nb12.copies(_copies()))
    assert "where it was absent, 0.30; attention 2 alone" in table.set_index("paper").loc["Chen et al. 2024",
                                                                                             "this run"]
    assert table.set_index("paper").loc["Chen et al. 2024", "this run"].endswith(
        "unlike their early duplicate-token heads, the identical-words head 1-2 restores -0.080 (rank 4 of 8)")
    assert list(table["paper"]) == list(nb12.FINDINGS)
    run = dict(zip(table["paper"], table["this run"]))
    assert "against integrated gradients +0.003" in run["Ferrando et al. 2022"]
    assert "not separable" in run["Ferrando et al. 2022"]
    assert run["Mohebbi et al. 2023"].startswith(f"its rollout ranks 4 of {len(SCORED)} by deletion gain")
    assert "token-deletion test" in nb12.FINDINGS["Ferrando et al. 2022"]
    assert run["Kobayashi et al. 2021"].startswith(
        "a token's own share, one sentence, layer 2: attention 0.10, norm 0.20, with the residual and the LayerNorm "
        "(block) 0.70; on which tokens mix")
    assert [nb12._verdict(p) for p in ((0.1, 0.05, 0.2), (-0.1, -0.2, -0.05), (0.0, -0.1, 0.1))] == [
        "ahead", "behind", "not separable"]
