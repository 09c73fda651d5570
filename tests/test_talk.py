"""talk: the slide helpers badge every number with its source, escape text, and lay tables out stably."""
from __future__ import annotations

import pandas as pd
import pytest

from bertlook_utils import talk


def test_every_source_has_its_badge_and_an_unknown_one_is_refused():
    assert "this run" in talk.badge("run") and "paper vs this run" in talk.badge("both")
    assert ">paper<" in talk.badge("paper")
    with pytest.raises(ValueError, match="source must be one of"):
        talk.badge("blog")


def test_a_note_escapes_its_text():
    html = talk.note("<b>1 < 2</b>", source="run").data
    assert "&lt;b&gt;1 &lt; 2&lt;/b&gt;" in html and "this run" in html


def test_a_table_is_split_in_parts_with_stable_ids():
    frame = pd.DataFrame({"quantity": ["a", "b", "c"], "value": [1.234, None, 3.0]})
    html = talk.table(frame, "caption <x>", source="both", precision=1, split=2).data
    assert html.count("<table") == 2 and "caption &lt;x&gt;" in html
    assert "1.2" in html and "–" in html  # rounded, and the missing number shown as a dash
    assert html == talk.table(frame, "caption <x>", source="both", precision=1, split=2).data  # same ids
    with pytest.raises(ValueError, match="split"):
        talk.table(frame, "c", split=4)


def test_the_slides_readme_counts_the_talks_slides():
    import re
    from pathlib import Path

    import nbformat

    ROOT = Path(__file__).resolve().parents[1]
    talk_nb = nbformat.read(ROOT / "slides" / "bertlook_talk.ipynb", 4)
    kinds = [cell.metadata.get("slideshow", {}).get("slide_type") for cell in talk_nb.cells]
    slides = kinds.count("slide") + kinds.count("subslide")
    stated = re.search(r"(\d+) slides, each with speaker notes", (ROOT / "slides" / "README.md").read_text())
    assert stated and int(stated.group(1)) == slides
    assert kinds.count("notes") == slides  # a notes cell per slide


def test_every_check_of_the_talk_is_compared_by_nbval_and_hidden_from_the_deck():
    """A talk check fails `make test` (nbval compares its ✔ lines) and shows on no slide; a talk without checks
    would guard none of its notes."""
    from pathlib import Path

    import nbformat

    talk_nb = nbformat.read(Path(__file__).resolve().parents[1] / "slides" / "bertlook_talk.ipynb", 4)
    checks = [cell for cell in talk_nb.cells if cell.cell_type == "code" and "claims.check(" in cell.source]
    assert len(checks) >= 10
    for cell in checks:
        assert "nbval-check-output" in cell.metadata["tags"], cell.source[:80]
        assert cell.metadata["slideshow"]["slide_type"] == "skip" and "remove-cell" in cell.metadata["tags"]


def contrast(a: str, b: str) -> float:
    """WCAG 2.1's contrast ratio of two colours (1 to 21)."""
    from matplotlib.colors import to_rgb

    def luminance(colour: str) -> float:
        channels = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in to_rgb(colour)]
        return 0.2126 * channels[0] + 0.7152 * channels[1] + 0.0722 * channels[2]

    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_every_badge_is_readable_white_on_its_colour():
    """WCAG AA for text: 4.5:1 (the figures' pale paper grey would give 1.9:1)."""
    assert contrast("white", "black") == pytest.approx(21) and contrast("white", "#bbbbbb") < 2
    for source, (_, colour) in talk.SOURCES.items():
        assert contrast("white", colour) >= 4.5, source
