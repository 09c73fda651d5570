"""Which components carry term matching? The share of the relevance gap that patching restores.

For a pair (`termpairs.TermPair`), relevance is the cosine between the query's embedding and a passage's (the mean
of the last layer's states, the model's own pooling). The relevant passage holds the query term twice, the base
once: the gap is relevance(relevant) − relevance(base). Patching a set of components from the relevant run into
the base run (`patching.patched_outputs`) restores

    share = (relevance(patched base) − relevance(base)) / gap,

0 when the set carries none of the difference, 1 when it carries all of it.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from ..core.models import Encoder
from ..data.termpairs import TermPair
from .patching import Component, patched_outputs

SOURCES = ("relevant", "base")  # "base": the self-patch control, which must restore nothing


@torch.inference_mode()
def _pooled(encoder: Encoder, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    return encoder.model(**inputs).last_hidden_state.mean(1)  # one unpadded input per row


@torch.inference_mode()
def restored_shares(encoder: Encoder, pairs: Sequence[TermPair], sets: Sequence[Sequence[Component]],
                    source: str = "relevant") -> tuple[np.ndarray, np.ndarray]:
    """(shares [len(pairs), len(sets)], gaps [len(pairs)]): each set patched from `source` (SOURCES) into the
    base passage, one batched pass per pair."""
    if source not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
    shares, gaps = [], []
    for pair in pairs:
        query = _pooled(encoder, encoder.pad([encoder.prepare([pair.query])]))
        base, relevant = (encoder.pad([encoder.prepare(list(words))]) for words in (pair.base, pair.relevant))
        low, high = (torch.cosine_similarity(query, _pooled(encoder, x)).item() for x in (base, relevant))
        states = patched_outputs(encoder, base, relevant if source == "relevant" else base, sets)
        patched = torch.cosine_similarity(query, states.mean(1)).double().numpy()
        gaps.append(high - low)
        shares.append((patched - low) / (high - low))
    return np.array(shares), np.array(gaps)
