"""Lists of layers and heads in words, as the readings' sentences write them, and papers' findings in words."""
from __future__ import annotations

from typing import Mapping, Sequence

import pandas as pd

IN_WORDS = " (in words: not checked against the paper's tables)"


def listed(numbers: Sequence[int]) -> str:
    """(2, 4, 7) -> "2, 4, 7"; () -> ""."""
    return ", ".join(map(str, numbers))


def plural(word: str, items: Sequence) -> str:
    """`word` with an "s" when there is more than one item ("layer" for none or one)."""
    return f"{word}s" if len(items) > 1 else word


def layer_words(layers: Sequence[int]) -> str:
    """() -> "no layer", (1,) -> "layer 1", (2, 3) -> "layers 2, 3"."""
    return f"{plural('layer', layers)} {listed(layers)}" if layers else "no layer"


def findings_table(findings: Mapping[str, str], run: Mapping[str, str]) -> pd.DataFrame:
    """One row per paper of `findings` (paper -> its finding in words, a column marked IN_WORDS) beside this run's
    (paper -> what this run measured, in words): a "paper vs this run" table for papers whose numbers were not
    checked against their tables."""
    if set(run) != set(findings):
        raise ValueError(f"run must say something of every paper in findings: {sorted(findings)}, not {sorted(run)}")
    return pd.DataFrame({"paper": list(findings), "their finding" + IN_WORDS: list(findings.values()),
                         "this run": [run[p] for p in findings]})
