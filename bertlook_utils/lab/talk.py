"""The slide deck's building blocks: every number on a slide carries a badge that says where it comes from.

The badge of slides/bertlook_talk.ipynb says: the paper, this run, or both side by side.

    talk.table(frame, "Clark et al. §3 vs this run", source="both")   # a compact HTML table under a badge
    talk.note("the sink is [CLS] here", source="run")                 # one line under a badge
"""
from __future__ import annotations

import zlib
from html import escape

import numpy as np
import pandas as pd
from IPython.display import HTML

from ..present.tables import styled
from ..present.viz import PALETTE

# white text on each badge at WCAG AA (4.5:1 or more): the palette's "run" blue, a dark grey for the paper's
# (the figures' light grey is too pale behind text), its wine for both
SOURCES = {"paper": ("paper", "#595959"), "run": ("this run", PALETTE["run"]),
           "both": ("paper vs this run", PALETTE["broad"])}


def badge(source: str) -> str:
    """The HTML badge of a source: "paper", "run" (this run) or "both"."""
    if source not in SOURCES:
        raise ValueError(f"source must be one of {tuple(SOURCES)}, not {source!r}")
    text, colour = SOURCES[source]
    return (f'<span style="background:{colour}; color:white; padding:0 0.4em; border-radius:0.2em">'
            f"{text}</span>")


def note(text: str, source: str = "paper") -> HTML:
    """One line on a slide (plain text, escaped), after the badge of its source."""
    return HTML(f'<p style="margin:0.3em 0">{badge(source)} {escape(text)}</p>')


def table(frame: pd.DataFrame, caption: str, source: str = "run", precision: int = 1, split: int = 1,
          nowrap: bool = False) -> HTML:
    """A compact table for a slide, under the badge of its source and a caption (escaped); `split` > 1 lays
    its rows out in that many side-by-side parts. Numbers are shown with `precision` decimals, missing ones
    as "–"; each part's HTML ids come from the caption, so a re-run writes the same page."""
    if split < 1 or split > max(1, len(frame)):
        raise ValueError(f"split must be between 1 and the number of rows ({len(frame)}), not {split}")
    tables = [styled(frame.iloc[rows], f"t{zlib.crc32(caption.encode())}{i}", precision, nowrap)
              for i, rows in enumerate(np.array_split(np.arange(len(frame)), split))]
    return HTML(f'<p style="margin:0 0 0.3em 0">{badge(source)} {escape(caption)}</p>'
                f'<div style="display:flex; gap:2.5em; align-items:flex-start">{"".join(tables)}</div>')
