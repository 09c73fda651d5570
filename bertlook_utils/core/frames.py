"""Data frames as cacheable arrays: `cache.save_result` stores dicts of plain arrays (no pickled objects), so a
frame travels as one array per column and comes back with the same columns, dtypes and text."""
from __future__ import annotations

import numpy as np
import pandas as pd


def frame_arrays(frame: pd.DataFrame, prefix: str) -> dict[str, np.ndarray]:
    """A frame's columns as arrays {"<prefix>.<column>": [rows]}; text columns as unicode arrays."""
    return {f"{prefix}.{c}": frame[c].to_numpy(dtype=None if pd.api.types.is_numeric_dtype(frame[c]) else str)
            for c in frame}


def frame_from(arrays: dict[str, np.ndarray], prefix: str) -> pd.DataFrame:
    """`frame_arrays`'s inverse: the frame stored under `prefix` (text columns back as Python strings)."""
    columns = {k.split(".", 1)[1]: v for k, v in arrays.items() if k.startswith(prefix + ".")}
    return pd.DataFrame({c: v.tolist() if v.dtype.kind == "U" else v for c, v in columns.items()})
