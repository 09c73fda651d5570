"""tools/typed_numbers: finds a size typed by hand in prose (markdown, say templates, slide notes) and leaves alone
what a placeholder renders, code, math, arithmetic and what the papers report."""
from __future__ import annotations

import json

import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from tools.typed_numbers import prose_notebooks, sizes, templates, typed_sizes


@pytest.mark.parametrize("text", ["We average over 1,000 segments.", "This model has 72 heads.",
                                  "We average, in a sentence wrapped over two lines, over 1,000\nsegments.",
                                  "Fine-tuned for 2 epochs on 576 training inputs.", "With 96 inputs per half,"])
def test_a_typed_size_is_found(text):
    assert sizes(text) == [text]


@pytest.mark.parametrize("text", ["We average over {n} segments.", "The model has `6 x 12` heads.",
                                  "Clark et al. average over 1,000 segments.", "BERT-base has 144 heads.",
                                  "it divides by n − 1 tokens", "Layer 6 mixes layer 5's vectors.",
                                  "over half of the attention", "<!-- 1,000 segments -->", "and 0 for a head",
                                  "00 tour · 04 syntax heads", "## Exercises\n1. Score the first 300 sentences.",
                                  "From 38 templates.<!-- fixed sizes: 38 templates (data/coref) -->"])
def test_what_is_rendered_code_math_arithmetic_or_the_papers_is_not(text):
    assert sizes(text) == []


def test_say_templates_are_read_but_checked_claims_are_not():
    source = ('claims.say(f"Over {n} segments and 72 heads.")\n'
              'claims.check({"at least 10 heads beat the null": count >= 10})')
    assert templates(source) == ["Over {} segments and 72 heads."]
    assert sizes(templates(source)[0]) == ["Over   segments and 72 heads."]


def test_a_planted_typed_size_in_a_notebook_is_reported_with_its_cell(tmp_path):
    notebook = new_notebook(cells=[new_markdown_cell("# A title"),
                                   new_code_cell('claims.say(f"The {n_heads} heads over {n} inputs.")'),
                                   new_markdown_cell("The numbers above average 1,000 segments.")])
    path = tmp_path / "planted.ipynb"
    path.write_text(json.dumps(notebook))
    assert typed_sizes(path) == [(2, "The numbers above average 1,000 segments.")]


@pytest.mark.parametrize("path", prose_notebooks(), ids=lambda p: p.name)
def test_no_notebook_and_not_the_talk_types_a_size(path):
    assert typed_sizes(path) == [], "render these from the run, reword them, or attribute them to the papers"
