"""tables: a result table shows as styled, escaped HTML with stable ids, and as the plain text nbval compares."""
from __future__ import annotations

import pandas as pd
import pytest

from bertlook_utils import compare, tables

FRAME = pd.DataFrame([("heads > 50 % on [CLS]", "<none>", "3-1, 3-2", "the sink is [CLS] & not [SEP]")],
                     columns=list(compare.COLUMNS))


def test_a_result_table_shows_styled_html_and_plain_text():
    shown = tables.show(FRAME, caption="Clark et al. vs <this run>")
    assert repr(shown) == "Clark et al. vs <this run>\n" + FRAME.to_string(index=False)  # what nbval compares
    html = shown._repr_html_()
    assert "&lt;none&gt;" in html and "&amp; not" in html and "vs &lt;this run&gt;" in html  # escaped
    assert "<none>" not in html and "font-weight: 600" in html and "max-width: 30em" in html
    assert html == tables.show(FRAME, caption="Clark et al. vs <this run>")._repr_html_()  # stable ids
    assert repr(tables.show(FRAME)) == FRAME.to_string(index=False)
    with pytest.raises(ValueError, match="DataFrame"):
        tables.show(FRAME.to_string())


def test_the_plain_text_shows_the_decimals_the_page_shows():
    frame = pd.DataFrame({"task": ["topic"], "accuracy": [0.6197916], "n": [96]})
    assert repr(tables.show(frame, precision=2)).split() == ["task", "accuracy", "n", "topic", "0.62", "96"]
    assert "0.620" in tables.show(frame, precision=3)._repr_html_()


def test_styled_formats_numbers_and_styles_only_the_columns_it_knows():
    frame = pd.DataFrame({"relation": ["det", "amod"], "accuracy": [94.26, None]})
    html = tables.styled(frame, "fixed", precision=1, nowrap=True)
    assert "94.3" in html and "94.26" not in html and "–" in html  # rounded; the missing number as a dash
    assert 'id="T_fixed' in html and "white-space: nowrap" in html
    assert "font-weight" not in html and "max-width" not in html  # no column of a comparison table
    assert "font-weight: 600" in tables.styled(FRAME, "fixed")  # "this run" in bold


def test_a_table_with_duplicate_column_names_shows_every_column():
    frame = pd.DataFrame([["det", 94.26, 3.0, "<b>"]], columns=["relation", "this run", "this run", "paper"])
    html = tables.show(frame, caption="twice")._repr_html_()
    assert html.count(">this run</th>") == 2 and "94.3" in html and "3.0" in html and "&lt;b&gt;" in html
    assert "td.col1 {\n  font-weight: 600;" in html and "td.col2 {\n  font-weight: 600;" in html
    assert "td.col3 {\n  color: #555;" in html


def test_compare_show_is_the_tables_show():
    """Notebooks and the student copies already handed out call compare.show."""
    assert compare.show is tables.show


PAYLOAD = "<img src=x onerror=alert(1)>"


@pytest.mark.parametrize("cell", [[PAYLOAD], (PAYLOAD,), {"quantity": PAYLOAD}, {PAYLOAD}, pd.Series([PAYLOAD])],
                         ids=["list", "tuple", "dict", "set", "series"])
def test_every_cell_and_label_is_escaped_whatever_it_holds(cell):
    """pandas escapes only string cells: a list, tuple, dict or any other object must not reach the page raw."""
    frame = pd.DataFrame({"quantity": [cell, PAYLOAD], ("label", PAYLOAD): [1.26, None]}, index=[PAYLOAD, (PAYLOAD,)])
    html = compare.show(frame, caption=PAYLOAD)._repr_html_()
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert html.count("&lt;img") == 4  # the caption, the column label and both cells; the index is not shown
    assert "1.3" in html and "1.26" not in html and "–" in html  # numbers and missing values keep their formatting
