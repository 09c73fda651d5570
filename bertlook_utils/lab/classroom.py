"""Classroom mode: the sizes of the notebooks' runs, full or fast.

    BERTLOOK_FAST=1 jupyter lab          # or: make run FAST=1, make prefill FAST=1
    N_SEGMENTS = classroom.size(1000, 100)
    classroom.banner()                   # a warning in fast mode, nothing in a full run

Fast mode shrinks every sample (segments, sentences, fine-tuning sets, bootstrap resamples, seeds) so that a
notebook runs from a cold cache in about a minute on a 2-core laptop. Its numbers differ from the committed
notebooks (full runs) and from their prose, so a claim that does not hold is reported, not raised (`claims`), and
every notebook says at its top that it ran fast. Fast results are cached apart from full ones (the cache keys hold
the sizes).
"""
from __future__ import annotations

import os

from IPython.display import Markdown

FAST = os.environ.get("BERTLOOK_FAST", "").strip() not in ("", "0")
MODE = "fast" if FAST else "full"

# The fine-tuning tasks of notebooks 08-10 (one setting, so the three notebooks share the cached models):
# train / test examples per topic label, and train / test pairs of the two-class tasks.
TOPIC_SPLIT = (16, 4) if FAST else (48, 16)
PAIRS_SPLIT = (128, 64) if FAST else (576, 192)
EPOCHS = 1 if FAST else 2
MAX_LENGTH = 64  # tokens per task input


def size(full, fast):
    """`full` in a full run, `fast` in fast mode: a sample size, a number of epochs, a tuple of seeds ..."""
    return fast if FAST else full


def task_data(seed: int = 0) -> dict:
    """The three fine-tuning tasks of notebooks 08-10, name -> `tasks.TaskData`, at this mode's sizes."""
    from ..data.tasks import next_paragraph_data, sentiment_data, topic_data

    return {"topic": topic_data(*TOPIC_SPLIT, seed), "next_paragraph": next_paragraph_data(*PAIRS_SPLIT, seed),
            "sentiment": sentiment_data(*PAIRS_SPLIT, seed)}


def banner() -> Markdown | None:
    """In fast mode, the warning a notebook shows under its parameters; None (no output) in a full run."""
    if not FAST:
        return None
    return Markdown("> ⚠ **Fast mode** (`BERTLOOK_FAST=1`): every sample below is smaller than in the committed "
                    "notebook, so every number differs from it and from the prose. The prose's claims are reported "
                    "(✘ where they do not hold), not enforced. Unset `BERTLOOK_FAST` for the full run.")
