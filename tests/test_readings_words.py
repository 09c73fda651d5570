"""Lists of layers in words (readings.words), shared by the notebooks' readings."""
from __future__ import annotations

import pytest

from bertlook_utils.lab.readings import nb01, nb02, nb03, words


def test_layers_in_words_distinguish_none_one_and_several():
    assert words.layer_words(()) == "no layer"
    assert words.layer_words((1,)) == "layer 1"
    assert words.layer_words((2, 3, 6)) == "layers 2, 3, 6"
    assert words.listed((2, 4, 7)) == "2, 4, 7" and words.listed([1]) == "1" and words.listed(()) == ""
    assert [words.plural("layer", items) for items in ((), (6,), (5, 6))] == ["layer", "layer", "layers"]


def test_the_notebooks_write_lists_with_the_one_helper():
    assert nb01.listed is nb02.listed is nb03.listed is words.listed
    assert nb02.layer_words is words.layer_words


def test_the_findings_table_marks_the_papers_findings_as_words_beside_this_run():
    findings = {"A 2019": "heads do x", "B 2020": "heads do y"}
    table = words.findings_table(findings, {"B 2020": "y here", "A 2019": "x here"})
    assert list(table.columns) == ["paper", "their finding" + words.IN_WORDS, "this run"]
    assert table.values.tolist() == [["A 2019", "heads do x", "x here"], ["B 2020", "heads do y", "y here"]]
    with pytest.raises(ValueError, match="run must say something of every paper"):
        words.findings_table({"A 2019": "x"}, {"B 2020": "y"})
