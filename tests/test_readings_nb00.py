"""readings.nb00 (notebook 00's prose) on a stand-in encoder and on synthetic maps whose answers are known by
construction. The input is builders.PAIR_TOKENS (n = 11):
    0 [CLS] | 1 the | 2 cat | 3 sat | 4 . | 5 [SEP] | 6 it | 7 ran | 8 , | 9 ! | 10 [SEP]
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from bertlook_utils import surface, wordlevel
from bertlook_utils.models import Encoded
from bertlook_utils.readings import nb00
from builders import PAIR_TOKENS, column_map, make_encoded, next_map, prev_map, stack_heads, uniform_map

N = len(PAIR_TOKENS)


class Vocabulary:
    """A tokenizer stand-in: its length and, if given, its casing."""

    def __init__(self, size: int, **casing):
        self.size = size
        self.__dict__.update(casing)

    def __len__(self) -> int:
        return self.size


def stand_in(tokenizer) -> SimpleNamespace:
    """An encoder of 2 layers x 4 heads, hidden size 32."""
    return SimpleNamespace(name="tiny", n_layers=2, n_heads=4, tokenizer=tokenizer,
                           model=SimpleNamespace(config=SimpleNamespace(hidden_size=32)))


# -- the model card -----------------------------------------------------------------------------------
def test_model_card_reads_the_geometry_and_the_vocabulary():
    card = nb00.model_card(stand_in(Vocabulary(120, do_lower_case=True)), None)
    assert (card.name, card.n_layers, card.n_heads, card.hidden_size) == ("tiny", 2, 4, 32)
    assert (card.vocab_size, card.casing, card.maps_per_input) == (120, "uncased", 8)
    assert card.training == nb00.DEFAULT_TRAINING


@pytest.mark.parametrize("casing, expected", [({"do_lower_case": False}, "cased"), ({}, "casing unknown")])
def test_model_card_says_cased_or_unknown(casing, expected):
    assert nb00.model_card(stand_in(Vocabulary(5, **casing)), None).casing == expected


def test_another_model_points_to_its_own_card():
    assert nb00.model_card(stand_in(Vocabulary(5)), "/models/other").training == "see its model card"


# -- the habit heads ----------------------------------------------------------------------------------
def habit_input() -> Encoded:
    """Layer 1: uniform, previous token, next token; layer 2: uniform, all on [CLS], uniform."""
    u = uniform_map(N)
    return make_encoded(PAIR_TOKENS, stack_heads([[u, prev_map(N), next_map(N)], [u, column_map(N, [0]), u]]))


def test_strongest_head_finds_each_habit_and_its_share():
    by_head = surface.token_stats([habit_input()])
    prev, nxt, cls = (nb00.strongest_head(by_head, habit) for habit in ("prev", "next", "cls"))
    # Clark's `prev` divides by all n rows; row 0 has no previous token, so a perfect head scores (n - 1) / n
    assert (prev.layer, prev.head, prev.label) == (1, 2, "1-2") and prev.share == pytest.approx((N - 1) / N)
    assert (nxt.layer, nxt.head, nxt.label) == (1, 3, "1-3") and nxt.share == pytest.approx((N - 1) / N)
    assert (cls.layer, cls.head, cls.label) == (2, 2, "2-2") and cls.share == pytest.approx(1)


def test_a_tie_goes_to_the_first_head():
    u = uniform_map(N)
    by_head = surface.token_stats([make_encoded(PAIR_TOKENS, stack_heads([[u, u], [u, u]]))])
    assert nb00.strongest_head(by_head, "cls").label == "1-1"


# -- the takeaways ------------------------------------------------------------------------------------
def split_input(attn: np.ndarray) -> Encoded:
    """[CLS] un ##bel ##ievably . [SEP]: 6 tokens, 4 words."""
    tokens = ["[CLS]", "un", "##bel", "##ievably", ".", "[SEP]"]
    return Encoded(tokens, [0, 1, 1, 1, 2, 3], ["[CLS]", "unbelievably", ".", "[SEP]"], [0] * 6, attn)


def test_takeaways_count_the_maps_and_the_words():
    example = habit_input()
    by_head = surface.token_stats([example])
    habits = [nb00.strongest_head(by_head, habit) for habit in ("prev", "next", "cls")]
    split = split_input(stack_heads([[uniform_map(6), prev_map(6)]]))
    words = wordlevel.to_word_level(split.attn, split.word_ids, from_mode="mean")
    tour = nb00.takeaways(example, habits, split, words)
    assert (tour.n_tokens, tour.n_layers, tour.n_heads, tour.n_maps) == (N, 2, 3, 6)
    assert tour.rows_sum_to_one and tour.word_rows_sum_to_one
    assert tour.weakest_habit == pytest.approx((N - 1) / N)  # the positional heads, below the [CLS] head's 1
    assert (tour.split_tokens, tour.split_words) == (6, 4)


def test_takeaways_notice_rows_that_do_not_sum_to_one():
    leaky = uniform_map(N)
    leaky[3] *= 0.5  # one row holds half the mass
    example = make_encoded(PAIR_TOKENS, leaky)
    split = split_input(stack_heads([[uniform_map(6)]]))
    words = np.full((1, 1, 4, 4), 0.2)  # rows sum to 0.8
    tour = nb00.takeaways(example, [], split, words)
    assert not tour.rows_sum_to_one and not tour.word_rows_sum_to_one
    assert math.isnan(tour.weakest_habit)  # no habit heads given


def test_rows_sum_to_one_allows_float32_rounding_only():
    row = np.full((1, 4), 0.25, dtype=np.float32)
    assert nb00.rows_sum_to_one(row)
    assert not nb00.rows_sum_to_one(row + 1e-4)
