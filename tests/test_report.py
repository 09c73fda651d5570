"""report: two models side by side, markdown; and the surface / entropy comparison tables it collects
(`compare.surface`, `compare.entropy`) on synthetic per-head statistics."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bertlook_utils import compare, report
from bertlook_utils.surface import ENTROPY_COLUMNS, TOKEN_COLUMNS, SurfaceResult


def synthetic_result(n_layers: int, prev_heads=(), sink: str = "cls") -> SurfaceResult:
    """Per-head tables of an n_layers x 2 model: every head puts 0.6 on `sink`, the listed heads 0.7 on the
    previous token."""
    rows = [(layer, head) for layer in range(1, n_layers + 1) for head in (1, 2)]
    tokens = pd.DataFrame(rows, columns=["layer", "head"])
    for column in TOKEN_COLUMNS:
        tokens[column] = 0.0
    tokens[sink] = 0.6
    for layer, head in prev_heads:
        tokens.loc[(tokens["layer"] == layer) & (tokens["head"] == head), "prev"] = 0.7
    entropy = pd.DataFrame(rows, columns=["layer", "head"])
    for column in ENTROPY_COLUMNS:
        entropy[column] = 1.0
    entropy["uniform"] = np.log(128)
    return SurfaceResult(tokens, entropy, [])


def test_surface_comparison_counts_previous_token_heads_and_names_the_sink():
    table = compare.surface(synthetic_result(6, prev_heads=[(2, 1), (4, 2)]))
    prev = table.set_index("quantity").loc["heads with > 50 % on the previous token", "this run"]
    assert prev == "2 (2-1, 4-2)"
    cls_row = table.set_index("quantity").loc["attention to [CLS] in the middle layers"]
    assert cls_row["this run"] == "60.0 %" and cls_row["what differs"] == "this model's sink is [CLS]"


def test_two_models_side_by_side_keep_each_models_numbers_and_notes():
    six = compare.surface(synthetic_result(6, prev_heads=[(2, 1)]))
    twelve = compare.surface(synthetic_result(12, sink="sep"))
    both = report.side_by_side({"six": six, "twelve": twelve})
    assert list(both.columns) == ["quantity", "paper", "six", "twelve", "what differs"]
    row = both.set_index("quantity").loc["heads with > 50 % on the previous token"]
    assert (row["six"], row["twelve"]) == ("1 (2-1)", "0 (none)")
    sep = both.set_index("quantity").loc["attention to [SEP] in the middle layers"]
    assert sep["six"] == "0.0 %" and sep["twelve"] == "60.0 %"
    assert sep["what differs"] == "six: layers 3-5 here, by relative depth; twelve: layers 6-10 here, by relative depth"
    assert both.set_index("quantity").loc["attention to [CLS] in the middle layers", "what differs"] == \
        "six: this model's sink is [CLS]"


def test_side_by_side_rejects_tables_of_other_quantities():
    surface = compare.surface(synthetic_result(6))
    entropy = compare.entropy(synthetic_result(6))
    with pytest.raises(ValueError, match="other quantities"):
        report.side_by_side({"a": surface, "b": entropy})
    with pytest.raises(ValueError, match="no tables"):
        report.side_by_side({})


def test_markdown_has_a_header_a_rule_and_one_line_per_row():
    text = report.markdown(pd.DataFrame({"a": [1, 2], "b": ["x", None]}))
    assert text.splitlines() == ["| a | b |", "|---|---|", "| 1 | x |", "| 2 |  |"]


def test_a_two_layer_model_gets_two_thirds_of_the_layers():
    table = compare.surface(synthetic_result(2, sink="sep"))
    sinks = table.set_index("quantity").loc["early / middle / deep layers attend most to", "this run"]
    assert sinks == "1-1: [SEP] 60.0 %; 2-2: [SEP] 60.0 %"


def test_a_long_list_of_heads_is_cut_after_twelve():
    many = [(layer, head) for layer in range(1, 8) for head in (1, 2)]  # 14 heads
    table = compare.surface(synthetic_result(7, prev_heads=many))
    prev = table.set_index("quantity").loc["heads with > 50 % on the previous token", "this run"]
    assert prev == "14 (1-1, 1-2, 2-1, 2-2, 3-1, 3-2, 4-1, 4-2, 5-1, 5-2, 6-1, 6-2, … (2 more))"
