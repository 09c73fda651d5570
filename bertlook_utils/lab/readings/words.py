"""Lists of layers and heads in words, as the readings' sentences write them."""
from __future__ import annotations

from typing import Sequence


def listed(numbers: Sequence[int]) -> str:
    """(2, 4, 7) -> "2, 4, 7"; () -> ""."""
    return ", ".join(map(str, numbers))


def plural(word: str, items: Sequence) -> str:
    """`word` with an "s" when there is more than one item ("layer" for none or one)."""
    return f"{word}s" if len(items) > 1 else word


def layer_words(layers: Sequence[int]) -> str:
    """() -> "no layer", (1,) -> "layer 1", (2, 3) -> "layers 2, 3"."""
    return f"{plural('layer', layers)} {listed(layers)}" if layers else "no layer"
