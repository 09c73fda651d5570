"""The kinds of attention map: Kovaleva et al.'s five PATTERNS plus "broad", and the schemes hand labels use.

A near-uniform map is "broad" here; Kovaleva's five-way taxonomy counts it as heterogeneous (`to_pattern`).
Labels written before the broad kind existed use the five-way scheme (`label_scheme`), and predictions are
compared with them in it (`in_scheme`).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

PATTERNS = ("vertical", "diagonal", "vertical+diagonal", "block", "heterogeneous")
KINDS = PATTERNS + ("broad",)


def to_pattern(kinds) -> np.ndarray:
    """Kovaleva's five-way patterns of six-way kinds (any shape): broad -> heterogeneous."""
    kinds = np.asarray(kinds, dtype=object)
    return np.where(kinds == "broad", "heterogeneous", kinds).astype(object)


def label_scheme(labels: Sequence[str]) -> tuple[str, ...]:
    """KINDS when the labels use the broad kind, else PATTERNS (labels that count near-uniform maps as
    heterogeneous)."""
    return KINDS if "broad" in set(np.asarray(labels, dtype=object).ravel()) else PATTERNS


def in_scheme(kinds, scheme: Sequence[str]) -> np.ndarray:
    """`kinds` as the labels of `scheme` would name them (broad -> heterogeneous in the five-way scheme)."""
    return np.asarray(kinds, dtype=object) if "broad" in scheme else to_pattern(kinds)
