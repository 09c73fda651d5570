"""The scoreboard: its summaries on planted curves, and a real pass."""
import numpy as np
import pytest

from bertlook_utils.analyses import mixing, scoreboard
from bertlook_utils.analyses.scoreboard import SCORED, Scoreboard


def _planted(n_inputs=4, depth=2, n_random=3):
    curves = np.zeros((n_inputs, len(SCORED) + n_random, depth))
    curves[:, SCORED.index("alti rollout")] = 0.3  # every input: ALTI's deletions move the embedding most
    curves[:, len(SCORED):] = 0.1
    curves[:, len(SCORED):] += np.arange(n_inputs)[:, None, None] * 0.01  # inputs differ; random stays below
    spearman = np.ones((n_inputs, 6, 5, 5)) * 0.5
    spearman[:, :, mixing.METHODS.index("alti"), mixing.METHODS.index("value_zeroing")] = 0.8
    return Scoreboard(curves.astype(np.float32), spearman, depth, n_random)


def test_the_deletion_summary_ranks_by_the_gain_over_random_orders():
    table = _planted().deletion()
    top = table.iloc[0]
    assert top["method"] == "alti rollout" and top["gain_low"] < top["gain"] < top["gain_high"]
    assert top["gain"] == pytest.approx(0.3 - 0.115, abs=1e-6)  # random: 0.1 + mean(0, .01, .02, .03)
    attention = table.set_index("method").loc["attention"]
    assert attention["gain"] == pytest.approx(-0.115, abs=1e-6)  # a ranking that moves nothing is below random
    assert table.set_index("method").loc["random", "gain"] == 0.0
    assert list(table.columns[-3:]) == ["vs_best", "vs_best_low", "vs_best_high"]
    assert top["vs_best"] == 0.0 and np.isnan(table.set_index("method").loc["random", "vs_best"])
    assert attention["vs_best"] == pytest.approx(-0.3, abs=1e-6)  # 0 - 0.3 on every input


def test_paired_differences_subtract_the_reference_input_by_input():
    board = _planted()
    board.curves[:, SCORED.index("norm")] = 0.3 - 0.02 * np.arange(4)[:, None]  # 0.30, 0.28, 0.26, 0.24
    table = board.paired("alti rollout").set_index("method")
    assert "alti rollout" not in table.index and len(table) == len(SCORED) - 1
    norm = table.loc["norm"]
    assert norm["difference"] == pytest.approx(-0.03, abs=1e-6) and norm["low"] < -0.03 < norm["high"]
    attention = table.loc["attention"]
    assert attention["difference"] == pytest.approx(-0.3, abs=1e-6) and attention["high"] < 0
    with pytest.raises(ValueError, match="reference must be one of"):
        board.paired("random")


def test_the_mean_curves_average_the_random_orders_per_input_first():
    curves = _planted().curve_means().set_index(["method", "k"])
    assert len(curves) == (len(SCORED) + 1) * 2
    assert curves.loc[("alti rollout", 2), "distance"] == pytest.approx(0.3, abs=1e-6)
    assert curves.loc[("random", 1), "distance"] == pytest.approx(0.115, abs=1e-6)
    low, high = curves.loc[("random", 1), ["low", "high"]]
    assert low < 0.115 < high


def test_the_agreement_table_reads_the_reference_column():
    table = _planted().agreement()
    assert set(table["method"]) == set(mixing.METHODS) - {"value_zeroing"} and table["layer"].max() == 6
    assert (table.query("method == 'alti'")["spearman"] == 0.8).all()


def test_a_real_pass_scores_every_method_and_refuses_short_inputs(encoder, tmp_path):
    pytest.importorskip("captum")
    texts = ["The river flooded the old town after the storm.", "Many birds migrate south before winter arrives."]
    board = scoreboard.scoreboard(encoder, texts, depth=2, n_random=2, n_steps=4, cache_dir=tmp_path, progress=False)
    assert board.curves.shape == (2, len(SCORED) + 2, 2) and board.spearman.shape == (2, encoder.n_layers, 5, 5)
    assert (board.curves > 0).all()
    np.testing.assert_allclose(np.diagonal(board.spearman, axis1=-2, axis2=-1), 1.0, atol=1e-6)
    again = scoreboard.scoreboard(encoder, texts, depth=2, n_random=2, n_steps=4, cache_dir=tmp_path, progress=False)
    np.testing.assert_array_equal(again.curves, board.curves)  # from the cache
    with pytest.raises(ValueError, match="item 0 has 2 tokens besides"):
        scoreboard.scoreboard(encoder, ["Hi."], depth=3, cache_dir=None, progress=False)
    with pytest.raises(ValueError, match="depth must be a positive integer"):
        scoreboard.scoreboard(encoder, texts, depth=0)
