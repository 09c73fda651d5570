"""Result tables on display: styled HTML in Jupyter and exported pages, plain text where nbval compares.

    show(frame, "Clark et al. §3 vs this run")   # any DataFrame: the notebooks' result tables
    styled(frame, uid)                            # the HTML alone, also the slides' tables (`talk.table`)

No index, left-aligned, every cell and label HTML-escaped whatever it holds; the columns of a "paper vs this run"
table (`compare.table`) get their own look: "paper" in grey, "this run" in bold, "what differs" small and wrapped.
"""
from __future__ import annotations

import zlib
from html import escape

import pandas as pd
from pandas.api.types import is_complex, is_float, is_integer, is_scalar

COLUMN_STYLES = {"paper": {"color": "#555"}, "this run": {"font-weight": "600"},
                 "what differs": {"font-size": "0.85em", "color": "#444", "min-width": "16em", "max-width": "30em"}}


def _as_text(value):
    """A cell or label as the table shows it: a string, a number or a missing value as it is (the table formats
    and escapes it), anything else (a list, a dict, an object) as its str(), so that it is escaped too (pandas
    escapes only strings; the rest would reach the page raw)."""
    if isinstance(value, str) or is_float(value) or is_integer(value) or is_complex(value):
        return value
    return value if is_scalar(value) and pd.isna(value) else str(value)


def styled(frame: pd.DataFrame, uid: str, precision: int = 1, nowrap: bool = False) -> str:
    """The HTML of a result table (pandas Styler): no index, left-aligned, every cell and header HTML-escaped
    whatever it holds, numbers with `precision` decimals and missing ones as "–"; "paper" in grey, "this run" in
    bold, "what differs" small and wrapped (by column position: two columns may share a name). `uid` fixes the HTML
    ids, so that a re-run writes the same page."""
    shown = frame.map(_as_text).rename(index=_as_text, columns=_as_text)
    by_column = [{"selector": f"td.col{j}", "props": list(COLUMN_STYLES[column].items())}
                 for j, column in enumerate(frame.columns) if column in COLUMN_STYLES]
    styler = (shown.style.set_uuid(uid).hide(axis="index")
              .format(precision=precision, na_rep="–", escape="html")
              .format_index(escape="html", axis=0).format_index(escape="html", axis=1)
              .set_table_styles([{"selector": "th, td",
                                  "props": "text-align: left; vertical-align: top; padding: 0.2em 0.6em;"
                                           + (" white-space: nowrap;" if nowrap else "")},
                                 {"selector": "thead th", "props": "border-bottom: 1px solid #999;"}, *by_column]))
    return styler.to_html()


class Shown:
    """A result table on display: styled HTML in Jupyter and exported pages, its plain text (`repr`, what nbval
    compares) anywhere else; numbers with `precision` decimals in both (a checked table holds no digit the page
    does not show)."""

    def __init__(self, frame: pd.DataFrame, caption: str = "", precision: int = 1):
        self.frame, self.caption, self.precision = frame, caption, precision

    def _repr_html_(self) -> str:
        uid = f"t{zlib.crc32((self.caption + self.frame.to_string()).encode())}"
        caption = f"<p style=\"margin: 0.2em 0\"><b>{escape(self.caption)}</b></p>" if self.caption else ""
        return caption + styled(self.frame, uid, self.precision)

    def __repr__(self) -> str:
        text = self.frame.to_string(index=False, float_format=lambda x: f"{x:.{self.precision}f}")
        return f"{self.caption}\n{text}" if self.caption else text


def show(frame: pd.DataFrame, caption: str = "", precision: int = 1) -> Shown:
    """Display a result table (e.g. `compare.table1(...)`) as styled HTML with a plain-text form."""
    if not isinstance(frame, pd.DataFrame):
        raise ValueError(f"show takes a DataFrame, not {type(frame).__name__}")
    return Shown(frame, caption, precision)
