"""surface.token_stats / entropy_stats on synthetic heads whose statistics are known by construction.

The fixed input is builders.PAIR_TOKENS (n = 11):
    0 [CLS] | 1 the | 2 cat | 3 sat | 4 . | 5 [SEP] | 6 it | 7 ran | 8 , | 9 ! | 10 [SEP]
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from bertlook_utils import clustering
from bertlook_utils.extract import Batch
from bertlook_utils.surface import (VIG_COLUMNS as VIG, BROAD_ENTROPY, NEIGHBOURS, SMOOTHING, TokenStats, broad_heads,
                                    broad_summary, compare_neighbours, entropy_stats, token_stats, vig_best)
from builders import (PAIR_TOKENS, column_map, identity_map, make_encoded, next_map, one_hot_map, prev_map,
                      random_row_stochastic, smoothed_one_hot_entropy, stack_heads, uniform_map)

N = len(PAIR_TOKENS)
CLS, SEPS, PUNCT, BANG = 0, [5, 10], [4, 8], 9
TOKEN_COLUMNS = ["layer", "head", "self", "prev", "next", "cls", "sep", "sep_sep", "rest_sep", "punct"]
# SPEC §3 + the uniform reference; `max_weight` (mean over rows of the largest weight) was added by the package
ENTROPY_COLUMNS = ["layer", "head", "entropy", "cls_entropy", "uniform", "max_weight"]
STATS = TOKEN_COLUMNS[2:]

# Each pattern on PAIR_TOKENS and its statistics, counted by hand, with prev / next divided by the n - 1 rows
# that have such a neighbour ("pairs"); Clark's code divides by all n rows ("tokens", the default): `clark`.
PATTERNS = {
    # row i -> i-1; row 0 -> itself.
    # rows 0, 1 -> [CLS]; row 6 -> [SEP] 5; the [SEP] rows 5, 10 -> "." and "!"; rows 5, 9 -> "." and ","
    "prev": (prev_map(N), dict(self=1 / N, prev=1, next=0, cls=2 / N, sep=1 / N, sep_sep=0, rest_sep=1 / 9,
                               punct=2 / N)),
    # row i -> i+1; last row -> itself.
    # rows 4, 9 -> [SEP] and row 10 ([SEP]) -> itself; rows 3, 7 -> "." and ","; 9 non-[SEP] rows
    "next": (next_map(N), dict(self=1 / N, prev=0, next=1, cls=0, sep=3 / N, sep_sep=1 / 2, rest_sep=2 / 9,
                               punct=2 / N)),
    "self": (identity_map(N), dict(self=1, prev=0, next=0, cls=1 / N, sep=2 / N, sep_sep=1, rest_sep=0,
                                   punct=2 / N)),
    "cls": (column_map(N, [CLS]), dict(self=1 / N, prev=1 / (N - 1), next=0, cls=1, sep=0, sep_sep=0,
                                       rest_sep=0, punct=0)),
    # every row splits its mass evenly between the two [SEP]s
    "sep": (column_map(N, SEPS), dict(self=1 / N, prev=0.5 / (N - 1), next=1 / (N - 1), cls=0, sep=1,
                                      sep_sep=1, rest_sep=1, punct=0)),  # prev: row 6 -> 5; next: 4 -> 5, 9 -> 10
    "punct": (column_map(N, PUNCT), dict(self=1 / N, prev=1 / (N - 1), next=1 / (N - 1), cls=0, sep=0,
                                         sep_sep=0, rest_sep=0, punct=1)),
    "uniform": (uniform_map(N), dict(self=1 / N, prev=1 / N, next=1 / N, cls=1 / N, sep=2 / N, sep_sep=2 / N,
                                     rest_sep=2 / N, punct=2 / N)),
    # all mass on "!": punctuation, but not one of the tokens "." and ","
    "bang": (column_map(N, [BANG]), dict(self=1 / N, prev=1 / (N - 1), next=1 / (N - 1), cls=0, sep=0,
                                         sep_sep=0, rest_sep=0, punct=0)),
}


def clark(expected: dict) -> dict:
    """The same statistics with prev / next divided by n instead of n - 1 (Clark et al.'s code)."""
    return {k: v * (N - 1) / N if k in ("prev", "next") else v for k, v in expected.items()}


def expected_for(pattern: str, neighbours: str = "tokens") -> dict:
    expected = PATTERNS[pattern][1]
    return clark(expected) if neighbours == "tokens" else expected


def stats_of(frame: pd.DataFrame, layer: int, head: int) -> pd.Series:
    row = frame[(frame["layer"] == layer) & (frame["head"] == head)]
    assert len(row) == 1
    return row.iloc[0]


def assert_stats(row: pd.Series, expected: dict, atol: float = 1e-6) -> None:
    got = {k: float(row[k]) for k in expected}
    assert got == pytest.approx(expected, abs=atol)


# -- token_stats -------------------------------------------------------------------------------------
@pytest.mark.parametrize("neighbours", sorted(NEIGHBOURS))
@pytest.mark.parametrize("pattern", sorted(PATTERNS))
def test_each_pattern_scores_its_hand_computed_statistics(pattern, neighbours):
    frame = token_stats([make_encoded(PAIR_TOKENS, PATTERNS[pattern][0])], neighbours=neighbours)
    assert len(frame) == 1
    assert_stats(frame.iloc[0], expected_for(pattern, neighbours))


@pytest.mark.parametrize("pattern, column", [("prev", "prev"), ("next", "next"), ("self", "self"),
                                             ("cls", "cls"), ("sep", "sep"), ("sep", "sep_sep"),
                                             ("sep", "rest_sep"), ("punct", "punct")])
def test_a_pure_head_scores_exactly_one_on_its_own_statistic(pattern, column):
    """prev / next under the n - 1 definition; Clark's n definition is tested below."""
    frame = token_stats([make_encoded(PAIR_TOKENS, PATTERNS[pattern][0])], neighbours="pairs")
    assert frame.iloc[0][column] == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("n", [5, 11, 128])
@pytest.mark.parametrize("direction, build", [("prev", prev_map), ("next", next_map)])
def test_a_perfect_neighbour_head_scores_n_minus_1_over_n_as_clarks_code(n, direction, build):
    tokens = ["[CLS]"] + [f"w{i}" for i in range(n - 2)] + ["[SEP]"]
    encs = [make_encoded(tokens, build(n))]
    assert token_stats(encs)[direction].iloc[0] == pytest.approx((n - 1) / n, abs=1e-6)
    assert token_stats(encs, neighbours="pairs")[direction].iloc[0] == pytest.approx(1.0, abs=1e-6)


def test_the_two_definitions_are_kept_side_by_side_and_compared():
    """Head 1: previous token; head 2: next token on 3 of 4 rows with a next token (0.75 ÷ pairs, 0.6 ÷ n for
    n = 5); head 3: 0.45 ÷ n-1 on the previous token, below 0.5 under both."""
    n = 5
    tokens = ["[CLS]", "a", "b", "c", "[SEP]"]
    partial_next = one_hot_map([1, 2, 3, 3, 4])  # rows 0-2 -> next; row 3 -> itself; last row itself
    weak_prev = 0.45 * prev_map(n) + 0.55 * identity_map(n)
    reducer = TokenStats()
    reducer.update(Batch.from_encoded(make_encoded(tokens, stack_heads([[prev_map(n), partial_next, weak_prev]]))))
    both = reducer.neighbour_frame()
    assert list(both.columns) == ["layer", "head", "prev_tokens", "next_tokens", "prev_pairs", "next_pairs"]
    np.testing.assert_allclose(both["next_tokens"], [0, 3 / 5, 0], atol=1e-6)
    np.testing.assert_allclose(both["next_pairs"], [0, 3 / 4, 0], atol=1e-6)
    np.testing.assert_allclose(both["prev_tokens"], [4 / 5, 0, 0.45 * 4 / 5], atol=1e-6)
    np.testing.assert_allclose(both["prev_pairs"], [1, 0, 0.45], atol=1e-6)
    assert reducer.frame()["next"].tolist() == pytest.approx(both["next_tokens"].tolist())
    assert reducer.frame("pairs")["next"].tolist() == pytest.approx(both["next_pairs"].tolist())
    summary = compare_neighbours(both).set_index(["definition", "direction"])
    assert summary.loc[("tokens", "prev"), "over"] == 1 and summary.loc[("tokens", "prev"), "heads"] == "1-1"
    assert summary.loc[("tokens", "next"), "strongest"] == "1-2"
    assert summary.loc[("tokens", "next"), "max"] == pytest.approx(0.6, abs=1e-6)
    # a threshold between the two definitions' scores tells them apart: 0.55 < 0.6 ÷ n < 0.75 ÷ n-1 ...
    strict = compare_neighbours(both, threshold=0.7).set_index(["definition", "direction"])
    assert strict.loc[("tokens", "next"), "over"] == 0 and strict.loc[("pairs", "next"), "over"] == 1


def test_an_unknown_neighbour_definition_is_refused():
    with pytest.raises(ValueError, match="neighbours"):
        token_stats([make_encoded(PAIR_TOKENS, uniform_map(N))], neighbours="words")


def test_frame_has_the_spec_columns_and_one_indexed_layers_and_heads():
    # 2 layers x 3 heads, each head a different pattern at a known position
    layout = [["prev", "next", "self"], ["cls", "sep", "punct"]]
    attn = stack_heads([[PATTERNS[p][0] for p in layer] for layer in layout])
    frame = token_stats([make_encoded(PAIR_TOKENS, attn)])
    assert list(frame.columns) == TOKEN_COLUMNS
    assert len(frame) == 6
    assert list(zip(frame["layer"], frame["head"])) == [(1, 1), (1, 2), (1, 3), (2, 1), (2, 2), (2, 3)]
    for layer, names in enumerate(layout, start=1):
        for head, name in enumerate(names, start=1):
            assert_stats(stats_of(frame, layer, head), expected_for(name))


@pytest.mark.parametrize("weights", [(0.5, 0.5, 0.0), (0.2, 0.3, 0.5), (0.1, 0.6, 0.3)])
def test_a_mixture_of_heads_scores_the_same_convex_combination(weights):
    names = ("prev", "sep", "uniform")
    attn = sum(w * PATTERNS[name][0].astype(np.float64) for w, name in zip(weights, names))
    expected = {k: sum(w * expected_for(name)[k] for w, name in zip(weights, names)) for k in STATS}
    frame = token_stats([make_encoded(PAIR_TOKENS, attn.astype(np.float32))])
    assert_stats(frame.iloc[0], expected)


def test_the_mean_over_inputs_weighs_each_input_equally():
    """Identity heads on inputs of 11 and 5 tokens: cls = 1/n per input, so the per-input mean is
    (1/11 + 1/5) / 2, not the token-weighted 2/16."""
    short = ["[CLS]", "hi", ".", "[SEP]", "[SEP]"]
    frame = token_stats([make_encoded(PAIR_TOKENS, identity_map(N)), make_encoded(short, identity_map(5))])
    row = frame.iloc[0]
    assert row["cls"] == pytest.approx((1 / 11 + 1 / 5) / 2, abs=1e-6)
    assert row["sep"] == pytest.approx((2 / 11 + 2 / 5) / 2, abs=1e-6)
    assert row["punct"] == pytest.approx((2 / 11 + 1 / 5) / 2, abs=1e-6)
    assert row["self"] == pytest.approx(1.0, abs=1e-6)


def test_the_mean_over_inputs_is_the_mean_of_single_input_frames():
    rng = np.random.default_rng(3)
    short = ["[CLS]", "a", "b", "[SEP]", "c", ",", "[SEP]"]
    encs = [make_encoded(PAIR_TOKENS, random_row_stochastic(rng, (2, 3, N, N))),
            make_encoded(short, random_row_stochastic(rng, (2, 3, 7, 7)))]
    both = token_stats(encs)
    singles = [token_stats([e]) for e in encs]
    np.testing.assert_allclose(both[STATS].to_numpy(), (singles[0][STATS] + singles[1][STATS]).to_numpy() / 2,
                               atol=1e-6)


def test_random_maps_match_a_direct_reference_computation():
    rng = np.random.default_rng(7)
    attn = random_row_stochastic(rng, (2, 2, N, N)).astype(np.float64)
    frame = token_stats([make_encoded(PAIR_TOKENS, attn.astype(np.float32))])
    sep = np.array([t == "[SEP]" for t in PAIR_TOKENS])
    punct = np.isin(np.arange(N), PUNCT)
    for layer in range(2):
        for head in range(2):
            a = attn[layer, head]
            expected = dict(
                self=np.mean(np.diag(a)), prev=np.diag(a, -1).sum() / N, next=np.diag(a, 1).sum() / N,
                cls=a[:, 0].mean(), sep=a[:, sep].sum(1).mean(), sep_sep=a[sep][:, sep].sum(1).mean(),
                rest_sep=a[~sep][:, sep].sum(1).mean(), punct=a[:, punct].sum(1).mean())
            assert_stats(stats_of(frame, layer + 1, head + 1), expected, atol=1e-5)


def test_roberta_style_special_tokens_and_punctuation_are_detected():
    tokens = ["<s>", "\u0120the", "\u0120cat", "\u0120.", "</s>", "</s>", "\u0120it", "\u0120ran", ",", "</s>"]
    n = len(tokens)
    heads = [[column_map(n, [0]), column_map(n, [4, 5, 9]), column_map(n, [3, 8])]]
    frame = token_stats([make_encoded(tokens, stack_heads(heads), cls_token="<s>", sep_token="</s>")])
    assert stats_of(frame, 1, 1)["cls"] == pytest.approx(1.0, abs=1e-6)
    row = stats_of(frame, 1, 2)
    assert (row["sep"], row["sep_sep"], row["rest_sep"]) == pytest.approx((1.0, 1.0, 1.0), abs=1e-6)
    assert stats_of(frame, 1, 3)["punct"] == pytest.approx(1.0, abs=1e-6)
    assert stats_of(frame, 1, 3)["sep"] == pytest.approx(0.0, abs=1e-6)


# -- entropy_stats -----------------------------------------------------------------------------------
def test_entropy_frame_has_the_spec_columns():
    frame = entropy_stats([make_encoded(PAIR_TOKENS, stack_heads([[uniform_map(N)] * 2] * 3))])
    assert list(frame.columns) == ENTROPY_COLUMNS
    assert list(zip(frame["layer"], frame["head"])) == [(1, 1), (1, 2), (2, 1), (2, 2), (3, 1), (3, 2)]


def test_uniform_rows_have_entropy_log_n():
    frame = entropy_stats([make_encoded(PAIR_TOKENS, uniform_map(N))])
    row = frame.iloc[0]
    assert row["entropy"] == pytest.approx(math.log(N), abs=1e-5)
    assert row["cls_entropy"] == pytest.approx(math.log(N), abs=1e-5)
    assert row["uniform"] == pytest.approx(math.log(N), abs=1e-9)


def test_one_hot_rows_have_the_hand_computed_smoothed_entropy():
    assert SMOOTHING == 1e-4
    expected = smoothed_one_hot_entropy(N)
    assert expected == pytest.approx(0.00114620, abs=1e-8)  # a sanity anchor for the hand formula at n = 11
    frame = entropy_stats([make_encoded(PAIR_TOKENS, prev_map(N))])
    row = frame.iloc[0]
    assert row["entropy"] == pytest.approx(expected, abs=1e-6)
    assert row["cls_entropy"] == pytest.approx(expected, abs=1e-6)
    assert row["uniform"] == pytest.approx(math.log(N), abs=1e-9)


def test_cls_entropy_uses_the_cls_row():
    # [CLS] row uniform, every other row one-hot; and the reverse
    cls_broad = one_hot_map(list(range(N)))
    cls_broad[0] = 1.0 / N
    cls_sharp = uniform_map(N)
    cls_sharp[0] = 0.0
    cls_sharp[0, 3] = 1.0
    frame = entropy_stats([make_encoded(PAIR_TOKENS, stack_heads([[cls_broad, cls_sharp]]))])
    h1, hn = smoothed_one_hot_entropy(N), math.log(N)
    broad, sharp = stats_of(frame, 1, 1), stats_of(frame, 1, 2)
    assert broad["cls_entropy"] == pytest.approx(hn, abs=1e-5)
    assert broad["entropy"] == pytest.approx((hn + (N - 1) * h1) / N, abs=1e-5)
    assert sharp["cls_entropy"] == pytest.approx(h1, abs=1e-6)
    assert sharp["entropy"] == pytest.approx((h1 + (N - 1) * hn) / N, abs=1e-5)


def test_cls_entropy_finds_cls_when_it_is_not_the_first_token():
    tokens = ["a", "[CLS]", "b", "[SEP]"]
    attn = one_hot_map([0, 1, 2, 3])
    attn[1] = 0.25
    row = entropy_stats([make_encoded(tokens, attn)]).iloc[0]
    assert row["cls_entropy"] == pytest.approx(math.log(4), abs=1e-5)


def test_max_weight_is_the_mean_of_each_rows_largest_weight():
    half = column_map(N, [0, 1])  # every row 0.5 / 0.5
    mixed = uniform_map(N)
    mixed[:5] = one_hot_map([0, 1, 2, 3, 4] + [0] * (N - 5))[:5]  # 5 one-hot rows, 6 uniform rows
    frame = entropy_stats([make_encoded(PAIR_TOKENS, stack_heads([[uniform_map(N), prev_map(N), half, mixed]]))])
    assert list(frame["max_weight"]) == pytest.approx([1 / N, 1.0, 0.5, (5 + 6 / N) / N], abs=1e-6)


def test_random_entropy_matches_the_formula():
    rng = np.random.default_rng(11)
    attn = random_row_stochastic(rng, (2, 2, N, N))
    frame = entropy_stats([make_encoded(PAIR_TOKENS, attn)])
    smoothed = 0.9999 * attn.astype(np.float64) + 0.0001 / N
    rows = -(smoothed * np.log(smoothed)).sum(-1)  # [L, H, n]
    np.testing.assert_allclose(frame["entropy"], rows.mean(-1).ravel(), atol=1e-5)
    np.testing.assert_allclose(frame["cls_entropy"], rows[..., 0].ravel(), atol=1e-5)


def test_entropy_mean_over_inputs_weighs_each_input_equally():
    short = ["[CLS]", "hi", "[SEP]", "there", "[SEP]"]
    frame = entropy_stats([make_encoded(PAIR_TOKENS, uniform_map(N)), make_encoded(short, uniform_map(5))])
    row = frame.iloc[0]
    assert row["entropy"] == pytest.approx((math.log(11) + math.log(5)) / 2, abs=1e-5)
    assert row["uniform"] == pytest.approx((math.log(11) + math.log(5)) / 2, abs=1e-9)


# -- bad input ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("stats", [token_stats, entropy_stats], ids=["token_stats", "entropy_stats"])
class TestBadAttention:
    def test_nan_is_rejected(self, stats):
        attn = uniform_map(N)
        attn[3, 3] = np.nan
        with pytest.raises(ValueError, match="NaN"):
            stats([make_encoded(PAIR_TOKENS, attn)])

    def test_rows_not_summing_to_one_are_rejected(self, stats):
        with pytest.raises(ValueError, match="sum to 1"):
            stats([make_encoded(PAIR_TOKENS, uniform_map(N) * 0.5)])

    def test_scores_instead_of_probabilities_are_rejected(self, stats):
        scores = np.random.default_rng(0).normal(size=(N, N)).astype(np.float32)
        with pytest.raises(ValueError):
            stats([make_encoded(PAIR_TOKENS, scores)])

    def test_map_size_must_match_the_tokens(self, stats):
        with pytest.raises(ValueError, match="tokens"):
            stats([make_encoded(PAIR_TOKENS, uniform_map(N - 1))])

    def test_three_dimensional_attention_is_rejected(self, stats):
        enc = make_encoded(PAIR_TOKENS, uniform_map(N))
        enc.attn = enc.attn[0]
        with pytest.raises(ValueError):
            stats([enc])

    def test_no_inputs_is_an_error(self, stats):
        with pytest.raises(ValueError):
            stats([])


def test_entropy_needs_a_cls_token():
    with pytest.raises(ValueError, match="CLS"):
        entropy_stats([make_encoded(["a", "b", "[SEP]"], uniform_map(3))])


# -- the two definitions of a broad head --------------------------------------------------------------
def test_broad_heads_by_max_weight_and_by_entropy():
    """On n = 11 tokens: uniform (ln 11 = 2.40 nats, largest weight 1/11) is broad by max weight only with
    the 3.8 threshold; a row with 0.3 on [CLS] and the rest spread is broad by neither; a one-hot head by neither.
    With a threshold of 2 nats the uniform head is broad by both."""
    half = 0.3 * column_map(N, [CLS]) + 0.7 * uniform_map(N)
    frame = entropy_stats([make_encoded(PAIR_TOKENS, stack_heads([[uniform_map(N), half, identity_map(N)]]))])
    broad = broad_heads(frame)
    assert broad["by_max_weight"].tolist() == [True, False, False]
    assert broad["by_entropy"].tolist() == [False, False, False]
    loose = broad_heads(frame, entropy_above=2.0)
    assert loose["by_entropy"].tolist() == [True, True, False]
    summary = broad_summary(loose).set_index("group")
    assert summary.loc["both", "n"] == 1 and summary.loc["both", "heads"] == "1-1"
    assert summary.loc["entropy only", "heads"] == "1-2"
    assert summary.loc["max weight only", "n"] == 0
    assert summary.loc["both", "entropy"] == pytest.approx(math.log(N), abs=1e-3)


def test_max_weight_at_most_a_tenth_implies_entropy_at_least_ln_10():
    rng = np.random.default_rng(5)
    n = 40
    tokens = ["[CLS]"] + [f"w{i}" for i in range(n - 2)] + ["[SEP]"]
    logits = rng.normal(scale=0.8, size=(6, 4, n, n))
    attn = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    broad = broad_heads(entropy_stats([make_encoded(tokens, attn.astype(np.float32))]), max_weight=1.0)
    assert (broad["entropy"] >= -np.log(broad["max_weight"]) - 1e-3).all()


def test_the_entropy_threshold_is_the_one_clustering_labels_broad_heads_with():
    assert BROAD_ENTROPY == clustering.BROAD_ENTROPY


# -- Vig's patterns, chosen on one set and scored on another --------------------------------------------
def test_vig_best_scores_the_chosen_head_on_other_inputs():
    chosen_on = pd.DataFrame({"layer": [1, 1, 2], "head": [1, 2, 1], **{c: [0.1, 0.2, 0.3] for c in VIG},
                              "next": [0.9, 0.1, 0.2]})
    scored_on = chosen_on.assign(next=[0.4, 0.8, 0.1], prev=[0.0, 0.0, 0.05])
    best = vig_best(chosen_on, scored_on).set_index("pattern")
    assert best.loc["next", "label"] == "1-1"
    assert best.loc["next", ["chosen", "held_out"]].tolist() == pytest.approx([0.9, 0.4])
    assert best.loc["prev", "label"] == "2-1" and best.loc["prev", "held_out"] == pytest.approx(0.05)
    assert np.isnan(vig_best(chosen_on)["held_out"]).all()


# -- the comparison tables fed by these statistics -------------------------------------------------------
def test_entropy_table_compares_both_broad_definitions_cls_and_the_profile():
    """Layers 1 and 3 broad (entropy 4.5), layer 2 focused; head 1-1 also has a small largest weight. [CLS]
    rows: 1 nat below the mean in layer 2, equal elsewhere."""
    from bertlook_utils import compare
    from bertlook_utils.surface import SurfaceResult

    entropy = pd.DataFrame({"layer": [1, 1, 2, 2, 3, 3], "head": [1, 2] * 3,
                            "entropy": [4.5, 4.5, 2.0, 2.0, 4.5, 4.5], "cls_entropy": [4.5, 4.5, 1.0, 1.0, 4.5, 4.5],
                            "uniform": math.log(128), "max_weight": [0.05, 0.2, 0.6, 0.6, 0.2, 0.2]})
    table = compare.entropy(SurfaceResult(pd.DataFrame(), entropy, [])).set_index("quantity")
    assert table.loc["broad heads (≤ 10 % on any one token)", "this run"] == "1 (1-1)"
    by_entropy = table.loc["broad heads by entropy > 3.8 nats (notebook 07's label)"]
    assert by_entropy["this run"] == "4, 1 of them also ≤ 10 %"
    assert by_entropy["what differs"] == "entropy only: 1-2, 3-1, 3-2"
    assert table.loc["[CLS] entropy minus the layer's mean entropy (nats)", "this run"] == "+0.00 / -1.00 / +0.00"
    assert table.loc["mean head entropy by layer (nats)", "what differs"].endswith("U-shaped: the first and last "
                                                                               "layers above every layer between")


def test_surface_table_names_the_definition_and_what_the_other_gives():
    from bertlook_utils import compare

    n = 5
    tokens = ["[CLS]", "a", "b", "c", "[SEP]"]
    partial_next = one_hot_map([1, 2, 3, 3, 4])  # 0.6 ÷ n, 0.75 ÷ n-1: above 0.5 under both
    barely = 0.55 * prev_map(n) + 0.45 * identity_map(n)  # prev 0.44 ÷ n, 0.55 ÷ n-1: only the n-1 count has it
    reducer = TokenStats()
    reducer.update(Batch.from_encoded(make_encoded(tokens, stack_heads([[partial_next, barely]] * 3))))
    entropy = entropy_stats([make_encoded(tokens, stack_heads([[partial_next, barely]] * 3))])
    from bertlook_utils.surface import SurfaceResult
    result = SurfaceResult(reducer.frame(), entropy, [], reducer.neighbour_frame())
    table = compare.surface(result).set_index("quantity")
    prev = table.loc["heads with > 50 % on the previous token"]
    assert prev["this run"] == "0 (none)"
    assert prev["what differs"] == "÷ n as Clark's code; ÷ n-1: 3 (1-2, 2-2, 3-2)"
    pairs = SurfaceResult(reducer.frame("pairs"), entropy, [], reducer.neighbour_frame(), "pairs")
    prev = compare.surface(pairs).set_index("quantity").loc["heads with > 50 % on the previous token"]
    assert prev["this run"] == "3 (1-2, 2-2, 3-2)" and prev["what differs"].endswith("÷ n: 0 (none)")
