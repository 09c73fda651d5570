"""Every figure committed in a notebook or the talk is readable where it is shown: at most `viz.WIDEST_PX` wide, and its
smallest text (recorded in the PNG by `viz.notebook_figure`) at least `viz.SMALLEST_TEXT_PX` once the book's column
shrinks it; and it says what it shows to a reader who cannot see it: an image with alt text read from the figure
(`alttext.describe`), the same text the PNG records. A planted wide figure with small text fails the same check."""
from __future__ import annotations

import io
import json
import struct
import zlib
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from bertlook_utils import viz  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")) + sorted((ROOT / "slides").glob("*.ipynb"))


def png_facts(png: bytes) -> tuple[int, dict[str, str]]:
    """A PNG's width in pixels and its text chunks (tEXt and zTXt)."""
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    width, texts, at = struct.unpack(">I", png[16:20])[0], {}, 8
    while at < len(png):
        length, kind = struct.unpack(">I4s", png[at:at + 8])
        body = png[at + 8:at + 8 + length]
        if kind == b"iTXt":  # keyword, 0, compression flag and method, language, 0, translated keyword, 0, text
            key, _, rest = body.partition(b"\0")
            text = rest[2:].split(b"\0", 2)[2]
            texts[key.decode("latin-1")] = (zlib.decompress(text) if rest[0] else text).decode("utf-8")
        elif kind == b"tEXt":
            key, _, value = body.partition(b"\0")
            texts[key.decode("latin-1")] = value.decode("latin-1")
        elif kind == b"zTXt":
            key, _, value = body.partition(b"\0")
            texts[key.decode("latin-1")] = zlib.decompress(value[1:]).decode("latin-1")
        at += 12 + length
    return width, texts


def figure_problems(png: bytes) -> list[str]:
    width, texts = png_facts(png)
    if viz.SMALLEST_TEXT_KEY not in texts:
        return [f"{width} px wide, with no record of its smallest text: not shown through viz.notebook_figure"]
    return viz.readability(width, float(texts[viz.SMALLEST_TEXT_KEY]))


def committed_figures(path: Path):
    """(cell index, PNG, alt text or None) of every figure an output of the notebook at `path` shows."""
    for index, cell in enumerate(json.loads(path.read_text())["cells"]):
        for output in cell.get("outputs", []):
            for png, alt in viz.shown_figures(output.get("data", {})):
                yield index, png, alt


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_committed_figure_is_readable_in_the_book(path):
    problems = {f"cell {index}": figure_problems(png) for index, png, _ in committed_figures(path)}
    assert not {cell: found for cell, found in problems.items() if found}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_committed_figure_says_what_it_shows(path):
    """Each figure is an image with alt text (never a bare PNG, whose alt JupyterLab and the book leave empty or set
    to a file name), the text its PNG records, and it names what it shows in words and numbers."""
    figures = list(committed_figures(path))
    assert figures
    for index, png, alt in figures:
        assert alt is not None, f"cell {index}: a bare image/png output, without alt text"
        assert alt == png_facts(png)[1].get(viz.DESCRIPTION_KEY), f"cell {index}: alt text and PNG disagree"
        assert len(alt) >= 40 and any(ch.isdigit() for ch in alt), f"cell {index}: {alt!r} says too little"


def planted(width_in: float, fontsize: float) -> bytes:
    fig, ax = plt.subplots(figsize=(width_in, 3))
    ax.plot([0, 1], [0, 1])
    ax.set_title("planted", fontsize=fontsize)
    ax.tick_params(labelsize=fontsize)
    ((png, alt),) = viz.shown_figures({"text/html": viz.notebook_figure(fig)})
    assert alt == "Planted: line chart; 0 at 0 to 1 at 1."
    plt.close(fig)
    return png


def test_a_planted_wide_figure_and_small_text_fail_and_a_fitting_one_passes():
    wide, small, fitting = planted(20, 11), planted(7, 5), planted(7, 10)
    assert png_facts(wide)[0] > viz.WIDEST_PX
    assert any("px wide" in p for p in figure_problems(wide))
    assert any("under" in p for p in figure_problems(wide))  # 11 pt shrunk to a 757 px column: about 5.8 px
    assert figure_problems(small) == [f"5 pt text is {5 * 100 / 72:.1f} px in the book's {viz.BOOK_COLUMN_PX} px "
                                      f"column, under {viz.SMALLEST_TEXT_PX}"]
    assert figure_problems(fitting) == []


def test_a_figure_without_a_record_of_its_text_fails_and_a_widget_snapshot_has_one():
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.set_title("snapshot", fontsize=5)
    fig.savefig(buffer := io.BytesIO(), format="png")
    assert "no record" in figure_problems(buffer.getvalue())[0]
    assert "5 pt text" in figure_problems(viz.figure_png(fig))[0]  # the explorers' snapshots record it
